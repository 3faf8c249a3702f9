//! The spawned worker process (`kanban worker`): binds to its claim, heartbeats from its own
//! thread, builds the prompt, runs the profile's agent, records a claim-bound `worker_result`.
//!
//! Life of a worker (ARCHITECTURE.md §5):
//! 1. its identity comes from the gate (`gates::owned_identity`); without one it refuses (exit 1);
//! 2. it registers its pid and fingerprint on its run (`worker_registered`); if the run is no
//!    longer current it exits 0 at once **without** the exit trailer (the log belongs to the
//!    successor now);
//! 3. a heartbeat thread extends the claim every `min(TTL / 3, 60 s)` whatever the agent does;
//! 4. the prompt is built (task, body, parents' results, prior attempts, comments; bounded);
//! 5. the profile's agent runs its turns through the turn loop ([`turns`]): output streamed to
//!    the task log, each turn delimited and recorded as a `turn` event, a retryable failure
//!    retried in place, a goal task driven until done, blocked or out of budget, a classic task
//!    nudged at most [`MAX_NUDGES`] times when a turn ends without `complete` or `block`;
//! 6. it appends `worker_result {pid, claim_lock, exit_code, last_output}`, prints
//!    `[kanban-worker-exit] rc=<n>` as its last line and exits 0 / 1 / 75 / 78 / 130 — unless the
//!    turn loop found its run taken over (reclaimed between turns, or during a recovery's
//!    backoff): then it writes nothing more and exits 0 without the trailer, as at start-up.
//!
//! SIGTERM / SIGINT only set a flag: the worker keeps waiting for its agent (which, leading the
//! same process group, got the signal too), so it never exits while its agent still runs; then it
//! exits 130. It never reads `HERMES_KANBAN_*` itself and never writes SQL.
//!
//! Design decision: the worker's own connection commits with `synchronous=NORMAL`. It only writes
//! bookkeeping — the `worker_registered` pid stamp (the dispatcher already recorded the same pid
//! durably at spawn) and the `worker_result` event. In WAL mode such a commit is atomic and
//! survives a crash of any process; only a power cut can lose it, and the next `FULL` commit on
//! the board (a heartbeat, the completion) makes it durable anyway. Everything that decides state
//! — claims, heartbeats, completions, blocks, releases — keeps `synchronous=FULL`. This saves two
//! of the three fsyncs a short task costs its worker.
//!
//! Design decision: a profile that `kanban.toml` does not define (the dispatcher does not spawn
//! those, but the file may change in between) is a configuration error: exit 78, which blocks the
//! task until an operator fixes the configuration and unblocks it.

pub mod heartbeat;
pub mod logs;
pub mod managed;
pub mod prompt;
pub mod turns;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use std::io::Write;
use std::time::{Duration, Instant};

use crate::agent::{self, OutputSink, TurnExit};
use crate::board::{Board, BoardError, Durability, Event, Fence, OpenOptions, Outcome, RunStatus};
use crate::clock::Clock;
use crate::config::Config;
use crate::db::target::BoardLocation;
use crate::dispatch::Settings;
use crate::gates;
use crate::proc::exit::{EXIT_TRAILER, code};
use crate::proc::process;

use heartbeat::{Heartbeat, HeartbeatSpec};
use prompt::{AttemptView, CommentView, ParentView, PromptInput, RecentWorkView, TaskView};
use turns::{LoopEnd, TurnHost};

/// Stop nudges per worker.
pub(crate) const MAX_NUDGES: usize = 2;
/// The first line a worker writes to the task log once it is registered: `[kanban-run] run=<id>
/// task=<id> pid=<pid>`. Everything after it, up to the next such line, is that run's log.
pub(crate) const RUN_HEADER: &str = "[kanban-run] run=";
/// Characters of the agent's output kept in `worker_result.last_output`.
pub(crate) const LAST_OUTPUT_CHARS: usize = 1000;

