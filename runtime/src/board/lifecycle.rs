//! Dispatcher-side transitions and the reads the dispatcher's tick needs (owned by the dispatch
//! concern; built on the board's write helper, events and compare-and-swap discipline).
//!
//! Every transition here is fenced on the claim it acts for: `status = 'running' AND claim_lock IS
//! <lock> AND current_run_id IS <run>` (and, for claim extension, the expiry the dispatcher saw), so
//! a dispatcher acting on a stale snapshot changes nothing and gets a [`Refusal`]. None of them
//! inspects or signals a process: liveness is decided by `dispatch/` and passed in as facts.
//!
//! Failure accounting lives in [`release_claim_in`]: a counted failure increments
//! `consecutive_failures`; at the task's `max_retries` (else the dispatcher's limit) the task goes
//! `blocked` with `gave_up` instead of back to its run's retry status (`ready`, or `review` for a
//! reviewer's run: every release path keeps the review lane). A terminal-provider exit, an
//! exhausted protocol budget and a systemic crash ([`Failure::Systemic`]) block at once.
//! `blocked` is sticky on this board (only an operator's `unblock` leaves it), so a gave-up task
//! stays parked.
//!
//! The reads feed the tick: claimable candidates of each lane, the facts of the respawn guard
//! ([`Board::guard_facts`]), and closed runs whose worker may linger
//! ([`Board::lingering_workers`]).

use crate::db::{self, Db, OptionalExtension, params};
use serde::Serialize;

use super::error::Result;
use super::events::{Event, append_event};
use super::model::Status;
use super::outcome::{ClaimOutcome, Outcome, Refusal};
use super::store::Board;
use super::tasks::{
    ClaimSpec, check_seconds, claim_from_in, close_run_in, load_task, retry_status_for_run,
};
use crate::db::Tx;

/// A running task as the dispatcher's reclaim phases see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunningTask {
    pub id: String,
    pub run_id: Option<i64>,
    pub claim_lock: Option<String>,
    pub claim_expires: Option<i64>,
    pub worker_pid: Option<i64>,
    /// The pid fingerprint recorded at spawn (`"<boot id>|<start time>"`, or `unverified`).
    pub fingerprint: Option<String>,
    pub last_heartbeat_at: Option<i64>,
    /// Start of the current run (falls back to the task's first start).
    pub run_started_at: Option<i64>,
    pub max_runtime_seconds: Option<i64>,
    pub assignee: Option<String>,
}

/// A task the dispatcher may claim: `ready` (the implementer's lane) or `review` (the
/// reviewer's lane).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    pub id: String,
    /// `ready` or `review`: the status it is claimed from.
    pub lane: Status,
    pub title: String,
    pub assignee: Option<String>,
    pub branch_name: Option<String>,
    pub tenant: Option<String>,
    pub goal_mode: bool,
    pub goal_max_turns: Option<i64>,
    /// The error of the last counted or noted failure (a respawn guard reads it).
    pub last_failure_error: Option<String>,
    /// Whether the task has a closed run or a recent comment: only then can a respawn guard
    /// other than `blocker_auth` hold it, so a fresh task costs no [`Board::guard_facts`] query.
    pub has_history: bool,
}

/// The facts the dispatcher's respawn guard decides on (see [`Board::guard_facts`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GuardFacts {
    /// Outcome and end of the newest closed run (by `ended_at`), and whether it was a spawn
    /// failure of the host rather than of the task (`spawn_failed` {infrastructure: true}).
    pub latest_run: Option<LatestRun>,
    /// End of the newest `completed` run with no requeue event (`status`, `promoted`,
    /// `unblocked`, `reclaimed`) at or after it.
    pub unrequeued_success_at: Option<i64>,
    /// Time of the newest comment since `pr_since` that names a GitHub pull request, and the
    /// comment itself (the caller checks the URL), when no hand-off event followed it.
    pub pr_comments: Vec<(i64, String)>,
}

/// The newest closed run of a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LatestRun {
    pub outcome: Option<String>,
    pub ended_at: i64,
    pub infrastructure: bool,
}

/// What the dispatcher's `--until-idle` and the spawn budget look at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Workload {
    pub running: i64,
    /// Ready tasks, including those still in a rate-limit cooldown.
    pub ready: i64,
    /// Ready tasks whose rate-limit cooldown has not ended yet.
    pub cooling_down: i64,
}

/// How a released claim is accounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure<'a> {
    /// Not a failure (rate limit, stale heartbeat, orphan, protocol violation below its budget).
    NotCounted,
    /// A counted failure; the breaker trips at `limit` (`source` says whose limit it is).
    Counted { limit: i64, source: &'static str },
    /// Block now and stay blocked (terminal provider error, exhausted protocol budget).
    Trip { limit: i64, source: &'static str },
    /// Block now and stay blocked: `workers` workers died in one tick with this same error
    /// `fingerprint` (the systemic crash breaker); `gave_up` says so.
    Systemic {
        workers: usize,
        fingerprint: &'a str,
    },
}

/// How a dispatcher releases a claim.
#[derive(Debug, Clone, PartialEq)]
pub struct Release<'a> {
    /// The claim lock the dispatcher saw on the task.
    pub claim_lock: Option<&'a str>,
    /// The run the dispatcher saw as current.
    pub run_id: Option<i64>,
    /// Run outcome and status: `reclaimed`, `crashed` (also a protocol violation, as in the
    /// original: the event's `protocol_violation: true` lands in the run's metadata),
    /// `rate_limited`, `timed_out`, `stale`, `spawn_failed`.
    pub outcome: &'a str,
    /// The event describing the release (its `retry_status` should be `ready`).
    pub event: Event,
    pub failure: Failure<'a>,
    /// Stored as the run's error and the task's `last_failure_error` (≤ 500 chars).
    pub error: String,
}

/// A released claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Released {
    pub task_id: String,
    /// `ready` (`review` for a reviewer's run), or `blocked` when the breaker tripped.
    pub status: Status,
    pub failures: i64,
    pub gave_up: bool,
}

