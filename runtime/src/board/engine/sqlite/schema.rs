//! The board schema, and how a board is brought up to it: ordered migrations versioned with
//! `PRAGMA user_version` on a board kanban created, a separate additive adoption on a board the
//! original Python system created.
//!
//! Table and column names are the original's (see the README, "Interchangeability"), which keeps
//! boards interchangeable.
//!
//! docs/board.md ("The SQLite schema and adoption") has the details.

use std::path::Path;

use crate::board::StorageError;
use crate::board::error::{BoardError, Result};
use crate::db::Tx;
use crate::db::{self, Db};

/// `PRAGMA application_id` of a board kanban created (`"KBN1"`).
pub(crate) const APPLICATION_ID: i32 = 0x4B42_4E31;

/// Who created a board, which decides its migrations and its journal mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// kanban created its `tasks` table: migrations in order, WAL.
    Kanban,
    /// The original (or anything else) did: additive adoption, journal mode untouched.
    Adopted,
}

/// One migration of a board kanban created: its target version and its SQL.
pub(crate) struct Migration {
    pub version: i64,
    pub sql: &'static str,
}

/// Every migration of a board kanban created, in order. Append only.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sql: r#"
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    body TEXT,
    assignee TEXT,
    status TEXT NOT NULL,
    priority INTEGER DEFAULT 0,
    created_by TEXT,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    completed_at INTEGER,
    workspace_kind TEXT NOT NULL DEFAULT 'scratch',
    workspace_path TEXT,
    branch_name TEXT,
    claim_lock TEXT,
    claim_expires INTEGER,
    tenant TEXT,
    result TEXT,
    idempotency_key TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    worker_pid INTEGER,
    worker_started_at INTEGER,
    last_failure_error TEXT,
    max_runtime_seconds INTEGER,
    last_heartbeat_at INTEGER,
    current_run_id INTEGER,
    skills TEXT,
    model_override TEXT,
    provider_override TEXT,
    reasoning_effort TEXT,
    max_retries INTEGER,
    goal_mode INTEGER NOT NULL DEFAULT 0,
    goal_max_turns INTEGER,
    block_kind TEXT,
    block_recurrences INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS task_links (
    parent_id TEXT NOT NULL,
    child_id TEXT NOT NULL,
    PRIMARY KEY (parent_id, child_id)
);
CREATE TABLE IF NOT EXISTS task_comments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL,
    author TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS task_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL,
    run_id INTEGER,
    kind TEXT NOT NULL,
    payload TEXT,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS task_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL,
    profile TEXT,
    step_key TEXT,
    status TEXT NOT NULL,
    claim_lock TEXT,
    claim_expires INTEGER,
    worker_pid INTEGER,
    worker_started_at INTEGER,
    max_runtime_seconds INTEGER,
    last_heartbeat_at INTEGER,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    outcome TEXT,
    summary TEXT,
    metadata TEXT,
    error TEXT
);
"#,
    },
    Migration {
        version: 2,
        sql: r#"
DROP INDEX IF EXISTS idx_tasks_idempotency;
CREATE INDEX idx_tasks_idempotency ON tasks(idempotency_key) WHERE idempotency_key IS NOT NULL;
DROP INDEX IF EXISTS idx_tasks_tenant;
CREATE INDEX idx_tasks_tenant ON tasks(tenant) WHERE tenant IS NOT NULL;
DROP INDEX IF EXISTS idx_runs_status;
DROP INDEX IF EXISTS idx_events_run;
"#,
    },
    Migration {
        version: 3,
        // The marker of a board kanban created (see the module docs).
        sql: "PRAGMA application_id = 1262636593;",
    },
    Migration {
        version: 4,
        sql: r#"
CREATE INDEX IF NOT EXISTS idx_runs_lingering ON task_runs(ended_at)
    WHERE worker_pid IS NOT NULL AND ended_at IS NOT NULL;
"#,
    },
    Migration {
        version: 5,
        // `kanban create --base REF` (issue 26), as PostgreSQL's version 5.
        sql: "ALTER TABLE tasks ADD COLUMN workspace_base TEXT;",
    },
    Migration {
        version: 6,
        sql: ATTACHMENTS_TABLE,
    },
    Migration {
        version: 7,
        // `kanban create --completion-contract` (issue 27 item 5), the original's column; as
        // PostgreSQL's version 7.
        sql: "ALTER TABLE tasks ADD COLUMN completion_contract TEXT;",
    },
    Migration {
        version: 8,
        // The dispatchers' recorded ticks (issue 30 item 2), as PostgreSQL's version 8.
        sql: DISPATCHERS_TABLE,
    },
    Migration {
        version: 9,
        // The board's order per status replaces the bare status index (issue 32 item 4): a
        // status change still writes one index entry, and a column's first cards, the
        // dispatcher's picks and `list --status` read in index order instead of sorting; the
        // order over all tasks (`list`'s pages) and the recent rate-limited runs (the tick's
        // cooldown count) get theirs ([`INDEXES`]). As PostgreSQL's version 9.
        sql: "DROP INDEX IF EXISTS idx_tasks_status;",
    },
];

