//! The board's error type. Errors are for input that cannot be honoured or a store that cannot be
//! used (exit 1 in the CLI); a transition that *lost* (a compare-and-swap that matched no row, a
//! stale run, a live claim) is not an error but a typed outcome (see [`super::Refusal`]).
//!
//! Every message names what went wrong (task id, board, path) and says what to do.

use std::path::PathBuf;

/// Anything a board can fail with: a domain error, or its store's ([`StorageError`]).
#[derive(Debug, thiserror::Error)]
pub enum BoardError {
    #[error("no task `{id}` on this board; `kanban list` shows the task ids")]
    TaskNotFound { id: String },

    #[error("parent task `{id}` does not exist on this board; `kanban list` shows the task ids")]
    ParentNotFound { id: String },

    #[error("a task title must not be blank")]
    BlankTitle,

    #[error("a comment body must not be blank")]
    BlankComment,

    #[error("a block reason must not be blank")]
    BlankReason,

    #[error("an unblock reason must not be blank (leave it out for none)")]
    BlankUnblockReason,

    #[error("an assignee must not be blank")]
    BlankAssignee,

    #[error("a task cannot be created both in triage and blocked; pick one")]
    ConflictingInitialStatus,

    #[error("{what} must be a whole number of seconds from 1 to {max}, got {value}", max = super::limits::MAX_SECONDS)]
    InvalidSeconds { what: String, value: String },

