//! What every command file of the CLI shares, and the one file they all import (it imports none
//! of them, so no two command files depend on each other): opening the resolved board
//! ([`open`], [`open_read`]), the clock ([`now`]), the fence and ownership checks ([`fence`],
//! [`authorize`], [`lifecycle`]), a transition's refusal as exit 3 ([`done`]), printing
//! ([`print_out`]), several ids in one command ([`each`]), an id prefix ([`resolve_id`]), a body
//! from a file or standard input ([`read_body`]).

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::escape::line;
use super::{CmdResult, Exit, Globals, Refused, print_json};
use crate::board::StorageError;
use crate::board::{Board, BoardError, OpenOptions, Outcome, Refusal};
use crate::clock::{Clock, SystemClock};
use crate::db::target::BoardLocation;
use crate::gates;
use crate::home as paths;
use crate::identity;

/// The root, the resolved board and the open store.
pub(super) struct Opened {
    pub(super) loc: BoardLocation,
    pub(super) board: Board,
}

pub(super) fn root(globals: &Globals) -> anyhow::Result<PathBuf> {
    Ok(paths::root_dir(globals.home.as_deref())?)
}

/// Opens the resolved board; the default board and a PostgreSQL board configured in kanban.toml
/// are created on first use, any other must exist.
pub(super) fn open(globals: &Globals) -> anyhow::Result<Opened> {
    let root = root(globals)?;
    let loc = paths::resolve(&root, globals.board.as_deref())?;
    // A fenced process only reads: it never creates a board as a side effect. Created on first
    // use: the default board, and a board whose PostgreSQL URL is configured in kanban.toml
    // (configuring it is how it was declared; see the README's "A board on PostgreSQL").
    let configured_postgres = loc
        .postgres()
        .is_some_and(|t| matches!(t.source(), crate::db::target::UrlSource::Config(_)));
    let create = (loc.slug == crate::home::DEFAULT_BOARD || configured_postgres)
        && !loc.pinned
        && identity::fence::check_board_mutation().is_ok();
    let options = OpenOptions {
        create,
        ..OpenOptions::default()
    };
    let board = Board::open(&loc, &options)?;
    Ok(Opened { loc, board })
}

/// [`open`] for a command that only reads: when this user may not write the board file or its
/// folder (a read-only home), the existing board is opened read-only instead, so reads work
/// wherever SQLite can read the file.
pub(super) fn open_read(globals: &Globals) -> anyhow::Result<Opened> {
    match open(globals) {
        Ok(opened) => Ok(opened),
        Err(err) => {
            let unwritable = matches!(
                err.downcast_ref::<BoardError>(),
                Some(BoardError::Storage(StorageError::ReadOnly { .. }) | BoardError::Storage(StorageError::CannotOpen { .. }))
            ) || err
                .downcast_ref::<BoardError>()
                .is_some_and(|e| matches!(e, BoardError::Storage(StorageError::Io { source, .. }) if source.kind() == std::io::ErrorKind::PermissionDenied));
            let root = root(globals)?;
            let loc = paths::resolve(&root, globals.board.as_deref())?;
            if !unwritable || !loc.db_path.is_file() {
                return Err(err);
            }
            let board = Board::open(&loc, &OpenOptions::read_only())?;
            Ok(Opened { loc, board })
        }
    }
}

pub(super) fn now() -> i64 {
    SystemClock.now()
}

/// The delegated-child fence (exit 3 when fenced).
pub(super) fn fence() -> anyhow::Result<()> {
    identity::fence::check_board_mutation().map_err(|e| Refused(e.to_string()))?;
    Ok(())
}

/// The fence plus worker ownership of `task_id` (exit 3 when refused).
pub(super) fn authorize(task_id: &str) -> anyhow::Result<()> {
    fence()?;
    gates::check_mutation(task_id).map_err(|e| Refused(e.to_string()))?;
    Ok(())
}

/// The task a read command acts on: explicit, else this worker's own.
pub(super) fn task_arg(explicit: Option<String>, command: &str) -> Result<String, Exit> {
    match gates::default_task_id(explicit.as_deref()) {
        Some(id) => Ok(id),
        None => {
            eprintln!(
                "kanban {command}: no task id given and this process is not a kanban worker; pass the task id"
            );
            Err(Exit(2))
        }
    }
}

/// The authorized target of a lifecycle command (complete, block, heartbeat, comment): the fence,
/// the task (explicit, else the worker's own), ownership, and the owned run id and claim lock.
/// `Err(Exit(2))` when there is no task id at all; a refusal is exit 3.
pub(super) fn lifecycle(
    explicit: Option<&str>,
) -> anyhow::Result<Result<gates::LifecycleTarget, Exit>> {
    match gates::lifecycle_target(explicit) {
        Ok(target) => Ok(Ok(target)),
        Err(gates::LifecycleRefused::NoTask) => {
            eprintln!("kanban: {}", gates::LifecycleRefused::NoTask);
            Ok(Err(Exit(2)))
        }
        Err(refusal) => Err(Refused(refusal.to_string()).into()),
    }
}

