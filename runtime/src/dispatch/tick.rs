//! One dispatcher tick on one board (ARCHITECTURE.md §5 phases, §3 lease rules):
//!
//! 1. reap our exited children (their exit status feeds the crash sweep); stop **superseded
//!    workers**: a worker we saw running a run that is no longer current (an operator's
//!    `reclaim` or `archive` closed it; the run row keeps its pid and fingerprint) gets the same
//!    TERM → wait → KILL of its process group as at the runtime cap (`worker_superseded`);
//!    **unstarted claims**: a dispatcher's claim (its `claimed` event says `dispatcher: true`;
//!    never one made by `kanban claim`) with no worker pid and no heartbeat after the crash grace
//!    whose claiming dispatcher (the pid in its host-local claim lock) is gone — it died between its claim
//!    commit and the spawn — goes back to `ready` without counting a failure
//!    (`claim_abandoned`);
//! 2. expired claims: a live host-local worker with a fresh heartbeat gets its claim extended
//!    (`claim_extended`); otherwise it is terminated (TERM, wait, KILL) and, if it survived, the
//!    reclaim is deferred (`reclaim_deferred`) — **a claim is never released while our worker is
//!    alive** — else released (`reclaimed`, counted);
//! 3. orphans (running without a claim) whose worker is gone → `ready` (`reconciled`);
//! 4. stale heartbeats (`stale_timeout_seconds`, off by default) → terminate → `stale`;
//! 5. dead workers → classified from the reaped status or the log trailer: `protocol_violation`,
//!    `rate_limited`, `crashed` (terminal provider → blocked, sticky);
//! 6. runtime cap → terminate → `timed_out` (counted);
//! 7. promote `todo` tasks whose parents are done (each asked of the board's `pre_claim` policy
//!    first, when it has one: [`super::policy`]);
//! 8. spawn budget: `max_spawn` per board minus running, `max_in_progress` per host;
//! 9. claim and spawn, priority DESC then created_at ASC: the ready lane, then the review lane
//!    (`review` tasks claimed for their reviewer; one slot kept for it when it has work); pid +
//!    fingerprint recorded (`spawned`).
//!    A task whose previous run's worker (or its process group) is still alive on this host is
//!    not claimed until that worker is gone (`held_back`): a successor never runs beside it.
//!    A board with a `pre_claim` policy asks it about each pick; a denied task goes to `todo`
//!    (`dependency_wait {source: pre_claim}`), an allowed one is claimed only while unchanged.
//!
//! The tick is a library function over a [`Board`], [`Settings`], an injected [`Clock`] and a
//! [`Workers`] implementation, so tests run it on a scripted fake and benchmarks on a no-op
//! spawner. It takes no lock itself: [`super::run_tick`] wraps it in the per-board tick lock.
//! Every board write is a fenced compare-and-swap; a refusal means someone else acted first and
//! the row is simply skipped.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::board::{self, Board, BoardError, Event, Outcome, Status};
use crate::board::{Candidate, Failure, Release, RunningTask, Workload};
use crate::clock::Clock;

use super::guard::{self, Guard};
use super::policy::{Gate, Phase};
use super::settings::{PROTOCOL_VIOLATION_LIMIT, Settings};
use super::spawn::SpawnRequest;
use super::workers::{Reaped, Tracked, Workers};
use crate::proc::exit::{self, ExitClass, WorkerExit};
use crate::proc::process::{self, Liveness, Termination};

/// Seconds after its run closed before a still-running worker is terminated (reference: 120 s).
pub(crate) const TERMINAL_REAP_GRACE_SECONDS: i64 = 120;
/// Closed runs the terminal-worker reaper looks at per tick (bounds the first tick on a board
/// whose history predates the reaper).
const TERMINAL_REAP_BATCH: usize = 256;

/// Workers dying in one tick with the same error fingerprint that make the cause systemic: each
/// of their tasks is blocked at once instead of retried (reference: 3).
pub(crate) const SYSTEMIC_CRASH_THRESHOLD: usize = 3;

/// A dead worker classified, before its claim is released.
struct Death<'r> {
    task: &'r RunningTask,
    pid: i64,
    exit: WorkerExit,
    class: ExitClass,
    outcome: &'static str,
    event: Event,
    failure: Failure<'static>,
    error: String,
    fingerprint: String,
}

/// The error fingerprint of the crash breaker, after the original's normalisation: `pid <n>`
/// (and `pid=<n>`) becomes `pid n`, a number of 10 digits or more (a timestamp) `<ts>`,
/// lower-cased, at most 80 characters. Two additions make the same failure of different tasks
/// read the same: the worker's own log chrome (from `[kanban-` to the end of its line, and lines
/// starting `kanban worker:`, which name the task, run and pid) is dropped, and task ids `t_<hex>` become `t_<id>`; and
/// masking comes before the cut (the original cuts first, so pids of different lengths shift the
/// window).
pub(crate) fn error_fingerprint(error: &str) -> String {
    let kept: Vec<&str> = error
        .lines()
        .map(|l| l.find("[kanban-").map_or(l, |at| &l[..at]))
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("kanban worker:"))
        .collect();
    let lower = kept.join("\n").to_lowercase();
    let mut out = String::with_capacity(lower.len());
    let mut rest = lower.as_str();
    while let Some(c) = rest.chars().next() {
        if c.is_ascii_digit() {
            let digits = rest.len() - rest.trim_start_matches(|d: char| d.is_ascii_digit()).len();
            if out.ends_with("pid ") || out.ends_with("pid=") {
                out.push('n');
            } else if digits >= 10 {
                out.push_str("<ts>");
            } else {
                out.push_str(&rest[..digits]);
            }
            rest = &rest[digits..];
        } else if rest.starts_with("t_")
            && !out.ends_with(|p: char| p.is_alphanumeric() || p == '_')
            && rest[2..].starts_with(|h: char| h.is_ascii_hexdigit())
        {
            let hex = rest[2..].len()
                - rest[2..]
                    .trim_start_matches(|h: char| h.is_ascii_hexdigit())
                    .len();
            out.push_str("t_<id>");
            rest = &rest[2 + hex..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out.chars().take(80).collect()
}

/// A worker the tick started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpawnedWorker {
    pub task_id: String,
    pub title: String,
    pub run_id: i64,
    pub profile: String,
    /// The lane it was claimed from: `ready` (implementer) or `review` (reviewer).
    pub lane: Status,
    /// `None` in a dry run.
    pub pid: Option<i64>,
}

/// A task the respawn guard kept from being spawned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuardedTask {
    pub task_id: String,
    pub lane: Status,
    pub guard: Guard,
    /// Whether this tick noted it on the board (the first tick of this guard on this task).
    pub noted: bool,
}

/// A dead worker whose task the crash sweep released.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadWorker {
    pub task_id: String,
    pub pid: i64,
    pub exit: WorkerExit,
    pub class: ExitClass,
    /// Where the task went: `ready` or `blocked`.
    pub status: Status,
}

