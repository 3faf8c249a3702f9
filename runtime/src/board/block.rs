//! Blocking a task (`blocked`, back to `todo` for a dependency, `triage` for a loop) and the
//! operator's unblock.

use crate::db::{Tx, params};

use super::error::{BoardError, Result};
use super::events::{Event, append_event};
use super::limits::BLOCK_RECURRENCE_LIMIT;
use super::model::{BlockKind, Status};
use super::operator::comment_in;
use super::outcome::{BlockedTask, Moved, Outcome, Refusal};
use super::rows::{
    RunClose, cas, close_leaked_runs, end_or_record_run_in, landing_status, load_task,
    resume_status, retry_status_for_run, unfinished_parents,
};
use super::store::Board;

/// Blocks a task (see [`Board::block`]); `actor` is recorded in the `blocked` event (`None`
/// from the CLI).
pub(crate) fn block_in(
    tx: &Tx<'_>,
    id: &str,
    kind: Option<BlockKind>,
    reason: &str,
    expected_run_id: Option<i64>,
    actor: Option<&str>,
    now: i64,
) -> Result<Outcome<BlockedTask>> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(BoardError::BlankReason);
    }
    let task = load_task(tx, id)?;
    if !matches!(task.status, Status::Running | Status::Ready) {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "running or ready",
        }));
    }
    if let Some(run_id) = expected_run_id
        && task.current_run_id != Some(run_id)
    {
        return Ok(Outcome::Refused(Refusal::StaleRun {
            task_id: id.to_owned(),
            expected: run_id,
            current: task.current_run_id,
        }));
    }
    // A reviewer's block resumes in review, an implementer's in ready.
    let source_status = if task.status == Status::Running {
        retry_status_for_run(tx, id, task.current_run_id)?
    } else {
        Status::Ready
    };
    let mut kind = kind;
    let mut requested_kind = None;
    if kind == Some(BlockKind::Dependency) && unfinished_parents(tx, id)?.is_empty() {
        // Nothing to wait for: a dependency block without an open parent would never resume.
        requested_kind = kind;
        kind = Some(BlockKind::NeedsInput);
    }
    let (status, recurrences, event) = if kind == Some(BlockKind::Dependency) {
        (
            Status::Todo,
            task.block_recurrences,
            Event::DependencyWait {
                reason: reason.to_owned(),
                kind,
                source_status: Some(source_status),
                parent: None,
                source: None,
            },
        )
    } else {
        let recurrences = if task.block_kind == kind {
            task.block_recurrences + 1
        } else {
            1
        };
        if recurrences >= BLOCK_RECURRENCE_LIMIT {
            (
                Status::Triage,
                recurrences,
                Event::BlockLoopDetected {
                    reason: reason.to_owned(),
                    kind,
                    recurrences,
                    source_status: Some(source_status),
                    limit: BLOCK_RECURRENCE_LIMIT,
                },
            )
        } else {
            (
                Status::Blocked,
                recurrences,
                Event::Blocked {
                    reason: Some(reason.to_owned()),
                    kind,
                    recurrences: Some(recurrences),
                    source_status: Some(source_status),
                    status: None,
                    actor: actor.map(str::to_owned),
                    requested_kind,
                    rekind_reason: requested_kind.map(|_| "no_open_parent".to_owned()),
                },
            )
        }
    };
    let applied = cas(
        tx,
        "UPDATE tasks SET status = ?2, block_kind = ?3, block_recurrences = ?4, \
         claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, worker_started_at = NULL, \
         current_run_id = NULL \
         WHERE id = ?1 AND status = ?5 AND current_run_id IS ?6 AND claim_lock IS ?7",
        params![
            id,
            status.as_str(),
            kind.map(BlockKind::as_str),
            recurrences,
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
    // A block of a task nobody claimed still records the reason as an attempt.
    let closed = Some(end_or_record_run_in(
        tx,
        &task,
        &RunClose {
            status: "blocked",
            outcome: "blocked",
            summary: Some(reason),
            error: None,
        },
        "invariant recovery on block",
        now,
    )?);
    append_event(tx, id, closed, &event, now)?;
    Ok(Outcome::Done(BlockedTask {
        task_id: id.to_owned(),
        status,
        kind,
        recurrences,
        run_id: closed,
    }))
}

/// `blocked` → `ready` (or `todo` while a parent is unfinished); resets the failure counter but
/// keeps `block_kind`/`block_recurrences` (only completion resets them). A `reason` becomes a
/// comment by `operator` (by `actor` when given) on the task, in the same transaction; `actor`
/// is recorded in the `unblocked` event (`None` from the CLI).
pub(crate) fn unblock_in(
    tx: &Tx<'_>,
    id: &str,
    reason: Option<&str>,
    actor: Option<&str>,
    now: i64,
) -> Result<Outcome<Moved>> {
    if reason.is_some_and(|r| r.trim().is_empty()) {
        return Err(BoardError::BlankUnblockReason);
    }
    let task = load_task(tx, id)?;
    if !matches!(task.status, Status::Blocked | Status::Scheduled) {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "blocked or scheduled",
        }));
    }
    let mut to = landing_status(tx, id)?;
    let resume = resume_status(tx, id)?;
    if to == Status::Ready && resume == Status::Review {
        to = Status::Review;
    }
    let applied = cas(
        tx,
        "UPDATE tasks SET status = ?2, consecutive_failures = 0, last_failure_error = NULL, \
         claim_lock = NULL, claim_expires = NULL, current_run_id = NULL WHERE id = ?1 AND status = ?3",
        params![id, to.as_str(), task.status.as_str()],
    )?;
    if !applied {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    close_leaked_runs(tx, id, "invariant recovery on unblock", now)?;
    let event = if to == Status::Ready {
        Event::Unblocked {
            status: None,
            resume_status: None,
            actor: actor.map(str::to_owned),
        }
    } else {
        Event::Unblocked {
            status: Some(to),
            resume_status: Some(resume),
            actor: actor.map(str::to_owned),
        }
    };
    append_event(tx, id, None, &event, now)?;
    if let Some(reason) = reason {
        comment_in(
            tx,
            id,
            actor.unwrap_or("operator"),
            &format!("Unblocked: {}", reason.trim()),
            now,
        )?;
    }
    Ok(Outcome::Done(Moved {
        task_id: id.to_owned(),
        from: task.status,
        to,
    }))
}

