//! The dispatcher's transitions: recording a spawn, a worker's registration, extending, deferring
//! and releasing a claim (with the failure accounting), reconciling an orphan, releasing a claim
//! whose worker never started, and the dispatcher's notes. Each is fenced on the claim it acts
//! for and inspects no process: liveness is decided by `dispatch/` and passed in as facts; the
//! reads its tick needs are in `dispatcher_reads.rs`. Failure accounting (`consecutive_failures`,
//! `gave_up` at the limit, the run's retry status) is in [`release_claim_in`]; its rules are in
//! docs/dispatch.md.

use crate::db::{Db, OptionalExtension, params};
use serde::Serialize;

use super::claim::claim_from_in;
use super::dispatcher_reads::{LingeringWorker, RunningTask};
use super::error::Result;
use super::events::{Event, append_event};
use super::input::{ClaimSpec, check_seconds};
use super::model::{BlockKind, Status};
use super::outcome::{ClaimOutcome, Outcome, Refusal};
use super::rows::{cas, close_run_in, exec, exec_unchecked, load_task, retry_status_for_run};
use super::store::Board;
use crate::db::Tx;

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
    /// Not the task's failure and not worth a retry: an operator must act (a worktree task on a
    /// board with no default workdir, a repository git cannot use). The task is blocked
    /// `needs_input` with the error as its reason; its failure count is left alone.
    NeedsInput,
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

fn cap(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
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

/// The workspace a dispatcher materialised for a claimed run, recorded before its worker starts
/// (see [`record_workspace_in`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRecord {
    pub task_id: String,
    pub run_id: i64,
    pub claim_lock: String,
    pub kind: String,
    pub path: String,
    pub branch: Option<String>,
}

/// Writes a claimed run's resolved workspace to the task (`workspace_path`, and `branch_name`
/// when the workspace has one), fenced by the claim, with a `workspace_resolved` event; a run
/// whose workspace is already so recorded writes nothing.
pub(crate) fn record_workspace_in(
    tx: &Tx<'_>,
    record: &WorkspaceRecord,
    now: i64,
) -> Result<Outcome<()>> {
    let task = load_task(tx, &record.task_id)?;
    let branch = record.branch.clone().or(task.branch_name.clone());
    if task.workspace_path.as_deref() == Some(record.path.as_str()) && task.branch_name == branch {
        return Ok(Outcome::Done(()));
    }
    let sql =
        format!("UPDATE tasks SET workspace_path = ?4, branch_name = ?5 WHERE id = ?1 AND {FENCE}");
    let lock = Some(record.claim_lock.as_str());
    if !cas(
        tx,
        &sql,
        params![
            record.task_id,
            lock,
            Some(record.run_id),
            record.path,
            branch
        ],
    )? {
        return Ok(Outcome::Refused(refusal(
            tx,
            &record.task_id,
            lock,
            Some(record.run_id),
        )?));
    }
    let event = Event::WorkspaceResolved {
        workspace_kind: record.kind.clone(),
        workspace_path: record.path.clone(),
        branch_name: branch,
    };
    append_event(tx, &record.task_id, Some(record.run_id), &event, now)?;
    Ok(Outcome::Done(()))
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
        Failure::NeedsInput => (task.consecutive_failures, false, None),
    };
    let needs_input = matches!(release.failure, Failure::NeedsInput);
    // A reviewer run goes back to review, never to ready.
    let retry = retry_status_for_run(tx, id, release.run_id)?;
    let status = if tripped || needs_input {
        Status::Blocked
    } else {
        retry
    };
    let error = cap(&release.error, 500);
    let block_kind = needs_input.then_some(BlockKind::NeedsInput.as_str());
    let sql = format!(
        "UPDATE tasks SET status = ?4, claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, \
         worker_started_at = NULL, last_heartbeat_at = NULL, current_run_id = NULL, \
         consecutive_failures = ?5, last_failure_error = ?6, \
         block_kind = COALESCE(?7, block_kind) WHERE id = ?1 AND {FENCE}"
    );
    if !cas(
        tx,
        &sql,
        params![
            id,
            lock,
            release.run_id,
            status.as_str(),
            failures,
            error,
            block_kind
        ],
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
    if needs_input {
        let event = Event::Blocked {
            reason: Some(error.clone()),
            kind: Some(BlockKind::NeedsInput),
            recurrences: None,
            source_status: Some(Status::Running),
            status: Some(Status::Blocked),
            actor: Some("dispatcher".to_owned()),
            requested_kind: None,
            rekind_reason: None,
        };
        append_event(tx, id, release.run_id, &event, now)?;
    }
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

/// What the reaper found for a [`LingeringWorker`].
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerGone {
    /// Already gone (or its pid now belongs to someone else): forget the pid quietly.
    Quietly,
    /// It was alive and the dispatcher terminated it (event `terminal_worker_reaped`).
    Terminated(super::events::Termination),
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
pub(crate) struct ClaimProvenance {
    pub by_dispatcher: bool,
    pub heartbeated: bool,
}

impl ClaimProvenance {
    /// Why the claim must not be released as abandoned, if it must not: only a dispatcher's
    /// claim that nobody heartbeated may be.
    pub(crate) fn live_reason(self) -> Option<&'static str> {
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
    db: &crate::db::Db,
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

impl Board {
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
        self.claim_batch_judged(picks, &[], spec, now)
    }

    /// [`Board::claim_batch`] where the pick at index `i` with `judged[i]` set is claimed only
    /// while the task is still as the board's `pre_claim` policy judged it (checked inside the
    /// claim's transaction; a change loses the claim as `Raced`).
    pub fn claim_batch_judged(
        &self,
        picks: &[(String, Status)],
        judged: &[Option<super::policy::PolicySnapshot>],
        spec: &ClaimSpec,
        now: i64,
    ) -> Result<Vec<Result<ClaimOutcome>>> {
        check_seconds("the claim TTL", spec.ttl_seconds)?;
        if picks.is_empty() {
            return Ok(Vec::new());
        }
        self.write_row_locked(|tx| {
            let mut outcomes = Vec::with_capacity(picks.len());
            for (i, (id, lane)) in picks.iter().enumerate() {
                if let Some(Some(before)) = judged.get(i)
                    && !super::policy::unchanged_in(tx, before)?
                {
                    outcomes.push(Ok(ClaimOutcome::Lost(Refusal::Raced {
                        task_id: id.clone(),
                    })));
                    continue;
                }
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
    /// Records resolved workspaces in one transaction ([`record_workspace_in`] each).
    pub fn record_workspaces(
        &self,
        records: &[WorkspaceRecord],
        now: i64,
    ) -> Result<Vec<Outcome<()>>> {
        self.write(|tx| {
            records
                .iter()
                .map(|r| record_workspace_in(tx, r, now))
                .collect()
        })
    }

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
        // Only the task's own rows, its row first (as a heartbeat): on PostgreSQL without the
        // board's write lock (docs/postgres.md, "Heartbeats and worker registrations").
        self.write_row_locked(|tx| {
            register_worker_in(tx, id, run_id, claim_lock, pid, fingerprint, now)
        })
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

    /// See [`ClaimProvenance`].
    pub(crate) fn claim_provenance(
        &self,
        task_id: &str,
        run_id: Option<i64>,
    ) -> Result<ClaimProvenance> {
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
