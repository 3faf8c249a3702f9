//! `kanban boards list|rename|export|import|create|set-default-workdir|set-policy|switch|rm|migrate`:
//! the boards of the home, one function per subcommand; the PostgreSQL ones (`create --url`,
//! `migrate`) are [`postgres`], the policy [`policy`]. Parse, call [`crate::home`], print.

mod list;
mod policy;
mod postgres;
mod rename;
mod transfer;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cli::session::{fence, now, print_out, root};
use crate::cli::{CmdResult, Globals, Refused};
use crate::home as paths;
use crate::home::create::{self, CreateError, NewBoard};
use crate::home::remove::{self, RemoveError};

#[derive(Debug, clap::Subcommand)]
pub enum BoardsCommand {
    /// Every board under the root (`*` marks the current one) with its display name, task
    /// counts and store, and the archived boards.
    List,
    /// Set board SLUG's display name (shown by `boards list`; the slug never changes).
    Rename { slug: String, name: String },
    /// Write board SLUG (SQLite or PostgreSQL) to FILE, a new `.tar.gz`: its tasks, runs,
    /// events, comments, links and attachments (and worker logs with --with-logs).
    Export {
        slug: String,
        file: PathBuf,
        /// Also the worker logs of its tasks.
        #[arg(long)]
        with_logs: bool,
    },
    /// Make a new board from an archive `boards export` wrote (refused, changing nothing, for a
    /// slug that exists and for a corrupt, truncated, unsafe or unknown archive).
    Import {
        file: PathBuf,
        /// The new board's slug (default: the slug it was exported from).
        #[arg(long = "as", value_name = "SLUG")]
        as_slug: Option<String>,
        /// Put the board in this empty PostgreSQL database (as `boards create --url`); without
        /// it the board goes where `boards create` would put it.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
    },
    /// Create board SLUG (a SQLite file; with --url, in a PostgreSQL database).
    Create {
        slug: String,
        /// The board lives in this PostgreSQL database (`postgres://user@host:port/dbname`,
        /// without a password: it comes from ~/.pgpass, PGPASSFILE or PGPASSWORD). An empty
        /// database gets the board schema; one that already holds a kanban board is shared.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// The board's repository: worktree tasks with no path of their own become worktrees
        /// of it (a directory inside a git work tree; absolute).
        #[arg(long, value_name = "DIR")]
        default_workdir: Option<PathBuf>,
    },
    /// Set board SLUG's default workdir: the repository its worktree tasks are worktrees of.
    SetDefaultWorkdir { slug: String, dir: PathBuf },
    /// Set board SLUG's `pre_claim` policy: a command every claim and promotion must pass (it
    /// gets the task as JSON on stdin and answers `{"allow": bool, "reason": "..."}`); with
    /// --clear, remove it. Kept in the board's board.json, as the original.
    #[command(group(clap::ArgGroup::new("policy").required(true).args(["pre_claim_command", "clear"])))]
    SetPolicy {
        slug: String,
        /// Seconds the command may take (1-60); past them it is killed and the claim denied.
        #[arg(long, value_name = "SECS", default_value_t = 10.0)]
        timeout: f64,
        /// The command and its arguments, last on the line: an absolute path, run without a
        /// shell.
        #[arg(long, value_name = "ARGV", num_args = 1.., allow_hyphen_values = true)]
        pre_claim_command: Vec<String>,
        /// Remove the policy.
        #[arg(long)]
        clear: bool,
    },
    /// Make SLUG the current board.
    Switch { slug: String },
    /// Remove board SLUG and its folder (refused while one of its tasks has a live claim, and
    /// for the default board).
    Rm { slug: String },
    /// Copy SQLite board SLUG into an empty PostgreSQL database and switch the board to it (the
    /// SQLite file is kept as `kanban.db.migrated-<epoch>`). Refused while a task is running or a
    /// dispatcher ticks the board.
    Migrate {
        slug: String,
        /// The target database URL, without a password.
        #[arg(long, value_name = "URL")]
        to: String,
    },
}

