//! Completing a task: `done`, its run closed, children freed to run promoted; one or a batch in one
//! transaction; on PostgreSQL first as one statement.

use crate::db::{OptionalExtension, Tx, params};

use super::error::Result;
use super::events::{Event, append_event};
use super::input::{
    COMPLETE_LEAKED_NOTE, Completion, completion_summary, summary_line, task_ids_in,
};
use super::model::Status;
use super::model::Task;
use super::outcome::{Completed, Outcome, Refusal};
use super::rows::{
    RunClose, cas, end_run_in, gating_parents, instant_run_in, load_task, promote_children_in,
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
    let open = gating_parents(tx, id)?;
    if !open.is_empty() {
        return Ok(Outcome::Refused(Refusal::ParentsNotDone {
            task_id: id.to_owned(),
            parents: open,
        }));
    }
    if completion.require_evidence && task.status != Status::Review && completion.is_empty() {
        return Ok(Outcome::Refused(Refusal::EmptyCompletion {
            task_id: id.to_owned(),
        }));
    }
    let verified_cards = match gate_created_cards(tx, &task, completion, now)? {
        Ok(verified) => verified,
        Err(refusal) => return Ok(Outcome::Refused(refusal)),
    };
    if let Some(refusal) = super::acceptance::gate_contract_in(tx, &task, completion, now)? {
        return Ok(Outcome::Refused(refusal));
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
    if closed.is_none()
        && (run_summary.is_some()
            || completion.stored_metadata().is_some()
            || task.status == Status::Review)
    {
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
    if let (Some(run_id), Some(metadata)) = (closed, completion.stored_metadata()) {
        let text = serde_json::to_string(metadata)?;
        cas(
            tx,
            "UPDATE task_runs SET metadata = ?2 WHERE id = ?1",
            params![run_id, text],
        )?;
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
            verified_cards: (!verified_cards.is_empty()).then(|| verified_cards.clone()),
            forced: completion.force.then_some(true),
            evidence: super::acceptance::recorded_evidence(completion),
        },
        now,
    )?;
    flag_phantom_prose_refs(tx, id, closed, completion, &verified_cards, now)?;
    let promoted = promote_children_in(tx, id, now)?;
    Ok(Outcome::Done(Completed {
        task_id: id.to_owned(),
        run_id: closed,
        promoted,
    }))
}

/// Checks the cards a completion claims it created (the original's `_gate_created_cards`):
/// `Ok(Ok(verified))` when every one is this task's, else the refusal, after recording a
/// `completion_blocked_hallucination` event (committed with the refusal: nothing else changes).
fn gate_created_cards(
    tx: &Tx<'_>,
    task: &Task,
    completion: &Completion,
    now: i64,
) -> Result<std::result::Result<Vec<String>, Refusal>> {
    let mut claimed: Vec<&str> = Vec::new();
    for card in completion.created_cards.iter().map(|c| c.trim()) {
        if !card.is_empty() && !claimed.contains(&card) {
            claimed.push(card);
        }
    }
    let (mut verified, mut phantom) = (Vec::new(), Vec::new());
    for card in claimed {
        if is_own_card(tx, task, card)? {
            verified.push(card.to_owned());
        } else {
            phantom.push(card.to_owned());
        }
    }
    if phantom.is_empty() {
        return Ok(Ok(verified));
    }
    let preview = completion
        .summary
        .as_deref()
        .or(completion.result.as_deref())
        .map(|text| text.trim().lines().next().unwrap_or("").chars().take(200))
        .map(String::from_iter)
        .filter(|line| !line.is_empty());
    append_event(
        tx,
        &task.id,
        None,
        &Event::CompletionBlockedHallucination {
            phantom_cards: phantom.clone(),
            verified_cards: verified,
            summary_preview: preview,
        },
        now,
    )?;
    Ok(Err(Refusal::HallucinatedCards {
        task_id: task.id.clone(),
        phantom,
    }))
}

/// Whether `card` exists and is `task`'s: created by the task (a worker creates as its task id)
/// or by its assignee, or linked as its child (the original's `_verify_created_cards`).
fn is_own_card(tx: &Tx<'_>, task: &Task, card: &str) -> Result<bool> {
    let created_by: Option<Option<String>> = tx
        .query_row(
            "SELECT created_by FROM tasks WHERE id = ?1",
            params![card],
            |r| r.get(0),
        )
        .optional()?;
    let Some(created_by) = created_by else {
        return Ok(false);
    };
    if created_by.as_deref() == Some(task.id.as_str())
        || (task.assignee.is_some() && created_by == task.assignee)
    {
        return Ok(true);
    }
    let linked: Option<i64> = tx
        .query_row(
            "SELECT 1 FROM task_links WHERE parent_id = ?1 AND child_id = ?2",
            params![task.id, card],
            |r| r.get(0),
        )
        .optional()?;
    Ok(linked.is_some())
}

/// The advisory scan of the completion's summary and result (the original's
/// `_flag_phantom_prose_refs`): task-like ids naming no task, other than verified cards, give a
/// `suspected_hallucinated_references` event on the closing run. Never refuses.
fn flag_phantom_prose_refs(
    tx: &Tx<'_>,
    id: &str,
    run_id: Option<i64>,
    completion: &Completion,
    verified_cards: &[String],
    now: i64,
) -> Result<()> {
    let text = [&completion.summary, &completion.result]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    let mut phantom_refs = Vec::new();
    for candidate in task_ids_in(&text) {
        if verified_cards.contains(&candidate) {
            continue;
        }
        let exists: Option<i64> = tx
            .query_row(
                "SELECT 1 FROM tasks WHERE id = ?1",
                params![candidate],
                |r| r.get(0),
            )
            .optional()?;
        if exists.is_none() {
            phantom_refs.push(candidate);
        }
    }
    if phantom_refs.is_empty() {
        return Ok(());
    }
    append_event(
        tx,
        id,
        run_id,
        &Event::SuspectedHallucinatedReferences {
            phantom_refs,
            source: "completion_summary".to_owned(),
        },
        now,
    )
}

/// Backfills the result of a done task (the original's `edit_completed_task_result`): the
/// task's `result`, and its newest completed run's summary (`summary`, else the result) and,
/// when given, metadata; a done task without such a run gets a zero-length one. Event `edited`
/// {fields, result_len, summary} on that run. Refused unless the task is done.
fn edit_completed_in(
    tx: &Tx<'_>,
    id: &str,
    result: &str,
    summary: Option<&str>,
    metadata: Option<&serde_json::Map<String, serde_json::Value>>,
    now: i64,
) -> Result<Outcome<super::edit::Edited>> {
    let task = load_task(tx, id)?;
    if task.status != Status::Done {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "done",
        }));
    }
    let handoff = summary.unwrap_or(result);
    if !cas(
        tx,
        "UPDATE tasks SET result = ?2 WHERE id = ?1 AND status = 'done'",
        params![id, result],
    )? {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    let newest: Option<i64> = tx
        .query_row(
            "SELECT id FROM task_runs WHERE task_id = ?1 AND outcome = 'completed' \
             ORDER BY COALESCE(ended_at, started_at, 0) DESC, id DESC LIMIT 1",
            params![id],
            |r| r.get(0),
        )
        .optional()?;
    let run_id = match newest {
        Some(run_id) => {
            cas(
                tx,
                "UPDATE task_runs SET summary = ?2 WHERE id = ?1",
                params![run_id, handoff],
            )?;
            run_id
        }
        None => instant_run_in(tx, &task, "done", "completed", Some(handoff), now)?,
    };
    let mut fields = vec!["result".to_owned(), "summary".to_owned()];
    if let Some(metadata) = metadata {
        cas(
            tx,
            "UPDATE task_runs SET metadata = ?2 WHERE id = ?1",
            params![run_id, serde_json::to_string(metadata)?],
        )?;
        fields.push("metadata".to_owned());
    }
    append_event(
        tx,
        id,
        Some(run_id),
        &Event::Edited {
            fields: fields.clone(),
            result_len: Some(result.len()),
            summary: Some(summary_line(handoff)).filter(|s| !s.is_empty()),
        },
        now,
    )?;
    Ok(Outcome::Done(super::edit::Edited {
        task_id: id.to_owned(),
        fields,
    }))
}

impl Board {
    /// See [`edit_completed_in`].
    pub fn edit_completed(
        &self,
        id: &str,
        result: &str,
        summary: Option<&str>,
        metadata: Option<&serde_json::Map<String, serde_json::Value>>,
        now: i64,
    ) -> Result<Outcome<super::edit::Edited>> {
        self.write(|tx| edit_completed_in(tx, id, result, summary, metadata, now))
    }

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
            && !completion.needs_generic_path(id)
            && let Some(done) = self.write(|tx| {
                super::engine::postgres::fast::complete(tx, id, completion, now, true)
            })?
        {
            return Ok(Outcome::Done(done));
        }
        self.write(|tx| {
            if let Some(done) = super::engine::sqlite::fast::complete(tx, id, completion, now)? {
                return Ok(Outcome::Done(done));
            }
            complete_in(tx, id, completion, now)
        })
    }
}
