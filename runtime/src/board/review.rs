//! The review hand-over: `request_review` (implementer → `review`), `request_changes` (reviewer →
//! back to the implementer) and `review_reopen` (an operator's send-back); claiming from `review`
//! is in `claim.rs`.

use crate::db::{OptionalExtension, Tx, params};

use super::error::{BoardError, Result};
use super::events::{Event, append_event};
use super::input::{normalize_assignee, summary_line};
use super::model::{Status, Task};
use super::outcome::{BackFromReview, Outcome, Refusal, ReviewRequested};
use super::rows::{
    RunClose, cas, close_leaked_runs, end_or_record_run_in, end_run_in, landing_status, load_task,
    retry_status_for_run,
};
use super::store::Board;

/// Hands a running or ready task to review: `review`, claim cleared, assignee ← `reviewer` when
/// one is named (the review lane then dispatches that profile). Closes the implementer's run with
/// outcome `review_requested` (or records a zero-length one when nobody had claimed the task).
/// Fenced like `complete`: a caller that passes no run id is refused while a live claim holds
/// the task. Event `review_requested` {summary, implementer, reviewer}.
#[allow(clippy::too_many_arguments)]
pub(crate) fn request_review_in(
    tx: &Tx<'_>,
    id: &str,
    expected_run_id: Option<i64>,
    reviewer: Option<&str>,
    summary: Option<&str>,
    metadata: Option<&serde_json::Map<String, serde_json::Value>>,
    force: bool,
    now: i64,
) -> Result<Outcome<ReviewRequested>> {
    // A review handoff is read by another profile: its secrets are redacted first, as the
    // original's `redact_review_value` does.
    let summary = summary.map(super::redact::redact_text);
    let summary = summary.as_deref();
    let metadata = metadata
        .filter(|m| !m.is_empty())
        .map(|m| super::redact::redact_review_value(&serde_json::Value::Object(m.clone())));
    if reviewer.is_some_and(|r| r.trim().is_empty()) {
        return Err(BoardError::BlankAssignee);
    }
    let task = load_task(tx, id)?;
    let in_lane = matches!(task.status, Status::Running | Status::Ready);
    // `force` (an operator's explicit override, as the original's) hands over a task a live
    // claim holds; it closes that claim's run.
    if let Some(refusal) =
        hand_over_refusal(&task, in_lane, "running or ready", expected_run_id, now)
            .filter(|r| !(force && matches!(r, Refusal::LiveClaim { .. })))
    {
        return Ok(Outcome::Refused(refusal));
    }
    let reviewer = normalize_assignee(reviewer).or_else(|| task.assignee.clone());
    let summary = summary.map(str::trim).filter(|s| !s.is_empty());
    if !hand_over_in(tx, &task, Status::Review, reviewer.as_deref())? {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    let closed = Some(end_or_record_run_in(
        tx,
        &task,
        &RunClose {
            status: "review",
            outcome: "review_requested",
            summary,
            error: None,
        },
        "invariant recovery on review request",
        now,
    )?);
    if let (Some(run_id), Some(metadata)) = (closed, &metadata) {
        super::rows::exec_unchecked(
            tx,
            "UPDATE task_runs SET metadata = ?2 WHERE id = ?1",
            crate::db::params![run_id, serde_json::to_string(metadata)?],
        )?;
    }
    append_event(
        tx,
        id,
        closed,
        &Event::ReviewRequested {
            summary: summary.map(summary_line),
            implementer: task.assignee.clone(),
            reviewer: reviewer.clone(),
        },
        now,
    )?;
    Ok(Outcome::Done(ReviewRequested {
        task_id: id.to_owned(),
        run_id: closed,
        implementer: task.assignee,
        reviewer,
    }))
}

/// Hands `task` over between implementer and reviewer: status `to`, assignee `assignee`, its
/// claim and current run cleared; fenced on the status, run and claim it was loaded with.
/// Returns whether it applied (false: another transaction got there first).
fn hand_over_in(tx: &Tx<'_>, task: &Task, to: Status, assignee: Option<&str>) -> Result<bool> {
    cas(
        tx,
        "UPDATE tasks SET status = ?2, assignee = ?3, claim_lock = NULL, claim_expires = NULL, \
         worker_pid = NULL, worker_started_at = NULL, current_run_id = NULL \
         WHERE id = ?1 AND status = ?4 AND current_run_id IS ?5 AND claim_lock IS ?6",
        params![
            task.id,
            to.as_str(),
            assignee,
            task.status.as_str(),
            task.current_run_id,
            task.claim_lock
        ],
    )
}

/// The implementer named by the task's newest `review_requested` event.
fn implementer_of(tx: &Tx<'_>, id: &str) -> Result<Option<Option<String>>> {
    let payload: Option<Option<String>> = tx
        .prepare_cached(
            "SELECT payload FROM task_events WHERE task_id = ?1 AND kind = 'review_requested' \
             ORDER BY id DESC LIMIT 1",
        )?
        .query_row([id], |r| r.get(0))
        .optional()?;
    Ok(payload.map(|p| {
        p.and_then(|p| serde_json::from_str::<serde_json::Value>(&p).ok())
            .and_then(|v| v.get("implementer")?.as_str().map(str::to_owned))
    }))
}

/// A reviewer asks for changes: its run (claimed from `review`) closes with outcome
/// `changes_requested`, the task goes back to `ready` (`todo` while a parent is unfinished) with
/// the implementer as assignee again; the failure counter is kept. Event `changes_requested`
/// {reason, implementer, reviewer, status}.
pub(crate) fn request_changes_in(
    tx: &Tx<'_>,
    id: &str,
    expected_run_id: Option<i64>,
    reason: &str,
    now: i64,
) -> Result<Outcome<BackFromReview>> {
    let reason = super::redact::redact_text(reason);
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(BoardError::BlankReason);
    }
    let task = load_task(tx, id)?;
    let reviewer_run = task.status == Status::Running
        && retry_status_for_run(tx, id, task.current_run_id)? == Status::Review;
    if let Some(refusal) = hand_over_refusal(
        &task,
        reviewer_run,
        "running a reviewer's run (claimed from review)",
        expected_run_id,
        now,
    ) {
        return Ok(Outcome::Refused(refusal));
    }
    let to = landing_status(tx, id)?;
    let implementer = implementer_of(tx, id)?.unwrap_or_else(|| task.assignee.clone());
    if !hand_over_in(tx, &task, to, implementer.as_deref())? {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    let closed = end_run_in(
        tx,
        id,
        task.current_run_id,
        &RunClose {
            status: to.as_str(),
            outcome: "changes_requested",
            summary: Some(reason),
            error: None,
        },
        "invariant recovery on changes requested",
        now,
    )?;
    append_event(
        tx,
        id,
        closed,
        &Event::ChangesRequested {
            reason: reason.to_owned(),
            implementer: implementer.clone(),
            reviewer: task.assignee.clone(),
            status: to,
        },
        now,
    )?;
    Ok(Outcome::Done(BackFromReview {
        task_id: id.to_owned(),
        status: to,
        assignee: implementer,
        run_id: closed,
    }))
}

/// An operator takes an unclaimed `review` task back to its implementer: `ready` (`todo` while a
/// parent is unfinished), assignee ← the implementer, failures kept. Event `review_reopened`.
pub(crate) fn review_reopen_in(tx: &Tx<'_>, id: &str, now: i64) -> Result<Outcome<BackFromReview>> {
    let task = load_task(tx, id)?;
    if task.status != Status::Review || task.claim_lock.is_some() {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "review and unclaimed",
        }));
    }
    let to = landing_status(tx, id)?;
    let implementer = implementer_of(tx, id)?.unwrap_or_else(|| task.assignee.clone());
    if !cas(
        tx,
        "UPDATE tasks SET status = ?2, assignee = ?3, current_run_id = NULL \
         WHERE id = ?1 AND status = 'review' AND claim_lock IS NULL",
        params![id, to.as_str(), implementer],
    )? {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    close_leaked_runs(tx, id, "invariant recovery on review reopen", now)?;
    append_event(
        tx,
        id,
        None,
        &Event::ReviewReopened {
            status: Some(to),
            implementer: implementer.clone(),
        },
        now,
    )?;
    Ok(Outcome::Done(BackFromReview {
        task_id: id.to_owned(),
        status: to,
        assignee: implementer,
        run_id: None,
    }))
}