/// What one tick did. Lists hold task ids unless said otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TickReport {
    /// Another dispatcher held the board's tick lock; nothing was done.
    pub skipped_locked: bool,
    pub dry_run: bool,
    pub reaped: Vec<Reaped>,
    /// Tasks whose worker lingered after its run closed and was terminated.
    pub reaped_terminal: Vec<String>,
    /// Lifecycle hooks that failed since the previous report (`[hooks]`; the daemon loop fills
    /// it, a tick never runs hooks).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks_failed: Vec<super::hooks::HookEnded>,
    /// Triage cards `[dispatch] auto_decompose` decomposed (or failed to) since the previous
    /// report (the daemon loop fills it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auto_decomposed: Vec<super::decompose::AutoDecomposed>,
    pub extended: Vec<String>,
    pub deferred: Vec<String>,
    pub reclaimed: Vec<String>,
    /// Claims whose worker never started, released without counting a failure.
    pub abandoned: Vec<String>,
    /// Owner mode: running cards whose owner turn is `unknown` (or lost, under
    /// `owner_lost_turn = "pause"`), left for `kanban owner resolve`; they hold no spawn slot.
    pub paused: Vec<String>,
    /// Tasks whose superseded worker (a run no longer current) this tick stopped.
    pub superseded: Vec<String>,
    /// Ready tasks not claimed because their previous worker is still alive on this host.
    pub held_back: Vec<String>,
    pub reconciled: Vec<String>,
    pub stale: Vec<String>,
    pub exited: Vec<DeadWorker>,
    pub timed_out: Vec<String>,
    /// Tasks the failure breaker (or a terminal exit) blocked this tick.
    pub gave_up: Vec<String>,
    /// Tasks blocked by the systemic crash breaker (also in `gave_up`): their workers died in
    /// this tick with the same error as at least two others.
    pub systemic: Vec<String>,
    pub promoted: Vec<String>,
    /// Scheduled tasks whose time came (now `ready`, or `todo` while a parent is unfinished).
    pub woken: Vec<String>,
    pub spawned: Vec<SpawnedWorker>,
    /// (task id, error)
    pub spawn_failed: Vec<(String, String)>,
    /// (task id, error): claims of the tick's batch that failed with an error (rolled back
    /// alone; the batch's other claims stand). The task is tried again next tick.
    pub claim_failed: Vec<(String, String)>,
    /// (task id, profile) — tasks whose profile is not defined in kanban.toml (those looked at).
    pub skipped_nonspawnable: Vec<(String, String)>,
    /// (task id, profile, running) — tasks left ready because their profile already runs its
    /// `max_in_progress` workers on this host.
    pub skipped_per_profile_capped: Vec<(String, String, u32)>,
    /// Unassigned tasks given the default profile this tick (saved, with an `assigned` event).
    pub auto_assigned_default: Vec<String>,
    /// The memory guard's reading when it limited this tick (`elevated`: at most one spawn;
    /// `critical`: none).
    pub memory_pressure: Option<super::memory::Pressure>,
    /// The subset of `skipped_nonspawnable` noted on the board for the first time this tick.
    pub noted_nonspawnable: Vec<(String, String)>,
    /// Tasks the respawn guard held back this tick (each noted once on the board as
    /// `respawn_guarded` {reason}).
    pub respawn_guarded: Vec<GuardedTask>,
    /// Ready tasks on the board whose profile is not defined in kanban.toml; counted only when
    /// the tick could be idle (nothing spawned, nothing running but paused cards), 0 otherwise.
    pub unspawnable_ready: i64,
    /// Workers this tick was allowed to start.
    pub budget: u32,
    /// Tasks the board's `pre_claim` policy denied this tick.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub policy_denied: Vec<PolicyDenial>,
    /// The board's `pre_claim` policy is not valid, so it denies every claim and promotion: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_invalid: Option<String>,
    /// Running / ready counts after the tick.
    pub workload: Workload,
}

impl TickReport {
    /// Nothing is running, nothing was started, and nothing ready can ever be started (every ready
    /// task is waiting for a profile that does not exist; none is cooling down).
    pub fn is_idle(&self) -> bool {
        // A cooldown ends by itself (worth waiting for); recent success, an open pull request
        // or a credentials problem need someone to act.
        let cooling = self.respawn_guarded.iter().any(|g| g.guard.expires_soon());
        let held = self
            .respawn_guarded
            .iter()
            .filter(|g| g.lane == Status::Ready && !g.guard.expires_soon())
            .count();
        // A task held back for its previous worker (of either lane: a `review` task is not in
        // `workload.ready`) is claimed once that worker is gone.
        // A paused card waits for an operator, not for a tick.
        let paused = i64::try_from(self.paused.len()).unwrap_or(i64::MAX);
        !self.skipped_locked
            && self.spawned.is_empty()
            && self.held_back.is_empty()
            && self.workload.running <= paused
            && self.workload.cooling_down == 0
            && !cooling
            && self.workload.ready <= self.unspawnable_ready + i64::try_from(held).unwrap_or(0)
    }

    /// Whether the tick changed anything on the board.
    pub fn is_active(&self) -> bool {
        !(self.reaped.is_empty()
            && self.reaped_terminal.is_empty()
            && self.extended.is_empty()
            && self.deferred.is_empty()
            && self.reclaimed.is_empty()
            && self.abandoned.is_empty()
            && self.superseded.is_empty()
            && self.reconciled.is_empty()
            && self.stale.is_empty()
            && self.exited.is_empty()
            && self.timed_out.is_empty()
            && self.promoted.is_empty()
            && self.woken.is_empty()
            && self.spawned.is_empty()
            && self.spawn_failed.is_empty()
            && self.auto_decomposed.iter().all(|d| d.child_ids.is_empty())
            && !self.policy_denied.iter().any(|d| d.noted))
    }
}

/// A task the board's `pre_claim` policy denied ([`super::policy`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyDenial {
    pub task_id: String,
    pub phase: Phase,
    pub reason: String,
    /// The denial was written (the task moved to `todo`, or its wait reason changed); `false`
    /// when it already waited for the same reason, or changed since it was judged, or in a dry
    /// run.
    pub noted: bool,
}

/// Errors a tick can end with (a board that cannot be read or written). Per-task refusals are
/// not errors.
#[derive(Debug, thiserror::Error)]
pub enum TickError {
    #[error("dispatch tick on board `{board}` failed")]
    Board {
        board: String,
        #[source]
        source: BoardError,
    },
    #[error(transparent)]
    Lock(#[from] crate::home::lock::LockError),
}

fn to_board(t: &Termination) -> board::Termination {
    board::Termination {
        prev_pid: t.prev_pid,
        host_local: t.host_local,
        termination_attempted: t.termination_attempted,
        terminated: t.terminated,
        sigkill: t.sigkill,
        signal_refused: t.signal_refused.then_some(true),
        pid_recycled: t.pid_recycled.then_some(true),
    }
}

struct Tick<'a> {
    board: &'a mut Board,
    settings: &'a Settings,
    now: i64,
    workers: &'a mut dyn Workers,
    report: TickReport,
    /// Running tasks a phase already acted on this tick (later phases leave them alone).
    handled: HashSet<String>,
    /// Tasks whose superseded worker (or its group) is still alive: not claimed this tick.
    hold: HashSet<String>,
    /// Tasks an operator's `existing_pr_authorized` grant let through the `active_pr` guard:
    /// their claim spends it.
    authorized: HashSet<String>,
    /// Workers running per profile on this host, this tick's picks included (loaded when a
    /// per-profile cap exists).
    profile_load: Option<HashMap<String, u32>>,
    /// The board's `pre_claim` policy, read at the tick's start (`None`: claims are not gated).
    gate: Option<Gate>,
    /// Picks the policy allowed, as it judged them: claimed only while unchanged.
    judged: HashMap<String, board::policy::PolicySnapshot>,
}

/// Runs one tick (see the module doc). The caller holds the board's tick lock.
pub fn tick(
    board: &mut Board,
    settings: &Settings,
    clock: &dyn Clock,
    workers: &mut dyn Workers,
) -> Result<TickReport, TickError> {
    let slug = settings.location.slug.clone();
    let mut t = Tick {
        board,
        settings,
        now: clock.now(),
        workers,
        report: TickReport {
            dry_run: settings.dry_run,
            ..TickReport::default()
        },
        handled: HashSet::new(),
        hold: HashSet::new(),
        authorized: HashSet::new(),
        profile_load: None,
        gate: Gate::load(&settings.root, &settings.location.slug),
        judged: HashMap::new(),
    };
    t.report.policy_invalid = t.gate.as_ref().and_then(|g| g.invalid().map(str::to_owned));
    t.run().map_err(|source| TickError::Board {
        board: slug,
        source,
    })?;
    Ok(t.report)
}

