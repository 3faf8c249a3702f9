//! `kanban boards set-policy SLUG`: sets or clears the board's `pre_claim` policy
//! ([`crate::home::policy`]; the dispatcher asks it, [`crate::dispatch::policy`]).

use std::path::Path;

use serde::Serialize;

use crate::cli::session::{fence, print_out};
use crate::cli::{CmdResult, Globals};
use crate::home as paths;
use crate::home::policy::{self, PreClaim};

/// `kanban boards set-policy` (its arguments are in [`super::BoardsCommand::SetPolicy`]).
pub(super) fn set_policy(
    root: &Path,
    slug: &str,
    command: Vec<String>,
    timeout_seconds: f64,
    globals: &Globals,
) -> CmdResult {
    fence()?;
    if !paths::locate(root, slug)?.exists() {
        return Err(crate::home::HomeError::BoardNotFound {
            slug: slug.to_owned(),
            path: paths::db_path(root, slug),
        }
        .into());
    }
    let set = if command.is_empty() {
        None
    } else {
        let value = serde_json::json!({"command": command, "timeout_seconds": timeout_seconds});
        Some(policy::validate(&value).map_err(|why| anyhow::anyhow!("{why}; nothing changed"))?)
    };
    policy::set(root, slug, set.as_ref())?;
    #[derive(Serialize)]
    struct Set<'a> {
        slug: &'a str,
        pre_claim: Option<&'a PreClaim>,
    }
    print_out(
        globals.json,
        &Set {
            slug,
            pre_claim: set.as_ref(),
        },
        || match &set {
            Some(p) => format!(
                "pre_claim policy of {slug}: {} (timeout {} s)",
                crate::cli::escape::line(&p.command.join(" ")),
                p.timeout_seconds
            ),
            None => format!("pre_claim policy of {slug}: none"),
        },
    )
}
