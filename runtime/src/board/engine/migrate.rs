//! Moving a board between engines (`kanban boards migrate SLUG --to URL`): copies a SQLite board
//! into an empty PostgreSQL database and switches the board to it; the home records the URL
//! (`crate::home::migrate`).
//!
//! What [`to_postgres`] does, in order (the README's "Moving a board to PostgreSQL"):
//! 1. opens the board file and takes SQLite's write lock (`BEGIN IMMEDIATE`), so nothing writes
//!    to it while it is copied; refuses ([`MigrateError::Running`]) while any task is `running`
//!    (a worker may still write to the file: let it finish, or `kanban reclaim` it), and a board
//!    holding a table kanban does not know ([`MigrateError::ForeignTables`]);
//! 2. connects to the target (the password from libpq's sources, see `crate::db::target`),
//!    begins one PostgreSQL transaction, takes the schema's advisory lock, and refuses a
//!    database that holds any table, view or sequence of its own ([`MigrateError::NotEmpty`]);
//! 3. creates the board schema (`pg_schema`), copies every row of every table (ids unchanged;
//!    columns the schema lacks, which only a board of the original Python system has, stay in
//!    the kept file; a nullable column of the schema such a board lacks is copied as NULL),
//!    advances each id sequence past both the largest id and SQLite's
//!    `sqlite_sequence` (an id is never reused), commits, and `ANALYZE`s the copy (the planner
//!    would otherwise plan for empty tables until autovacuum comes by);
//! 4. records the URL (without its password) in the board folder's `postgres.url`, releases the
//!    SQLite lock, folds the WAL into the file and renames it `kanban.db.migrated-<epoch>`: the
//!    old board stays whole next to its folder, and nothing opens it by mistake.
//!
//! Any failure before the commit leaves the PostgreSQL database as it was (empty) and the SQLite
//! file byte-identical. The caller holds the board's dispatch lock (a dispatcher ticking the
//! board is refused before this runs).
//!
//! Rows are written with multi-row `INSERT`s of up to [`ROWS_PER_INSERT`] rows (under
//! PostgreSQL's 65 535 parameters), each statement text prepared once.

use std::path::{Path, PathBuf};
use std::time::Instant;

use kanban_pgwire::{Client, Value};
use rusqlite::{Connection, OpenFlags};

use crate::board::engine::postgres::schema::{self, IDENTITY_TABLES, TABLES};
use crate::db::target::BoardLocation;
use crate::db::target::PgTarget;

/// The most rows one `INSERT` carries (fewer for a table whose columns would pass 60 000
/// parameters).
pub const ROWS_PER_INSERT: usize = 1000;

/// What a finished migration did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Migrated {
    pub slug: String,
    /// The target, without its password.
    pub url: String,
    /// Rows copied, per table.
    pub rows: std::collections::BTreeMap<String, u64>,
    /// Where the SQLite file now is.
    pub kept: PathBuf,
    /// The file that records the board's URL.
    pub url_file: PathBuf,
    /// Milliseconds from opening the SQLite board to the PostgreSQL commit.
    pub copy_ms: u64,
}

/// Why a migration did not happen (or, for [`MigrateError::Finish`], did not finish).
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error(
        "board `{slug}` already lives in PostgreSQL ({url}); `boards migrate` copies a SQLite board"
    )]
    AlreadyPostgres { slug: String, url: String },

    #[error("board `{slug}` does not exist (no {path}); nothing to migrate")]
    NotFound { slug: String, path: PathBuf },

    #[error(
        "board `{slug}` has {} running task(s) ({}); a worker may still write to it. Let them finish, stop the dispatcher, or `kanban reclaim` them, then migrate; nothing was changed",
        tasks.len(), tasks.join(", ")
    )]
    Running { slug: String, tasks: Vec<String> },

    #[error(
        "a dispatcher is ticking board `{slug}` (it holds {lock}); stop it (`kanban dispatch` exits on SIGTERM), then migrate; nothing was changed"
    )]
    DispatchLocked { slug: String, lock: PathBuf },

    #[error(
        "the target database {url} is not empty (it holds {}); `boards migrate` copies into an empty database only: create one (`createdb …`) or drop what is there; nothing was changed",
        relations.join(", ")
    )]
    NotEmpty { url: String, relations: Vec<String> },

    #[error(
        "{path} holds table(s) kanban does not know ({}); they would not be copied. Move them elsewhere first; nothing was changed",
        tables.join(", ")
    )]
    ForeignTables { path: PathBuf, tables: Vec<String> },

    #[error("cannot read the SQLite board {path}; nothing was changed")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },

    #[error("{path} is not a SQLite board file; nothing was changed")]
    NotSqlite { path: PathBuf },

    #[error("cannot connect to {url}; nothing was changed")]
    Connect {
        url: String,
        source: kanban_pgwire::Error,
    },

    #[error("cannot {step} in {url}; the transaction was rolled back, nothing was changed")]
    Postgres {
        step: String,
        url: String,
        source: kanban_pgwire::Error,
    },

    #[error(
        "cannot create the board schema in {url}; the transaction was rolled back, nothing was changed"
    )]
    Schema {
        url: String,
        source: schema::PgSchemaError,
    },

    #[error(
        "the board was copied into {url} and committed, but the switch did not finish: {what}. Until it does the board stays on its SQLite file; empty the database before migrating again"
    )]
    Finish {
        url: String,
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl MigrateError {
    /// True for a refusal of the board's or the target's state (exit 3), false for an error
    /// (exit 1).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            MigrateError::Running { .. }
                | MigrateError::DispatchLocked { .. }
                | MigrateError::NotEmpty { .. }
        )
    }
}