impl Board {
    /// Blocks a running or ready task: `dependency` → `todo`; the same kind twice in a row →
    /// `triage` (`block_loop_detected`); otherwise `blocked`. Closes the run (`blocked`).
    pub fn block(
        &self,
        id: &str,
        kind: Option<BlockKind>,
        reason: &str,
        expected_run_id: Option<i64>,
        now: i64,
    ) -> Result<Outcome<BlockedTask>> {
        self.write(|tx| block_in(tx, id, kind, reason, expected_run_id, None, now))
    }

    /// An operator's block by `actor` (the web board's, recorded in the event): no kind, no
    /// expected run, as `kanban block ID REASON` from outside a worker.
    pub fn block_by(
        &self,
        id: &str,
        reason: &str,
        actor: &str,
        now: i64,
    ) -> Result<Outcome<BlockedTask>> {
        self.write(|tx| block_in(tx, id, None, reason, None, Some(actor), now))
    }

    /// See [`unblock_in`].
    pub fn unblock(&self, id: &str, now: i64) -> Result<Outcome<Moved>> {
        self.write(|tx| unblock_in(tx, id, None, None, now))
    }

    /// See [`unblock_in`]: the reason is left as a comment.
    pub fn unblock_with_reason(
        &self,
        id: &str,
        reason: Option<&str>,
        now: i64,
    ) -> Result<Outcome<Moved>> {
        self.write(|tx| unblock_in(tx, id, reason, None, now))
    }

    /// [`Board::unblock_with_reason`] by `actor` (the web board's): recorded in the event, and
    /// the author of the reason's comment.
    pub fn unblock_by(
        &self,
        id: &str,
        reason: Option<&str>,
        actor: &str,
        now: i64,
    ) -> Result<Outcome<Moved>> {
        self.write(|tx| unblock_in(tx, id, reason, Some(actor), now))
    }
}
