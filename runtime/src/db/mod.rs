//! The connection layer: the one place that knows which database engine a board lives in.
//!
//! Every statement of `board/`, of the owner's `state.db` and of the cron store runs through the
//! types here — [`Db`] (a connection), [`Tx`] (an open write transaction), [`Stmt`], [`Row`],
//! [`Error`] (with a classified [`ErrorKind`]) — never through a driver. Two backends: SQLite
//! (`sqlite`, over rusqlite) and PostgreSQL (`postgres`, over `kanban-pgwire`); [`target`] says
//! which one a board lives in. Values keep rusqlite's vocabulary ([`ToSql`], [`FromSql`],
//! `params![…]`); SQL is written once in a common dialect that [`Dialect::translate`] maps per
//! engine; what only one engine has is a method of [`Db`]. It never decides a transition and
//! never reads `kanban.toml`. docs/board.md ("The SQL layer") has the dialect, the error kinds
//! and the cost measurements.

mod postgres;
#[cfg(feature = "test-support")]
pub(crate) use postgres::CHANGE_CHANNEL as POSTGRES_CHANGE_CHANNEL;
pub(crate) use postgres::CHANGED_MARK as POSTGRES_CHANGED_MARK;
#[cfg(feature = "test-support")]
pub(crate) use postgres::WRITE_LOCK as POSTGRES_WRITE_LOCK;
mod sqlite;
pub mod target;

use std::borrow::Cow;

pub use rusqlite::types::{FromSql, ToSql, Value, ValueRef};

/// An open write transaction; SQL that writes takes one. Derefs to the connection. Only the
/// board's write helper (`Board::write`) makes one, after its `BEGIN`.
pub(crate) struct Tx<'a> {
    conn: &'a Db,
}

impl<'a> Tx<'a> {
    /// The transaction on `conn`, which the caller has just begun.
    pub(crate) fn new(conn: &'a Db) -> Tx<'a> {
        Tx { conn }
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Db;
    fn deref(&self) -> &Db {
        self.conn
    }
}

/// `params![a, b, …]`: a statement's parameters, as a slice of [`ToSql`] values.
pub(crate) use rusqlite::params;

pub(crate) use sqlite::{version_number, version_text};

/// Result of the SQL layer.
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// The SQL dialect a statement is translated to at prepare time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite: the common dialect is SQLite's own syntax, so nothing is rewritten.
    Sqlite,
    /// PostgreSQL: placeholders, `IS` comparisons and `json_extract` are rewritten.
    Postgres,
}

impl Dialect {
    /// The text to prepare for this dialect from a statement written in the common dialect
    /// (see the module docs). Borrowed when nothing changes.
    pub fn translate(self, sql: &str) -> Cow<'_, str> {
        match self {
            Dialect::Sqlite => Cow::Borrowed(sql),
            Dialect::Postgres => postgres::translate(sql),
        }
    }
}

/// What kind of failure an [`Error`] is, whatever the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Another connection holds the lock (SQLite `BUSY` / `LOCKED`): worth a retry of `BEGIN` or
    /// `COMMIT`, never of a statement.
    Busy,
    /// A `UNIQUE` or primary-key constraint refused a row.
    UniqueViolation,
    /// A query that must return a row returned none.
    NoRows,
    /// The database (or its folder) is read-only for this process.
    ReadOnly,
    /// The database could not be opened (missing, permissions).
    CannotOpen,
    /// The database file is damaged or not a database.
    Corrupt,
    /// The disk is full.
    DiskFull,
    /// The engine could not read or write its file.
    IoFailure,
    /// The connection to the database server ended after it was opened (PostgreSQL only; see
    /// the module docs): this statement failed, every later one on the connection fails too,
    /// and the server rolled back what the open transaction had not committed.
    ConnectionLost,
    /// Anything else (a constraint other than uniqueness, a type mismatch, bad SQL, …).
    Other,
}

/// An error of the SQL layer: the driver's error (message and source chain unchanged) with its
/// [`ErrorKind`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// From the SQLite backend, or from decoding a value with the shared vocabulary
    /// ([`FromSql`] / [`ToSql`]).
    #[error(transparent)]
    Sqlite(rusqlite::Error),
    /// From the PostgreSQL backend (the wire client's error, SQLSTATE included).
    #[error(transparent)]
    Postgres(kanban_pgwire::Error),
    /// A step this engine does not have (e.g. `data_version` on PostgreSQL, which wakes on
    /// `LISTEN/NOTIFY` instead).
    #[error("not available on this database engine: {0}")]
    Unsupported(&'static str),
    /// A statement run by [`Db::execute_unchecked`] failed; the call that sent it (the next
    /// statement, or the commit) reports it. The transaction is aborted.
    #[error(transparent)]
    Queued(kanban_pgwire::Error),
    /// `COMMIT` of a transaction an earlier failed statement aborted: nothing was committed.
    #[error("the transaction was aborted by an earlier failed statement; nothing was committed")]
    Aborted,
    /// The PostgreSQL connection ended after it was opened ([`ErrorKind::ConnectionLost`]): the
    /// wire client's error, with the name of the database it was connected to.
    #[error(transparent)]
    ConnectionLost(Box<LostConnection>),
}