/// The path the SQLite file of `db` is renamed to after a migration at `now`.
pub fn kept_path(db: &Path, now: i64) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(format!(".migrated-{now}"));
    PathBuf::from(name)
}

/// The error of recording a migrated board's URL (the home's, passed through).
pub(crate) type RecordError = Box<dyn std::error::Error + Send + Sync>;

/// Copies the SQLite board `board` into `target` and switches the board to it (see the module
/// docs). `record_url` records the URL where the home looks for it (`crate::home::migrate`
/// passes the board folder's `postgres.url`) and returns that file; it runs while the SQLite
/// write lock is still held. `now` names the kept file.
pub fn to_postgres(
    board: &BoardLocation,
    target: &PgTarget,
    now: i64,
    record_url: impl FnOnce() -> Result<PathBuf, RecordError>,
) -> Result<Migrated, MigrateError> {
    if let Some(current) = board.postgres() {
        return Err(MigrateError::AlreadyPostgres {
            slug: board.slug.clone(),
            url: current.redacted(),
        });
    }
    let path = board.db_path.as_path();
    if !path.is_file() {
        return Err(MigrateError::NotFound {
            slug: board.slug.clone(),
            path: path.to_path_buf(),
        });
    }
    if !is_sqlite_file(path) {
        return Err(MigrateError::NotSqlite {
            path: path.to_path_buf(),
        });
    }
    let started = Instant::now();
    let sqlite_err = |source| MigrateError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite_err)?;
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .map_err(sqlite_err)?;
    // SQLite's write lock: no other process commits to the board until it is released.
    conn.execute_batch("BEGIN IMMEDIATE").map_err(sqlite_err)?;
    let copied = copy_locked(&conn, path, board, target);
    let copied = match copied {
        Ok(copied) => copied,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e);
        }
    };
    let copy_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let url = target.redacted();
    let finish =
        |what: &str, source: Box<dyn std::error::Error + Send + Sync>| MigrateError::Finish {
            url: url.clone(),
            what: what.to_owned(),
            source,
        };
    let url_file = match record_url() {
        Ok(file) => file,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(finish("recording the URL", e));
        }
    };
    // The board is switched: release the lock, fold the WAL into the file, keep the file aside.
    let _ = conn.execute_batch("ROLLBACK");
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    drop(conn);
    let kept = kept_path(path, now);
    std::fs::rename(path, &kept).map_err(|e| finish("renaming the SQLite file", Box::new(e)))?;
    for suffix in ["-wal", "-shm"] {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        let mut kept_side = kept.as_os_str().to_owned();
        kept_side.push(suffix);
        if Path::new(&side).exists() {
            let _ = std::fs::rename(&side, &kept_side);
        }
    }
    Ok(Migrated {
        slug: board.slug.clone(),
        url,
        rows: copied.into_iter().collect(),
        kept,
        url_file,
        copy_ms,
    })
}

/// True when `path` starts with SQLite's header.
pub(crate) fn is_sqlite_file(path: &Path) -> bool {
    use std::io::Read;
    let mut header = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok_and(|()| &header == b"SQLite format 3\0")
}

