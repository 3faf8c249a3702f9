//! Whole-board reads for the operator's terminal views: counts by status and by assignee with the
//! oldest ready task's age (`kanban stats`), per-assignee counts (`kanban assignees`), runs across
//! tasks filtered by outcome, profile and start time (`kanban runs`), and the event cursor that
//! `kanban watch` and `events --follow` advance. Reads only, one statement each.

use std::collections::BTreeMap;

use serde::Serialize;

use super::error::Result;
use super::events::{EVENT_COLUMNS, StoredEvent};
use super::model::{RUN_COLUMNS, Run};
use super::store::Board;
use crate::db::{self, params};

/// `kanban stats`: the original's `board_stats` shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BoardStats {
    /// Tasks per status (every status present on the board, archived included).
    pub by_status: BTreeMap<String, i64>,
    /// For each assignee, its tasks per status (unassigned tasks are not listed).
    pub by_assignee: BTreeMap<String, BTreeMap<String, i64>>,
    /// Seconds since the oldest `ready` task was created; `None` when nothing is ready.
    pub oldest_ready_age_seconds: Option<i64>,
    /// The clock the age was measured against (Unix seconds).
    pub now: i64,
}

/// Which runs [`Board::list_runs`] returns.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub task_id: Option<String>,
    /// Only runs with this outcome (`completed`, `crashed`, …); `Some("running")` for open runs.
    pub outcome: Option<String>,
    pub profile: Option<String>,
    /// Only runs started at or after this Unix time.
    pub since: Option<i64>,
    pub limit: usize,
}

impl Board {
    /// Counts by status and by assignee, and the age of the oldest ready task at `now`.
    pub fn board_stats(&self, now: i64) -> Result<BoardStats> {
        let mut by_status = BTreeMap::new();
        let mut by_assignee: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        let mut stmt = self.conn().prepare_cached(
            "SELECT assignee, status, COUNT(*) FROM tasks GROUP BY assignee, status",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        for row in rows {
            let (assignee, status, n) = row?;
            *by_status.entry(status.clone()).or_insert(0) += n;
            if let Some(assignee) = assignee {
                *by_assignee
                    .entry(assignee)
                    .or_default()
                    .entry(status)
                    .or_insert(0) += n;
            }
        }
        let oldest: Option<i64> = self.conn().query_row(
            "SELECT MIN(created_at) FROM tasks WHERE status = 'ready'",
            [],
            |r| r.get(0),
        )?;
        Ok(BoardStats {
            by_status,
            by_assignee,
            oldest_ready_age_seconds: oldest.map(|at| (now - at).max(0)),
            now,
        })
    }

    /// Runs of every task, newest first, as `filter` narrows them.
    pub fn list_runs(&self, filter: &RunFilter) -> Result<Vec<Run>> {
        // Only the filters given become conditions, so every parameter has a column to take its
        // type from (PostgreSQL cannot type a bare `$1 IS NULL`).
        let mut conditions = Vec::new();
        let mut values: Vec<db::Value> = Vec::new();
        let open = filter.outcome.as_deref() == Some("running");
        if open {
            conditions.push("ended_at IS NULL".to_owned());
        }
        let given = [
            (
                "outcome =",
                filter
                    .outcome
                    .clone()
                    .filter(|_| !open)
                    .map(db::Value::Text),
            ),
            ("task_id =", filter.task_id.clone().map(db::Value::Text)),
            ("profile =", filter.profile.clone().map(db::Value::Text)),
            ("started_at >=", filter.since.map(db::Value::Integer)),
        ];
        for (column, value) in given {
            if let Some(value) = value {
                values.push(value);
                conditions.push(format!("{column} ?{}", values.len()));
            }
        }
        values.push(db::Value::Integer(
            i64::try_from(filter.limit).unwrap_or(i64::MAX),
        ));
        let limit = format!("LIMIT ?{}", values.len());
        let clause = if conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conditions.join(" AND "))
        };
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM task_runs {clause} ORDER BY id DESC {limit}"
        ))?;
        let rows = stmt.query_map(db::params_from_iter(values), Run::from_row)?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// The id of the newest event of the board (0 when it has none): where a watcher starts.
    pub fn last_event_id(&self) -> Result<i64> {
        Ok(self
            .conn()
            .query_row("SELECT COALESCE(MAX(id), 0) FROM task_events", [], |r| {
                r.get(0)
            })?)
    }

    /// Events of one task with an id above `after`, oldest first (the cursor of
    /// `events --follow`).
    pub fn task_events_after(&self, id: &str, after: i64) -> Result<Vec<StoredEvent>> {
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {EVENT_COLUMNS} FROM task_events WHERE task_id = ?1 AND id > ?2 ORDER BY id"
        ))?;
        let rows = stmt.query_map(params![id, after], StoredEvent::from_row)?;
        Ok(rows.collect::<db::Result<_>>()?)
    }
}
