//! Task transitions. Each one runs in one write transaction, reads the row, decides, and applies a
//! compare-and-swap `UPDATE … WHERE id = ? AND status = <seen> [AND claim_lock IS ?]
//! [AND current_run_id IS ?]` that must change exactly one row; the events describing it are
//! appended in the same transaction. A loser sees zero rows and gets a [`Refusal`]: no retry
//! loops, no extra locks.
//!
//! Every `*_in(tx, …)` function is the transition on an already open transaction (for
//! composition, e.g. by `lifecycle.rs`); the [`Board`] method of the same name opens one.
//!
//! Invariants kept here: `current_run_id IS NULL` exactly when no run of the task is open (every
//! transition that leaves `running` closes the run and clears the pointer; a claim first closes a
//! leaked open run); a task is `ready` only when every parent is done or archived (create, link,
//! claim, promote and `recompute_ready` all check).
//!
//! Design decisions where the issue is silent:
//! * `blocked` is sticky: only `unblock` or `promote` (operator actions) leave it;
//!   `recompute_ready` promotes `todo` tasks only.
//! * The live-claim fence of `complete` is the claim's expiry (the board never inspects processes);
//!   a caller that passes the current run id, or `force`, passes it.
//! * `archive` and `reclaim` never signal a worker; they return its pid so the caller can.
//! * `promote` also takes a task out of `triage`.
//! * The review lane: `claim_review` claims from `review` (event `claimed` {source_status:
//!   review}); [`retry_status_for_run`] reads that event, so every release of a reviewer's run
//!   goes back to `review`, and [`resume_status`] lets a block or a dependency wait resume there.
//!   `request_review`, `request_changes` and `review_reopen` hand the task over and back.
//! * `reopen` sends a done task back and invalidates every descendant in
//!   `ready`/`review`/`running`/`done`; like `archive`, it signals nothing.

use crate::board::StorageError;
use crate::db::{self, Db, OptionalExtension, RowLock, params};

use super::error::{BoardError, Result};
use super::events::{Event, append_event};
pub use super::limits::{
    BLOCK_RECURRENCE_LIMIT, DEFAULT_CLAIM_TTL_SECONDS, DEFAULT_FAILURE_LIMIT, MAX_SECONDS,
};
use super::model::{BlockKind, Status, TASK_COLUMNS, Task};
use super::outcome::*;
use super::store::{Board, random_hex};
use crate::db::Tx;

/// What `kanban create` asks for.
#[derive(Debug, Clone, Default)]
pub struct NewTask {
    pub title: String,
    pub body: Option<String>,
    pub assignee: Option<String>,
    pub parents: Vec<String>,
    pub priority: i64,
    pub idempotency_key: Option<String>,
    pub max_runtime_seconds: Option<i64>,
    /// Start in `triage` instead of flowing.
    pub triage: bool,
    /// Start in `blocked` (sticky until unblocked).
    pub blocked: bool,
    /// Who created it: a task id when a worker creates it, else a name.
    pub created_by: Option<String>,
    /// Soft namespace; inherited from the first parent that has one when `None`.
    pub tenant: Option<String>,
    pub max_retries: Option<i64>,
    pub skills: Option<Vec<String>>,
    pub branch_name: Option<String>,
    pub goal_mode: bool,
    pub goal_max_turns: Option<i64>,
}

/// A claim request: the lock string (`"<hostname>:<pid>"` of the claimer) and the lease length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimSpec {
    pub lock: String,
    pub ttl_seconds: i64,
    /// Who makes the claim: only a dispatcher's claim may be released as abandoned when its
    /// worker never starts (an external claimer's worker is not the dispatcher's to watch).
    pub origin: ClaimOrigin,
}

/// Who made a claim, recorded in its `claimed` event (`dispatcher: true`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClaimOrigin {
    /// A dispatcher claimed the task to spawn its own worker for it: if that worker never
    /// registers and the dispatcher is gone, the claim is released (`claim_abandoned`).
    Dispatcher,
    /// `kanban claim` or a library caller: a worker the dispatcher knows nothing of. Released
    /// only by the rules of every claim (TTL expiry with no live worker, a stale heartbeat, an
    /// operator's reclaim). The default, because wrongly releasing a live claim runs the task
    /// twice.
    #[default]
    External,
}

/// What a caller proves it holds; `None` fields are not checked (an operator).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fence {
    pub claim_lock: Option<String>,
    pub run_id: Option<i64>,
}

/// `"<hostname>:<pid>"` of this process.
pub fn default_claim_lock() -> String {
    let uname = rustix::system::uname();
    let host = uname.nodename().to_string_lossy();
    let host = if host.is_empty() { "unknown" } else { &host };
    format!("{host}:{}", std::process::id())
}

/// Checks a TTL or runtime given in seconds (`what` names it in the error).
pub fn check_seconds(what: &str, value: i64) -> Result<i64> {
    if (1..=MAX_SECONDS).contains(&value) {
        Ok(value)
    } else {
        Err(BoardError::InvalidSeconds {
            what: what.to_owned(),
            value: value.to_string(),
        })
    }
}

fn normalize_assignee(assignee: Option<&str>) -> Option<String> {
    assignee
        .map(|a| a.trim().to_lowercase())
        .filter(|a| !a.is_empty())
}

/// The first line of `text`, at most 400 characters.
pub(crate) fn summary_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(400)
        .collect()
}

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

