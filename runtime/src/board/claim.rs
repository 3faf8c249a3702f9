//! Claiming a task from `ready` (the implementer's lane) or `review` (the reviewer's lane): the
//! parent gate, the CAS to `running`, a new run; on PostgreSQL first as one statement.

use crate::db::{OptionalExtension, RowLock, Tx, params};

use super::error::{BoardError, Result};
use super::events::{Event, append_event};
use super::input::{ClaimOrigin, ClaimSpec, RECLAIM_ON_CLAIM_NOTE, check_seconds};
use super::model::{Status, opt_text, task_status};
use super::outcome::{ClaimOutcome, Claimed, Refusal};
use super::rows::{cas, close_leaked_runs, exec, gating_parents, insert_returning_id};
use super::store::Board;

/// What a claim reads of its task: whether it is claimable, and what its run copies. Only these
/// columns, not the whole row (a task's body and result can be long, and a claim is the
/// dispatcher's hottest write).
struct ClaimRead {
    status: Status,
    claim_lock: Option<String>,
    assignee: Option<String>,
    max_runtime_seconds: Option<i64>,
}

impl ClaimRead {
    /// The task's claim columns; `None` when no row was read (on PostgreSQL also when another
    /// transaction holds the row, which is not waited for).
    fn load(tx: &Tx<'_>, id: &str) -> Result<Option<ClaimRead>> {
        const SQL: &str =
            "SELECT status, claim_lock, assignee, max_runtime_seconds FROM tasks WHERE id = ?1";
        static SKIPPING: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let sql: &str = match tx.row_lock(RowLock::Skip) {
            None => SQL,
            Some(skip) => SKIPPING.get_or_init(|| format!("{SQL}{skip}")),
        };
        let row = tx
            .prepare_cached(sql)?
            .query_row([id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    opt_text(r, 1)?,
                    opt_text(r, 2)?,
                    r.get(3)?,
                ))
            })
            .optional()?;
        let Some((status, claim_lock, assignee, max_runtime_seconds)) = row else {
            return Ok(None);
        };
        let status = task_status(id, &status)?;
        Ok(Some(ClaimRead {
            status,
            claim_lock,
            assignee,
            max_runtime_seconds,
        }))
    }
}