/// The last tick each dispatcher of the board recorded (kanban's own table; the original has
/// none and ignores it): `dispatcher` is its claim lock `"<host>:<pid>"`, `interval_seconds` how
/// long it may go between two records when idle (see `board::ticks`).
pub(crate) const DISPATCHERS_TABLE: &str = r#"
CREATE TABLE IF NOT EXISTS kanban_dispatchers (
    dispatcher TEXT PRIMARY KEY,
    last_tick_at INTEGER NOT NULL,
    interval_seconds INTEGER NOT NULL
);
"#;

/// The original's `task_attachments` table, as its `SCHEMA_SQL` declares it (version 6; created
/// when missing on an adopted board).
const ATTACHMENTS_TABLE: &str = r#"
CREATE TABLE IF NOT EXISTS task_attachments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    stored_path TEXT NOT NULL,
    content_type TEXT,
    size INTEGER NOT NULL DEFAULT 0,
    uploaded_by TEXT,
    created_at INTEGER NOT NULL
);
"#;

/// Indexes of a board kanban creates, created after its migrations (idempotent), once the columns
/// they cover exist: the same end state for a fresh board and a migrated one.
pub(crate) const INDEXES: &str = r#"
CREATE INDEX IF NOT EXISTS idx_tasks_status_order ON tasks(status, priority DESC, created_at);
CREATE INDEX IF NOT EXISTS idx_tasks_order ON tasks(priority DESC, created_at);
CREATE INDEX IF NOT EXISTS idx_tasks_idempotency ON tasks(idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_tasks_tenant ON tasks(tenant) WHERE tenant IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_links_child ON task_links(child_id);
CREATE INDEX IF NOT EXISTS idx_links_parent ON task_links(parent_id);
CREATE INDEX IF NOT EXISTS idx_comments_task ON task_comments(task_id, created_at);
CREATE INDEX IF NOT EXISTS idx_events_task ON task_events(task_id, created_at);
CREATE INDEX IF NOT EXISTS idx_runs_task ON task_runs(task_id, started_at);
CREATE INDEX IF NOT EXISTS idx_runs_lingering ON task_runs(ended_at)
    WHERE worker_pid IS NOT NULL AND ended_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_attachments_task ON task_attachments(task_id, created_at);
CREATE INDEX IF NOT EXISTS idx_runs_rate_limited ON task_runs(ended_at)
    WHERE outcome = 'rate_limited';
"#;

/// Indexes a query of ours needs, created on an adopted board only when missing, in the
/// original's shape (so the original's own `CREATE INDEX IF NOT EXISTS` finds what it would have
/// made). An existing index of the same name is never touched, and kanban's own indexes of
/// version 9 are not added: the original's board stays its own (its `idx_tasks_status` serves
/// the same queries, sorting what the order index would have read in order).
pub(crate) const ADOPTED_INDEXES: &str = r#"
CREATE INDEX IF NOT EXISTS idx_tasks_status ON tasks(status);
CREATE INDEX IF NOT EXISTS idx_tasks_idempotency ON tasks(idempotency_key);
CREATE INDEX IF NOT EXISTS idx_tasks_tenant ON tasks(tenant);
CREATE INDEX IF NOT EXISTS idx_links_child ON task_links(child_id);
CREATE INDEX IF NOT EXISTS idx_links_parent ON task_links(parent_id);
CREATE INDEX IF NOT EXISTS idx_comments_task ON task_comments(task_id, created_at);
CREATE INDEX IF NOT EXISTS idx_events_task ON task_events(task_id, created_at);
CREATE INDEX IF NOT EXISTS idx_runs_task ON task_runs(task_id, started_at);
CREATE INDEX IF NOT EXISTS idx_attachments_task ON task_attachments(task_id, created_at);
"#;

/// The schema version this build writes.
pub(crate) const LATEST: i64 = 9;

/// Columns every version of the original's tables has (keys and `NOT NULL` columns without a
/// default, which `ALTER TABLE … ADD COLUMN` could not add anyway). Adoption requires them.
pub(crate) const BASE_COLUMNS: &[(&str, &[&str])] = &[
    ("tasks", &["id", "title", "status", "created_at"]),
    ("task_runs", &["id", "task_id", "status", "started_at"]),
    ("task_events", &["id", "task_id", "kind", "created_at"]),
    (
        "task_comments",
        &["id", "task_id", "author", "body", "created_at"],
    ),
    ("task_links", &["parent_id", "child_id"]),
    (
        "task_attachments",
        &["id", "task_id", "filename", "stored_path", "created_at"],
    ),
];

/// Every other column the runtime reads or writes, with its declaration: exactly what adoption
/// adds when a board lacks it (a unit test checks this list against the runtime's `SELECT` lists).
pub(crate) const ADOPTED_COLUMNS: &[(&str, &str, &str)] = &[
    ("tasks", "body", "TEXT"),
    ("tasks", "assignee", "TEXT"),
    ("tasks", "priority", "INTEGER DEFAULT 0"),
    ("tasks", "created_by", "TEXT"),
    ("tasks", "started_at", "INTEGER"),
    ("tasks", "completed_at", "INTEGER"),
    ("tasks", "workspace_kind", "TEXT NOT NULL DEFAULT 'scratch'"),
    ("tasks", "workspace_path", "TEXT"),
    ("tasks", "branch_name", "TEXT"),
    ("tasks", "claim_lock", "TEXT"),
    ("tasks", "claim_expires", "INTEGER"),
    ("tasks", "tenant", "TEXT"),
    ("tasks", "result", "TEXT"),
    ("tasks", "idempotency_key", "TEXT"),
    (
        "tasks",
        "consecutive_failures",
        "INTEGER NOT NULL DEFAULT 0",
    ),
    ("tasks", "worker_pid", "INTEGER"),
    ("tasks", "worker_started_at", "INTEGER"),
    ("tasks", "last_failure_error", "TEXT"),
    ("tasks", "max_runtime_seconds", "INTEGER"),
    ("tasks", "last_heartbeat_at", "INTEGER"),
    ("tasks", "current_run_id", "INTEGER"),
    ("tasks", "skills", "TEXT"),
    ("tasks", "model_override", "TEXT"),
    ("tasks", "provider_override", "TEXT"),
    ("tasks", "reasoning_effort", "TEXT"),
    ("tasks", "max_retries", "INTEGER"),
    ("tasks", "goal_mode", "INTEGER NOT NULL DEFAULT 0"),
    ("tasks", "goal_max_turns", "INTEGER"),
    ("tasks", "block_kind", "TEXT"),
    ("tasks", "block_recurrences", "INTEGER NOT NULL DEFAULT 0"),
    ("tasks", "workspace_base", "TEXT"),
    ("tasks", "completion_contract", "TEXT"),
    ("task_runs", "profile", "TEXT"),
    ("task_runs", "claim_lock", "TEXT"),
    ("task_runs", "claim_expires", "INTEGER"),
    ("task_runs", "worker_pid", "INTEGER"),
    ("task_runs", "worker_started_at", "INTEGER"),
    ("task_runs", "max_runtime_seconds", "INTEGER"),
    ("task_runs", "last_heartbeat_at", "INTEGER"),
    ("task_runs", "ended_at", "INTEGER"),
    ("task_runs", "outcome", "TEXT"),
    ("task_runs", "summary", "TEXT"),
    ("task_runs", "metadata", "TEXT"),
    ("task_runs", "error", "TEXT"),
    ("task_events", "run_id", "INTEGER"),
    ("task_events", "payload", "TEXT"),
    ("task_attachments", "content_type", "TEXT"),
    ("task_attachments", "size", "INTEGER NOT NULL DEFAULT 0"),
    ("task_attachments", "uploaded_by", "TEXT"),
];

/// Columns the original renamed by adding the new one and copying the old values: when adoption
/// adds `(table, new)` to a board that still has `old`, it copies `old` into it the same way.
const RENAMED_COLUMNS: &[(&str, &str, &str, &str)] = &[
    (
        "tasks",
        "consecutive_failures",
        "spawn_failures",
        "COALESCE(spawn_failures, 0)",
    ),
    (
        "tasks",
        "last_failure_error",
        "last_spawn_error",
        "last_spawn_error",
    ),
];

/// The original's tables that kanban created in none of versions 1 and 2: their presence marks
/// a board the original created (or opened), for boards that predate [`APPLICATION_ID`].
const ORIGINAL_ONLY_TABLES: &[&str] = &["task_attachments", "kanban_notify_subs"];

fn has_table(tx: &Db, name: &str) -> Result<bool> {
    let n: i64 = tx
        .prepare_cached("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1")?
        .query_row([name], |r| r.get(0))?;
    Ok(n > 0)
}

fn columns(tx: &Db, table: &str) -> Result<Vec<String>> {
    let mut stmt = tx.prepare(&format!("PRAGMA table_info({table})"))?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(1))?
        .collect::<db::Result<Vec<_>>>()?;
    Ok(names)
}