/// `ready` when every parent is finished, else `todo`.
fn landing_status(conn: &Db, id: &str) -> Result<Status> {
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
fn exec(tx: &Tx<'_>, sql: &str, params: impl db::Params) -> Result<usize> {
    Ok(tx.prepare_cached(sql)?.execute(params)?)
}

/// Runs a write whose row count nothing checks (see [`db::Db::execute_unchecked`]).
fn exec_unchecked(tx: &Tx<'_>, sql: &str, params: impl db::Params) -> Result<()> {
    Ok(tx.execute_unchecked(sql, params)?)
}

/// Runs an `INSERT … RETURNING id` (see [`db::Db::insert_returning_id`]); returns the new id.
pub(crate) fn insert_returning_id(tx: &Tx<'_>, sql: &str, params: impl db::Params) -> Result<i64> {
    Ok(tx.insert_returning_id(sql, params)?)
}

/// Runs an `UPDATE` that must change exactly one row.
fn cas(tx: &Tx<'_>, sql: &str, params: impl db::Params) -> Result<bool> {
    Ok(tx.prepare_cached(sql)?.execute(params)? == 1)
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
fn instant_run_in(
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
fn close_leaked_runs(tx: &Tx<'_>, task_id: &str, note: &str, now: i64) -> Result<()> {
    exec_unchecked(
        tx,
        "UPDATE task_runs SET status = 'reclaimed', outcome = 'reclaimed', error = ?2, ended_at = ?3 \
         WHERE task_id = ?1 AND ended_at IS NULL",
        params![task_id, note, now],
    )
}

/// Promotes `todo` children of `parent_id` whose parents are now all finished.
fn promote_children_in(tx: &Tx<'_>, parent_id: &str, now: i64) -> Result<Vec<String>> {
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
fn promote_if_ready_in(tx: &Tx<'_>, id: &str, now: i64) -> Result<bool> {
    if !unfinished_parents(tx, id)?.is_empty() {
        return Ok(false);
    }
    promote_todo_in(tx, id, now)
}

/// `todo` → its resume status (`review` when it waited as a reviewer's task, else `ready`);
/// event `promoted` (`{status: review}` for the review lane). The caller checked the parents.
fn promote_todo_in(tx: &Tx<'_>, id: &str, now: i64) -> Result<bool> {
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

/// True for the failure of a create whose drawn task id another task has (PostgreSQL's
/// primary key refused it).
pub(crate) fn is_taken_task_id(err: &BoardError) -> bool {
    matches!(err, BoardError::Storage(StorageError::Sql(e)) | BoardError::Storage(StorageError::Sqlite { source: e, .. })
        if e.kind() == db::ErrorKind::UniqueViolation && e.constraint() == Some("tasks_pkey"))
}

/// A random task id for a new task. SQLite: one no task has (looked up; eight draws). PostgreSQL:
/// drawn without a round trip to look; the insert's primary key refuses a taken id and
/// `Board::create_task` draws again (see [`is_taken_task_id`]).
fn draw_task_id(tx: &Tx<'_>) -> Result<String> {
    let draw = || format!("t_{}", random_hex(8));
    if !tx.is_sqlite() {
        return Ok(draw());
    }
    for _ in 0..8 {
        let candidate = draw();
        let taken = tx
            .prepare_cached("SELECT 1 FROM tasks WHERE id = ?1")?
            .query_row([&candidate], |_| Ok(()))
            .optional()?
            .is_some();
        if !taken {
            return Ok(candidate);
        }
    }
    Err(BoardError::CorruptRow {
        table: "tasks",
        message: "could not draw an unused task id".to_owned(),
    })
}

/// Creates a task (see [`Board::create_task`]).
pub(crate) fn create_task_in(tx: &Tx<'_>, new: &NewTask, now: i64) -> Result<Created> {
    let title = new.title.trim();
    if title.is_empty() {
        return Err(BoardError::BlankTitle);
    }
    if new.triage && new.blocked {
        return Err(BoardError::ConflictingInitialStatus);
    }
    if let Some(secs) = new.max_runtime_seconds {
        check_seconds("--max-runtime", secs)?;
    }
    let key = new
        .idempotency_key
        .as_deref()
        .map(str::trim)
        .filter(|k| !k.is_empty());
    if let Some(key) = key {
        let existing: Option<(String, String)> = tx
            .prepare_cached(
                "SELECT id, status FROM tasks WHERE idempotency_key = ?1 AND status != 'archived' \
                 ORDER BY created_at DESC, rowid DESC LIMIT 1",
            )?
            .query_row([key], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((id, status)) = existing {
            return Ok(Created {
                id,
                status: status.parse()?,
                existing: true,
            });
        }
    }
    let mut parents: Vec<String> = Vec::new();
    for p in &new.parents {
        let p = p.trim();
        if !parents.iter().any(|q| q == p) {
            parents.push(p.to_owned());
        }
    }
    let mut open_parent = None;
    let mut tenant = new.tenant.clone().filter(|t| !t.is_empty());
    for p in &parents {
        let parent: Option<(String, Option<String>)> = tx
            .prepare_cached("SELECT status, tenant FROM tasks WHERE id = ?1")?
            .query_row([p], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let Some((status, parent_tenant)) = parent else {
            return Err(BoardError::ParentNotFound { id: p.clone() });
        };
        if open_parent.is_none() && !status.parse::<Status>()?.is_finished() {
            open_parent = Some(p.clone());
        }
        if tenant.is_none() {
            tenant = parent_tenant.filter(|t| !t.is_empty());
        }
    }
    let status = if new.blocked {
        Status::Blocked
    } else if new.triage {
        Status::Triage
    } else if open_parent.is_some() {
        Status::Todo
    } else {
        Status::Ready
    };
    let assignee = normalize_assignee(new.assignee.as_deref());
    let skills = match &new.skills {
        Some(s) => Some(serde_json::to_string(s)?),
        None => None,
    };
    let id = draw_task_id(tx)?;
    exec_unchecked(
        tx,
        "INSERT INTO tasks (id, title, body, assignee, status, priority, created_by, created_at, \
         tenant, idempotency_key, max_runtime_seconds, max_retries, skills, branch_name, goal_mode, \
         goal_max_turns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        params![
            id,
            title,
            new.body,
            assignee,
            status.as_str(),
            new.priority,
            new.created_by,
            now,
            tenant,
            key,
            new.max_runtime_seconds,
            new.max_retries,
            skills,
            new.branch_name,
            new.goal_mode as i64,
            new.goal_max_turns
        ],
    )?;
    for p in &parents {
        exec_unchecked(
            tx,
            "INSERT INTO task_links (parent_id, child_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![p, id],
        )?;
    }
    let creator_task_id = new.created_by.clone().filter(|c| c.starts_with("t_"));
    append_event(
        tx,
        &id,
        None,
        &Event::Created {
            assignee,
            status,
            parents: parents.clone(),
            creator_task_id,
            tenant,
            workspace_kind: Some("scratch".to_owned()),
            workspace_path: None,
            branch_name: new.branch_name.clone(),
            project_id: None,
            skills: new.skills.clone(),
            goal_mode: new.goal_mode.then_some(true),
            model_override: None,
            provider_override: None,
            idempotency_key: key.map(str::to_owned),
        },
        now,
    )?;
    // An unfinished parent is said by the `created` event (`status: todo`, `parents`); the
    // original writes no `dependency_wait` here either.
    if status == Status::Blocked {
        append_event(
            tx,
            &id,
            None,
            &Event::Blocked {
                reason: Some("initial_status".to_owned()),
                kind: None,
                recurrences: None,
                source_status: None,
                status: Some(Status::Blocked),
                actor: new.created_by.clone(),
                requested_kind: None,
                rekind_reason: None,
            },
            now,
        )?;
    }
    Ok(Created {
        id,
        status,
        existing: false,
    })
}

/// The error a claim writes on a run of its task it finds still open (which only a damaged
/// board has: every transition that ends an attempt closes its run).
pub(crate) const RECLAIM_ON_CLAIM_NOTE: &str = "invariant recovery on re-claim";

/// The claim of either dispatchable lane: `source` is `ready` (implementer) or `review`
/// (reviewer; the `claimed` event then carries `source_status: review`, which every reclaim path
/// reads to send the task back to `review`).
pub(crate) fn claim_from_in(
    tx: &Tx<'_>,
    id: &str,
    source: Status,
    spec: &ClaimSpec,
    now: i64,
) -> Result<ClaimOutcome> {
    check_seconds("the claim TTL", spec.ttl_seconds)?;
    // PostgreSQL: the task's row is read and locked without waiting. A row another transaction
    // holds (another claim, a transition of the task in flight) is a lost claim, never waited
    // for; once held, nothing else changes the row before this transaction ends.
    let task = match tx.row_lock(RowLock::Skip) {
        None => load_task(tx, id)?,
        Some(skip) => {
            static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
            let sql =
                SQL.get_or_init(|| format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1{skip}"));
            match tx
                .prepare_cached(sql)?
                .query_row([id], Task::from_row)
                .optional()?
            {
                Some(task) => task,
                None => {
                    let exists = tx
                        .prepare_cached("SELECT 1 FROM tasks WHERE id = ?1")?
                        .query_row([id], |_| Ok(()))
                        .optional()?
                        .is_some();
                    if !exists {
                        return Err(BoardError::TaskNotFound { id: id.to_owned() });
                    }
                    return Ok(ClaimOutcome::Lost(Refusal::Raced {
                        task_id: id.to_owned(),
                    }));
                }
            }
        }
    };
    if task.status != source || task.claim_lock.is_some() {
        return Ok(ClaimOutcome::Lost(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: if source == Status::Review {
                "review and unclaimed"
            } else {
                "ready and unclaimed"
            },
        }));
    }
    let open = unfinished_parents(tx, id)?;
    if !open.is_empty() {
        if cas(
            tx,
            "UPDATE tasks SET status = 'todo' WHERE id = ?1 AND status = ?2 AND claim_lock IS NULL",
            params![id, source.as_str()],
        )? {
            let event = if source == Status::Review {
                Event::DependencyWait {
                    reason: "parent_reopened".to_owned(),
                    kind: None,
                    source_status: Some(Status::Review),
                    parent: open.first().cloned(),
                }
            } else {
                Event::ClaimRejected {
                    reason: "parents_not_done".to_owned(),
                    parents: open.clone(),
                }
            };
            append_event(tx, id, None, &event, now)?;
        }
        return Ok(ClaimOutcome::Lost(Refusal::ParentsNotDone {
            task_id: id.to_owned(),
            parents: open,
        }));
    }
    close_leaked_runs(tx, id, RECLAIM_ON_CLAIM_NOTE, now)?;
    let expires = now + spec.ttl_seconds;
    // The run row first, so one UPDATE of the task row both claims it and points it at the run
    // (each statement on `tasks` rewrites its page and the `idx_tasks_status` entry).
    let run_id = insert_returning_id(
        tx,
        "INSERT INTO task_runs (task_id, profile, status, claim_lock, claim_expires, \
         max_runtime_seconds, last_heartbeat_at, started_at) \
         VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?6) RETURNING id",
        params![
            id,
            task.assignee,
            spec.lock,
            expires,
            task.max_runtime_seconds,
            now
        ],
    )?;
    let won = cas(
        tx,
        "UPDATE tasks SET status = 'running', claim_lock = ?2, claim_expires = ?3, \
         started_at = COALESCE(started_at, ?4), last_heartbeat_at = ?4, worker_pid = NULL, \
         worker_started_at = NULL, current_run_id = ?5 \
         WHERE id = ?1 AND status = ?6 AND claim_lock IS NULL",
        params![id, spec.lock, expires, now, run_id, source.as_str()],
    )?;
    if !won {
        // Unreachable under the write lock (SQLite) or the row lock (PostgreSQL) after the
        // checks above; undo the run all the same.
        exec(tx, "DELETE FROM task_runs WHERE id = ?1", [run_id])?;
        return Ok(ClaimOutcome::Lost(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    append_event(
        tx,
        id,
        Some(run_id),
        &Event::Claimed {
            lock: spec.lock.clone(),
            expires,
            run_id,
            source_status: (source == Status::Review).then_some(Status::Review),
            dispatcher: spec.origin == ClaimOrigin::Dispatcher,
        },
        now,
    )?;
    Ok(ClaimOutcome::Claimed(Claimed {
        task_id: id.to_owned(),
        run_id,
        claim_lock: spec.lock.clone(),
        claim_expires: expires,
    }))
}

/// Checks `fence` against the task; `None` when it holds.
fn fence_refusal(task: &Task, fence: &Fence) -> Option<Refusal> {
    if let Some(run_id) = fence.run_id
        && task.current_run_id != Some(run_id)
    {
        return Some(Refusal::StaleRun {
            task_id: task.id.clone(),
            expected: run_id,
            current: task.current_run_id,
        });
    }
    if let Some(lock) = &fence.claim_lock
        && task.claim_lock.as_deref() != Some(lock)
    {
        return Some(Refusal::NotClaimHolder {
            task_id: task.id.clone(),
            expected: lock.clone(),
            current: task.claim_lock.clone(),
        });
    }
    None
}

/// Extends a running task's claim and stamps its heartbeat (see [`Board::heartbeat`]).
pub(crate) fn heartbeat_in(
    tx: &Tx<'_>,
    id: &str,
    fence: &Fence,
    note: Option<&str>,
    ttl_seconds: i64,
    now: i64,
) -> Result<Outcome<Heartbeated>> {
    check_seconds("the claim TTL", ttl_seconds)?;
    let task = load_task(tx, id)?;
    if task.status != Status::Running {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "running",
        }));
    }
    if let Some(refusal) = fence_refusal(&task, fence) {
        return Ok(Outcome::Refused(refusal));
    }
    let expires = now + ttl_seconds;
    let applied = cas(
        tx,
        "UPDATE tasks SET claim_expires = ?2, last_heartbeat_at = ?3 \
         WHERE id = ?1 AND status = 'running' AND claim_lock IS ?4 AND current_run_id IS ?5",
        params![id, expires, now, task.claim_lock, task.current_run_id],
    )?;
    if !applied {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    if let Some(run_id) = task.current_run_id {
        exec_unchecked(
            tx,
            "UPDATE task_runs SET claim_expires = ?2, last_heartbeat_at = ?3 \
             WHERE id = ?1 AND ended_at IS NULL",
            params![run_id, expires, now],
        )?;
    }
    let note = note.map(str::trim).filter(|n| !n.is_empty());
    append_event(
        tx,
        id,
        task.current_run_id,
        &Event::Heartbeat {
            note: note.map(str::to_owned),
        },
        now,
    )?;
    Ok(Outcome::Done(Heartbeated {
        task_id: id.to_owned(),
        run_id: task.current_run_id,
        claim_expires: expires,
    }))
}

/// What `complete` is told.
#[derive(Debug, Clone, Default)]
pub struct Completion {
    /// The run the caller owns; the task's current run must be this one.
    pub expected_run_id: Option<i64>,
    pub summary: Option<String>,
    pub result: Option<String>,
    /// Complete even while another live claim holds the task (operator).
    pub force: bool,
}

/// The error a completion writes on a run of its task still open besides its current one.
pub(crate) const COMPLETE_LEAKED_NOTE: &str = "invariant recovery on completion";

/// What a completion records as its run's summary: the summary given (trimmed, when not
/// empty), else the result.
pub(crate) fn completion_summary(completion: &Completion) -> Option<&str> {
    completion
        .summary
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .or(completion.result.as_deref())
}

/// Marks a task done (see [`Board::complete`]).
pub(crate) fn complete_in(
    tx: &Tx<'_>,
    id: &str,
    completion: &Completion,
    now: i64,
) -> Result<Outcome<Completed>> {
    let task = load_task(tx, id)?;
    if !matches!(
        task.status,
        Status::Running | Status::Ready | Status::Blocked | Status::Review
    ) {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "running, ready, blocked or review",
        }));
    }
    if let Some(run_id) = completion.expected_run_id
        && task.current_run_id != Some(run_id)
    {
        return Ok(Outcome::Refused(Refusal::StaleRun {
            task_id: id.to_owned(),
            expected: run_id,
            current: task.current_run_id,
        }));
    }
    if completion.expected_run_id.is_none()
        && !completion.force
        && task.status == Status::Running
        && let (Some(lock), Some(expires)) = (&task.claim_lock, task.claim_expires)
        && expires > now
    {
        return Ok(Outcome::Refused(Refusal::LiveClaim {
            task_id: id.to_owned(),
            claim_lock: lock.clone(),
            claim_expires: expires,
        }));
    }
    let open = unfinished_parents(tx, id)?;
    if !open.is_empty() {
        return Ok(Outcome::Refused(Refusal::ParentsNotDone {
            task_id: id.to_owned(),
            parents: open,
        }));
    }
    let result = completion.result.as_deref();
    let applied = cas(
        tx,
        "UPDATE tasks SET status = 'done', result = COALESCE(?2, result), completed_at = ?3, \
         claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, worker_started_at = NULL, \
         current_run_id = NULL, block_kind = NULL, block_recurrences = 0, \
         consecutive_failures = 0, last_failure_error = NULL \
         WHERE id = ?1 AND status = ?4 AND current_run_id IS ?5 AND claim_lock IS ?6",
        params![
            id,
            result,
            now,
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
    let run_summary = completion_summary(completion);
    let mut closed = None;
    if let Some(run_id) = task.current_run_id
        && close_run_in(tx, run_id, "done", "completed", run_summary, None, now)?
    {
        closed = Some(run_id);
    }
    close_leaked_runs(tx, id, COMPLETE_LEAKED_NOTE, now)?;
    if closed.is_none() && (run_summary.is_some() || task.status == Status::Review) {
        // Never claimed (or handed over from review): the hand-off still gets its attempt row.
        closed = Some(instant_run_in(
            tx,
            &task,
            "done",
            "completed",
            run_summary,
            now,
        )?);
    }
    // What the UPDATE above stored: `COALESCE(?2, result)`.
    let stored_result = result.or(task.result.as_deref());
    append_event(
        tx,
        id,
        closed,
        &Event::Completed {
            result_len: stored_result.map_or(0, str::len),
            summary: run_summary.map(summary_line),
            forced: completion.force.then_some(true),
        },
        now,
    )?;
    let promoted = promote_children_in(tx, id, now)?;
    Ok(Outcome::Done(Completed {
        task_id: id.to_owned(),
        run_id: closed,
        promoted,
    }))
}

/// Blocks a task (see [`Board::block`]).
pub(crate) fn block_in(
    tx: &Tx<'_>,
    id: &str,
    kind: Option<BlockKind>,
    reason: &str,
    expected_run_id: Option<i64>,
    now: i64,
) -> Result<Outcome<BlockedTask>> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(BoardError::BlankReason);
    }
    let task = load_task(tx, id)?;
    if !matches!(task.status, Status::Running | Status::Ready) {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "running or ready",
        }));
    }
    if let Some(run_id) = expected_run_id
        && task.current_run_id != Some(run_id)
    {
        return Ok(Outcome::Refused(Refusal::StaleRun {
            task_id: id.to_owned(),
            expected: run_id,
            current: task.current_run_id,
        }));
    }
    // A reviewer's block resumes in review, an implementer's in ready.
    let source_status = if task.status == Status::Running {
        retry_status_for_run(tx, id, task.current_run_id)?
    } else {
        Status::Ready
    };
    let mut kind = kind;
    let mut requested_kind = None;
    if kind == Some(BlockKind::Dependency) && unfinished_parents(tx, id)?.is_empty() {
        // Nothing to wait for: a dependency block without an open parent would never resume.
        requested_kind = kind;
        kind = Some(BlockKind::NeedsInput);
    }
    let (status, recurrences, event) = if kind == Some(BlockKind::Dependency) {
        (
            Status::Todo,
            task.block_recurrences,
            Event::DependencyWait {
                reason: reason.to_owned(),
                kind,
                source_status: Some(source_status),
                parent: None,
            },
        )
    } else {
        let recurrences = if task.block_kind == kind {
            task.block_recurrences + 1
        } else {
            1
        };
        if recurrences >= BLOCK_RECURRENCE_LIMIT {
            (
                Status::Triage,
                recurrences,
                Event::BlockLoopDetected {
                    reason: reason.to_owned(),
                    kind,
                    recurrences,
                    source_status: Some(source_status),
                    limit: BLOCK_RECURRENCE_LIMIT,
                },
            )
        } else {
            (
                Status::Blocked,
                recurrences,
                Event::Blocked {
                    reason: Some(reason.to_owned()),
                    kind,
                    recurrences: Some(recurrences),
                    source_status: Some(source_status),
                    status: None,
                    actor: None,
                    requested_kind,
                    rekind_reason: requested_kind.map(|_| "no_open_parent".to_owned()),
                },
            )
        }
    };
    let applied = cas(
        tx,
        "UPDATE tasks SET status = ?2, block_kind = ?3, block_recurrences = ?4, \
         claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, worker_started_at = NULL, \
         current_run_id = NULL \
         WHERE id = ?1 AND status = ?5 AND current_run_id IS ?6 AND claim_lock IS ?7",
        params![
            id,
            status.as_str(),
            kind.map(BlockKind::as_str),
            recurrences,
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
    let mut closed = None;
    if let Some(run_id) = task.current_run_id
        && close_run_in(tx, run_id, "blocked", "blocked", Some(reason), None, now)?
    {
        closed = Some(run_id);
    }
    close_leaked_runs(tx, id, "invariant recovery on block", now)?;
    if closed.is_none() {
        // A block of a task nobody claimed still records the reason as an attempt.
        closed = Some(instant_run_in(
            tx,
            &task,
            "blocked",
            "blocked",
            Some(reason),
            now,
        )?);
    }
    append_event(tx, id, closed, &event, now)?;
    Ok(Outcome::Done(BlockedTask {
        task_id: id.to_owned(),
        status,
        kind,
        recurrences,
        run_id: closed,
    }))
}

/// `blocked` → `ready` (or `todo` while a parent is unfinished); resets the failure counter but
/// keeps `block_kind`/`block_recurrences` (only completion resets them).
pub(crate) fn unblock_in(tx: &Tx<'_>, id: &str, now: i64) -> Result<Outcome<Moved>> {
    let task = load_task(tx, id)?;
    if !matches!(task.status, Status::Blocked | Status::Scheduled) {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "blocked or scheduled",
        }));
    }
    let mut to = landing_status(tx, id)?;
    let resume = resume_status(tx, id)?;
    if to == Status::Ready && resume == Status::Review {
        to = Status::Review;
    }
    let applied = cas(
        tx,
        "UPDATE tasks SET status = ?2, consecutive_failures = 0, last_failure_error = NULL, \
         claim_lock = NULL, claim_expires = NULL, current_run_id = NULL WHERE id = ?1 AND status = ?3",
        params![id, to.as_str(), task.status.as_str()],
    )?;
    if !applied {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    close_leaked_runs(tx, id, "invariant recovery on unblock", now)?;
    let event = if to == Status::Ready {
        Event::Unblocked {
            status: None,
            resume_status: None,
        }
    } else {
        Event::Unblocked {
            status: Some(to),
            resume_status: Some(resume),
        }
    };
    append_event(tx, id, None, &event, now)?;
    Ok(Outcome::Done(Moved {
        task_id: id.to_owned(),
        from: task.status,
        to,
    }))
}

/// Operator promotion: `triage`/`todo`/`blocked` → `ready`, refused while a parent is unfinished.
/// Resets the failure counter (a deliberate operator action).
pub(crate) fn promote_in(
    tx: &Tx<'_>,
    id: &str,
    actor: Option<&str>,
    reason: Option<&str>,
    now: i64,
) -> Result<Outcome<Moved>> {
    let task = load_task(tx, id)?;
    if !matches!(task.status, Status::Triage | Status::Todo | Status::Blocked) {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "triage, todo or blocked",
        }));
    }
    let open = unfinished_parents(tx, id)?;
    if !open.is_empty() {
        return Ok(Outcome::Refused(Refusal::ParentsNotDone {
            task_id: id.to_owned(),
            parents: open,
        }));
    }
    let applied = cas(
        tx,
        "UPDATE tasks SET status = 'ready', consecutive_failures = 0, last_failure_error = NULL, \
         claim_lock = NULL, claim_expires = NULL, current_run_id = NULL WHERE id = ?1 AND status = ?2",
        params![id, task.status.as_str()],
    )?;
    if !applied {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    close_leaked_runs(tx, id, "invariant recovery on promote", now)?;
    append_event(
        tx,
        id,
        None,
        &Event::PromotedManual {
            actor: actor.map(str::to_owned),
            reason: reason.map(str::to_owned),
            from: task.status,
        },
        now,
    )?;
    Ok(Outcome::Done(Moved {
        task_id: id.to_owned(),
        from: task.status,
        to: Status::Ready,
    }))
}