/// The claim of either dispatchable lane: `source` is `ready` (implementer) or `review`
/// (reviewer; the `claimed` event then carries `source_status: review`, which every reclaim path
/// reads to send the task back to `review`).
pub(crate) fn claim_from_in(
    tx: &Tx<'_>,
    id: &str,
    source: Status,
    spec: &ClaimSpec,
    now: i64,
) -> Result<ClaimOutcome> {
    check_seconds("the claim TTL", spec.ttl_seconds)?;
    // PostgreSQL: the task's row is read and locked without waiting. A row another transaction
    // holds (another claim, a transition of the task in flight) is a lost claim, never waited
    // for; once held, nothing else changes the row before this transaction ends.
    let Some(task) = ClaimRead::load(tx, id)? else {
        let exists = tx
            .prepare_cached("SELECT 1 FROM tasks WHERE id = ?1")?
            .query_row([id], |_| Ok(()))
            .optional()?
            .is_some();
        if !exists {
            return Err(BoardError::TaskNotFound { id: id.to_owned() });
        }
        return Ok(ClaimOutcome::Lost(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    };
    if task.status != source || task.claim_lock.is_some() {
        return Ok(ClaimOutcome::Lost(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: if source == Status::Review {
                "review and unclaimed"
            } else {
                "ready and unclaimed"
            },
        }));
    }
    let open = gating_parents(tx, id)?;
    if !open.is_empty() {
        if cas(
            tx,
            "UPDATE tasks SET status = 'todo' WHERE id = ?1 AND status = ?2 AND claim_lock IS NULL",
            params![id, source.as_str()],
        )? {
            let event = if source == Status::Review {
                Event::DependencyWait {
                    reason: "parent_reopened".to_owned(),
                    kind: None,
                    source_status: Some(Status::Review),
                    parent: open.first().cloned(),
                    source: None,
                }
            } else {
                Event::ClaimRejected {
                    reason: "parents_not_done".to_owned(),
                    parents: open.clone(),
                }
            };
            append_event(tx, id, None, &event, now)?;
        }
        return Ok(ClaimOutcome::Lost(Refusal::ParentsNotDone {
            task_id: id.to_owned(),
            parents: open,
        }));
    }
    close_leaked_runs(tx, id, RECLAIM_ON_CLAIM_NOTE, now)?;
    let expires = now + spec.ttl_seconds;
    // The run row first, so one UPDATE of the task row both claims it and points it at the run
    // (each statement on `tasks` rewrites its page and its `idx_tasks_status_order` entry).
    let run_id = insert_returning_id(
        tx,
        "INSERT INTO task_runs (task_id, profile, status, claim_lock, claim_expires, \
         max_runtime_seconds, last_heartbeat_at, started_at) \
         VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?6) RETURNING id",
        params![
            id,
            task.assignee,
            spec.lock,
            expires,
            task.max_runtime_seconds,
            now
        ],
    )?;
    let won = cas(
        tx,
        "UPDATE tasks SET status = 'running', claim_lock = ?2, claim_expires = ?3, \
         started_at = COALESCE(started_at, ?4), last_heartbeat_at = ?4, worker_pid = NULL, \
         worker_started_at = NULL, current_run_id = ?5 \
         WHERE id = ?1 AND status = ?6 AND claim_lock IS NULL",
        params![id, spec.lock, expires, now, run_id, source.as_str()],
    )?;
    if !won {
        // Unreachable under the write lock (SQLite) or the row lock (PostgreSQL) after the
        // checks above; undo the run all the same.
        exec(tx, "DELETE FROM task_runs WHERE id = ?1", [run_id])?;
        return Ok(ClaimOutcome::Lost(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    append_event(
        tx,
        id,
        Some(run_id),
        &Event::Claimed {
            lock: spec.lock.clone(),
            expires,
            run_id,
            source_status: (source == Status::Review).then_some(Status::Review),
            dispatcher: spec.origin == ClaimOrigin::Dispatcher,
        },
        now,
    )?;
    Ok(ClaimOutcome::Claimed(Claimed {
        task_id: id.to_owned(),
        run_id,
        claim_lock: spec.lock.clone(),
        claim_expires: expires,
    }))
}

impl Board {
    /// Claims a ready task: parent gate (demotes to `todo` when a parent reopened), CAS
    /// `ready → running`, a new run, `current_run_id`, a fresh heartbeat, event `claimed`.
    pub fn claim(&self, id: &str, spec: &ClaimSpec, now: i64) -> Result<ClaimOutcome> {
        self.claim_from(id, Status::Ready, spec, now)
    }

    /// [`Board::claim`] or [`Board::claim_review`]: on PostgreSQL first in one round trip
    /// (`board::engine::postgres::fast`), then, when that claimed nothing, the generic claim, which says why.
    fn claim_from(
        &self,
        id: &str,
        source: Status,
        spec: &ClaimSpec,
        now: i64,
    ) -> Result<ClaimOutcome> {
        check_seconds("the claim TTL", spec.ttl_seconds)?;
        if self.is_postgres()
            && let Some(claimed) = self.write_row_locked(|tx| {
                super::engine::postgres::fast::claim(tx, id, source, spec, now, true)
            })?
        {
            return Ok(ClaimOutcome::Claimed(claimed));
        }
        self.write_row_locked(|tx| claim_from_in(tx, id, source, spec, now))
    }

    /// Claims a `review` task for its reviewer (the review lane): like [`Board::claim`], from
    /// `review`; the `claimed` event says `source_status: review`.
    pub fn claim_review(&self, id: &str, spec: &ClaimSpec, now: i64) -> Result<ClaimOutcome> {
        self.claim_from(id, Status::Review, spec, now)
    }
}
