//! The operator's transitions: promote, archive, reopen (with its descendants), reclaim, assign and
//! comment. None of them signals a worker: they return its pid so the caller can.

use crate::db::{self, Db, RowLock, Tx, params};

use super::error::{BoardError, Result};
use super::events::{Event, append_event};
use super::input::normalize_assignee;
use super::model::{Status, TASK_COLUMNS, Task};
use super::outcome::{
    ArchivedTask, AssignedTask, Invalidated, Moved, Outcome, Reassigned, ReclaimedTask, Refusal,
    Reopened,
};
use super::rows::{
    RunClose, cas, close_leaked_runs, end_run_in, insert_returning_id, landing_status, load_task,
    promote_children_in, retry_status_for_run, unfinished_parents,
};
use super::store::Board;

/// Whether an operator promotion of `id` may go ahead: the task, and the unfinished parents it
/// passes over (only with `force`), or the refusal. Reads only; shared by the promotion and its
/// dry run.
fn promotion_verdict(
    conn: &Db,
    id: &str,
    force: bool,
) -> Result<std::result::Result<(Task, Vec<String>), Refusal>> {
    let task = load_task(conn, id)?;
    if !matches!(task.status, Status::Triage | Status::Todo | Status::Blocked) {
        return Ok(Err(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "triage, todo or blocked",
        }));
    }
    let open = unfinished_parents(conn, id)?;
    if !open.is_empty() && !force {
        return Ok(Err(Refusal::ParentsNotDone {
            task_id: id.to_owned(),
            parents: open,
        }));
    }
    Ok(Ok((task, open)))
}

/// Operator promotion: `triage`/`todo`/`blocked` → `ready`, refused while a parent is unfinished
/// unless `force` (the parents it passed over are listed in its `promoted_manual` event).
/// Resets the failure counter (a deliberate operator action).
pub(crate) fn promote_in(
    tx: &Tx<'_>,
    id: &str,
    promotion: &Promotion<'_>,
    now: i64,
) -> Result<Outcome<Moved>> {
    let (task, open_parents) = match promotion_verdict(tx, id, promotion.force)? {
        Ok(found) => found,
        Err(refusal) => return Ok(Outcome::Refused(refusal)),
    };
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
            actor: promotion.actor.map(str::to_owned),
            reason: promotion.reason.map(str::to_owned),
            from: task.status,
            open_parents,
        },
        now,
    )?;
    Ok(Outcome::Done(Moved {
        task_id: id.to_owned(),
        from: task.status,
        to: Status::Ready,
    }))
}

/// An operator promotion: who asks, why, and whether unfinished parents are passed over.
#[derive(Debug, Clone, Copy, Default)]
pub struct Promotion<'a> {
    pub actor: Option<&'a str>,
    pub reason: Option<&'a str>,
    /// Promote even while a parent is unfinished.
    pub force: bool,
}