/// Why the worker could not even start working (exit 1, or 78 for configuration).
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(
        "`kanban worker` runs only as a dispatcher-spawned worker: this process has no owned worker identity (HERMES_KANBAN_TASK) or runs in a delegated child"
    )]
    NotAWorker,
    #[error(
        "the worker identity of task {task} lacks {what}; it was not started by `kanban dispatch`"
    )]
    Incomplete { task: String, what: &'static str },
    #[error("worker for task {task}")]
    Board {
        task: String,
        #[source]
        source: BoardError,
    },
    #[error("worker for task {task}")]
    Home {
        task: String,
        #[source]
        source: Box<crate::home::HomeError>,
    },
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Settings(#[from] crate::dispatch::SettingsError),
    #[error("cannot start the heartbeat thread")]
    Thread(#[source] std::io::Error),
}

/// How the worker ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerEnd {
    /// The run was no longer current at start-up: nothing was done, no trailer is printed.
    Superseded,
    /// The worker ran; exit with this code after printing the trailer.
    Exit(i32),
}

/// Maps an agent's turn result to the worker's exit code.
pub fn exit_code(exit: TurnExit) -> i32 {
    match exit {
        TurnExit::Success => code::OK,
        TurnExit::RateLimited | TurnExit::Failed(code::RATE_LIMITED) => code::RATE_LIMITED,
        TurnExit::TerminalProvider | TurnExit::Failed(code::TERMINAL) => code::TERMINAL,
        TurnExit::Interrupted | TurnExit::Failed(code::INTERRUPTED) => code::INTERRUPTED,
        TurnExit::Failed(_) => code::FAILED,
    }
}

/// The trailer line the dispatcher reads when it did not reap the worker itself.
pub fn trailer(rc: i32) -> String {
    format!("\n{EXIT_TRAILER}{rc}")
}

/// Registers SIGTERM and SIGINT to set `flag` instead of killing the process.
pub(crate) fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        // Registration only fails for forbidden signals; these two are always allowed.
        let _ = signal_hook::flag::register(signal, Arc::clone(&flag));
    }
    flag
}

struct Bound {
    board: Board,
    task: String,
    run_id: i64,
    claim_lock: String,
    workspace: PathBuf,
    pid: i64,
    /// The board file (from `HERMES_KANBAN_DB`).
    db: PathBuf,
    behaviour: Behaviour,
    /// A managed worker's claim TTL, from the run's `claimed` event (`None`: the settings').
    claim_ttl: Option<i64>,
    /// The owner's managed worker: its claim proofs and its `worker_result` also need the run's
    /// latest `worker_bound` to name this process.
    managed: bool,
}

impl Bound {
    fn err(&self) -> impl Fn(BoardError) -> WorkerError + '_ {
        |source| WorkerError::Board {
            task: self.task.clone(),
            source,
        }
    }

    fn prompt_input(&self) -> Result<PromptInput, WorkerError> {
        prompt_input(
            &self.board,
            &self.task,
            Some(self.run_id),
            self.workspace.display().to_string(),
            gates::worker_guidance(),
        )
        .map_err(self.err())
    }
}