/// A failure that ended a PostgreSQL connection ([`Error::ConnectionLost`]): the wire client's
/// error (message and source chain unchanged) and the database the connection was to.
#[derive(Debug)]
pub struct LostConnection {
    /// What messages name the database by: a board's URL without its password.
    database: std::sync::Arc<str>,
    error: kanban_pgwire::Error,
}

impl LostConnection {
    /// The database the connection was to (a board's URL without its password).
    pub fn database(&self) -> &str {
        &self.database
    }

    /// The wire client's error.
    pub fn error(&self) -> &kanban_pgwire::Error {
        &self.error
    }
}

impl std::fmt::Display for LostConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for LostConnection {
    // Transparent: the wire error's own cause comes next in the chain.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.error)
    }
}

impl Error {
    /// The classified kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Sqlite(e) => sqlite::kind(e),
            Error::Postgres(e) | Error::Queued(e) => postgres::kind(e),
            Error::ConnectionLost(_) => ErrorKind::ConnectionLost,
            Error::Unsupported(_) | Error::Aborted => ErrorKind::Other,
        }
    }

    /// The constraint a statement broke, when the engine named one: PostgreSQL's constraint
    /// name (e.g. `tasks_pkey` for a duplicate task id), SQLite's columns of a unique or
    /// primary key (`tasks.id`).
    pub(crate) fn constraint(&self) -> Option<&str> {
        match self {
            Error::Postgres(kanban_pgwire::Error::Db(db))
            | Error::Queued(kanban_pgwire::Error::Db(db)) => db.constraint.as_deref(),
            Error::Sqlite(e) => sqlite::unique_columns(e),
            _ => None,
        }
    }

    /// A lost connection to `database` (as the PostgreSQL backend reports it), for tests of
    /// what the board makes of one.
    #[cfg(test)]
    pub(crate) fn lost(database: &str, error: kanban_pgwire::Error) -> Error {
        Error::ConnectionLost(Box::new(LostConnection {
            database: std::sync::Arc::from(database),
            error,
        }))
    }

    /// For a lost PostgreSQL connection ([`Error::ConnectionLost`]): the database it was to
    /// (a board's URL without its password).
    pub(crate) fn lost_database(&self) -> Option<&str> {
        match self {
            Error::ConnectionLost(lost) => Some(lost.database()),
            _ => None,
        }
    }

    /// True for the error of a statement run by [`Db::execute_unchecked`] that a later call
    /// (the commit included) reported: a failed statement of the transaction's body.
    pub(crate) fn is_queued_statement(&self) -> bool {
        matches!(self, Error::Queued(_))
    }

    /// The error a row decoder returns for a column whose stored value it cannot accept
    /// (`index` is the column; `cause` says why).
    pub(crate) fn invalid_value(
        index: usize,
        cause: Box<dyn std::error::Error + Send + Sync + 'static>,
    ) -> Error {
        Error::Sqlite(rusqlite::Error::FromSqlConversionFailure(
            index,
            rusqlite::types::Type::Text,
            cause,
        ))
    }

    /// The error of a statement that had to change one row and changed `n`.
    pub(crate) fn changed_rows(n: usize) -> Error {
        Error::Sqlite(rusqlite::Error::StatementChangedRows(n))
    }

    /// The error of a query that had to return a row and returned none.
    pub(crate) fn no_rows() -> Error {
        Error::Sqlite(rusqlite::Error::QueryReturnedNoRows)
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Error {
        Error::Sqlite(e)
    }
}

impl From<kanban_pgwire::Error> for Error {
    fn from(e: kanban_pgwire::Error) -> Error {
        Error::Postgres(e)
    }
}

/// `.optional()` on a one-row result: no row is `Ok(None)`.
pub(crate) trait OptionalExtension<T> {
    fn optional(self) -> Result<Option<T>>;
}

impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.kind() == ErrorKind::NoRows => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A statement's parameters: `params![…]`, an array of one [`ToSql`] type (`[id]`), `[]`, or
/// [`params_from_iter`]. Bound positionally: the first is `?1`.
pub(crate) trait Params {
    /// Calls `f` with the parameters as a slice.
    fn with_values<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R;
}

