//! Waiting on time: `schedule` parks a task in `scheduled` until an epoch second, and
//! `wake_due` (a phase of the dispatcher's tick) moves every task whose time has come to `ready`
//! (`todo` while a parent is unfinished).
//!
//! The due time lives in the payload of the task's newest `scheduled` event (`{reason, at}`),
//! not in a column: the schema is shared with the original, whose `scheduled` tasks wait for an
//! operator's `unblock` and carry no time. A `scheduled` task without an `at` (the original's)
//! is never woken by the clock; `unblock` still moves any scheduled task at once.

use crate::db::{self, Tx, params};

use super::error::{BoardError, Result};
use super::events::{Event, append_event};
use super::model::Status;
use super::outcome::{Outcome, Refusal, ScheduledTask};
use super::rows::{RunClose, cas, end_run_in, landing_status, load_task, resume_status};
use super::store::Board;

/// Parks `id` in `scheduled` until `at` (epoch seconds; `None`: until `unblock`), from `todo`,
/// `ready`, `blocked`, `running` or `scheduled` (a new time). A running task's claim is released
/// and its run closed as `scheduled`; its worker is *not* signalled (see [`ScheduledTask`]).
/// `actor` is recorded in the `scheduled` event (`None` from the CLI).
pub(crate) fn schedule_in(
    tx: &Tx<'_>,
    id: &str,
    at: Option<i64>,
    reason: Option<&str>,
    actor: Option<&str>,
    now: i64,
) -> Result<Outcome<ScheduledTask>> {
    let task = load_task(tx, id)?;
    if !matches!(
        task.status,
        Status::Todo | Status::Ready | Status::Blocked | Status::Running | Status::Scheduled
    ) {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "todo, ready, blocked, running or scheduled",
        }));
    }
    let applied = cas(
        tx,
        "UPDATE tasks SET status = 'scheduled', claim_lock = NULL, claim_expires = NULL, \
         worker_pid = NULL, worker_started_at = NULL, current_run_id = NULL \
         WHERE id = ?1 AND status = ?2 AND current_run_id IS ?3 AND claim_lock IS ?4",
        params![
            id,
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
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    let closed = end_run_in(
        tx,
        id,
        task.current_run_id,
        &RunClose {
            status: "scheduled",
            outcome: "scheduled",
            summary: reason,
            error: None,
        },
        "invariant recovery on schedule",
        now,
    )?;
    append_event(
        tx,
        id,
        closed,
        &Event::Scheduled {
            reason: reason.map(str::to_owned),
            at,
            actor: actor.map(str::to_owned),
        },
        now,
    )?;
    Ok(Outcome::Done(ScheduledTask {
        task_id: id.to_owned(),
        from: task.status,
        at,
        run_id: closed,
        worker_pid: task.worker_pid,
        claim_lock: task.claim_lock,
    }))
}

/// Every `scheduled` task with its due time (from its newest `scheduled` event; `None` when that
/// event names none), highest priority first.
fn scheduled_tasks(conn: &db::Db) -> Result<Vec<(String, Option<i64>)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT t.id, (SELECT e.payload FROM task_events e WHERE e.task_id = t.id \
           AND e.kind = 'scheduled' ORDER BY e.id DESC LIMIT 1) \
         FROM tasks t WHERE t.status = 'scheduled' \
         ORDER BY t.priority DESC, t.created_at ASC, t.rowid",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
    })?;
    let rows: Vec<(String, Option<String>)> = rows.collect::<db::Result<_>>()?;
    Ok(rows
        .into_iter()
        .map(|(id, payload)| {
            let at = payload
                .and_then(|p| serde_json::from_str::<serde_json::Value>(&p).ok())
                .and_then(|v| v.get("at").and_then(serde_json::Value::as_i64));
            (id, at)
        })
        .collect())
}

/// Wakes every `scheduled` task whose time is at or before `now`: to `ready` (to `review` when
/// it was parked from the review lane, to `todo` while a parent is unfinished), with a `status`
/// event (reason `schedule_due`). Returns the ids woken.
pub(crate) fn wake_due_in(tx: &Tx<'_>, now: i64) -> Result<Vec<String>> {
    let mut woken = Vec::new();
    for (id, at) in scheduled_tasks(tx)? {
        if at.is_none_or(|at| at > now) {
            continue;
        }
        let mut to = landing_status(tx, &id)?;
        if to == Status::Ready && resume_status(tx, &id)? == Status::Review {
            to = Status::Review;
        }
        if !cas(
            tx,
            "UPDATE tasks SET status = ?2 WHERE id = ?1 AND status = 'scheduled'",
            params![id, to.as_str()],
        )? {
            return Err(BoardError::CorruptRow {
                table: "tasks",
                message: format!("task `{id}` changed inside a write transaction"),
            });
        }
        append_event(
            tx,
            &id,
            None,
            &Event::Status {
                status: to,
                reason: "schedule_due".to_owned(),
                parent: None,
                previous_status: Some(Status::Scheduled),
                resume_status: None,
                actor: None,
            },
            now,
        )?;
        woken.push(id);
    }
    Ok(woken)
}

impl Board {
    /// See [`schedule_in`].
    pub fn schedule(
        &self,
        id: &str,
        at: Option<i64>,
        reason: Option<&str>,
        now: i64,
    ) -> Result<Outcome<ScheduledTask>> {
        self.write(|tx| schedule_in(tx, id, at, reason, None, now))
    }

    /// [`Board::schedule`] recording `actor` (the web board's) in the event.
    pub fn schedule_by(
        &self,
        id: &str,
        at: Option<i64>,
        reason: Option<&str>,
        actor: &str,
        now: i64,
    ) -> Result<Outcome<ScheduledTask>> {
        self.write(|tx| schedule_in(tx, id, at, reason, Some(actor), now))
    }

    /// See [`wake_due_in`]. Reads first and writes only when a task is due, so an idle tick
    /// takes no write lock for it.
    pub fn wake_due(&self, now: i64) -> Result<Vec<String>> {
        let due = scheduled_tasks(self.conn())?
            .iter()
            .any(|(_, at)| at.is_some_and(|at| at <= now));
        if !due {
            return Ok(Vec::new());
        }
        self.write(|tx| wake_due_in(tx, now))
    }

    /// The earliest time a `scheduled` task is due, if any has one.
    pub fn next_due(&self) -> Result<Option<i64>> {
        Ok(scheduled_tasks(self.conn())?
            .into_iter()
            .filter_map(|(_, at)| at)
            .min())
    }
}