/// A spawned worker to record (see [`record_spawn_in`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnRecord {
    pub task_id: String,
    pub run_id: i64,
    pub claim_lock: String,
    pub pid: i64,
    pub fingerprint: String,
}

/// What a worker reports when it finishes (`worker_result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerResult<'a> {
    pub task_id: &'a str,
    pub run_id: Option<i64>,
    pub pid: i64,
    pub claim_lock: Option<&'a str>,
    pub exit_code: i32,
    pub last_output: Option<&'a str>,
}

/// A worker's registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Registered {
    pub task_id: String,
    pub run_id: i64,
}

/// Whether a run's metadata carries the protocol-violation marker (`protocol_violation: true`).
fn is_protocol_violation(metadata: Option<&str>) -> bool {
    metadata
        .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
        .and_then(|v| {
            v.get("protocol_violation")
                .and_then(serde_json::Value::as_bool)
        })
        .unwrap_or(false)
}

fn cap(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

fn cas(tx: &Tx<'_>, sql: &str, params: impl db::Params) -> Result<bool> {
    Ok(tx.prepare_cached(sql)?.execute(params)? == 1)
}

/// Runs a statement through the connection's statement cache; returns the rows changed.
fn exec(tx: &Tx<'_>, sql: &str, params: impl db::Params) -> Result<usize> {
    Ok(tx.prepare_cached(sql)?.execute(params)?)
}

/// Runs a write whose row count nothing checks (see [`db::Db::execute_unchecked`]).
fn exec_unchecked(tx: &Tx<'_>, sql: &str, params: impl db::Params) -> Result<()> {
    Ok(tx.execute_unchecked(sql, params)?)
}

/// The fence every dispatcher transition uses: the task is still running under the same claim
/// and run the caller saw.
const FENCE: &str = "status = 'running' AND claim_lock IS ?2 AND current_run_id IS ?3";

fn refusal(tx: &Tx<'_>, id: &str, lock: Option<&str>, run_id: Option<i64>) -> Result<Refusal> {
    let task = load_task(tx, id)?;
    Ok(if task.status != Status::Running {
        Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "running",
        }
    } else if task.current_run_id != run_id {
        Refusal::StaleRun {
            task_id: id.to_owned(),
            expected: run_id.unwrap_or_default(),
            current: task.current_run_id,
        }
    } else if task.claim_lock.as_deref() != lock {
        Refusal::NotClaimHolder {
            task_id: id.to_owned(),
            expected: lock.unwrap_or_default().to_owned(),
            current: task.claim_lock,
        }
    } else {
        Refusal::Raced {
            task_id: id.to_owned(),
        }
    })
}

/// Records the pid and fingerprint of a freshly spawned worker (event `spawned`, always appended;
/// the task row is updated only while the claim is still the one spawned for).
pub(crate) fn record_spawn_in(
    tx: &Tx<'_>,
    id: &str,
    run_id: i64,
    claim_lock: &str,
    pid: i64,
    fingerprint: &str,
    now: i64,
) -> Result<Outcome<()>> {
    let sql = format!(
        "UPDATE tasks SET worker_pid = ?4, worker_started_at = ?5 WHERE id = ?1 AND {FENCE}"
    );
    let current = cas(tx, &sql, params![id, claim_lock, run_id, pid, fingerprint])?;
    // A fast worker may have registered, finished and closed its run before this record: the
    // process was still started for this run, so the run row and the `spawned` event say so.
    exec_unchecked(
        tx,
        "UPDATE task_runs SET worker_pid = COALESCE(worker_pid, ?2), \
         worker_started_at = COALESCE(worker_started_at, ?3) WHERE id = ?1 AND task_id = ?4",
        params![run_id, pid, fingerprint, id],
    )?;
    let event = Event::Spawned {
        pid,
        started_at: Some(fingerprint.to_owned()),
    };
    append_event(tx, id, Some(run_id), &event, now)?;
    if current {
        Ok(Outcome::Done(()))
    } else {
        Ok(Outcome::Refused(refusal(
            tx,
            id,
            Some(claim_lock),
            Some(run_id),
        )?))
    }
}

/// A worker binds to its run: the claim must still be the one it was spawned for, and no other
/// pid may hold it (event `worker_registered`).
pub(crate) fn register_worker_in(
    tx: &Tx<'_>,
    id: &str,
    run_id: i64,
    claim_lock: &str,
    pid: i64,
    fingerprint: &str,
    now: i64,
) -> Result<Outcome<Registered>> {
    let sql = format!(
        "UPDATE tasks SET worker_pid = ?4, worker_started_at = ?5 \
         WHERE id = ?1 AND {FENCE} AND (worker_pid IS NULL OR worker_pid = ?4)"
    );
    if !cas(tx, &sql, params![id, claim_lock, run_id, pid, fingerprint])? {
        return Ok(Outcome::Refused(refusal(
            tx,
            id,
            Some(claim_lock),
            Some(run_id),
        )?));
    }
    exec_unchecked(
        tx,
        "UPDATE task_runs SET worker_pid = ?2, worker_started_at = ?3 WHERE id = ?1 AND ended_at IS NULL",
        params![run_id, pid, fingerprint],
    )?;
    let event = Event::WorkerRegistered {
        pid,
        started_at: Some(fingerprint.to_owned()),
    };
    append_event(tx, id, Some(run_id), &event, now)?;
    Ok(Outcome::Done(Registered {
        task_id: id.to_owned(),
        run_id,
    }))
}

/// Copies a task's new claim expiry onto its open run, so the run row tells the same lease.
fn mirror_run_expiry(tx: &Tx<'_>, run_id: Option<i64>, new_expires: i64) -> Result<()> {
    if let Some(run_id) = run_id {
        exec_unchecked(
            tx,
            "UPDATE task_runs SET claim_expires = ?2 WHERE id = ?1 AND ended_at IS NULL",
            params![run_id, new_expires],
        )?;
    }
    Ok(())
}