impl Params for &[&dyn ToSql] {
    fn with_values<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        f(self)
    }
}

impl Params for [&(dyn ToSql + Send + Sync); 0] {
    fn with_values<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        f(&[])
    }
}

macro_rules! array_params {
    ($($n:literal)*) => {$(
        impl<T: ToSql> Params for [T; $n] {
            fn with_values<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
                let refs: [&dyn ToSql; $n] = self.each_ref().map(|v| v as &dyn ToSql);
                f(&refs)
            }
        }
        impl<T: ToSql> Params for &[T; $n] {
            fn with_values<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
                let refs: [&dyn ToSql; $n] = self.each_ref().map(|v| v as &dyn ToSql);
                f(&refs)
            }
        }
    )*};
}

array_params!(1 2 3 4 5 6 7 8);

/// Parameters from an iterator of [`ToSql`] values (a query built at run time).
pub(crate) struct ParamsFromIter<I>(I);

/// See [`ParamsFromIter`].
pub(crate) fn params_from_iter<I>(iter: I) -> ParamsFromIter<I>
where
    I: IntoIterator,
    I::Item: ToSql,
{
    ParamsFromIter(iter)
}

impl<I> Params for ParamsFromIter<I>
where
    I: IntoIterator,
    I::Item: ToSql,
{
    fn with_values<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        let values: Vec<I::Item> = self.0.into_iter().collect();
        let refs: Vec<&dyn ToSql> = values.iter().map(|v| v as &dyn ToSql).collect();
        f(&refs)
    }
}

/// A connection to a board's database (or to another store opened like one).
#[derive(Debug)]
pub(crate) struct Db {
    backend: Backend,
}

/// How [`Db::row_lock`] locks a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RowLock {
    /// Wait for another transaction holding the row (bounded by the lock wait).
    Wait,
    /// Never wait: a row another transaction holds is left out of the result.
    Skip,
}

#[derive(Debug)]
enum Backend {
    Sqlite(rusqlite::Connection),
    Postgres(Box<postgres::Pg>),
}

impl Db {
    /// A SQLite connection (opened and configured by the caller).
    pub(crate) fn sqlite(conn: rusqlite::Connection) -> Db {
        Db {
            backend: Backend::Sqlite(conn),
        }
    }

    /// Opens the SQLite file at `path` for reading only, as it is (no pragma, no check): for a
    /// glance at another process's store (the owner's `state.db`).
    pub(crate) fn open_sqlite_read_only(path: &std::path::Path) -> Result<Db> {
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        Ok(Db::sqlite(rusqlite::Connection::open_with_flags(
            path, flags,
        )?))
    }

    /// Connects to the PostgreSQL database `target` names, as it is (no setting, no schema),
    /// named in messages by what it is connected to (the socket or `host:port`); a board's is
    /// [`Db::postgres_named`]. For the SQL layer's tests (`crate::test_support`).
    #[cfg(feature = "test-support")]
    pub(crate) fn connect_postgres(target: &target::PgTarget) -> Result<Db> {
        let client = kanban_pgwire::Client::connect(target.config())?;
        let name = format!("PostgreSQL at {}", client.target());
        Ok(Db::postgres_named(client, &name))
    }

    /// A PostgreSQL connection (opened, configured and brought to the board schema by
    /// `board::engine::postgres::store`), named `name` (the board's URL without its password) by the error of
    /// a lost connection ([`Error::ConnectionLost`]).
    pub(crate) fn postgres_named(client: kanban_pgwire::Client, name: &str) -> Db {
        Db {
            backend: Backend::Postgres(Box::new(postgres::Pg::new(client, name))),
        }
    }

    /// True when the connection is gone for good (a PostgreSQL connection the server or the
    /// network ended); a SQLite connection never is.
    pub(crate) fn connection_lost(&self) -> bool {
        match &self.backend {
            Backend::Sqlite(_) => false,
            Backend::Postgres(pg) => pg.is_closed(),
        }
    }

    /// The SQLite connection, for the SQLite backend's own steps (pragmas, checkpoints, the busy
    /// handler); `None` on another engine.
    pub(crate) fn as_sqlite(&self) -> Option<&rusqlite::Connection> {
        match &self.backend {
            Backend::Sqlite(c) => Some(c),
            Backend::Postgres(_) => None,
        }
    }

