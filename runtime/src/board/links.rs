//! Dependency links: `link` (refusing a cycle), `unlink`, and `recompute_ready`, which promotes
//! `todo` tasks whose parents are all done.

use crate::db::{self, Db, OptionalExtension, Tx, params};

use super::error::{BoardError, Result};
use super::events::{Event, append_event};
use super::model::Status;
use super::outcome::{LinkChange, Outcome, Refusal};
use super::rows::{cas, exec, load_task, promote_if_ready_in, promote_todo_in};
use super::store::Board;

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
                source: None,
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

/// The `todo` tasks whose parents are all finished, in dispatch order: what the promotion phase
/// promotes.
pub(super) fn promotable_in(conn: &db::Db) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT t.id FROM tasks t WHERE t.status = 'todo' AND NOT EXISTS ( \
           SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id \
           WHERE l.child_id = t.id AND p.status NOT IN ('done', 'archived')) \
         ORDER BY t.priority DESC, t.created_at ASC, t.rowid",
    )?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    Ok(rows.collect::<db::Result<_>>()?)
}

/// Promotes every `todo` task whose parents are all finished; returns their ids.
pub(crate) fn recompute_ready_in(tx: &Tx<'_>, now: i64) -> Result<Vec<String>> {
    let candidates = promotable_in(tx)?;
    let mut promoted = Vec::with_capacity(candidates.len());
    for id in candidates {
        if promote_todo_in(tx, &id, now)? {
            promoted.push(id);
        }
    }
    Ok(promoted)
}

impl Board {
    /// See [`link_in`].
    pub fn link(&self, parent: &str, child: &str, now: i64) -> Result<Outcome<LinkChange>> {
        self.write(|tx| link_in(tx, parent, child, now))
    }

    /// See [`unlink_in`].
    pub fn unlink(&self, parent: &str, child: &str, now: i64) -> Result<Outcome<LinkChange>> {
        self.write(|tx| unlink_in(tx, parent, child, now))
    }

    /// See [`recompute_ready_in`]. Reads first and writes only when a task is promotable, so a
    /// tick with nothing to promote takes no write lock for it; and on SQLite, once a pass found
    /// nothing, it is not read again until something is committed to the board (by any
    /// connection: whether a task is promotable depends on the board's rows alone, never on the
    /// time).
    pub fn recompute_ready(&self, now: i64) -> Result<Vec<String>> {
        // Taken before the read: a commit in between changes the stamp, so the next pass reads.
        let stamp = self.conn().change_stamp()?;
        if stamp.is_some() && self.nothing_promotable_at.get() == stamp {
            return Ok(Vec::new());
        }
        if promotable_in(self.conn())?.is_empty() {
            self.nothing_promotable_at.set(stamp);
            return Ok(Vec::new());
        }
        self.write(|tx| recompute_ready_in(tx, now))
    }
}
