//! Reads shaped for whole-board views (`kanban serve`): every task with its attempt count and,
//! for a blocked task, why; the tasks the failure breaker gave up on. One statement each, so a
//! 10 000-task board page costs one query rather than one per card.

use super::error::Result;
use super::model::{TASK_COLUMNS, Task, TaskRef};
use super::store::Board;
use crate::db;

/// A task as a board card shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct BoardCard {
    pub task: Task,
    /// Runs the task has had (open or closed).
    pub attempts: i64,
    /// For a blocked task: the reason of its latest `blocked` event, else the error of its latest
    /// `gave_up` event, else its last failure error.
    pub block_reason: Option<String>,
}

impl Board {
    /// Every task (archived ones only with `include_archived`) in [`Board::list_tasks`] order,
    /// with its attempt count and block reason.
    pub fn board_cards(&self, include_archived: bool) -> Result<Vec<BoardCard>> {
        let filter = if include_archived {
            ""
        } else {
            "WHERE t.status != 'archived'"
        };
        self.cards(filter, &[])
    }

    /// The first `per_status` cards of each of `statuses`, in [`Board::list_tasks`] order: a
    /// page of the board. The cards' attempt counts and block reasons are read for these cards
    /// only, so a board of a million tasks costs a bounded sort per status, not a card per task.
    pub fn first_cards(
        &self,
        statuses: &[super::model::Status],
        per_status: usize,
    ) -> Result<Vec<BoardCard>> {
        let mut cards = Vec::new();
        for status in statuses {
            let filter = format!(
                "WHERE t.id IN (SELECT id FROM tasks WHERE status = ?1 \
                 ORDER BY priority DESC, created_at ASC, rowid ASC LIMIT {per_status})"
            );
            cards.extend(self.cards(&filter, &[status.as_str()])?);
        }
        Ok(cards)
    }

    /// One task as a card, or [`super::BoardError::TaskNotFound`].
    pub fn task_card(&self, id: &str) -> Result<BoardCard> {
        self.cards("WHERE t.id = ?1", &[id])?
            .pop()
            .ok_or_else(|| super::BoardError::TaskNotFound { id: id.to_owned() })
    }

    fn cards(&self, filter: &str, args: &[&str]) -> Result<Vec<BoardCard>> {
        let columns = TASK_COLUMNS
            .split(", ")
            .map(|c| format!("t.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT {columns}, \
               (SELECT COUNT(*) FROM task_runs r WHERE r.task_id = t.id), \
               CASE WHEN t.status = 'blocked' THEN \
                 (SELECT e.kind || ' ' || COALESCE(e.payload, '') FROM task_events e \
                  WHERE e.task_id = t.id AND e.kind IN ('blocked', 'gave_up') \
                  ORDER BY e.id DESC LIMIT 1) END \
             FROM tasks t {filter} ORDER BY t.priority DESC, t.created_at ASC, t.rowid ASC"
        );
        let width = TASK_COLUMNS.split(", ").count();
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let rows = stmt.query_map(db::params_from_iter(args.iter()), |r| {
            let task = Task::from_row(r)?;
            let attempts: i64 = r.get(width)?;
            let latest: Option<String> = r.get(width + 1)?;
            Ok((task, attempts, latest))
        })?;
        let mut cards = Vec::new();
        for row in rows {
            let (task, attempts, latest) = row?;
            let block_reason = latest
                .as_deref()
                .and_then(reason_of)
                .or_else(|| {
                    (task.status == super::model::Status::Blocked)
                        .then(|| task.last_failure_error.clone())
                        .flatten()
                })
                .filter(|r| !r.trim().is_empty());
            cards.push(BoardCard {
                task,
                attempts,
                block_reason,
            });
        }
        Ok(cards)
    }

    /// Blocked tasks whose latest `blocked` / `gave_up` event is `gave_up`: the failure breaker
    /// stopped retrying them and they wait for an operator.
    pub fn given_up_tasks(&self) -> Result<Vec<TaskRef>> {
        let mut stmt = self.conn().prepare(
            "SELECT t.id, t.title, t.status FROM tasks t WHERE t.status = 'blocked' AND \
               (SELECT e.kind FROM task_events e WHERE e.task_id = t.id \
                AND e.kind IN ('blocked', 'gave_up') ORDER BY e.id DESC LIMIT 1) = 'gave_up' \
             ORDER BY t.created_at, t.rowid",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, title, status) = row?;
            out.push(TaskRef {
                id,
                title,
                status: status.parse()?,
            });
        }
        Ok(out)
    }
}

/// `"<kind> <payload JSON>"` → the human reason it carries.
fn reason_of(latest: &str) -> Option<String> {
    let (kind, payload) = latest.split_once(' ')?;
    let value: serde_json::Value = serde_json::from_str(payload).ok()?;
    let field = if kind == "gave_up" { "error" } else { "reason" };
    value.get(field)?.as_str().map(str::to_owned)
}