/// Extends the expired claim of a live, heartbeating host-local worker (event `claim_extended`).
/// Fenced on the expiry the dispatcher saw, so a heartbeat in between wins.
pub(crate) fn extend_claim_in(
    tx: &Tx<'_>,
    task: &RunningTask,
    new_expires: i64,
    now: i64,
) -> Result<Outcome<()>> {
    let sql = format!(
        "UPDATE tasks SET claim_expires = ?4 WHERE id = ?1 AND {FENCE} AND claim_expires IS ?5"
    );
    let lock = task.claim_lock.as_deref();
    if !cas(
        tx,
        &sql,
        params![task.id, lock, task.run_id, new_expires, task.claim_expires],
    )? {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: task.id.clone(),
        }));
    }
    mirror_run_expiry(tx, task.run_id, new_expires)?;
    let event = Event::ClaimExtended {
        reason: "pid_alive".to_owned(),
        worker_pid: task.worker_pid,
        claim_lock: lock.unwrap_or_default().to_owned(),
        claim_expires_was: task.claim_expires,
        claim_expires_now: new_expires,
        last_heartbeat_at: task.last_heartbeat_at,
    };
    append_event(tx, &task.id, task.run_id, &event, now)?;
    Ok(Outcome::Done(()))
}

/// Our worker survived termination: keep the claim until `new_expires` (event
/// `reclaim_deferred`). Never releases anything.
pub(crate) fn defer_reclaim_in(
    tx: &Tx<'_>,
    task: &RunningTask,
    new_expires: i64,
    reason: &str,
    termination: super::events::Termination,
    now: i64,
) -> Result<Outcome<()>> {
    let sql = format!("UPDATE tasks SET claim_expires = ?4 WHERE id = ?1 AND {FENCE}");
    let lock = task.claim_lock.as_deref();
    if !cas(tx, &sql, params![task.id, lock, task.run_id, new_expires])? {
        return Ok(Outcome::Refused(refusal(tx, &task.id, lock, task.run_id)?));
    }
    mirror_run_expiry(tx, task.run_id, new_expires)?;
    let event = Event::ReclaimDeferred {
        reason: reason.to_owned(),
        claim_lock: lock.unwrap_or_default().to_owned(),
        claim_expires_now: new_expires,
        termination: Some(termination),
    };
    append_event(tx, &task.id, task.run_id, &event, now)?;
    Ok(Outcome::Done(()))
}

/// Releases a running task's claim back to its run's retry status — `ready`, or `review` for a
/// reviewer's run — (or `blocked` when the breaker trips), closes
/// its run with `release.outcome`, and appends `release.event` (+ `gave_up` on a trip).
pub(crate) fn release_claim_in(
    tx: &Tx<'_>,
    id: &str,
    release: &Release<'_>,
    now: i64,
) -> Result<Outcome<Released>> {
    let task = load_task(tx, id)?;
    let lock = release.claim_lock;
    if task.status != Status::Running
        || task.claim_lock.as_deref() != lock
        || task.current_run_id != release.run_id
    {
        return Ok(Outcome::Refused(refusal(tx, id, lock, release.run_id)?));
    }
    let (failures, tripped, limit) = match release.failure {
        Failure::NotCounted => (task.consecutive_failures, false, None),
        Failure::Counted { limit, source } => {
            let n = task.consecutive_failures + 1;
            (n, n >= limit, Some((limit, source)))
        }
        Failure::Trip { limit, source } => {
            (task.consecutive_failures + 1, true, Some((limit, source)))
        }
        Failure::Systemic { .. } => (task.consecutive_failures + 1, true, Some((1, "systemic"))),
    };
    // A reviewer run goes back to review, never to ready.
    let retry = retry_status_for_run(tx, id, release.run_id)?;
    let status = if tripped { Status::Blocked } else { retry };
    let error = cap(&release.error, 500);
    let sql = format!(
        "UPDATE tasks SET status = ?4, claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, \
         worker_started_at = NULL, last_heartbeat_at = NULL, current_run_id = NULL, \
         consecutive_failures = ?5, last_failure_error = ?6 WHERE id = ?1 AND {FENCE}"
    );
    if !cas(
        tx,
        &sql,
        params![id, lock, release.run_id, status.as_str(), failures, error],
    )? {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    if let Some(run_id) = release.run_id {
        close_run_in(
            tx,
            run_id,
            release.outcome,
            release.outcome,
            None,
            Some(&error),
            now,
        )?;
        // The run's metadata is the event's payload, as the original stores it (its streak
        // counter reads `protocol_violation` there).
        let (_, payload) = release.event.encode()?;
        exec(
            tx,
            "UPDATE task_runs SET metadata = ?2 WHERE id = ?1",
            params![run_id, payload],
        )?;
    }
    append_event(
        tx,
        id,
        release.run_id,
        &with_retry_status(release.event.clone(), retry),
        now,
    )?;
    if tripped && let Some((limit, source)) = limit {
        let sticky = matches!(
            release.failure,
            Failure::Trip { .. } | Failure::Systemic { .. }
        );
        let (systemic_workers, error_fingerprint) = match release.failure {
            Failure::Systemic {
                workers,
                fingerprint,
            } => (Some(workers), Some(fingerprint.to_owned())),
            _ => (None, None),
        };
        let event = Event::GaveUp {
            failures,
            effective_limit: limit,
            limit_source: source.to_owned(),
            error: Some(error.clone()),
            trigger_outcome: release.outcome.to_owned(),
            retry_status: Some(retry),
            sticky: sticky.then_some(true),
            systemic_workers,
            error_fingerprint,
        };
        append_event(tx, id, release.run_id, &event, now)?;
    }
    Ok(Outcome::Done(Released {
        task_id: id.to_owned(),
        status,
        failures,
        gave_up: tripped,
    }))
}

/// Sets the `retry_status` of a release event to where the task actually goes.
fn with_retry_status(mut event: Event, retry: Status) -> Event {
    match &mut event {
        Event::Reclaimed { retry_status, .. }
        | Event::Crashed { retry_status, .. }
        | Event::ProtocolViolation { retry_status, .. }
        | Event::RateLimited { retry_status, .. }
        | Event::TimedOut { retry_status, .. }
        | Event::Stale { retry_status, .. }
        | Event::SpawnFailed { retry_status, .. } => *retry_status = retry,
        _ => {}
    }
    event
}

/// A running task without a claim (or without an expiry) whose worker is gone goes back to its
/// run's retry status (`ready`, or `review` for a reviewer's run), not counted (event
/// `reconciled`). The original sends every orphan to `ready`, turning a reviewer's run into an
/// implementer's; here the review lane keeps it.
pub(crate) fn reconcile_orphan_in(
    tx: &Tx<'_>,
    task: &RunningTask,
    now: i64,
) -> Result<Outcome<()>> {
    let retry = retry_status_for_run(tx, &task.id, task.run_id)?;
    let moved = cas(
        tx,
        "UPDATE tasks SET status = ?4, claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, \
         worker_started_at = NULL, last_heartbeat_at = NULL, current_run_id = NULL \
         WHERE id = ?1 AND status = 'running' AND (claim_lock IS NULL OR claim_expires IS NULL) \
         AND worker_pid IS ?2 AND current_run_id IS ?3",
        params![task.id, task.worker_pid, task.run_id, retry.as_str()],
    )?;
    if !moved {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: task.id.clone(),
        }));
    }
    exec(
        tx,
        "UPDATE task_runs SET status = 'reclaimed', outcome = 'reclaimed', \
         error = 'orphaned running task without a claim', ended_at = ?2 \
         WHERE task_id = ?1 AND ended_at IS NULL",
        params![task.id, now],
    )?;
    let event = Event::Reconciled {
        reason: "orphaned_running".to_owned(),
        claim_lock: task.claim_lock.clone(),
        claim_expires: task.claim_expires,
        worker_pid: task.worker_pid,
        now,
    };
    append_event(tx, &task.id, task.run_id, &event, now)?;
    Ok(Outcome::Done(()))
}

