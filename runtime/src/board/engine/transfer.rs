//! The database half of `kanban boards export` / `boards import`: a board of either store as one
//! SQLite file (the snapshot a board archive carries), and a snapshot checked, retargeted and
//! turned back into a board of either store. The archive itself (its manifest, the attachment
//! and log files, the checks of its entries) is the home's (`crate::home::transfer`).
//!
//! * [`snapshot`]: a SQLite board is copied with `VACUUM INTO` (one consistent read, the live
//!   board never locked for writers); a PostgreSQL board is read in one `REPEATABLE READ`
//!   transaction into a fresh SQLite board of this build's schema, every row with its id, tasks
//!   in their insertion order.
//! * [`check_snapshot`]: a file from an archive is a SQLite database whose `integrity_check`
//!   passes, of a schema version this build knows, holding no table kanban does not know.
//! * [`snapshot_to_postgres`]: the copy `boards migrate` makes
//!   ([`super::migrate::copy_into_empty`]: an empty database only, ids kept, sequences advanced).
//!
//! Ids are kept both ways, so an exported and imported board compares equal to its source.

use std::path::{Path, PathBuf};

use kanban_pgwire::{Client, Value};
use rusqlite::{Connection, OpenFlags};

use super::migrate::{self, MigrateError};
use super::postgres::schema::TABLES;
use crate::board::{Board, BoardError, OpenOptions};
use crate::db::target::{BoardLocation, PgTarget};

/// Why a snapshot was not made or not accepted.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error(transparent)]
    Board(#[from] BoardError),

    #[error(transparent)]
    Migrate(#[from] MigrateError),

    #[error("cannot read or write the board snapshot {path}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },

    #[error("cannot read the PostgreSQL board {url} ({step})")]
    Postgres {
        url: String,
        step: String,
        #[source]
        source: kanban_pgwire::Error,
    },

    #[error("the board snapshot in the archive is damaged: {reason}")]
    BadSnapshot { reason: String },
}

fn sqlite_err(path: &Path) -> impl Fn(rusqlite::Error) -> TransferError + '_ {
    move |source| TransferError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes the board at `location` as a new SQLite file `dest` (which must not exist) and
/// returns the rows copied per table. The board is opened first, so an older schema is brought
/// up to this build's.
pub fn snapshot(
    location: &BoardLocation,
    dest: &Path,
) -> Result<Vec<(String, u64)>, TransferError> {
    let board = Board::open(location, &OpenOptions::default())?;
    if let Some(target) = location.postgres() {
        drop(board);
        Board::create_new(dest, &OpenOptions::create())?;
        from_postgres(target, dest)?;
    } else {
        let dest_text = dest.to_string_lossy().into_owned();
        let conn = board
            .conn()
            .as_sqlite()
            .ok_or_else(|| TransferError::BadSnapshot {
                reason: "a SQLite board opened without its SQLite connection".to_owned(),
            })?;
        conn.execute("VACUUM INTO ?1", [dest_text])
            .map_err(sqlite_err(dest))?;
    }
    // One self-contained file: the WAL folded in and the rollback journal chosen, so the file
    // alone is the whole board wherever the archive goes.
    let conn = open_file(dest, true)?;
    conn.query_row("PRAGMA journal_mode=DELETE", [], |_| Ok(()))
        .map_err(sqlite_err(dest))?;
    drop(conn);
    row_counts(dest)
}

/// Rows per board table of the SQLite file at `path`.
pub fn row_counts(path: &Path) -> Result<Vec<(String, u64)>, TransferError> {
    let conn = open_file(path, false)?;
    let mut out = Vec::new();
    for (table, _) in TABLES {
        let n: i64 = conn
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .map_err(sqlite_err(path))?;
        out.push(((*table).to_owned(), u64::try_from(n).unwrap_or(0)));
    }
    Ok(out)
}

fn open_file(path: &Path, write: bool) -> Result<Connection, TransferError> {
    let flags = if write {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(path, flags).map_err(sqlite_err(path))?;
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .map_err(sqlite_err(path))?;
    Ok(conn)
}

/// Copies every row of the PostgreSQL board `target` into the empty SQLite board at `dest`.
fn from_postgres(target: &PgTarget, dest: &Path) -> Result<(), TransferError> {
    let url = target.redacted();
    let pg = |step: &str| {
        let url = url.clone();
        let step = step.to_owned();
        move |source| TransferError::Postgres { url, step, source }
    };
    let config = target.connect_config().map_err(pg("connect"))?;
    let mut client = Client::connect(&config).map_err(pg("connect"))?;
    client
        .batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .map_err(pg("begin a transaction"))?;
    let mut conn = open_file(dest, true)?;
    let tx = conn.transaction().map_err(sqlite_err(dest))?;
    for (table, columns) in TABLES {
        copy_table_from(&mut client, &tx, table, columns).map_err(|e| match e {
            Copy::Pg(source) => pg(&format!("read {table}"))(source),
            Copy::Sqlite(source) => sqlite_err(dest)(source),
        })?;
    }
    tx.commit().map_err(sqlite_err(dest))?;
    let _ = client.batch("COMMIT");
    Ok(())
}

enum Copy {
    Pg(kanban_pgwire::Error),
    Sqlite(rusqlite::Error),
}

/// One table from PostgreSQL into SQLite, in the order [`migrate`] copies the other way.
fn copy_table_from(
    client: &mut Client,
    tx: &rusqlite::Transaction<'_>,
    table: &str,
    columns: &[&str],
) -> Result<(), Copy> {
    let order = super::migrate::copy_order(table);
    let list = columns.join(", ");
    let rows = client
        .query(&format!("SELECT {list} FROM {table} ORDER BY {order}"), &[])
        .map_err(Copy::Pg)?;
    let marks = vec!["?"; columns.len()].join(", ");
    let mut insert = tx
        .prepare(&format!("INSERT INTO {table} ({list}) VALUES ({marks})"))
        .map_err(Copy::Sqlite)?;
    for row in &rows {
        let values: Vec<rusqlite::types::Value> = (0..columns.len())
            .map(|i| to_sqlite(row.get(i).unwrap_or(&Value::Null)))
            .collect();
        insert
            .execute(rusqlite::params_from_iter(values))
            .map_err(Copy::Sqlite)?;
    }
    Ok(())
}

fn to_sqlite(value: &Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match value {
        Value::Null => V::Null,
        Value::Int(i) => V::Integer(*i),
        Value::Real(f) => V::Real(*f),
        Value::Text(t) => V::Text(t.clone()),
        Value::Blob(b) => V::Blob(b.clone()),
    }
}

/// Checks a snapshot taken from an archive (see the module docs); nothing is written to it.
pub fn check_snapshot(path: &Path) -> Result<(), TransferError> {
    let bad = |reason: String| TransferError::BadSnapshot { reason };
    if !migrate::is_sqlite_file(path) {
        return Err(bad("board.sqlite is not a SQLite database".to_owned()));
    }
    let conn = open_file(path, false)?;
    let problems: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| bad(format!("integrity_check failed ({e})")))?;
    if problems != ["ok"] {
        return Err(bad(format!("integrity_check: {}", problems.join("; "))));
    }
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sqlite_err(path))?;
    let latest = super::sqlite::schema::LATEST;
    if version > latest {
        return Err(bad(format!(
            "its schema version {version} is newer than this build's {latest}; upgrade kanban"
        )));
    }
    if version < latest {
        return Err(bad(format!(
            "its schema version {version} is not this build's {latest} (an export always carries the current schema)"
        )));
    }
    let foreign = migrate::foreign_tables(&conn).map_err(sqlite_err(path))?;
    if !foreign.is_empty() {
        return Err(bad(format!(
            "it holds table(s) kanban does not know ({})",
            foreign.join(", ")
        )));
    }
    Ok(())
}

