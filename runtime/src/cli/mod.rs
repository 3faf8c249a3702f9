//! The `kanban` command line: parse with clap, call the library, print. No domain logic lives here.
//!
//! Exit codes: 0 ok, 1 error, 2 usage (clap), 3 refused (a lost compare-and-swap, a stale claim,
//! not the owner). The worker subcommand exits with its own codes (0 / 1 / 75 / 78 / 130).
//! Human-readable output by default, `--json` for machines; errors go to stderr. Stored text in
//! human output goes through [`escape`] (control characters become visible escapes); `--json`
//! stays exact.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod board;
mod boards;
mod cron;
mod dispatch;
mod docs;
mod escape;
mod explain;
mod identity;
mod logs;
mod owner;
mod review;
mod serve;
mod session;
mod tasks;
mod web_actions;

/// Global options every subcommand sees.
#[derive(Debug, Clone, clap::Args)]
pub struct Globals {
    /// Kanban root (default: $HERMES_KANBAN_HOME, else $HERMES_HOME, else ~/.hermes).
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Board slug (overrides $HERMES_KANBAN_DB, $HERMES_KANBAN_BOARD and the current board).
    #[arg(long, global = true, value_name = "SLUG")]
    pub board: Option<String>,
    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Parser)]
#[command(
    name = "kanban",
    version,
    about = "A SQLite task board dispatched to agent workers"
)]
struct Cli {
    #[command(flatten)]
    globals: Globals,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[command(flatten)]
    Board(board::BoardCommand),
    #[command(flatten)]
    Identity(identity::IdentityCommand),
    #[command(flatten)]
    Dispatch(dispatch::DispatchCommand),
    /// Print a task's worker log: one run's part (default: the current run, else the latest).
    Logs(logs::LogsArgs),
    /// Scheduled jobs: add, list, run, and the scheduler.
    Cron {
        #[command(subcommand)]
        command: cron::CronCommand,
    },
    /// Serve the live web view of the boards, with write actions unless --read-only (README "Web view").
    Serve(serve::ServeArgs),
    /// The profile's owner (README "Owner admission"): serve, status, resolve.
    Owner {
        #[command(subcommand)]
        command: owner::OwnerCommand,
    },
    /// Print a shell completion script (bash, zsh, fish, powershell or elvish) generated from
    /// this command line.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) generated from this command line: `kanban man | man -l -`.
    Man {
        /// Write kanban.1 and one page per subcommand (kanban-create.1, kanban-boards-rm.1, ...)
        /// into DIR instead, creating it when missing; prints each path written.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// The owner-mode submitter the dispatcher spawns (not for interactive use).
    #[command(hide = true)]
    Submit,
}

/// An error that means "refused" (exit 3): a lost compare-and-swap, a stale claim, not the owner.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// What a command asks the process to exit with when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit(pub u8);

impl Exit {
    pub const OK: Exit = Exit(0);
}

/// Result of one subcommand.
pub type CmdResult = anyhow::Result<Exit>;

/// Entry point of the `kanban` binary.
pub fn main() -> ExitCode {
    quiet_on_closed_stdout();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Board(c) => board::run(c, &cli.globals),
        Command::Identity(c) => identity::run(c, &cli.globals),
        Command::Dispatch(c) => dispatch::run(c, &cli.globals),
        Command::Logs(args) => logs::run(args, &cli.globals),
        Command::Cron { command } => cron::run(command, &cli.globals),
        Command::Serve(args) => serve::run(args, &cli.globals),
        Command::Owner { command } => owner::run(command, &cli.globals),
        Command::Submit => owner::submit(&cli.globals),
        Command::Completions { shell } => docs::completions(Cli::command(), shell),
        Command::Man { dir } => docs::man(Cli::command(), dir.as_deref()),
    };
    match result {
        Ok(Exit(code)) => ExitCode::from(code),
        Err(err) => {
            // Messages may quote stored or user-given text: no control character reaches the
            // terminal (a multi-line message keeps its lines, indented).
            eprintln!(
                "kanban: {}",
                escape::block(&crate::error_chain(err.as_ref()))
            );
            print_advice(&err);
            if err.downcast_ref::<Refused>().is_some() {
                ExitCode::from(3)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// The command-line side of a library error: which flags choose what the library's message
/// names (library messages never name a flag).
fn flag_hint(err: &anyhow::Error) -> Option<&'static str> {
    use crate::board::{BoardError, StorageError};
    use crate::home::HomeError;
    err.chain().find_map(|e| {
        if let Some(board) = e.downcast_ref::<BoardError>() {
            return match board {
                BoardError::ConflictingInitialStatus => {
                    Some("pass --triage or --blocked, not both")
                }
                BoardError::NothingToEdit => {
                    Some("pass --title, --body, --body-file, --priority or --max-retries")
                }
                BoardError::InvalidMaxRetries { .. } => Some("--max-retries takes 1 to 1000"),
                BoardError::Storage(storage) => storage_hint(storage),
                _ => None,
            };
        }
        if let Some(storage) = e.downcast_ref::<StorageError>() {
            return storage_hint(storage);
        }
        match e.downcast_ref::<HomeError>() {
            Some(HomeError::Board(BoardError::Storage(storage))) => storage_hint(storage),
            Some(HomeError::NoRoot) => Some("--home DIR names the kanban home"),
            _ => None,
        }
    })
}

/// The flags that choose another board than the one a storage error names.
fn storage_hint(storage: &crate::board::StorageError) -> Option<&'static str> {
    use crate::board::StorageError;
    match storage {
        StorageError::NotSqlite { .. }
        | StorageError::NotRegularFile { .. }
        | StorageError::MissingFile { .. }
        | StorageError::CannotOpen { .. } => {
            Some("--board SLUG and --home DIR choose another board")
        }
        StorageError::CannotCreateFolder { .. } => Some("--home DIR chooses another kanban home"),
        _ => None,
    }
}

/// What to do about a failed disk, a full disk or a damaged board, when `err` was one: SQLite's
/// advice names the file, PostgreSQL's the server.
fn print_advice(err: &anyhow::Error) {
    if let Some(hint) = flag_hint(err) {
        eprintln!("kanban: {hint}");
    }
    let disk_full = err.chain().any(|e| {
        e.downcast_ref::<crate::db::Error>()
            .is_some_and(|s| s.kind() == crate::db::ErrorKind::DiskFull)
            || e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::StorageFull)
    });
    let io_failure = err.chain().any(|e| {
        e.downcast_ref::<crate::db::Error>()
            .is_some_and(|s| s.kind() == crate::db::ErrorKind::IoFailure)
    });
    // A PostgreSQL board's disk is the server's: its advice names the server, not a file.
    let postgres = err.chain().any(|e| {
        e.downcast_ref::<crate::db::Error>().is_some_and(|s| {
            matches!(
                s,
                crate::db::Error::Postgres(_)
                    | crate::db::Error::Queued(_)
                    | crate::db::Error::ConnectionLost(_)
            )
        })
    });
    if io_failure && !disk_full {
        if postgres {
            eprintln!(
                "kanban: the PostgreSQL server could not read or write its files; nothing \
                 was changed. Check the server's disk and log, then run the command again"
            );
        } else {
            eprintln!(
                "kanban: SQLite could not read or write the board file (a full disk, a \
                 failing or read-only disk); nothing was changed. Check the disk (`df`) \
                 and run the command again"
            );
        }
    }
    if disk_full {
        if postgres {
            eprintln!(
                "kanban: the PostgreSQL server's disk is full; nothing was changed (the \
                 server rolled the write back). Free space on the server and run the \
                 command again"
            );
        } else {
            eprintln!(
                "kanban: the disk is full; nothing was changed (SQLite rolled the write \
                 back). Free some space and run the command again"
            );
        }
    }
    let corrupt = err.chain().any(|e| {
        e.downcast_ref::<crate::board::BoardError>()
            .is_some_and(crate::board::BoardError::is_corrupt)
    });
    if corrupt {
        if postgres {
            eprintln!(
                "kanban: the PostgreSQL server reports damaged data in the board's \
                 database; nothing was changed. See the server's log, and restore the \
                 database from a backup"
            );
        } else {
            eprintln!(
                "kanban: the board database is damaged; nothing was changed. `kanban \
                 fsck` reports what SQLite finds; restore a backup, or salvage the rows \
                 with `sqlite3 <board file> .recover`"
            );
        }
    }
}

/// Rust ignores SIGPIPE, so `println!` panics when the reader of stdout went away
/// (`kanban list | head -1`). Like other Unix tools, exit quietly instead (128 + SIGPIPE); by then
/// the command's work is committed, only the rest of its output is lost.
fn quiet_on_closed_stdout() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.contains("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default_hook(info);
    }));
}

/// Prints `value` as one line of JSON on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string(value)?);
    Ok(())
}