/// A closed run that still names its worker process: the worker may linger after its task
/// moved on (see [`Board::lingering_workers`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LingeringWorker {
    pub run_id: i64,
    pub task_id: String,
    pub pid: i64,
    /// The fingerprint recorded at spawn (`"<boot id>|<start time>"`, `unverified`, or none).
    pub fingerprint: Option<String>,
    /// The lock of the claim the run was opened under (its host prefix says where the worker ran).
    pub claim_lock: Option<String>,
}

/// What the reaper found for a [`LingeringWorker`].
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerGone {
    /// Already gone (or its pid now belongs to someone else): forget the pid quietly.
    Quietly,
    /// It was alive and the dispatcher terminated it (event `terminal_worker_reaped`).
    Terminated(super::events::Termination),
}

impl Board {
    /// Closed runs that ended at or before `ended_before` and still name a worker pid, oldest
    /// first, at most `limit` (read through the partial index `idx_runs_lingering`).
    pub fn lingering_workers(
        &self,
        ended_before: i64,
        limit: usize,
    ) -> Result<Vec<LingeringWorker>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT id, task_id, worker_pid, CAST(worker_started_at AS TEXT), claim_lock \
             FROM task_runs WHERE worker_pid IS NOT NULL AND ended_at IS NOT NULL \
               AND ended_at <= ?1 ORDER BY ended_at, id LIMIT ?2",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![ended_before, limit], |r| {
            Ok(LingeringWorker {
                run_id: r.get(0)?,
                task_id: r.get(1)?,
                pid: r.get(2)?,
                fingerprint: r.get::<_, Option<String>>(3)?.filter(|s| !s.is_empty()),
                claim_lock: r.get::<_, Option<String>>(4)?.filter(|s| !s.is_empty()),
            })
        })?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// Forgets the pid of each closed run whose worker is gone (one transaction), fenced on the
    /// pid and fingerprint the reaper saw; a terminated one also gets `terminal_worker_reaped`.
    /// Returns the runs cleared.
    pub fn forget_lingering_workers(
        &self,
        gone: &[(LingeringWorker, WorkerGone)],
        now: i64,
    ) -> Result<Vec<i64>> {
        if gone.is_empty() {
            return Ok(Vec::new());
        }
        self.write(|tx| {
            let mut cleared = Vec::new();
            for (w, how) in gone {
                if !cas(
                    tx,
                    "UPDATE task_runs SET worker_pid = NULL, worker_started_at = NULL \
                     WHERE id = ?1 AND ended_at IS NOT NULL AND worker_pid = ?2 \
                     AND CAST(worker_started_at AS TEXT) IS ?3",
                    params![w.run_id, w.pid, w.fingerprint],
                )? {
                    continue;
                }
                cleared.push(w.run_id);
                if let WorkerGone::Terminated(termination) = how {
                    let event = Event::TerminalWorkerReaped {
                        pid: w.pid,
                        worker_started_at: w.fingerprint.clone(),
                        termination: Some(termination.clone()),
                    };
                    append_event(tx, &w.task_id, Some(w.run_id), &event, now)?;
                }
            }
            Ok(cleared)
        })
    }

    /// Every running task with its claim, worker and current run.
    pub fn running_tasks(&self) -> Result<Vec<RunningTask>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT t.id, t.current_run_id, t.claim_lock, t.claim_expires, t.worker_pid, \
               CAST(t.worker_started_at AS TEXT), t.last_heartbeat_at, \
               COALESCE(r.started_at, t.started_at), t.max_runtime_seconds, t.assignee \
             FROM tasks t LEFT JOIN task_runs r ON r.id = t.current_run_id \
             WHERE t.status = 'running' ORDER BY t.id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(RunningTask {
                id: r.get(0)?,
                run_id: r.get(1)?,
                claim_lock: r.get::<_, Option<String>>(2)?.filter(|s| !s.is_empty()),
                claim_expires: r.get(3)?,
                worker_pid: r.get(4)?,
                fingerprint: r.get::<_, Option<String>>(5)?.filter(|s| !s.is_empty()),
                last_heartbeat_at: r.get(6)?,
                run_started_at: r.get(7)?,
                max_runtime_seconds: r.get(8)?,
                assignee: r.get::<_, Option<String>>(9)?.filter(|s| !s.is_empty()),
            })
        })?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// Up to `limit` claimable tasks of a lane — `ready`, or `review` (unclaimed `review` tasks,
    /// for their reviewer) — by priority DESC, then created_at ASC, then creation order. Whether
    /// one may be spawned now (cooldowns, recent success, an open pull request) is the
    /// dispatcher's respawn guard, fed by [`Board::guard_facts`].
    /// `comments_since` bounds [`Candidate::has_history`]'s look at comments.
    pub fn lane_candidates(
        &self,
        lane: Status,
        comments_since: i64,
        limit: usize,
    ) -> Result<Vec<Candidate>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT c.*, EXISTS (SELECT 1 FROM task_runs r WHERE r.task_id = c.id \
                 AND r.ended_at IS NOT NULL) \
               OR EXISTS (SELECT 1 FROM task_comments m WHERE m.task_id = c.id \
                 AND m.created_at >= ?3) \
             FROM (SELECT t.id, t.title, t.assignee, t.branch_name, t.tenant, t.goal_mode, \
                 t.goal_max_turns, t.last_failure_error \
               FROM tasks t WHERE t.status = ?2 AND t.claim_lock IS NULL \
               ORDER BY t.priority DESC, t.created_at ASC, t.rowid ASC LIMIT ?1) c",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![limit, lane.as_str(), comments_since], |r| {
            Ok(Candidate {
                id: r.get(0)?,
                lane,
                title: r.get(1)?,
                assignee: r.get::<_, Option<String>>(2)?.filter(|s| !s.is_empty()),
                branch_name: r.get::<_, Option<String>>(3)?.filter(|s| !s.is_empty()),
                tenant: r.get::<_, Option<String>>(4)?.filter(|s| !s.is_empty()),
                goal_mode: r.get::<_, Option<i64>>(5)?.unwrap_or(0) != 0,
                goal_max_turns: r.get(6)?,
                last_failure_error: r.get::<_, Option<String>>(7)?.filter(|s| !s.is_empty()),
                has_history: r.get(8)?,
            })
        })?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// What the respawn guard of task `id` needs: its newest closed run, an unrequeued
    /// completion, and comments since `pr_since` that mention a GitHub pull request and were not
    /// followed by a hand-off (`assigned` to another profile by an operator, `changes_requested`,
    /// `review_reopened`).
    pub fn guard_facts(&self, id: &str, pr_since: i64) -> Result<GuardFacts> {
        let conn = self.conn();
        let latest_run = conn
            .prepare_cached(
                "SELECT r.outcome, r.ended_at, EXISTS (SELECT 1 FROM task_events e \
                   WHERE e.task_id = r.task_id AND e.run_id = r.id AND e.kind = 'spawn_failed' \
                   AND json_extract(e.payload, '$.infrastructure') = 1) \
                 FROM task_runs r WHERE r.task_id = ?1 AND r.ended_at IS NOT NULL \
                 ORDER BY r.ended_at DESC, r.id DESC LIMIT 1",
            )?
            .query_row([id], |r| {
                Ok(LatestRun {
                    outcome: r.get(0)?,
                    ended_at: r.get(1)?,
                    infrastructure: r.get(2)?,
                })
            })
            .optional()?;
        let unrequeued_success_at = conn
            .prepare_cached(
                "SELECT r.ended_at FROM task_runs r WHERE r.task_id = ?1 \
                   AND r.outcome = 'completed' AND r.ended_at IS NOT NULL \
                   AND NOT EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = r.task_id \
                     AND e.kind IN ('status', 'promoted', 'unblocked', 'reclaimed') \
                     AND e.created_at >= r.ended_at) \
                 ORDER BY r.ended_at DESC LIMIT 1",
            )?
            .query_row([id], |r| r.get(0))
            .optional()?;
        let pr_comments = {
            let mut stmt = conn.prepare_cached(
                "SELECT c.created_at, c.body FROM task_comments c WHERE c.task_id = ?1 \
                   AND c.created_at >= ?2 AND c.body LIKE '%github.com/%/pull/%' \
                   AND NOT EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = c.task_id \
                     AND e.created_at > c.created_at AND (e.kind IN ('changes_requested', \
                       'review_reopened') OR (e.kind = 'assigned' \
                       AND json_extract(e.payload, '$.from') IS NOT NULL \
                       AND json_extract(e.payload, '$.from') IS NOT json_extract(e.payload, '$.assignee') \
                       AND json_extract(e.payload, '$.source') IS NULL))) \
                 ORDER BY c.created_at DESC, c.id DESC",
            )?;
            let rows = stmt.query_map(params![id, pr_since], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<db::Result<_>>()?
        };
        Ok(GuardFacts {
            latest_run,
            unrequeued_success_at,
            pr_comments,
        })
    }

    /// Running and ready counts (ready split by rate-limit cooldown).
    pub fn workload(&self, now: i64, cooldown: i64) -> Result<Workload> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT \
               (SELECT COUNT(*) FROM tasks WHERE status = 'running'), \
               (SELECT COUNT(*) FROM tasks WHERE status = 'ready'), \
               (SELECT COUNT(*) FROM tasks t WHERE t.status = 'ready' AND EXISTS ( \
                  SELECT 1 FROM task_runs r WHERE r.id = ( \
                    SELECT MAX(r2.id) FROM task_runs r2 WHERE r2.task_id = t.id AND r2.ended_at IS NOT NULL) \
                  AND r.outcome = 'rate_limited' AND r.ended_at + ?2 > ?1))",
        )?;
        Ok(stmt.query_row(params![now, cooldown], |r| {
            Ok(Workload {
                running: r.get(0)?,
                ready: r.get(1)?,
                cooling_down: r.get(2)?,
            })
        })?)
    }

    /// Ready tasks per assignee (`None` = unassigned), to tell work that can never be spawned
    /// (a profile nobody defined) from work that is merely waiting.
    pub fn ready_by_assignee(&self) -> Result<Vec<(Option<String>, i64)>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT NULLIF(TRIM(assignee), ''), COUNT(*) FROM tasks WHERE status = 'ready' \
             GROUP BY NULLIF(TRIM(assignee), '')",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// Records once that a ready task is not spawned because its profile is undefined (event
    /// `skipped_nonspawnable`, appended only when the task's newest event is not already the
    /// same note). Returns whether it was appended.
    pub fn note_nonspawnable(&self, id: &str, profile: &str, now: i64) -> Result<bool> {
        let event = Event::SkippedNonspawnable {
            assignee: Some(profile.to_owned()),
        };
        self.note_once(id, &event, now)
    }

    /// Records once that the respawn guard held a task back (event `respawn_guarded` {reason},
    /// appended only when the task's newest event is not already the same note, so a guard that
    /// holds for an hour writes one event, not one per tick). Returns whether it was appended.
    pub fn note_respawn_guarded(&self, id: &str, reason: &str, now: i64) -> Result<bool> {
        let event = Event::RespawnGuarded {
            reason: reason.to_owned(),
        };
        self.note_once(id, &event, now)
    }

    /// Appends `event` unless it is already the task's newest event.
    fn note_once(&self, id: &str, event: &Event, now: i64) -> Result<bool> {
        let (kind, payload) = event.encode()?;
        let noted = |conn: &Db| -> Result<bool> {
            let newest: Option<(String, Option<String>)> = conn
                .prepare_cached(
                    "SELECT kind, payload FROM task_events WHERE task_id = ?1 ORDER BY id DESC LIMIT 1",
                )?
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            Ok(newest.is_some_and(|(k, p)| k == kind && p == payload))
        };
        // Read first: the common case (already noted) takes no write lock.
        if noted(self.conn())? {
            return Ok(false);
        }
        self.write(|tx| {
            if noted(tx)? {
                return Ok(false);
            }
            append_event(tx, id, None, event, now)?;
            Ok(true)
        })
    }

    /// How many tasks are running on this board.
    pub fn running_count(&self) -> Result<i64> {
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT COUNT(*) FROM tasks WHERE status = 'running'")?;
        Ok(stmt.query_row([], |r| r.get(0))?)
    }

    /// Running tasks claimed by a lock that starts with `host_prefix` (`"<hostname>:"`).
    pub fn running_on_host(&self, host_prefix: &str) -> Result<i64> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT COUNT(*) FROM tasks WHERE status = 'running' AND substr(claim_lock, 1, length(?1)) = ?1",
        )?;
        Ok(stmt.query_row([host_prefix], |r| r.get(0))?)
    }

    /// How many of the task's newest closed runs in a row (rate-limited runs skipped) were
    /// protocol violations: outcome `crashed` with `protocol_violation: true` in the run's
    /// metadata, the rows the original counts (and writes) too.
    pub fn protocol_violation_streak(&self, id: &str) -> Result<i64> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT outcome, metadata FROM task_runs WHERE task_id = ?1 AND ended_at IS NOT NULL \
             ORDER BY id DESC LIMIT 50",
        )?;
        let rows = stmt.query_map([id], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, Option<String>>(1)?,
            ))
        })?;
        let mut streak = 0;
        for row in rows {
            let (outcome, metadata) = row?;
            match outcome.as_deref() {
                Some("crashed") if is_protocol_violation(metadata.as_deref()) => streak += 1,
                Some("rate_limited") => {}
                _ => break,
            }
        }
        Ok(streak)
    }

    /// The task's own failure limit (`max_retries`), if it has one.
    pub fn task_failure_limit(&self, id: &str) -> Result<Option<i64>> {
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT max_retries FROM tasks WHERE id = ?1")?;
        Ok(stmt
            .query_row([id], |r| r.get::<_, Option<i64>>(0))
            .optional()?
            .flatten()
            .filter(|n| *n >= 1))
    }

    /// SQLite's `PRAGMA data_version`: changes whenever another connection commits to the board.
    pub fn data_version(&self) -> Result<i64> {
        Ok(self.conn().data_version()?)
    }

    /// See [`record_spawn_in`].
    pub fn record_spawn(
        &self,
        id: &str,
        run_id: i64,
        claim_lock: &str,
        pid: i64,
        fingerprint: &str,
        now: i64,
    ) -> Result<Outcome<()>> {
        self.write(|tx| record_spawn_in(tx, id, run_id, claim_lock, pid, fingerprint, now))
    }

    /// Claims a whole batch in **one** write transaction (one commit, so one fsync, for a tick's
    /// claims): each `(task id, lane)` is claimed from `ready`, or for its reviewer from
    /// `review`, by the same compare-and-swap as [`Board::claim`] / [`Board::claim_review`], with
    /// its own run row and `claimed` event. One entry per pick, in order:
    ///
    /// * `Ok(ClaimOutcome::Claimed)` — claimed;
    /// * `Ok(ClaimOutcome::Lost)` — the compare-and-swap lost (someone else acted first, a parent
    ///   reopened): a typed outcome, the other claims go on;
    /// * `Err(_)` — this claim failed (an unknown id, an SQL error); everything it wrote is rolled
    ///   back to a savepoint taken before it, and the other claims of the batch still commit.
    ///
    /// The outer error is the transaction's own (cannot begin or commit: nothing of the batch is
    /// kept) or a bad `spec` (refused before anything is written).
    pub fn claim_batch(
        &self,
        picks: &[(String, Status)],
        spec: &ClaimSpec,
        now: i64,
    ) -> Result<Vec<Result<ClaimOutcome>>> {
        check_seconds("the claim TTL", spec.ttl_seconds)?;
        if picks.is_empty() {
            return Ok(Vec::new());
        }
        self.write_row_locked(|tx| {
            let mut outcomes = Vec::with_capacity(picks.len());
            for (id, lane) in picks {
                // Sent with the claim's first statement (PostgreSQL), as its `RELEASE` is with
                // the next one's.
                exec_unchecked(tx, "SAVEPOINT claim_batch_item", [])?;
                let lane = if *lane == Status::Review {
                    Status::Review
                } else {
                    Status::Ready
                };
                let outcome =
                    match super::engine::postgres::fast::claim(tx, id, lane, spec, now, false) {
                        Ok(Some(claimed)) => Ok(ClaimOutcome::Claimed(claimed)),
                        Ok(None) => claim_from_in(tx, id, lane, spec, now),
                        Err(e) => Err(e),
                    };
                // A queued write of this claim (its event) that failed must fail this claim
                // alone, as it would have at once: it is sent and answered here.
                let outcome = outcome.and_then(|o| Ok(tx.sync().map(|()| o)?));
                if outcome.is_err() {
                    exec(tx, "ROLLBACK TO claim_batch_item", [])?;
                }
                exec_unchecked(tx, "RELEASE claim_batch_item", [])?;
                outcomes.push(outcome);
            }
            Ok(outcomes)
        })
    }

    /// Records several spawns in one transaction (see [`record_spawn_in`]).
    pub fn record_spawns(&self, spawns: &[SpawnRecord], now: i64) -> Result<Vec<Outcome<()>>> {
        self.write(|tx| {
            spawns
                .iter()
                .map(|s| {
                    record_spawn_in(
                        tx,
                        &s.task_id,
                        s.run_id,
                        &s.claim_lock,
                        s.pid,
                        &s.fingerprint,
                        now,
                    )
                })
                .collect()
        })
    }

    /// See [`register_worker_in`].
    pub fn register_worker(
        &self,
        id: &str,
        run_id: i64,
        claim_lock: &str,
        pid: i64,
        fingerprint: &str,
        now: i64,
    ) -> Result<Outcome<Registered>> {
        self.write(|tx| register_worker_in(tx, id, run_id, claim_lock, pid, fingerprint, now))
    }

    /// See [`extend_claim_in`].
    pub fn extend_claim(
        &self,
        task: &RunningTask,
        new_expires: i64,
        now: i64,
    ) -> Result<Outcome<()>> {
        self.write(|tx| extend_claim_in(tx, task, new_expires, now))
    }

    /// See [`defer_reclaim_in`].
    pub fn defer_reclaim(
        &self,
        task: &RunningTask,
        new_expires: i64,
        reason: &str,
        termination: super::events::Termination,
        now: i64,
    ) -> Result<Outcome<()>> {
        self.write(|tx| defer_reclaim_in(tx, task, new_expires, reason, termination, now))
    }

    /// See [`release_claim_in`].
    pub fn release_claim(
        &self,
        id: &str,
        release: &Release<'_>,
        now: i64,
    ) -> Result<Outcome<Released>> {
        self.write(|tx| release_claim_in(tx, id, release, now))
    }

    /// See [`reconcile_orphan_in`].
    pub fn reconcile_orphan(&self, task: &RunningTask, now: i64) -> Result<Outcome<()>> {
        self.write(|tx| reconcile_orphan_in(tx, task, now))
    }

    /// Appends the worker's claim-bound `worker_result` (an event only; it changes no state).
    pub fn record_worker_result(&self, result: &WorkerResult<'_>, now: i64) -> Result<()> {
        let event = Event::WorkerResult {
            pid: result.pid,
            claim_lock: result.claim_lock.map(str::to_owned),
            exit_code: result.exit_code,
            last_output: result.last_output.map(|o| cap(o, 2000)),
        };
        self.write(|tx| append_event(tx, result.task_id, result.run_id, &event, now))
    }
}

