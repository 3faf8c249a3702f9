//! Not API: what the integration tests (the conformance suite `runtime/tests/conformance/`, the
//! PostgreSQL engine's `runtime/tests/pg_engine.rs` and the SQL layer's
//! `runtime/tests/pg_sql_layer.rs`) need of the crate's internals, compiled only with the
//! `test-support` feature (which only the runtime's own dev-dependency on itself turns on; a
//! product build never has this module). Each item is a narrow wrapper over a crate-private one:
//! raw SQL on a connection for the tamper hooks, the differential dump and the SQL layer's tests,
//! a write transaction for the tests of the write helper, and the PostgreSQL board's opening,
//! fast paths and change watch.

use std::time::Duration;

use crate::board::engine::postgres::fast;
use crate::board::{
    Board, BoardError, ChangeWatch, ClaimSpec, Claimed, Completed, Completion, Event, Fence,
    Heartbeated, OpenOptions, Result, Status, Task,
};
use crate::db::target::PgTarget;
use crate::db::{self, Db, FromSql, OptionalExtension, ToSql, Tx, Value};

/// The advisory lock a PostgreSQL board's writers take, one at a time.
pub const POSTGRES_WRITE_LOCK: i64 = db::POSTGRES_WRITE_LOCK;

/// The channel a PostgreSQL board's commits are announced on (`NOTIFY`).
pub const POSTGRES_CHANGE_CHANNEL: &str = db::POSTGRES_CHANGE_CHANNEL;

/// The query saying (1 or 0) whether a PostgreSQL board has the extras a current build adds at
/// its open (the change counter, `tasks.rowid`).
pub const POSTGRES_HAS_EXTRAS: &str = crate::board::engine::postgres::schema::HAS_EXTRAS;

/// Opens the PostgreSQL board at `target`, as `Board::open` does for a location naming no slug.
pub fn open_postgres(target: &PgTarget, options: &OpenOptions) -> Result<Board> {
    Board::open_postgres(target, None, options)
}

/// A connection of the SQL layer to the PostgreSQL database at `target`, as a board's connection
/// is but without the board's settings and schema.
pub fn postgres_connection(target: &PgTarget) -> Result<Connection, db::Error> {
    Ok(Connection(Db::connect_postgres(target)?))
}

/// Whether `err` is the error of a create whose drawn task id another task has.
pub fn is_taken_task_id(err: &BoardError) -> bool {
    crate::board::is_taken_task_id(err)
}

/// Whether `err` is the failure of a write sent with a later statement (`execute_unchecked`).
pub fn is_queued_statement(err: &db::Error) -> bool {
    err.is_queued_statement()
}

/// The one-statement claim of `id` from `source`, inside a transaction of its own that locks
/// the task's row, left uncommitted by the statement: `None` when it did nothing.
pub fn fast_claim(
    board: &Board,
    id: &str,
    source: Status,
    spec: &ClaimSpec,
    now: i64,
) -> Result<Option<Claimed>> {
    board.write_row_locked(|tx| fast::claim(tx, id, source, spec, now, false))
}

/// The one-statement heartbeat, as [`fast_claim`] (in a write transaction).
pub fn fast_heartbeat(
    board: &Board,
    id: &str,
    fence: &Fence,
    note: Option<&str>,
    ttl_seconds: i64,
    now: i64,
) -> Result<Option<Heartbeated>> {
    board.write(|tx| fast::heartbeat(tx, id, fence, note, ttl_seconds, now, false))
}

/// The one-statement completion, as [`fast_heartbeat`].
pub fn fast_complete(
    board: &Board,
    id: &str,
    completion: &Completion,
    now: i64,
) -> Result<Option<Completed>> {
    board.write(|tx| fast::complete(tx, id, completion, now, false))
}

/// Makes `watch` forget that its PostgreSQL connection `LISTEN`s, leaving it the fallback poll.
pub fn stop_listening(watch: &mut ChangeWatch) {
    watch.stop_listening();
}

/// Raw SQL on `board`'s connection, in the SQL layer's common dialect.
pub fn sql(board: &Board) -> Sql<'_> {
    Sql(board.conn())
}

/// Runs `body` in one write transaction of `board` (`Board::write`: committed when it returns
/// `Ok`, rolled back otherwise; a nested write is refused).
pub fn write<T>(board: &Board, body: impl FnOnce(&WriteTx<'_, '_>) -> Result<T>) -> Result<T> {
    board.write(|tx| body(&WriteTx(tx)))
}

/// A connection of the SQL layer not belonging to a board ([`postgres_connection`]).
pub struct Connection(Db);

impl Connection {
    /// Raw SQL on the connection.
    pub fn sql(&self) -> Sql<'_> {
        Sql(&self.0)
    }
}

/// A board's connection, for statements no transition would run.
pub struct Sql<'a>(&'a Db);

