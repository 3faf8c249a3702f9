//! The SQLite backend of the SQL layer (rusqlite, SQLite bundled): error classification and the
//! statements that only SQLite has (`PRAGMA user_version`, `PRAGMA data_version`). Opening a
//! board file — the file checks, pragmas, journal mode and busy handler — is `board::store`'s,
//! which hands the configured connection to [`super::Db::sqlite`].

use rusqlite::{Connection, ErrorCode};

use super::{ErrorKind, Result};

/// The linked SQLite's version as `MAJOR*1_000_000 + MINOR*1_000 + PATCH`.
pub(crate) fn version_number() -> i32 {
    rusqlite::version_number()
}

/// The linked SQLite's version as text (`3.50.4`).
pub(crate) fn version_text() -> &'static str {
    rusqlite::version()
}

/// The kind of a rusqlite error.
pub(super) fn kind(err: &rusqlite::Error) -> ErrorKind {
    if matches!(err, rusqlite::Error::QueryReturnedNoRows) {
        return ErrorKind::NoRows;
    }
    let rusqlite::Error::SqliteFailure(code, _) = err else {
        return ErrorKind::Other;
    };
    match code.code {
        ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => ErrorKind::Busy,
        ErrorCode::ConstraintViolation
            if matches!(
                code.extended_code,
                rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                    | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            ) =>
        {
            ErrorKind::UniqueViolation
        }
        ErrorCode::ReadOnly => ErrorKind::ReadOnly,
        ErrorCode::CannotOpen | ErrorCode::PermissionDenied => ErrorKind::CannotOpen,
        ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => ErrorKind::Corrupt,
        ErrorCode::DiskFull => ErrorKind::DiskFull,
        ErrorCode::SystemIoFailure => ErrorKind::IoFailure,
        _ => ErrorKind::Other,
    }
}

/// The columns SQLite names for a broken unique or primary key (`tasks.id` from "UNIQUE
/// constraint failed: tasks.id"); `None` for any other error.
pub(super) fn unique_columns(err: &rusqlite::Error) -> Option<&str> {
    match err {
        rusqlite::Error::SqliteFailure(_, Some(message))
            if kind(err) == ErrorKind::UniqueViolation =>
        {
            message.strip_prefix("UNIQUE constraint failed: ")
        }
        _ => None,
    }
}

/// `PRAGMA user_version`.
pub(super) fn user_version(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
}

/// `PRAGMA user_version = version`.
pub(super) fn set_user_version(conn: &Connection, version: i64) -> Result<()> {
    Ok(conn.execute_batch(&format!("PRAGMA user_version={version}"))?)
}

/// `PRAGMA data_version`: changes whenever another connection commits.
pub(super) fn data_version(conn: &Connection) -> Result<i64> {
    Ok(conn
        .prepare_cached("PRAGMA data_version")?
        .query_row([], |r| r.get(0))?)
}

/// `PRAGMA quick_check`: the problems it lists (none when it answers `ok`).
pub(super) fn quick_check(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt = conn.prepare("PRAGMA quick_check")?;
    let rows = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(rows.into_iter().filter(|r| r != "ok").collect())
}