/// Why a claim has no worker (see [`release_unstarted_claim_in`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbandonReason {
    /// Another dispatcher on this host claimed and died before it spawned
    /// (`claimer_gone_before_spawn`).
    ClaimerGone,
    /// This dispatcher started the worker but could not record its pid (a full disk), and the
    /// worker exited without registering (`worker_never_registered`).
    WorkerNeverRegistered,
}

impl AbandonReason {
    /// The `reason` of the `claim_abandoned` event.
    pub fn as_str(self) -> &'static str {
        match self {
            AbandonReason::ClaimerGone => "claimer_gone_before_spawn",
            AbandonReason::WorkerNeverRegistered => "worker_never_registered",
        }
    }
}

/// Why a claim whose worker never started is released (see [`release_unstarted_claim_in`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abandonment {
    pub reason: AbandonReason,
    /// The claiming dispatcher's pid (from its claim lock), when it could be read.
    pub claimer_pid: Option<i64>,
    /// How long the claim went without a worker pid before it was released.
    pub grace_seconds: i64,
}

/// What the events of a run say about its claim: whether a dispatcher made it for a worker of
/// its own (`claimed` with `dispatcher: true`) and whether anyone heartbeated it since.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClaimProvenance {
    pub by_dispatcher: bool,
    pub heartbeated: bool,
}