    /// Prepares `sql` through the connection's statement cache (a statement run on every
    /// transition is parsed once per connection).
    pub(crate) fn prepare_cached(&self, sql: &str) -> Result<Stmt<'_>> {
        match &self.backend {
            Backend::Sqlite(c) => Ok(Stmt {
                inner: StmtInner::SqliteCached(c.prepare_cached(&Dialect::Sqlite.translate(sql))?),
            }),
            Backend::Postgres(pg) => Ok(Stmt {
                inner: StmtInner::Postgres {
                    sql: pg.translated(sql),
                    pg,
                },
            }),
        }
    }

    /// Prepares `sql` once, outside the cache (a statement built at run time).
    pub(crate) fn prepare(&self, sql: &str) -> Result<Stmt<'_>> {
        match &self.backend {
            Backend::Sqlite(c) => Ok(Stmt {
                inner: StmtInner::Sqlite(c.prepare(&Dialect::Sqlite.translate(sql))?),
            }),
            // The wire client caches every statement it prepares; only the translation is kept.
            Backend::Postgres(pg) => Ok(Stmt {
                inner: StmtInner::Postgres {
                    sql: pg.translated(sql),
                    pg,
                },
            }),
        }
    }

    /// Runs one statement; returns the rows changed.
    pub(crate) fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        self.prepare(sql)?.execute(params)
    }

    /// Runs one statement through the statement cache whose result the caller does not need
    /// (no row count, no rows). SQLite runs it at once. PostgreSQL, inside a transaction,
    /// queues it and sends it with the next statement that needs an answer (or with `COMMIT`),
    /// in the same round trip; a failure is then reported by that call, as an error for which
    /// [`Error::is_queued_statement`] holds, and aborts the transaction. Outside a transaction
    /// it runs at once on both engines. For writes whose effect no later step of the transition
    /// checks (an event insert, a run row mirroring the task): the transaction still fails
    /// whole if one of them does.
    pub(crate) fn execute_unchecked(&self, sql: &str, params: impl Params) -> Result<()> {
        match &self.backend {
            Backend::Sqlite(c) => {
                let mut stmt = c.prepare_cached(&Dialect::Sqlite.translate(sql))?;
                params.with_values(|values| stmt.execute(values))?;
                Ok(())
            }
            Backend::Postgres(pg) => {
                let sql = pg.translated(sql);
                params.with_values(|values| pg.execute_deferred(&sql, values))
            }
        }
    }

    /// Sends what [`Db::execute_unchecked`] queued and waits for it (nothing to do on SQLite,
    /// or when nothing is queued): a failure of a queued statement is reported here.
    pub(crate) fn sync(&self) -> Result<()> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(()),
            Backend::Postgres(pg) => pg.sync(),
        }
    }

    /// Runs one or more statements without parameters (schema DDL, set-up).
    pub(crate) fn execute_batch(&self, sql: &str) -> Result<()> {
        match &self.backend {
            Backend::Sqlite(c) => Ok(c.execute_batch(&Dialect::Sqlite.translate(sql))?),
            Backend::Postgres(pg) => pg.batch(sql),
        }
    }

    /// Runs an `INSERT … RETURNING id` (written so, in the common dialect) through the statement
    /// cache and returns the new row's id; an insert that inserted nothing (`ON CONFLICT DO
    /// NOTHING`) is [`ErrorKind::NoRows`]. SQLite runs the statement without its `RETURNING`
    /// clause and answers `last_insert_rowid()`: the same id without the result buffer
    /// `RETURNING` fills on every execution (about 1 µs per insert, measured).
    pub(crate) fn insert_returning_id(&self, sql: &str, params: impl Params) -> Result<i64> {
        match &self.backend {
            Backend::Sqlite(c) => {
                let plain = sql.trim_end().strip_suffix("RETURNING id").ok_or(
                    Error::Unsupported(
                        "insert_returning_id of a statement that does not end in `RETURNING id`",
                    ),
                )?;
                let mut stmt = c.prepare_cached(plain)?;
                match params.with_values(|values| stmt.execute(values))? {
                    0 => Err(Error::no_rows()),
                    _ => Ok(c.last_insert_rowid()),
                }
            }
            Backend::Postgres(_) => self.prepare_cached(sql)?.query_row(params, |r| r.get(0)),
        }
    }

    /// Runs a query and decodes its first row with `f`; no row is an error of kind
    /// [`ErrorKind::NoRows`] (see [`OptionalExtension::optional`]).
    pub(crate) fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.prepare(sql)?.query_row(params, f)
    }

    /// PostgreSQL only (`None` on SQLite, which runs no such statement): runs `sql`, a
    /// statement in PostgreSQL's own dialect (not translated) that returns rows exactly when it
    /// changed the board, each evaluating [`POSTGRES_CHANGED_MARK`], in the open transaction,
    /// and decodes each row with `f`. With `commit` the transaction is committed in the same
    /// round trip (the change counter moves, and watchers are notified, only when the statement
    /// changed something) and the [`Db::commit`] that follows has nothing left to do.
    pub(crate) fn pg_query_changing<T>(
        &self,
        sql: &str,
        params: impl Params,
        commit: bool,
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Option<Vec<T>>> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(None),
            Backend::Postgres(pg) => {
                let rows = params.with_values(|values| pg.query_changing(sql, values, commit))?;
                rows.iter()
                    .map(|r| f(&Row::postgres(r)))
                    .collect::<Result<Vec<T>>>()
                    .map(Some)
            }
        }
    }

    /// The round trips a PostgreSQL connection has made (`None` on SQLite), for tests.
    #[cfg(feature = "test-support")]
    pub(crate) fn pg_round_trips(&self) -> Option<u64> {
        match &self.backend {
            Backend::Sqlite(_) => None,
            Backend::Postgres(pg) => Some(pg.round_trips()),
        }
    }

    /// True for a SQLite connection.
    pub(crate) fn is_sqlite(&self) -> bool {
        matches!(self.backend, Backend::Sqlite(_))
    }

    /// True outside a transaction.
    pub(crate) fn is_autocommit(&self) -> bool {
        match &self.backend {
            Backend::Sqlite(c) => c.is_autocommit(),
            Backend::Postgres(pg) => pg.is_autocommit(),
        }
    }

    /// Starts a write transaction that holds the write lock from its first statement on
    /// (SQLite `BEGIN IMMEDIATE`; PostgreSQL `BEGIN`, whose writes take row locks as they go).
    pub(crate) fn begin_immediate(&self) -> Result<()> {
        match &self.backend {
            Backend::Sqlite(_) => self
                .prepare_cached("BEGIN IMMEDIATE")?
                .execute([])
                .map(drop),
            Backend::Postgres(pg) => pg.begin(),
        }
    }

    /// Starts a claim's write transaction. SQLite: [`Db::begin_immediate`] (a claim takes the
    /// write lock like every writer). PostgreSQL: `BEGIN` without the board's write lock: a claim
    /// serialises with other writers only on the rows it locks, the task's with
    /// [`RowLock::Skip`] first (see the PostgreSQL backend's module docs for why that keeps every
    /// outcome SQLite's).
    pub(crate) fn begin_claim(&self) -> Result<()> {
        match &self.backend {
            Backend::Sqlite(_) => self.begin_immediate(),
            Backend::Postgres(pg) => pg.begin_unlocked(),
        }
    }

    /// The clause a `SELECT … FROM tasks WHERE id = ?` of a write transaction ends with to lock
    /// the row as `lock` says; `None` where the engine needs none (SQLite, whose writers hold
    /// the whole database, and any engine outside a transaction, where reads take no lock).
    pub(crate) fn row_lock(&self, lock: RowLock) -> Option<&'static str> {
        match &self.backend {
            Backend::Postgres(pg) if !pg.is_autocommit() => Some(match lock {
                RowLock::Wait => " FOR UPDATE",
                RowLock::Skip => " FOR UPDATE SKIP LOCKED",
            }),
            _ => None,
        }
    }

    /// Commits the open transaction.
    pub(crate) fn commit(&self) -> Result<()> {
        match &self.backend {
            Backend::Sqlite(_) => self.prepare_cached("COMMIT")?.execute([]).map(drop),
            Backend::Postgres(pg) => pg.commit(),
        }
    }

    /// Subscribes this connection to the board's change notifications (PostgreSQL `LISTEN`;
    /// SQLite has none: its watch is a file watch).
    pub(crate) fn listen_changes(&self) -> Result<()> {
        match &self.backend {
            Backend::Sqlite(_) => Err(Error::Unsupported("change notifications")),
            Backend::Postgres(pg) => pg.listen_changes(),
        }
    }

    /// Waits up to `timeout` for a change notification of another connection (after
    /// [`Db::listen_changes`]); true when one came. Notifications of this connection's own
    /// commits are dropped.
    pub(crate) fn wait_change(&self, timeout: std::time::Duration) -> Result<bool> {
        match &self.backend {
            Backend::Sqlite(_) => Err(Error::Unsupported("change notifications")),
            Backend::Postgres(pg) => pg.wait_change(timeout),
        }
    }

    /// Rolls back the open transaction, if any. A failed rollback leaves nothing more to undo;
    /// the connection stays usable.
    pub(crate) fn rollback(&self) {
        match &self.backend {
            Backend::Sqlite(_) => {
                if !self.is_autocommit() {
                    let _ = self.execute_batch("ROLLBACK");
                }
            }
            Backend::Postgres(pg) => pg.rollback(),
        }
    }

    /// How long a statement waits for a lock another connection holds before it fails with
    /// [`ErrorKind::Busy`] (SQLite's busy handler).
    pub(crate) fn set_lock_wait(&self, wait: std::time::Duration) -> Result<()> {
        match &self.backend {
            Backend::Sqlite(c) => Ok(c.busy_timeout(wait)?),
            Backend::Postgres(pg) => pg.set_lock_wait(wait),
        }
    }

    /// What the engine's own consistency check finds wrong with the stored data (SQLite
    /// `PRAGMA quick_check`; empty when all is well). A damaged file may instead fail the check
    /// with an error of kind [`ErrorKind::Corrupt`].
    pub(crate) fn quick_check(&self) -> Result<Vec<String>> {
        match &self.backend {
            Backend::Sqlite(c) => sqlite::quick_check(c),
            // PostgreSQL has no check of its files a client can run (the server checksums its
            // own pages): the check is that the server answers.
            Backend::Postgres(pg) => {
                pg.query("SELECT 1", &[])?;
                Ok(Vec::new())
            }
        }
    }

    /// The schema version stored in the database (SQLite `PRAGMA user_version`).
    pub(crate) fn schema_version(&self) -> Result<i64> {
        match &self.backend {
            Backend::Sqlite(c) => sqlite::user_version(c),
            Backend::Postgres(pg) => pg.schema_version(),
        }
    }

    /// Records `version` as the schema version (inside the migrating transaction).
    pub(crate) fn set_schema_version(&self, version: i64) -> Result<()> {
        match &self.backend {
            Backend::Sqlite(c) => sqlite::set_user_version(c, version),
            Backend::Postgres(pg) => pg.set_schema_version(version),
        }
    }

    /// A counter that changes whenever another connection commits to the database (SQLite
    /// `PRAGMA data_version`); the dispatcher polls it to wake on a change.
    pub(crate) fn data_version(&self) -> Result<i64> {
        match &self.backend {
            Backend::Sqlite(c) => sqlite::data_version(c),
            Backend::Postgres(pg) => pg.data_version(),
        }
    }

    /// A stamp that changes whenever anything is committed to the SQLite database, by this
    /// connection or another (`data_version` with the connection's own row changes); `None` on
    /// PostgreSQL, whose change counter misses a write made outside kanban (`psql`).
    pub(crate) fn change_stamp(&self) -> Result<Option<(i64, i64)>> {
        match &self.backend {
            Backend::Sqlite(c) => Ok(Some((
                sqlite::data_version(c)?,
                i64::try_from(c.total_changes()).unwrap_or(i64::MAX),
            ))),
            Backend::Postgres(_) => Ok(None),
        }
    }

    /// Closes the connection, reporting a failure to close.
    pub(crate) fn close(self) -> Result<()> {
        match self.backend {
            Backend::Sqlite(c) => c.close().map_err(|(_, e)| Error::from(e)),
            // Dropping the client sends Terminate and closes the socket.
            Backend::Postgres(pg) => {
                drop(pg);
                Ok(())
            }
        }
    }
}

