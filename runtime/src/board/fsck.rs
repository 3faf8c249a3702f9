//! `kanban fsck`: read-only invariant checks over a whole board. Each violation names its rule,
//! the task and what is wrong. It never repairs anything.
//!
//! Rules: `invalid_status` (a status outside the nine); `running_without_claim`,
//! `running_without_open_run`, `claim_without_running` (running ⇔ a claim and an open run);
//! `open_run_mismatch`, `dangling_current_run` (`current_run_id` is NULL exactly when no run is
//! open, and points at the task's one open run); `orphan_run`, `orphan_event`, `orphan_comment`,
//! `orphan_link` (every row belongs to an existing task); `ready_with_unfinished_parent` (unless an
//! operator's forced promotion holds);
//! `link_cycle`. With a current time ([`Board::fsck_at`], what `kanban fsck` runs) also
//! `claim_never_started`: a running task whose current run is older than
//! [`UNSTARTED_CLAIM_SECONDS`] with no worker pid and no `spawned` or `worker_registered` event —
//! its dispatcher died between the claim and the spawn (the next dispatcher tick releases it
//! once that dispatcher is gone). First of all `corrupt_database`: SQLite's `PRAGMA quick_check` over the file;
//! when it finds damage, fsck reports only that (every other answer would rest on damaged pages).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::error::Result;
use super::model::Status;
use super::store::Board;
use crate::db::{self, Db};

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub rule: &'static str,
    pub task_id: Option<String>,
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.task_id {
            Some(id) => write!(f, "{}: {id}: {}", self.rule, self.message),
            None => write!(f, "{}: {}", self.rule, self.message),
        }
    }
}

/// What `PRAGMA quick_check` finds wrong with the file (empty when it answers `ok`); a check that
/// itself fails on a damaged page is reported as damage too.
fn storage_damage(conn: &Db) -> Result<Vec<String>> {
    match conn.quick_check() {
        Ok(problems) => Ok(problems),
        Err(e) if e.kind() == db::ErrorKind::Corrupt => Ok(vec![e.to_string()]),
        Err(e) => Err(e.into()),
    }
}

/// How old a claim without any worker may be before `fsck` reports it (`claim_never_started`).
pub const UNSTARTED_CLAIM_SECONDS: i64 = 60;