/// What the prompt of task `task_id` is built from, read from `board`: every closed run but
/// `current_run` is a prior attempt, each finished parent hands over its newest completed run's
/// summary and metadata (else its result), and the assignee's recent work on other tasks. The
/// worker and `kanban context` both build their prompt from this.
pub(crate) fn prompt_input(
    board: &Board,
    task_id: &str,
    current_run: Option<i64>,
    workspace: String,
    guidance: String,
) -> Result<PromptInput, BoardError> {
    let task = board.get_task(task_id)?;
    let mut parents = Vec::new();
    for p in board.parents(task_id)? {
        if !p.status.is_finished() {
            continue;
        }
        let full = board.get_task(&p.id)?;
        let handoff = board
            .runs(&p.id)?
            .into_iter()
            .filter(|r| r.outcome.as_deref() == Some("completed"))
            .max_by_key(|r| (r.started_at, r.id));
        let summary = handoff
            .as_ref()
            .and_then(|r| r.summary.clone())
            .filter(|s| !s.trim().is_empty());
        parents.push(ParentView {
            id: full.id,
            title: full.title,
            result: summary.or(full.result),
            metadata: handoff.as_ref().and_then(|r| r.metadata.clone()),
            completed_at: handoff.and_then(|r| r.ended_at).or(full.completed_at),
        });
    }
    let attempts = board
        .runs(task_id)?
        .into_iter()
        .filter(|r| Some(r.id) != current_run && !r.is_open())
        .map(|r| AttemptView {
            outcome: r.outcome.unwrap_or_else(|| r.status.clone()),
            profile: r.profile,
            started_at: r.started_at,
            summary: r.summary,
            error: r.error,
            metadata: r.metadata,
        })
        .collect();
    let recent_work = match task.assignee.as_deref() {
        Some(assignee) => board
            .recent_work(assignee, task_id, prompt::MAX_RECENT_WORK)?
            .into_iter()
            .map(|w| RecentWorkView {
                task_id: w.task_id,
                title: w.title,
                summary: w.summary,
                ended_at: w.ended_at,
            })
            .collect(),
        None => Vec::new(),
    };
    let comments = board
        .comments(task_id)?
        .into_iter()
        .map(|c| CommentView {
            id: c.id,
            author: c.author,
            body: c.body,
            created_at: c.created_at,
        })
        .collect();
    Ok(PromptInput {
        task: TaskView {
            id: task.id,
            title: task.title,
            body: task.body,
            assignee: task.assignee,
            tenant: task.tenant,
            workspace_kind: task.workspace_kind,
            workspace,
            branch: task.branch_name,
            max_runtime_seconds: task.max_runtime_seconds,
        },
        parents,
        attempts,
        recent_work,
        comments,
        attachments: crate::board::attachments::prompt_lines(&board.attachments(task_id)?),
        guidance,
    })
}

/// Runs the worker in this process. `root` is the kanban root (for `kanban.toml`); `log` receives
/// progress lines (the task log, via stdout). Returns how to exit.
pub fn run(
    root: &Path,
    clock: Arc<dyn Clock>,
    interrupted: &AtomicBool,
    log: &mut dyn std::io::Write,
) -> Result<WorkerEnd, WorkerError> {
    run_as(root, clock, interrupted, log, None)
}

/// Runs the owner's managed worker (README "Owner admission"): as [`run`], except that it binds
/// with `worker_bound` (the run's `worker_pid` stays the submitter's), takes its claim TTL from
/// the run's `claimed` event, and watches the submitter and the owner ([`managed`]).
pub(crate) fn run_managed(
    root: &Path,
    clock: Arc<dyn Clock>,
    interrupted: &AtomicBool,
    log: &mut dyn std::io::Write,
    watch: managed::Watch,
) -> Result<WorkerEnd, WorkerError> {
    run_as(root, clock, interrupted, log, Some(watch))
}

