//! `kanban boards create SLUG --url URL` and `kanban boards migrate SLUG --to URL`: the two
//! commands that put a board in PostgreSQL (the README's "A board on PostgreSQL"). Parse the URL,
//! call [`crate::home::migrate_plan`], print; every URL printed is redacted.
//!
//! Exit codes: 1 for bad input (a bad URL, a URL with a password, an unreachable server, a wrong
//! password, a board that exists or is already in PostgreSQL), 3 for a refusal of the board's or
//! the target's state (a running task, a dispatcher ticking the board, a non-empty target).

use std::path::Path;

use serde::Serialize;

use crate::cli::session::{fence, now, print_out};
use crate::cli::{CmdResult, Globals, Refused};
use crate::db::target::{PgTarget, UrlSource};
use crate::home::migrate_plan::{self, PgCreated, PlanError};
use crate::home::{self as paths, HomeError};

/// The URL of `option`, parsed; refused when it carries a password (see `crate::db::target`).
fn target_of(url: &str, option: &'static str) -> anyhow::Result<PgTarget> {
    let target = PgTarget::parse(url, UrlSource::Argument(option))?;
    if target.has_password() {
        return Err(HomeError::PasswordOnCommandLine.into());
    }
    Ok(target)
}

/// `err` as the command reports it: a refusal is exit 3; a wrapped library error is itself, so
/// the causes the error report looks for (a full disk, a damaged board) are found in its chain.
fn surfaced(err: PlanError) -> anyhow::Error {
    if err.is_refusal() {
        return Refused(crate::error_chain(&err)).into();
    }
    match err {
        PlanError::Board(e) => e.into(),
        PlanError::Migrate(e) => e.into(),
        PlanError::Lock(e) => e.into(),
        PlanError::Home(e) => e.into(),
        PlanError::BringUp(e) => e.into(),
    }
}

/// `kanban boards create SLUG --url URL`: brings the database to the board schema (an empty
/// database gets it; a database that already holds a kanban board is joined, which is how a
/// second host shares a board), then records the URL in the board folder.
pub(in crate::cli) fn create(root: &Path, slug: &str, url: &str, globals: &Globals) -> CmdResult {
    fence()?;
    paths::validate_new_slug(slug)?;
    let target = target_of(url, "--url")?;
    let made = migrate_plan::create_in_postgres(root, slug, &target).map_err(surfaced)?;
    print_made(slug, &target, &made, globals)
}

/// `kanban boards create SLUG` of a board whose URL `[boards.SLUG] url` in kanban.toml names:
/// the same as `--url` with that URL (its password, if it has one, included), but nothing is
/// recorded (the configuration is the record).
pub(in crate::cli) fn create_configured(
    slug: &str,
    target: &PgTarget,
    globals: &Globals,
) -> CmdResult {
    fence()?;
    let made = migrate_plan::create_configured(slug, target).map_err(surfaced)?;
    print_made(slug, target, &made, globals)
}

fn print_made(slug: &str, target: &PgTarget, made: &PgCreated, globals: &Globals) -> CmdResult {
    let redacted = target.redacted();
    let found = made.joined_version;
    #[derive(Serialize)]
    struct Made<'a> {
        slug: &'a str,
        store: &'static str,
        url: &'a str,
        /// The file the URL was recorded in (null for a board configured in kanban.toml).
        url_file: Option<&'a Path>,
        /// The schema version the database had (0: it was empty).
        joined_version: i64,
    }
    print_out(
        globals.json,
        &Made {
            slug,
            store: "postgres",
            url: &redacted,
            url_file: made.url_file.as_deref(),
            joined_version: found,
        },
        || {
            if found == 0 {
                format!("created board {slug} in PostgreSQL at {redacted}")
            } else {
                format!("board {slug} now uses the existing kanban board at {redacted}")
            }
        },
    )
}

/// `kanban boards migrate SLUG --to URL` (see [`migrate_plan::migrate_board`]).
pub(in crate::cli) fn migrate(root: &Path, slug: &str, to: &str, globals: &Globals) -> CmdResult {
    fence()?;
    paths::validate_slug(slug)?;
    let target = target_of(to, "--to")?;
    let done = migrate_plan::migrate_board(root, slug, &target, now()).map_err(surfaced)?;
    print_out(globals.json, &done, || {
        let rows: Vec<String> = done
            .rows
            .iter()
            .map(|(table, n)| format!("{n} {table}"))
            .collect();
        format!(
            "migrated board {slug} to {} ({}) in {} ms; the SQLite file is kept as {}",
            done.url,
            rows.join(", "),
            done.copy_ms,
            done.kept.display()
        )
    })
}
