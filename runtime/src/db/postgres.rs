//! The PostgreSQL backend of the SQL layer (over `kanban-pgwire`): the common dialect's
//! translation, value conversions between rusqlite's vocabulary and the wire client's [`Value`],
//! SQLSTATE classification, the transaction verbs ([`Pg::begin`] takes the board's advisory lock
//! [`WRITE_LOCK`]; [`Pg::begin_unlocked`] for claims and heartbeats), and the change counter
//! ([`CHANGES_SEQUENCE`], [`CHANGE_CHANNEL`]). Why every transition keeps its SQLite outcome
//! under this locking, and why the `NOTIFY` goes after the commit, is argued once, in
//! docs/postgres.md ("Opening, transactions and waking"). It never decides a transition.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

use kanban_pgwire::{Client, TransactionStatus, Value};
use rusqlite::types::{ToSqlOutput, ValueRef};

use super::{Error, ErrorKind, Result, ToSql};

/// The names the change counter's statements are written with (one spelling each, joined into
/// the statement texts below with `concat!`).
macro_rules! changes_sequence {
    () => {
        "kanban_change_seq"
    };
}
macro_rules! change_channel {
    () => {
        "kanban_board_changed"
    };
}
macro_rules! changed_setting {
    () => {
        "kanban.changed"
    };
}

/// The table that holds a PostgreSQL database's schema version (SQLite keeps it in the file
/// header: `PRAGMA user_version`).
const VERSION_TABLE: &str = "kanban_schema_version";

/// The sequence of a PostgreSQL board's change counter (see the module docs).
pub(crate) const CHANGES_SEQUENCE: &str = changes_sequence!();

/// The channel a PostgreSQL board's writers `NOTIFY` at commit and its watchers `LISTEN` on (a
/// board has its database to itself, so one name serves every board).
pub(crate) const CHANGE_CHANNEL: &str = change_channel!();

/// The expression a statement run by [`Pg::query_changing`] evaluates in each row it returns
/// (each row says it changed the board): the session mark that has the statement after the
/// commit bump the change counter (and notify) only when it made a change.
pub(crate) const CHANGED_MARK: &str =
    concat!("set_config('", changed_setting!(), "', 'on', false)");

/// The parts of the statement after a commit (joined below with `concat!`): the change
/// counter's bump, clearing the mark; the `NOTIFY`, with the commit of the statement's own
/// transaction not waiting for the disk; the condition on the mark.
macro_rules! bump {
    () => {
        concat!(
            "SELECT nextval('",
            changes_sequence!(),
            "'), set_config('",
            changed_setting!(),
            "', '', false)"
        )
    };
}
macro_rules! and_notify {
    () => {
        concat!(
            ", pg_notify('",
            change_channel!(),
            "', ''), set_config('synchronous_commit', 'off', true)"
        )
    };
}
macro_rules! if_marked {
    () => {
        concat!(
            " WHERE current_setting('",
            changed_setting!(),
            "', true) = 'on'"
        )
    };
}

/// The statement after the `COMMIT` of a transaction that changed the board: the change
/// counter's bump and the `NOTIFY`, in a transaction of their own whose commit does not wait
/// for the disk (`synchronous_commit` off for it alone). PostgreSQL serialises the commits of
/// all notifying transactions of the server on one lock, held through the commit's flush: a
/// `NOTIFY` in the durable transaction would make every board write wait for every other one's
/// fsync (see the module docs).
const BUMP_NOTIFY: &str = concat!(bump!(), and_notify!());

/// [`BUMP_NOTIFY`] without the `NOTIFY`: after a claim or a heartbeat, which give no dispatcher
/// work (see [`Pg::begin_unlocked`]). The counter moves all the same.
const BUMP: &str = bump!();

/// [`BUMP_NOTIFY`] when the transaction's statement set the mark ([`CHANGED_MARK`]).
const BUMP_NOTIFY_IF_MARKED: &str = concat!(bump!(), and_notify!(), if_marked!());

/// [`BUMP`] when the transaction's statement set the mark ([`CHANGED_MARK`]).
const BUMP_IF_MARKED: &str = concat!(bump!(), if_marked!());

/// What a transaction sends from its `COMMIT` on, in one round trip: with `changed` (a write
/// of it changed a row) the counter's bump, with the `NOTIFY` when `notify`; else, with
/// `marked` (its last statement may have set [`CHANGED_MARK`]), the same if it did; else the
/// `COMMIT` alone.
fn commit_statements(changed: bool, marked: bool, notify: bool) -> &'static [&'static str] {
    match (changed, marked, notify) {
        (true, _, true) => &["COMMIT", BUMP_NOTIFY],
        (true, _, false) => &["COMMIT", BUMP],
        (false, true, true) => &["COMMIT", BUMP_NOTIFY_IF_MARKED],
        (false, true, false) => &["COMMIT", BUMP_IF_MARKED],
        (false, false, _) => &["COMMIT"],
    }
}