fn run_as(
    root: &Path,
    clock: Arc<dyn Clock>,
    interrupted: &AtomicBool,
    log: &mut dyn std::io::Write,
    watch: Option<managed::Watch>,
) -> Result<WorkerEnd, WorkerError> {
    let identity = gates::owned_identity().ok_or(WorkerError::NotAWorker)?;
    let task = identity.task.clone();
    let incomplete = |what| WorkerError::Incomplete {
        task: task.clone(),
        what,
    };
    let run_id = identity
        .run_id
        .ok_or_else(|| incomplete("HERMES_KANBAN_RUN_ID"))?;
    let claim_lock = identity
        .claim_lock
        .clone()
        .ok_or_else(|| incomplete("HERMES_KANBAN_CLAIM_LOCK"))?;
    let db = identity
        .db
        .clone()
        .ok_or_else(|| incomplete("HERMES_KANBAN_DB"))?;
    let workspace = identity
        .workspace
        .clone()
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")));
    let board_err = |source| WorkerError::Board {
        task: task.clone(),
        source,
    };
    // Durability NORMAL for this connection only: it writes the worker's own bookkeeping
    // (`worker_registered`, `worker_result`). See the module doc.
    let options = OpenOptions {
        durability: Durability::Normal,
        ..OpenOptions::default()
    };
    let board = match db
        .to_str()
        .filter(|d| crate::db::target::is_postgres_url(d))
    {
        // A PostgreSQL board: `HERMES_KANBAN_DB` is its URL without a password; resolution
        // completes it (kanban.toml, PGPASSWORD, ~/.pgpass) and the board layer opens it.
        Some(_) => {
            let location =
                crate::home::resolve(root, None).map_err(|source| WorkerError::Home {
                    task: task.clone(),
                    source: Box::new(source),
                })?;
            Board::open(&location, &options).map_err(board_err)?
        }
        None => Board::open_path(&db, &options).map_err(board_err)?,
    };

    let pid = i64::from(std::process::id());
    let fingerprint = process::fingerprint(std::process::id() as i32)
        .unwrap_or_else(|| process::UNVERIFIED.to_owned());
    let mut claim_ttl = None;
    if let Some(watch) = &watch {
        match managed::bind(
            &board,
            &task,
            run_id,
            &claim_lock,
            pid,
            &fingerprint,
            watch,
            clock.now(),
        )
        .map_err(board_err)?
        {
            Some(ttl) => claim_ttl = ttl,
            None => {
                let _ = writeln!(
                    log,
                    "kanban worker: not starting: the claim is no longer current"
                );
                return Ok(WorkerEnd::Superseded);
            }
        }
    } else {
        match board
            .register_worker(&task, run_id, &claim_lock, pid, &fingerprint, clock.now())
            .map_err(board_err)?
        {
            Outcome::Done(_) => {}
            Outcome::Refused(refusal) => {
                let _ = writeln!(log, "kanban worker: not starting: {refusal}");
                return Ok(WorkerEnd::Superseded);
            }
        }
    }
    let bound = Bound {
        board,
        task: task.clone(),
        run_id,
        claim_lock: claim_lock.clone(),
        workspace: workspace.clone(),
        pid,
        db: db.clone(),
        behaviour: Behaviour {
            goal_mode: identity.goal_mode,
            goal_max_turns: identity.goal_max_turns,
        },
        claim_ttl,
        managed: watch.is_some(),
    };
    // The managed worker's watch: ends the attempt (with a worker_result) when the submitter or
    // the owner is gone.
    let settled = Arc::new(AtomicBool::new(false));
    let watcher = match watch {
        Some(watch) => Some(
            managed::start_watch(
                watch,
                managed::Attempt {
                    db: db.clone(),
                    task: task.clone(),
                    run_id,
                    claim_lock: claim_lock.clone(),
                    pid,
                },
                Arc::clone(&settled),
                clock.clone(),
            )
            .map_err(WorkerError::Thread)?,
        ),
        None => None,
    };

    // The run header: `kanban logs --run N` finds a run's part of the task log by it.
    let _ = writeln!(log, "{RUN_HEADER}{run_id} task={task} pid={pid}");
    // From here on every path ends with a worker_result and the trailer, except a turn loop that
    // found its run taken over: then nothing more is written.
    let (rc, last_output) = match work(
        root,
        &bound,
        identity.board.as_deref(),
        clock.clone(),
        interrupted,
        log,
    ) {
        Ok(LoopEnd::Exit { code, last_output }) => (code, last_output),
        Ok(LoopEnd::Superseded) => return Ok(WorkerEnd::Superseded),
        Err(err) => {
            let message = crate::error_chain(&err);
            let _ = writeln!(log, "kanban worker: {message}");
            let rc = match err {
                WorkerError::Config(_) | WorkerError::Settings(_) => code::TERMINAL,
                _ => code::FAILED,
            };
            (rc, message)
        }
    };
    let rc = if interrupted.load(Ordering::SeqCst) && rc != code::OK {
        code::INTERRUPTED
    } else {
        rc
    };
    let output: String = last_output
        .chars()
        .skip(
            last_output
                .chars()
                .count()
                .saturating_sub(LAST_OUTPUT_CHARS),
        )
        .collect();
    let result = crate::board::WorkerResult {
        task_id: &task,
        run_id: Some(run_id),
        pid: bound.pid,
        claim_lock: Some(&bound.claim_lock),
        exit_code: rc,
        last_output: (!output.is_empty()).then_some(output.as_str()),
    };
    if settled.swap(true, Ordering::SeqCst) {
        // The watch is ending this attempt (its submitter or owner is gone) and recorded it.
        return Ok(WorkerEnd::Exit(code::FAILED));
    }
    if let Some(w) = watcher {
        w.stop();
    }
    if bound.managed {
        match bound.board.record_bound_worker_result(&result, clock.now()) {
            Ok(crate::board::admission::BoundResult::Recorded) => {}
            Ok(crate::board::admission::BoundResult::NotBound { bound_pid }) => {
                let _ = writeln!(
                    log,
                    "kanban worker: worker_result not recorded: the run is bound to {} now",
                    bound_pid.map_or_else(|| "no worker".to_owned(), |p| format!("pid {p}"))
                );
            }
            Err(err) => {
                let _ = writeln!(
                    log,
                    "kanban worker: could not record worker_result: {}",
                    crate::error_chain(&err)
                );
            }
        }
    } else if let Err(err) = bound.board.record_worker_result(&result, clock.now()) {
        let _ = writeln!(
            log,
            "kanban worker: could not record worker_result: {}",
            crate::error_chain(&err)
        );
    }
    clean_up(root, &bound, identity.board.as_deref(), clock.now(), log);
    Ok(WorkerEnd::Exit(rc))
}

