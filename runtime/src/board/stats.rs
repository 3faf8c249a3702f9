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
        Ok(BoardStats {
            by_status,
            by_assignee,
            oldest_ready_age_seconds: self.oldest_ready_age(now)?,
            now,
        })
    }

    /// Seconds since the oldest `ready` task was created, at `now`; `None` when nothing is ready.
    pub fn oldest_ready_age(&self, now: i64) -> Result<Option<i64>> {
        let oldest: Option<i64> = self.conn().query_row(
            "SELECT MIN(created_at) FROM tasks WHERE status = 'ready'",
            [],
            |r| r.get(0),
        )?;
        Ok(oldest.map(|at| (now - at).max(0)))
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

/// Upper bounds (seconds) of the buckets of the duration histograms `/metrics` exports; the
/// `+Inf` bucket is the count.
pub const DURATION_BUCKETS: [i64; 9] = [1, 5, 15, 60, 300, 900, 3600, 14_400, 86_400];

/// A histogram over [`DURATION_BUCKETS`]: cumulative counts per bound, the count and the sum.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Histogram {
    /// Observations at or below each bound of [`DURATION_BUCKETS`], in order.
    pub cumulative: Vec<i64>,
    pub count: i64,
    pub sum: i64,
}

/// What `/metrics` exports of one board.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BoardMetrics {
    /// Tasks per status.
    pub tasks_by_status: Vec<(String, i64)>,
    /// Closed runs per outcome (a counter: runs are never deleted).
    pub runs_by_outcome: Vec<(String, i64)>,
    /// Running tasks with a registered worker, per profile of their run.
    pub workers_by_profile: Vec<(String, i64)>,
    /// Closed runs: from claim to end.
    pub run_duration: Histogram,
    /// Spawned runs: from claim to the worker's start (its `spawned` event).
    pub claim_to_spawn: Histogram,
    pub oldest_ready_age_seconds: Option<i64>,
}

impl Board {
    /// The board's numbers for `/metrics` at `now`; a handful of aggregate statements, whatever
    /// the board's size.
    pub fn board_metrics(&self, now: i64) -> Result<BoardMetrics> {
        let stats = self.board_stats(now)?;
        Ok(BoardMetrics {
            tasks_by_status: stats.by_status.into_iter().collect(),
            runs_by_outcome: self.counts(
                "SELECT outcome, COUNT(*) FROM task_runs WHERE outcome IS NOT NULL \
                 GROUP BY outcome ORDER BY outcome",
            )?,
            workers_by_profile: self.counts(
                "SELECT COALESCE(r.profile, t.assignee, ''), COUNT(*) FROM tasks t \
                 LEFT JOIN task_runs r ON r.id = t.current_run_id \
                 WHERE t.status = 'running' AND t.worker_pid IS NOT NULL \
                 GROUP BY COALESCE(r.profile, t.assignee, '') \
                 ORDER BY COALESCE(r.profile, t.assignee, '')",
            )?,
            run_duration: self.histogram(
                "SELECT ended_at - started_at AS d FROM task_runs WHERE ended_at IS NOT NULL",
            )?,
            claim_to_spawn: self.histogram(
                "SELECT e.created_at - r.started_at AS d FROM task_events e \
                 JOIN task_runs r ON r.id = e.run_id WHERE e.kind = 'spawned'",
            )?,
            oldest_ready_age_seconds: stats.oldest_ready_age_seconds,
        })
    }

    fn counts(&self, sql: &str) -> Result<Vec<(String, i64)>> {
        let mut stmt = self.conn().prepare_cached(sql)?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// One statement: the count, sum and per-bucket counts of the durations `durations` selects
    /// (as `d`; a negative one, from a clock step, counts as 0).
    fn histogram(&self, durations: &str) -> Result<Histogram> {
        let buckets: Vec<String> = DURATION_BUCKETS
            .iter()
            .map(|b| {
                format!("CAST(COALESCE(SUM(CASE WHEN d <= {b} THEN 1 ELSE 0 END), 0) AS BIGINT)")
            })
            .collect();
        let sql = format!(
            // PostgreSQL sums a BIGINT as NUMERIC: the casts keep every column an integer.
            "SELECT COUNT(*), CAST(COALESCE(SUM(CASE WHEN d > 0 THEN d ELSE 0 END), 0) AS BIGINT), {} \
             FROM ({durations}) durations",
            buckets.join(", ")
        );
        Ok(self.conn().query_row(&sql, [], |r| {
            let mut cumulative = Vec::with_capacity(DURATION_BUCKETS.len());
            for i in 0..DURATION_BUCKETS.len() {
                cumulative.push(r.get(2 + i)?);
            }
            Ok(Histogram {
                cumulative,
                count: r.get(0)?,
                sum: r.get(1)?,
            })
        })?)
    }
}