/// The key of the transaction-scoped advisory lock every write transaction of a board takes
/// first (`"KBW1"` as an integer; see the module docs).
pub(crate) const WRITE_LOCK: i64 = 0x4B42_5731;

/// A connection and the translations of the statements it has run (each common-dialect text
/// is translated once; the wire client keeps the prepared statements).
pub(super) struct Pg {
    client: RefCell<Client>,
    translated: RefCell<HashMap<String, Arc<str>>>,
    /// An `INSERT`, `UPDATE` or `DELETE` of the open transaction changed a row.
    dirty: Cell<bool>,
    /// How many times this connection's own commits bumped the change counter.
    own_bumps: Cell<i64>,
    /// What the error of a lost connection names the database by (a board's redacted URL).
    name: Arc<str>,
    /// A transaction begun but not sent yet ([`Pg::begin`], [`Pg::begin_unlocked`]).
    pending_begin: Cell<bool>,
    /// The open transaction was committed by [`Pg::query_changing`]: the next
    /// [`Pg::commit`] has nothing left to do.
    committed: Cell<bool>,
    /// The open transaction takes the board's write lock ([`Pg::begin`]); only such a
    /// transaction's change wakes the board's watchers (`NOTIFY`), not a claim's or a
    /// heartbeat's ([`Pg::begin_unlocked`]).
    board_locked: Cell<bool>,
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pg")
            .field("target", &self.client.borrow().target())
            .finish()
    }
}

impl Pg {
    pub(super) fn new(client: Client, name: &str) -> Pg {
        Pg {
            client: RefCell::new(client),
            translated: RefCell::new(HashMap::new()),
            dirty: Cell::new(false),
            own_bumps: Cell::new(0),
            name: Arc::from(name),
            pending_begin: Cell::new(false),
            committed: Cell::new(false),
            board_locked: Cell::new(true),
        }
    }

    /// See [`Client::round_trips`].
    #[cfg(feature = "test-support")]
    pub(super) fn round_trips(&self) -> u64 {
        self.client.borrow().round_trips()
    }

    /// True once the connection ended (an I/O or protocol error, the server closing it).
    pub(super) fn is_closed(&self) -> bool {
        self.client.borrow().is_closed()
    }

    /// `LISTEN` on [`CHANGE_CHANNEL`].
    pub(super) fn listen_changes(&self) -> Result<()> {
        let mut client = self.client.borrow_mut();
        client
            .listen(CHANGE_CHANNEL)
            .map_err(|e| self.wire_error(&client, e))
    }

    /// Waits up to `timeout` for a notification on [`CHANGE_CHANNEL`] from another connection;
    /// drains what else is buffered. Returns at the first notification, whoever sent it.
    pub(super) fn wait_change(&self, timeout: std::time::Duration) -> Result<bool> {
        let mut client = self.client.borrow_mut();
        let own = client.backend_pid();
        let first = client
            .wait_notification(timeout)
            .map_err(|e| self.wire_error(&client, e))?;
        let Some(first) = first else {
            return Ok(false);
        };
        let rest = client.take_notifications();
        Ok(std::iter::once(first)
            .chain(rest)
            .any(|n| n.channel == CHANGE_CHANNEL && n.process_id != own))
    }

    /// The layer's error for a failure of the client: [`Error::ConnectionLost`] when the
    /// connection is gone (the failure ended it, or an earlier one did), else [`Error::Queued`]
    /// when a statement queued by [`Pg::execute_deferred`] failed rather than the call's own.
    fn wire_error(&self, client: &Client, e: kanban_pgwire::Error) -> Error {
        if client.is_closed() || kind(&e) == ErrorKind::ConnectionLost {
            Error::ConnectionLost(Box::new(super::LostConnection {
                database: Arc::clone(&self.name),
                error: e,
            }))
        } else if client.queued_failed() {
            Error::Queued(e)
        } else {
            Error::Postgres(e)
        }
    }

    /// Notes a change when `sql` writes and changed `n` rows.
    fn note(&self, sql: &str, n: usize) {
        if n > 0 && writes(sql) {
            self.dirty.set(true);
        }
    }