impl ClaimProvenance {
    /// Why the claim must not be released as abandoned, if it must not: only a dispatcher's
    /// claim that nobody heartbeated may be.
    pub fn live_reason(self) -> Option<&'static str> {
        if !self.by_dispatcher {
            Some(
                "it was not made by a dispatcher (an external claim ends by TTL, a stale heartbeat or a reclaim)",
            )
        } else if self.heartbeated {
            Some("its worker heartbeats")
        } else {
            None
        }
    }
}

/// See [`ClaimProvenance`]; a run without events (or no run) is an external claim.
pub(crate) fn claim_provenance_in(
    db: &db::Db,
    task_id: &str,
    run_id: Option<i64>,
) -> Result<ClaimProvenance> {
    let Some(run_id) = run_id else {
        return Ok(ClaimProvenance::default());
    };
    let mut stmt = db.prepare_cached(
        "SELECT kind, payload FROM task_events \
         WHERE task_id = ?1 AND run_id = ?2 AND kind IN ('claimed', 'heartbeat')",
    )?;
    let rows = stmt.query_map(params![task_id, run_id], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
    })?;
    let mut seen = ClaimProvenance::default();
    for row in rows {
        let (kind, payload) = row?;
        if kind == "heartbeat" {
            seen.heartbeated = true;
        } else {
            // The key is read alone: an unreadable payload (another writer's) is not proof.
            let marked = payload
                .and_then(|p| serde_json::from_str::<serde_json::Value>(&p).ok())
                .and_then(|v| v.get("dispatcher").and_then(serde_json::Value::as_bool));
            seen.by_dispatcher |= marked == Some(true);
        }
    }
    Ok(seen)
}