/// Everything under SQLite's write lock: the refusals, then the copy in one PostgreSQL
/// transaction.
fn copy_locked(
    conn: &Connection,
    path: &Path,
    board: &BoardLocation,
    target: &PgTarget,
) -> Result<Vec<(String, u64)>, MigrateError> {
    let sqlite_err = |source| MigrateError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let running: Vec<String> = conn
        .prepare("SELECT id FROM tasks WHERE status = 'running' ORDER BY id")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(sqlite_err)?;
    if !running.is_empty() {
        return Err(MigrateError::Running {
            slug: board.slug.clone(),
            tasks: running,
        });
    }
    copy_into_empty(conn, path, target)
}

/// Copies the SQLite board on `conn` (the file at `path`) into `target`'s empty database in one
/// PostgreSQL transaction: refused for a board holding a table kanban does not know and for a
/// database that is not empty; every row with its id, the sequences advanced past them. The
/// copy of `boards migrate` and of `boards import` into PostgreSQL
/// (`crate::board::engine::transfer`).
pub(crate) fn copy_into_empty(
    conn: &Connection,
    path: &Path,
    target: &PgTarget,
) -> Result<Vec<(String, u64)>, MigrateError> {
    let sqlite_err = |source| MigrateError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let foreign = foreign_tables(conn).map_err(sqlite_err)?;
    if !foreign.is_empty() {
        return Err(MigrateError::ForeignTables {
            path: path.to_path_buf(),
            tables: foreign,
        });
    }
    let url = target.redacted();
    let config = target
        .connect_config()
        .map_err(|source| MigrateError::Connect {
            url: url.clone(),
            source,
        })?;
    let mut client = Client::connect(&config).map_err(|source| MigrateError::Connect {
        url: url.clone(),
        source,
    })?;
    let pg = |step: &str| {
        let url = url.clone();
        let step = step.to_owned();
        move |source| MigrateError::Postgres { step, url, source }
    };
    client.batch("BEGIN").map_err(pg("begin a transaction"))?;
    let result = copy_in(conn, path, &mut client, &url);
    match result {
        Ok(rows) => {
            client.batch("COMMIT").map_err(pg("commit the copy"))?;
            // Statistics for the server's planner, which a bulk copy leaves it without (the
            // dispatcher's first plans would be made for empty tables); only an optimisation,
            // so a failure here does not undo the migration.
            let _ = client.batch("ANALYZE");
            Ok(rows)
        }
        Err(e) => {
            let _ = client.batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Tables of the SQLite board that are neither the board's nor SQLite's own.
pub(crate) fn foreign_tables(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let names: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
             ORDER BY name",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(names
        .into_iter()
        .filter(|n| !TABLES.iter().any(|(t, _)| t == n))
        .collect())
}

/// Inside the open PostgreSQL transaction: the emptiness check, the schema, the rows, the
/// sequences.
fn copy_in(
    conn: &Connection,
    path: &Path,
    client: &mut Client,
    url: &str,
) -> Result<Vec<(String, u64)>, MigrateError> {
    let pg = |step: String| {
        let url = url.to_owned();
        move |source| MigrateError::Postgres { step, url, source }
    };
    client
        .execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[Value::Int(schema::ADVISORY_LOCK)],
        )
        .map_err(pg("take the schema lock".into()))?;
    let relations = client
        .query(
            "SELECT n.nspname || '.' || c.relname FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') \
             AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
             AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%' \
             ORDER BY 1 LIMIT 5",
            &[],
        )
        .map_err(pg("list the target's tables".into()))?;
    if !relations.is_empty() {
        return Err(MigrateError::NotEmpty {
            url: url.to_owned(),
            relations: relations
                .iter()
                .filter_map(|r| r.get(0).and_then(Value::as_str).map(str::to_owned))
                .collect(),
        });
    }
    schema::migrate(client).map_err(|source| MigrateError::Schema {
        url: url.to_owned(),
        source,
    })?;
    let sqlite_err = |source| MigrateError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let mut counts = Vec::new();
    for (table, columns) in TABLES {
        let copied = copy_table(conn, client, table, columns).map_err(|e| match e {
            CopyError::Sqlite(source) => sqlite_err(source),
            CopyError::Pg(source) => pg(format!("copy the rows of {table}"))(source),
        })?;
        counts.push(((*table).to_owned(), copied));
    }
    let has_sequence_table: bool = conn
        .query_row(
            "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'",
            [],
            |r| r.get(0),
        )
        .map_err(sqlite_err)?;
    for table in IDENTITY_TABLES {
        let max_id: i64 = conn
            .query_row(
                &format!("SELECT COALESCE(MAX(id), 0) FROM {table}"),
                [],
                |r| r.get(0),
            )
            .map_err(sqlite_err)?;
        let seq: i64 = if has_sequence_table {
            conn.query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = ?1",
                [table],
                |r| r.get(0),
            )
            .map_err(sqlite_err)?
        } else {
            0
        };
        let last = max_id.max(seq);
        // `setval(seq, n, true)`: the next id is n + 1; with nothing used yet, 1.
        client
            .execute(
                &format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', 'id')::regclass, GREATEST($1, 1), $2::int8 <> 0)"
                ),
                &[Value::Int(last), Value::Int(i64::from(last > 0))],
            )
            .map_err(pg(format!("advance the id sequence of {table}")))?;
    }
    Ok(counts)
}