/// Once the agent is gone and its run over: if the task is finished, what of its workspace may
/// go, goes ([`crate::cleanup::after_finish`]; the agent's own `kanban complete` leaves it to
/// this, so nothing is removed under a running agent). Said in the task log; never fails the run.
fn clean_up(
    root: &Path,
    bound: &Bound,
    board_slug: Option<&str>,
    now: i64,
    log: &mut dyn std::io::Write,
) {
    let scope = crate::cleanup::Scope {
        board: &bound.board,
        root,
        slug: board_slug.unwrap_or(crate::home::DEFAULT_BOARD),
        now,
        dry_run: false,
    };
    match crate::cleanup::after_finish(&scope, &bound.task) {
        Ok(steps) => {
            for step in steps.iter().filter(|s| s.action != "missing") {
                let _ = writeln!(
                    log,
                    "kanban worker: workspace of {} at {}: {}{}",
                    step.task_id,
                    step.path.display(),
                    step.action,
                    step.reason
                        .as_deref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                );
            }
        }
        Err(err) => {
            let _ = writeln!(
                log,
                "kanban worker: workspace cleanup failed: {}",
                crate::error_chain(&err)
            );
        }
    }
}

/// Heartbeat, prompt, the turn loop.
fn work(
    root: &Path,
    bound: &Bound,
    board_slug: Option<&str>,
    clock: Arc<dyn Clock>,
    interrupted: &AtomicBool,
    log: &mut dyn std::io::Write,
) -> Result<LoopEnd, WorkerError> {
    let db = bound.db.as_path();
    let config = Config::load(root)?;
    let location = BoardLocation {
        slug: board_slug.unwrap_or(crate::home::DEFAULT_BOARD).to_owned(),
        db_path: db.to_owned(),
        pinned: true,
        store: crate::db::target::Store::Sqlite,
    };
    let settings = Settings::new(root.to_owned(), location, &config)?;

    let heartbeat = match gates::auto_heartbeat_target() {
        Some(target) => Some(
            Heartbeat::start(
                HeartbeatSpec {
                    db: db.to_owned(),
                    task: target.task,
                    fence: Fence {
                        claim_lock: target.claim_lock,
                        run_id: target.run_id,
                    },
                    ttl_seconds: bound.claim_ttl.unwrap_or(settings.claim_ttl_seconds),
                    interval: settings.heartbeat_interval(),
                },
                clock.clone(),
            )
            .map_err(WorkerError::Thread)?,
        ),
        None => None,
    };
    let result = turns(&config, &settings, bound, clock, interrupted, log);
    if let Some(h) = heartbeat {
        h.stop();
    }
    result
}

/// Writes the agent's output to this process's stdout (the task log) as it arrives.
struct StdoutSink;

impl OutputSink for StdoutSink {
    fn write(&self, bytes: &[u8]) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(bytes);
        let _ = out.flush();
    }
}