fn application_id(conn: &Db) -> Result<i32> {
    Ok(conn.query_row("PRAGMA application_id", [], |r| r.get(0))?)
}

/// Who created the board at schema version `current` (read under the write lock).
fn origin_in(tx: &Tx<'_>, current: i64) -> Result<Origin> {
    if application_id(tx)? == APPLICATION_ID {
        return Ok(Origin::Kanban);
    }
    if current == 0 {
        // Version 0: an empty file (ours to create) or a board of the original.
        return Ok(if has_table(tx, "tasks")? {
            Origin::Adopted
        } else {
            Origin::Kanban
        });
    }
    // Version 1 or 2 without the marker: written by an older kanban, which created it unless
    // the original's own tables are there.
    for table in ORIGINAL_ONLY_TABLES {
        if has_table(tx, table)? {
            return Ok(Origin::Adopted);
        }
    }
    Ok(Origin::Kanban)
}

/// Brings the board from version `current` to [`LATEST`] inside the caller's transaction.
/// `path` only names the file in errors.
pub(crate) fn migrate_in(tx: &Tx<'_>, current: i64, path: &Path) -> Result<Origin> {
    let origin = origin_in(tx, current)?;
    match origin {
        Origin::Kanban => {
            for m in MIGRATIONS.iter().filter(|m| m.version > current) {
                tx.execute_batch(m.sql)?;
            }
            tx.execute_batch(INDEXES)?;
        }
        Origin::Adopted => adopt_in(tx, path)?,
    }
    tx.set_schema_version(LATEST)?;
    Ok(origin)
}

