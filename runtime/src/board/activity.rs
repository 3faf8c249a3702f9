//! A board's activity per hour, for the web view's charts (issue 30 item 2): the runs that ended
//! in each hour by outcome (completions, failures, rate limits), and how many tasks were
//! waiting, running and done at the end of each hour. Reads only: three statements, whatever
//! the number of hours.
//!
//! "Running at the end of an hour" is exact (a run open at that time); "done" counts the tasks
//! done now whose completion came before it, and "waiting" every other task created by then and
//! not archived now — the board keeps no snapshot of its past, so a task reopened or archived
//! since is counted as it stands today.

use serde::Serialize;

use super::error::Result;
use super::store::Board;
use crate::db::{self, params};

/// Seconds per bucket of [`Activity`].
pub const HOUR: i64 = 3600;

/// The outcomes counted as failures: the attempt ended without the work done and against the
/// failure budget.
pub const FAILURE_OUTCOMES: [&str; 6] = [
    "crashed",
    "timed_out",
    "spawn_failed",
    "protocol_violation",
    "gave_up",
    "failed",
];

/// Per-hour activity over `hours` hours ending at the current hour (the last bucket is the hour
/// in progress).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Activity {
    /// The start of the first bucket (a multiple of [`HOUR`]).
    pub start: i64,
    pub completed: Vec<i64>,
    pub failed: Vec<i64>,
    pub rate_limited: Vec<i64>,
    /// At the end of each bucket (or now, for the last).
    pub waiting: Vec<i64>,
    pub running: Vec<i64>,
    pub done: Vec<i64>,
}

impl Board {
    /// The activity of the `hours` hours up to `now` (at least one).
    pub fn activity(&self, now: i64, hours: usize) -> Result<Activity> {
        let hours = hours.max(1);
        let start = (now / HOUR - (hours as i64 - 1)) * HOUR;
        let mut a = Activity {
            start,
            completed: vec![0; hours],
            failed: vec![0; hours],
            rate_limited: vec![0; hours],
            waiting: vec![0; hours],
            running: vec![0; hours],
            done: vec![0; hours],
        };
        let mut stmt = self.conn().prepare_cached(
            "SELECT ended_at, outcome FROM task_runs WHERE ended_at >= ?1 AND ended_at <= ?2 \
             AND outcome IS NOT NULL",
        )?;
        let ended = stmt.query_map(params![start, now], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })?;
        for row in ended {
            let (at, outcome) = row?;
            let i = bucket(start, at, hours);
            match outcome.as_str() {
                "completed" => a.completed[i] += 1,
                "rate_limited" => a.rate_limited[i] += 1,
                o if FAILURE_OUTCOMES.contains(&o) => a.failed[i] += 1,
                _ => {}
            }
        }
        let ends: Vec<i64> = (1..=hours as i64)
            .map(|i| (start + i * HOUR).min(now))
            .collect();
        let mut stmt = self.conn().prepare_cached(
            "SELECT created_at, CASE WHEN status = 'done' THEN completed_at END FROM tasks \
             WHERE status <> 'archived' AND created_at <= ?1",
        )?;
        let tasks = stmt.query_map(params![now], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?))
        })?;
        let mut created = vec![0i64; hours];
        for row in tasks {
            let (created_at, completed_at) = row?;
            for (i, end) in ends.iter().enumerate() {
                if created_at <= *end {
                    created[i] += 1;
                    if completed_at.is_some_and(|c| c <= *end) {
                        a.done[i] += 1;
                    }
                }
            }
        }
        let mut stmt = self.conn().prepare_cached(
            "SELECT started_at, ended_at FROM task_runs WHERE started_at <= ?2 \
             AND (ended_at IS NULL OR ended_at > ?1)",
        )?;
        let runs = stmt.query_map(params![start, now], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?))
        })?;
        for row in runs.collect::<db::Result<Vec<_>>>()? {
            let (from, to) = row;
            for (i, end) in ends.iter().enumerate() {
                if from <= *end && to.is_none_or(|t| t > *end) {
                    a.running[i] += 1;
                }
            }
        }
        a.waiting = created
            .iter()
            .zip(a.done.iter().zip(&a.running))
            .map(|(c, (d, r))| (c - d - r).max(0))
            .collect();
        Ok(a)
    }
}

/// The bucket of time `at` (clamped into the window).
fn bucket(start: i64, at: i64, hours: usize) -> usize {
    usize::try_from((at - start) / HOUR)
        .unwrap_or(0)
        .min(hours - 1)
}