/// The direct worker's side of the turn loop: its own board connection, fenced by its run.
struct DirectHost<'a> {
    bound: &'a Bound,
    clock: Arc<dyn Clock>,
    interrupted: &'a AtomicBool,
    sink: Arc<dyn OutputSink>,
}

impl TurnHost for DirectHost<'_> {
    fn run_status(&self) -> Result<RunStatus, BoardError> {
        self.bound.board.turn_run_status(
            &self.bound.task,
            self.bound.run_id,
            &self.bound.claim_lock,
        )
    }

    fn claim_is_live(&self) -> Result<bool, BoardError> {
        if self.bound.managed {
            return self.bound.board.bound_claim_is_live(
                &self.bound.task,
                self.bound.run_id,
                &self.bound.claim_lock,
                self.bound.pid,
                self.clock.now(),
            );
        }
        self.bound.board.claim_is_live(
            &self.bound.task,
            self.bound.run_id,
            &self.bound.claim_lock,
            self.clock.now(),
        )
    }

    fn block(&self, reason: &str) -> Result<bool, BoardError> {
        // A block decides state: it commits with full durability, unlike this worker's own
        // bookkeeping connection (see the module doc).
        let board = Board::open_path(&self.bound.db, &OpenOptions::default())?;
        let outcome = board.block(
            &self.bound.task,
            None,
            reason,
            Some(self.bound.run_id),
            self.clock.now(),
        )?;
        Ok(outcome.is_done())
    }

    fn record_turn(&self, event: &Event) -> Result<bool, BoardError> {
        let outcome = self.bound.board.record_turn(
            &self.bound.task,
            self.bound.run_id,
            &self.bound.claim_lock,
            event,
            self.clock.now(),
        )?;
        Ok(outcome.is_done())
    }

    fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    fn now(&self) -> i64 {
        self.clock.now()
    }

    fn backoff(&self, seconds: f64) -> Result<bool, BoardError> {
        let deadline = Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
        let mut next_proof = Instant::now() + BACKOFF_PROOF_EVERY;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(true);
            }
            if self.interrupted() {
                return Ok(false);
            }
            if now >= next_proof {
                if !self.claim_is_live()? {
                    return Ok(false);
                }
                next_proof = now + BACKOFF_PROOF_EVERY;
            }
            std::thread::sleep((deadline - now).min(BACKOFF_STEP));
        }
    }

    fn sink(&self) -> &Arc<dyn OutputSink> {
        &self.sink
    }

    fn comments_after(&self, after_id: i64) -> Result<Vec<crate::board::Comment>, BoardError> {
        self.bound.board.comments_after(&self.bound.task, after_id)
    }

    fn record_agent_session(&self, session: &agent::AgentSession) -> Result<bool, BoardError> {
        let value = serde_json::to_value(session).map_err(BoardError::from)?;
        let outcome = self.bound.board.record_agent_session(
            &self.bound.task,
            self.bound.run_id,
            &self.bound.claim_lock,
            &value,
        )?;
        Ok(outcome.is_done())
    }
}

/// How often the backoff wait wakes to check the interrupt flag.
const BACKOFF_STEP: Duration = Duration::from_millis(100);
/// How often the backoff wait re-proves the claim (a reclaim ends the wait early).
const BACKOFF_PROOF_EVERY: Duration = Duration::from_millis(500);

/// The behaviour keys the dispatcher injected (`HERMES_KANBAN_GOAL_MODE`, `_GOAL_MAX_TURNS`).
#[derive(Debug, Clone, Copy, Default)]
struct Behaviour {
    goal_mode: bool,
    goal_max_turns: Option<u32>,
}