/// Adopts a board kanban did not create: adds, never drops or rewrites (see the module docs).
fn adopt_in(tx: &Tx<'_>, path: &Path) -> Result<()> {
    // Someone else's table of the same name is refused before anything is written.
    for (table, base) in BASE_COLUMNS {
        if !has_table(tx, table)? {
            continue;
        }
        let present = columns(tx, table)?;
        if let Some(column) = base.iter().find(|c| !present.iter().any(|p| p == *c)) {
            return Err(BoardError::Storage(StorageError::ForeignSchema {
                path: path.to_path_buf(),
                table,
                column,
            }));
        }
    }
    // Creates only tables that are missing; an existing table is left as it is.
    tx.execute_batch(MIGRATIONS[0].sql)?;
    tx.execute_batch(ATTACHMENTS_TABLE)?;
    // No `kanban_dispatchers` on a board of the original: it stays the original's schema plus
    // columns (its ticks are not recorded; `Board::records_ticks`).
    for (table, column, decl) in ADOPTED_COLUMNS {
        let present = columns(tx, table)?;
        if present.iter().any(|c| c == column) {
            continue;
        }
        tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
        let renamed = RENAMED_COLUMNS.iter().find(|(t, new, old, _)| {
            t == table && new == column && present.iter().any(|c| c == old)
        });
        if let Some((.., value)) = renamed {
            tx.execute_batch(&format!("UPDATE {table} SET {column} = {value}"))?;
        }
    }
    tx.execute_batch(ADOPTED_INDEXES)?;
    Ok(())
}