/// Archives a task from any status; closes an open run as reclaimed and promotes children that
/// only waited on it. The worker of a running task is *not* signalled (see [`ArchivedTask`]).
pub(crate) fn archive_in(tx: &Tx<'_>, id: &str, now: i64) -> Result<Outcome<ArchivedTask>> {
    let task = load_task(tx, id)?;
    if task.status == Status::Archived {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "not archived",
        }));
    }
    let applied = cas(
        tx,
        "UPDATE tasks SET status = 'archived', claim_lock = NULL, claim_expires = NULL, \
         worker_pid = NULL, worker_started_at = NULL, current_run_id = NULL \
         WHERE id = ?1 AND status = ?2 AND current_run_id IS ?3",
        params![id, task.status.as_str(), task.current_run_id],
    )?;
    if !applied {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    let mut closed = None;
    if let Some(run_id) = task.current_run_id
        && close_run_in(
            tx,
            run_id,
            "reclaimed",
            "reclaimed",
            None,
            Some("task archived with run still active"),
            now,
        )?
    {
        closed = Some(run_id);
    }
    close_leaked_runs(tx, id, "task archived with run still active", now)?;
    append_event(
        tx,
        id,
        closed,
        &Event::Archived {
            prev_status: Some(task.status),
            worker_pid: task.worker_pid,
        },
        now,
    )?;
    let promoted = promote_children_in(tx, id, now)?;
    Ok(Outcome::Done(ArchivedTask {
        task_id: id.to_owned(),
        prev_status: task.status,
        worker_pid: task.worker_pid,
        claim_lock: task.claim_lock,
        run_id: closed,
        promoted,
    }))
}

