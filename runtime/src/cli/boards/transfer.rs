//! `kanban boards export SLUG FILE.tar.gz [--with-logs]` and `kanban boards import FILE [--as
//! SLUG] [--url URL]`: parse, call [`crate::home::transfer`], print. Exit 1 for bad input (a
//! board that does not exist or already does, an output file that exists, a corrupt, truncated,
//! unsafe or unknown archive), 3 for a PostgreSQL database that is not empty.

use std::path::Path;

use crate::cli::session::{fence, now, print_out};
use crate::cli::{CmdResult, Globals, Refused};
use crate::db::target::{PgTarget, UrlSource};
use crate::home as paths;
use crate::home::transfer::{self, ArchiveError, ImportTarget};

fn surfaced(err: ArchiveError) -> anyhow::Error {
    if err.is_refusal() {
        return Refused(crate::error_chain(&err)).into();
    }
    err.into()
}

/// `kanban boards export SLUG FILE`.
pub(super) fn export(
    root: &Path,
    slug: &str,
    file: &Path,
    with_logs: bool,
    globals: &Globals,
) -> CmdResult {
    paths::validate_slug(slug)?;
    let location = paths::locate(root, slug)?;
    if !location.exists() {
        return Err(crate::home::HomeError::BoardNotFound {
            slug: slug.to_owned(),
            path: location.db_path,
        }
        .into());
    }
    let done = transfer::export(root, &location, file, with_logs, now()).map_err(surfaced)?;
    print_out(globals.json, &done, || {
        let mut text = format!(
            "exported board {slug} to {} ({} tasks, {} attachments, {} logs, {} bytes)",
            done.file.display(),
            done.rows.get("tasks").copied().unwrap_or(0),
            done.attachments,
            done.logs,
            done.bytes
        );
        for path in &done.missing_attachments {
            text.push_str(&format!(
                "\nwarning: attachment file {path} is missing; its row is exported without it"
            ));
        }
        text
    })
}

/// `kanban boards import FILE [--as SLUG] [--url URL]`.
pub(super) fn import(
    root: &Path,
    file: &Path,
    as_slug: Option<&str>,
    url: Option<&str>,
    globals: &Globals,
) -> CmdResult {
    fence()?;
    let target = match url {
        Some(url) => {
            let target = PgTarget::parse(url, UrlSource::Argument("--url"))?;
            if target.has_password() {
                return Err(crate::home::HomeError::PasswordOnCommandLine.into());
            }
            ImportTarget::Url(Box::new(target))
        }
        None => ImportTarget::Home,
    };
    let done = transfer::import(root, file, as_slug, target).map_err(surfaced)?;
    print_out(globals.json, &done, || {
        format!(
            "imported board {} (exported as {}) into {} {} ({} tasks, {} attachments, {} logs)",
            done.slug,
            done.from_slug,
            done.store,
            done.location,
            done.rows.get("tasks").copied().unwrap_or(0),
            done.attachments,
            done.logs
        )
    })
}