#[cfg(test)]
/// SQLite only: the SQLite schema, its migrations, journal modes and the adoption of the
/// original's board. The store-neutral schema behaviour is in `runtime/tests/conformance/`.
mod tests {
    use std::collections::BTreeSet;

    use rusqlite::Connection;

    use super::*;
    use crate::board::{Board, OpenOptions};

    fn names(list: &str) -> BTreeSet<String> {
        list.split(',').map(|c| c.trim().to_owned()).collect()
    }

    /// Adoption adds exactly the columns the runtime reads: its `SELECT` lists, minus the base.
    #[test]
    fn adopted_columns_are_exactly_what_the_runtime_reads() {
        let read = [
            ("tasks", names(crate::board::model::TASK_COLUMNS)),
            ("task_runs", names(crate::board::model::RUN_COLUMNS)),
            ("task_events", names(crate::board::events::EVENT_COLUMNS)),
            (
                "task_comments",
                names("id, task_id, author, body, created_at"),
            ),
            ("task_links", names("parent_id, child_id")),
            (
                "task_attachments",
                names(crate::board::attachments::ATTACHMENT_COLUMNS),
            ),
        ];
        for (table, wanted) in read {
            let base = BASE_COLUMNS.iter().find(|(t, _)| *t == table).unwrap().1;
            let mut covered: BTreeSet<String> = base.iter().map(|c| (*c).to_owned()).collect();
            covered.extend(
                ADOPTED_COLUMNS
                    .iter()
                    .filter(|(t, ..)| *t == table)
                    .map(|(_, c, _)| (*c).to_owned()),
            );
            assert_eq!(covered, wanted, "{table}");
        }
    }

    fn temp_board(sql: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(sql).unwrap();
        drop(conn);
        (dir, path)
    }

