//! Opening a board and the one write-transaction helper.
//!
//! [`Board::open`] refuses a file that is not SQLite without touching it (it reads the 16-byte
//! header before SQLite ever sees the file), refuses WAL on a linked SQLite with the WAL-reset bug,
//! sets the pragmas (`busy_timeout`, `synchronous`, `foreign_keys`; a fresh board's page size),
//! migrates the schema, and puts a board kanban created in WAL mode (any other board keeps its
//! journal mode; see `schema` for how kanban knows which boards it created).
//!
//! Anything at the board path that is not a regular file (a directory, a device such as
//! `/dev/null`, a FIFO, a socket, or a symlink to one of them) is refused before SQLite sees it, so
//! nothing is read from or written next to it (no `/dev/null-journal`).
//!
//! [`Board::write`] is the only way to write: `BEGIN IMMEDIATE`, the body, `COMMIT`. Only `BEGIN`
//! and `COMMIT` are retried on busy (at most [`BUSY_RETRIES`] more tries, each after a random
//! 20–150 ms pause so retrying processes do not convoy), and every try shares one budget: the busy
//! timeout. SQLite's own busy handler waits only for what is left of it, so a write against a
//! locked board gives up after the busy timeout in total, never several times it. The body is
//! never replayed. A body error rolls back. Nesting is refused, never silently turned into a
//! savepoint: a transition that needs another one calls its `*_in(tx, …)` form inside the same
//! transaction. Opening a board retries its switch to WAL the same way (SQLite makes that switch
//! without waiting for a write lock another connection holds: processes opening a fresh board at
//! once meet it).
//!
//! [`OpenOptions::read_only`] opens a board for reading only (read commands fall back to it when
//! the file or its folder is not writable): no pragma that writes, no migration, and writes fail
//! with [`BoardError::Storage(StorageError::ReadOnly)`].

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::board::StorageError;
use crate::db::{self, Db, ErrorKind, Tx};

use super::error::{BoardError, Result};
use crate::db::target::BoardLocation;
use crate::identity::settings::{self, Setting};

/// Default `busy_timeout`: 120 s.
pub(crate) const DEFAULT_BUSY_TIMEOUT_MS: u64 = 120_000;
/// Largest accepted `busy_timeout`: one day.
pub(crate) const MAX_BUSY_TIMEOUT_MS: u64 = 86_400_000;
/// Extra tries of `BEGIN IMMEDIATE` / `COMMIT` after SQLite gave up with busy.
pub(crate) const BUSY_RETRIES: u32 = 5;

/// `PRAGMA synchronous` of a board.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL`: a committed transition survives a power cut (the default).
    #[default]
    Full,
    /// `synchronous=NORMAL`: faster; a power cut may lose the last commits (never corrupts).
    Normal,
}

/// How to open a board.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Create the database (and its directories) when missing.
    pub create: bool,
    /// `None`: `HERMES_KANBAN_BUSY_TIMEOUT_MS`, else [`DEFAULT_BUSY_TIMEOUT_MS`].
    pub busy_timeout_ms: Option<u64>,
    pub durability: Durability,
    /// Open for reading only: no pragma that writes, no migration (an outdated schema is an
    /// error), every write fails with [`BoardError::Storage(StorageError::ReadOnly)`]. Wins over `create`.
    pub read_only: bool,
}

impl OpenOptions {
    /// Options that create a missing board.
    pub fn create() -> Self {
        Self {
            create: true,
            ..Self::default()
        }
    }

    /// Options that only read an existing board.
    pub fn read_only() -> Self {
        Self {
            read_only: true,
            ..Self::default()
        }
    }
}