    /// `BEGIN` and the board's write lock ([`WRITE_LOCK`]), sent with the transaction's first
    /// statement (the same round trip; see [`Pg::send_begin`]). A lock not granted within
    /// `lock_timeout` fails that statement with [`ErrorKind::Busy`](super::ErrorKind::Busy)
    /// and the transaction with it.
    pub(super) fn begin(&self) -> Result<()> {
        self.dirty.set(false);
        self.board_locked.set(true);
        self.pending_begin.set(true);
        Ok(())
    }

    /// `BEGIN` without the board's write lock: a claim's transaction, or a heartbeat's (see the
    /// module docs); sent with its first statement too. Its change bumps the change counter but
    /// sends no `NOTIFY`: a claim takes work and a heartbeat extends a lease, neither gives a
    /// dispatcher anything to do (see the module docs, "Changes").
    pub(super) fn begin_unlocked(&self) -> Result<()> {
        self.dirty.set(false);
        self.board_locked.set(false);
        self.pending_begin.set(true);
        Ok(())
    }

    /// Queues the `BEGIN` (and lock) of a transaction begun by [`Pg::begin`] or
    /// [`Pg::begin_unlocked`] in front of the statement about to be sent: a write transaction
    /// costs no round trip of its own. Its failure is the failure of that statement.
    fn send_begin(&self, client: &mut Client) -> Result<()> {
        if !self.pending_begin.take() {
            return Ok(());
        }
        let queued = client
            .execute_deferred("BEGIN ISOLATION LEVEL READ COMMITTED", &[])
            .and_then(|()| match self.board_locked.get() {
                true => client.execute_deferred(
                    "SELECT pg_advisory_xact_lock($1)",
                    &[Value::Int(WRITE_LOCK)],
                ),
                false => Ok(()),
            });
        queued.map_err(|e| self.wire_error(client, e))
    }

    /// True inside a transaction, begun on the server or still to be sent (its `BEGIN` pending
    /// or queued with statements not sent yet: only a transaction queues statements).
    fn in_transaction(&self, client: &Client) -> bool {
        self.pending_begin.get()
            || client.deferred() > 0
            || client.transaction_status() != TransactionStatus::Idle
    }

    /// Ends the open transaction without committing; one begun but never sent is just
    /// forgotten.
    pub(super) fn rollback(&self) {
        self.dirty.set(false);
        self.committed.set(false);
        if self.pending_begin.take() {
            return;
        }
        let mut client = self.client.borrow_mut();
        // Statements not sent yet (the `BEGIN` among them when nothing was sent) are dropped.
        client.discard_deferred();
        if client.transaction_status() != TransactionStatus::Idle {
            let _ = client.batch("ROLLBACK");
        }
    }

    /// `COMMIT`; a transaction that changed a row also notifies the board's watchers and bumps
    /// the change counter, in the same round trip.
    /// Statements queued by [`Pg::execute_deferred`] go in that round trip too; if one failed,
    /// its error is returned ([`Error::Queued`]) and nothing is committed. A transaction that an
    /// earlier failure aborted (or none at all) is never committed: [`Error::Aborted`] (a
    /// server would answer `COMMIT` of a failed transaction with a quiet rollback).
    pub(super) fn commit(&self) -> Result<()> {
        if self.committed.take() {
            return Ok(());
        }
        if self.pending_begin.take() {
            // Nothing was sent: there is nothing to commit.
            self.dirty.set(false);
            return Ok(());
        }
        let mut client = self.client.borrow_mut();
        // Idle with statements still queued: the `BEGIN` is among them (sent with this commit).
        let begun = match client.transaction_status() {
            TransactionStatus::InTransaction => true,
            TransactionStatus::Idle => client.deferred() > 0,
            TransactionStatus::Failed => false,
        };
        if !begun {
            self.dirty.set(false);
            return Err(Error::Aborted);
        }
        // Prepared statements, sent together: the body's queued writes, `COMMIT`, and the
        // counter's bump and `NOTIFY` after it (a watcher woken, or seeing the counter move,
        // then reads the change; `nextval` never waits for another transaction).
        let changed = self.dirty.replace(false);
        // The last statement is the call that sends them all and waits (never empty: COMMIT).
        let (last, first) = commit_statements(changed, false, self.board_locked.get())
            .split_last()
            .unwrap_or((&"COMMIT", &[]));
        let r = first
            .iter()
            .try_for_each(|sql| client.execute_deferred(sql, &[]))
            .and_then(|()| client.execute(last, &[]));
        if r.is_ok() && changed {
            self.own_bumps.set(self.own_bumps.get() + 1);
        }
        r.map(drop).map_err(|e| self.wire_error(&client, e))
    }