    fn pragma(conn: &Connection, name: &str) -> String {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| {
            r.get::<_, rusqlite::types::Value>(0)
        })
        .map(|v| match v {
            rusqlite::types::Value::Integer(i) => i.to_string(),
            rusqlite::types::Value::Text(t) => t,
            other => format!("{other:?}"),
        })
        .unwrap()
    }

    const BASE_ONLY: &str = "CREATE TABLE tasks (id TEXT PRIMARY KEY, title TEXT NOT NULL, \
         status TEXT NOT NULL, created_at INTEGER NOT NULL, spawn_failures INTEGER, \
         last_spawn_error TEXT); \
         CREATE TABLE task_runs (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL, \
         status TEXT NOT NULL, started_at INTEGER NOT NULL); \
         CREATE TABLE task_events (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL, \
         kind TEXT NOT NULL, created_at INTEGER NOT NULL); \
         CREATE INDEX idx_runs_status ON task_runs(status); \
         INSERT INTO tasks VALUES ('t_0000aaaa', 'old', 'ready', 1, 2, 'boom');";

    #[test]
    fn a_minimal_original_board_gains_every_read_column_and_keeps_its_journal_and_indexes() {
        let (_dir, path) = temp_board(BASE_ONLY);
        let board = Board::open_path(&path, &OpenOptions::default()).unwrap();
        let c = board.conn();
        for (table, list) in [
            ("tasks", crate::board::model::TASK_COLUMNS),
            ("task_runs", crate::board::model::RUN_COLUMNS),
            ("task_events", crate::board::events::EVENT_COLUMNS),
        ] {
            c.prepare(&format!("SELECT {list} FROM {table}")).unwrap();
        }
        let task = board.get_task("t_0000aaaa").unwrap();
        // The original's rename-by-copy, done the same way.
        assert_eq!(task.consecutive_failures, 2);
        assert_eq!(task.last_failure_error.as_deref(), Some("boom"));
        assert_eq!(pragma(c.as_sqlite().unwrap(), "journal_mode"), "delete");
        assert_eq!(pragma(c.as_sqlite().unwrap(), "application_id"), "0");
        assert_eq!(
            pragma(c.as_sqlite().unwrap(), "user_version"),
            LATEST.to_string()
        );
        let status_index: String = c
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'idx_runs_status'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            status_index,
            "CREATE INDEX idx_runs_status ON task_runs(status)"
        );
        // Missing indexes a query needs arrive in the original's (non-partial) shape.
        let tenant_index: String = c
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'idx_tasks_tenant'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(!tenant_index.contains("WHERE"), "{tenant_index}");
        assert!(board.fsck().unwrap().is_empty());
    }

    #[test]
    fn someone_elses_tasks_table_is_refused_and_left_unchanged() {
        let (_dir, path) = temp_board(
            "CREATE TABLE tasks (id INTEGER PRIMARY KEY, todo TEXT); INSERT INTO tasks VALUES (1, 'milk');",
        );
        let before = std::fs::read(&path).unwrap();
        let err = Board::open_path(&path, &OpenOptions::default()).unwrap_err();
        assert!(
            matches!(
                err,
                BoardError::Storage(StorageError::ForeignSchema {
                    table: "tasks",
                    column: "title",
                    ..
                })
            ),
            "{err}"
        );
        assert!(err.to_string().contains("not a kanban board"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn a_fresh_board_is_marked_as_ours_and_runs_wal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        let board = Board::open_path(&path, &OpenOptions::create()).unwrap();
        assert_eq!(
            pragma(board.conn().as_sqlite().unwrap(), "application_id"),
            APPLICATION_ID.to_string()
        );
        assert_eq!(
            pragma(board.conn().as_sqlite().unwrap(), "journal_mode"),
            "wal"
        );
    }

    /// A version-2 board of an older kanban without the marker: ours unless the original's own
    /// tables are there.
    #[test]
    fn older_kanban_boards_are_told_apart_by_the_originals_own_tables() {
        let v2 = |extra: &str| {
            let sql = format!(
                "{} {} {extra} PRAGMA user_version = 2;",
                MIGRATIONS[0].sql, MIGRATIONS[1].sql
            );
            temp_board(&sql)
        };
        let (_a, ours) = v2("");
        let board = Board::open_path(&ours, &OpenOptions::default()).unwrap();
        assert_eq!(
            pragma(board.conn().as_sqlite().unwrap(), "application_id"),
            APPLICATION_ID.to_string()
        );
        assert_eq!(
            pragma(board.conn().as_sqlite().unwrap(), "journal_mode"),
            "wal"
        );

        // An original board an older kanban adopted (and whose runs lack `worker_started_at`).
        let (_b, adopted) = temp_board(
            "CREATE TABLE tasks (id TEXT PRIMARY KEY, title TEXT NOT NULL, status TEXT NOT NULL, \
             created_at INTEGER NOT NULL); \
             CREATE TABLE task_runs (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL, \
             status TEXT NOT NULL, started_at INTEGER NOT NULL); \
             CREATE TABLE task_attachments (id INTEGER PRIMARY KEY, task_id TEXT NOT NULL, \
             filename TEXT NOT NULL, stored_path TEXT NOT NULL, created_at INTEGER NOT NULL); \
             PRAGMA user_version = 2;",
        );
        let board = Board::open_path(&adopted, &OpenOptions::default()).unwrap();
        assert_eq!(
            pragma(board.conn().as_sqlite().unwrap(), "application_id"),
            "0"
        );
        assert_eq!(
            pragma(board.conn().as_sqlite().unwrap(), "journal_mode"),
            "delete"
        );
        board
            .conn()
            .prepare(&format!(
                "SELECT {} FROM task_runs",
                crate::board::model::RUN_COLUMNS
            ))
            .unwrap();
    }
}