fn turns(
    config: &Config,
    settings: &Settings,
    bound: &Bound,
    clock: Arc<dyn Clock>,
    interrupted: &AtomicBool,
    log: &mut dyn std::io::Write,
) -> Result<LoopEnd, WorkerError> {
    let now = clock.now();
    let input = bound.prompt_input()?;
    let profile_name = settings.profile_for(input.task.assignee.as_deref());
    let profile = config.profile(&profile_name, &settings.root)?;
    let task = bound.board.get_task(&bound.task).map_err(bound.err())?;
    let review = bound
        .board
        .is_review_run(&bound.task, bound.run_id)
        .map_err(bound.err())?;
    let steering = crate::home::steering::task_steering(
        &task,
        &config.skills_dir(&profile_name, &settings.root),
        review,
    );
    if !steering.missing.is_empty() {
        let _ = writeln!(
            log,
            "kanban worker: requested skills not found in {}: {}",
            steering.skills_dir.display(),
            steering.missing.join(", ")
        );
    }
    let prompt = format!(
        "{}{}",
        steering.prompt_preamble(),
        prompt::build(&input, now)
    );
    let script = input.task.body.clone().unwrap_or_default();
    // A `command` profile's argv gets the task's model, provider and reasoning effort through
    // its placeholders (an argument whose placeholder is unset is left out); a preset maps the
    // same steering to its CLI's own flags.
    let agent_steering = agent::Steering {
        profile: profile_name.clone(),
        model: steering.model.clone(),
        provider: steering.provider.clone(),
        reasoning_effort: steering.reasoning.clone(),
        skills: steering.requested.clone(),
        max_runtime_seconds: task.max_runtime_seconds,
    };
    let steered = crate::config::ProfileConfig {
        command: steering.expand_argv(&profile.command),
        ..profile.clone()
    };
    let profile = &steered;
    let mut agent = match agent::build_for(profile, &agent_steering) {
        Ok(agent) => agent,
        Err(err) => {
            let message = format!("profile `{profile_name}`: {}", crate::error_chain(&err));
            let _ = writeln!(log, "kanban worker: {message}");
            return Ok(LoopEnd::Exit {
                code: code::TERMINAL,
                last_output: message,
            });
        }
    };
    let behaviour = bound.behaviour;
    let goal = (behaviour.goal_mode || profile.goal).then(|| turns::Goal {
        task_id: bound.task.clone(),
        text: [Some(input.task.title.as_str()), input.task.body.as_deref()]
            .into_iter()
            .flatten()
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n"),
        max_turns: behaviour
            .goal_max_turns
            .or(profile.goal_max_turns)
            .unwrap_or(turns::DEFAULT_GOAL_MAX_TURNS)
            .max(1),
        judge: profile.judge.clone(),
    });
    let _ = writeln!(
        log,
        "kanban worker: task {} run {} pid {} profile {profile_name}{}",
        bound.task,
        bound.run_id,
        bound.pid,
        match &goal {
            Some(g) => format!(" goal (max {} turns)", g.max_turns),
            None => String::new(),
        }
    );
    let _ = log.flush();
    let plan = turns::Plan {
        prompt: &prompt,
        script: &script,
        workdir: Some(&bound.workspace),
        goal,
        recovery: turns::Recovery {
            budget: config
                .dispatch
                .turn_recovery
                .min(crate::config::TURN_RECOVERY_MAX),
            backoff_seconds: config.dispatch.turn_recovery_backoff_seconds.clone(),
        },
        stop_nudges: gates::stop_nudge_enabled(),
        comments_seen: input.comments.iter().map(|c| c.id).max().unwrap_or(0),
        own_author: input.task.assignee.as_deref(),
    };
    let host = DirectHost {
        bound,
        clock,
        interrupted,
        sink: Arc::new(StdoutSink),
    };
    turns::drive(agent.as_mut(), &host, &plan).map_err(bound.err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_exits_map_to_worker_exit_codes() {
        assert_eq!(exit_code(TurnExit::Success), 0);
        assert_eq!(exit_code(TurnExit::RateLimited), 75);
        assert_eq!(exit_code(TurnExit::Failed(75)), 75);
        assert_eq!(exit_code(TurnExit::TerminalProvider), 78);
        assert_eq!(exit_code(TurnExit::Failed(78)), 78);
        assert_eq!(exit_code(TurnExit::Interrupted), 130);
        assert_eq!(exit_code(TurnExit::Failed(3)), 1);
        assert_eq!(trailer(75), "\n[kanban-worker-exit] rc=75");
    }
}
