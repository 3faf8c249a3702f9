//! `kanban` subcommands of the board concern: parse, call [`crate::board`], print.
//!
//! Every command that changes the board first passes the delegated-child fence
//! ([`identity::fence::check_board_mutation`]); commands that change an existing task also pass
//! the worker-ownership gate ([`gates::check_mutation`]): inside a dispatcher-owned worker only its
//! own task may be changed. `link` and `unlink` change the child (its parents, and its status when
//! it is demoted to `todo` or promoted), so the child is the task checked. Read commands fall back
//! to a read-only open when this user may not write the board file or its folder. The agent-facing lifecycle commands (`complete`, `block`, `heartbeat`,
//! `comment`, and `show`) default their task through [`gates::default_task_id`] and pass the
//! owned run id, so a superseded worker cannot close its successor's run.
//!
//! Exit codes: 0 ok, 1 error, 2 usage, 3 refused (a lost compare-and-swap, a stale run, a live
//! claim, not the owner).

use std::path::{Path, PathBuf};

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use serde::Serialize;

use super::escape::{block, line};
use super::{CmdResult, Exit, Globals, Refused, print_json};
use crate::board::StorageError;
use crate::board::{
    self, BlockKind, Board, BoardError, ClaimOutcome, ClaimSpec, Completion, Fence, NewTask,
    OpenOptions, Outcome, Refusal, Status, Task, TaskFilter,
};
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::db::target::BoardLocation;
use crate::gates;
use crate::home as paths;
use crate::identity;