/// Archives a task from any status; closes an open run as reclaimed and promotes children that
/// only waited on it. The worker of a running task is *not* signalled (see [`ArchivedTask`]).
/// `actor` is recorded in the `archived` event (`None` from the CLI).
pub(crate) fn archive_in(
    tx: &Tx<'_>,
    id: &str,
    actor: Option<&str>,
    now: i64,
) -> Result<Outcome<ArchivedTask>> {
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
    let closed = end_run_in(
        tx,
        id,
        task.current_run_id,
        &RunClose {
            status: "reclaimed",
            outcome: "reclaimed",
            summary: None,
            error: Some("task archived with run still active"),
        },
        "task archived with run still active",
        now,
    )?;
    append_event(
        tx,
        id,
        closed,
        &Event::Archived {
            prev_status: Some(task.status),
            worker_pid: task.worker_pid,
            actor: actor.map(str::to_owned),
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

/// Reopens a `done` task: it goes back to `ready` (`todo` while a parent is unfinished) and every
/// descendant whose work rested on it — in `ready`, `review`, `running` or `done` — goes back to
/// `todo` with its claim cleared, a fresh failure budget, and (when running) its run closed as
/// reclaimed. Events: `status` {reason `reopened`} on the task; `descendant_invalidated` and
/// `status` {reason `ancestor_reopened`} plus a comment on each descendant. No process is
/// signalled: a worker whose run closed is terminated by the dispatcher.
/// `actor` is recorded in the task's `status` event (`None` from the CLI).
pub(crate) fn reopen_in(
    tx: &Tx<'_>,
    id: &str,
    reason: Option<&str>,
    actor: Option<&str>,
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
            actor: actor.map(str::to_owned),
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
        let closed = end_run_in(
            tx,
            &child.id,
            child.current_run_id,
            &RunClose {
                status: "todo",
                outcome: "reclaimed",
                summary: None,
                error: Some(&format!("ancestor {id} reopened")),
            },
            &format!("ancestor {id} reopened"),
            now,
        )?;
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
                actor: None,
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
/// `actor` is recorded in the `reclaimed` event (`None` from the CLI).
pub(crate) fn reclaim_in(
    tx: &Tx<'_>,
    id: &str,
    reason: Option<&str>,
    actor: Option<&str>,
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
    let closed = end_run_in(
        tx,
        id,
        task.current_run_id,
        &RunClose {
            status: "reclaimed",
            outcome: "reclaimed",
            summary: None,
            error: Some(&error),
        },
        &error,
        now,
    )?;
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
            actor: actor.map(str::to_owned),
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
/// `source` is recorded in the `assigned` event (`web` from the web board; `None` from the CLI).
pub(crate) fn assign_in(
    tx: &Tx<'_>,
    id: &str,
    assignee: Option<&str>,
    source: Option<&str>,
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
            source: source.map(str::to_owned),
        },
        now,
    )?;
    Ok(Outcome::Done(AssignedTask {
        task_id: id.to_owned(),
        from: task.assignee,
        to,
    }))
}

/// Hands a task to another profile in one transaction (the original's `reassign_task`): with
/// `reclaim`, a running or claimed task is first reclaimed as [`reclaim_in`] does (its run
/// closed, back to `ready` with a fresh failure budget); then it is assigned as [`assign_in`]
/// does. Without `reclaim` a claimed task is refused, as `assign` refuses it. `reason` is the
/// reclaim's (default `reassigned`); `actor` (the web board's; `None` from the CLI) is recorded
/// in the `reclaimed` event and as the `assigned` event's source.
pub(crate) fn reassign_in(
    tx: &Tx<'_>,
    id: &str,
    assignee: &str,
    reclaim: bool,
    reason: Option<&str>,
    actor: Option<&str>,
    now: i64,
) -> Result<Outcome<Reassigned>> {
    if assignee.trim().is_empty() {
        return Err(BoardError::BlankAssignee);
    }
    let task = load_task(tx, id)?;
    let claimed = task.status == Status::Running || task.claim_lock.is_some();
    let reclaimed = if reclaim && claimed {
        match reclaim_in(tx, id, Some(reason.unwrap_or("reassigned")), actor, now)? {
            Outcome::Done(r) => Some(r),
            Outcome::Refused(refusal) => return Ok(Outcome::Refused(refusal)),
        }
    } else {
        None
    };
    Ok(match assign_in(tx, id, Some(assignee), actor, now)? {
        Outcome::Done(a) => Outcome::Done(Reassigned {
            task_id: a.task_id,
            from: a.from,
            to: a.to,
            reclaimed,
        }),
        Outcome::Refused(refusal) => Outcome::Refused(refusal),
    })
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

impl Board {
    /// See [`promote_in`].
    pub fn promote(
        &self,
        id: &str,
        actor: Option<&str>,
        reason: Option<&str>,
        now: i64,
    ) -> Result<Outcome<Moved>> {
        let promotion = Promotion {
            actor,
            reason,
            force: false,
        };
        self.write(|tx| promote_in(tx, id, &promotion, now))
    }

    /// See [`promote_in`]; `force` promotes over unfinished parents.
    pub fn promote_with(
        &self,
        id: &str,
        promotion: &Promotion<'_>,
        now: i64,
    ) -> Result<Outcome<Moved>> {
        self.write(|tx| promote_in(tx, id, promotion, now))
    }

    /// What [`Board::promote_with`] would do, changing nothing (a read, no transaction).
    pub fn promote_dry_run(&self, id: &str, force: bool) -> Result<Outcome<Moved>> {
        Ok(match promotion_verdict(self.conn(), id, force)? {
            Ok((task, _)) => Outcome::Done(Moved {
                task_id: id.to_owned(),
                from: task.status,
                to: Status::Ready,
            }),
            Err(refusal) => Outcome::Refused(refusal),
        })
    }

    /// See [`archive_in`].
    pub fn archive(&self, id: &str, now: i64) -> Result<Outcome<ArchivedTask>> {
        self.write(|tx| archive_in(tx, id, None, now))
    }

    /// [`Board::archive`] recording `actor` (the web board's) in the event.
    pub fn archive_by(&self, id: &str, actor: &str, now: i64) -> Result<Outcome<ArchivedTask>> {
        self.write(|tx| archive_in(tx, id, Some(actor), now))
    }

    /// See [`reopen_in`].
    pub fn reopen(&self, id: &str, reason: Option<&str>, now: i64) -> Result<Outcome<Reopened>> {
        self.write(|tx| reopen_in(tx, id, reason, None, now))
    }

    /// [`Board::reopen`] by `actor` (the web board's), recorded in the task's `status` event.
    pub fn reopen_by(
        &self,
        id: &str,
        reason: Option<&str>,
        actor: &str,
        now: i64,
    ) -> Result<Outcome<Reopened>> {
        self.write(|tx| reopen_in(tx, id, reason, Some(actor), now))
    }

    /// See [`reclaim_in`].
    pub fn reclaim(
        &self,
        id: &str,
        reason: Option<&str>,
        now: i64,
    ) -> Result<Outcome<ReclaimedTask>> {
        self.write(|tx| reclaim_in(tx, id, reason, None, now))
    }

    /// [`Board::reclaim`] recording `actor` (the web board's) in the event.
    pub fn reclaim_by(
        &self,
        id: &str,
        reason: Option<&str>,
        actor: &str,
        now: i64,
    ) -> Result<Outcome<ReclaimedTask>> {
        self.write(|tx| reclaim_in(tx, id, reason, Some(actor), now))
    }

    /// Saves `[dispatch] default_profile` as the assignee of unassigned ready tasks the
    /// dispatcher is about to claim (the original's `_apply_default_assignee`), all in one
    /// transaction: each `(task, profile)` gets `assigned {source: kanban.default_assignee}`
    /// when it is still unassigned, ready and unclaimed. One flag per pair: saved or not.
    pub fn save_default_assignees(&self, pairs: &[(&str, &str)], now: i64) -> Result<Vec<bool>> {
        if pairs.is_empty() {
            return Ok(Vec::new());
        }
        self.write(|tx| {
            let mut saved = Vec::with_capacity(pairs.len());
            for (id, assignee) in pairs {
                let applied = cas(
                    tx,
                    "UPDATE tasks SET assignee = ?2 WHERE id = ?1 AND status = 'ready' \
                     AND claim_lock IS NULL AND (assignee IS NULL OR TRIM(assignee) = '')",
                    params![id, assignee],
                )?;
                if applied {
                    append_event(
                        tx,
                        id,
                        None,
                        &Event::Assigned {
                            assignee: Some((*assignee).to_owned()),
                            from: None,
                            source: Some("kanban.default_assignee".to_owned()),
                        },
                        now,
                    )?;
                }
                saved.push(applied);
            }
            Ok(saved)
        })
    }

    /// See [`assign_in`].
    pub fn assign(
        &self,
        id: &str,
        assignee: Option<&str>,
        now: i64,
    ) -> Result<Outcome<AssignedTask>> {
        self.write(|tx| assign_in(tx, id, assignee, None, now))
    }

    /// See [`reassign_in`].
    pub fn reassign(
        &self,
        id: &str,
        assignee: &str,
        reclaim: bool,
        reason: Option<&str>,
        now: i64,
    ) -> Result<Outcome<Reassigned>> {
        self.write(|tx| reassign_in(tx, id, assignee, reclaim, reason, None, now))
    }

    /// [`Board::reassign`] by `actor` (the web board's), recorded in its events.
    pub fn reassign_by(
        &self,
        id: &str,
        assignee: &str,
        reclaim: bool,
        actor: &str,
        now: i64,
    ) -> Result<Outcome<Reassigned>> {
        self.write(|tx| reassign_in(tx, id, assignee, reclaim, None, Some(actor), now))
    }

    /// See [`comment_in`].
    pub fn comment(&self, id: &str, author: &str, body: &str, now: i64) -> Result<i64> {
        self.write(|tx| comment_in(tx, id, author, body, now))
    }
}