/// A prepared statement.
pub(crate) struct Stmt<'c> {
    inner: StmtInner<'c>,
}

enum StmtInner<'c> {
    SqliteCached(rusqlite::CachedStatement<'c>),
    Sqlite(rusqlite::Statement<'c>),
    Postgres {
        pg: &'c postgres::Pg,
        sql: std::sync::Arc<str>,
    },
}

/// The statement in the form its engine runs it.
enum Engine<'s, 'c> {
    Sqlite(&'s mut rusqlite::Statement<'c>),
    Postgres(&'c postgres::Pg, &'s str),
}

impl<'c> Stmt<'c> {
    fn engine(&mut self) -> Engine<'_, 'c> {
        match &mut self.inner {
            StmtInner::SqliteCached(s) => Engine::Sqlite(s),
            StmtInner::Sqlite(s) => Engine::Sqlite(s),
            StmtInner::Postgres { pg, sql } => Engine::Postgres(pg, sql),
        }
    }

    /// Runs the statement; returns the rows changed.
    pub(crate) fn execute(&mut self, params: impl Params) -> Result<usize> {
        match self.engine() {
            Engine::Sqlite(stmt) => params.with_values(|values| Ok(stmt.execute(values)?)),
            Engine::Postgres(pg, sql) => params.with_values(|values| pg.execute(sql, values)),
        }
    }

    /// Runs the query and decodes its first row with `f`; no row is [`ErrorKind::NoRows`].
    pub(crate) fn query_row<T>(
        &mut self,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        match self.engine() {
            Engine::Sqlite(stmt) => params.with_values(|values| {
                let mut rows = stmt.query(values)?;
                match rows.next()? {
                    Some(row) => f(&Row::sqlite(row)),
                    None => Err(Error::no_rows()),
                }
            }),
            Engine::Postgres(pg, sql) => {
                let rows = params.with_values(|values| pg.query(sql, values))?;
                match rows.first() {
                    Some(row) => f(&Row::postgres(row)),
                    None => Err(Error::no_rows()),
                }
            }
        }
    }

    /// Runs the query; the rows, each decoded with `f`, are read as the iterator advances.
    pub(crate) fn query_map<T, F>(&mut self, params: impl Params, f: F) -> Result<MappedRows<'_, F>>
    where
        F: FnMut(&Row<'_>) -> Result<T>,
    {
        let rows = match self.engine() {
            Engine::Sqlite(stmt) => {
                RowsInner::Sqlite(params.with_values(|values| stmt.query(values))?)
            }
            Engine::Postgres(pg, sql) => RowsInner::Postgres(
                params
                    .with_values(|values| pg.query(sql, values))?
                    .into_iter(),
            ),
        };
        Ok(MappedRows { rows, f })
    }
}

/// The rows of [`Stmt::query_map`], each decoded by its function.
pub(crate) struct MappedRows<'s, F> {
    rows: RowsInner<'s>,
    f: F,
}

enum RowsInner<'s> {
    Sqlite(rusqlite::Rows<'s>),
    Postgres(std::vec::IntoIter<kanban_pgwire::Row>),
}

impl<T, F> Iterator for MappedRows<'_, F>
where
    F: FnMut(&Row<'_>) -> Result<T>,
{
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        match &mut self.rows {
            RowsInner::Sqlite(rows) => match rows.next() {
                Ok(Some(row)) => Some((self.f)(&Row::sqlite(row))),
                Ok(None) => None,
                Err(e) => Some(Err(e.into())),
            },
            RowsInner::Postgres(rows) => rows.next().map(|row| (self.f)(&Row::postgres(&row))),
        }
    }
}

/// A column: its position (0-based `usize`) or its name (`&str`), as rusqlite takes them. A
/// literal `row.get(0)` needs no annotation (`usize` is the one integer type accepted).
pub(crate) trait RowIndex: rusqlite::RowIndex {
    /// The column's position in a PostgreSQL row.
    fn position(&self, row: &kanban_pgwire::Row) -> Option<usize>;
}

impl RowIndex for usize {
    fn position(&self, row: &kanban_pgwire::Row) -> Option<usize> {
        (*self < row.len()).then_some(*self)
    }
}

impl RowIndex for &str {
    fn position(&self, row: &kanban_pgwire::Row) -> Option<usize> {
        row.column_index(self)
    }
}

/// One result row.
pub(crate) struct Row<'r> {
    inner: RowInner<'r>,
}