/// An open board database.
#[derive(Debug)]
pub struct Board {
    pub(in crate::board) conn: Db,
    pub(in crate::board) path: PathBuf,
    /// The busy timeout: the whole budget of one `BEGIN` or `COMMIT`, retries included.
    pub(in crate::board) busy_timeout: Duration,
    pub(in crate::board) read_only: bool,
    /// The change stamp (`Db::change_stamp`, SQLite only) at which the promotion pass last found
    /// nothing to promote: until the board changes, nothing can have become promotable.
    pub(in crate::board) nothing_promotable_at: std::cell::Cell<Option<(i64, i64)>>,
    /// Owners' `state.db` files this board's reads of owner turns keep open between calls (a
    /// dispatcher in owner mode asks at every tick).
    pub(in crate::board) owner_states: std::cell::RefCell<super::owner_states::OwnerStates>,
}

/// A pause of 20–150 ms drawn from the kernel's generator (the middle of the range if it fails:
/// a jitter is no reason to fail a write).
fn jitter() -> Duration {
    Duration::from_millis(20 + crate::proc::random::below(131).unwrap_or(65))
}

/// A random lower-case hex string of `n` digits (task ids, temporary names).
pub(crate) fn random_hex(n: usize) -> std::result::Result<String, StorageError> {
    crate::proc::random::hex_digits(n).map_err(|source| StorageError::Random { source })
}

impl Board {
    /// Opens the board at `location`; see [`Board::open_path`].
    pub fn open(location: &BoardLocation, options: &OpenOptions) -> Result<Board> {
        if let Some(target) = location.postgres() {
            return Self::open_postgres(target, Some(&location.slug), options);
        }
        let creates = options.create && !options.read_only;
        if !creates && !location.pinned && !location.db_path.exists() {
            return Err(BoardError::Storage(StorageError::BoardNotFound {
                slug: location.slug.clone(),
                path: location.db_path.clone(),
            }));
        }
        Self::open_path(&location.db_path, options)
    }

    /// A board on a connection another store module opened and brought to the board schema
    /// (`path`: what messages name the board by; a PostgreSQL board's redacted URL).
    pub(super) fn from_db(
        conn: Db,
        path: PathBuf,
        busy_timeout: Duration,
        read_only: bool,
    ) -> Board {
        Board {
            conn,
            path,
            busy_timeout,
            read_only,
            nothing_promotable_at: std::cell::Cell::new(None),
            owner_states: Default::default(),
        }
    }

    /// True when the board's connection is gone for good: a PostgreSQL connection that the
    /// server or the network ended (every later statement fails at once). Open the board again.
    /// Never true for a SQLite board.
    pub fn connection_lost(&self) -> bool {
        self.conn.connection_lost()
    }

