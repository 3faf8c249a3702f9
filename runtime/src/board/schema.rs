//! The board schema: ordered, additive migrations versioned with `PRAGMA user_version`.
//!
//! Table and column names are the original's (DESIGN §2), which keeps boards interchangeable.
//! Migration `n` brings a board from version `n - 1` to `n`; a migration only ever adds tables and
//! columns, never renames or drops them (indexes, which hold no data, may be reshaped: see version
//! 2 below). Migrations run inside one `BEGIN IMMEDIATE` transaction that re-reads the version
//! first, so two processes opening a fresh board at once migrate it exactly once. A board whose version is newer than [`LATEST`] is refused.
//!
//! A board created by the original (version 0 with a `tasks` table) is adopted: version 1 uses
//! `CREATE TABLE IF NOT EXISTS`, then adds any column of ours the old table lacks.
//!
//! Version 2 reshapes indexes only, for write speed (DESIGN §10: every index a transition touches
//! is one more page in the WAL of that commit). It makes `idx_tasks_idempotency` and
//! `idx_tasks_tenant` partial (`… WHERE col IS NOT NULL`: almost every task has neither, and an
//! equality lookup on the column implies the condition, so the lookups still use them) and drops
//! `idx_runs_status` and `idx_events_run`, which no query reads (checked with `EXPLAIN QUERY PLAN`;
//! runs are found by task or id, events by task or id). This keeps the additive promise where it
//! matters: an index holds no data, so no table, column or row changes and nothing can be lost;
//! every name the original reads is still there, and a board at version 2 stays interchangeable
//! with the original (which recreates any index it wants with `CREATE INDEX IF NOT EXISTS`, at
//! worst costing us the pages this migration saved). [`INDEXES`] describes the same end state for
//! a fresh board, so fresh and migrated boards have identical indexes.

/// One migration: its target version and its SQL.
pub(crate) struct Migration {
    pub version: i64,
    pub sql: &'static str,
}

/// Every migration, in order. Append only.
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
];

/// Indexes created after every migration (idempotent), once the columns they cover exist.
pub(crate) const INDEXES: &str = r#"
CREATE INDEX IF NOT EXISTS idx_tasks_status ON tasks(status);
CREATE INDEX IF NOT EXISTS idx_tasks_idempotency ON tasks(idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_tasks_tenant ON tasks(tenant) WHERE tenant IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_links_child ON task_links(child_id);
CREATE INDEX IF NOT EXISTS idx_links_parent ON task_links(parent_id);
CREATE INDEX IF NOT EXISTS idx_comments_task ON task_comments(task_id, created_at);
CREATE INDEX IF NOT EXISTS idx_events_task ON task_events(task_id, created_at);
CREATE INDEX IF NOT EXISTS idx_runs_task ON task_runs(task_id, started_at);
"#;

/// The schema version this build writes.
pub(crate) const LATEST: i64 = 2;

/// Columns of ours that an adopted (original) board may lack, with their definitions.
pub(crate) const ADOPTED_COLUMNS: &[(&str, &str, &str)] = &[
    ("tasks", "tenant", "TEXT"),
    ("tasks", "result", "TEXT"),
    ("tasks", "branch_name", "TEXT"),
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
    ("task_events", "run_id", "INTEGER"),
];
