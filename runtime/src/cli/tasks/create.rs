//! `kanban init` and `kanban create`: make the board, add a task to it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::acceptance::{Contract, ContractError};
use crate::board::{Board, NewTask, OpenOptions, WorkspaceSpec};
use crate::cli::session::{fence, now, open, print_out, read_body, root};
use crate::cli::{CmdResult, Exit, Globals, print_json};
use crate::gates;
use crate::home as paths;

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
    /// Runtime cap of one attempt: seconds, or 90s, 30m, 2h, 1d.
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true,
          value_parser = crate::cli::session::parse_seconds)]
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
    /// What must be true before the task may be done: local-only (the default),
    /// evidence-required (`complete --evidence KIND=DETAIL`), OWNER/REPO (the pull request the
    /// worker publishes in metadata.published_pr, green at its exact head) or an exact
    /// https://github.com/OWNER/REPO/pull/N (that pull request, green at its exact head).
    #[arg(long, value_name = "CONTRACT", value_parser = parse_contract)]
    pub completion_contract: Option<Contract>,
    #[command(flatten)]
    pub workspace: WorkspaceArgs,
    #[command(flatten)]
    pub steering: SteeringArgs,
}

/// What the task's agent is steered with (README "Steering a task").
#[derive(Debug, Default, clap::Args)]
pub struct SteeringArgs {
    /// The model the task's agent runs with (a `command` profile receives it as `{model}`).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// The model's provider (needs --model; `{provider}`).
    #[arg(long, value_name = "PROVIDER")]
    pub provider: Option<String>,
    /// Reasoning effort: none, minimal, low, medium, high or xhigh (`{reasoning}`).
    #[arg(long, value_name = "LEVEL")]
    pub reasoning: Option<String>,
    /// A skill (`<root>/skills/NAME.md`, or the profile's skills_dir) put before the worker's
    /// prompt (repeatable).
    #[arg(long = "skill", value_name = "NAME")]
    pub skills: Vec<String>,
}

fn parse_contract(value: &str) -> Result<Contract, ContractError> {
    Contract::parse(Some(value))
}

/// Where the task's agent works (README "Working on a repository").
#[derive(Debug, Default, clap::Args)]
pub struct WorkspaceArgs {
    /// Where the agent works: scratch (a fresh folder, removed when done; the default),
    /// dir:PATH (an absolute directory, never removed), worktree (a git worktree of the board's
    /// default workdir at <repo>/.worktrees/<id>) or worktree:PATH.
    #[arg(long, value_name = "KIND[:PATH]")]
    pub workspace: Option<String>,
    /// The worktree's branch (default wt/<task id>); an existing branch is reused.
    #[arg(long, value_name = "NAME")]
    pub branch: Option<String>,
    /// Where a new worktree branch starts (default: the repository's HEAD).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
}

impl WorkspaceArgs {
    fn given(&self) -> bool {
        self.workspace.is_some() || self.branch.is_some() || self.base.is_some()
    }

    /// The workspace these flags give, over `current` (an edited task's) for the parts not
    /// given; `None` when no flag is given. Checked whole, the filesystem only looked at.
    pub(in crate::cli) fn spec(
        &self,
        current: Option<&crate::board::Task>,
    ) -> anyhow::Result<Option<WorkspaceSpec>> {
        if !self.given() {
            return Ok(None);
        }
        let (kind, path) = match (&self.workspace, current) {
            (Some(value), _) => {
                let (kind, path) = crate::workspace::parse_flag(value)?;
                (Some(kind), path)
            }
            (None, Some(task)) => (
                crate::workspace::Kind::from_column(&task.workspace_kind),
                task.workspace_path.as_ref().map(PathBuf::from),
            ),
            (None, None) => (None, None),
        };
        // An edit keeps the task's branch and base unless it names new ones, or names a kind
        // that has none.
        let carries = kind.is_none_or(|k| k == crate::workspace::Kind::Worktree);
        let keep = |flag: &Option<String>, old: Option<&String>| {
            flag.clone().or_else(|| old.filter(|_| carries).cloned())
        };
        let spec = WorkspaceSpec {
            kind,
            path,
            branch: keep(&self.branch, current.and_then(|t| t.branch_name.as_ref())),
            base: keep(&self.base, current.and_then(|t| t.workspace_base.as_ref())),
        };
        spec.check()?;
        spec.check_branch_needs_worktree()?;
        if let Some(path) = &spec.path {
            crate::workspace::check_path(spec.kind(), path)?;
        }
        Ok(Some(spec))
    }
}

/// `kanban init`: creates the resolved board's database if it does not exist.
pub(in crate::cli) fn init(globals: &Globals) -> CmdResult {
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

/// `kanban create TITLE …`: prints the new task's id.
pub(in crate::cli) fn create(args: CreateArgs, globals: &Globals) -> CmdResult {
    fence()?;
    let workspace = args.workspace.spec(None)?.unwrap_or_default();
    let body = read_body(args.body, args.body_file.as_deref())?;
    let o = open(globals)?;
    let new = NewTask {
        workspace,
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
        completion_contract: args.completion_contract,
        skills: (!args.steering.skills.is_empty()).then_some(args.steering.skills),
        model: crate::board::ModelOverride {
            model: args.steering.model,
            provider: args.steering.provider,
            reasoning: args.steering.reasoning,
        },
        ..NewTask::default()
    };
    let now = now();
    let created = o.board.create_task(&new, now)?;
    if globals.json {
        print_json(&created)?;
    } else {
        println!("{}", created.id);
    }
    warn_without_dispatcher(&o.board, &o.loc.slug, now);
    Ok(Exit::OK)
}

/// Says on stderr when no dispatcher of any host recorded a recent tick on the board
/// (`board::ticks`): the task waits until one runs. The exit code is unchanged; an unreadable
/// record says nothing.
fn warn_without_dispatcher(board: &Board, slug: &str, now: i64) {
    if !board.records_ticks() {
        return;
    }
    let Ok(ticks) = board.dispatcher_ticks() else {
        return;
    };
    if ticks.iter().any(|t| t.running(now)) {
        return;
    }
    let last = ticks
        .first()
        .map(|t| {
            format!(
                "; the last tick was {}s ago, by {}",
                now - t.last_tick_at,
                crate::cli::escape::line(&t.dispatcher)
            )
        })
        .unwrap_or_else(|| "; none ever recorded a tick".to_owned());
    eprintln!(
        "kanban: warning: no dispatcher is running for board {slug}{last}: the task waits until \
         one runs (`kanban dispatch`, or its systemd unit)"
    );
}
