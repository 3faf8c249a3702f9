//! `kanban boards create SLUG --url URL` and `kanban boards migrate SLUG --to URL`: the two
//! commands that put a board in PostgreSQL (the README's "A board on PostgreSQL"). Parse, call
//! [`crate::db::target`] / [`crate::home::migrate`], print; every URL printed is redacted.
//!
//! Exit codes: 1 for bad input (a bad URL, a URL with a password, an unreachable server, a wrong
//! password, a board that exists or is already in PostgreSQL), 3 for a refusal of the board's or
//! the target's state (a running task, a dispatcher ticking the board, a non-empty target).

use std::path::Path;

use serde::Serialize;

use super::board::{fence, now, print_out};
use super::{CmdResult, Globals, Refused};
use crate::board::engine::postgres::store as pg_store;
use crate::db::target::{PgTarget, UrlSource};
use crate::dispatch::lock::{TickLock, lock_path};
use crate::home as paths;
use crate::home::HomeError as LocationError;
use crate::home::migrate::{self, MigrateError};

/// The URL of `option`, parsed; refused when it carries a password (see `crate::db::target`).
fn target_of(url: &str, option: &'static str) -> anyhow::Result<PgTarget> {
    let target = PgTarget::parse(url, UrlSource::Argument(option))?;
    if target.has_password() {
        return Err(LocationError::PasswordOnCommandLine.into());
    }
    Ok(target)
}

/// `kanban boards create SLUG --url URL`: brings the database to the board schema (an empty
/// database gets it; a database that already holds a kanban board is joined, which is how a
/// second host shares a board), then records the URL in the board folder.
pub(super) fn create(
    root: &Path,
    slug: &str,
    url: &str,
    globals: &crate::cli::Globals,
) -> CmdResult {
    fence()?;
    paths::validate_new_slug(slug)?;
    let target = target_of(url, "--url")?;
    let existing = paths::locate(root, slug)?;
    if existing.exists() {
        return Err(LocationError::BoardExists {
            slug: slug.to_owned(),
            path: match existing.postgres().map(PgTarget::source) {
                Some(UrlSource::Config(path) | UrlSource::File(path)) => path.clone(),
                Some(_) => paths::url_file(root, slug),
                None => existing.db_path,
            },
        }
        .into());
    }
    bring_up(slug, &target, globals, Some(root))
}

/// `kanban boards create SLUG` of a board whose URL `[boards.SLUG] url` in kanban.toml names:
/// the same as `--url` with that URL (its password, if it has one, included), but nothing is
/// recorded (the configuration is the record).
pub(super) fn create_configured(slug: &str, target: &PgTarget, globals: &Globals) -> CmdResult {
    fence()?;
    paths::validate_new_slug(slug)?;
    bring_up(slug, target, globals, None)
}

/// Creates the board schema in `target`'s database or joins the board it holds, then (with
/// `record_in`, a root) records the URL in the board folder; prints the outcome.
fn bring_up(
    slug: &str,
    target: &PgTarget,
    globals: &Globals,
    record_in: Option<&Path>,
) -> CmdResult {
    let redacted = target.redacted();
    let config = target
        .connect_config()
        .map_err(|e| anyhow::Error::new(e).context(format!("cannot connect to {redacted}")))?;
    let mut client = kanban_pgwire::Client::connect(&config)
        .map_err(|e| anyhow::Error::new(e).context(format!("cannot connect to {redacted}")))?;
    let found = pg_store::migrate_once(&mut client).map_err(|e| {
        anyhow::Error::new(e).context(format!(
            "cannot create the board schema in {redacted}; nothing was recorded"
        ))
    })?;
    let file = match record_in {
        Some(root) => Some(paths::write_url_file(root, slug, target)?),
        None => None,
    };
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
            url_file: file.as_deref(),
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

/// `kanban boards migrate SLUG --to URL` (see [`crate::home::migrate`]).
pub(super) fn migrate(root: &Path, slug: &str, to: &str, globals: &Globals) -> CmdResult {
    fence()?;
    paths::validate_slug(slug)?;
    let target = target_of(to, "--to")?;
    let board = paths::locate(root, slug)?;
    if let Some(current) = board.postgres() {
        return Err(MigrateError::AlreadyPostgres {
            slug: slug.to_owned(),
            url: current.redacted(),
        }
        .into());
    }
    if !board.db_path.is_file() {
        return Err(MigrateError::NotFound {
            slug: slug.to_owned(),
            path: board.db_path,
        }
        .into());
    }
    // Held for the whole copy: no dispatcher ticks the board meanwhile.
    let Some(_lock) = TickLock::try_acquire(&board.db_path)? else {
        return Err(Refused(
            MigrateError::DispatchLocked {
                slug: slug.to_owned(),
                lock: lock_path(&board.db_path),
            }
            .to_string(),
        )
        .into());
    };
    let done = match migrate::to_postgres(root, &board, &target, now()) {
        Ok(done) => done,
        Err(e) if e.is_refusal() => return Err(Refused(crate::error_chain(&e)).into()),
        Err(e) => return Err(e.into()),
    };
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