/// Hands a running or ready task to review: `review`, claim cleared, assignee ← `reviewer` when
/// one is named (the review lane then dispatches that profile). Closes the implementer's run with
/// outcome `review_requested` (or records a zero-length one when nobody had claimed the task).
/// Fenced like `complete`: a caller that passes no run id is refused while a live claim holds
/// the task. Event `review_requested` {summary, implementer, reviewer}.
pub(crate) fn request_review_in(
    tx: &Tx<'_>,
    id: &str,
    expected_run_id: Option<i64>,
    reviewer: Option<&str>,
    summary: Option<&str>,
    now: i64,
) -> Result<Outcome<ReviewRequested>> {
    if reviewer.is_some_and(|r| r.trim().is_empty()) {
        return Err(BoardError::BlankAssignee);
    }
    let task = load_task(tx, id)?;
    if !matches!(task.status, Status::Running | Status::Ready) {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "running or ready",
        }));
    }
    if let Some(refusal) = run_fence_refusal(&task, expected_run_id, now) {
        return Ok(Outcome::Refused(refusal));
    }
    let reviewer = normalize_assignee(reviewer).or_else(|| task.assignee.clone());
    let summary = summary.map(str::trim).filter(|s| !s.is_empty());
    if !cas(
        tx,
        "UPDATE tasks SET status = 'review', assignee = ?2, claim_lock = NULL, \
         claim_expires = NULL, worker_pid = NULL, worker_started_at = NULL, current_run_id = NULL \
         WHERE id = ?1 AND status = ?3 AND current_run_id IS ?4 AND claim_lock IS ?5",
        params![
            id,
            reviewer,
            task.status.as_str(),
            task.current_run_id,
            task.claim_lock
        ],
    )? {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    let mut closed = None;
    if let Some(run_id) = task.current_run_id
        && close_run_in(tx, run_id, "review", "review_requested", summary, None, now)?
    {
        closed = Some(run_id);
    }
    close_leaked_runs(tx, id, "invariant recovery on review request", now)?;
    if closed.is_none() {
        closed = Some(instant_run_in(
            tx,
            &task,
            "review",
            "review_requested",
            summary,
            now,
        )?);
    }
    append_event(
        tx,
        id,
        closed,
        &Event::ReviewRequested {
            summary: summary.map(summary_line),
            implementer: task.assignee.clone(),
            reviewer: reviewer.clone(),
        },
        now,
    )?;
    Ok(Outcome::Done(ReviewRequested {
        task_id: id.to_owned(),
        run_id: closed,
        implementer: task.assignee,
        reviewer,
    }))
}