    #[error(
        "unknown block kind {kind:?}; use one of: dependency, needs_input, capability, transient"
    )]
    InvalidBlockKind { kind: String },

    #[error(
        "unknown status {status:?}; use one of: triage, todo, scheduled, ready, running, blocked, review, done, archived"
    )]
    InvalidStatus { status: String },

    #[error("a task cannot depend on itself (`{id}`)")]
    SelfLink { id: String },

    #[error(
        "linking `{parent}` -> `{child}` would create a dependency cycle (`{parent}` already depends on `{child}`)"
    )]
    Cycle { parent: String, child: String },

    #[error("corrupt row in {table}: {message}; run `kanban fsck`")]
    CorruptRow {
        table: &'static str,
        message: String,
    },

    #[error(
        "task id prefix `{prefix}` is too short; give at least {min} characters of the id after `t_` (`kanban list` shows the ids)"
    )]
    IdPrefixTooShort { prefix: String, min: usize },

    #[error("task id prefix `{prefix}` is ambiguous; it matches: {}", matches.join(", "))]
    AmbiguousId {
        prefix: String,
        matches: Vec<String>,
    },

    #[error("cannot decompose: {problem}; nothing was changed")]
    InvalidDecomposition { problem: String },

    #[error("nothing to edit; give a new title, body, priority, retry limit or workspace")]
    NothingToEdit,

    #[error(transparent)]
    Workspace(#[from] crate::workspace::SpecError),

    #[error("a provider override needs a model override; name the model too")]
    ProviderWithoutModel,

    #[error(
        "unknown reasoning level {value:?}; use one of: none, minimal, low, medium, high, xhigh"
    )]
    InvalidReasoning { value: String },

    #[error(
        "skill name cannot contain a comma: {name:?} (pass each skill as its own name instead of a comma-joined string)"
    )]
    SkillWithComma { name: String },

    #[error("{names}, not skills: toolsets configure a profile; pass skill names only")]
    SkillIsToolset { names: String },

    #[error("skill name {name:?} is not a plain name (no path separators, no leading dot)")]
    SkillNotAName { name: String },

    #[error("{what} is only for a worktree workspace, and this one is {kind}")]
    NotAWorktree {
        what: &'static str,
        kind: crate::workspace::Kind,
    },

    #[error(
        "task `{id}` has already run ({runs} run(s)): its workspace is where that work is, so it \
         cannot change; create a new task instead"
    )]
    WorkspaceFixed { id: String, runs: i64 },

    #[error("a task's retry limit must be a whole number from 1 to 1000, got {value}")]
    InvalidMaxRetries { value: i64 },

    #[error("cannot encode an event payload")]
    Payload(#[from] serde_json::Error),

    /// The store could not be opened, read or written (see [`StorageError`]).
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// What the store a board lives in can fail with: opening it (the file, the server), its schema,
/// a statement, the busy budget. A domain error (a task that does not exist, a blank title) is a
/// [`BoardError`]; a connection's own failure is a [`crate::db::Error`], carried here.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error(
        "board `{slug}` does not exist (no {path}); create it with `kanban boards create {slug}`"
    )]
    BoardNotFound { slug: String, path: PathBuf },

    #[error("something already exists at {path}; nothing was changed")]
    FileExists { path: PathBuf },

    #[error(
        "{path} is not a SQLite database (its first bytes are not `SQLite format 3`); it was left untouched. Point the board's location (the kanban home, HERMES_KANBAN_DB) at a board database, or move the file away"
    )]
    NotSqlite { path: PathBuf },

    #[error(
        "{path} is a {kind}, not a board database file; nothing was opened or written. Point the board's location (the kanban home, HERMES_KANBAN_DB) at a regular file (a new board is created where nothing exists)"
    )]
    NotRegularFile { path: PathBuf, kind: &'static str },

    #[error(
        "there is no board database at {path} and nothing was created; check the kanban home and HERMES_KANBAN_DB, or create it (`kanban init` for the default board, `kanban boards create SLUG` for another)"
    )]
    MissingFile { path: PathBuf },

    #[error(
        "cannot create the folder {path} for the board; make its parent writable by this user, or choose another kanban home (HERMES_KANBAN_HOME)"
    )]
    CannotCreateFolder {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error(
        "cannot open the board {path}: the file or its folder is missing or not accessible to this user; SQLite needs to read the file and to create {path}-wal and {path}-shm next to it. Fix the permissions, or point the kanban home or HERMES_KANBAN_DB elsewhere"
    )]
    CannotOpen { path: PathBuf },

    #[error(
        "cannot write the board {path}: the file or its folder is read-only for this user (SQLite writes the file and creates {path}-wal and {path}-shm next to it); nothing was changed. Make both writable, or run the command as their owner"
    )]
    ReadOnly { path: PathBuf },

    #[error(
        "board {path} has schema version {found} and this kanban uses {supported}; it can be upgraded only by a command that may write it (e.g. `kanban init`), and this one could open it only read-only"
    )]
    OutdatedReadOnly {
        path: PathBuf,
        found: i64,
        supported: i64,
    },

    #[error(
        "the linked SQLite {version} has the WAL-reset corruption bug (3.7.0 to 3.51.2, fixed in 3.51.3 and backported to 3.50.7); refusing to open {path} in WAL mode. Build kanban with the bundled SQLite (rusqlite feature `bundled`)"
    )]
    VulnerableSqlite { version: String, path: PathBuf },

    #[error(
        "board {path} has schema version {found}, newer than this kanban understands ({supported}); upgrade kanban"
    )]
    SchemaTooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },

    #[error(
        "{path} has a `{table}` table without the column `{column}` every kanban board has: it is not a kanban board, and nothing was changed"
    )]
    ForeignSchema {
        path: PathBuf,
        table: &'static str,
        column: &'static str,
    },

    #[error("SQLite failed on the board {path}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: crate::db::Error,
    },

    /// A statement failed (a lost PostgreSQL connection is [`BoardError::Storage(StorageError::PgConnectionLost)`]
    /// instead: see the `From` conversion).
    #[error("a board query failed")]
    Sql(#[source] crate::db::Error),

    #[error("the PostgreSQL board {url} failed")]
    Postgres {
        /// The board's URL without its password.
        url: String,
        #[source]
        source: crate::db::Error,
    },

    #[error(
        "the PostgreSQL database {url} holds no kanban board and nothing was created there; {advice}"
    )]
    PgNoBoard {
        /// The board's URL without its password.
        url: String,
        /// What to do, from where the URL was found ([`BoardError::no_board_advice`]).
        advice: String,
    },

    #[error(
        "cannot write the PostgreSQL board {url}: {}",
        if *by_server {
            "the server refuses writes in this session (a hot standby, or `default_transaction_read_only` set for this role or database); nothing was changed. Point the board at the primary server, or use a role that may write"
        } else {
            "this command opened it for reading only; nothing was changed"
        }
    )]
    PgReadOnly {
        /// The board's URL without its password.
        url: String,
        /// The server refused the write (else kanban opened the board read-only).
        by_server: bool,
        #[source]
        source: Option<crate::db::Error>,
    },

    #[error(
        "cannot connect to the PostgreSQL board {url}: the server is down, unreachable, or did not answer within the connect timeout (the URL's `connect_timeout`, else {} s); nothing was changed. Check the server (`pg_isready`) and run the command again",
        crate::db::target::DEFAULT_CONNECT_TIMEOUT.as_secs()
    )]
    PgUnreachable {
        /// The board's URL without its password.
        url: String,
        #[source]
        source: crate::db::Error,
    },

    #[error(
        "lost the connection to the PostgreSQL board {url}: the server closed it or is unreachable (stopped, restarting, or the network is down), and it rolls back whatever this command had not committed. A dispatcher reconnects by itself on a later tick; run the command again once the server answers (`pg_isready` tells)"
    )]
    PgConnectionLost {
        /// The board's URL without its password.
        url: String,
        #[source]
        source: crate::db::Error,
    },

    #[error("cannot bring the PostgreSQL board {url} to the board schema")]
    PgSchema {
        /// The board's URL without its password.
        url: String,
        #[source]
        source: super::engine::postgres::schema::PgSchemaError,
    },

    #[error("the operating system's random number generator failed")]
    Random {
        #[source]
        source: std::io::Error,
    },

    #[error("cannot {action} {path}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "a board write transaction is already open on this connection; run the inner step inside the outer transaction instead of nesting `Board::write`"
    )]
    NestedWrite,

    #[error(
        "the board {path} stayed locked by another writer for the whole busy timeout ({timeout_ms} ms, {tries} attempts to {what}); nothing was changed. Try again later, or raise HERMES_KANBAN_BUSY_TIMEOUT_MS (milliseconds)"
    )]
    Busy {
        path: PathBuf,
        what: &'static str,
        timeout_ms: u64,
        tries: u32,
    },

    #[error(
        "invalid {key}={value:?}: expected a whole number of milliseconds from 1 to {max} (default 120000)"
    )]
    InvalidBusyTimeout {
        key: &'static str,
        value: String,
        max: u64,
    },

    /// A `postgres://` location that cannot name a board (see `crate::db::target`).
    #[error(transparent)]
    Target(Box<crate::db::target::TargetError>),
}

