//! Completing a task: `done`, its run closed, children freed to run promoted; one or a batch in one
//! transaction; on PostgreSQL first as one statement.

use crate::db::{Tx, params};

use super::error::Result;
use super::events::{Event, append_event};
use super::input::{COMPLETE_LEAKED_NOTE, Completion, completion_summary, summary_line};
use super::model::Status;
use super::outcome::{Completed, Outcome, Refusal};
use super::rows::{
    RunClose, cas, end_run_in, instant_run_in, load_task, promote_children_in, unfinished_parents,
};
use super::store::Board;

/// Marks a task done (see [`Board::complete`]).
pub(crate) fn complete_in(
    tx: &Tx<'_>,
    id: &str,
    completion: &Completion,
    now: i64,
) -> Result<Outcome<Completed>> {
    let task = load_task(tx, id)?;
    if !matches!(
        task.status,
        Status::Running | Status::Ready | Status::Blocked | Status::Review
    ) {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "running, ready, blocked or review",
        }));
    }
    if let Some(run_id) = completion.expected_run_id
        && task.current_run_id != Some(run_id)
    {
        return Ok(Outcome::Refused(Refusal::StaleRun {
            task_id: id.to_owned(),
            expected: run_id,
            current: task.current_run_id,
        }));
    }
    if completion.expected_run_id.is_none()
        && !completion.force
        && task.status == Status::Running
        && let (Some(lock), Some(expires)) = (&task.claim_lock, task.claim_expires)
        && expires > now
    {
        return Ok(Outcome::Refused(Refusal::LiveClaim {
            task_id: id.to_owned(),
            claim_lock: lock.clone(),
            claim_expires: expires,
        }));
    }
    let open = unfinished_parents(tx, id)?;
    if !open.is_empty() {
        return Ok(Outcome::Refused(Refusal::ParentsNotDone {
            task_id: id.to_owned(),
            parents: open,
        }));
    }
    let result = completion.result.as_deref();
    let applied = cas(
        tx,
        "UPDATE tasks SET status = 'done', result = COALESCE(?2, result), completed_at = ?3, \
         claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, worker_started_at = NULL, \
         current_run_id = NULL, block_kind = NULL, block_recurrences = 0, \
         consecutive_failures = 0, last_failure_error = NULL \
         WHERE id = ?1 AND status = ?4 AND current_run_id IS ?5 AND claim_lock IS ?6",
        params![
            id,
            result,
            now,
            task.status.as_str(),
            task.current_run_id,
            task.claim_lock
        ],
    )?;
    if !applied {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    let run_summary = completion_summary(completion);
    let mut closed = end_run_in(
        tx,
        id,
        task.current_run_id,
        &RunClose {
            status: "done",
            outcome: "completed",
            summary: run_summary,
            error: None,
        },
        COMPLETE_LEAKED_NOTE,
        now,
    )?;
    if closed.is_none() && (run_summary.is_some() || task.status == Status::Review) {
        // Never claimed (or handed over from review): the hand-off still gets its attempt row.
        closed = Some(instant_run_in(
            tx,
            &task,
            "done",
            "completed",
            run_summary,
            now,
        )?);
    }
    // What the UPDATE above stored: `COALESCE(?2, result)`.
    let stored_result = result.or(task.result.as_deref());
    append_event(
        tx,
        id,
        closed,
        &Event::Completed {
            result_len: stored_result.map_or(0, str::len),
            summary: run_summary.map(summary_line),
            forced: completion.force.then_some(true),
        },
        now,
    )?;
    let promoted = promote_children_in(tx, id, now)?;
    Ok(Outcome::Done(Completed {
        task_id: id.to_owned(),
        run_id: closed,
        promoted,
    }))
}

impl Board {
    /// Completes each of `ids` in turn, as [`Board::complete`] does, inside one transaction; a
    /// task that cannot be completed is its own refused outcome, an error undoes them all.
    pub fn complete_many(
        &self,
        ids: &[String],
        completion: &Completion,
        now: i64,
    ) -> Result<Vec<Outcome<Completed>>> {
        self.write(|tx| {
            ids.iter()
                .map(|id| complete_in(tx, id, completion, now))
                .collect()
        })
    }

    /// Marks a task done; closes its run (`completed`) and promotes children now free to run.
    pub fn complete(
        &self,
        id: &str,
        completion: &Completion,
        now: i64,
    ) -> Result<Outcome<Completed>> {
        if self.is_postgres()
            && let Some(done) = self.write(|tx| {
                super::engine::postgres::fast::complete(tx, id, completion, now, true)
            })?
        {
            return Ok(Outcome::Done(done));
        }
        self.write(|tx| complete_in(tx, id, completion, now))
    }
}