/// The implementer named by the task's newest `review_requested` event.
fn implementer_of(tx: &Tx<'_>, id: &str) -> Result<Option<Option<String>>> {
    let payload: Option<Option<String>> = tx
        .prepare_cached(
            "SELECT payload FROM task_events WHERE task_id = ?1 AND kind = 'review_requested' \
             ORDER BY id DESC LIMIT 1",
        )?
        .query_row([id], |r| r.get(0))
        .optional()?;
    Ok(payload.map(|p| {
        p.and_then(|p| serde_json::from_str::<serde_json::Value>(&p).ok())
            .and_then(|v| v.get("implementer")?.as_str().map(str::to_owned))
    }))
}

/// A reviewer asks for changes: its run (claimed from `review`) closes with outcome
/// `changes_requested`, the task goes back to `ready` (`todo` while a parent is unfinished) with
/// the implementer as assignee again; the failure counter is kept. Event `changes_requested`
/// {reason, implementer, reviewer, status}.
pub(crate) fn request_changes_in(
    tx: &Tx<'_>,
    id: &str,
    expected_run_id: Option<i64>,
    reason: &str,
    now: i64,
) -> Result<Outcome<BackFromReview>> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(BoardError::BlankReason);
    }
    let task = load_task(tx, id)?;
    let reviewer_run = task.status == Status::Running
        && retry_status_for_run(tx, id, task.current_run_id)? == Status::Review;
    if !reviewer_run {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "running a reviewer's run (claimed from review)",
        }));
    }
    if let Some(refusal) = run_fence_refusal(&task, expected_run_id, now) {
        return Ok(Outcome::Refused(refusal));
    }
    let to = landing_status(tx, id)?;
    let implementer = implementer_of(tx, id)?.unwrap_or_else(|| task.assignee.clone());
    if !cas(
        tx,
        "UPDATE tasks SET status = ?2, assignee = ?3, claim_lock = NULL, claim_expires = NULL, \
         worker_pid = NULL, worker_started_at = NULL, current_run_id = NULL \
         WHERE id = ?1 AND status = 'running' AND current_run_id IS ?4 AND claim_lock IS ?5",
        params![
            id,
            to.as_str(),
            implementer,
            task.current_run_id,
            task.claim_lock
        ],
    )? {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    let mut closed = None;
    if let Some(run_id) = task.current_run_id
        && close_run_in(
            tx,
            run_id,
            to.as_str(),
            "changes_requested",
            Some(reason),
            None,
            now,
        )?
    {
        closed = Some(run_id);
    }
    close_leaked_runs(tx, id, "invariant recovery on changes requested", now)?;
    append_event(
        tx,
        id,
        closed,
        &Event::ChangesRequested {
            reason: reason.to_owned(),
            implementer: implementer.clone(),
            reviewer: task.assignee.clone(),
            status: to,
        },
        now,
    )?;
    Ok(Outcome::Done(BackFromReview {
        task_id: id.to_owned(),
        status: to,
        assignee: implementer,
        run_id: closed,
    }))
}

/// An operator takes an unclaimed `review` task back to its implementer: `ready` (`todo` while a
/// parent is unfinished), assignee ← the implementer, failures kept. Event `review_reopened`.
pub(crate) fn review_reopen_in(tx: &Tx<'_>, id: &str, now: i64) -> Result<Outcome<BackFromReview>> {
    let task = load_task(tx, id)?;
    if task.status != Status::Review || task.claim_lock.is_some() {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "review and unclaimed",
        }));
    }
    let to = landing_status(tx, id)?;
    let implementer = implementer_of(tx, id)?.unwrap_or_else(|| task.assignee.clone());
    if !cas(
        tx,
        "UPDATE tasks SET status = ?2, assignee = ?3, current_run_id = NULL \
         WHERE id = ?1 AND status = 'review' AND claim_lock IS NULL",
        params![id, to.as_str(), implementer],
    )? {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    close_leaked_runs(tx, id, "invariant recovery on review reopen", now)?;
    append_event(
        tx,
        id,
        None,
        &Event::ReviewReopened {
            status: Some(to),
            implementer: implementer.clone(),
        },
        now,
    )?;
    Ok(Outcome::Done(BackFromReview {
        task_id: id.to_owned(),
        status: to,
        assignee: implementer,
        run_id: None,
    }))
}

