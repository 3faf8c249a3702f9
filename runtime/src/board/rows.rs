//! The row helpers every task transition shares: loading a task, the parent gate and the status a
//! task lands or resumes in, the checked statement runners (`exec`, `cas`), runs closed or
//! opened inside a transition, and the promotion of children freed by a transition.

use crate::db::{self, Db, OptionalExtension, RowLock, Tx, params};

use super::error::{BoardError, Result};
use super::events::{Event, append_event};
use super::model::{Status, TASK_COLUMNS, Task};

/// Loads a task or fails with [`BoardError::TaskNotFound`].
///
/// Inside a PostgreSQL write transaction the row is locked (`FOR UPDATE`, waiting for a claim
/// that holds it): every transition reads its task first, so it decides on the row as the
/// claim left it, as SQLite's one writer at a time would (see the SQL layer's PostgreSQL
/// backend).
pub(crate) fn load_task(conn: &Db, id: &str) -> Result<Task> {
    // Built once: every transition reads its task first, and formatting the long statement on
    // each call showed in the profile of `complete`.
    static SQL: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"));
    static LOCKED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let sql: &str = match conn.row_lock(RowLock::Wait) {
        None => &SQL,
        Some(lock) => {
            LOCKED.get_or_init(|| format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1{lock}"))
        }
    };
    conn.prepare_cached(sql)?
        .query_row([id], Task::from_row)
        .optional()?
        .ok_or_else(|| BoardError::TaskNotFound { id: id.to_owned() })
}

/// Parents of `id` that are neither done nor archived.
pub(crate) fn unfinished_parents(conn: &Db, id: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT p.id FROM task_links l JOIN tasks p ON p.id = l.parent_id \
         WHERE l.child_id = ?1 AND p.status NOT IN ('done', 'archived') ORDER BY p.id",
    )?;
    let rows = stmt.query_map([id], |r| r.get(0))?;
    Ok(rows.collect::<db::Result<_>>()?)
}

/// True when an operator's forced promotion (`promoted_manual` with `open_parents`) is the
/// newest decision on the task's gate: no later promotion, claim rejection, dependency wait,
/// link change, status change, unblock or block. Until one comes, the claim and the completion
/// honour it and `fsck` accepts the task ready over its unfinished parents.
pub(crate) fn forced_past_parents(conn: &Db, id: &str) -> Result<bool> {
    let newest: Option<(String, Option<String>)> = conn
        .prepare_cached(
            "SELECT kind, payload FROM task_events WHERE task_id = ?1 AND kind IN \
               ('promoted_manual', 'promoted', 'claim_rejected', 'dependency_wait', 'linked', \
                'unlinked', 'status', 'unblocked', 'blocked', 'completed') \
             ORDER BY id DESC LIMIT 1",
        )?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(match newest {
        Some((kind, Some(payload))) if kind == "promoted_manual" => {
            serde_json::from_str::<serde_json::Value>(&payload)
                .ok()
                .and_then(|v| {
                    v.get("open_parents")
                        .and_then(|p| p.as_array())
                        .map(|p| !p.is_empty())
                })
                .unwrap_or(false)
        }
        _ => false,
    })
}

/// The unfinished parents that gate `id` now: [`unfinished_parents`], or none while a forced
/// promotion holds ([`forced_past_parents`]).
pub(crate) fn gating_parents(conn: &Db, id: &str) -> Result<Vec<String>> {
    let open = unfinished_parents(conn, id)?;
    if open.is_empty() || forced_past_parents(conn, id)? {
        return Ok(Vec::new());
    }
    Ok(open)
}

/// `ready` when every parent is finished, else `todo`.
pub(super) fn landing_status(conn: &Db, id: &str) -> Result<Status> {
    Ok(if unfinished_parents(conn, id)?.is_empty() {
        Status::Ready
    } else {
        Status::Todo
    })
}