    /// The change counter minus this connection's own bumps (see the module docs).
    pub(super) fn data_version(&self) -> Result<i64> {
        let mut client = self.client.borrow_mut();
        let row = client
            .query_opt(
                &format!(
                    "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {CHANGES_SEQUENCE}"
                ),
                &[],
            )
            .map_err(|e| self.wire_error(&client, e))?;
        let total = row
            .and_then(|r| r.get(0).and_then(Value::as_i64))
            .unwrap_or(0);
        Ok(total - self.own_bumps.get())
    }

    /// `sql` in PostgreSQL's dialect, translated once per connection.
    pub(super) fn translated(&self, sql: &str) -> Arc<str> {
        if let Some(done) = self.translated.borrow().get(sql) {
            return Arc::clone(done);
        }
        let done: Arc<str> = Arc::from(translate(sql).as_ref());
        self.translated
            .borrow_mut()
            .insert(sql.to_owned(), Arc::clone(&done));
        done
    }

    pub(super) fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> Result<usize> {
        let values = values(params)?;
        let mut client = self.client.borrow_mut();
        self.send_begin(&mut client)?;
        let n = client
            .execute(sql, &values)
            .map_err(|e| self.wire_error(&client, e))?;
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        self.note(sql, n);
        Ok(n)
    }

    /// Queues `sql` in the wire client's pipeline inside a transaction (see
    /// [`super::Db::execute_unchecked`]); outside one, runs it at once. A queued write counts
    /// as a change of the transaction (its row count is not known before the commit).
    pub(super) fn execute_deferred(&self, sql: &str, params: &[&dyn ToSql]) -> Result<()> {
        let values = values(params)?;
        let mut client = self.client.borrow_mut();
        if !self.in_transaction(&client) {
            drop(client);
            return self.execute(sql, params).map(drop);
        }
        self.send_begin(&mut client)?;
        client.execute_deferred(sql, &values)?;
        if writes(sql) {
            self.dirty.set(true);
        }
        Ok(())
    }

    /// Runs `sql` (PostgreSQL's dialect, not translated), a statement whose result has rows
    /// exactly when it changed the board and which then also sets the session's changed mark
    /// ([`CHANGED_MARK`]), in the open transaction; with `commit`, the transaction is committed
    /// in the same round trip, with the `NOTIFY` and the change counter's bump of
    /// [`Pg::commit`] only when something changed (the mark, or statements queued before).
    /// A failed statement fails the transaction and nothing is committed.
    pub(super) fn query_changing(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        commit: bool,
    ) -> Result<Vec<kanban_pgwire::Row>> {
        let values = values(params)?;
        let mut client = self.client.borrow_mut();
        self.send_begin(&mut client)?;
        if !commit {
            let rows = client
                .query(sql, &values)
                .map_err(|e| self.wire_error(&client, e))?;
            if !rows.is_empty() {
                self.dirty.set(true);
            }
            return Ok(rows);
        }
        // After the commit: the bump (and `NOTIFY`) when the statement changed something (its
        // mark) or writes queued before it did.
        let then: Vec<(&str, &[Value])> =
            commit_statements(self.dirty.get(), true, self.board_locked.get())
                .iter()
                .map(|sql| (*sql, &[] as &[Value]))
                .collect();
        let rows = client
            .query_then(sql, &values, &then)
            .map_err(|e| self.wire_error(&client, e))?;
        if self.dirty.replace(false) || !rows.is_empty() {
            self.own_bumps.set(self.own_bumps.get() + 1);
        }
        self.committed.set(true);
        Ok(rows)
    }

    /// Sends the queued statements and waits for them.
    pub(super) fn sync(&self) -> Result<()> {
        let mut client = self.client.borrow_mut();
        client.sync().map_err(|e| self.wire_error(&client, e))
    }

    pub(super) fn query(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
    ) -> Result<Vec<kanban_pgwire::Row>> {
        let values = values(params)?;
        let mut client = self.client.borrow_mut();
        self.send_begin(&mut client)?;
        let rows = client
            .query(sql, &values)
            .map_err(|e| self.wire_error(&client, e))?;
        self.note(sql, rows.len());
        Ok(rows)
    }

    pub(super) fn batch(&self, sql: &str) -> Result<()> {
        let mut client = self.client.borrow_mut();
        self.send_begin(&mut client)?;
        client
            .batch(&translate(sql))
            .map_err(|e| self.wire_error(&client, e))
    }

    pub(super) fn is_autocommit(&self) -> bool {
        !self.in_transaction(&self.client.borrow())
    }