/// The run fence of a worker's lifecycle call: its run must be the current one; without a run id
/// (an operator), a running task under an unexpired claim is refused (its worker is alive).
fn run_fence_refusal(task: &Task, expected_run_id: Option<i64>, now: i64) -> Option<Refusal> {
    if let Some(run_id) = expected_run_id {
        return (task.current_run_id != Some(run_id)).then(|| Refusal::StaleRun {
            task_id: task.id.clone(),
            expected: run_id,
            current: task.current_run_id,
        });
    }
    match (&task.claim_lock, task.claim_expires) {
        (Some(lock), Some(expires)) if task.status == Status::Running && expires > now => {
            Some(Refusal::LiveClaim {
                task_id: task.id.clone(),
                claim_lock: lock.clone(),
                claim_expires: expires,
            })
        }
        _ => None,
    }
}

/// Reopens a `done` task: it goes back to `ready` (`todo` while a parent is unfinished) and every
/// descendant whose work rested on it — in `ready`, `review`, `running` or `done` — goes back to
/// `todo` with its claim cleared, a fresh failure budget, and (when running) its run closed as
/// reclaimed. Events: `status` {reason `reopened`} on the task; `descendant_invalidated` and
/// `status` {reason `ancestor_reopened`} plus a comment on each descendant. No process is
/// signalled: a worker whose run closed is terminated by the dispatcher.
pub(crate) fn reopen_in(
    tx: &Tx<'_>,
    id: &str,
    reason: Option<&str>,
    now: i64,
) -> Result<Outcome<Reopened>> {
    let task = load_task(tx, id)?;
    if task.status != Status::Done {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "done",
        }));
    }
    let to = landing_status(tx, id)?;
    if !cas(
        tx,
        "UPDATE tasks SET status = ?2, completed_at = NULL WHERE id = ?1 AND status = 'done' \
         AND current_run_id IS NULL",
        params![id, to.as_str()],
    )? {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    close_leaked_runs(tx, id, "invariant recovery on reopen", now)?;
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    append_event(
        tx,
        id,
        None,
        &Event::Status {
            status: to,
            reason: reason.map_or_else(|| "reopened".to_owned(), |r| format!("reopened: {r}")),
            parent: None,
            previous_status: Some(Status::Done),
            resume_status: None,
        },
        now,
    )?;
    // Locked on PostgreSQL (a descendant a claim holds is read as the claim leaves it: see
    // `load_task`).
    let descendants: Vec<Task> = {
        let mut stmt = tx.prepare_cached(&format!(
            "WITH RECURSIVE d(id) AS ( \
               SELECT child_id FROM task_links WHERE parent_id = ?1 \
               UNION SELECT l.child_id FROM task_links l JOIN d ON l.parent_id = d.id) \
             SELECT {TASK_COLUMNS} FROM tasks WHERE id IN (SELECT id FROM d) \
               AND status IN ('ready', 'review', 'running', 'done') AND id != ?1 \
             ORDER BY rowid{}",
            tx.row_lock(RowLock::Wait).unwrap_or("")
        ))?;
        let rows = stmt.query_map([id], Task::from_row)?;
        rows.collect::<db::Result<_>>()?
    };
    let mut invalidated = Vec::with_capacity(descendants.len());
    for child in descendants {
        if !cas(
            tx,
            "UPDATE tasks SET status = 'todo', completed_at = NULL, claim_lock = NULL, \
             claim_expires = NULL, worker_pid = NULL, worker_started_at = NULL, \
             last_heartbeat_at = NULL, current_run_id = NULL, consecutive_failures = 0 \
             WHERE id = ?1 AND status = ?2 AND current_run_id IS ?3",
            params![child.id, child.status.as_str(), child.current_run_id],
        )? {
            return Err(BoardError::CorruptRow {
                table: "tasks",
                message: format!("task `{}` changed inside a write transaction", child.id),
            });
        }
        let mut closed = None;
        if let Some(run_id) = child.current_run_id
            && close_run_in(
                tx,
                run_id,
                "todo",
                "reclaimed",
                None,
                Some(&format!("ancestor {id} reopened")),
                now,
            )?
        {
            closed = Some(run_id);
        }
        close_leaked_runs(tx, &child.id, &format!("ancestor {id} reopened"), now)?;
        append_event(
            tx,
            &child.id,
            closed,
            &Event::DescendantInvalidated {
                ancestor: id.to_owned(),
                prior_status: child.status,
                new_status: Status::Todo,
                resume_status: Some(Status::Ready),
            },
            now,
        )?;
        append_event(
            tx,
            &child.id,
            closed,
            &Event::Status {
                status: Status::Todo,
                reason: "ancestor_reopened".to_owned(),
                parent: Some(id.to_owned()),
                previous_status: Some(child.status),
                resume_status: Some(Status::Ready),
            },
            now,
        )?;
        comment_in(
            tx,
            &child.id,
            "kanban",
            &format!(
                "Ancestor {id} was reopened, so this task (was {}) waits again; its earlier \
                 result may no longer hold.",
                child.status
            ),
            now,
        )?;
        invalidated.push(Invalidated {
            task_id: child.id,
            prior_status: child.status,
            worker_pid: child.worker_pid,
            claim_lock: child.claim_lock,
            run_id: closed,
        });
    }
    Ok(Outcome::Done(Reopened {
        task_id: id.to_owned(),
        status: to,
        invalidated,
    }))
}

/// Operator reclaim: a running (or still claimed) task goes back to `ready` with a fresh failure
/// budget; its run is closed as reclaimed. The worker is *not* signalled (see [`ReclaimedTask`]).
pub(crate) fn reclaim_in(
    tx: &Tx<'_>,
    id: &str,
    reason: Option<&str>,
    now: i64,
) -> Result<Outcome<ReclaimedTask>> {
    let task = load_task(tx, id)?;
    let claimed = task.status == Status::Running || task.claim_lock.is_some();
    if !claimed
        || !matches!(
            task.status,
            Status::Running | Status::Ready | Status::Blocked
        )
    {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "running or claimed",
        }));
    }
    let retry_status = if task.status == Status::Blocked {
        Status::Blocked
    } else {
        retry_status_for_run(tx, id, task.current_run_id)?
    };
    let applied = cas(
        tx,
        "UPDATE tasks SET status = ?2, claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, \
         worker_started_at = NULL, current_run_id = NULL, consecutive_failures = 0, \
         last_failure_error = NULL \
         WHERE id = ?1 AND status = ?3 AND claim_lock IS ?4 AND current_run_id IS ?5",
        params![
            id,
            retry_status.as_str(),
            task.status.as_str(),
            task.claim_lock,
            task.current_run_id
        ],
    )?;
    if !applied {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    let error = format!("manual_reclaim: {}", reason.unwrap_or("operator"));
    let mut closed = None;
    if let Some(run_id) = task.current_run_id
        && close_run_in(
            tx,
            run_id,
            "reclaimed",
            "reclaimed",
            None,
            Some(&error),
            now,
        )?
    {
        closed = Some(run_id);
    }
    close_leaked_runs(tx, id, &error, now)?;
    append_event(
        tx,
        id,
        closed,
        &Event::Reclaimed {
            manual: Some(true),
            reason: reason.map(str::to_owned),
            prev_lock: task.claim_lock.clone(),
            stale_lock: None,
            worker_pid: task.worker_pid,
            claim_expires: task.claim_expires,
            last_heartbeat_at: task.last_heartbeat_at,
            now: Some(now),
            heartbeat_stale: None,
            retry_status,
            termination: None,
        },
        now,
    )?;
    Ok(Outcome::Done(ReclaimedTask {
        task_id: id.to_owned(),
        prev_lock: task.claim_lock,
        worker_pid: task.worker_pid,
        run_id: closed,
        retry_status,
    }))
}