/// Outcome and error stored on a run released by [`release_unstarted_claim_in`].
pub const ABANDONED_OUTCOME: &str = "abandoned";

/// A claim whose worker never started — no pid recorded and none registered, the claiming
/// dispatcher gone (it died between its claim commit and the spawn) — goes back to `ready`
/// without counting a failure (event `claim_abandoned`). Fenced on the claim the dispatcher saw
/// **and** on `worker_pid IS NULL`, so a worker that registers in between keeps its claim; a
/// worker that registers after the release is refused (its run is closed) and exits.
pub(crate) fn release_unstarted_claim_in(
    tx: &Tx<'_>,
    task: &RunningTask,
    why: &Abandonment,
    now: i64,
) -> Result<Outcome<()>> {
    let lock = task.claim_lock.as_deref();
    if let Some(why) = claim_provenance_in(tx, &task.id, task.run_id)?.live_reason() {
        return Ok(Outcome::Refused(Refusal::NotAbandoned {
            task_id: task.id.clone(),
            why,
        }));
    }
    // A reviewer's claim goes back to review.
    let retry = retry_status_for_run(tx, &task.id, task.run_id)?;
    let sql = format!(
        "UPDATE tasks SET status = ?4, claim_lock = NULL, claim_expires = NULL, \
         worker_pid = NULL, worker_started_at = NULL, last_heartbeat_at = NULL, \
         current_run_id = NULL WHERE id = ?1 AND {FENCE} AND worker_pid IS NULL"
    );
    if !cas(
        tx,
        &sql,
        params![task.id, lock, task.run_id, retry.as_str()],
    )? {
        return Ok(Outcome::Refused(refusal(tx, &task.id, lock, task.run_id)?));
    }
    let error = match why.reason {
        AbandonReason::ClaimerGone => format!(
            "claimed by {} but no worker started within {}s and that dispatcher is gone",
            lock.unwrap_or_default(),
            why.grace_seconds
        ),
        AbandonReason::WorkerNeverRegistered => format!(
            "claimed by {} whose worker exited without registering (its pid was never recorded)",
            lock.unwrap_or_default()
        ),
    };
    if let Some(run_id) = task.run_id {
        close_run_in(
            tx,
            run_id,
            ABANDONED_OUTCOME,
            ABANDONED_OUTCOME,
            None,
            Some(&error),
            now,
        )?;
    }
    let event = Event::ClaimAbandoned {
        reason: why.reason.as_str().to_owned(),
        claim_lock: lock.unwrap_or_default().to_owned(),
        claimer_pid: why.claimer_pid,
        claimed_at: task.run_started_at,
        grace_seconds: why.grace_seconds,
    };
    append_event(tx, &task.id, task.run_id, &event, now)?;
    Ok(Outcome::Done(()))
}

