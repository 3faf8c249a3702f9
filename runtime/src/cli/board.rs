//! `kanban` subcommands of the board concern: their clap definitions and the dispatcher, one
//! line per subcommand, calling one function per subcommand: the task commands in [`super::tasks`]
//! (grouped by verb family), `review …` in [`super::review`], `boards …` in [`super::boards`].
//! Before any command runs, every id given as a unique prefix is resolved ([`resolve_ids`]).
//!
//! Every command that changes the board first passes the delegated-child fence
//! ([`crate::identity::fence::check_board_mutation`]); commands that change an existing task also
//! pass the worker-ownership gate ([`crate::gates::check_mutation`]): inside a dispatcher-owned
//! worker only its own task may be changed. `link` and `unlink` change the child (its parents, and
//! its status when it is demoted to `todo` or promoted), so the child is the task checked. Read
//! commands fall back to a read-only open when this user may not write the board file or its
//! folder. The agent-facing lifecycle commands (`complete`, `block`, `heartbeat`, `comment`, and
//! `show`) default their task through [`crate::gates::default_task_id`] and pass the owned run id,
//! so a superseded worker cannot close its successor's run.
//!
//! Exit codes: 0 ok, 1 error, 2 usage, 3 refused (a lost compare-and-swap, a stale run, a live
//! claim, not the owner).

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

use super::boards::{self, BoardsCommand};
use super::review::{self, ReviewCommand};
use super::session::{JsonObject, is_full_id, open_read, parse_metadata, parse_seconds, root};
use super::tasks::attach;
use super::tasks::create::{self, CreateArgs};
use super::tasks::graph::{self, DecomposeArgs, ScheduleArgs, SpecifyArgs};
use super::tasks::observe::{self, DiagnosticsArgs, RunsArgs, WatchArgs};
use super::tasks::operator::{self, EditArgs, PromoteMode};
use super::tasks::read::{self, ListArgs};
use super::tasks::recipe::{self, RecipeCommand, SwarmArgs};
use super::tasks::workspace;
use super::tasks::{context, lifecycle, proof, purge, repair, steering};
use super::{CmdResult, Globals};
use crate::acceptance::{Evidence, PrRef};
use crate::board::StorageError;
use crate::board::{BlockKind, BoardError};
use crate::home as paths;