/// Sets (or with `None` clears) the assignee; refused while a claim holds the task. Assigning a
/// different profile resets the failure counter and forgets the last failure's error (the new
/// profile starts with a clean slate, so no respawn guard reads the old profile's error).
pub(crate) fn assign_in(
    tx: &Tx<'_>,
    id: &str,
    assignee: Option<&str>,
    now: i64,
) -> Result<Outcome<AssignedTask>> {
    if assignee.is_some_and(|a| a.trim().is_empty()) {
        return Err(BoardError::BlankAssignee);
    }
    let to = normalize_assignee(assignee);
    let task = load_task(tx, id)?;
    if task.status == Status::Running || task.claim_lock.is_some() {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "not running (reclaim it first)",
        }));
    }
    let changed = task.assignee != to;
    let applied = cas(
        tx,
        "UPDATE tasks SET assignee = ?2, \
         consecutive_failures = CASE WHEN ?3 <> 0 THEN 0 ELSE consecutive_failures END, \
         last_failure_error = CASE WHEN ?3 <> 0 THEN NULL ELSE last_failure_error END \
         WHERE id = ?1 AND status = ?4 AND claim_lock IS NULL AND assignee IS ?5",
        params![id, to, changed, task.status.as_str(), task.assignee],
    )?;
    if !applied {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    append_event(
        tx,
        id,
        None,
        &Event::Assigned {
            assignee: to.clone(),
            from: task.assignee.clone(),
            source: None,
        },
        now,
    )?;
    Ok(Outcome::Done(AssignedTask {
        task_id: id.to_owned(),
        from: task.assignee,
        to,
    }))
}

/// Adds a comment; returns its id.
pub(crate) fn comment_in(tx: &Tx<'_>, id: &str, author: &str, body: &str, now: i64) -> Result<i64> {
    if body.trim().is_empty() {
        return Err(BoardError::BlankComment);
    }
    let task = load_task(tx, id)?;
    let author = if author.trim().is_empty() {
        "operator"
    } else {
        author.trim()
    };
    let comment_id = insert_returning_id(
        tx,
        "INSERT INTO task_comments (task_id, author, body, created_at) VALUES (?1, ?2, ?3, ?4) \
         RETURNING id",
        params![id, author, body, now],
    )?;
    append_event(
        tx,
        id,
        task.current_run_id,
        &Event::Commented {
            author: author.to_owned(),
            len: body.len(),
        },
        now,
    )?;
    Ok(comment_id)
}