/// The status a claim of run `run_id` returns to when it is released: `review` when the run was
/// claimed from the review lane (its `claimed` event says `source_status: review`), else
/// `ready`. A reviewer run never turns into an implementer run.
pub(crate) fn retry_status_for_run(
    conn: &Db,
    task_id: &str,
    run_id: Option<i64>,
) -> Result<Status> {
    let Some(run_id) = run_id else {
        return Ok(Status::Ready);
    };
    let from_review = conn
        .prepare_cached(
            "SELECT 1 FROM task_events WHERE task_id = ?1 AND run_id = ?2 AND kind = 'claimed' \
             AND json_extract(payload, '$.source_status') = 'review' LIMIT 1",
        )?
        .query_row(params![task_id, run_id], |_| Ok(()))
        .optional()?
        .is_some();
    Ok(if from_review {
        Status::Review
    } else {
        Status::Ready
    })
}

/// Where a waiting task resumes once nothing holds it: `review` when its newest lifecycle event
/// (a block, a wait, a release, a review hand-back…) names `review` as its resume, retry or source
/// status, else `ready`.
pub(crate) fn resume_status(conn: &Db, task_id: &str) -> Result<Status> {
    let newest: Option<bool> = conn
        .prepare_cached(
            "SELECT 'review' IN (COALESCE(json_extract(payload, '$.resume_status'), ''), \
                 COALESCE(json_extract(payload, '$.retry_status'), ''), \
                 COALESCE(json_extract(payload, '$.source_status'), '')) \
             FROM task_events WHERE task_id = ?1 AND kind IN ('blocked', 'block_loop_detected', \
               'dependency_wait', 'gave_up', 'unblocked', 'changes_requested', 'review_reopened', \
               'status', 'reclaimed', 'stale', 'timed_out', 'crashed', 'spawn_failed', \
               'rate_limited', 'protocol_violation', 'reconciled') \
             ORDER BY id DESC LIMIT 1",
        )?
        .query_row([task_id], |r| r.get(0))
        .optional()?;
    Ok(if newest == Some(true) {
        Status::Review
    } else {
        Status::Ready
    })
}

/// Runs a statement through the connection's statement cache; returns the rows changed.
pub(super) fn exec(tx: &Tx<'_>, sql: &str, params: impl db::Params) -> Result<usize> {
    Ok(tx.prepare_cached(sql)?.execute(params)?)
}

/// Runs a write whose row count nothing checks (see [`db::Db::execute_unchecked`]).
pub(super) fn exec_unchecked(tx: &Tx<'_>, sql: &str, params: impl db::Params) -> Result<()> {
    Ok(tx.execute_unchecked(sql, params)?)
}

/// Runs an `INSERT … RETURNING id` (see [`db::Db::insert_returning_id`]); returns the new id.
pub(crate) fn insert_returning_id(tx: &Tx<'_>, sql: &str, params: impl db::Params) -> Result<i64> {
    Ok(tx.insert_returning_id(sql, params)?)
}

/// Runs an `UPDATE` that must change exactly one row.
pub(super) fn cas(tx: &Tx<'_>, sql: &str, params: impl db::Params) -> Result<bool> {
    Ok(tx.prepare_cached(sql)?.execute(params)? == 1)
}

/// How a transition closes the run it takes a task off (see [`end_run_in`]).
pub(super) struct RunClose<'a> {
    pub(super) status: &'a str,
    pub(super) outcome: &'a str,
    pub(super) summary: Option<&'a str>,
    pub(super) error: Option<&'a str>,
}

/// Ends the run a transition takes task `task_id` off: closes `run_id` (its current run, when it
/// has one) as `close` says, then every other run of the task left open (`leaked_note`); returns
/// `run_id` when it was open.
pub(super) fn end_run_in(
    tx: &Tx<'_>,
    task_id: &str,
    run_id: Option<i64>,
    close: &RunClose<'_>,
    leaked_note: &str,
    now: i64,
) -> Result<Option<i64>> {
    let mut closed = None;
    if let Some(run_id) = run_id
        && close_run_in(
            tx,
            run_id,
            close.status,
            close.outcome,
            close.summary,
            close.error,
            now,
        )?
    {
        closed = Some(run_id);
    }
    close_leaked_runs(tx, task_id, leaked_note, now)?;
    Ok(closed)
}