    /// `lock_timeout` for this session: a statement waiting longer for a row or table lock fails
    /// with SQLSTATE `55P03` ([`ErrorKind::Busy`]).
    pub(super) fn set_lock_wait(&self, wait: std::time::Duration) -> Result<()> {
        let ms = wait.as_millis().max(1);
        Ok(self
            .client
            .borrow_mut()
            .batch(&format!("SET lock_timeout = '{ms}ms'"))?)
    }

    pub(super) fn schema_version(&self) -> Result<i64> {
        let exists = self.query(
            "SELECT to_regclass($1) IS NOT NULL",
            &[&VERSION_TABLE as &dyn ToSql],
        )?;
        if !matches!(exists.first().and_then(|r| r.get(0)), Some(Value::Int(1))) {
            return Ok(0);
        }
        let rows = self.query(&format!("SELECT version FROM {VERSION_TABLE}"), &[])?;
        Ok(rows
            .first()
            .and_then(|r| r.get(0))
            .and_then(Value::as_i64)
            .unwrap_or(0))
    }

    pub(super) fn set_schema_version(&self, version: i64) -> Result<()> {
        self.batch(&format!(
            "CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (singleton integer PRIMARY KEY \
             CHECK (singleton = 1), version bigint NOT NULL)"
        ))?;
        self.execute(
            &format!(
                "INSERT INTO {VERSION_TABLE} (singleton, version) VALUES (1, $1) \
                 ON CONFLICT (singleton) DO UPDATE SET version = excluded.version"
            ),
            &[&version as &dyn ToSql],
        )
        .map(drop)
    }
}

/// The kind of a wire-client error, from its SQLSTATE.
///
/// A lost connection ([`ErrorKind::ConnectionLost`], see the layer's module docs): the server
/// ended the session (`57P01` admin_shutdown: `pg_terminate_backend` or a fast shutdown; `57P02`
/// crash_shutdown; `57P03` cannot_connect_now), a connection exception (class `08`), the socket
/// failing (`Io`) or already closed (`Closed`). A failed connect is also an `Io` error, but it
/// never reaches this function: `board::engine::postgres::store` says the server is unreachable before any
/// statement runs. Refused credentials (class `28`) and a missing database (`3D000`) are "cannot
/// open".
pub(super) fn kind(err: &kanban_pgwire::Error) -> ErrorKind {
    use kanban_pgwire::Error as E;
    match err {
        E::Db(db) => match db.code.as_str() {
            // lock_not_available (lock_timeout), serialization_failure, deadlock_detected.
            "55P03" | "40001" | "40P01" => ErrorKind::Busy,
            "23505" => ErrorKind::UniqueViolation,
            "25006" => ErrorKind::ReadOnly,
            "53100" => ErrorKind::DiskFull,
            "58030" => ErrorKind::IoFailure,
            "XX001" | "XX002" => ErrorKind::Corrupt,
            "57P01" | "57P02" | "57P03" => ErrorKind::ConnectionLost,
            code if code.starts_with("08") => ErrorKind::ConnectionLost,
            code if code.starts_with("28") || code == "3D000" => ErrorKind::CannotOpen,
            _ => ErrorKind::Other,
        },
        E::Io { .. } | E::Closed => ErrorKind::ConnectionLost,
        E::Config(_) | E::Auth(_) => ErrorKind::CannotOpen,
        E::RowCount { got: 0, .. } => ErrorKind::NoRows,
        _ => ErrorKind::Other,
    }
}

/// True for an `INSERT`, `UPDATE` or `DELETE` (by its first word).
fn writes(sql: &str) -> bool {
    let head = sql.trim_start().as_bytes();
    ["INSERT", "UPDATE", "DELETE"]
        .iter()
        .any(|w| head.len() >= w.len() && head[..w.len()].eq_ignore_ascii_case(w.as_bytes()))
}

/// A parameter as the wire client sends it.
fn value(param: &dyn ToSql) -> Result<Value> {
    let out = param.to_sql()?;
    let value_ref = match &out {
        ToSqlOutput::Borrowed(v) => *v,
        ToSqlOutput::Owned(v) => ValueRef::from(v),
        _ => {
            return Err(Error::Unsupported(
                "a parameter kind other than a plain value (zeroblob, array)",
            ));
        }
    };
    Ok(match value_ref {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    })
}

fn values(params: &[&dyn ToSql]) -> Result<Vec<Value>> {
    params.iter().map(|p| value(*p)).collect()
}

/// A column value in rusqlite's vocabulary, for `FromSql`.
pub(super) fn value_ref(value: &Value) -> ValueRef<'_> {
    match value {
        Value::Null => ValueRef::Null,
        Value::Int(i) => ValueRef::Integer(*i),
        Value::Real(f) => ValueRef::Real(*f),
        Value::Text(t) => ValueRef::Text(t.as_bytes()),
        Value::Blob(b) => ValueRef::Blob(b),
    }
}