/// One attachment row of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentRow {
    pub id: i64,
    pub task_id: String,
    pub stored_path: String,
}

/// Every attachment row of the snapshot at `path`, by id.
pub fn attachment_rows(path: &Path) -> Result<Vec<AttachmentRow>, TransferError> {
    let conn = open_file(path, false)?;
    conn.prepare("SELECT id, task_id, stored_path FROM task_attachments ORDER BY id")
        .and_then(|mut s| {
            s.query_map([], |r| {
                Ok(AttachmentRow {
                    id: r.get(0)?,
                    task_id: r.get(1)?,
                    stored_path: r.get(2)?,
                })
            })?
            .collect()
        })
        .map_err(sqlite_err(path))
}

/// The ids of every task of the snapshot at `path`.
pub fn task_ids(path: &Path) -> Result<Vec<String>, TransferError> {
    let conn = open_file(path, false)?;
    conn.prepare("SELECT id FROM tasks ORDER BY id")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(sqlite_err(path))
}

/// Points the attachment rows of the snapshot at `path` at their files' new places
/// (`(id, stored_path)` pairs), in one transaction.
pub fn set_stored_paths(path: &Path, moved: &[(i64, String)]) -> Result<(), TransferError> {
    let mut conn = open_file(path, true)?;
    let tx = conn.transaction().map_err(sqlite_err(path))?;
    for (id, stored) in moved {
        tx.execute(
            "UPDATE task_attachments SET stored_path = ?1 WHERE id = ?2",
            rusqlite::params![stored, id],
        )
        .map_err(sqlite_err(path))?;
    }
    tx.commit().map_err(sqlite_err(path))
}

/// Copies the checked snapshot at `path` into `target`'s empty database (the copy of `boards
/// migrate`); returns the rows copied per table.
pub fn snapshot_to_postgres(
    path: &Path,
    target: &PgTarget,
) -> Result<Vec<(String, u64)>, TransferError> {
    let conn = open_file(path, false)?;
    Ok(migrate::copy_into_empty(&conn, path, target)?)
}