/// [`end_run_in`], and when the task had no open run, a zero-length one recorded as `close` says
/// (a hand-over of a task nobody claimed still gets its attempt row); returns the run.
pub(super) fn end_or_record_run_in(
    tx: &Tx<'_>,
    task: &Task,
    close: &RunClose<'_>,
    leaked_note: &str,
    now: i64,
) -> Result<i64> {
    match end_run_in(tx, &task.id, task.current_run_id, close, leaked_note, now)? {
        Some(run_id) => Ok(run_id),
        None => instant_run_in(tx, task, close.status, close.outcome, close.summary, now),
    }
}

/// Closes an open run; returns whether it was open.
pub(crate) fn close_run_in(
    tx: &Tx<'_>,
    run_id: i64,
    status: &str,
    outcome: &str,
    summary: Option<&str>,
    error: Option<&str>,
    now: i64,
) -> Result<bool> {
    Ok(exec(
        tx,
        "UPDATE task_runs SET status = ?2, outcome = ?3, summary = COALESCE(?4, summary), \
         error = COALESCE(?5, error), ended_at = ?6 WHERE id = ?1 AND ended_at IS NULL",
        params![run_id, status, outcome, summary, error, now],
    )? == 1)
}

/// Records a zero-length, already closed run (started and ended at `now`) for a transition that
/// ends an attempt nobody claimed (`complete` or `block` of a never-claimed task); returns its id.
pub(super) fn instant_run_in(
    tx: &Tx<'_>,
    task: &Task,
    status: &str,
    outcome: &str,
    summary: Option<&str>,
    now: i64,
) -> Result<i64> {
    insert_returning_id(
        tx,
        "INSERT INTO task_runs (task_id, profile, status, started_at, ended_at, outcome, summary) \
         VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6) RETURNING id",
        params![task.id, task.assignee, status, now, outcome, summary],
    )
}

/// Closes every open run of `task_id` as reclaimed (invariant recovery); returns how many.
pub(super) fn close_leaked_runs(tx: &Tx<'_>, task_id: &str, note: &str, now: i64) -> Result<()> {
    exec_unchecked(
        tx,
        "UPDATE task_runs SET status = 'reclaimed', outcome = 'reclaimed', error = ?2, ended_at = ?3 \
         WHERE task_id = ?1 AND ended_at IS NULL",
        params![task_id, note, now],
    )
}

/// Promotes `todo` children of `parent_id` whose parents are now all finished.
pub(super) fn promote_children_in(tx: &Tx<'_>, parent_id: &str, now: i64) -> Result<Vec<String>> {
    let children: Vec<String> = {
        let mut stmt = tx.prepare_cached(
            "SELECT c.id FROM task_links l JOIN tasks c ON c.id = l.child_id \
             WHERE l.parent_id = ?1 AND c.status = 'todo' ORDER BY c.id",
        )?;
        let rows = stmt.query_map([parent_id], |r| r.get(0))?;
        rows.collect::<db::Result<_>>()?
    };
    let mut promoted = Vec::new();
    for child in children {
        if promote_if_ready_in(tx, &child, now)? {
            promoted.push(child);
        }
    }
    Ok(promoted)
}

/// `todo` → `ready` for one task whose parents are all finished; event `promoted`.
pub(super) fn promote_if_ready_in(tx: &Tx<'_>, id: &str, now: i64) -> Result<bool> {
    if !unfinished_parents(tx, id)?.is_empty() {
        return Ok(false);
    }
    promote_todo_in(tx, id, now)
}

/// `todo` → its resume status (`review` when it waited as a reviewer's task, else `ready`);
/// event `promoted` (`{status: review}` for the review lane). The caller checked the parents.
pub(super) fn promote_todo_in(tx: &Tx<'_>, id: &str, now: i64) -> Result<bool> {
    let to = resume_status(tx, id)?;
    let moved = cas(
        tx,
        "UPDATE tasks SET status = ?2 WHERE id = ?1 AND status = 'todo'",
        params![id, to.as_str()],
    )?;
    if moved {
        let status = (to == Status::Review).then_some(Status::Review);
        append_event(tx, id, None, &Event::Promoted { status }, now)?;
    }
    Ok(moved)
}
