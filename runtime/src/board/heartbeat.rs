//! The worker's heartbeat: extends the claim and stamps the task and its run, fenced on the claim
//! the caller holds; on PostgreSQL first as one statement.

use crate::db::{OptionalExtension, RowLock, Tx, params};

use super::error::{BoardError, Result};
use super::events::append_event;
use super::input::{Fence, check_seconds, heartbeat_event};
use super::model::{Status, opt_text, task_status};
use super::outcome::{Heartbeated, Outcome, Refusal};
use super::rows::{cas, exec_unchecked};
use super::store::Board;

/// What a heartbeat reads of its task: its status and the claim the fence is checked against.
/// Only these columns, not the whole row (a heartbeat is a worker's most frequent write).
struct Lease {
    status: Status,
    claim_lock: Option<String>,
    current_run_id: Option<i64>,
}

impl Lease {
    fn load(tx: &Tx<'_>, id: &str) -> Result<Lease> {
        const SQL: &str = "SELECT status, claim_lock, current_run_id FROM tasks WHERE id = ?1";
        static LOCKED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let sql: &str = match tx.row_lock(RowLock::Wait) {
            None => SQL,
            Some(lock) => LOCKED.get_or_init(|| format!("{SQL}{lock}")),
        };
        let (status, claim_lock, current_run_id): (String, Option<String>, Option<i64>) = tx
            .prepare_cached(sql)?
            .query_row([id], |r| Ok((r.get(0)?, opt_text(r, 1)?, r.get(2)?)))
            .optional()?
            .ok_or_else(|| BoardError::TaskNotFound { id: id.to_owned() })?;
        let status = task_status(id, &status)?;
        Ok(Lease {
            status,
            claim_lock,
            current_run_id,
        })
    }

    /// Checks `fence` against the task; `None` when it holds.
    fn refusal(&self, id: &str, fence: &Fence) -> Option<Refusal> {
        if let Some(run_id) = fence.run_id
            && self.current_run_id != Some(run_id)
        {
            return Some(Refusal::StaleRun {
                task_id: id.to_owned(),
                expected: run_id,
                current: self.current_run_id,
            });
        }
        if let Some(lock) = &fence.claim_lock
            && self.claim_lock.as_deref() != Some(lock)
        {
            return Some(Refusal::NotClaimHolder {
                task_id: id.to_owned(),
                expected: lock.clone(),
                current: self.claim_lock.clone(),
            });
        }
        None
    }
}

/// Extends a running task's claim and stamps its heartbeat (see [`Board::heartbeat`]).
pub(crate) fn heartbeat_in(
    tx: &Tx<'_>,
    id: &str,
    fence: &Fence,
    note: Option<&str>,
    ttl_seconds: i64,
    now: i64,
) -> Result<Outcome<Heartbeated>> {
    check_seconds("the claim TTL", ttl_seconds)?;
    let task = Lease::load(tx, id)?;
    if task.status != Status::Running {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "running",
        }));
    }
    if let Some(refusal) = task.refusal(id, fence) {
        return Ok(Outcome::Refused(refusal));
    }
    let expires = now + ttl_seconds;
    let applied = cas(
        tx,
        "UPDATE tasks SET claim_expires = ?2, last_heartbeat_at = ?3 \
         WHERE id = ?1 AND status = 'running' AND claim_lock IS ?4 AND current_run_id IS ?5",
        params![id, expires, now, task.claim_lock, task.current_run_id],
    )?;
    if !applied {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    if let Some(run_id) = task.current_run_id {
        exec_unchecked(
            tx,
            "UPDATE task_runs SET claim_expires = ?2, last_heartbeat_at = ?3 \
             WHERE id = ?1 AND ended_at IS NULL",
            params![run_id, expires, now],
        )?;
    }
    append_event(tx, id, task.current_run_id, &heartbeat_event(note), now)?;
    Ok(Outcome::Done(Heartbeated {
        task_id: id.to_owned(),
        run_id: task.current_run_id,
        claim_expires: expires,
    }))
}

impl Board {
    /// Extends the claim to `now + ttl_seconds` and stamps `last_heartbeat_at` on the task and its
    /// run, fenced on `fence`; event `heartbeat`.
    pub fn heartbeat(
        &self,
        id: &str,
        fence: &Fence,
        note: Option<&str>,
        ttl_seconds: i64,
        now: i64,
    ) -> Result<Outcome<Heartbeated>> {
        check_seconds("the claim TTL", ttl_seconds)?;
        // PostgreSQL: the one statement takes no board lock, only its task's and run's rows
        // (docs/postgres.md, "Heartbeats and worker registrations"); a refusal is said by the
        // generic heartbeat.
        if self.is_postgres()
            && let Some(done) = self.write_row_locked(|tx| {
                super::engine::postgres::fast::heartbeat(
                    tx,
                    id,
                    fence,
                    note,
                    ttl_seconds,
                    now,
                    true,
                )
            })?
        {
            return Ok(Outcome::Done(done));
        }
        self.write(|tx| heartbeat_in(tx, id, fence, note, ttl_seconds, now))
    }
}