#[derive(Debug, clap::Subcommand)]
pub enum BoardCommand {
    /// Create the board database (the default board, or --board SLUG) if it does not exist.
    Init,
    /// Create a task; prints its id ({"id": …} with --json).
    Create(CreateArgs),
    /// List tasks (highest priority first). --json: an array of tasks.
    List(ListArgs),
    /// Show a task with its parents, children, runs, comments and recent events.
    Show {
        /// Task id (default: this worker's task).
        id: Option<String>,
        /// How many recent events to include.
        #[arg(long, default_value_t = 20)]
        events: usize,
    },
    /// A task's events, oldest first.
    Events {
        id: String,
        /// Only the newest N events.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Claim a ready task (a review task: for its reviewer): prints {"task_id","run_id","claim_lock","claim_expires"}; exit 3 if lost.
    Claim {
        id: String,
        /// Lease length in seconds (default: $HERMES_KANBAN_CLAIM_TTL_SECONDS, else the config's
        /// [dispatch] claim_ttl_seconds, else 900).
        #[arg(long, allow_negative_numbers = true, value_name = "SECS")]
        ttl: Option<i64>,
        /// Claim lock to record (default "<hostname>:<pid>").
        #[arg(long, value_name = "LOCK")]
        claimer: Option<String>,
    },
    /// Extend the claim of a running task and stamp its heartbeat.
    Heartbeat {
        /// Task id (default: this worker's task).
        id: Option<String>,
        #[arg(long)]
        note: Option<String>,
        /// New lease length in seconds from now (default as for `claim`).
        #[arg(long, allow_negative_numbers = true, value_name = "SECS")]
        ttl: Option<i64>,
    },
    /// Mark a task done (closes its run, promotes children whose parents are all finished).
    Complete {
        /// Task id (default: this worker's task).
        id: Option<String>,
        #[arg(long)]
        summary: Option<String>,
        #[arg(long)]
        result: Option<String>,
        /// Complete even while another live claim holds the task.
        #[arg(long)]
        force: bool,
    },
    /// Block a running or ready task.
    Block {
        /// Task id (default: this worker's task).
        id: Option<String>,
        #[arg(long)]
        reason: String,
        /// dependency (back to todo), needs_input, capability or transient.
        #[arg(long, value_name = "KIND", value_parser = block_kind_parser())]
        kind: Option<BlockKind>,
    },
    /// Move blocked tasks back to ready (todo while a parent is unfinished); one line per id.
    Unblock {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
    /// Archive tasks (from any status); one line per id.
    Archive {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
    /// Change a task's title, body, priority or retry limit (records an `edited` event).
    Edit(super::operator::EditArgs),
    /// Reopen a done task (→ ready, or todo while a parent is unfinished); every descendant in
    /// ready, review, running or done goes back to todo (claims cleared; the dispatcher
    /// terminates a worker whose run closed).
    Reopen {
        id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// The review lane: hand a task to review, request changes, take it back.
    Review {
        #[command(subcommand)]
        command: super::review::ReviewCommand,
    },
    /// Take running tasks back from their workers (operator); they return to ready.
    Reclaim {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Assign a task to a profile (`--none` clears it).
    Assign {
        id: String,
        #[arg(required_unless_present = "none")]
        assignee: Option<String>,
        #[arg(long, conflicts_with = "assignee")]
        none: bool,
    },
    /// Add a comment to a task.
    Comment {
        id: String,
        #[arg(long)]
        body: String,
        /// Author name (ignored inside a worker, which always comments as itself).
        #[arg(long)]
        author: Option<String>,
    },
    /// Make CHILD depend on PARENT.
    Link { parent: String, child: String },
    /// Remove the dependency of CHILD on PARENT.
    Unlink { parent: String, child: String },
    /// Move triage, todo or blocked tasks to ready (refused while a parent is unfinished).
    Promote {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
        #[arg(long)]
        reason: Option<String>,
    },
    /// List, create, remove, migrate and switch boards.
    Boards {
        #[command(subcommand)]
        command: BoardsCommand,
    },
    /// Check the board's invariants; exit 1 naming each violation.
    Fsck,
}

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    pub title: String,
    /// The task's body; `-` reads it from standard input.
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Read the body from this file.
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,
    #[arg(long)]
    pub assignee: Option<String>,
    /// A task this one depends on (repeatable).
    #[arg(long = "parent", value_name = "ID")]
    pub parents: Vec<String>,
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i64,
    /// Creating twice with the same key returns the first task.
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
    /// Runtime cap of one attempt, in seconds.
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub max_runtime: Option<i64>,
    /// Counted failures before the task is blocked (1-1000; default: the config's [dispatch] failure_limit, 2).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..=1000))]
    pub max_retries: Option<i64>,
    /// Start in triage.
    #[arg(long, conflicts_with = "blocked")]
    pub triage: bool,
    /// Start blocked (until `kanban unblock`).
    #[arg(long)]
    pub blocked: bool,
    /// Goal mode: the worker keeps giving the agent turns until the task is done, blocked or in
    /// review, or the turn budget is spent (then it is blocked with `blocked_budget`).
    #[arg(long)]
    pub goal: bool,
    /// Turn budget of a goal task (1-1000; default: the profile's `goal_max_turns`, else 20).
    #[arg(long, requires = "goal", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_turns: Option<u32>,
}

/// `block --kind`: its values, which the shells complete (`needs-input` is still accepted).
fn block_kind_parser() -> impl TypedValueParser<Value = BlockKind> {
    let kinds = [
        BlockKind::Dependency,
        BlockKind::NeedsInput,
        BlockKind::Capability,
        BlockKind::Transient,
    ];
    PossibleValuesParser::new(kinds.map(|kind| match kind {
        BlockKind::NeedsInput => PossibleValue::new(kind.as_str()).alias("needs-input"),
        _ => PossibleValue::new(kind.as_str()),
    }))
    .try_map(|name| name.parse::<BlockKind>())
}

/// `list --status`: the statuses, which the shells complete.
fn status_parser() -> impl TypedValueParser<Value = Status> {
    PossibleValuesParser::new(Status::ALL.map(Status::as_str))
        .try_map(|name| name.parse::<Status>())
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only this status (repeatable).
    #[arg(long = "status", value_name = "STATUS", value_parser = status_parser())]
    pub statuses: Vec<Status>,
    #[arg(long)]
    pub assignee: Option<String>,
    /// Include archived tasks.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum BoardsCommand {
    /// Every board under the root (`*` marks the current one).
    List,
    /// Create board SLUG (a SQLite file; with --url, in a PostgreSQL database).
    Create {
        slug: String,
        /// The board lives in this PostgreSQL database (`postgres://user@host:port/dbname`,
        /// without a password: it comes from ~/.pgpass, PGPASSFILE or PGPASSWORD). An empty
        /// database gets the board schema; one that already holds a kanban board is shared.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
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

/// The root, the resolved board and the open store.
pub(super) struct Opened {
    loc: BoardLocation,
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
fn task_arg(explicit: Option<String>, command: &str) -> Result<String, Exit> {
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

fn refused(r: Refusal) -> anyhow::Error {
    Refused(r.to_string()).into()
}

pub(super) fn done<T>(outcome: Outcome<T>) -> anyhow::Result<T> {
    outcome.into_result().map_err(refused)
}

pub fn run(command: BoardCommand, globals: &Globals) -> CmdResult {
    run_command(command, globals).map_err(|err| name_the_board(err, globals))
}

/// A SQLite failure inside a transition carries no path of its own; say which board it was.
fn name_the_board(err: anyhow::Error, globals: &Globals) -> anyhow::Error {
    let pathless = err.chain().any(|e| {
        matches!(
            e.downcast_ref::<BoardError>(),
            Some(BoardError::Storage(StorageError::Sql(_)))
        )
    });
    if !pathless {
        return err;
    }
    let loc = root(globals)
        .ok()
        .and_then(|root| paths::resolve(&root, globals.board.as_deref()).ok());
    match loc {
        Some(loc) => err.context(format!("on the board {}", loc.describe())),
        None => err,
    }
}

fn run_command(mut command: BoardCommand, globals: &Globals) -> CmdResult {
    let json = globals.json;
    super::operator::resolve_ids(&mut command, globals)?;
    match command {
        BoardCommand::Init => init(globals),
        BoardCommand::Create(args) => create(args, globals),
        BoardCommand::List(args) => list(args, globals),
        BoardCommand::Show { id, events } => {
            let id = match task_arg(id, "show") {
                Ok(id) => id,
                Err(exit) => return Ok(exit),
            };
            show(&id, events, globals)
        }
        BoardCommand::Events { id, limit } => {
            let o = open_read(globals)?;
            o.board.get_task(&id)?;
            let events = o.board.events(&id, limit)?;
            if json {
                print_json(&events)?;
            } else {
                for e in &events {
                    println!("{}", event_line(e));
                }
            }
            Ok(Exit::OK)
        }
        BoardCommand::Claim { id, ttl, claimer } => {
            authorize(&id)?;
            // The configuration and the TTL are checked before the board is opened.
            let config = Config::load(&root(globals)?)?;
            let ttl_seconds = match ttl {
                Some(ttl) => board::check_seconds("--ttl", ttl)?,
                None => crate::dispatch::settings::claim_ttl_seconds(&config)?,
            };
            let o = open(globals)?;
            let lock = claimer
                .map(|c| c.trim().to_owned())
                .filter(|c| !c.is_empty())
                .unwrap_or_else(board::default_claim_lock);
            let spec = ClaimSpec {
                lock,
                ttl_seconds,
                origin: board::ClaimOrigin::External,
            };
            // A task in review is claimed for its reviewer (the review lane).
            let outcome = if o.board.get_task(&id)?.status == Status::Review {
                o.board.claim_review(&id, &spec, now())?
            } else {
                o.board.claim(&id, &spec, now())?
            };
            match outcome {
                ClaimOutcome::Claimed(c) => {
                    if json {
                        print_json(&c)?;
                    } else {
                        println!(
                            "claimed {} run {} as {} until {}",
                            line(&c.task_id),
                            c.run_id,
                            line(&c.claim_lock),
                            super::explain::when(c.claim_expires, now())
                        );
                    }
                    Ok(Exit::OK)
                }
                ClaimOutcome::Lost(r) => Err(refused(r)),
            }
        }
        BoardCommand::Heartbeat { id, note, ttl } => {
            let target = match lifecycle(id.as_deref())? {
                Ok(target) => target,
                Err(exit) => return Ok(exit),
            };
            let config = Config::load(&root(globals)?)?;
            let ttl_seconds = match ttl {
                Some(ttl) => board::check_seconds("--ttl", ttl)?,
                None => crate::dispatch::settings::claim_ttl_seconds(&config)?,
            };
            let o = open(globals)?;
            let fence = Fence {
                claim_lock: target.claim_lock,
                run_id: target.expected_run_id,
            };
            let hb = done(o.board.heartbeat(
                &target.task_id,
                &fence,
                note.as_deref(),
                ttl_seconds,
                now(),
            )?)?;
            print_out(json, &hb, || {
                format!(
                    "heartbeat {}: claim until {}",
                    hb.task_id,
                    super::explain::when(hb.claim_expires, now())
                )
            })
        }
        BoardCommand::Complete {
            id,
            summary,
            result,
            force,
        } => {
            let target = match lifecycle(id.as_deref())? {
                Ok(target) => target,
                Err(exit) => return Ok(exit),
            };
            let o = open(globals)?;
            let completion = Completion {
                expected_run_id: target.expected_run_id,
                summary,
                result,
                force,
            };
            let c = done(o.board.complete(&target.task_id, &completion, now())?)?;
            print_out(json, &c, || {
                let mut line = format!("completed {}", c.task_id);
                if !c.promoted.is_empty() {
                    line.push_str(&format!("; now ready: {}", c.promoted.join(", ")));
                }
                line
            })
        }
        BoardCommand::Block { id, reason, kind } => {
            let target = match lifecycle(id.as_deref())? {
                Ok(target) => target,
                Err(exit) => return Ok(exit),
            };
            let o = open(globals)?;
            let b = done(o.board.block(
                &target.task_id,
                kind,
                &reason,
                target.expected_run_id,
                now(),
            )?)?;
            print_out(json, &b, || {
                let mut line = format!("{} is now {}", b.task_id, b.status);
                match b.kind {
                    // The board changed the kind (a dependency block with no open parent
                    // waits on a person): say so, as the original does.
                    Some(recorded) if kind.is_some_and(|asked| asked != recorded) => {
                        let asked = kind.map(|k| k.to_string()).unwrap_or_default();
                        line.push_str(&format!(" (recorded as {recorded}, not {asked})"));
                    }
                    Some(recorded) => line.push_str(&format!(" ({recorded})")),
                    None => {}
                }
                line
            })
        }
        BoardCommand::Unblock { ids } => super::operator::each(&ids, globals, |id| {
            authorize(id)?;
            let o = open(globals)?;
            let m = done(o.board.unblock(id, now())?)?;
            print_out(json, &m, || format!("{} is now {}", m.task_id, m.to))
        }),
        BoardCommand::Archive { ids } => super::operator::each(&ids, globals, |id| {
            authorize(id)?;
            let o = open(globals)?;
            let a = done(o.board.archive(id, now())?)?;
            print_out(json, &a, || {
                let mut line = format!("archived {} (was {})", a.task_id, a.prev_status);
                if let Some(pid) = a.worker_pid {
                    line.push_str(&format!(
                        "; its worker pid {pid}{} may still be running",
                        on_host(a.claim_lock.as_deref())
                    ));
                }
                line
            })
        }),
        BoardCommand::Edit(args) => super::operator::edit(args, globals),
        BoardCommand::Review { command } => super::review::run(command, globals),
        BoardCommand::Reopen { id, reason } => {
            authorize(&id)?;
            let o = open(globals)?;
            let r = done(o.board.reopen(&id, reason.as_deref(), now())?)?;
            print_out(json, &r, || {
                let mut line = format!("reopened {}; now {}", r.task_id, r.status);
                for i in &r.invalidated {
                    line.push_str(&format!(
                        "\n  {} was {}, now todo{}",
                        i.task_id,
                        i.prior_status,
                        i.worker_pid
                            .map(|p| format!(
                                " (its worker pid {p}{} is terminated by its host's dispatcher)",
                                on_host(i.claim_lock.as_deref())
                            ))
                            .unwrap_or_default()
                    ));
                }
                line
            })
        }
        BoardCommand::Reclaim { ids, reason } => super::operator::each(&ids, globals, |id| {
            authorize(id)?;
            let o = open(globals)?;
            let r = done(o.board.reclaim(id, reason.as_deref(), now())?)?;
            print_out(json, &r, || {
                let mut line = format!("reclaimed {}; now {}", r.task_id, r.retry_status);
                if let Some(pid) = r.worker_pid {
                    line.push_str(&format!(
                        "; its worker pid {pid}{} may still be running",
                        on_host(r.prev_lock.as_deref())
                    ));
                }
                line
            })
        }),
        BoardCommand::Assign { id, assignee, none } => {
            authorize(&id)?;
            let o = open(globals)?;
            let target = if none { None } else { assignee.as_deref() };
            let a = done(o.board.assign(&id, target, now())?)?;
            print_out(json, &a, || {
                format!(
                    "{} assigned to {}",
                    a.task_id,
                    line(a.to.as_deref().unwrap_or("nobody"))
                )
            })
        }
        BoardCommand::Comment { id, body, author } => {
            let id = match lifecycle(Some(&id))? {
                Ok(target) => target.task_id,
                Err(exit) => return Ok(exit),
            };
            let o = open(globals)?;
            // A worker comments as itself: its profile (or task), never a name it chose.
            let author = match gates::default_task_id(None) {
                Some(task) => o
                    .board
                    .get_task(&task)
                    .ok()
                    .and_then(|t| t.assignee)
                    .unwrap_or(task),
                None => author.unwrap_or_else(|| "operator".to_owned()),
            };
            let comment_id = o.board.comment(&id, &author, &body, now())?;
            #[derive(Serialize)]
            struct Commented<'a> {
                id: i64,
                task_id: &'a str,
                author: &'a str,
            }
            let c = Commented {
                id: comment_id,
                task_id: &id,
                author: &author,
            };
            print_out(json, &c, || format!("comment {comment_id} on {id}"))
        }
        BoardCommand::Link { parent, child } => {
            authorize(&child)?;
            let o = open(globals)?;
            let l = done(o.board.link(&parent, &child, now())?)?;
            print_out(json, &l, || {
                format!("{} depends on {} ({})", l.child, l.parent, l.child_status)
            })
        }
        BoardCommand::Unlink { parent, child } => {
            authorize(&child)?;
            let o = open(globals)?;
            let l = done(o.board.unlink(&parent, &child, now())?)?;
            print_out(json, &l, || {
                format!(
                    "{} no longer depends on {} ({})",
                    l.child, l.parent, l.child_status
                )
            })
        }
        BoardCommand::Promote { ids, reason } => super::operator::each(&ids, globals, |id| {
            authorize(id)?;
            let o = open(globals)?;
            let m = done(
                o.board
                    .promote(id, Some("operator"), reason.as_deref(), now())?,
            )?;
            print_out(json, &m, || format!("{} is now {}", m.task_id, m.to))
        }),
        BoardCommand::Boards { command } => boards(command, globals),
        BoardCommand::Fsck => {
            let o = open_read(globals)?;
            let violations = o.board.fsck_at(now())?;
            if json {
                #[derive(Serialize)]
                struct Report<'a> {
                    ok: bool,
                    board: &'a str,
                    violations: &'a [board::Violation],
                }
                print_json(&Report {
                    ok: violations.is_empty(),
                    board: &o.loc.slug,
                    violations: &violations,
                })?;
            } else if violations.is_empty() {
                println!("board {} is consistent", o.loc.slug);
            }
            for v in &violations {
                eprintln!("kanban fsck: {v}");
            }
            Ok(if violations.is_empty() {
                Exit::OK
            } else {
                Exit(1)
            })
        }
    }
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

fn init(globals: &Globals) -> CmdResult {
    fence()?;
    let root = root(globals)?;
    let loc = paths::resolve(&root, globals.board.as_deref())?;
    let existed = loc.postgres().is_some() || loc.db_path.exists();
    Board::open(&loc, &OpenOptions::create())?;
    #[derive(Serialize)]
    struct Init<'a> {
        board: &'a str,
        db_path: &'a Path,
        created: bool,
    }
    print_out(
        globals.json,
        &Init {
            board: &loc.slug,
            db_path: &loc.db_path,
            created: !existed,
        },
        || {
            format!(
                "board {} {} at {}",
                loc.slug,
                if existed { "ready" } else { "created" },
                loc.describe()
            )
        },
    )
}

fn create(args: CreateArgs, globals: &Globals) -> CmdResult {
    fence()?;
    let body = super::operator::read_body(args.body, args.body_file.as_deref())?;
    let o = open(globals)?;
    let new = NewTask {
        title: args.title,
        body,
        assignee: args.assignee,
        parents: args.parents,
        priority: args.priority,
        idempotency_key: args.idempotency_key,
        max_runtime_seconds: args.max_runtime,
        triage: args.triage,
        blocked: args.blocked,
        created_by: gates::default_task_id(None),
        goal_mode: args.goal,
        goal_max_turns: args.max_turns.map(i64::from),
        max_retries: args.max_retries,
        ..NewTask::default()
    };
    let created = o.board.create_task(&new, now())?;
    if globals.json {
        print_json(&created)?;
    } else {
        println!("{}", created.id);
    }
    Ok(Exit::OK)
}

fn list(args: ListArgs, globals: &Globals) -> CmdResult {
    let o = open_read(globals)?;
    let tasks = o.board.list_tasks(&TaskFilter {
        statuses: args.statuses,
        assignee: args.assignee,
        include_archived: args.all,
        limit: None,
    })?;
    if globals.json {
        print_json(&tasks)?;
    } else {
        for t in &tasks {
            println!("{}", task_line(t));
        }
    }
    Ok(Exit::OK)
}

fn task_line(t: &Task) -> String {
    format!(
        "{}  {:<9} p{:<3} {:<12} {}",
        t.id,
        t.status.as_str(),
        t.priority,
        line(t.assignee.as_deref().unwrap_or("-")),
        line(&t.title)
    )
}

fn event_line(e: &board::StoredEvent) -> String {
    let now = now();
    let payload = e
        .payload
        .as_ref()
        .map(|p| format!(" {}", super::explain::readable_payload(p, now)))
        .unwrap_or_default();
    let run = e.run_id.map(|r| format!(" run={r}")).unwrap_or_default();
    // JSON escapes C0 controls but not DEL or the C1 range; escape the whole line.
    let at = super::explain::when(e.created_at, now);
    line(&format!("{at} {}{run}{payload}", e.kind)).into_owned()
}

/// `turn <n> of run <r>: <kind>, <exit class> (exit <code>), <seconds> s`.
fn turn_line(e: &board::StoredEvent) -> String {
    let p = e.payload.clone().unwrap_or_default();
    let run = e.run_id.map_or("-".to_owned(), |r| r.to_string());
    line(&format!(
        "turn {} of run {run}: {}, {} (exit {}), {} s",
        p["turn"],
        p["kind"].as_str().unwrap_or("?"),
        p["exit"].as_str().unwrap_or("?"),
        p["exit_code"],
        p["seconds"]
    ))
    .into_owned()
}

fn show(id: &str, events: usize, globals: &Globals) -> CmdResult {
    let o = open_read(globals)?;
    let task = o.board.get_task(id)?;
    let parents = o.board.parents(id)?;
    let children = o.board.children(id)?;
    let runs = o.board.runs(id)?;
    let comments = o.board.comments(id)?;
    let recent = o.board.events(id, Some(events))?;
    // Every agent turn of every run (the worker's `turn` events), oldest first.
    let mut turns: Vec<_> = o
        .board
        .events(id, None)?
        .into_iter()
        .filter(|e| e.kind == "turn")
        .collect();
    turns.sort_by_key(|e| e.id);
    if globals.json {
        print_json(&serde_json::json!({
            "task": task,
            "parents": parents,
            "children": children,
            "runs": runs,
            "turns": turns,
            "comments": comments,
            "events": recent,
        }))?;
        return Ok(Exit::OK);
    }
    println!("{}: {}", task.id, line(&task.title));
    println!(
        "status {}  priority {}  assignee {}",
        task.status,
        task.priority,
        line(task.assignee.as_deref().unwrap_or("-"))
    );
    if task.goal_mode {
        match task.goal_max_turns {
            Some(n) => println!("goal mode, at most {n} turns per run"),
            None => println!("goal mode, the profile's turn budget (default 20)"),
        }
    }
    let at = now();
    let all_events = o.board.events(id, None)?;
    for why in super::explain::why(&task, &runs, &all_events) {
        println!("{}", line(&why));
    }
    if let (Some(lock), Some(exp)) = (&task.claim_lock, task.claim_expires) {
        println!(
            "claimed by {} until {} (run {})",
            line(lock),
            super::explain::when(exp, at),
            task.current_run_id
                .map_or("-".to_owned(), |r| r.to_string())
        );
    }
    // Owner mode: the turn the owner admitted for the open run, and a pause an operator ends.
    if let Some(run) = task.current_run_id
        && let Some(turn) = o.board.owner_turn(id, run)?
    {
        let status = turn.status.as_deref().unwrap_or("admitted");
        if status == "unknown" {
            println!(
                "paused: the owner turn of run {run} is unknown (it may have had effects); \
                 `kanban owner resolve {id} --as interrupted|failed|completed` decides"
            );
        } else {
            println!("owner turn of run {run}: {}", line(status));
        }
    }
    if let Some(body) = &task.body {
        println!("\n  {}\n", block(body));
    }
    if let Some(result) = &task.result {
        println!("result: {}", line(result));
    }
    for p in &parents {
        println!(
            "parent  {} {:<9} {}",
            p.id,
            p.status.as_str(),
            line(&p.title)
        );
    }
    for c in &children {
        println!(
            "child   {} {:<9} {}",
            c.id,
            c.status.as_str(),
            line(&c.title)
        );
    }
    for r in &runs {
        println!(
            "run {} {} {}{}",
            r.id,
            r.status,
            line(r.outcome.as_deref().unwrap_or("open")),
            r.summary
                .as_deref()
                .map(|s| format!(": {}", line(s)))
                .unwrap_or_default()
        );
    }
    for t in &turns {
        println!("{}", turn_line(t));
    }
    for c in &comments {
        println!(
            "comment by {} at {}: {}",
            line(&c.author),
            super::explain::when(c.created_at, at),
            line(&c.body)
        );
    }
    for e in &recent {
        println!("event {}", event_line(e));
    }
    Ok(Exit::OK)
}

fn boards(command: BoardsCommand, globals: &Globals) -> CmdResult {
    let root = root(globals)?;
    match command {
        BoardsCommand::List => {
            let current = paths::resolve(&root, globals.board.as_deref())
                .map(|l| l.slug)
                .unwrap_or_else(|_| crate::home::DEFAULT_BOARD.to_owned());
            #[derive(Serialize)]
            struct Entry {
                slug: String,
                /// `sqlite` or `postgres`.
                store: &'static str,
                /// The SQLite file (null for a PostgreSQL board).
                db_path: Option<PathBuf>,
                /// The PostgreSQL URL without its password (null for a SQLite board).
                url: Option<String>,
                exists: bool,
                current: bool,
            }
            let entries: Vec<Entry> = paths::list_boards(&root)?
                .into_iter()
                .map(|b| Entry {
                    exists: b.exists(),
                    current: b.slug == current,
                    store: b.store.kind(),
                    url: b.postgres().map(crate::db::target::PgTarget::redacted),
                    db_path: b.postgres().is_none().then(|| b.db_path.clone()),
                    slug: b.slug,
                })
                .collect();
            if globals.json {
                print_json(&entries)?;
            } else {
                for e in &entries {
                    println!(
                        "{} {}{}{}",
                        if e.current { "*" } else { " " },
                        e.slug,
                        e.url
                            .as_deref()
                            .map(|u| format!(" (postgres {u})"))
                            .unwrap_or_default(),
                        if e.exists { "" } else { " (not created yet)" }
                    );
                }
            }
            Ok(Exit::OK)
        }
        BoardsCommand::Create {
            slug,
            url: Some(url),
        } => super::pgboards::create(&root, &slug, &url, globals),
        BoardsCommand::Migrate { slug, to } => super::pgboards::migrate(&root, &slug, &to, globals),
        BoardsCommand::Create { slug, url: None } => {
            fence()?;
            paths::validate_new_slug(&slug)?;
            // A board kanban.toml puts in PostgreSQL is created there, never as a SQLite file
            // the configuration would hide.
            // (A board folder that cannot be read holds no recorded URL; creating the SQLite
            // file there fails below with its own message.)
            let located = match paths::locate(&root, &slug) {
                Err(crate::home::HomeError::ReadUrlFile { .. }) => None,
                other => Some(other?),
            };
            if let Some(target) = located.as_ref().and_then(BoardLocation::postgres) {
                if matches!(target.source(), crate::db::target::UrlSource::Config(_)) {
                    return super::pgboards::create_configured(&slug, target, globals);
                }
                return Err(crate::home::HomeError::BoardExists {
                    path: crate::home::url_file(&root, &slug),
                    slug,
                }
                .into());
            }
            let path = paths::db_path(&root, &slug);
            match Board::create_new(&path, &OpenOptions::create()) {
                Ok(()) => {}
                Err(BoardError::Storage(StorageError::FileExists { .. })) => {
                    return Err(crate::home::HomeError::BoardExists { slug, path }.into());
                }
                Err(err) => {
                    return Err(anyhow::Error::new(err).context(format!(
                        "cannot create board `{slug}`; nothing was left behind, so the same command can be retried"
                    )));
                }
            }
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
        BoardsCommand::Rm { slug } => super::operator::remove_board(&root, &slug, globals),
        BoardsCommand::Switch { slug } => {
            fence()?;
            paths::switch_board(&root, &slug)?;
            #[derive(Serialize)]
            struct Switched<'a> {
                current: &'a str,
            }
            print_out(globals.json, &Switched { current: &slug }, || {
                format!("current board is now {slug}")
            })
        }
    }
}

/// ` on <host>` for a claim lock `"<host>:<pid>"`: a worker pid means something only on the host
/// that claimed it (empty when the lock is missing or has no host part).
fn on_host(lock: Option<&str>) -> String {
    lock.and_then(|l| l.rsplit_once(':'))
        .map(|(host, _)| host)
        .filter(|h| !h.is_empty())
        .map(|h| format!(" on {}", line(h)))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::on_host;

    #[test]
    fn a_worker_pid_is_named_with_the_host_of_its_claim() {
        assert_eq!(on_host(Some("host-b:123")), " on host-b");
        assert_eq!(on_host(Some("a.example:org:9")), " on a.example:org");
        assert_eq!(on_host(Some(":9")), "");
        assert_eq!(on_host(Some("no-pid")), "");
        assert_eq!(on_host(None), "");
    }
}