impl Sql<'_> {
    /// Runs one statement; the rows it changed.
    pub fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> Result<usize, db::Error> {
        self.0.execute(sql, params)
    }

    /// Runs statements separated by `;`, without parameters.
    pub fn execute_batch(&self, sql: &str) -> Result<(), db::Error> {
        self.0.execute_batch(sql)
    }

    /// The first `columns` columns of every row `sql` returns, each value as stored.
    pub fn rows(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        columns: usize,
    ) -> Result<Vec<Vec<Value>>, db::Error> {
        let mut stmt = self.0.prepare(sql)?;
        stmt.query_map(params, |r| {
            (0..columns)
                .map(|i| r.get::<_, Value>(i))
                .collect::<Result<Vec<_>, _>>()
        })?
        .collect()
    }

    /// Runs one statement, queued inside a transaction to travel with the next one.
    pub fn execute_unchecked(&self, sql: &str, params: &[&dyn ToSql]) -> Result<(), db::Error> {
        self.0.execute_unchecked(sql, params)
    }

    /// Sends what is queued (see [`Sql::execute_unchecked`]) and waits for the answer.
    pub fn sync(&self) -> Result<(), db::Error> {
        self.0.sync()
    }

    /// Runs an insert returning the new row's id; no row is an error.
    pub fn insert_returning_id(&self, sql: &str, params: &[&dyn ToSql]) -> Result<i64, db::Error> {
        self.0.insert_returning_id(sql, params)
    }

    /// Column `column` of the one row `sql` returns (no row is an error).
    pub fn query_row<T: FromSql>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        column: usize,
    ) -> Result<T, db::Error> {
        self.0.query_row(sql, params, |r| r.get(column))
    }

    /// As [`Sql::query_row`], through the connection's statement cache.
    pub fn query_row_cached<T: FromSql>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        column: usize,
    ) -> Result<T, db::Error> {
        self.0
            .prepare_cached(sql)?
            .query_row(params, |r| r.get(column))
    }

    /// As [`Sql::query_row`], `None` when there is no row.
    pub fn query_row_optional<T: FromSql>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        column: usize,
    ) -> Result<Option<T>, db::Error> {
        self.0.query_row(sql, params, |r| r.get(column)).optional()
    }

    /// The column named `column` of every row `sql` returns.
    pub fn column_named<T: FromSql>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        column: &str,
    ) -> Result<Vec<T>, db::Error> {
        let mut stmt = self.0.prepare(sql)?;
        stmt.query_map(params, |r| r.get(column))?.collect()
    }

    /// Opens a write transaction (on PostgreSQL its `BEGIN` travels with the first statement).
    pub fn begin_immediate(&self) -> Result<(), db::Error> {
        self.0.begin_immediate()
    }

    /// Opens a claim's transaction (on PostgreSQL: without the board's write lock).
    pub fn begin_claim(&self) -> Result<(), db::Error> {
        self.0.begin_claim()
    }

    /// Commits the open transaction.
    pub fn commit(&self) -> Result<(), db::Error> {
        self.0.commit()
    }

    /// Rolls the open transaction back.
    pub fn rollback(&self) {
        self.0.rollback()
    }

    /// How long a statement waits for a lock another connection holds.
    pub fn set_lock_wait(&self, wait: Duration) -> Result<(), db::Error> {
        self.0.set_lock_wait(wait)
    }

    /// The problems the engine's integrity check finds (none: empty).
    pub fn quick_check(&self) -> Result<Vec<String>, db::Error> {
        self.0.quick_check()
    }

    /// The change counter, moved by other connections' commits.
    pub fn data_version(&self) -> Result<i64, db::Error> {
        self.0.data_version()
    }

    /// The round trips to the PostgreSQL server so far (`None` on SQLite).
    pub fn pg_round_trips(&self) -> Option<u64> {
        self.0.pg_round_trips()
    }

    /// The board's stored schema version.
    pub fn schema_version(&self) -> Result<i64, db::Error> {
        self.0.schema_version()
    }

    /// Stores `version` as the board's schema version.
    pub fn set_schema_version(&self, version: i64) -> Result<(), db::Error> {
        self.0.set_schema_version(version)
    }

    /// Whether no transaction is open on the connection.
    pub fn is_autocommit(&self) -> bool {
        self.0.is_autocommit()
    }
}

/// An open write transaction of [`write`].
pub struct WriteTx<'a, 'b>(&'a Tx<'b>);

impl WriteTx<'_, '_> {
    /// Runs one statement inside the transaction; the rows it changed.
    pub fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> Result<usize, db::Error> {
        self.0.execute(sql, params)
    }

    /// Runs one statement inside the transaction, queued to travel with the next one (or the
    /// commit), which reports its failure.
    pub fn execute_unchecked(&self, sql: &str, params: &[&dyn ToSql]) -> Result<(), db::Error> {
        self.0.execute_unchecked(sql, params)
    }

    /// Reads task `id` as the transitions do (on PostgreSQL this first statement takes the
    /// board's write lock).
    pub fn load_task(&self, id: &str) -> Result<Task> {
        crate::board::rows::load_task(self.0, id)
    }

    /// Appends `event` to `task`'s history as a transition would, without changing the task.
    pub fn append_event(
        &self,
        task: &str,
        run_id: Option<i64>,
        event: &Event,
        now: i64,
    ) -> Result<()> {
        crate::board::events::append_event(self.0, task, run_id, event, now)
    }
}