/// True when `ancestor` is `id` or one of its (transitive) parents.
fn depends_on(conn: &Db, id: &str, ancestor: &str) -> Result<bool> {
    Ok(conn
        .query_row(
            "WITH RECURSIVE anc(id) AS ( \
               SELECT ?1 UNION SELECT l.parent_id FROM task_links l JOIN anc ON l.child_id = anc.id) \
             SELECT 1 FROM anc WHERE id = ?2 LIMIT 1",
            params![id, ancestor],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Makes `child` depend on `parent`. Self-links and cycles are errors; a running child is
/// refused; a ready child of an unfinished parent goes back to `todo`.
pub(crate) fn link_in(
    tx: &Tx<'_>,
    parent: &str,
    child: &str,
    now: i64,
) -> Result<Outcome<LinkChange>> {
    if parent == child {
        return Err(BoardError::SelfLink {
            id: parent.to_owned(),
        });
    }
    let parent_task = load_task(tx, parent)?;
    let child_task = load_task(tx, child)?;
    let exists = tx
        .query_row(
            "SELECT 1 FROM task_links WHERE parent_id = ?1 AND child_id = ?2",
            params![parent, child],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if exists {
        return Ok(Outcome::Done(LinkChange {
            parent: parent.to_owned(),
            child: child.to_owned(),
            changed: false,
            child_status: child_task.status,
        }));
    }
    if depends_on(tx, parent, child)? {
        return Err(BoardError::Cycle {
            parent: parent.to_owned(),
            child: child.to_owned(),
        });
    }
    if child_task.status == Status::Running {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: child.to_owned(),
            status: child_task.status,
            expected: "not running (a running task cannot gain a parent)",
        }));
    }
    exec(
        tx,
        "INSERT INTO task_links (parent_id, child_id) VALUES (?1, ?2)",
        params![parent, child],
    )?;
    let mut child_status = child_task.status;
    if child_task.status == Status::Ready && !parent_task.status.is_finished() {
        if !cas(
            tx,
            "UPDATE tasks SET status = 'todo' WHERE id = ?1 AND status = 'ready'",
            [child],
        )? {
            return Err(BoardError::CorruptRow {
                table: "tasks",
                message: format!("task `{child}` changed inside a write transaction"),
            });
        }
        child_status = Status::Todo;
        append_event(
            tx,
            child,
            None,
            &Event::DependencyWait {
                reason: "parent_not_done".to_owned(),
                kind: None,
                source_status: Some(Status::Ready),
                parent: Some(parent.to_owned()),
            },
            now,
        )?;
    }
    append_event(
        tx,
        child,
        None,
        &Event::Linked {
            parent: parent.to_owned(),
            child: child.to_owned(),
        },
        now,
    )?;
    Ok(Outcome::Done(LinkChange {
        parent: parent.to_owned(),
        child: child.to_owned(),
        changed: true,
        child_status,
    }))
}

/// Removes the dependency of `child` on `parent`; a `todo` child whose remaining parents are all
/// finished becomes ready.
pub(crate) fn unlink_in(
    tx: &Tx<'_>,
    parent: &str,
    child: &str,
    now: i64,
) -> Result<Outcome<LinkChange>> {
    load_task(tx, parent)?;
    load_task(tx, child)?;
    let removed = exec(
        tx,
        "DELETE FROM task_links WHERE parent_id = ?1 AND child_id = ?2",
        params![parent, child],
    )?;
    if removed != 1 {
        return Ok(Outcome::Refused(Refusal::NotLinked {
            parent: parent.to_owned(),
            child: child.to_owned(),
        }));
    }
    append_event(
        tx,
        child,
        None,
        &Event::Unlinked {
            parent: parent.to_owned(),
            child: child.to_owned(),
        },
        now,
    )?;
    promote_if_ready_in(tx, child, now)?;
    let child_status = load_task(tx, child)?.status;
    Ok(Outcome::Done(LinkChange {
        parent: parent.to_owned(),
        child: child.to_owned(),
        changed: true,
        child_status,
    }))
}

/// Promotes every `todo` task whose parents are all finished; returns their ids.
pub(crate) fn recompute_ready_in(tx: &Tx<'_>, now: i64) -> Result<Vec<String>> {
    let candidates: Vec<String> = {
        let mut stmt = tx.prepare_cached(
            "SELECT t.id FROM tasks t WHERE t.status = 'todo' AND NOT EXISTS ( \
               SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id \
               WHERE l.child_id = t.id AND p.status NOT IN ('done', 'archived')) \
             ORDER BY t.priority DESC, t.created_at ASC, t.rowid",
        )?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<db::Result<_>>()?
    };
    let mut promoted = Vec::with_capacity(candidates.len());
    for id in candidates {
        if promote_todo_in(tx, &id, now)? {
            promoted.push(id);
        }
    }
    Ok(promoted)
}

impl Board {
    /// Creates a task: `blocked` / `triage` when asked, else `todo` while a parent is unfinished,
    /// else `ready`. An idempotency key that matches a non-archived task returns that task
    /// (`existing: true`) and creates nothing.
    pub fn create_task(&self, new: &NewTask, now: i64) -> Result<Created> {
        self.retry_taken_id(|| self.write(|tx| create_task_in(tx, new, now)))
    }

    /// Runs `create` again (with a fresh random id) while it fails only because the id it drew
    /// is taken: on PostgreSQL a create does not look first (see `create_task_in`), the
    /// insert's primary key refuses the duplicate and nothing is written. Eight draws, as the
    /// SQLite lookup makes.
    pub(crate) fn retry_taken_id<T>(&self, mut create: impl FnMut() -> Result<T>) -> Result<T> {
        let mut draws = 1;
        loop {
            match create() {
                Err(e) if draws < 8 && is_taken_task_id(&e) => draws += 1,
                other => return other,
            }
        }
    }

    /// Creates each of `tasks` in turn, as [`Board::create_task`] does, inside **one** transaction
    /// (one commit for the lot): all are created or, on the first error, none.
    pub fn create_tasks(&self, tasks: &[NewTask], now: i64) -> Result<Vec<Created>> {
        self.retry_taken_id(|| {
            self.write(|tx| {
                tasks
                    .iter()
                    .map(|new| create_task_in(tx, new, now))
                    .collect()
            })
        })
    }

    /// Completes each of `ids` in turn, as [`Board::complete`] does, inside one transaction; a
    /// task that cannot be completed is its own refused outcome, an error undoes them all.
    pub fn complete_many(
        &self,
        ids: &[String],
        completion: &Completion,
        now: i64,
    ) -> Result<Vec<Outcome<Completed>>> {
        self.write(|tx| {
            ids.iter()
                .map(|id| complete_in(tx, id, completion, now))
                .collect()
        })
    }

    /// Claims a ready task: parent gate (demotes to `todo` when a parent reopened), CAS
    /// `ready → running`, a new run, `current_run_id`, a fresh heartbeat, event `claimed`.
    pub fn claim(&self, id: &str, spec: &ClaimSpec, now: i64) -> Result<ClaimOutcome> {
        self.claim_from(id, Status::Ready, spec, now)
    }

    /// [`Board::claim`] or [`Board::claim_review`]: on PostgreSQL first in one round trip
    /// (`pg_fast`), then, when that claimed nothing, the generic claim, which says why.
    fn claim_from(
        &self,
        id: &str,
        source: Status,
        spec: &ClaimSpec,
        now: i64,
    ) -> Result<ClaimOutcome> {
        check_seconds("the claim TTL", spec.ttl_seconds)?;
        if self.is_postgres()
            && let Some(claimed) = self.write_row_locked(|tx| {
                super::engine::postgres::fast::claim(tx, id, source, spec, now, true)
            })?
        {
            return Ok(ClaimOutcome::Claimed(claimed));
        }
        self.write_row_locked(|tx| claim_from_in(tx, id, source, spec, now))
    }

    /// Extends the claim to `now + ttl_seconds` and stamps `last_heartbeat_at` on the task and its
    /// run, fenced on `fence`; event `heartbeat`.
    pub fn heartbeat(
        &self,
        id: &str,
        fence: &Fence,
        note: Option<&str>,
        ttl_seconds: i64,
        now: i64,
    ) -> Result<Outcome<Heartbeated>> {
        check_seconds("the claim TTL", ttl_seconds)?;
        // PostgreSQL: the one statement takes no board lock, only its task's and run's rows
        // (docs/postgres.md, "Heartbeats"); a refusal is said by the generic heartbeat.
        if self.is_postgres()
            && let Some(done) = self.write_row_locked(|tx| {
                super::engine::postgres::fast::heartbeat(
                    tx,
                    id,
                    fence,
                    note,
                    ttl_seconds,
                    now,
                    true,
                )
            })?
        {
            return Ok(Outcome::Done(done));
        }
        self.write(|tx| heartbeat_in(tx, id, fence, note, ttl_seconds, now))
    }

    /// Marks a task done; closes its run (`completed`) and promotes children now free to run.
    pub fn complete(
        &self,
        id: &str,
        completion: &Completion,
        now: i64,
    ) -> Result<Outcome<Completed>> {
        if self.is_postgres()
            && let Some(done) = self.write(|tx| {
                super::engine::postgres::fast::complete(tx, id, completion, now, true)
            })?
        {
            return Ok(Outcome::Done(done));
        }
        self.write(|tx| complete_in(tx, id, completion, now))
    }

    /// Blocks a running or ready task: `dependency` → `todo`; the same kind twice in a row →
    /// `triage` (`block_loop_detected`); otherwise `blocked`. Closes the run (`blocked`).
    pub fn block(
        &self,
        id: &str,
        kind: Option<BlockKind>,
        reason: &str,
        expected_run_id: Option<i64>,
        now: i64,
    ) -> Result<Outcome<BlockedTask>> {
        self.write(|tx| block_in(tx, id, kind, reason, expected_run_id, now))
    }

    /// See [`unblock_in`].
    pub fn unblock(&self, id: &str, now: i64) -> Result<Outcome<Moved>> {
        self.write(|tx| unblock_in(tx, id, now))
    }

    /// See [`promote_in`].
    pub fn promote(
        &self,
        id: &str,
        actor: Option<&str>,
        reason: Option<&str>,
        now: i64,
    ) -> Result<Outcome<Moved>> {
        self.write(|tx| promote_in(tx, id, actor, reason, now))
    }

    /// See [`archive_in`].
    pub fn archive(&self, id: &str, now: i64) -> Result<Outcome<ArchivedTask>> {
        self.write(|tx| archive_in(tx, id, now))
    }

    /// Claims a `review` task for its reviewer (the review lane): like [`Board::claim`], from
    /// `review`; the `claimed` event says `source_status: review`.
    pub fn claim_review(&self, id: &str, spec: &ClaimSpec, now: i64) -> Result<ClaimOutcome> {
        self.claim_from(id, Status::Review, spec, now)
    }

    /// See [`request_review_in`].
    pub fn request_review(
        &self,
        id: &str,
        expected_run_id: Option<i64>,
        reviewer: Option<&str>,
        summary: Option<&str>,
        now: i64,
    ) -> Result<Outcome<ReviewRequested>> {
        self.write(|tx| request_review_in(tx, id, expected_run_id, reviewer, summary, now))
    }

    /// See [`request_changes_in`].
    pub fn request_changes(
        &self,
        id: &str,
        expected_run_id: Option<i64>,
        reason: &str,
        now: i64,
    ) -> Result<Outcome<BackFromReview>> {
        self.write(|tx| request_changes_in(tx, id, expected_run_id, reason, now))
    }

    /// See [`review_reopen_in`].
    pub fn review_reopen(&self, id: &str, now: i64) -> Result<Outcome<BackFromReview>> {
        self.write(|tx| review_reopen_in(tx, id, now))
    }

    /// See [`reopen_in`].
    pub fn reopen(&self, id: &str, reason: Option<&str>, now: i64) -> Result<Outcome<Reopened>> {
        self.write(|tx| reopen_in(tx, id, reason, now))
    }

    /// See [`reclaim_in`].
    pub fn reclaim(
        &self,
        id: &str,
        reason: Option<&str>,
        now: i64,
    ) -> Result<Outcome<ReclaimedTask>> {
        self.write(|tx| reclaim_in(tx, id, reason, now))
    }

    /// See [`assign_in`].
    pub fn assign(
        &self,
        id: &str,
        assignee: Option<&str>,
        now: i64,
    ) -> Result<Outcome<AssignedTask>> {
        self.write(|tx| assign_in(tx, id, assignee, now))
    }

    /// See [`comment_in`].
    pub fn comment(&self, id: &str, author: &str, body: &str, now: i64) -> Result<i64> {
        self.write(|tx| comment_in(tx, id, author, body, now))
    }

    /// See [`link_in`].
    pub fn link(&self, parent: &str, child: &str, now: i64) -> Result<Outcome<LinkChange>> {
        self.write(|tx| link_in(tx, parent, child, now))
    }

    /// See [`unlink_in`].
    pub fn unlink(&self, parent: &str, child: &str, now: i64) -> Result<Outcome<LinkChange>> {
        self.write(|tx| unlink_in(tx, parent, child, now))
    }

    /// See [`recompute_ready_in`].
    pub fn recompute_ready(&self, now: i64) -> Result<Vec<String>> {
        self.write(|tx| recompute_ready_in(tx, now))
    }
}