pub(in crate::cli) fn run(command: BoardsCommand, globals: &Globals) -> CmdResult {
    let root = root(globals)?;
    match command {
        BoardsCommand::List => list::list(&root, globals),
        BoardsCommand::Rename { slug, name } => rename::rename(&root, &slug, &name, globals),
        BoardsCommand::Export {
            slug,
            file,
            with_logs,
        } => transfer::export(&root, &slug, &file, with_logs, globals),
        BoardsCommand::Import { file, as_slug, url } => {
            transfer::import(&root, &file, as_slug.as_deref(), url.as_deref(), globals)
        }
        BoardsCommand::Create {
            slug,
            url,
            default_workdir,
        } => {
            // Checked before the board is made: a refused workdir leaves no board behind.
            if let Some(dir) = &default_workdir {
                crate::workspace::check_default_workdir(dir)?;
            }
            let made = match url {
                Some(url) => postgres::create(&root, &slug, &url, globals),
                None => create(&root, slug.clone(), globals),
            }?;
            if let Some(dir) = &default_workdir {
                let stored = crate::home::meta::set_default_workdir(&root, &slug, dir)?;
                if !globals.json {
                    println!("default workdir of {slug}: {}", stored.display());
                }
            }
            Ok(made)
        }
        BoardsCommand::SetDefaultWorkdir { slug, dir } => {
            set_default_workdir(&root, &slug, &dir, globals)
        }
        BoardsCommand::Migrate { slug, to } => postgres::migrate(&root, &slug, &to, globals),
        BoardsCommand::Rm { slug } => rm(&root, &slug, globals),
        BoardsCommand::Switch { slug } => switch(&root, &slug, globals),
        BoardsCommand::SetPolicy {
            slug,
            timeout,
            pre_claim_command,
            clear: _,
        } => policy::set_policy(&root, &slug, pre_claim_command, timeout, globals),
    }
}

/// `kanban boards create SLUG` (without `--url`): a SQLite board, unless kanban.toml puts the
/// board in PostgreSQL ([`create::create_board`]).
fn create(root: &Path, slug: String, globals: &Globals) -> CmdResult {
    fence()?;
    let path = match create::create_board(root, &slug) {
        Ok(NewBoard::Sqlite(path)) => path,
        Ok(NewBoard::Configured(target)) => {
            return postgres::create_configured(&slug, &target, globals);
        }
        Err(CreateError::Board(e)) => return Err(e.into()),
        Err(CreateError::Home(e)) => return Err(e.into()),
        Err(e) => return Err(e.into()),
    };
    #[derive(Serialize)]
    struct Made<'a> {
        slug: &'a str,
        db_path: &'a Path,
    }
    print_out(
        globals.json,
        &Made {
            slug: &slug,
            db_path: &path,
        },
        || format!("created board {slug} at {}", path.display()),
    )
}

/// `kanban boards set-default-workdir SLUG DIR`: the board must exist.
fn set_default_workdir(root: &Path, slug: &str, dir: &Path, globals: &Globals) -> CmdResult {
    fence()?;
    require_board(root, slug)?;
    let stored = crate::home::meta::set_default_workdir(root, slug, dir)?;
    #[derive(Serialize)]
    struct Set<'a> {
        slug: &'a str,
        default_workdir: &'a Path,
    }
    print_out(
        globals.json,
        &Set {
            slug,
            default_workdir: &stored,
        },
        || format!("default workdir of {slug}: {}", stored.display()),
    )
}

/// Refuses a board that does not exist (a setting of it would name nothing).
fn require_board(root: &Path, slug: &str) -> anyhow::Result<()> {
    if !paths::locate(root, slug)?.exists() {
        return Err(crate::home::HomeError::BoardNotFound {
            slug: slug.to_owned(),
            path: paths::db_path(root, slug),
        }
        .into());
    }
    Ok(())
}

/// `kanban boards switch SLUG`.
fn switch(root: &Path, slug: &str, globals: &Globals) -> CmdResult {
    fence()?;
    paths::switch_board(root, slug)?;
    #[derive(Serialize)]
    struct Switched<'a> {
        current: &'a str,
    }
    print_out(globals.json, &Switched { current: slug }, || {
        format!("current board is now {slug}")
    })
}

/// `kanban boards rm SLUG` ([`remove::remove_board`]): a refusal (the default board, a task
/// running under a live claim) is exit 3.
fn rm(root: &Path, slug: &str, globals: &Globals) -> CmdResult {
    fence()?;
    let removed = match remove::remove_board(root, slug, now()) {
        Ok(removed) => removed,
        Err(e) if e.is_refusal() => return Err(Refused(e.to_string()).into()),
        Err(RemoveError::Board(e)) => return Err(e.into()),
        Err(RemoveError::Home(e)) => return Err(e.into()),
        Err(e) => return Err(e.into()),
    };
    #[derive(Serialize)]
    struct Removed<'a> {
        slug: &'a str,
        path: &'a Path,
        attachments: Option<&'a Path>,
        current: &'a str,
    }
    print_out(
        globals.json,
        &Removed {
            slug,
            path: &removed.folder,
            attachments: removed.attachments.as_deref(),
            current: &removed.current,
        },
        || {
            let mut text = format!("removed board {slug} ({})", removed.folder.display());
            if let Some(attachments) = &removed.attachments {
                text.push_str(&format!(" and its attachments ({})", attachments.display()));
            }
            if removed.was_current {
                text.push_str("; the current board is now default");
            }
            text
        },
    )
}