enum RowInner<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r kanban_pgwire::Row),
}

impl<'r> Row<'r> {
    fn sqlite(row: &'r rusqlite::Row<'r>) -> Row<'r> {
        Row {
            inner: RowInner::Sqlite(row),
        }
    }

    fn postgres(row: &'r kanban_pgwire::Row) -> Row<'r> {
        Row {
            inner: RowInner::Postgres(row),
        }
    }

    /// Column `idx` (0-based) decoded as `T` (rusqlite's shape: `row.get::<_, T>(idx)`).
    pub(crate) fn get<I: RowIndex, T: FromSql>(&self, idx: I) -> Result<T> {
        match &self.inner {
            RowInner::Sqlite(r) => Ok(r.get(idx)?),
            RowInner::Postgres(r) => {
                let i = idx
                    .position(r)
                    .ok_or(Error::Sqlite(rusqlite::Error::InvalidColumnIndex(r.len())))?;
                let value = postgres::value_ref(&r.values()[i]);
                T::column_result(value).map_err(|e| Error::Sqlite(decode_error(i, value, e)))
            }
        }
    }

    /// Column `idx` (0-based) as it is stored.
    pub(crate) fn get_ref(&self, idx: usize) -> Result<ValueRef<'_>> {
        match &self.inner {
            RowInner::Sqlite(r) => Ok(r.get_ref(idx)?),
            RowInner::Postgres(r) => r
                .get(idx)
                .map(postgres::value_ref)
                .ok_or(Error::Sqlite(rusqlite::Error::InvalidColumnIndex(idx))),
        }
    }
}

