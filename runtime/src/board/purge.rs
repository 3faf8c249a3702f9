//! Hard deletion of a task (the original's `delete_task` and, after `archive`,
//! `delete_archived_task`; `kanban delete ID…`, `kanban archive --rm ID…`): the task's row and
//! every row that names it — its runs, events, comments, attachment rows and the links to its
//! parents and children — in one transaction, refused while the task runs (its worker would be
//! orphaned). Former children whose other parents are all finished are promoted, as when a parent
//! completes. The attachment files are the caller's to remove after the commit
//! ([`remove_attachment_files`]); no event survives the task, so the deletion is reported by
//! its outcome only.

use serde::Serialize;

use crate::db::{self, Tx, params};

use super::error::Result;
use super::outcome::{Outcome, Refusal};
use super::rows::{cas, load_task, promote_if_ready_in};
use super::store::Board;

/// What [`Board::delete_task`] removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Deleted {
    pub task_id: String,
    pub prev_status: super::model::Status,
    pub runs: u64,
    pub events: u64,
    pub comments: u64,
    pub links: u64,
    /// The attachment files the rows named (absolute), to remove after the commit.
    pub attachments: Vec<String>,
    /// Former children promoted to ready (their last unfinished parent was this task).
    pub promoted: Vec<String>,
}

fn count(tx: &Tx<'_>, sql: &str, id: &str) -> Result<u64> {
    let n: i64 = tx.query_row(sql, params![id], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Deletes task `id` and its relations (see the module docs); refused while it runs.
pub(crate) fn delete_in(tx: &Tx<'_>, id: &str, now: i64) -> Result<Outcome<Deleted>> {
    let task = load_task(tx, id)?;
    if task.status == super::model::Status::Running || task.current_run_id.is_some() {
        return Ok(Outcome::Refused(Refusal::DeleteRunning {
            task_id: id.to_owned(),
            claim_lock: task.claim_lock,
        }));
    }
    let attachments: Vec<String> = {
        let mut stmt = tx.prepare_cached(
            "SELECT stored_path FROM task_attachments WHERE task_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map(params![id], |r| r.get(0))?;
        rows.collect::<db::Result<_>>()?
    };
    let children: Vec<String> = {
        let mut stmt = tx.prepare_cached(
            "SELECT child_id FROM task_links WHERE parent_id = ?1 ORDER BY child_id",
        )?;
        let rows = stmt.query_map(params![id], |r| r.get(0))?;
        rows.collect::<db::Result<_>>()?
    };
    let runs = count(tx, "SELECT COUNT(*) FROM task_runs WHERE task_id = ?1", id)?;
    let events = count(
        tx,
        "SELECT COUNT(*) FROM task_events WHERE task_id = ?1",
        id,
    )?;
    let comments = count(
        tx,
        "SELECT COUNT(*) FROM task_comments WHERE task_id = ?1",
        id,
    )?;
    let links = count(
        tx,
        "SELECT COUNT(*) FROM task_links WHERE parent_id = ?1 OR child_id = ?1",
        id,
    )?;
    // The task row first, compare-and-swap on what was read: a task claimed meanwhile stays.
    let applied = cas(
        tx,
        "DELETE FROM tasks WHERE id = ?1 AND status = ?2 AND current_run_id IS NULL",
        params![id, task.status.as_str()],
    )?;
    if !applied {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    for sql in [
        "DELETE FROM task_attachments WHERE task_id = ?1",
        "DELETE FROM task_comments WHERE task_id = ?1",
        "DELETE FROM task_events WHERE task_id = ?1",
        "DELETE FROM task_runs WHERE task_id = ?1",
        "DELETE FROM task_links WHERE parent_id = ?1 OR child_id = ?1",
    ] {
        tx.execute(sql, params![id])?;
    }
    let mut promoted = Vec::new();
    for child in children {
        if promote_if_ready_in(tx, &child, now)? {
            promoted.push(child);
        }
    }
    Ok(Outcome::Done(Deleted {
        task_id: id.to_owned(),
        prev_status: task.status,
        runs,
        events,
        comments,
        links,
        attachments,
        promoted,
    }))
}

impl Board {
    /// See [`delete_in`].
    pub fn delete_task(&self, id: &str, now: i64) -> Result<Outcome<Deleted>> {
        self.write(|tx| delete_in(tx, id, now))
    }
}

/// Removes the files a deleted task's attachment rows named, and the task's attachments folder
/// `dir` when that leaves it empty. Only files inside `dir` are removed (a row naming another
/// place is left alone); returns the files removed.
pub fn remove_attachment_files(stored: &[String], dir: &std::path::Path) -> Vec<String> {
    let mut removed = Vec::new();
    for path in stored {
        let file = std::path::Path::new(path);
        if file.parent() == Some(dir) && std::fs::remove_file(file).is_ok() {
            removed.push(path.clone());
        }
    }
    let _ = std::fs::remove_dir(dir);
    removed
}