/// A closed run whose worker pid is on record: the process may outlive its run when an operator
/// reclaims or archives the task (the task's columns are cleared; the run row keeps the pid).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndedRun {
    pub run_id: i64,
    pub task_id: String,
    pub claim_lock: Option<String>,
    pub worker_pid: i64,
    /// The fingerprint recorded at spawn or registration.
    pub fingerprint: Option<String>,
    pub outcome: Option<String>,
}

/// The state of one run as the dispatcher's superseded-worker check needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunState {
    pub ended: bool,
    pub outcome: Option<String>,
    /// The task's current run (`None` when no run is open).
    pub current_run_id: Option<i64>,
}

impl Board {
    /// See [`ClaimProvenance`].
    pub fn claim_provenance(&self, task_id: &str, run_id: Option<i64>) -> Result<ClaimProvenance> {
        claim_provenance_in(self.conn(), task_id, run_id)
    }

    /// See [`release_unstarted_claim_in`].
    pub fn release_unstarted_claim(
        &self,
        task: &RunningTask,
        why: &Abandonment,
        now: i64,
    ) -> Result<Outcome<()>> {
        self.write(|tx| release_unstarted_claim_in(tx, task, why, now))
    }

    /// The task's most recent closed runs (newest first, at most `limit`) that have a worker pid.
    pub fn ended_runs_with_worker(&self, task_id: &str, limit: usize) -> Result<Vec<EndedRun>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT id, task_id, claim_lock, worker_pid, CAST(worker_started_at AS TEXT), outcome \
             FROM task_runs WHERE task_id = ?1 AND ended_at IS NOT NULL AND worker_pid IS NOT NULL \
             ORDER BY id DESC LIMIT ?2",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![task_id, limit], |r| {
            Ok(EndedRun {
                run_id: r.get(0)?,
                task_id: r.get(1)?,
                claim_lock: r.get::<_, Option<String>>(2)?.filter(|s| !s.is_empty()),
                worker_pid: r.get(3)?,
                fingerprint: r.get::<_, Option<String>>(4)?.filter(|s| !s.is_empty()),
                outcome: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// Whether run `run_id` of `task_id` has ended, how, and which run of the task is current;
    /// `None` when either is unknown.
    pub fn run_state(&self, task_id: &str, run_id: i64) -> Result<Option<RunState>> {
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT r.ended_at IS NOT NULL, r.outcome, t.current_run_id \
                 FROM task_runs r JOIN tasks t ON t.id = r.task_id \
                 WHERE r.id = ?1 AND r.task_id = ?2",
            )?
            .query_row(params![run_id, task_id], |r| {
                Ok(RunState {
                    ended: r.get(0)?,
                    outcome: r.get(1)?,
                    current_run_id: r.get(2)?,
                })
            })
            .optional()?)
    }

    /// Records that the dispatcher stopped a worker whose run `run_id` is no longer current
    /// (event `worker_superseded`; no state changes).
    pub fn record_superseded_worker(
        &self,
        task_id: &str,
        run_id: i64,
        event: &Event,
        now: i64,
    ) -> Result<()> {
        self.write(|tx| append_event(tx, task_id, Some(run_id), event, now))
    }
}
