//! Read queries: tasks, runs, events, links, comments. Reads never take the write lock (WAL gives
//! each statement a consistent snapshot).

use crate::db::{self, params};

use super::error::Result;
use super::events::{EVENT_COLUMNS, StoredEvent};
use super::model::{Comment, RUN_COLUMNS, Run, Status, TASK_COLUMNS, Task, TaskRef};
use super::rows::load_task;
use super::store::Board;

/// Which tasks `list_tasks` returns.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only these statuses (empty: all but archived, unless `include_archived`).
    pub statuses: Vec<Status>,
    pub assignee: Option<String>,
    pub include_archived: bool,
    pub limit: Option<usize>,
    /// Skip this many tasks of the order first (a page: `limit` after `offset`).
    pub offset: Option<usize>,
}

/// One completed run of a profile on some task: the "recent work" a worker's prompt shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentWork {
    pub task_id: String,
    pub title: String,
    pub summary: Option<String>,
    pub ended_at: i64,
}

impl Board {
    /// The newest `limit` completed runs of `profile` on tasks other than `except`, newest first
    /// (the original's role history).
    pub fn recent_work(
        &self,
        profile: &str,
        except: &str,
        limit: usize,
    ) -> Result<Vec<RecentWork>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT t.id, t.title, r.summary, r.ended_at FROM task_runs r \
             JOIN tasks t ON t.id = r.task_id \
             WHERE r.profile = ?1 AND r.task_id != ?2 AND r.outcome = 'completed' \
               AND r.ended_at IS NOT NULL \
             ORDER BY r.ended_at DESC, r.id DESC LIMIT ?3",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![profile, except, limit], |r| {
            Ok(RecentWork {
                task_id: r.get(0)?,
                title: r.get(1)?,
                summary: r.get(2)?,
                ended_at: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// One task, or [`super::BoardError::TaskNotFound`].
    pub fn get_task(&self, id: &str) -> Result<Task> {
        load_task(self.conn(), id)
    }

    /// Tasks by priority (highest first), then creation order (oldest first).
    pub fn list_tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>> {
        let mut sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE 1=1");
        let mut args: Vec<String> = Vec::new();
        if !filter.statuses.is_empty() {
            let marks: Vec<String> = filter
                .statuses
                .iter()
                .map(|s| {
                    args.push(s.as_str().to_owned());
                    format!("?{}", args.len())
                })
                .collect();
            sql.push_str(&format!(" AND status IN ({})", marks.join(", ")));
        } else if !filter.include_archived {
            sql.push_str(" AND status != 'archived'");
        }
        if let Some(assignee) = &filter.assignee {
            args.push(assignee.trim().to_lowercase());
            sql.push_str(&format!(" AND assignee = ?{}", args.len()));
        }
        // `rowid` is insertion order: tasks created in the same second keep their creation order
        // (the random id would shuffle them).
        sql.push_str(" ORDER BY priority DESC, created_at ASC, rowid ASC");
        match (filter.limit, filter.offset) {
            (Some(limit), offset) => {
                sql.push_str(&format!(" LIMIT {limit} OFFSET {}", offset.unwrap_or(0)));
            }
            (None, Some(offset)) => sql.push_str(&format!(" LIMIT {} OFFSET {offset}", i64::MAX)),
            (None, None) => {}
        }
        let mut stmt = self.conn().prepare(&sql)?;
        let rows = stmt.query_map(db::params_from_iter(args.iter()), Task::from_row)?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// Every run of a task, oldest first.
    pub fn runs(&self, id: &str) -> Result<Vec<Run>> {
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM task_runs WHERE task_id = ?1 ORDER BY id"
        ))?;
        let rows = stmt.query_map([id], Run::from_row)?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// One run by id.
    pub fn run(&self, run_id: i64) -> Result<Option<Run>> {
        use crate::db::OptionalExtension;
        Ok(self
            .conn()
            .query_row(
                &format!("SELECT {RUN_COLUMNS} FROM task_runs WHERE id = ?1"),
                [run_id],
                Run::from_row,
            )
            .optional()?)
    }

    /// The newest `limit` events of a task (all with `None`), oldest first.
    pub fn events(&self, id: &str, limit: Option<usize>) -> Result<Vec<StoredEvent>> {
        // No limit is the largest one (SQLite reads a negative LIMIT as none, PostgreSQL refuses it).
        let limit = limit.map_or(i64::MAX, |l| i64::try_from(l).unwrap_or(i64::MAX));
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {EVENT_COLUMNS} FROM (SELECT {EVENT_COLUMNS} FROM task_events \
             WHERE task_id = ?1 ORDER BY id DESC LIMIT ?2) e ORDER BY id"
        ))?;
        let rows = stmt.query_map(params![id, limit], StoredEvent::from_row)?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// Events of every task with an id above `after`, oldest first (a cursor for watchers).
    pub fn events_after(&self, after: i64, limit: usize) -> Result<Vec<StoredEvent>> {
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {EVENT_COLUMNS} FROM task_events WHERE id > ?1 ORDER BY id LIMIT ?2"
        ))?;
        let rows = stmt.query_map(params![after, limit as i64], StoredEvent::from_row)?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// The tasks `id` depends on.
    pub fn parents(&self, id: &str) -> Result<Vec<TaskRef>> {
        self.task_refs(
            "SELECT t.id, t.title, t.status FROM task_links l JOIN tasks t ON t.id = l.parent_id \
             WHERE l.child_id = ?1 ORDER BY t.created_at, t.id",
            id,
        )
    }