#[derive(Debug, clap::Subcommand)]
pub enum BoardCommand {
    /// Create the board database (the default board, or --board SLUG) if it does not exist.
    Init,
    /// Create a task; prints its id ({"id": …} with --json).
    Create(Box<CreateArgs>),
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
        /// Keep printing each new event as it is committed, until interrupted (--json: one
        /// object per line).
        #[arg(long)]
        follow: bool,
    },
    /// Task-graph templates: check, preview, create or export a recipe.
    Recipe {
        #[command(subcommand)]
        command: RecipeCommand,
    },
    /// Create a swarm: parallel worker cards → a verifier → a synthesizer, in one transaction.
    Swarm(SwarmArgs),
    /// Counts by status and by assignee, and the age of the oldest ready task.
    Stats,
    /// What is wrong with the board's tasks (seven rules), worst first, with the commands that
    /// recover them. --json: {diagnostics: [{task_id, …, diagnostics}], count}.
    Diagnostics(DiagnosticsArgs),
    /// This home's profiles and every assignee on the board, with their tasks per status.
    Assignees,
    /// Runs of every task, newest first (--json: an array of runs).
    Runs(RunsArgs),
    /// Print each new event of the board as it is committed, until interrupted (--json: one
    /// object per line).
    Watch(WatchArgs),
    /// Claim a ready task (a review task: for its reviewer): prints {"task_id","run_id","claim_lock","claim_expires"}; exit 3 if lost.
    Claim {
        id: String,
        /// Lease length: seconds, or 90s, 30m, 2h, 1d (default: $HERMES_KANBAN_CLAIM_TTL_SECONDS, else the config's
        /// [dispatch] claim_ttl_seconds, else 900).
        #[arg(long, allow_negative_numbers = true, value_name = "DURATION", value_parser = parse_seconds)]
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
        /// New lease length from now (seconds, or 90s, 30m, 2h, 1d) (default as for `claim`).
        #[arg(long, allow_negative_numbers = true, value_name = "DURATION", value_parser = parse_seconds)]
        ttl: Option<i64>,
    },
    /// Mark a task done (closes its run, promotes children whose parents are all finished).
    Complete {
        /// Task id (default: this worker's task).
        id: Option<String>,
        /// What was done: the handoff the next worker reads (stored on the closing run).
        #[arg(long)]
        summary: Option<String>,
        /// The structured handoff, a JSON object (stored on the closing run as its metadata).
        #[arg(long, value_name = "JSON", value_parser = parse_metadata)]
        metadata: Option<JsonObject>,
        #[arg(long)]
        result: Option<String>,
        /// The cards this task's worker created; an id that does not exist or is not this
        /// task's refuses the completion (exit 3).
        #[arg(long, value_name = "ID,…", value_delimiter = ',')]
        created_cards: Vec<String>,
        /// Complete even while another live claim holds the task.
        #[arg(long)]
        force: bool,
        /// A deliverable (relative: in the task's workspace); one from a scratch workspace is
        /// copied into the task's attachments before the workspace is cleaned up.
        #[arg(long = "artifact", value_name = "PATH", num_args = 1..)]
        artifacts: Vec<std::path::PathBuf>,
        /// A receipt of what proves the work done, KIND=DETAIL (kind and detail non-empty);
        /// a task created with --completion-contract evidence-required needs at least one.
        #[arg(long = "evidence", value_name = "KIND=DETAIL", num_args = 1..,
              value_parser = parse_evidence)]
        evidence: Vec<Evidence>,
    },
    /// Let the dispatcher start task ID once more although a comment names its open pull
    /// request PR-URL (the active_pr guard), for a worker that must amend that same pull
    /// request; checked read-only on GitHub with your gh login, it lasts for one run.
    #[command(name = "authorize-existing-pr")]
    AuthorizeExistingPr {
        id: String,
        /// https://github.com/OWNER/REPO/pull/N, named in the task's body or a comment.
        #[arg(value_name = "PR-URL", value_parser = parse_pr_url)]
        pr_url: PrRef,
        /// Why the task may amend that pull request (recorded with the grant).
        #[arg(long)]
        reason: String,
        /// The pull request's head branch (default: the task's branch, else the PR's own).
        #[arg(long, value_name = "NAME")]
        branch: Option<String>,
        /// Who authorizes (default "operator").
        #[arg(long, value_name = "NAME")]
        operator: Option<String>,
    },
    /// Print the prompt the next worker of a task would get (its body, its parents' handoffs,
    /// its prior attempts, its assignee's recent work, its comments).
    Context {
        /// Task id (default: this worker's task).
        id: Option<String>,
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
    /// Move blocked or scheduled tasks back to ready (todo while a parent is unfinished); one
    /// line per id.
    Unblock {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
        /// Why: left as a comment on each task.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Archive tasks (from any status); one line per id.
    Archive {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
        /// Then delete each for good, as `kanban delete` (refused while it runs or while its
        /// own workspace is still on disk; the task then stays archived).
        #[arg(long)]
        rm: bool,
    },
    /// Delete tasks for good, with their runs, events, comments, links and attachments
    /// (refused while a task runs); one line per id.
    Delete {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
    /// Change a task's title, body, priority, retry limit or (before it first runs) workspace
    /// (records an `edited` event).
    Edit(EditArgs),
    /// Remove what finished tasks left behind and may go: their workspaces (a worktree only
    /// when clean and pushed; never a dir: one), events older than [gc] event_retention_days
    /// and worker logs older than [gc] log_retention_days (30 days by default). Says what it
    /// removed and what it kept.
    Gc {
        /// Say what would be removed, and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
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
        command: ReviewCommand,
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
    /// Attach files to a task (25 MiB each at most); the next worker's prompt lists them.
    Attach {
        id: String,
        #[arg(required = true, value_name = "FILE")]
        files: Vec<std::path::PathBuf>,
        /// Store the (one) file under this name.
        #[arg(long)]
        name: Option<String>,
        /// Content type (default: guessed from the name).
        #[arg(long, value_name = "TYPE")]
        content_type: Option<String>,
        /// Uploader name (ignored inside a worker, which always attaches as itself).
        #[arg(long)]
        author: Option<String>,
    },
    /// List a task's attachments. --json: an array of attachments.
    Attachments { id: String },
    /// Remove a task's attachment NAME (its stored name, or its id).
    #[command(name = "attach-rm")]
    AttachRm { id: String, name: String },
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
        /// Promote even while a parent is unfinished (the event lists the parents).
        #[arg(long)]
        force: bool,
        /// Say what would happen, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Fan a triage task out into children from a JSON list, in one transaction: the siblings
    /// linked as listed, the root linked under every child (it wakes when the last is done)
    /// and moved to todo.
    Decompose(DecomposeArgs),
    /// Specify a triage task by hand (title, body, assignee) and move it to todo (ready when
    /// no parent is unfinished).
    Specify(SpecifyArgs),
    /// Park a task in scheduled until a time; the dispatcher wakes it (ready, or todo while a
    /// parent is unfinished).
    Schedule(ScheduleArgs),
    /// Hand a task to another profile; --reclaim takes it back from a running worker first.
    Reassign {
        id: String,
        profile: String,
        /// Reclaim a running or claimed task first (its run is closed as reclaimed).
        #[arg(long)]
        reclaim: bool,
        /// Why (the reclaim's reason).
        #[arg(long, requires = "reclaim")]
        reason: Option<String>,
    },
    /// Pin a task's model (and provider, reasoning effort) for its next run; no MODEL clears
    /// all three.
    SetModel {
        id: String,
        model: Option<String>,
        /// The model's provider (needs MODEL).
        #[arg(long, value_name = "PROVIDER")]
        provider: Option<String>,
        /// Reasoning effort: none, minimal, low, medium, high or xhigh.
        #[arg(long, value_name = "LEVEL")]
        reasoning: Option<String>,
    },
    /// The profiles of kanban.toml: agent, limits and the argv a command profile runs
    /// (--task ID: with that task's placeholders filled).
    Profiles {
        #[arg(long, value_name = "ID")]
        task: Option<String>,
    },
    /// List, create, remove, migrate and switch boards.
    Boards {
        #[command(subcommand)]
        command: BoardsCommand,
    },
    /// Check the board's invariants; exit 1 naming each violation.
    Fsck,
    /// Repair the board file when only its indexes are damaged: a quarantine backup copy
    /// first, then REINDEX (a healthy board is left alone; SQLite boards only).
    Repair,
}

/// `complete --evidence KIND=DETAIL`.
fn parse_evidence(raw: &str) -> Result<Evidence, crate::acceptance::EvidenceError> {
    Evidence::parse(raw)
}

/// `authorize-existing-pr ID PR-URL`: an exact pull-request URL.
fn parse_pr_url(raw: &str) -> Result<PrRef, String> {
    PrRef::parse_authorizable(raw).ok_or_else(|| {
        format!("malformed PR URL {raw:?}: expected https://github.com/OWNER/REPO/pull/NUMBER")
    })
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
    resolve_ids(&mut command, globals)?;
    let g = globals;
    match command {
        BoardCommand::Init => create::init(g),
        BoardCommand::Create(args) => create::create(*args, g),
        BoardCommand::List(args) => read::list(args, g),
        BoardCommand::Show { id, events } => read::show(id, events, g),
        BoardCommand::Events {
            id,
            limit,
            follow: true,
        } => observe::follow_events(&id, limit, g),
        BoardCommand::Events { id, limit, .. } => read::events(&id, limit, g),
        BoardCommand::Recipe { command } => recipe::run(command, g),
        BoardCommand::Swarm(args) => recipe::swarm(args, g),
        BoardCommand::Stats => observe::print_stats(g),
        BoardCommand::Diagnostics(args) => observe::print_diagnostics(&args, g),
        BoardCommand::Assignees => observe::print_assignees(g),
        BoardCommand::Runs(args) => observe::print_runs(args, g),
        BoardCommand::Watch(args) => observe::watch_board(&args, g),
        BoardCommand::Fsck => read::fsck(g),
        BoardCommand::Repair => repair::repair(g),
        BoardCommand::Claim { id, ttl, claimer } => lifecycle::claim(&id, ttl, claimer, g),
        BoardCommand::Heartbeat { id, note, ttl } => {
            lifecycle::heartbeat(id.as_deref(), note.as_deref(), ttl, g)
        }
        BoardCommand::Complete {
            id,
            summary,
            metadata,
            result,
            created_cards,
            force,
            artifacts,
            evidence,
        } => lifecycle::complete(
            id.as_deref(),
            lifecycle::Handoff {
                summary,
                metadata,
                result,
                created_cards,
                evidence,
            },
            force,
            &artifacts,
            g,
        ),
        BoardCommand::Context { id } => context::context(id.as_deref(), g),
        BoardCommand::AuthorizeExistingPr {
            id,
            pr_url,
            reason,
            branch,
            operator,
        } => proof::authorize_existing_pr(&id, &pr_url, &reason, branch.as_deref(), operator, g),
        BoardCommand::Block { id, reason, kind } => {
            lifecycle::block(id.as_deref(), &reason, kind, g)
        }
        BoardCommand::Comment { id, body, author } => lifecycle::comment(&id, &body, author, g),
        BoardCommand::Attach {
            id,
            files,
            name,
            content_type,
            author,
        } => attach::attach(
            &id,
            &files,
            name.as_deref(),
            content_type.as_deref(),
            author,
            g,
        ),
        BoardCommand::Attachments { id } => attach::list(&id, g),
        BoardCommand::AttachRm { id, name } => attach::remove(&id, &name, g),
        BoardCommand::Edit(args) => operator::edit(args, g),
        BoardCommand::Unblock { ids, reason } => operator::unblock(&ids, reason.as_deref(), g),
        BoardCommand::Archive { ids, rm: false } => operator::archive(&ids, g),
        BoardCommand::Archive { ids, rm: true } => purge::archive_rm(&ids, g),
        BoardCommand::Delete { ids } => purge::delete(&ids, g),
        BoardCommand::Gc { dry_run } => workspace::gc(dry_run, g),
        BoardCommand::Reopen { id, reason } => operator::reopen(&id, reason.as_deref(), g),
        BoardCommand::Reclaim { ids, reason } => operator::reclaim(&ids, reason.as_deref(), g),
        BoardCommand::Assign { id, assignee, none } => {
            operator::assign(&id, if none { None } else { assignee.as_deref() }, g)
        }
        BoardCommand::Link { parent, child } => operator::link(&parent, &child, g),
        BoardCommand::Unlink { parent, child } => operator::unlink(&parent, &child, g),
        BoardCommand::Promote {
            ids,
            reason,
            force,
            dry_run,
        } => operator::promote(&ids, reason.as_deref(), PromoteMode { force, dry_run }, g),
        BoardCommand::Decompose(args) => graph::decompose(args, g),
        BoardCommand::Specify(args) => graph::specify(args, g),
        BoardCommand::Schedule(args) => graph::schedule(args, g),
        BoardCommand::Reassign {
            id,
            profile,
            reclaim,
            reason,
        } => graph::reassign(
            &id,
            &profile,
            reclaim.then(|| reason.unwrap_or_default()).as_deref(),
            g,
        ),
        BoardCommand::SetModel {
            id,
            model,
            provider,
            reasoning,
        } => steering::set_model(
            &id,
            crate::board::ModelOverride {
                model,
                provider,
                reasoning,
            },
            g,
        ),
        BoardCommand::Profiles { task } => steering::profiles(task.as_deref(), g),
        BoardCommand::Review { command } => review::run(command, g),
        BoardCommand::Boards { command } => boards::run(command, g),
    }
}

/// Replaces every id of `command` that is not a full task id by the one task it is a prefix of
/// ([`crate::board::Board::resolve_task_id`]). A board that does not exist yet is left to the
/// command (it reports that itself).
fn resolve_ids(command: &mut BoardCommand, globals: &Globals) -> anyhow::Result<()> {
    let mut ids: Vec<&mut String> = Vec::new();
    match command {
        BoardCommand::Show { id, .. }
        | BoardCommand::Context { id }
        | BoardCommand::Heartbeat { id, .. }
        | BoardCommand::Complete { id, .. }
        | BoardCommand::Block { id, .. } => ids.extend(id.as_mut()),
        BoardCommand::Events { id, .. }
        | BoardCommand::Claim { id, .. }
        | BoardCommand::Reopen { id, .. }
        | BoardCommand::Assign { id, .. }
        | BoardCommand::Comment { id, .. }
        | BoardCommand::AuthorizeExistingPr { id, .. }
        | BoardCommand::Attach { id, .. }
        | BoardCommand::Attachments { id }
        | BoardCommand::AttachRm { id, .. } => ids.push(id),
        BoardCommand::Edit(args) => ids.push(&mut args.id),
        BoardCommand::Runs(args) => ids.extend(args.task.as_mut()),
        BoardCommand::Diagnostics(args) => ids.extend(args.task.as_mut()),
        BoardCommand::Decompose(args) => ids.extend(args.id.as_mut()),
        BoardCommand::Specify(args) => ids.push(&mut args.id),
        BoardCommand::Schedule(args) => ids.push(&mut args.id),
        BoardCommand::Reassign { id, .. } => ids.push(id),
        BoardCommand::SetModel { id, .. } => ids.push(id),
        BoardCommand::Profiles { task } => ids.extend(task.as_mut()),
        // Several ids: each is resolved on its own by [`each`], so one bad id spoils no other.
        BoardCommand::Unblock { .. }
        | BoardCommand::Archive { .. }
        | BoardCommand::Delete { .. }
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
        BoardCommand::Recipe { command } => {
            if let RecipeCommand::Export { id, .. } = command {
                ids.push(id);
            }
        }
        BoardCommand::Init
        | BoardCommand::Swarm(_)
        | BoardCommand::Stats
        | BoardCommand::Assignees
        | BoardCommand::Watch(_)
        | BoardCommand::List(_)
        | BoardCommand::Boards { .. }
        | BoardCommand::Gc { .. }
        | BoardCommand::Fsck
        | BoardCommand::Repair => {}
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
