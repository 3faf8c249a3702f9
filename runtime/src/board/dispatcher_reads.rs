//! The reads the dispatcher's tick needs: running tasks, the claimable candidates of each lane,
//! the facts of the respawn guard, the workload and counts, closed runs whose worker may linger,
//! and the history of a task's runs. No writes.

use crate::db::{OptionalExtension, params};
use serde::Serialize;

use super::error::Result;
use super::model::Status;
use super::store::Board;

/// A running task as the dispatcher's reclaim phases see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunningTask {
    pub id: String,
    pub run_id: Option<i64>,
    pub claim_lock: Option<String>,
    pub claim_expires: Option<i64>,
    pub worker_pid: Option<i64>,
    /// The pid fingerprint recorded at spawn (`"<boot id>|<start time>"`, or `unverified`).
    pub fingerprint: Option<String>,
    pub last_heartbeat_at: Option<i64>,
    /// Start of the current run (falls back to the task's first start).
    pub run_started_at: Option<i64>,
    pub max_runtime_seconds: Option<i64>,
    pub assignee: Option<String>,
}

/// A task the dispatcher may claim: `ready` (the implementer's lane) or `review` (the
/// reviewer's lane).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    pub id: String,
    /// `ready` or `review`: the status it is claimed from.
    pub lane: Status,
    pub title: String,
    pub assignee: Option<String>,
    pub branch_name: Option<String>,
    pub tenant: Option<String>,
    pub goal_mode: bool,
    pub goal_max_turns: Option<i64>,
    /// The error of the last counted or noted failure (a respawn guard reads it).
    pub last_failure_error: Option<String>,
    /// The workspace columns the dispatcher resolves at spawn.
    pub workspace_kind: String,
    pub workspace_path: Option<String>,
    pub workspace_base: Option<String>,
    /// Whether the task has a closed run or a recent comment: only then can a respawn guard
    /// other than `blocker_auth` hold it, so a fresh task costs no [`Board::guard_facts`] query.
    pub has_history: bool,
}

/// The facts the dispatcher's respawn guard decides on (see [`Board::guard_facts`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GuardFacts {
    /// Outcome and end of the newest closed run (by `ended_at`), and whether it was a spawn
    /// failure of the host rather than of the task (`spawn_failed` {infrastructure: true}).
    pub latest_run: Option<LatestRun>,
    /// End of the newest `completed` run with no requeue event (`status`, `promoted`,
    /// `unblocked`, `reclaimed`) at or after it.
    pub unrequeued_success_at: Option<i64>,
    /// Time of the newest comment since `pr_since` that names a GitHub pull request, and the
    /// comment itself (the caller checks the URL), when no hand-off event followed it.
    pub pr_comments: Vec<(i64, String)>,
    /// The pull request of an operator's unspent `existing_pr_authorized` grant.
    pub authorized_pr: Option<String>,
}

/// The newest closed run of a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LatestRun {
    pub outcome: Option<String>,
    pub ended_at: i64,
    pub infrastructure: bool,
}

/// What the dispatcher's `--until-idle` and the spawn budget look at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Workload {
    pub running: i64,
    /// Ready tasks, including those still in a rate-limit cooldown.
    pub ready: i64,
    /// Ready tasks whose rate-limit cooldown has not ended yet.
    pub cooling_down: i64,
}

/// Whether a run's metadata carries the protocol-violation marker (`protocol_violation: true`).
fn is_protocol_violation(metadata: Option<&str>) -> bool {
    metadata
        .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
        .and_then(|v| {
            v.get("protocol_violation")
                .and_then(serde_json::Value::as_bool)
        })
        .unwrap_or(false)
}

/// A closed run that still names its worker process: the worker may linger after its task
/// moved on (see [`Board::lingering_workers`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LingeringWorker {
    pub run_id: i64,
    pub task_id: String,
    pub pid: i64,
    /// The fingerprint recorded at spawn (`"<boot id>|<start time>"`, `unverified`, or none).
    pub fingerprint: Option<String>,
    /// The lock of the claim the run was opened under (its host prefix says where the worker ran).
    pub claim_lock: Option<String>,
}