/// Result alias of the board.
pub type Result<T, E = BoardError> = std::result::Result<T, E>;

/// Every statement's failure becomes a board error here (the `?` of every read and write of
/// `board/`): a lost PostgreSQL connection, which names its board, is
/// [`BoardError::Storage(StorageError::PgConnectionLost)`] whatever the statement was (a read of `kanban list` as much as
/// a transition's write); anything else is [`BoardError::Storage(StorageError::Sql)`].
impl From<crate::db::target::TargetError> for BoardError {
    fn from(e: crate::db::target::TargetError) -> Self {
        BoardError::Storage(StorageError::Target(Box::new(e)))
    }
}

impl From<crate::db::Error> for BoardError {
    fn from(source: crate::db::Error) -> BoardError {
        match source.lost_database() {
            Some(url) => BoardError::Storage(StorageError::PgConnectionLost {
                url: url.to_owned(),
                source,
            }),
            None => BoardError::Storage(StorageError::Sql(source)),
        }
    }
}

impl BoardError {
    /// What to do about a PostgreSQL database that holds no board, by where its URL was found
    /// (`slug`: the board's, when known).
    pub(crate) fn no_board_advice(
        source: &crate::db::target::UrlSource,
        slug: Option<&str>,
    ) -> String {
        use crate::db::target::UrlSource;
        let slug = slug.unwrap_or("SLUG");
        match source {
            UrlSource::Config(path) => format!(
                "board `{slug}` is configured in {} and is created there by the first kanban command that may write it (e.g. `kanban --board {slug} init`); this one only reads",
                path.display()
            ),
            UrlSource::File(path) => format!(
                "{} records it as board `{slug}`'s database, so the board was dropped or the database replaced since. Restore it, or remove {} and run `kanban boards create {slug} --url URL` to start an empty board there",
                path.display(),
                path.display()
            ),
            UrlSource::Pinned => "HERMES_KANBAN_DB names it, and a board named that way is never created; create it with `kanban boards create SLUG --url URL` (or `[boards.SLUG] url` in kanban.toml and `kanban --board SLUG init`)".to_owned(),
            UrlSource::Argument(option) => format!(
                "create the board with `kanban boards create {slug} --url URL` or `kanban boards migrate {slug} --to URL` ({option} named it)"
            ),
        }
    }

