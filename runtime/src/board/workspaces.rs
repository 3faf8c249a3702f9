//! What the cleanup of finished tasks' workspaces reads and records (the decisions are in
//! [`crate::cleanup`]): the finished tasks that still name a workspace, the last cleanup note of
//! a task, the notes themselves (events only; no state changes), and `kanban gc`'s pruning of
//! old events.

use crate::db::params;

use super::error::Result;
use super::events::{EVENT_COLUMNS, Event, StoredEvent, append_event};
use super::model::Status;
use super::store::Board;

/// A finished (`done` or `archived`) task whose row names a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishedWorkspace {
    pub task_id: String,
    pub status: Status,
    pub kind: String,
    pub path: String,
    pub branch: Option<String>,
}

/// Event kinds `kanban gc` never prunes: the record of a decomposition, and why a worktree that
/// is still on disk was kept.
pub const KEPT_EVENT_KINDS: &[&str] = &["decomposed", "workspace_preserved"];

impl Board {
    /// Every finished task with a `workspace_path`, oldest first.
    pub fn finished_workspaces(&self) -> Result<Vec<FinishedWorkspace>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT id, status, workspace_kind, workspace_path, branch_name FROM tasks \
             WHERE status IN ('done', 'archived') AND workspace_path IS NOT NULL \
             AND workspace_path != '' ORDER BY completed_at, created_at, id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (task_id, status, kind, path, branch) = row?;
            out.push(FinishedWorkspace {
                task_id,
                status: status.parse()?,
                kind: kind.unwrap_or_else(|| "scratch".to_owned()),
                path,
                branch: branch.filter(|b| !b.is_empty()),
            });
        }
        Ok(out)
    }

    /// The newest `workspace_preserved` or `workspace_removed` event of task `id`.
    pub fn last_workspace_note(&self, id: &str) -> Result<Option<StoredEvent>> {
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {EVENT_COLUMNS} FROM task_events WHERE task_id = ?1 \
             AND kind IN ('workspace_preserved', 'workspace_removed') ORDER BY id DESC LIMIT 1"
        ))?;
        let mut rows = stmt.query_map([id], StoredEvent::from_row)?;
        Ok(rows.next().transpose()?)
    }

    /// Appends cleanup notes of task `id` (`workspace_discarded_content`, `workspace_removed`,
    /// `workspace_preserved`) in one transaction; they change no state.
    pub fn note_workspace(&self, id: &str, events: &[Event], now: i64) -> Result<()> {
        self.write(|tx| {
            for event in events {
                append_event(tx, id, None, event, now)?;
            }
            Ok(())
        })
    }

    /// Events older than `cutoff` of finished tasks, except [`KEPT_EVENT_KINDS`] (the
    /// original's `gc_events`, which keeps every event of an unfinished task): counted when
    /// `dry_run`, else deleted; returns how many.
    pub fn prune_events(&self, cutoff: i64, dry_run: bool) -> Result<u64> {
        let kept = KEPT_EVENT_KINDS
            .iter()
            .map(|k| format!("'{k}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let filter = format!(
            "FROM task_events WHERE created_at < ?1 AND kind NOT IN ({kept}) \
             AND task_id IN (SELECT id FROM tasks WHERE status IN ('done', 'archived'))"
        );
        if dry_run {
            let n: i64 = self.conn().query_row(
                &format!("SELECT COUNT(*) {filter}"),
                params![cutoff],
                |r| r.get(0),
            )?;
            return Ok(u64::try_from(n).unwrap_or(0));
        }
        self.write(|tx| {
            let n = tx.execute(&format!("DELETE {filter}"), params![cutoff])?;
            Ok(n as u64)
        })
    }
}