    /// The tasks that depend on `id`.
    pub fn children(&self, id: &str) -> Result<Vec<TaskRef>> {
        self.task_refs(
            "SELECT t.id, t.title, t.status FROM task_links l JOIN tasks t ON t.id = l.child_id \
             WHERE l.parent_id = ?1 ORDER BY t.created_at, t.id",
            id,
        )
    }

    fn task_refs(&self, sql: &str, id: &str) -> Result<Vec<TaskRef>> {
        let mut stmt = self.conn().prepare_cached(sql)?;
        let rows = stmt.query_map([id], |r| {
            let status: String = r.get(2)?;
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, status))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, title, status) = row?;
            out.push(TaskRef {
                id,
                title,
                status: status.parse()?,
            });
        }
        Ok(out)
    }

    /// Comments of a task, oldest first.
    pub fn comments(&self, id: &str) -> Result<Vec<Comment>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT id, task_id, author, body, created_at FROM task_comments \
             WHERE task_id = ?1 ORDER BY created_at, id",
        )?;
        let rows = stmt.query_map([id], |r| {
            Ok(Comment {
                id: r.get(0)?,
                task_id: r.get(1)?,
                author: r.get(2)?,
                body: r.get(3)?,
                created_at: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// How many tasks are in each status (statuses with none left out), in status order.
    ///
    /// `done` is not counted row by row (on a board of a million tasks that walk alone took
    /// ~70 ms): it is the board's total, which SQLite counts by pages, less every other status,
    /// each counted over its own range of the status index. Exact whatever the statuses are.
    pub fn status_counts(&self) -> Result<Vec<(Status, i64)>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT status, COUNT(*) FROM tasks WHERE status < 'done' GROUP BY status \
             UNION ALL SELECT status, COUNT(*) FROM tasks WHERE status > 'done' GROUP BY status \
             UNION ALL SELECT NULL, COUNT(*) FROM tasks",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((r.get::<_, Option<String>>(0)?, r.get::<_, i64>(1)?))
        })?;
        let mut out = Vec::new();
        let mut done = 0;
        for row in rows {
            match row? {
                (None, total) => done += total,
                (Some(status), n) => {
                    done -= n;
                    if let Ok(status) = status.parse() {
                        out.push((status, n));
                    }
                }
            }
        }
        if done > 0 {
            out.push((Status::Done, done));
        }
        out.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        Ok(out)
    }
}