pub(super) fn refused(r: Refusal) -> anyhow::Error {
    Refused(r.to_string()).into()
}

pub(super) fn done<T>(outcome: Outcome<T>) -> anyhow::Result<T> {
    outcome.into_result().map_err(refused)
}

/// Prints `value` as JSON, or the human lines with their control characters escaped.
pub(super) fn print_out<T: Serialize>(
    json: bool,
    value: &T,
    human: impl FnOnce() -> String,
) -> CmdResult {
    if json {
        print_json(value)?;
    } else {
        // Control characters of the stored text it quotes (a reviewer, an assignee) escaped;
        // the lines the command itself writes (reopen lists each invalidated task) are kept.
        let text = human();
        let lines: Vec<_> = text.split('\n').map(line).collect();
        println!("{}", lines.join("\n"));
    }
    Ok(Exit::OK)
}

/// The body a command stores: `--body TEXT`, `--body -` (standard input, which must not be
/// empty: an empty body from a pipe that failed is refused rather than stored), or
/// `--body-file PATH`.
pub(super) fn read_body(
    body: Option<String>,
    file: Option<&Path>,
) -> anyhow::Result<Option<String>> {
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::Error::new(e).context(format!(
                "cannot read the body file {}; nothing was changed",
                path.display()
            ))
        })?;
        return Ok(Some(text));
    }
    match body {
        Some(dash) if dash == "-" => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| {
                anyhow::Error::new(e)
                    .context("cannot read the body from standard input; nothing was changed")
            })?;
            if text.trim().is_empty() {
                anyhow::bail!(
                    "--body -: standard input was empty; nothing was changed (omit --body for no body)"
                );
            }
            Ok(Some(text))
        }
        other => Ok(other),
    }
}

/// Runs `one` for every id (each resolved on its own, see [`resolve_id`]), in the order given;
/// a failure of one id is reported (`kanban: <id>: …` on stderr) and the others still run. The
/// exit code is the worst: 3 when one was refused, 1 when one failed. With a single id the error
/// is returned as is (the usual message and exit code).
pub(super) fn each(
    ids: &[String],
    globals: &Globals,
    mut one: impl FnMut(&str) -> CmdResult,
) -> CmdResult {
    let mut run = |id: &str| {
        let mut id = id.to_owned();
        resolve_id(&mut id, globals)?;
        one(&id)
    };
    if let [id] = ids {
        return run(id);
    }
    let mut worst = 0u8;
    for id in ids {
        match run(id) {
            Ok(Exit(code)) => worst = worst.max(code),
            Err(err) => {
                eprintln!(
                    "kanban: {}: {}",
                    line(id),
                    super::escape::block(&crate::error_chain(err.as_ref()))
                );
                let code = if err.downcast_ref::<Refused>().is_some() {
                    3
                } else {
                    1
                };
                worst = worst.max(code);
            }
        }
    }
    Ok(Exit(worst))
}

/// Resolves one id in place (see [`resolve_ids`]).
pub(super) fn resolve_id(id: &mut String, globals: &Globals) -> anyhow::Result<()> {
    if is_full_id(id) {
        return Ok(());
    }
    let loc = paths::resolve(&root(globals)?, globals.board.as_deref())?;
    if loc.exists() {
        *id = open_read(globals)?.board.resolve_task_id(id)?;
    }
    Ok(())
}

/// `t_` and eight hex digits: the shape of an id the board generates.
pub(super) fn is_full_id(id: &str) -> bool {
    id.strip_prefix("t_")
        .is_some_and(|rest| rest.len() == 8 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A `--metadata` value: a JSON object.
pub(in crate::cli) type JsonObject = serde_json::Map<String, serde_json::Value>;

/// Parses `--metadata JSON`: a JSON object, else a usage error saying why.
pub(in crate::cli) fn parse_metadata(raw: &str) -> Result<JsonObject, String> {
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "must be a JSON object, not {}",
            match other {
                serde_json::Value::Array(_) => "an array",
                serde_json::Value::String(_) => "a string",
                serde_json::Value::Number(_) => "a number",
                serde_json::Value::Bool(_) => "a boolean",
                _ => "null",
            }
        )),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}

/// A duration flag's value in seconds: a whole number of seconds (`900`), or a count and a unit
/// as the original writes them (`90s`, `30m`, `2h`, `1d`; see [`crate::clock::parse_duration`]).
pub(in crate::cli) fn parse_seconds(text: &str) -> Result<i64, String> {
    match text.trim().parse::<i64>() {
        Ok(secs) => Ok(secs),
        Err(_) => crate::clock::parse_duration(text, true),
    }
}

/// A time flag's value in epoch seconds: an ISO-8601 date and time with an offset
/// (`2026-12-02T08:00:00Z`), or without one in the system's time zone (`2026-12-02 09:00`).
pub(in crate::cli) fn parse_time(text: &str) -> Result<i64, String> {
    crate::cron::schedule::parse_timestamp(text.trim(), &jiff::tz::TimeZone::system())
        .map_err(|reason| format!("{reason}; give e.g. 2026-12-02T08:00:00Z or 2026-12-02 09:00"))
}