/// Why a hand-over of `task` is refused, if it is: a wrong status (`expected`) unless `in_lane`,
/// else the run fence.
fn hand_over_refusal(
    task: &Task,
    in_lane: bool,
    expected: &'static str,
    expected_run_id: Option<i64>,
    now: i64,
) -> Option<Refusal> {
    if !in_lane {
        return Some(Refusal::WrongStatus {
            task_id: task.id.clone(),
            status: task.status,
            expected,
        });
    }
    run_fence_refusal(task, expected_run_id, now)
}

/// The run fence of a worker's lifecycle call: its run must be the current one; without a run id
/// (an operator), a running task under an unexpired claim is refused (its worker is alive).
fn run_fence_refusal(task: &Task, expected_run_id: Option<i64>, now: i64) -> Option<Refusal> {
    if let Some(run_id) = expected_run_id {
        return (task.current_run_id != Some(run_id)).then(|| Refusal::StaleRun {
            task_id: task.id.clone(),
            expected: run_id,
            current: task.current_run_id,
        });
    }
    match (&task.claim_lock, task.claim_expires) {
        (Some(lock), Some(expires)) if task.status == Status::Running && expires > now => {
            Some(Refusal::LiveClaim {
                task_id: task.id.clone(),
                claim_lock: lock.clone(),
                claim_expires: expires,
            })
        }
        _ => None,
    }
}

impl Board {
    /// See [`request_review_in`].
    pub fn request_review(
        &self,
        id: &str,
        expected_run_id: Option<i64>,
        reviewer: Option<&str>,
        summary: Option<&str>,
        now: i64,
    ) -> Result<Outcome<ReviewRequested>> {
        self.request_review_with(id, expected_run_id, reviewer, summary, None, false, now)
    }

    /// [`Board::request_review`] with the handoff's metadata (stored on the closing run; its
    /// secrets, like the summary's, redacted) and `force`, which hands over a task even while a
    /// live claim holds it (an operator's override).
    #[allow(clippy::too_many_arguments)]
    pub fn request_review_with(
        &self,
        id: &str,
        expected_run_id: Option<i64>,
        reviewer: Option<&str>,
        summary: Option<&str>,
        metadata: Option<&serde_json::Map<String, serde_json::Value>>,
        force: bool,
        now: i64,
    ) -> Result<Outcome<ReviewRequested>> {
        self.write(|tx| {
            request_review_in(
                tx,
                id,
                expected_run_id,
                reviewer,
                summary,
                metadata,
                force,
                now,
            )
        })
    }

    /// See [`request_changes_in`].
    pub fn request_changes(
        &self,
        id: &str,
        expected_run_id: Option<i64>,
        reason: &str,
        now: i64,
    ) -> Result<Outcome<BackFromReview>> {
        self.write(|tx| request_changes_in(tx, id, expected_run_id, reason, now))
    }

    /// See [`review_reopen_in`].
    pub fn review_reopen(&self, id: &str, now: i64) -> Result<Outcome<BackFromReview>> {
        self.write(|tx| review_reopen_in(tx, id, now))
    }
}
