//! Not API: what the conformance suite (`runtime/tests/conformance/`) needs of the crate's
//! internals, compiled only with the `test-support` feature (which only the runtime's own
//! dev-dependency on itself turns on; a product build never has this module). Each item is a
//! narrow wrapper over a crate-private one: raw SQL on a board's connection for the tamper hooks
//! and the differential dump, and a write transaction for the tests of the write helper.

use crate::board::{Board, Event, Result, Task};
use crate::db::{self, Db, ToSql, Tx, Value};

/// Raw SQL on `board`'s connection, in the SQL layer's common dialect.
pub fn sql(board: &Board) -> Sql<'_> {
    Sql(board.conn())
}

/// Runs `body` in one write transaction of `board` (`Board::write`: committed when it returns
/// `Ok`, rolled back otherwise; a nested write is refused).
pub fn write<T>(board: &Board, body: impl FnOnce(&WriteTx<'_, '_>) -> Result<T>) -> Result<T> {
    board.write(|tx| body(&WriteTx(tx)))
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