    /// True when the board lives in PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.conn.as_sqlite().is_none()
    }

    /// The busy timeout in milliseconds (for [`BoardError::Storage(StorageError::Busy)`]).
    pub(in crate::board) fn busy_timeout_ms(&self) -> u64 {
        u64::try_from(self.busy_timeout.as_millis()).unwrap_or(u64::MAX)
    }

    /// True when this board was opened with [`OpenOptions::read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Turns a SQLite "read-only" or "cannot open" failure on this board into the error that
    /// names the file and says what to do.
    pub(in crate::board) fn classify(&self, err: BoardError) -> BoardError {
        if self.is_postgres() {
            return err.on_postgres(
                &self.path.to_string_lossy(),
                self.connection_lost(),
                self.busy_timeout_ms(),
            );
        }
        let kind = match &err {
            BoardError::Storage(StorageError::Sql(source))
            | BoardError::Storage(StorageError::Sqlite { source, .. }) => Some(source.kind()),
            _ => None,
        };
        match kind {
            Some(ErrorKind::ReadOnly) => BoardError::Storage(StorageError::ReadOnly {
                path: self.path.clone(),
            }),
            Some(ErrorKind::CannotOpen) => BoardError::Storage(StorageError::CannotOpen {
                path: self.path.clone(),
            }),
            _ => err,
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection, for read queries inside `board/`.
    pub(crate) fn conn(&self) -> &Db {
        &self.conn
    }

    /// Runs `body` in one `BEGIN IMMEDIATE` transaction: commit on `Ok`, roll back on `Err`.
    /// Only `BEGIN` and `COMMIT` are retried on busy; nesting is refused.
    pub(crate) fn write<T, E>(&self, body: impl FnOnce(&Tx<'_>) -> Result<T, E>) -> Result<T, E>
    where
        E: From<BoardError> + WriteError,
    {
        self.write_with(Db::begin_immediate, body)
    }

    /// [`Board::write`] for a transaction that locks only the rows it writes — a claim, and on
    /// PostgreSQL a heartbeat's one statement: it begins with [`Db::begin_claim`] (on PostgreSQL
    /// without the board's write lock; SQLite has only its one write lock).
    pub(crate) fn write_row_locked<T>(&self, body: impl FnOnce(&Tx<'_>) -> Result<T>) -> Result<T> {
        self.write_with(Db::begin_claim, body)
    }

    fn write_with<T, E>(
        &self,
        begin: fn(&Db) -> db::Result<()>,
        body: impl FnOnce(&Tx<'_>) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<BoardError> + WriteError,
    {
        if self.read_only {
            if self.is_postgres() {
                return Err(BoardError::Storage(StorageError::PgReadOnly {
                    url: self.path.to_string_lossy().into_owned(),
                    by_server: false,
                    source: None,
                })
                .into());
            }
            return Err(BoardError::Storage(StorageError::ReadOnly {
                path: self.path.clone(),
            })
            .into());
        }
        if !self.conn.is_autocommit() {
            return Err(BoardError::Storage(StorageError::NestedWrite).into());
        }
        self.retry_busy("begin a write transaction", begin)?;
        let tx = Tx::new(&self.conn);
        match body(&tx) {
            Ok(value) => {
                if let Err(err) = self.retry_busy("commit", Db::commit) {
                    self.conn.rollback();
                    return Err(err.into());
                }
                Ok(value)
            }
            Err(err) => {
                self.conn.rollback();
                if self.is_postgres() {
                    return Err(err.on_postgres(
                        &self.path.to_string_lossy(),
                        self.connection_lost(),
                        self.busy_timeout_ms(),
                    ));
                }
                Err(err)
            }
        }
    }

    /// Runs `step` (`BEGIN IMMEDIATE` or `COMMIT`), retrying it on busy within one budget: the
    /// busy timeout. Before each retry the engine's lock wait (SQLite's busy handler) is given
    /// only what is left of the budget, and the full timeout is restored afterwards.
    pub(in crate::board) fn retry_busy(
        &self,
        what: &'static str,
        step: impl Fn(&Db) -> db::Result<()>,
    ) -> Result<()> {
        let started = Instant::now();
        let mut tries = 0;
        let mut shortened = false;
        let outcome = loop {
            match step(&self.conn) {
                Ok(()) => break Ok(()),
                // A statement of the body the commit sent (see `Db::execute_unchecked`): its
                // failure is the body's, never retried.
                // On PostgreSQL a read-only session or a lost connection is still said so.
                Err(e) if e.is_queued_statement() => {
                    break Err(self.classify(BoardError::Storage(StorageError::Sql(e))));
                }
                Err(e) if e.kind() == ErrorKind::Busy => {
                    match next_busy_try(started.elapsed(), self.busy_timeout, tries, jitter()) {
                        Some((pause, left)) => {
                            std::thread::sleep(pause);
                            tries += 1;
                            shortened = true;
                            if let Err(source) = self.conn.set_lock_wait(left) {
                                break Err(self.classify(BoardError::Storage(
                                    StorageError::Sqlite {
                                        path: self.path.clone(),
                                        source,
                                    },
                                )));
                            }
                        }
                        None => {
                            break Err(BoardError::Storage(StorageError::Busy {
                                path: self.path.clone(),
                                what,
                                timeout_ms: u64::try_from(self.busy_timeout.as_millis())
                                    .unwrap_or(u64::MAX),
                                tries: tries + 1,
                            }));
                        }
                    }
                }
                Err(source) => {
                    break Err(self.classify(BoardError::Storage(StorageError::Sqlite {
                        path: self.path.clone(),
                        source,
                    })));
                }
            }
        };
        if shortened {
            // Restoring the handler cannot fail on an open connection; if it did, the next write
            // would merely wait less.
            let _ = self.conn.set_lock_wait(self.busy_timeout);
        }
        outcome
    }
}

/// An error a [`Board::write`] body may fail with. On a PostgreSQL board a body's failure is
/// reworded in PostgreSQL's terms ([`BoardError::on_postgres`]: a read-only session, a lost
/// connection) when it is a [`BoardError`]; another error type keeps its own words.
pub(crate) trait WriteError: Sized {
    /// `self` as the failure of a write on the PostgreSQL board `url`.
    fn on_postgres(self, url: &str, lost: bool, busy_timeout_ms: u64) -> Self {
        let _ = (url, lost, busy_timeout_ms);
        self
    }
}

impl WriteError for BoardError {
    fn on_postgres(self, url: &str, lost: bool, busy_timeout_ms: u64) -> Self {
        BoardError::on_postgres(self, url, lost, busy_timeout_ms)
    }
}

/// The pause before the next busy retry and the busy-handler wait to give that retry, or `None`
/// when the retries or the budget are spent. The pauses and waits of all tries never add up to
/// more than `budget`.
fn next_busy_try(
    elapsed: Duration,
    budget: Duration,
    tries: u32,
    pause: Duration,
) -> Option<(Duration, Duration)> {
    if tries >= BUSY_RETRIES {
        return None;
    }
    let left = budget.checked_sub(elapsed)?;
    let after_pause = left.checked_sub(pause).filter(|d| !d.is_zero())?;
    Some((pause, after_pause))
}

/// `HERMES_KANBAN_BUSY_TIMEOUT_MS` (whole milliseconds, 1 to [`MAX_BUSY_TIMEOUT_MS`]), else the
/// default.
pub(super) fn busy_timeout_from_env() -> Result<u64> {
    match settings::get(Setting::BusyTimeoutMs) {
        None => Ok(DEFAULT_BUSY_TIMEOUT_MS),
        Some(text) => match text.trim().parse::<u64>() {
            Ok(ms) if (1..=MAX_BUSY_TIMEOUT_MS).contains(&ms) => Ok(ms),
            _ => Err(BoardError::Storage(StorageError::InvalidBusyTimeout {
                key: Setting::BusyTimeoutMs.key(),
                value: text,
                max: MAX_BUSY_TIMEOUT_MS,
            })),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_in_range() {
        for _ in 0..200 {
            let ms = jitter().as_millis();
            assert!((20..=150).contains(&ms), "{ms}");
        }
    }

    #[test]
    fn random_hex_has_the_asked_length() {
        let a = random_hex(8).unwrap();
        assert_eq!(a.len(), 8);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(random_hex(16).unwrap(), random_hex(16).unwrap());
    }

    #[test]
    fn busy_retries_share_one_budget() {
        let budget = Duration::from_millis(1000);
        let pause = Duration::from_millis(100);
        // Whatever SQLite's handler waited before, a retry gets only what is left.
        let mut elapsed = Duration::ZERO;
        let mut tries = 0;
        while let Some((p, wait)) = next_busy_try(elapsed, budget, tries, pause) {
            assert_eq!(p, pause);
            assert!(elapsed + p + wait <= budget, "{elapsed:?} {wait:?}");
            // The worst case: the handler waits all it was given and SQLite is still busy.
            elapsed += p + wait;
            tries += 1;
        }
        assert!(elapsed <= budget);
        assert_eq!(tries, 1, "the first retry already spends the budget");
        // Fast busy answers (no handler wait) retry at most BUSY_RETRIES times.
        let mut tries = 0;
        while next_busy_try(Duration::ZERO, budget, tries, pause).is_some() {
            tries += 1;
        }
        assert_eq!(tries, BUSY_RETRIES);
        assert_eq!(next_busy_try(budget, budget, 0, pause), None);
        assert_eq!(next_busy_try(budget * 2, budget, 0, pause), None);
    }
}