/// A closed run whose worker pid is on record: the process may outlive its run when an operator
/// reclaims or archives the task (the task's columns are cleared; the run row keeps the pid).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndedRun {
    pub run_id: i64,
    pub task_id: String,
    pub claim_lock: Option<String>,
    pub worker_pid: i64,
    /// The fingerprint recorded at spawn or registration.
    pub fingerprint: Option<String>,
    pub outcome: Option<String>,
}

/// The state of one run as the dispatcher's superseded-worker check needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunState {
    pub ended: bool,
    pub outcome: Option<String>,
    /// The task's current run (`None` when no run is open).
    pub current_run_id: Option<i64>,
}

impl Board {
    /// Closed runs that ended at or before `ended_before` and still name a worker pid, oldest
    /// first, at most `limit` (read through the partial index `idx_runs_lingering`).
    pub fn lingering_workers(
        &self,
        ended_before: i64,
        limit: usize,
    ) -> Result<Vec<LingeringWorker>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT id, task_id, worker_pid, CAST(worker_started_at AS TEXT), claim_lock \
             FROM task_runs WHERE worker_pid IS NOT NULL AND ended_at IS NOT NULL \
               AND ended_at <= ?1 ORDER BY ended_at, id LIMIT ?2",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![ended_before, limit], |r| {
            Ok(LingeringWorker {
                run_id: r.get(0)?,
                task_id: r.get(1)?,
                pid: r.get(2)?,
                fingerprint: r.get::<_, Option<String>>(3)?.filter(|s| !s.is_empty()),
                claim_lock: r.get::<_, Option<String>>(4)?.filter(|s| !s.is_empty()),
            })
        })?;
        Ok(rows.collect::<crate::db::Result<_>>()?)
    }

    /// Every running task with its claim, worker and current run.
    pub fn running_tasks(&self) -> Result<Vec<RunningTask>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT t.id, t.current_run_id, t.claim_lock, t.claim_expires, t.worker_pid, \
               CAST(t.worker_started_at AS TEXT), t.last_heartbeat_at, \
               COALESCE(r.started_at, t.started_at), t.max_runtime_seconds, t.assignee \
             FROM tasks t LEFT JOIN task_runs r ON r.id = t.current_run_id \
             WHERE t.status = 'running' ORDER BY t.id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(RunningTask {
                id: r.get(0)?,
                run_id: r.get(1)?,
                claim_lock: r.get::<_, Option<String>>(2)?.filter(|s| !s.is_empty()),
                claim_expires: r.get(3)?,
                worker_pid: r.get(4)?,
                fingerprint: r.get::<_, Option<String>>(5)?.filter(|s| !s.is_empty()),
                last_heartbeat_at: r.get(6)?,
                run_started_at: r.get(7)?,
                max_runtime_seconds: r.get(8)?,
                assignee: r.get::<_, Option<String>>(9)?.filter(|s| !s.is_empty()),
            })
        })?;
        Ok(rows.collect::<crate::db::Result<_>>()?)
    }

    /// Up to `limit` claimable tasks of a lane — `ready`, or `review` (unclaimed `review` tasks,
    /// for their reviewer) — by priority DESC, then created_at ASC, then creation order. Whether
    /// one may be spawned now (cooldowns, recent success, an open pull request) is the
    /// dispatcher's respawn guard, fed by [`Board::guard_facts`].
    /// `comments_since` bounds [`Candidate::has_history`]'s look at comments.
    pub fn lane_candidates(
        &self,
        lane: Status,
        comments_since: i64,
        limit: usize,
    ) -> Result<Vec<Candidate>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT c.*, EXISTS (SELECT 1 FROM task_runs r WHERE r.task_id = c.id \
                 AND r.ended_at IS NOT NULL) \
               OR EXISTS (SELECT 1 FROM task_comments m WHERE m.task_id = c.id \
                 AND m.created_at >= ?3) \
             FROM (SELECT t.id, t.title, t.assignee, t.branch_name, t.tenant, t.goal_mode, \
                 t.goal_max_turns, t.last_failure_error, t.workspace_kind, t.workspace_path, \
                 t.workspace_base \
               FROM tasks t WHERE t.status = ?2 AND t.claim_lock IS NULL \
               ORDER BY t.priority DESC, t.created_at ASC, t.rowid ASC LIMIT ?1) c",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![limit, lane.as_str(), comments_since], |r| {
            Ok(Candidate {
                id: r.get(0)?,
                lane,
                title: r.get(1)?,
                assignee: r.get::<_, Option<String>>(2)?.filter(|s| !s.is_empty()),
                branch_name: r.get::<_, Option<String>>(3)?.filter(|s| !s.is_empty()),
                tenant: r.get::<_, Option<String>>(4)?.filter(|s| !s.is_empty()),
                goal_mode: r.get::<_, Option<i64>>(5)?.unwrap_or(0) != 0,
                goal_max_turns: r.get(6)?,
                last_failure_error: r.get::<_, Option<String>>(7)?.filter(|s| !s.is_empty()),
                workspace_kind: r
                    .get::<_, Option<String>>(8)?
                    .unwrap_or_else(|| "scratch".to_owned()),
                workspace_path: r.get::<_, Option<String>>(9)?.filter(|s| !s.is_empty()),
                workspace_base: r.get::<_, Option<String>>(10)?.filter(|s| !s.is_empty()),
                has_history: r.get(11)?,
            })
        })?;
        Ok(rows.collect::<crate::db::Result<_>>()?)
    }

    /// What the respawn guard of task `id` needs: its newest closed run, an unrequeued
    /// completion, and comments since `pr_since` that mention a GitHub pull request and were not
    /// followed by a hand-off (`assigned` to another profile by an operator, `changes_requested`,
    /// `review_reopened`).
    pub fn guard_facts(&self, id: &str, pr_since: i64) -> Result<GuardFacts> {
        let conn = self.conn();
        let latest_run = conn
            .prepare_cached(
                "SELECT r.outcome, r.ended_at, EXISTS (SELECT 1 FROM task_events e \
                   WHERE e.task_id = r.task_id AND e.run_id = r.id AND e.kind = 'spawn_failed' \
                   AND json_extract(e.payload, '$.infrastructure') = 1) \
                 FROM task_runs r WHERE r.task_id = ?1 AND r.ended_at IS NOT NULL \
                 ORDER BY r.ended_at DESC, r.id DESC LIMIT 1",
            )?
            .query_row([id], |r| {
                Ok(LatestRun {
                    outcome: r.get(0)?,
                    ended_at: r.get(1)?,
                    infrastructure: r.get(2)?,
                })
            })
            .optional()?;
        let unrequeued_success_at = conn
            .prepare_cached(
                "SELECT r.ended_at FROM task_runs r WHERE r.task_id = ?1 \
                   AND r.outcome = 'completed' AND r.ended_at IS NOT NULL \
                   AND NOT EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = r.task_id \
                     AND e.kind IN ('status', 'promoted', 'unblocked', 'reclaimed') \
                     AND e.created_at >= r.ended_at) \
                 ORDER BY r.ended_at DESC LIMIT 1",
            )?
            .query_row([id], |r| r.get(0))
            .optional()?;
        let pr_comments: Vec<(i64, String)> = {
            let mut stmt = conn.prepare_cached(
                "SELECT c.created_at, c.body FROM task_comments c WHERE c.task_id = ?1 \
                   AND c.created_at >= ?2 AND c.body LIKE '%github.com/%/pull/%' \
                   AND NOT EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = c.task_id \
                     AND e.created_at > c.created_at AND (e.kind IN ('changes_requested', \
                       'review_reopened') OR (e.kind = 'assigned' \
                       AND json_extract(e.payload, '$.from') IS NOT NULL \
                       AND json_extract(e.payload, '$.from') IS NOT json_extract(e.payload, '$.assignee') \
                       AND json_extract(e.payload, '$.source') IS NULL))) \
                 ORDER BY c.created_at DESC, c.id DESC",
            )?;
            let rows = stmt.query_map(params![id, pr_since], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<crate::db::Result<_>>()?
        };
        let authorized_pr = if pr_comments.is_empty() {
            None
        } else {
            self.active_pr_authorization(id)?
        };
        Ok(GuardFacts {
            latest_run,
            unrequeued_success_at,
            pr_comments,
            authorized_pr,
        })
    }

    /// Running and ready counts (ready split by rate-limit cooldown).
    pub fn workload(&self, now: i64, cooldown: i64) -> Result<Workload> {
        // Cooling down: ready tasks whose latest ended run was rate limited less than `cooldown`
        // ago. On kanban's layout they are found from the recent rate-limited runs
        // (`idx_runs_rate_limited`; `CROSS JOIN` keeps SQLite's planner, which has no
        // statistics, from starting at the ready tasks); a board of the original, which has
        // neither that index nor kanban's table, looks at each ready task's runs instead.
        macro_rules! workload {
            ($cooling:literal) => {
                concat!(
                    "SELECT (SELECT COUNT(*) FROM tasks WHERE status = 'running'), \
                     (SELECT COUNT(*) FROM tasks WHERE status = 'ready'), (",
                    $cooling,
                    ")"
                )
            };
        }
        let own = workload!(
            "SELECT COUNT(DISTINCT r.task_id) FROM task_runs r CROSS JOIN tasks t \
             WHERE t.id = r.task_id AND r.outcome = 'rate_limited' AND r.ended_at > ?1 \
             AND t.status = 'ready' AND r.id = (SELECT MAX(r2.id) FROM task_runs r2 \
             WHERE r2.task_id = r.task_id AND r2.ended_at IS NOT NULL)"
        );
        let adopted = workload!(
            "SELECT COUNT(*) FROM tasks t WHERE t.status = 'ready' AND EXISTS (SELECT 1 \
             FROM task_runs r WHERE r.id = (SELECT MAX(r2.id) FROM task_runs r2 \
             WHERE r2.task_id = t.id AND r2.ended_at IS NOT NULL) \
             AND r.outcome = 'rate_limited' AND r.ended_at > ?1)"
        );
        let sql = if self.records_ticks() { own } else { adopted };
        let mut stmt = self.conn().prepare_cached(sql)?;
        Ok(stmt.query_row(params![now.saturating_sub(cooldown)], |r| {
            Ok(Workload {
                running: r.get(0)?,
                ready: r.get(1)?,
                cooling_down: r.get(2)?,
            })
        })?)
    }

    /// Ready tasks per assignee (`None` = unassigned), to tell work that can never be spawned
    /// (a profile nobody defined) from work that is merely waiting.
    pub fn ready_by_assignee(&self) -> Result<Vec<(Option<String>, i64)>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT NULLIF(TRIM(assignee), ''), COUNT(*) FROM tasks WHERE status = 'ready' \
             GROUP BY NULLIF(TRIM(assignee), '')",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<crate::db::Result<_>>()?)
    }

    /// How many tasks are running on this board.
    pub fn running_count(&self) -> Result<i64> {
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT COUNT(*) FROM tasks WHERE status = 'running'")?;
        Ok(stmt.query_row([], |r| r.get(0))?)
    }

    /// Running tasks claimed by a lock that starts with `host_prefix` (`"<hostname>:"`).
    pub fn running_on_host(&self, host_prefix: &str) -> Result<i64> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT COUNT(*) FROM tasks WHERE status = 'running' AND substr(claim_lock, 1, length(?1)) = ?1",
        )?;
        Ok(stmt.query_row([host_prefix], |r| r.get(0))?)
    }

    /// Running tasks claimed on this host (lock starting with `host_prefix`), counted by
    /// assignee (`None`: unassigned), for the per-profile cap.
    pub fn running_by_assignee_on_host(
        &self,
        host_prefix: &str,
    ) -> Result<Vec<(Option<String>, i64)>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT NULLIF(LOWER(TRIM(assignee)), ''), COUNT(*) FROM tasks WHERE status = 'running' \
             AND substr(claim_lock, 1, length(?1)) = ?1 GROUP BY NULLIF(LOWER(TRIM(assignee)), '')",
        )?;
        let rows = stmt.query_map([host_prefix], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<crate::db::Result<_>>()?)
    }

    /// How many of the task's newest closed runs in a row (rate-limited runs skipped) were
    /// protocol violations: outcome `crashed` with `protocol_violation: true` in the run's
    /// metadata, the rows the original counts (and writes) too.
    pub fn protocol_violation_streak(&self, id: &str) -> Result<i64> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT outcome, metadata FROM task_runs WHERE task_id = ?1 AND ended_at IS NOT NULL \
             ORDER BY id DESC LIMIT 50",
        )?;
        let rows = stmt.query_map([id], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, Option<String>>(1)?,
            ))
        })?;
        let mut streak = 0;
        for row in rows {
            let (outcome, metadata) = row?;
            match outcome.as_deref() {
                Some("crashed") if is_protocol_violation(metadata.as_deref()) => streak += 1,
                Some("rate_limited") => {}
                _ => break,
            }
        }
        Ok(streak)
    }

    /// The task's own failure limit (`max_retries`), if it has one.
    pub fn task_failure_limit(&self, id: &str) -> Result<Option<i64>> {
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT max_retries FROM tasks WHERE id = ?1")?;
        Ok(stmt
            .query_row([id], |r| r.get::<_, Option<i64>>(0))
            .optional()?
            .flatten()
            .filter(|n| *n >= 1))
    }

    /// SQLite's `PRAGMA data_version`: changes whenever another connection commits to the board.
    pub fn data_version(&self) -> Result<i64> {
        Ok(self.conn().data_version()?)
    }

    /// The task's most recent closed runs (newest first, at most `limit`) that have a worker pid.
    pub fn ended_runs_with_worker(&self, task_id: &str, limit: usize) -> Result<Vec<EndedRun>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT id, task_id, claim_lock, worker_pid, CAST(worker_started_at AS TEXT), outcome \
             FROM task_runs WHERE task_id = ?1 AND ended_at IS NOT NULL AND worker_pid IS NOT NULL \
             ORDER BY id DESC LIMIT ?2",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![task_id, limit], |r| {
            Ok(EndedRun {
                run_id: r.get(0)?,
                task_id: r.get(1)?,
                claim_lock: r.get::<_, Option<String>>(2)?.filter(|s| !s.is_empty()),
                worker_pid: r.get(3)?,
                fingerprint: r.get::<_, Option<String>>(4)?.filter(|s| !s.is_empty()),
                outcome: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<crate::db::Result<_>>()?)
    }

    /// Whether run `run_id` of `task_id` has ended, how, and which run of the task is current;
    /// `None` when either is unknown.
    pub fn run_state(&self, task_id: &str, run_id: i64) -> Result<Option<RunState>> {
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT r.ended_at IS NOT NULL, r.outcome, t.current_run_id \
                 FROM task_runs r JOIN tasks t ON t.id = r.task_id \
                 WHERE r.id = ?1 AND r.task_id = ?2",
            )?
            .query_row(params![run_id, task_id], |r| {
                Ok(RunState {
                    ended: r.get(0)?,
                    outcome: r.get(1)?,
                    current_run_id: r.get(2)?,
                })
            })
            .optional()?)
    }
}