impl Board {
    /// [`Board::fsck`] plus the rules that need the current time (`claim_never_started`).
    pub fn fsck_at(&self, now: i64) -> Result<Vec<Violation>> {
        let mut out = self.fsck()?;
        if out.iter().any(|v| v.rule == "corrupt_database") {
            return Ok(out);
        }
        let mut stmt = self.conn().prepare(
            "SELECT t.id, t.claim_lock, r.id, r.started_at FROM tasks t \
             JOIN task_runs r ON r.id = t.current_run_id \
             WHERE t.status = 'running' AND t.worker_pid IS NULL AND r.worker_pid IS NULL \
               AND r.ended_at IS NULL AND r.started_at <= ?1 \
               AND NOT EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = t.id \
                   AND e.run_id = r.id AND e.kind IN ('spawned', 'worker_registered', 'heartbeat')) \
             ORDER BY t.id",
        )?;
        let rows = stmt.query_map([now - UNSTARTED_CLAIM_SECONDS], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
            ))
        })?;
        for row in rows {
            let (id, lock, run, started) = row?;
            out.push(Violation {
                rule: "claim_never_started",
                task_id: Some(id),
                message: format!(
                    "run {run} claimed by {} {}s ago has no worker (no pid, never spawned); \
                     a dispatcher releases its own claim once it is gone, an external claim ends \
                     at its TTL, or run `kanban reclaim`",
                    lock.as_deref().unwrap_or("nobody"),
                    now - started
                ),
            });
        }
        Ok(out)
    }

    /// Checks every invariant; an empty list means the board is consistent.
    pub fn fsck(&self) -> Result<Vec<Violation>> {
        let conn = self.conn();
        let damage = storage_damage(conn)?;
        if !damage.is_empty() {
            return Ok(damage
                .into_iter()
                .map(|message| Violation {
                    rule: "corrupt_database",
                    task_id: None,
                    message: format!(
                        "{message} (in {}); restore a backup, or salvage the rows with \
                         `sqlite3 <file> .recover`",
                        self.path().display()
                    ),
                })
                .collect());
        }
        let mut out = Vec::new();
        let mut push = |rule, task_id: Option<String>, message: String| {
            out.push(Violation {
                rule,
                task_id,
                message,
            });
        };

        // Statuses, claims and the current-run pointer, task by task.
        let mut stmt = conn.prepare(
            "SELECT t.id, t.status, t.claim_lock, t.current_run_id, \
               (SELECT COUNT(*) FROM task_runs r WHERE r.task_id = t.id AND r.ended_at IS NULL), \
               (SELECT r.task_id FROM task_runs r WHERE r.id = t.current_run_id), \
               (SELECT r.ended_at IS NULL FROM task_runs r WHERE r.id = t.current_run_id) \
             FROM tasks t ORDER BY t.id",
        )?;
        type TaskRow = (
            String,
            String,
            Option<String>,
            Option<i64>,
            i64,
            Option<String>,
            Option<bool>,
        );
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })?;
        for row in rows {
            let (id, status_text, lock, current, open_runs, run_task, run_open): TaskRow = row?;
            let status = match status_text.parse::<Status>() {
                Ok(s) => Some(s),
                Err(_) => {
                    push(
                        "invalid_status",
                        Some(id.clone()),
                        format!("status {status_text:?} is not one of the nine statuses"),
                    );
                    None
                }
            };
            let running = status == Some(Status::Running);
            let lock = lock.filter(|l| !l.is_empty());
            if running && lock.is_none() {
                push(
                    "running_without_claim",
                    Some(id.clone()),
                    "running but claim_lock is NULL".into(),
                );
            }
            if running && open_runs == 0 {
                push(
                    "running_without_open_run",
                    Some(id.clone()),
                    "running but no run is open".into(),
                );
            }
            if !running && let Some(lock) = &lock {
                push(
                    "claim_without_running",
                    Some(id.clone()),
                    format!("{status_text} but claimed by {lock}"),
                );
            }
            if open_runs > 1 {
                push(
                    "open_run_mismatch",
                    Some(id.clone()),
                    format!("{open_runs} runs are open at once"),
                );
            }
            match current {
                None if open_runs > 0 => push(
                    "open_run_mismatch",
                    Some(id.clone()),
                    "current_run_id is NULL but a run is open".into(),
                ),
                Some(run) if run_task.as_deref() != Some(id.as_str()) => push(
                    "dangling_current_run",
                    Some(id.clone()),
                    format!("current_run_id {run} is not a run of this task"),
                ),
                Some(run) if run_open != Some(true) => push(
                    "dangling_current_run",
                    Some(id.clone()),
                    format!("current_run_id {run} points at a closed run"),
                ),
                _ => {}
            }
        }
        drop(stmt);

        for (table, rule, column) in [
            ("task_runs", "orphan_run", "task_id"),
            ("task_events", "orphan_event", "task_id"),
            ("task_comments", "orphan_comment", "task_id"),
            ("task_links", "orphan_link", "parent_id"),
            ("task_links", "orphan_link", "child_id"),
        ] {
            let mut stmt = conn.prepare(&format!(
                "SELECT DISTINCT x.{column} FROM {table} x \
                 WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = x.{column}) ORDER BY 1"
            ))?;
            let ids = stmt.query_map([], |r| r.get::<_, String>(0))?;
            for id in ids {
                let id = id?;
                push(
                    rule,
                    Some(id),
                    format!("{table}.{column} names a task that does not exist"),
                );
            }
        }

        let mut stmt = conn.prepare(
            "SELECT DISTINCT t.id, p.id, p.status FROM tasks t \
             JOIN task_links l ON l.child_id = t.id JOIN tasks p ON p.id = l.parent_id \
             WHERE t.status = 'ready' AND p.status NOT IN ('done', 'archived') ORDER BY t.id, p.id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        let rows: Vec<(String, String, String)> = rows.collect::<crate::db::Result<_>>()?;
        drop(stmt);
        for (id, parent, status) in rows {
            // An operator's `promote --force` makes this state on purpose.
            if super::rows::forced_past_parents(conn, &id)? {
                continue;
            }
            push(
                "ready_with_unfinished_parent",
                Some(id),
                format!("ready but parent {parent} is {status}"),
            );
        }

        for cycle in link_cycles(conn)? {
            push(
                "link_cycle",
                cycle.first().cloned(),
                format!("dependency cycle: {}", cycle.join(" -> ")),
            );
        }
        Ok(out)
    }
}

/// One representative cycle per strongly connected group of links (parent -> child order).
fn link_cycles(conn: &Db) -> Result<Vec<Vec<String>>> {
    let mut graph: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut stmt = conn.prepare("SELECT parent_id, child_id FROM task_links ORDER BY 1, 2")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
    for row in rows {
        let (p, c) = row?;
        graph.entry(p).or_default().push(c);
    }
    // Iterative three-colour DFS; a back edge closes a cycle.
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut cycles = Vec::new();
    for start in graph.keys() {
        if done.contains(start) {
            continue;
        }
        let mut path: Vec<String> = vec![start.clone()];
        let mut on_path: BTreeSet<String> = BTreeSet::from([start.clone()]);
        let mut cursor: Vec<usize> = vec![0];
        while let Some(node) = path.last().cloned() {
            let depth = path.len() - 1;
            let next = graph
                .get(&node)
                .and_then(|children| children.get(cursor[depth]))
                .cloned();
            cursor[depth] += 1;
            match next {
                Some(child) if on_path.contains(&child) => {
                    let from = path.iter().position(|n| *n == child).unwrap_or(0);
                    let mut cycle = path[from..].to_vec();
                    cycle.push(child);
                    cycles.push(cycle);
                }
                Some(child) if !done.contains(&child) => {
                    on_path.insert(child.clone());
                    path.push(child);
                    cursor.push(0);
                }
                Some(_) => {}
                None => {
                    on_path.remove(&node);
                    done.insert(node);
                    path.pop();
                    cursor.pop();
                }
            }
        }
    }
    Ok(cycles)
}