/// A statement of the common dialect in PostgreSQL's: `?N` → `$N`; `a IS b` / `a IS NOT b`
/// (anything but `NULL`, `TRUE`, `FALSE`, `UNKNOWN`, `DISTINCT`) → `a IS NOT DISTINCT FROM b` /
/// `a IS DISTINCT FROM b`; `json_extract(expr, '$.k1.k2')` → `(expr)::jsonb #>> '{k1,k2}'` (text,
/// as SQLite's for a string), and `json_extract(…) = N` for an integer literal `N` compares that
/// text with `'N'` (and `'true'` / `'false'` for 1 / 0: SQLite's `json_extract` gives 1 / 0 for
/// JSON booleans); `LIKE` → `ILIKE` (SQLite's `LIKE` ignores ASCII case). `rowid` is left as
/// written: the PostgreSQL `tasks` table has a `rowid` identity column (insertion order, what
/// SQLite's `rowid` of a table with a text key is), the only table the board orders by `rowid`.
/// Quoted text (`'…'`, `"…"`) is copied as it is. Borrowed when nothing changes.
pub(super) fn translate(sql: &str) -> Cow<'_, str> {
    let lower = sql.to_ascii_lowercase();
    if !sql.contains('?')
        && !lower.contains("is")
        && !lower.contains("json_extract")
        && !lower.contains("like")
    {
        return Cow::Borrowed(sql);
    }
    let chars: Vec<char> = sql.chars().collect();
    let mut out = String::with_capacity(sql.len() + 16);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' | '"' => {
                let end = quoted_end(&chars, i);
                out.extend(&chars[i..end]);
                i = end;
            }
            '?' => {
                out.push('$');
                i += 1;
            }
            c if is_word(c) => {
                let end = word_end(&chars, i);
                let word: String = chars[i..end].iter().collect();
                if word.eq_ignore_ascii_case("json_extract")
                    && next_non_space(&chars, end) == Some('(')
                    && let Some((text, after)) = json_extract(&chars, end)
                {
                    out.push_str(&text);
                    i = after;
                    if let Some((literal, after)) = integer_comparison(&chars, i) {
                        let also = match literal.as_str() {
                            "1" => ", 'true'",
                            "0" => ", 'false'",
                            _ => "",
                        };
                        out.push_str(&format!(" IN ('{literal}'{also})"));
                        i = after;
                    }
                    continue;
                }
                if word.eq_ignore_ascii_case("like") {
                    out.push_str("ILIKE");
                    i = end;
                    continue;
                }
                out.push_str(&word);
                i = end;
                if word.eq_ignore_ascii_case("is") {
                    i = is_comparison(&chars, i, &mut out);
                }
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    if out == sql {
        Cow::Borrowed(sql)
    } else {
        Cow::Owned(out)
    }
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn word_end(chars: &[char], start: usize) -> usize {
    let mut end = start;
    while end < chars.len() && is_word(chars[end]) {
        end += 1;
    }
    end
}

/// The index just past the quoted text opening at `start` (a doubled quote stays inside).
fn quoted_end(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() {
        if chars[i] == quote {
            if chars.get(i + 1) == Some(&quote) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i += 1;
    }
    chars.len()
}

/// `= <integer literal>` at or after `from` (spaces allowed): the literal and the index just past
/// it.
fn integer_comparison(chars: &[char], from: usize) -> Option<(String, usize)> {
    let mut i = from;
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    if chars.get(i) != Some(&'=') {
        return None;
    }
    i += 1;
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    let start = i;
    if chars.get(i) == Some(&'-') {
        i += 1;
    }
    let digits = i;
    while i < chars.len() && chars[i].is_ascii_digit() {
        i += 1;
    }
    if i == digits || chars.get(i).is_some_and(|c| is_word(*c) || *c == '.') {
        return None;
    }
    Some((chars[start..i].iter().collect(), i))
}

fn next_non_space(chars: &[char], from: usize) -> Option<char> {
    chars[from..].iter().copied().find(|c| !c.is_whitespace())
}

/// After the keyword `IS` (already copied): `NOT`? then the operand. Returns where to go on.
fn is_comparison(chars: &[char], mut i: usize, out: &mut String) -> usize {
    let mut spaces = String::new();
    while i < chars.len() && chars[i].is_whitespace() {
        spaces.push(chars[i]);
        i += 1;
    }
    let mut negated = false;
    let mut after_not = i;
    if i < chars.len() && is_word(chars[i]) {
        let end = word_end(chars, i);
        let word: String = chars[i..end].iter().collect();
        if word.eq_ignore_ascii_case("not") {
            negated = true;
            after_not = end;
            while after_not < chars.len() && chars[after_not].is_whitespace() {
                after_not += 1;
            }
        }
    }
    let operand = if after_not < chars.len() && is_word(chars[after_not]) {
        let end = word_end(chars, after_not);
        Some(chars[after_not..end].iter().collect::<String>())
    } else {
        None
    };
    let keeps = operand.as_deref().is_some_and(|w| {
        ["null", "true", "false", "unknown", "distinct"]
            .iter()
            .any(|k| w.eq_ignore_ascii_case(k))
    });
    if keeps {
        out.push_str(&spaces);
        return i;
    }
    out.push_str(if negated {
        " DISTINCT FROM "
    } else {
        " NOT DISTINCT FROM "
    });
    after_not
}

/// `json_extract(expr, '$.a.b')` from the `(` at or after `from`: the translation and the index
/// just past its `)`; `None` when the call is not of that form (left as written).
fn json_extract(chars: &[char], from: usize) -> Option<(String, usize)> {
    let open = from + chars[from..].iter().position(|c| *c == '(')?;
    let mut depth = 0usize;
    let mut i = open + 1;
    let mut comma = None;
    while i < chars.len() {
        match chars[i] {
            '\'' | '"' => {
                i = quoted_end(chars, i);
                continue;
            }
            '(' => depth += 1,
            ')' if depth == 0 => break,
            ')' => depth -= 1,
            ',' if depth == 0 && comma.is_none() => comma = Some(i),
            _ => {}
        }
        i += 1;
    }
    let close = i;
    let comma = comma?;
    let expr: String = chars[open + 1..comma].iter().collect();
    let path: String = chars[comma + 1..close.min(chars.len())].iter().collect();
    let path = path.trim();
    let inner = path.strip_prefix("'$.")?.strip_suffix('\'')?;
    if inner.is_empty() || !inner.chars().all(|c| is_word(c) || c == '.') {
        return None;
    }
    let keys = inner.split('.').collect::<Vec<_>>().join(",");
    let expr = translate(expr.trim()).into_owned();
    Some((format!("(({expr})::jsonb #>> '{{{keys}}}')"), close + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notify_follows_the_commit_in_a_transaction_that_does_not_wait_for_the_disk() {
        for changed in [false, true] {
            for marked in [false, true] {
                for notify in [false, true] {
                    let statements = commit_statements(changed, marked, notify);
                    assert_eq!(statements[0], "COMMIT", "nothing before the commit");
                    let notifies = statements.iter().any(|s| s.contains("pg_notify"));
                    assert_eq!(notifies, notify && (changed || marked));
                    for s in statements.iter().filter(|s| s.contains("pg_notify")) {
                        assert!(
                            s.contains("set_config('synchronous_commit', 'off', true)"),
                            "{s}"
                        );
                    }
                    let bumps = statements.iter().any(|s| s.contains("nextval"));
                    assert_eq!(bumps, changed || marked);
                }
            }
        }
        assert!(!CHANGED_MARK.contains("pg_notify"));
    }

    #[test]
    fn wire_errors_are_classified_by_sqlstate_and_a_lost_connection_is_its_own_kind() {
        use kanban_pgwire::{DbError, Error as E};
        let server = |code: &str| {
            E::Db(Box::new(DbError {
                severity: "FATAL".to_owned(),
                code: code.to_owned(),
                message: "m".to_owned(),
                ..DbError::default()
            }))
        };
        for (code, expected) in [
            // The server ended the session: pg_terminate_backend / fast shutdown, a crash of
            // another backend, a server starting up or shutting down.
            ("57P01", ErrorKind::ConnectionLost),
            ("57P02", ErrorKind::ConnectionLost),
            ("57P03", ErrorKind::ConnectionLost),
            // Connection exceptions (class 08).
            ("08000", ErrorKind::ConnectionLost),
            ("08003", ErrorKind::ConnectionLost),
            ("08006", ErrorKind::ConnectionLost),
            ("08001", ErrorKind::ConnectionLost),
            ("08004", ErrorKind::ConnectionLost),
            ("08P01", ErrorKind::ConnectionLost),
            // Not a lost connection: a cancelled statement, an idle session ended by a timeout
            // the board never sets, others of class 57.
            ("57014", ErrorKind::Other),
            ("57000", ErrorKind::Other),
            ("57P04", ErrorKind::Other),
            // The kinds that were there before.
            ("55P03", ErrorKind::Busy),
            ("40001", ErrorKind::Busy),
            ("40P01", ErrorKind::Busy),
            ("23505", ErrorKind::UniqueViolation),
            ("25006", ErrorKind::ReadOnly),
            ("53100", ErrorKind::DiskFull),
            ("58030", ErrorKind::IoFailure),
            ("XX001", ErrorKind::Corrupt),
            ("XX002", ErrorKind::Corrupt),
            ("28P01", ErrorKind::CannotOpen),
            ("28000", ErrorKind::CannotOpen),
            ("3D000", ErrorKind::CannotOpen),
            ("23503", ErrorKind::Other),
            ("42601", ErrorKind::Other),
        ] {
            assert_eq!(kind(&server(code)), expected, "{code}");
        }
        let io = E::Io {
            context: "lost the connection to PostgreSQL at /tmp/s".to_owned(),
            source: std::io::Error::from(std::io::ErrorKind::BrokenPipe),
        };
        assert_eq!(kind(&io), ErrorKind::ConnectionLost);
        assert_eq!(kind(&E::Closed), ErrorKind::ConnectionLost);
        assert_eq!(kind(&E::Config("x".to_owned())), ErrorKind::CannotOpen);
        assert_eq!(kind(&E::Auth("x".to_owned())), ErrorKind::CannotOpen);
        assert_eq!(kind(&E::Protocol("x".to_owned())), ErrorKind::Other);
        let none = E::RowCount {
            expected: "exactly one row",
            got: 0,
        };
        assert_eq!(kind(&none), ErrorKind::NoRows);
        // The layer's errors: the wrapped lost connection keeps its kind and names its database;
        // the same wire error unwrapped (a failed connect) names none.
        let lost = Error::ConnectionLost(Box::new(super::super::LostConnection {
            database: Arc::from("postgres://kb@%2Ftmp/board"),
            error: E::Closed,
        }));
        assert_eq!(lost.kind(), ErrorKind::ConnectionLost);
        assert_eq!(lost.lost_database(), Some("postgres://kb@%2Ftmp/board"));
        assert_eq!(lost.to_string(), E::Closed.to_string());
        assert_eq!(Error::Postgres(E::Closed).lost_database(), None);
    }

    #[test]
    fn the_common_dialect_becomes_postgresql() {
        assert_eq!(translate("SELECT 1"), "SELECT 1");
        assert!(matches!(translate("SELECT 1"), Cow::Borrowed(_)));
        assert_eq!(
            translate("UPDATE t SET a = ?2 WHERE id = ?1 AND lock IS ?3 AND run IS NOT ?4"),
            "UPDATE t SET a = $2 WHERE id = $1 AND lock IS NOT DISTINCT FROM $3 \
             AND run IS DISTINCT FROM $4"
        );
        assert_eq!(
            translate("SELECT 1 FROM t WHERE a IS NULL AND b IS NOT NULL AND c = '?1 is x'"),
            "SELECT 1 FROM t WHERE a IS NULL AND b IS NOT NULL AND c = '?1 is x'"
        );
        assert_eq!(
            translate(
                "SELECT 1 FROM e WHERE json_extract(e.payload, '$.source_status') = 'review' \
                 AND json_extract(payload, '$.a.b') IS NOT json_extract(payload, '$.c')"
            ),
            "SELECT 1 FROM e WHERE ((e.payload)::jsonb #>> '{source_status}') = 'review' \
             AND ((payload)::jsonb #>> '{a,b}') IS DISTINCT FROM ((payload)::jsonb #>> '{c}')"
        );
        // SQLite's json_extract gives 1 / 0 for JSON true / false.
        assert_eq!(
            translate("AND json_extract(e.payload, '$.infrastructure') = 1)"),
            "AND ((e.payload)::jsonb #>> '{infrastructure}') IN ('1', 'true'))"
        );
        assert_eq!(
            translate(
                "json_extract(p, '$.n') = 0 OR json_extract(p, '$.n') = -7 OR json_extract(p, '$.n') = 1.5"
            ),
            "((p)::jsonb #>> '{n}') IN ('0', 'false') OR ((p)::jsonb #>> '{n}') IN ('-7') \
             OR ((p)::jsonb #>> '{n}') = 1.5"
        );
        assert_eq!(
            translate("c.body LIKE '%github.com/%/pull/%' AND likes = 1"),
            "c.body ILIKE '%github.com/%/pull/%' AND likes = 1"
        );
        // Not a path this translation knows: left for the server to refuse, never guessed.
        assert_eq!(
            translate("SELECT json_extract(p, '$[0]') FROM t"),
            "SELECT json_extract(p, '$[0]') FROM t"
        );
    }
}
