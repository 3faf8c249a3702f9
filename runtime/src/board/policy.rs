//! The board's side of the `pre_claim` policy (`dispatch::policy` runs the operator's command,
//! outside any transaction): the snapshot of a task the command judges, the denial that parks it
//! in `todo` with `dependency_wait {source: pre_claim, reason, source_status}`, and the fenced
//! writes that act on an answer only while the task is still as it was judged.
//!
//! A snapshot is the task's status, claim, assignee and newest event id: every transition of a
//! task appends an event, so an unchanged snapshot means nothing happened to the task in
//! between. Each write compares it inside its own transaction before it changes anything.

use serde::Serialize;

use crate::db::{self, OptionalExtension as _, Tx, params};

use super::error::Result;
use super::events::{Event, append_event};
use super::model::Status;
use super::rows::{cas, promote_todo_in, resume_status};
use super::store::Board;

/// The `source` of a `dependency_wait` the policy writes.
pub const PRE_CLAIM_SOURCE: &str = "pre_claim";

/// A task as the policy judged it (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicySnapshot {
    pub id: String,
    pub status: Status,
    pub assignee: Option<String>,
    pub tenant: Option<String>,
    pub idempotency_key: Option<String>,
    #[serde(skip)]
    pub claim_lock: Option<String>,
    #[serde(skip)]
    pub last_event_id: Option<i64>,
}

fn snapshot_in(conn: &db::Db, id: &str) -> Result<Option<PolicySnapshot>> {
    Ok(conn
        .prepare_cached(
            "SELECT t.id, t.status, t.assignee, t.tenant, t.idempotency_key, t.claim_lock, \
               (SELECT MAX(e.id) FROM task_events e WHERE e.task_id = t.id) \
             FROM tasks t WHERE t.id = ?1",
        )?
        .query_row([id], |r| {
            let id: String = r.get(0)?;
            let text: String = r.get(1)?;
            let status = text.parse::<Status>().map_err(|_| {
                super::model::corrupt("tasks", format!("task `{id}` has unknown status {text:?}"))
            })?;
            Ok(PolicySnapshot {
                id,
                status,
                assignee: r.get(2)?,
                tenant: r.get(3)?,
                idempotency_key: r.get(4)?,
                claim_lock: r.get(5)?,
                last_event_id: r.get(6)?,
            })
        })
        .optional()?)
}

/// Whether `id` is still exactly as `before` (inside the caller's transaction).
pub(crate) fn unchanged_in(tx: &Tx<'_>, before: &PolicySnapshot) -> Result<bool> {
    Ok(snapshot_in(tx, &before.id)?.as_ref() == Some(before))
}

/// The denial: `todo` with `dependency_wait {source: pre_claim, reason, source_status}` (the
/// lane it would have run in), unless the task changed since `before`. A task already waiting
/// for the same reason gets no second event. Returns whether anything was written.
fn wait_in(tx: &Tx<'_>, before: &PolicySnapshot, reason: &str, now: i64) -> Result<bool> {
    if !unchanged_in(tx, before)? || before.claim_lock.is_some() {
        return Ok(false);
    }
    let lane = match before.status {
        Status::Ready | Status::Review => before.status,
        _ => resume_status(tx, &before.id)?,
    };
    let event = Event::DependencyWait {
        reason: reason.to_owned(),
        kind: None,
        source_status: Some(lane),
        parent: None,
        source: Some(PRE_CLAIM_SOURCE.to_owned()),
    };
    if before.status == Status::Todo {
        let newest: Option<(String, Option<String>)> = tx
            .prepare_cached(
                "SELECT kind, payload FROM task_events WHERE task_id = ?1 ORDER BY id DESC LIMIT 1",
            )?
            .query_row([&before.id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if newest == Some(event.encode()?) {
            return Ok(false);
        }
    }
    let moved = cas(
        tx,
        "UPDATE tasks SET status = 'todo' WHERE id = ?1 AND status = ?2 AND claim_lock IS NULL",
        params![before.id, before.status.as_str()],
    )?;
    if moved {
        append_event(tx, &before.id, None, &event, now)?;
    }
    Ok(moved)
}

impl Board {
    /// The snapshot the policy judges, `None` when there is no such task.
    pub fn policy_snapshot(&self, id: &str) -> Result<Option<PolicySnapshot>> {
        snapshot_in(self.conn(), id)
    }

    /// Parks a denied task (see [`wait_in`]).
    pub fn policy_wait(&self, before: &PolicySnapshot, reason: &str, now: i64) -> Result<bool> {
        self.write(|tx| wait_in(tx, before, reason, now))
    }

    /// The `todo` tasks the promotion phase would promote (every parent finished), in its
    /// order; read without a write lock.
    pub fn promotable(&self) -> Result<Vec<String>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT t.id FROM tasks t WHERE t.status = 'todo' AND NOT EXISTS ( \
               SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id \
               WHERE l.child_id = t.id AND p.status NOT IN ('done', 'archived')) \
             ORDER BY t.priority DESC, t.created_at ASC, t.id",
        )?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// Promotes a task the policy allowed, only while it is as `before` was (its parents are
    /// checked again too). Returns whether it moved.
    pub fn promote_allowed(&self, before: &PolicySnapshot, now: i64) -> Result<bool> {
        self.write(|tx| {
            if !unchanged_in(tx, before)? || before.status != Status::Todo {
                return Ok(false);
            }
            if !super::rows::unfinished_parents(tx, &before.id)?.is_empty() {
                return Ok(false);
            }
            promote_todo_in(tx, &before.id, now)
        })
    }
}