/// rusqlite's error for a column value `FromSql` refused (as rusqlite itself reports it).
fn decode_error(
    index: usize,
    value: ValueRef<'_>,
    err: rusqlite::types::FromSqlError,
) -> rusqlite::Error {
    match err {
        rusqlite::types::FromSqlError::InvalidType => {
            rusqlite::Error::InvalidColumnType(index, index.to_string(), value.data_type())
        }
        other => {
            rusqlite::Error::FromSqlConversionFailure(index, value.data_type(), Box::new(other))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory() -> Db {
        Db::sqlite(rusqlite::Connection::open_in_memory().unwrap())
    }

    #[test]
    fn statements_bind_every_parameter_shape_and_decode_rows() {
        let db = memory();
        db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, n INTEGER)")
            .unwrap();
        let id: i64 = db
            .prepare_cached("INSERT INTO t (name, n) VALUES (?1, ?2) RETURNING id")
            .unwrap()
            .query_row(params!["a", 1], |r| r.get(0))
            .unwrap();
        assert_eq!(id, 1);
        let returning =
            "INSERT INTO t (name, n) VALUES (?1, ?2) ON CONFLICT DO NOTHING RETURNING id";
        assert_eq!(
            db.insert_returning_id(returning, params!["x", 9]).unwrap(),
            2
        );
        let err = db
            .insert_returning_id(returning, params!["x", 9])
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NoRows);
        let err = db
            .insert_returning_id("INSERT INTO t (name, n) VALUES ('y', 1)", [])
            .unwrap_err();
        assert!(matches!(err, Error::Unsupported(_)), "{err}");
        db.execute("DELETE FROM t WHERE name = 'x'", []).unwrap();
        assert_eq!(
            db.execute("INSERT INTO t (name, n) VALUES (?1, 2)", ["b"])
                .unwrap(),
            1
        );
        assert_eq!(
            db.execute("INSERT INTO t (name, n) VALUES ('c', 3)", [])
                .unwrap(),
            1
        );
        let names: Vec<String> = db
            .prepare("SELECT name FROM t WHERE n >= ?1 ORDER BY id")
            .unwrap()
            .query_map(params_from_iter([2i64]), |r| r.get(0))
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(names, ["b", "c"]);
        let missing = db
            .query_row("SELECT n FROM t WHERE name = ?1", ["z"], |r| {
                r.get::<_, i64>(0)
            })
            .optional()
            .unwrap();
        assert_eq!(missing, None);
        let err = db
            .query_row("SELECT n FROM t WHERE name = ?1", ["z"], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NoRows);
        let value = db
            .query_row("SELECT n FROM t WHERE id = 1", [], |r| {
                match r.get_ref(0)? {
                    ValueRef::Integer(n) => Ok(n),
                    other => panic!("{other:?}"),
                }
            })
            .unwrap();
        assert_eq!(value, 1);
    }

    #[test]
    fn errors_are_classified_and_keep_the_drivers_message() {
        let db = memory();
        db.execute_batch("CREATE TABLE t (name TEXT UNIQUE)")
            .unwrap();
        db.execute("INSERT INTO t VALUES ('a')", []).unwrap();
        let err = db.execute("INSERT INTO t VALUES ('a')", []).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UniqueViolation);
        assert!(
            err.to_string().contains("UNIQUE constraint failed"),
            "{err}"
        );
        let err = db
            .execute("INSERT INTO nowhere VALUES (1)", [])
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Other);
        assert!(err.to_string().contains("no such table"), "{err}");
        let err = db
            .query_row("SELECT 'text'", [], |r| r.get::<_, i64>(0))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Other);
    }

    #[test]
    fn transactions_commit_and_roll_back() {
        let db = memory();
        db.execute_batch("CREATE TABLE t (n INTEGER)").unwrap();
        db.begin_immediate().unwrap();
        assert!(!db.is_autocommit());
        db.execute("INSERT INTO t VALUES (1)", []).unwrap();
        db.commit().unwrap();
        db.begin_immediate().unwrap();
        db.execute("INSERT INTO t VALUES (2)", []).unwrap();
        db.rollback();
        assert!(db.is_autocommit());
        let n: i64 = db
            .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(db.schema_version().unwrap(), 0);
        db.set_schema_version(7).unwrap();
        assert_eq!(db.schema_version().unwrap(), 7);
        assert_eq!(Dialect::Sqlite.translate("SELECT ?1"), "SELECT ?1");
        assert!(matches!(
            Dialect::Sqlite.translate("SELECT ?1"),
            Cow::Borrowed(_)
        ));
    }
}