enum CopyError {
    Sqlite(rusqlite::Error),
    Pg(kanban_pgwire::Error),
}

/// Copies one table in key order with multi-row `INSERT`s; returns the rows copied.
/// The order a board table is copied in, either way between the stores: tasks in insertion
/// order (`rowid`: the PostgreSQL `tasks.rowid` identity is handed out in copy order, and the
/// board orders same-second tasks by it), the rest by their key.
pub(super) fn copy_order(table: &str) -> &'static str {
    match table {
        "task_links" => "parent_id, child_id",
        "tasks" => "rowid",
        "kanban_dispatchers" => "dispatcher",
        _ => "id",
    }
}

fn copy_table(
    conn: &Connection,
    client: &mut Client,
    table: &str,
    columns: &[&str],
) -> Result<u64, CopyError> {
    // A column an adopted board of the original lacks is copied as NULL (kanban reads none of
    // them without a default for NULL).
    let present: Vec<String> = conn
        .prepare(&format!("PRAGMA table_info({table})"))
        .and_then(|mut s| s.query_map([], |r| r.get(1))?.collect())
        .map_err(CopyError::Sqlite)?;
    // A table the board predates (`task_attachments` before version 6) has no rows to copy.
    if present.is_empty() {
        return Ok(0);
    }
    let list = columns
        .iter()
        .map(|c| {
            if present.iter().any(|p| p == c) {
                (*c).to_owned()
            } else {
                format!("NULL AS {c}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let order = copy_order(table);
    let mut stmt = conn
        .prepare(&format!("SELECT {list} FROM {table} ORDER BY {order}"))
        .map_err(CopyError::Sqlite)?;
    let per_insert = ROWS_PER_INSERT.min(60_000 / columns.len()).max(1);
    let mut rows = stmt.query([]).map_err(CopyError::Sqlite)?;
    let mut params: Vec<Value> = Vec::with_capacity(per_insert * columns.len());
    let mut pending = 0usize;
    let mut total = 0u64;
    let flush = |client: &mut Client, params: &mut Vec<Value>, n: usize| {
        if n == 0 {
            return Ok(());
        }
        client
            .execute(&insert_sql(table, columns, n), params)
            .map_err(CopyError::Pg)?;
        params.clear();
        Ok(())
    };
    while let Some(row) = rows.next().map_err(CopyError::Sqlite)? {
        for i in 0..columns.len() {
            params.push(to_pg(row.get_ref(i).map_err(CopyError::Sqlite)?));
        }
        pending += 1;
        total += 1;
        if pending == per_insert {
            flush(client, &mut params, pending)?;
            pending = 0;
        }
    }
    flush(client, &mut params, pending)?;
    Ok(total)
}

/// `INSERT INTO table (cols) VALUES ($1, …), (…)` for `rows` rows.
fn insert_sql(table: &str, columns: &[&str], rows: usize) -> String {
    let n = columns.len();
    let mut sql = format!("INSERT INTO {table} ({}) VALUES ", columns.join(", "));
    for r in 0..rows {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for c in 0..n {
            if c > 0 {
                sql.push_str(", ");
            }
            sql.push('$');
            sql.push_str(&(r * n + c + 1).to_string());
        }
        sql.push(')');
    }
    sql
}

/// A SQLite value as a PostgreSQL parameter (text as text, integers as `int8`).
fn to_pg(value: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_number_their_parameters_row_by_row() {
        assert_eq!(
            insert_sql("t", &["a", "b"], 2),
            "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)"
        );
        assert!(kept_path(Path::new("/r/kanban.db"), 17).ends_with("kanban.db.migrated-17"));
    }
}
