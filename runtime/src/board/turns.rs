//! What a worker's turn loop reads and writes between turns, each fenced by the worker's run:
//! [`Board::turn_run_status`] (is the run still ours, and how did it end?), [`Board::claim_is_live`]
//! (the proof re-taken before and after an in-place recovery's backoff) and [`Board::record_turn`]
//! (the `turn` event, written only while the run is ours).

use crate::db::{Db, OptionalExtension, params};
use serde::Serialize;

use super::error::Result;
use super::events::{Event, append_event};
use super::outcome::{Outcome, Refusal};
use super::store::Board;
use crate::db::Tx;

/// Where a worker's run stands after a settled turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The run is open, current and held by the caller's claim: the work goes on.
    Running,
    /// The run was closed by a completion (and no later run has started).
    Done,
    /// The run was closed by a block.
    Blocked,
    /// The run was closed by a review request.
    Review,
    /// The run is no longer the caller's: reclaimed, timed out, archived, or a newer run is
    /// current. The caller must stop without writing anything.
    Superseded,
}

impl RunStatus {
    /// Whether the run ended with an outcome the worker's own agent can have produced.
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            RunStatus::Done | RunStatus::Blocked | RunStatus::Review
        )
    }
}

/// Reads the run's standing on any connection (inside or outside a write transaction).
fn run_status(conn: &Db, task_id: &str, run_id: i64, claim_lock: &str) -> Result<RunStatus> {
    let row = conn
        .prepare_cached(
            "SELECT r.status, r.ended_at IS NOT NULL, t.status, t.current_run_id, t.claim_lock \
             FROM task_runs r JOIN tasks t ON t.id = r.task_id WHERE r.id = ?1 AND r.task_id = ?2",
        )?
        .query_row(params![run_id, task_id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, bool>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<i64>>(3)?,
                r.get::<_, Option<String>>(4)?,
            ))
        })
        .optional()?;
    let Some((run_status, ended, task_status, current, lock)) = row else {
        return Ok(RunStatus::Superseded);
    };
    if ended {
        if current.is_some() {
            // A later run started: whatever ours ended as, the task is someone else's now.
            return Ok(RunStatus::Superseded);
        }
        return Ok(match run_status.as_str() {
            "done" => RunStatus::Done,
            "blocked" => RunStatus::Blocked,
            "review" => RunStatus::Review,
            _ => RunStatus::Superseded,
        });
    }
    if task_status == "running" && current == Some(run_id) && lock.as_deref() == Some(claim_lock) {
        Ok(RunStatus::Running)
    } else {
        Ok(RunStatus::Superseded)
    }
}

impl Board {
    /// Where run `run_id` of `task_id`, claimed with `claim_lock`, stands (see [`RunStatus`]).
    /// An unknown task or run reads as [`RunStatus::Superseded`].
    pub fn turn_run_status(
        &self,
        task_id: &str,
        run_id: i64,
        claim_lock: &str,
    ) -> Result<RunStatus> {
        run_status(self.conn(), task_id, run_id, claim_lock)
    }

    /// Whether the caller still holds a live claim on its run: the run is open and current, the
    /// claim lock is the caller's and it has not expired at `now`.
    pub fn claim_is_live(
        &self,
        task_id: &str,
        run_id: i64,
        claim_lock: &str,
        now: i64,
    ) -> Result<bool> {
        if run_status(self.conn(), task_id, run_id, claim_lock)? != RunStatus::Running {
            return Ok(false);
        }
        let expires: Option<i64> = self
            .conn()
            .prepare_cached("SELECT claim_expires FROM tasks WHERE id = ?1")?
            .query_row(params![task_id], |r| r.get(0))
            .optional()?
            .flatten();
        Ok(expires.is_some_and(|e| e >= now))
    }

    /// Appends a `turn` event to run `run_id` while the run is still the caller's (open and held
    /// by `claim_lock`, or closed by the worker's own completion, block or review request with no
    /// later run); otherwise nothing is written and the refusal says why.
    pub fn record_turn(
        &self,
        task_id: &str,
        run_id: i64,
        claim_lock: &str,
        event: &Event,
        now: i64,
    ) -> Result<Outcome<()>> {
        self.write(|tx| record_turn_in(tx, task_id, run_id, claim_lock, event, now))
    }
}

/// See [`Board::record_turn`].
pub(crate) fn record_turn_in(
    tx: &Tx<'_>,
    task_id: &str,
    run_id: i64,
    claim_lock: &str,
    event: &Event,
    now: i64,
) -> Result<Outcome<()>> {
    if run_status(tx, task_id, run_id, claim_lock)? == RunStatus::Superseded {
        let current = tx
            .prepare_cached("SELECT current_run_id FROM tasks WHERE id = ?1")?
            .query_row(params![task_id], |r| r.get::<_, Option<i64>>(0))
            .optional()?
            .flatten();
        return Ok(Outcome::Refused(Refusal::StaleRun {
            task_id: task_id.to_owned(),
            expected: run_id,
            current,
        }));
    }
    append_event(tx, task_id, Some(run_id), event, now)?;
    Ok(Outcome::Done(()))
}

impl Board {
    /// Comments of `task_id` with an id above `after_id`, oldest first (by id, so a burst in
    /// one second is never skipped): what a running agent has not been given yet.
    pub fn comments_after(
        &self,
        task_id: &str,
        after_id: i64,
    ) -> Result<Vec<super::model::Comment>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT id, task_id, author, body, created_at FROM task_comments \
             WHERE task_id = ?1 AND id > ?2 ORDER BY id",
        )?;
        let rows = stmt.query_map(params![task_id, after_id], |r| {
            Ok(super::model::Comment {
                id: r.get(0)?,
                task_id: r.get(1)?,
                author: r.get(2)?,
                body: r.get(3)?,
                created_at: r.get(4)?,
            })
        })?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row?);
        }
        Ok(out)
    }

    /// Stores what the run's agent reported (its CLI session id, token usage, cost) as the
    /// `agent` key of run `run_id`'s metadata, keeping every other key (the completion's
    /// handoff), while the run is still the caller's (as [`Board::record_turn`]).
    pub fn record_agent_session(
        &self,
        task_id: &str,
        run_id: i64,
        claim_lock: &str,
        session: &serde_json::Value,
    ) -> Result<Outcome<()>> {
        self.write(|tx| {
            if run_status(tx, task_id, run_id, claim_lock)? == RunStatus::Superseded {
                return Ok(Outcome::Refused(Refusal::StaleRun {
                    task_id: task_id.to_owned(),
                    expected: run_id,
                    current: None,
                }));
            }
            let stored: Option<String> = tx
                .prepare_cached("SELECT metadata FROM task_runs WHERE id = ?1")?
                .query_row(params![run_id], |r| r.get(0))
                .optional()?
                .flatten();
            let mut metadata = stored
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| match v {
                    serde_json::Value::Object(map) => Some(map),
                    _ => None,
                })
                .unwrap_or_default();
            metadata.insert("agent".to_owned(), session.clone());
            tx.execute(
                "UPDATE task_runs SET metadata = ?2 WHERE id = ?1",
                params![run_id, serde_json::to_string(&metadata)?],
            )?;
            Ok(Outcome::Done(()))
        })
    }
}