impl Tick<'_> {
    fn run(&mut self) -> Result<(), BoardError> {
        self.report.reaped = self.workers.reap();
        if !self.settings.dry_run {
            self.reap_terminal_workers()?;
            // One snapshot for every reclaim phase; each write is fenced, so a stale row only
            // makes a compare-and-swap refuse.
            let running = self.board.running_tasks()?;
            if self.settings.owner_mode {
                self.owner_paused(&running)?;
            }
            self.superseded_workers(&running)?;
            self.unstarted_claims(&running)?;
            self.expired_claims(&running)?;
            self.orphans(&running)?;
            self.stale_heartbeats(&running)?;
            self.dead_workers(&running)?;
            self.runtime_cap(&running)?;
            self.track_running(&running);
            self.report.woken = self.board.wake_due(self.now)?;
            self.report.promoted = if self.gate.is_some() {
                self.gated_promotions()?
            } else {
                self.board.recompute_ready(self.now)?
            };
        }
        let budget = self.spawn_budget()?;
        self.report.budget = budget;
        self.claim_and_spawn(budget)?;
        self.report.workload = self
            .board
            .workload(self.now, self.settings.rate_limit_cooldown_seconds)?;
        // Only an idle-looking tick (nothing spawned, nothing running but paused cards, something
        // ready) asks which ready tasks no profile can take: the count decides `is_idle` alone,
        // and on a board with many ready tasks it is the tick's costliest read.
        let paused = i64::try_from(self.report.paused.len()).unwrap_or(i64::MAX);
        let w = self.report.workload;
        if self.report.spawned.is_empty() && w.running <= paused && w.ready > 0 {
            self.report.unspawnable_ready = self
                .board
                .ready_by_assignee()?
                .into_iter()
                .filter(|(assignee, _)| {
                    let profile = self.settings.profile_for(assignee.as_deref());
                    !self.settings.profiles.contains(&profile)
                })
                .map(|(_, n)| n)
                .sum();
        }
        Ok(())
    }

    fn host_local(&self, task: &RunningTask) -> bool {
        self.names_this_host(task.claim_lock.as_deref())
    }

    /// Whether a claim lock `"<hostname>:<pid>"` was written on this host. Only then may a pid
    /// recorded under it be looked up in `/proc` or signalled (ARCHITECTURE.md §3): the same pid
    /// on another host is another process.
    fn names_this_host(&self, lock: Option<&str>) -> bool {
        lock.is_some_and(|l| l.starts_with(&self.settings.host_prefix))
    }

    /// Liveness of the task's worker; a worker on another host is unknowable (`None`).
    fn liveness(&self, task: &RunningTask) -> Option<Liveness> {
        if !self.host_local(task) {
            return None;
        }
        let pid = task.worker_pid?;
        Some(self.workers.liveness(pid, task.fingerprint.as_deref()))
    }

    fn limit_for(&self, id: &str, fallback: i64) -> Result<(i64, &'static str), BoardError> {
        Ok(match self.board.task_failure_limit(id)? {
            Some(n) => (n, "task"),
            None => (fallback, "dispatcher"),
        })
    }

    fn counted(&self, id: &str) -> Result<Failure<'static>, BoardError> {
        let (limit, source) = self.limit_for(id, self.settings.failure_limit)?;
        Ok(Failure::Counted { limit, source })
    }

    /// A claimed run whose worker could not be started (its workspace could not be made, or the
    /// process not spawned): released as `spawn_failed`. `why` says how it counts: the host's
    /// fault is not counted (the respawn guard's infrastructure cooldown spaces the retries),
    /// what only an operator can fix blocks the task `needs_input`, anything else is counted.
    fn spawn_failed(
        &mut self,
        id: &str,
        claimed: &board::Claimed,
        error: String,
        why: SpawnFailure,
    ) -> Result<(), BoardError> {
        let before = self.board.get_task(id)?.consecutive_failures;
        let (failure, failures) = match why {
            SpawnFailure::Infrastructure => (Failure::NotCounted, before),
            SpawnFailure::NeedsInput => (Failure::NeedsInput, before),
            SpawnFailure::Counted => (self.counted(id)?, before + 1),
        };
        let release = Release {
            claim_lock: Some(&claimed.claim_lock),
            run_id: Some(claimed.run_id),
            outcome: "spawn_failed",
            event: Event::SpawnFailed {
                error: error.clone(),
                failures,
                retry_status: Status::Ready,
                infrastructure: (why == SpawnFailure::Infrastructure).then_some(true),
            },
            failure,
            error: error.clone(),
        };
        self.release(id, &release)?;
        self.report.spawn_failed.push((id.to_owned(), error));
        Ok(())
    }

    fn release(&mut self, id: &str, release: &Release<'_>) -> Result<Option<Status>, BoardError> {
        self.handled.insert(id.to_owned());
        match self.board.release_claim(id, release, self.now)? {
            Outcome::Done(released) => {
                if released.gave_up {
                    self.report.gave_up.push(id.to_owned());
                }
                Ok(Some(released.status))
            }
            Outcome::Refused(_) => Ok(None),
        }
    }

    /// Terminates a host-local worker; reports whether the claim may now be released.
    fn stop_worker(&mut self, task: &RunningTask) -> Termination {
        match (task.worker_pid, self.host_local(task)) {
            (Some(pid), true) => {
                self.workers
                    .terminate(pid, task.fingerprint.as_deref(), self.settings.kill_wait)
            }
            _ => Termination {
                prev_pid: task.worker_pid,
                host_local: self.host_local(task),
                terminated: true,
                ..Termination::default()
            },
        }
    }

    fn defer(
        &mut self,
        task: &RunningTask,
        reason: &str,
        termination: &Termination,
    ) -> Result<(), BoardError> {
        self.handled.insert(task.id.clone());
        let until = self.now + self.settings.reclaim_defer_seconds;
        if self
            .board
            .defer_reclaim(task, until, reason, to_board(termination), self.now)?
            .is_done()
        {
            self.report.deferred.push(task.id.clone());
        }
        Ok(())
    }

    /// The snapshot's tasks no earlier phase acted on.
    /// Owner mode (README "Owner admission"): a run whose owner turn is `unknown`, or `started`
    /// under an owner that is gone, is paused — no reclaim phase touches it this tick — until
    /// `kanban owner resolve` decides (never a second attempt of a run whose effects are unknown).
    fn owner_paused(&mut self, running: &[RunningTask]) -> Result<(), BoardError> {
        // This host's runs are asked of their owners' state files together (one open each).
        let local: Vec<(&str, i64)> = running
            .iter()
            .filter(|t| self.host_local(t))
            .filter_map(|t| Some((t.id.as_str(), t.run_id?)))
            .collect();
        let mut turns: HashMap<&str, Option<crate::board::admission::OwnerTurn>> = local
            .iter()
            .map(|(id, _)| *id)
            .zip(self.board.owner_turns(&local)?)
            .collect();
        for task in running {
            let Some(run) = task.run_id else { continue };
            // Another host's owner (its state file, its pid) cannot be read from here, so
            // whether its turn started is unknowable: a run it admitted is paused on this host
            // (its own host, or an operator, decides). A run no owner admitted is any other
            // foreign claim (released once its claim expires).
            if !self.host_local(task) {
                let admitted = self
                    .board
                    .events(&task.id, None)?
                    .iter()
                    .any(|e| e.kind == "owner_admitted" && e.run_id == Some(run));
                if admitted {
                    self.handled.insert(task.id.clone());
                }
                continue;
            }
            let Some(turn) = turns.remove(task.id.as_str()).flatten() else {
                continue;
            };
            if owner_turn_paused(&turn, self.settings.owner_lost_turn_pauses) {
                self.handled.insert(task.id.clone());
                self.report.paused.push(task.id.clone());
            }
        }
        Ok(())
    }

    fn pending<'r>(&self, running: &'r [RunningTask]) -> Vec<&'r RunningTask> {
        running
            .iter()
            .filter(|t| !self.handled.contains(&t.id))
            .collect()
    }

    /// Remembers every host-local worker of the snapshot that no phase released, with its run.
    fn track_running(&mut self, running: &[RunningTask]) {
        for task in self.pending(running) {
            if let (Some(pid), Some(run_id), true) =
                (task.worker_pid, task.run_id, self.host_local(task))
            {
                self.workers.track(Tracked {
                    pid,
                    fingerprint: task.fingerprint.clone(),
                    task_id: task.id.clone(),
                    run_id,
                });
            }
        }
    }

    /// Stops remembered workers whose run an operator ended (`reclaimed`, or `abandoned`);
    /// forgets the others once their run is over. A worker (or group) still alive holds its
    /// task back from a new claim.
    fn superseded_workers(&mut self, running: &[RunningTask]) -> Result<(), BoardError> {
        // A worker whose run is still the current one of a running task needs no lookup.
        let current: HashSet<(&str, i64)> = running
            .iter()
            .filter_map(|t| Some((t.id.as_str(), t.run_id?)))
            .collect();
        for worker in self.workers.tracked() {
            if current.contains(&(worker.task_id.as_str(), worker.run_id)) {
                continue;
            }
            let state = self.board.run_state(&worker.task_id, worker.run_id)?;
            if state
                .as_ref()
                .is_some_and(|s| !s.ended && s.current_run_id == Some(worker.run_id))
            {
                continue;
            }
            let outcome = state.as_ref().and_then(|s| s.outcome.clone());
            let superseded = matches!(
                outcome.as_deref(),
                Some("reclaimed" | board::ABANDONED_OUTCOME)
            );
            if !superseded {
                // Ended by the worker itself (complete, block) or by a phase that already
                // stopped it: it exits on its own.
                self.workers.untrack(worker.pid);
                continue;
            }
            let current = state.and_then(|s| s.current_run_id);
            let gone = match self
                .workers
                .liveness(worker.pid, worker.fingerprint.as_deref())
            {
                Liveness::Alive => self.stop_superseded(
                    &worker.task_id,
                    worker.run_id,
                    worker.pid,
                    worker.fingerprint.as_deref(),
                    outcome,
                    current,
                )?,
                Liveness::Dead => {
                    if self.workers.group_alive(worker.pid) {
                        self.workers.kill_leftovers(worker.pid);
                    }
                    !self.workers.group_alive(worker.pid)
                }
                Liveness::Recycled | Liveness::Unverified => true,
            };
            if gone {
                self.workers.untrack(worker.pid);
            } else {
                self.hold.insert(worker.task_id.clone());
            }
        }
        Ok(())
    }

    /// TERM → wait → KILL of a superseded worker's process group, then whatever is left of the
    /// group; records `worker_superseded`. Returns whether the worker and its group are gone.
    fn stop_superseded(
        &mut self,
        task_id: &str,
        run_id: i64,
        pid: i64,
        fingerprint: Option<&str>,
        outcome: Option<String>,
        current_run_id: Option<i64>,
    ) -> Result<bool, BoardError> {
        let termination = self
            .workers
            .terminate(pid, fingerprint, self.settings.kill_wait);
        if termination.terminated {
            self.workers.kill_leftovers(pid);
        }
        let event = Event::WorkerSuperseded {
            pid,
            outcome,
            current_run_id,
            termination: to_board(&termination),
        };
        self.board
            .record_superseded_worker(task_id, run_id, &event, self.now)?;
        if !self.report.superseded.iter().any(|t| t == task_id) {
            self.report.superseded.push(task_id.to_owned());
        }
        Ok(termination.terminated && !self.workers.group_alive(pid))
    }

    /// Whether a previous run of the task still has a live worker on this host (one found alive
    /// is stopped first; `true` only when it survived).
    fn previous_worker_alive(&mut self, task_id: &str) -> Result<bool, BoardError> {
        if self.hold.contains(task_id) {
            return Ok(true);
        }
        for run in self.board.ended_runs_with_worker(task_id, 4)? {
            let host_local = run
                .claim_lock
                .as_deref()
                .is_some_and(|l| l.starts_with(&self.settings.host_prefix));
            if !host_local
                || self
                    .workers
                    .liveness(run.worker_pid, run.fingerprint.as_deref())
                    != Liveness::Alive
            {
                continue;
            }
            let gone = self.stop_superseded(
                task_id,
                run.run_id,
                run.worker_pid,
                run.fingerprint.as_deref(),
                run.outcome.clone(),
                None,
            )?;
            if !gone {
                self.hold.insert(task_id.to_owned());
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Claims whose worker never started: no pid after the crash grace, claimed on this host by
    /// another dispatcher that is gone — or by us, when the spawn record failed (a full disk) and
    /// the worker we started for the run is gone without registering. Not counted as a failure.
    fn unstarted_claims(&mut self, running: &[RunningTask]) -> Result<(), BoardError> {
        let now = self.now;
        let grace = self.settings.crash_grace_seconds;
        let unstarted: Vec<&RunningTask> = self
            .pending(running)
            .into_iter()
            .filter(|t| t.worker_pid.is_none() && t.claim_expires.is_some())
            .filter(|t| t.run_started_at.is_some_and(|s| now - s >= grace))
            .collect();
        for task in unstarted {
            let Some(lock) = task.claim_lock.as_deref() else {
                continue;
            };
            let Some(claimer) = process::claimer_pid(lock, &self.settings.host_prefix) else {
                continue;
            };
            // Only a dispatcher's claim that nobody heartbeats can be abandoned: `kanban claim`
            // from a shell has a worker of its own, and a heartbeat is proof of life.
            if self
                .board
                .claim_provenance(&task.id, task.run_id)?
                .live_reason()
                .is_some()
            {
                continue;
            }
            let reason = if lock == self.settings.claim_lock {
                // Our own claim without a pid: the spawn record failed (a full disk). Wait while
                // a worker we started for this run lives — it registers itself, or dies.
                let ours_alive = self.workers.tracked().iter().any(|w| {
                    w.task_id == task.id
                        && Some(w.run_id) == task.run_id
                        && self
                            .workers
                            .liveness(w.pid, w.fingerprint.as_deref())
                            .may_be_running()
                });
                if ours_alive {
                    continue;
                }
                board::AbandonReason::WorkerNeverRegistered
            } else if self.claimer_gone(claimer, task.run_started_at) {
                board::AbandonReason::ClaimerGone
            } else {
                continue;
            };
            self.handled.insert(task.id.clone());
            let why = board::Abandonment {
                reason,
                claimer_pid: Some(claimer),
                grace_seconds: grace,
            };
            if self
                .board
                .release_unstarted_claim(task, &why, now)?
                .is_done()
            {
                self.report.abandoned.push(task.id.clone());
            }
        }
        Ok(())
    }

    /// Terminal-worker reaping: a worker still alive [`TERMINAL_REAP_GRACE_SECONDS`] after its
    /// run closed (its task completed, was reopened, archived, reviewed…) is terminated; a run
    /// whose worker is gone forgets its pid. Only host-local workers with a verifiable fingerprint
    /// are signalled; one that survives is tried again next tick.
    fn reap_terminal_workers(&mut self) -> Result<(), BoardError> {
        let lingering = self
            .board
            .lingering_workers(self.now - TERMINAL_REAP_GRACE_SECONDS, TERMINAL_REAP_BATCH)?;
        let own_pid = i64::from(std::process::id());
        let mut gone = Vec::new();
        for w in lingering {
            let host_local = w
                .claim_lock
                .as_deref()
                .is_some_and(|l| l.starts_with(&self.settings.host_prefix));
            if !host_local || w.pid == own_pid {
                continue;
            }
            match self.workers.liveness(w.pid, w.fingerprint.as_deref()) {
                Liveness::Dead | Liveness::Recycled => gone.push((w, board::WorkerGone::Quietly)),
                // Alive without a fingerprint we can check: never signalled, looked at again.
                Liveness::Unverified => {}
                Liveness::Alive if w.fingerprint.is_none() => {}
                Liveness::Alive => {
                    let t = self.workers.terminate(
                        w.pid,
                        w.fingerprint.as_deref(),
                        self.settings.kill_wait,
                    );
                    if !t.survived() {
                        self.report.reaped_terminal.push(w.task_id.clone());
                        gone.push((w, board::WorkerGone::Terminated(to_board(&t))));
                    }
                }
            }
        }
        self.board.forget_lingering_workers(&gone, self.now)?;
        Ok(())
    }

    /// The dispatcher that wrote a host-local claim at `claimed_at` is gone: no such process, or
    /// the pid now belongs to a process that started after the claim (recycled; 2 s of slack
    /// for whole-second clocks).
    fn claimer_gone(&self, pid: i64, claimed_at: Option<i64>) -> bool {
        match self.workers.liveness(pid, None) {
            Liveness::Dead => true,
            _ => match (self.workers.started_at(pid), claimed_at) {
                (Some(started), Some(claimed)) => started > claimed + 2,
                _ => false,
            },
        }
    }

    fn expired_claims(&mut self, running: &[RunningTask]) -> Result<(), BoardError> {
        let now = self.now;
        let expired: Vec<&RunningTask> = self
            .pending(running)
            .into_iter()
            .filter(|t| t.claim_lock.is_some() && t.claim_expires.is_some_and(|e| e < now))
            .collect();
        for task in expired {
            let heartbeat_stale = task
                .last_heartbeat_at
                .is_some_and(|hb| now - hb > self.settings.heartbeat_max_stale_seconds);
            let alive = self.liveness(task).is_some_and(Liveness::may_be_running);
            if alive && !heartbeat_stale {
                let until = now + self.settings.claim_ttl_seconds;
                self.handled.insert(task.id.clone());
                if self.board.extend_claim(task, until, now)?.is_done() {
                    self.report.extended.push(task.id.clone());
                }
                continue;
            }
            let termination = self.stop_worker(task);
            if termination.survived() {
                let reason = if heartbeat_stale {
                    "heartbeat_stale_worker_alive"
                } else {
                    "ttl_expired_worker_alive"
                };
                self.defer(task, reason, &termination)?;
                continue;
            }
            let lock = task.claim_lock.clone().unwrap_or_default();
            let release = Release {
                claim_lock: task.claim_lock.as_deref(),
                run_id: task.run_id,
                outcome: "reclaimed",
                event: Event::Reclaimed {
                    manual: None,
                    reason: None,
                    prev_lock: None,
                    stale_lock: Some(lock.clone()),
                    worker_pid: task.worker_pid,
                    claim_expires: task.claim_expires,
                    last_heartbeat_at: task.last_heartbeat_at,
                    now: Some(now),
                    heartbeat_stale: Some(heartbeat_stale),
                    retry_status: Status::Ready,
                    actor: None,
                    termination: Some(to_board(&termination)),
                },
                failure: self.counted(&task.id)?,
                error: format!("stale_lock={lock}: claim expired"),
            };
            if self.release(&task.id, &release)?.is_some() {
                self.report.reclaimed.push(task.id.clone());
            }
        }
        Ok(())
    }

    fn orphans(&mut self, running: &[RunningTask]) -> Result<(), BoardError> {
        let orphans: Vec<&RunningTask> = self
            .pending(running)
            .into_iter()
            .filter(|t| t.claim_lock.is_none() || t.claim_expires.is_none())
            .collect();
        let max_stale = self.settings.heartbeat_max_stale_seconds;
        for task in orphans {
            // The claim lock names the worker's host; an orphan without one is placed by its
            // run's lock. Only a worker of this host is judged by its pid; any other waits until
            // its heartbeat (or, without one, its run's start) is older than the stale limit.
            let local = if task.claim_lock.is_some() {
                self.host_local(task)
            } else {
                let runs = self.board.runs(&task.id)?;
                let lock = runs
                    .iter()
                    .find(|r| Some(r.id) == task.run_id)
                    .and_then(|r| r.claim_lock.as_deref());
                self.names_this_host(lock)
            };
            let alive = if local {
                task.worker_pid.is_some_and(|pid| {
                    self.workers
                        .liveness(pid, task.fingerprint.as_deref())
                        .may_be_running()
                })
            } else {
                task.last_heartbeat_at
                    .or(task.run_started_at)
                    .is_none_or(|beat| self.now - beat <= max_stale)
            };
            if alive {
                continue;
            }
            self.handled.insert(task.id.clone());
            if self.board.reconcile_orphan(task, self.now)?.is_done() {
                self.report.reconciled.push(task.id.clone());
            }
        }
        Ok(())
    }

    fn stale_heartbeats(&mut self, running: &[RunningTask]) -> Result<(), BoardError> {
        let timeout = self.settings.stale_timeout_seconds;
        if timeout <= 0 {
            return Ok(());
        }
        let now = self.now;
        let max_stale = self.settings.heartbeat_max_stale_seconds;
        let stale: Vec<&RunningTask> = self
            .pending(running)
            .into_iter()
            .filter(|t| t.claim_lock.is_some())
            .filter(|t| t.run_started_at.is_some_and(|s| now - s >= timeout))
            .filter(|t| t.last_heartbeat_at.is_none_or(|hb| now - hb >= max_stale))
            .collect();
        for task in stale {
            let termination = self.stop_worker(task);
            if termination.survived() {
                self.defer(task, "heartbeat_stale_worker_alive", &termination)?;
                continue;
            }
            let release = Release {
                claim_lock: task.claim_lock.as_deref(),
                run_id: task.run_id,
                outcome: "stale",
                event: Event::Stale {
                    elapsed_seconds: task.run_started_at.map_or(0, |s| now - s),
                    last_heartbeat_at: task.last_heartbeat_at,
                    heartbeat_age_seconds: task.last_heartbeat_at.map(|hb| now - hb),
                    timeout_seconds: timeout,
                    pid: task.worker_pid,
                    retry_status: Status::Ready,
                    termination: Some(to_board(&termination)),
                },
                failure: Failure::NotCounted,
                error: format!("no heartbeat for {max_stale}s or more"),
            };
            if self.release(&task.id, &release)?.is_some() {
                self.report.stale.push(task.id.clone());
            }
        }
        Ok(())
    }

    fn dead_workers(&mut self, running: &[RunningTask]) -> Result<(), BoardError> {
        let now = self.now;
        let candidates: Vec<&RunningTask> = self
            .pending(running)
            .into_iter()
            .filter(|t| t.claim_lock.is_some() && t.claim_expires.is_some())
            .collect();
        let mut deaths: Vec<Death<'_>> = Vec::new();
        for task in candidates {
            let Some(pid) = task.worker_pid else { continue };
            match self.liveness(task) {
                Some(Liveness::Dead) => self.workers.kill_leftovers(pid),
                Some(Liveness::Recycled) => {}
                _ => continue,
            }
            let reaped = self.workers.exit_of(pid);
            // Without our own reaped status, give the worker's trailer time to appear.
            if reaped.is_none()
                && task
                    .run_started_at
                    .is_some_and(|s| now - s < self.settings.crash_grace_seconds)
            {
                continue;
            }
            let log =
                crate::home::find_log(&self.settings.root, &self.settings.location.slug, &task.id);
            let exit = exit::resolve(reaped, &log);
            let class = exit::classify(exit);
            let claimer = task.claim_lock.clone();
            let output = exit::last_output(&exit::log_tail(&log), 400);
            let worker_output = (!output.is_empty()).then(|| output.clone());
            let (outcome, event, failure, error) = match class {
                ExitClass::RateLimited => (
                    "rate_limited",
                    Event::RateLimited {
                        pid: Some(pid),
                        claimer,
                        exit_code: exit.exit_code(),
                        retry_status: Status::Ready,
                    },
                    Failure::NotCounted,
                    format!(
                        "pid {pid} exited rate-limited (rc=75); requeued without counting a failure"
                    ),
                ),
                ExitClass::ProtocolViolation => {
                    let streak = self.board.protocol_violation_streak(&task.id)? + 1;
                    let (limit, source) = self.limit_for(&task.id, PROTOCOL_VIOLATION_LIMIT)?;
                    let failure = if streak >= limit {
                        Failure::Trip { limit, source }
                    } else {
                        Failure::NotCounted
                    };
                    (
                        // The original's run outcome; the event and the run's metadata say
                        // `protocol_violation: true`.
                        "crashed",
                        Event::ProtocolViolation {
                            pid: Some(pid),
                            claimer,
                            exit_code: exit.exit_code(),
                            protocol_violation: true,
                            worker_output,
                            retry_status: Status::Ready,
                        },
                        failure,
                        format!(
                            "worker pid {pid} exited cleanly (rc=0) without `kanban complete` or `kanban block`: protocol violation ({streak} in a row)"
                        ),
                    )
                }
                ExitClass::TerminalProvider => {
                    let (limit, source) = self.limit_for(&task.id, self.settings.failure_limit)?;
                    (
                        "crashed",
                        Event::Crashed {
                            pid: Some(pid),
                            claimer,
                            exit_kind: Some("terminal_provider".to_owned()),
                            exit_code: exit.exit_code(),
                            terminal_provider: Some(true),
                            worker_output,
                            retry_status: Status::Ready,
                        },
                        Failure::Trip { limit, source },
                        format!(
                            "pid {pid} exited with code 78 (terminal provider or configuration error); blocked until an operator unblocks it"
                        ),
                    )
                }
                ExitClass::Crashed => (
                    "crashed",
                    Event::Crashed {
                        pid: Some(pid),
                        claimer,
                        exit_kind: Some(
                            match exit {
                                WorkerExit::Exited { .. } => "nonzero_exit",
                                WorkerExit::Signaled { .. } => "signaled",
                                WorkerExit::Unknown => "unknown",
                            }
                            .to_owned(),
                        ),
                        exit_code: exit.exit_code(),
                        terminal_provider: None,
                        worker_output,
                        retry_status: Status::Ready,
                    },
                    self.counted(&task.id)?,
                    if output.is_empty() {
                        format!("pid {pid} {}", exit.describe())
                    } else {
                        format!("pid {pid} {}: {output}", exit.describe())
                    },
                ),
            };
            deaths.push(Death {
                task,
                pid,
                exit,
                class,
                outcome,
                event,
                failure,
                fingerprint: error_fingerprint(&error),
                error,
            });
        }
        // The systemic crash breaker: the same error from SYSTEMIC_CRASH_THRESHOLD workers or more
        // in one tick is the environment's fault (a broken binary, a dead provider, a full
        // disk), so retrying each task into the same wall only burns its budget.
        let mut same: HashMap<&str, usize> = HashMap::new();
        for d in deaths.iter().filter(|d| d.class == ExitClass::Crashed) {
            *same.entry(d.fingerprint.as_str()).or_default() += 1;
        }
        for d in &deaths {
            let workers = same.get(d.fingerprint.as_str()).copied().unwrap_or(0);
            let failure = if d.class == ExitClass::Crashed && workers >= SYSTEMIC_CRASH_THRESHOLD {
                Failure::Systemic {
                    workers,
                    fingerprint: &d.fingerprint,
                }
            } else {
                d.failure
            };
            let release = Release {
                claim_lock: d.task.claim_lock.as_deref(),
                run_id: d.task.run_id,
                outcome: d.outcome,
                event: d.event.clone(),
                failure,
                error: d.error.clone(),
            };
            if let Some(status) = self.release(&d.task.id, &release)? {
                if matches!(failure, Failure::Systemic { .. }) {
                    self.report.systemic.push(d.task.id.clone());
                }
                self.report.exited.push(DeadWorker {
                    task_id: d.task.id.clone(),
                    pid: d.pid,
                    exit: d.exit,
                    class: d.class,
                    status,
                });
            }
        }
        Ok(())
    }

    fn runtime_cap(&mut self, running: &[RunningTask]) -> Result<(), BoardError> {
        let now = self.now;
        // Only this host's workers: another host's dispatcher enforces the cap on its own, and
        // a dead host's claims go through expiry (releasing one here would start a twin while
        // the other host's worker may still run).
        let over: Vec<(&RunningTask, i64, i64)> = self
            .pending(running)
            .into_iter()
            .filter(|t| self.host_local(t))
            .filter_map(|t| {
                let limit = t.max_runtime_seconds.filter(|l| *l > 0)?;
                let elapsed = now - t.run_started_at?;
                (elapsed >= limit).then_some((t, elapsed, limit))
            })
            .collect();
        for (task, elapsed, limit) in over {
            let termination = self.stop_worker(task);
            if termination.survived() {
                self.defer(task, "runtime_cap_worker_alive", &termination)?;
                continue;
            }
            let release = Release {
                claim_lock: task.claim_lock.as_deref(),
                run_id: task.run_id,
                outcome: "timed_out",
                event: Event::TimedOut {
                    pid: task.worker_pid,
                    elapsed_seconds: elapsed,
                    limit_seconds: limit,
                    sigkill: termination.sigkill,
                    retry_status: Status::Ready,
                },
                failure: self.counted(&task.id)?,
                error: format!("elapsed {elapsed}s > limit {limit}s"),
            };
            if self.release(&task.id, &release)?.is_some() {
                self.report.timed_out.push(task.id.clone());
            }
        }
        Ok(())
    }

    fn spawn_budget(&mut self) -> Result<u32, BoardError> {
        // A paused owner card (it waits for `kanban owner resolve`) holds no slot.
        let paused = i64::try_from(self.report.paused.len()).unwrap_or(i64::MAX);
        let running = self.board.running_count()?.saturating_sub(paused);
        let running = u32::try_from(running.max(0)).unwrap_or(u32::MAX);
        let mut budget = self.settings.max_spawn.saturating_sub(running);
        if let Some(cap) = self.settings.max_in_progress {
            let mut total = u32::try_from(
                self.board
                    .running_on_host(&self.settings.host_prefix)?
                    .max(0),
            )
            .unwrap_or(u32::MAX);
            for location in &self.settings.other_boards {
                // Fail open per board: an unreadable (or unreachable) neighbour does not stop
                // this one. A PostgreSQL neighbour costs one connection per tick here.
                if let Ok(other) = Board::open(location, &board::OpenOptions::default())
                    && let Ok(n) = other.running_on_host(&self.settings.host_prefix)
                {
                    total = total.saturating_add(u32::try_from(n.max(0)).unwrap_or(u32::MAX));
                }
            }
            budget = budget.min(cap.saturating_sub(total));
        }
        use super::memory::Pressure;
        match self.settings.memory.read().pressure() {
            Pressure::Critical => {
                self.report.memory_pressure = Some(Pressure::Critical);
                budget = 0;
            }
            Pressure::Elevated => {
                self.report.memory_pressure = Some(Pressure::Elevated);
                budget = budget.min(1);
            }
            Pressure::Ok | Pressure::Unknown => {}
        }
        Ok(budget)
    }

    /// Whether `profile` already runs its per-profile cap of workers on this host (this tick's
    /// picks included); records the skip.
    fn profile_capped(&mut self, id: &str, profile: &str) -> Result<bool, BoardError> {
        let Some(&cap) = self.settings.profile_caps.get(profile) else {
            return Ok(false);
        };
        let running = self.profile_running(profile)?;
        if running >= cap {
            self.report.skipped_per_profile_capped.push((
                id.to_owned(),
                profile.to_owned(),
                running,
            ));
            return Ok(true);
        }
        Ok(false)
    }

    /// Workers of `profile` running on this host (across this home's boards, failing open per
    /// board), plus the ones this tick picked.
    fn profile_running(&mut self, profile: &str) -> Result<u32, BoardError> {
        if self.profile_load.is_none() {
            let mut load: HashMap<String, u32> = HashMap::new();
            let mut add = |rows: Vec<(Option<String>, i64)>, s: &super::Settings| {
                for (assignee, n) in rows {
                    let p = s.profile_for(assignee.as_deref());
                    *load.entry(p).or_default() += u32::try_from(n.max(0)).unwrap_or(u32::MAX);
                }
            };
            let prefix = &self.settings.host_prefix;
            add(
                self.board.running_by_assignee_on_host(prefix)?,
                self.settings,
            );
            for location in &self.settings.other_boards {
                if let Ok(other) = Board::open(location, &board::OpenOptions::default())
                    && let Ok(rows) = other.running_by_assignee_on_host(prefix)
                {
                    add(rows, self.settings);
                }
            }
            self.profile_load = Some(load);
        }
        Ok(self
            .profile_load
            .as_ref()
            .and_then(|l| l.get(profile).copied())
            .unwrap_or(0))
    }

    /// Counts a pick (or, with `-1`, an unpicked one) against its profile's load.
    fn count_pick(&mut self, profile: &str, picked: bool) {
        if let Some(load) = self.profile_load.as_mut() {
            let n = load.entry(profile.to_owned()).or_default();
            *n = if picked {
                n.saturating_add(1)
            } else {
                n.saturating_sub(1)
            };
        }
    }

    /// Saves the default profile as the assignee of each unassigned ready task about to be
    /// claimed for it (the original's `_apply_default_assignee`); a task that changed meanwhile
    /// is left for the next tick.
    fn save_default_assignees(
        &mut self,
        chosen: &mut Vec<(Candidate, String)>,
    ) -> Result<(), BoardError> {
        let unassigned = |c: &Candidate| {
            c.lane == Status::Ready && c.assignee.as_deref().is_none_or(|a| a.trim().is_empty())
        };
        // One transaction for the tick's whole batch, as its claims.
        let pairs: Vec<(&str, &str)> = chosen
            .iter()
            .filter(|(c, _)| unassigned(c))
            .map(|(c, profile)| (c.id.as_str(), profile.as_str()))
            .collect();
        let mut saved = self
            .board
            .save_default_assignees(&pairs, self.now)?
            .into_iter();
        let mut kept = Vec::with_capacity(chosen.len());
        for (mut c, profile) in chosen.drain(..) {
            if unassigned(&c) {
                if saved.next() != Some(true) {
                    continue;
                }
                c.assignee = Some(profile.clone());
                self.report.auto_assigned_default.push(c.id.clone());
            }
            kept.push((c, profile));
        }
        *chosen = kept;
        Ok(())
    }

    /// The block reason of a claimed task none of whose requested skills exists in its
    /// profile's skills folder (it must not run without them), else `None`.
    fn skills_unavailable(
        &self,
        c: &Candidate,
        profile: &str,
    ) -> Result<Option<String>, BoardError> {
        let task = self.board.get_task(&c.id)?;
        let dir = self.settings.skills_dir(profile);
        let steering = crate::home::steering::task_steering(&task, &dir, c.lane == Status::Review);
        Ok(steering.all_skills_missing().then(|| {
            format!(
                "{}: none of the requested skills ({}) is in {}",
                crate::home::steering::SKILLS_UNAVAILABLE,
                steering.missing.join(", "),
                dir.display()
            )
        }))
    }

    /// Whether the board's `pre_claim` policy lets `id` through `phase` (always, without a
    /// policy). A denial parks the task (`board::policy`) and is reported; an allowed claim is
    /// remembered as judged. A dry run asks nothing: only a policy that is not valid denies.
    fn allowed_by_policy(&mut self, id: &str, phase: Phase) -> Result<bool, BoardError> {
        let Some(gate) = &self.gate else {
            return Ok(true);
        };
        if self.settings.dry_run && gate.invalid().is_none() {
            return Ok(true);
        }
        let Some(before) = self.board.policy_snapshot(id)? else {
            return Ok(false);
        };
        let decision = gate.judge(&before, phase);
        if decision.allow {
            if phase == Phase::Claim {
                self.judged.insert(id.to_owned(), before);
            }
            return Ok(true);
        }
        let noted = !self.settings.dry_run
            && self
                .board
                .policy_wait(&before, &decision.reason, self.now)?;
        self.report.policy_denied.push(PolicyDenial {
            task_id: id.to_owned(),
            phase,
            reason: decision.reason,
            noted,
        });
        Ok(false)
    }

    /// The promotion phase on a board with a `pre_claim` policy: each task the phase would
    /// promote is asked first, and promoted only while it is as judged.
    fn gated_promotions(&mut self) -> Result<Vec<String>, BoardError> {
        let mut promoted = Vec::new();
        for id in self.board.promotable()? {
            let Some(gate) = &self.gate else { break };
            let Some(before) = self.board.policy_snapshot(&id)? else {
                continue;
            };
            let decision = gate.judge(&before, Phase::Promote);
            if decision.allow {
                if self.board.promote_allowed(&before, self.now)? {
                    promoted.push(id);
                }
                continue;
            }
            let noted = self
                .board
                .policy_wait(&before, &decision.reason, self.now)?;
            self.report.policy_denied.push(PolicyDenial {
                task_id: id,
                phase: Phase::Promote,
                reason: decision.reason,
                noted,
            });
        }
        Ok(promoted)
    }

    /// Up to `want` spawnable candidates of one lane, in dispatch order. A task whose profile is
    /// not defined is skipped (and noted once) without using the budget.
    fn pick(&mut self, lane: Status, want: usize) -> Result<Vec<(Candidate, String)>, BoardError> {
        let s = self.settings;
        let mut chosen = Vec::new();
        if want == 0 {
            return Ok(chosen);
        }
        // Skipped tasks do not use the budget, so look a little further.
        let limit = want + 64;
        let pr_since = self.now - guard::PR_WINDOW_SECONDS;
        for c in self.board.lane_candidates(lane, pr_since, limit)? {
            if chosen.len() >= want {
                break;
            }
            let profile = s.profile_for(c.assignee.as_deref());
            if s.profiles.contains(&profile) {
                if self.profile_capped(&c.id, &profile)? {
                    continue;
                }
                let facts = if c.has_history {
                    self.board.guard_facts(&c.id, pr_since)?
                } else {
                    board::GuardFacts::default()
                };
                let held = guard::respawn_guard(
                    &facts,
                    c.last_failure_error.as_deref(),
                    lane,
                    self.now,
                    s.rate_limit_cooldown_seconds,
                );
                if let Some(g) = held {
                    let noted = !s.dry_run
                        && self
                            .board
                            .note_respawn_guarded(&c.id, g.reason(), self.now)?;
                    self.report.respawn_guarded.push(GuardedTask {
                        task_id: c.id.clone(),
                        lane,
                        guard: g,
                        noted,
                    });
                    continue;
                }
                if !self.allowed_by_policy(&c.id, Phase::Claim)? {
                    continue;
                }
                if facts.authorized_pr.is_some() && !facts.pr_comments.is_empty() {
                    self.authorized.insert(c.id.clone());
                }
                self.count_pick(&profile, true);
                chosen.push((c, profile));
            } else {
                if !s.dry_run && self.board.note_nonspawnable(&c.id, &profile, self.now)? {
                    self.report
                        .noted_nonspawnable
                        .push((c.id.clone(), profile.clone()));
                }
                self.report
                    .skipped_nonspawnable
                    .push((c.id.clone(), profile));
            }
        }
        Ok(chosen)
    }

    /// Claims and spawns within `budget`: the ready lane first, then the review lane (when
    /// `review_dispatch` is on), sharing the budget. When a review task can be spawned, one slot
    /// is kept for the review lane so a busy ready lane cannot starve reviews.
    fn claim_and_spawn(&mut self, budget: u32) -> Result<(), BoardError> {
        if budget == 0 {
            return Ok(());
        }
        let s = self.settings;
        let budget = budget as usize;
        let review = if s.review_dispatch {
            self.pick(Status::Review, budget)?
        } else {
            Vec::new()
        };
        let ready_budget = if review.is_empty() {
            budget
        } else {
            budget - 1
        };
        let mut chosen = self.pick(Status::Ready, ready_budget)?;
        let room = budget - chosen.len();
        let mut review = review.into_iter();
        chosen.extend(review.by_ref().take(room));
        for (_, profile) in review {
            self.count_pick(&profile, false);
        }
        if s.dry_run {
            for (c, profile) in chosen {
                self.report.spawned.push(SpawnedWorker {
                    task_id: c.id,
                    title: c.title,
                    run_id: 0,
                    profile,
                    lane: c.lane,
                    pid: None,
                });
            }
            return Ok(());
        }
        let mut clear = Vec::with_capacity(chosen.len());
        for (c, profile) in chosen {
            if self.previous_worker_alive(&c.id)? {
                self.report.held_back.push(c.id.clone());
            } else {
                clear.push((c, profile));
            }
        }
        let mut chosen = clear;
        self.save_default_assignees(&mut chosen)?;
        if chosen.is_empty() {
            return Ok(());
        }
        // All of this tick's claims in one transaction (one commit), spawns after it, and all
        // spawn records in another transaction.
        let spec = board::ClaimSpec {
            lock: s.claim_lock.clone(),
            ttl_seconds: s.claim_ttl_seconds,
            origin: board::ClaimOrigin::Dispatcher,
        };
        let picks: Vec<(String, Status)> =
            chosen.iter().map(|(c, _)| (c.id.clone(), c.lane)).collect();
        let judged: Vec<_> = picks.iter().map(|(id, _)| self.judged.remove(id)).collect();
        let outcomes = self
            .board
            .claim_batch_judged(&picks, &judged, &spec, self.now)?;
        let slug = &s.location.slug;
        // Every claimed run's workspace is made (dispatch/workspace.rs) and recorded, in one
        // transaction, before any of their workers starts: a worker that finishes at once
        // finds its workspace on the task, for the cleanup its completion runs.
        let mut prepared_runs = Vec::new();
        let mut workspace_records = Vec::new();
        for ((c, profile), outcome) in chosen.into_iter().zip(outcomes) {
            let claimed = match outcome {
                Ok(board::ClaimOutcome::Claimed(claimed)) => claimed,
                Ok(board::ClaimOutcome::Lost(_)) => continue,
                // Rolled back on its own; the task stays where it was for the next tick.
                Err(err) => {
                    self.report
                        .claim_failed
                        .push((c.id.clone(), crate::error_chain(&err)));
                    continue;
                }
            };
            if self.authorized.contains(&c.id) {
                self.board
                    .record_pr_authorization_consumed(&c.id, claimed.run_id, self.now)?;
            }
            if let Some(error) = self.skills_unavailable(&c, &profile)? {
                self.spawn_failed(&c.id, &claimed, error, SpawnFailure::NeedsInput)?;
                continue;
            }
            let prepared = match super::workspace::prepare(&s.root, slug, &c) {
                Ok(prepared) => prepared,
                Err(err) => {
                    let why = if err.needs_input() {
                        SpawnFailure::NeedsInput
                    } else {
                        SpawnFailure::Counted
                    };
                    self.spawn_failed(&c.id, &claimed, crate::error_chain(&err), why)?;
                    continue;
                }
            };
            let path = prepared.path.to_string_lossy().into_owned();
            let branch = prepared.branch.clone().or(c.branch_name.clone());
            if c.workspace_path.as_deref() != Some(path.as_str()) || c.branch_name != branch {
                workspace_records.push(board::WorkspaceRecord {
                    task_id: c.id.clone(),
                    run_id: claimed.run_id,
                    claim_lock: claimed.claim_lock.clone(),
                    kind: prepared.kind.as_str().to_owned(),
                    path,
                    branch,
                });
            }
            prepared_runs.push((c, profile, claimed, prepared));
        }
        if !workspace_records.is_empty() {
            let outcomes = self.board.record_workspaces(&workspace_records, self.now)?;
            // A refusal means the claim vanished in between (an operator): that run is not
            // started.
            let lost: std::collections::HashSet<&str> = workspace_records
                .iter()
                .zip(&outcomes)
                .filter(|(_, o)| !o.is_done())
                .map(|(r, _)| r.task_id.as_str())
                .collect();
            prepared_runs.retain(|(c, ..)| !lost.contains(c.id.as_str()));
        }
        let mut records = Vec::new();
        for (c, profile, claimed, prepared) in prepared_runs {
            let workspace = prepared.path;
            let request = SpawnRequest {
                task_id: c.id.clone(),
                run_id: claimed.run_id,
                claim_lock: claimed.claim_lock.clone(),
                profile: profile.clone(),
                root: s.root.clone(),
                board: slug.clone(),
                // The file, or a PostgreSQL board's URL without its password.
                db: s.location.env_db().into(),
                // A scratch workspace's parent (a task that already ran keeps its workspace,
                // wherever it is); the board's for any other kind.
                workspaces_root: match prepared.kind {
                    crate::workspace::Kind::Scratch => workspace.parent().map_or_else(
                        || crate::home::workspaces_root(&s.root, slug),
                        std::path::Path::to_path_buf,
                    ),
                    _ => crate::home::workspaces_root(&s.root, slug),
                },
                workspace,
                log: crate::home::log_path(&s.root, slug, &c.id),
                branch: prepared.branch.or(c.branch_name.clone()),
                goal_mode: c.goal_mode,
                goal_max_turns: c.goal_max_turns,
                tenant: c.tenant.clone(),
                role: if s.owner_mode {
                    super::spawn::SpawnRole::Submitter
                } else {
                    super::spawn::SpawnRole::Worker
                },
            };
            match self.workers.spawn(&request) {
                Ok(pid) => {
                    let fingerprint = self
                        .workers
                        .fingerprint(pid)
                        .unwrap_or_else(|| crate::proc::process::UNVERIFIED.to_owned());
                    self.workers.track(Tracked {
                        pid,
                        fingerprint: Some(fingerprint.clone()),
                        task_id: c.id.clone(),
                        run_id: claimed.run_id,
                    });
                    records.push(board::SpawnRecord {
                        task_id: c.id.clone(),
                        run_id: claimed.run_id,
                        claim_lock: claimed.claim_lock.clone(),
                        pid,
                        fingerprint,
                    });
                    self.report.spawned.push(SpawnedWorker {
                        task_id: c.id.clone(),
                        title: c.title.clone(),
                        run_id: claimed.run_id,
                        profile,
                        lane: c.lane,
                        pid: Some(pid),
                    });
                }
                Err(err) => {
                    // The host's fault (no executable, no log file), not the task's.
                    let why = if matches!(
                        err,
                        super::spawn::SpawnError::Executable(_)
                            | super::spawn::SpawnError::Log { .. }
                    ) {
                        SpawnFailure::Infrastructure
                    } else {
                        SpawnFailure::Counted
                    };
                    self.spawn_failed(&c.id, &claimed, crate::error_chain(&err), why)?;
                }
            }
        }
        // A refusal means the claim vanished in between (an operator): nothing to do.
        self.board.record_spawns(&records, self.now)?;
        Ok(())
    }
}

/// How a failed spawn counts ([`Tick::spawn_failed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SpawnFailure {
    Infrastructure,
    NeedsInput,
    Counted,
}

/// Whether an owner-admitted run is held back from every reclaim phase this tick (README "Owner
/// admission"): a turn the owner recorded `unknown` always is (an operator decides); a turn
/// `started` under an owner that is gone only with `[dispatch] owner_lost_turn = "pause"` —
/// otherwise the run is released by the usual rules (a dead submitter is a crash, counted by the
/// failure breaker; a live one restarts the owner, which settles the lost turn `interrupted`).
fn owner_turn_paused(turn: &crate::board::admission::OwnerTurn, lost_turn_pauses: bool) -> bool {
    match turn.status.as_deref() {
        Some("unknown") => true,
        Some("started") => {
            lost_turn_pauses
                && turn.owner_pid.is_none_or(|pid| {
                    !crate::proc::process::liveness(pid, turn.owner_birth.as_deref())
                        .may_be_running()
                })
        }
        _ => false,
    }
}