    /// `self`, a failure on the PostgreSQL board `url`, in PostgreSQL's words: a write the
    /// server refused as read-only becomes [`BoardError::Storage(StorageError::PgReadOnly)`], any failure once the
    /// connection is gone (`lost`, or an error of kind [`crate::db::ErrorKind::ConnectionLost`])
    /// [`BoardError::Storage(StorageError::PgConnectionLost)`], so no SQLite advice (files, folders, disks) is given
    /// about a server. Anything else is returned unchanged.
    ///
    /// A lock not granted within the busy timeout (`busy_timeout_ms`, the session's
    /// `lock_timeout`: the board's write lock, taken with a transaction's first statement, or a
    /// task's row) is [`BoardError::Storage(StorageError::Busy)`], as SQLite's busy is.
    pub(crate) fn on_postgres(self, url: &str, lost: bool, busy_timeout_ms: u64) -> BoardError {
        use crate::db::ErrorKind;
        if matches!(self, BoardError::Storage(StorageError::ReadOnly { .. })) {
            return BoardError::Storage(StorageError::PgReadOnly {
                url: url.to_owned(),
                by_server: true,
                source: None,
            });
        }
        let kind = match &self {
            BoardError::Storage(StorageError::Sql(source))
            | BoardError::Storage(StorageError::Sqlite { source, .. })
            | BoardError::Storage(StorageError::Postgres { source, .. }) => source.kind(),
            _ => return self,
        };
        let lost = lost || kind == ErrorKind::ConnectionLost;
        if !lost && kind == ErrorKind::Busy {
            return BoardError::Storage(StorageError::Busy {
                path: PathBuf::from(url),
                what: "lock the board or a task for a write",
                timeout_ms: busy_timeout_ms,
                tries: 1,
            });
        }
        if !lost && kind != ErrorKind::ReadOnly {
            return self;
        }
        let (BoardError::Storage(StorageError::Sql(source))
        | BoardError::Storage(StorageError::Sqlite { source, .. })
        | BoardError::Storage(StorageError::Postgres { source, .. })) = self
        else {
            return self;
        };
        if lost {
            BoardError::Storage(StorageError::PgConnectionLost {
                url: url.to_owned(),
                source,
            })
        } else {
            BoardError::Storage(StorageError::PgReadOnly {
                url: url.to_owned(),
                by_server: true,
                source: Some(source),
            })
        }
    }

    /// True when SQLite reported the database file itself as damaged (`SQLITE_CORRUPT`,
    /// `SQLITE_NOTADB`): the caller should stop and say so rather than retry.
    pub fn is_corrupt(&self) -> bool {
        match self {
            BoardError::Storage(StorageError::Sql(source))
            | BoardError::Storage(StorageError::Sqlite { source, .. })
            | BoardError::Storage(StorageError::Postgres { source, .. }) => {
                source.kind() == crate::db::ErrorKind::Corrupt
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db;
    use kanban_pgwire::Error as Wire;

    const URL: &str = "postgres://kb@%2Ftmp/board";

    #[test]
    fn every_statement_failure_on_a_lost_connection_is_the_lost_connection_error() {
        // The `?` of any read or write: a lost connection names its board.
        let err = BoardError::from(db::Error::lost(URL, Wire::Closed));
        assert!(
            matches!(err, BoardError::Storage(StorageError::PgConnectionLost { ref url, .. }) if url == URL),
            "{err}"
        );
        assert!(err.to_string().contains(URL), "{err}");
        // Any other failure stays a failed query, on either engine.
        for other in [
            db::Error::Postgres(Wire::Closed),
            db::Error::no_rows(),
            db::Error::Aborted,
        ] {
            let err = BoardError::from(other);
            assert!(
                matches!(err, BoardError::Storage(StorageError::Sql(_))),
                "{err}"
            );
        }
    }

    #[test]
    fn a_failure_of_the_lost_connection_kind_is_said_as_lost_even_before_the_board_notices() {
        let lost = |source: db::Error, lost: bool| {
            BoardError::Storage(StorageError::Sql(source)).on_postgres(URL, lost, 1000)
        };
        // Closed, or a server error that ends the session, is a lost connection whether or
        // not the connection already reads as closed.
        for source in [
            db::Error::Postgres(Wire::Closed),
            db::Error::Postgres(Wire::Db(Box::new(kanban_pgwire::DbError {
                code: "57P01".to_owned(),
                ..Default::default()
            }))),
        ] {
            let err = lost(source, false);
            assert!(
                matches!(
                    err,
                    BoardError::Storage(StorageError::PgConnectionLost { .. })
                ),
                "{err}"
            );
        }
        // Another failure is left as it was unless the connection is gone.
        let err = lost(db::Error::no_rows(), false);
        assert!(
            matches!(err, BoardError::Storage(StorageError::Sql(_))),
            "{err}"
        );
        let err = lost(db::Error::no_rows(), true);
        assert!(
            matches!(
                err,
                BoardError::Storage(StorageError::PgConnectionLost { .. })
            ),
            "{err}"
        );
        // Already said: unchanged.
        let said =
            BoardError::from(db::Error::lost(URL, Wire::Closed)).on_postgres(URL, true, 1000);
        assert!(
            matches!(
                said,
                BoardError::Storage(StorageError::PgConnectionLost { .. })
            ),
            "{said}"
        );
    }
}
