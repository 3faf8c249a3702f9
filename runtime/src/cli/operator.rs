//! Operator conveniences of the board commands: a unique id prefix wherever an id is accepted
//! ([`resolve_ids`]), a body from a file or standard input ([`read_body`]), several ids in one
//! command ([`each`]), `kanban edit` and `kanban boards rm`.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::board::{BoardCommand, authorize, done, fence, now, open, open_read, print_out, root};
use super::escape::line;
use super::review::ReviewCommand;
use super::{CmdResult, Exit, Globals, Refused};
use crate::board::StorageError;
use crate::board::{BoardError, Edit};
use crate::home::{self as paths, DEFAULT_BOARD};

/// `kanban edit ID`: the fields to change (at least one).
#[derive(Debug, clap::Args)]
pub struct EditArgs {
    /// Task id (or a unique prefix of it).
    pub id: String,
    #[arg(long)]
    pub title: Option<String>,
    /// The new body; `-` reads it from standard input.
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Read the new body from this file.
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,
    #[arg(long, allow_negative_numbers = true)]
    pub priority: Option<i64>,
    /// Consecutive failures before the task is blocked (1-1000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..=1000))]
    pub max_retries: Option<i64>,
}

/// The body a command stores: `--body TEXT`, `--body -` (standard input, which must not be
/// empty: an empty body from a pipe that failed is refused rather than stored), or
/// `--body-file PATH`.
pub fn read_body(body: Option<String>, file: Option<&Path>) -> anyhow::Result<Option<String>> {
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
pub fn each(
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

/// Replaces every id of `command` that is not a full task id by the one task it is a prefix of
/// ([`crate::board::Board::resolve_task_id`]). A board that does not exist yet is left to the
/// command (it reports that itself).
pub fn resolve_ids(command: &mut BoardCommand, globals: &Globals) -> anyhow::Result<()> {
    let mut ids: Vec<&mut String> = Vec::new();
    match command {
        BoardCommand::Show { id, .. }
        | BoardCommand::Heartbeat { id, .. }
        | BoardCommand::Complete { id, .. }
        | BoardCommand::Block { id, .. } => ids.extend(id.as_mut()),
        BoardCommand::Events { id, .. }
        | BoardCommand::Claim { id, .. }
        | BoardCommand::Reopen { id, .. }
        | BoardCommand::Assign { id, .. }
        | BoardCommand::Comment { id, .. } => ids.push(id),
        BoardCommand::Edit(args) => ids.push(&mut args.id),
        // Several ids: each is resolved on its own by [`each`], so one bad id spoils no other.
        BoardCommand::Unblock { .. }
        | BoardCommand::Archive { .. }
        | BoardCommand::Reclaim { .. }
        | BoardCommand::Promote { .. } => {}
        BoardCommand::Link { parent, child } | BoardCommand::Unlink { parent, child } => {
            ids.push(parent);
            ids.push(child);
        }
        BoardCommand::Create(args) => ids.extend(args.parents.iter_mut()),
        BoardCommand::Review { command } => match command {
            ReviewCommand::Request { id, .. } | ReviewCommand::Changes { id, .. } => {
                ids.extend(id.as_mut())
            }
            ReviewCommand::Reopen { id } => ids.push(id),
        },
        BoardCommand::Init
        | BoardCommand::List(_)
        | BoardCommand::Boards { .. }
        | BoardCommand::Fsck => {}
    }
    ids.retain(|id| !is_full_id(id));
    if ids.is_empty() {
        return Ok(());
    }
    let loc = paths::resolve(&root(globals)?, globals.board.as_deref())?;
    if !loc.exists() {
        return Ok(());
    }
    let o = open_read(globals)?;
    for id in ids {
        *id = o.board.resolve_task_id(id)?;
    }
    Ok(())
}

/// Resolves one id in place (see [`resolve_ids`]).
pub fn resolve_id(id: &mut String, globals: &Globals) -> anyhow::Result<()> {
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
fn is_full_id(id: &str) -> bool {
    id.strip_prefix("t_")
        .is_some_and(|rest| rest.len() == 8 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `kanban edit ID …`.
pub fn edit(args: EditArgs, globals: &Globals) -> CmdResult {
    authorize(&args.id)?;
    let body = read_body(args.body, args.body_file.as_deref())?;
    let change = Edit {
        title: args.title,
        body,
        priority: args.priority,
        max_retries: args.max_retries,
    };
    let o = open(globals)?;
    let e = done(o.board.edit(&args.id, &change, now())?)?;
    print_out(globals.json, &e, || {
        if e.fields.is_empty() {
            format!("{}: nothing changed", e.task_id)
        } else {
            format!("edited {}: {}", e.task_id, e.fields.join(", "))
        }
    })
}

/// `kanban boards rm SLUG`: removes `<root>/kanban/boards/<slug>/`. Refused (exit 3) for the
/// default board and while a task of the board is running under a live claim (its worker may
/// still write to the board); when it was the current board, the default board becomes current.
pub fn remove_board(root: &Path, slug: &str, globals: &Globals) -> CmdResult {
    fence()?;
    paths::validate_slug(slug)?;
    if slug == DEFAULT_BOARD {
        return Err(Refused(
            "the default board cannot be removed (archive its tasks instead)".to_owned(),
        )
        .into());
    }
    let db = paths::db_path(root, slug);
    let folder = paths::boards_dir(root).join(slug);
    let location = paths::locate(root, slug)?;
    if !location.exists() {
        return Err(BoardError::Storage(StorageError::BoardNotFound {
            slug: slug.to_owned(),
            path: db,
        })
        .into());
    }
    // A board kanban.toml declares would come back with the next command: the entry goes first.
    if let Some(crate::db::target::UrlSource::Config(file)) =
        location.postgres().map(crate::db::target::PgTarget::source)
    {
        anyhow::bail!(
            "board `{slug}` is declared by [boards.{slug}] in {}; remove that entry (and {} if              present) instead; nothing was removed",
            file.display(),
            folder.display()
        );
    }
    let at = now();
    {
        // A PostgreSQL board: only its folder (the recorded URL, workspaces) is removed, never
        // the database; its running tasks are checked the same way.
        let board = crate::board::Board::open(&location, &crate::board::OpenOptions::read_only())?;
        let live: Vec<String> = board
            .running_tasks()?
            .into_iter()
            .filter(|t| t.claim_expires.is_some_and(|e| e > at))
            .map(|t| t.id)
            .collect();
        if !live.is_empty() {
            return Err(Refused(format!(
                "board `{slug}` still has running workers ({}); stop the dispatcher or reclaim \
                 those tasks first; nothing was removed",
                live.join(", ")
            ))
            .into());
        }
    }
    std::fs::remove_dir_all(&folder).map_err(|e| {
        anyhow::Error::new(e).context(format!("cannot remove {}", folder.display()))
    })?;
    let was_current = paths::current_slug(root).as_deref() == Some(slug);
    if was_current {
        let file = paths::current_file(root);
        std::fs::remove_file(&file).map_err(|e| {
            anyhow::Error::new(e).context(format!("cannot remove {}", file.display()))
        })?;
    }
    #[derive(Serialize)]
    struct Removed<'a> {
        slug: &'a str,
        path: &'a Path,
        current: &'a str,
    }
    let current = if was_current {
        DEFAULT_BOARD.to_owned()
    } else {
        paths::current_slug(root).unwrap_or_else(|| DEFAULT_BOARD.to_owned())
    };
    print_out(
        globals.json,
        &Removed {
            slug,
            path: &folder,
            current: &current,
        },
        || {
            let mut text = format!("removed board {slug} ({})", folder.display());
            if was_current {
                text.push_str("; the current board is now default");
            }
            text
        },
    )
}
