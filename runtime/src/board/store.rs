//! Opening a board and the one write-transaction helper.
//!
//! [`Board::open`] refuses a file that is not SQLite without touching it (it reads the 16-byte
//! header before SQLite ever sees the file), refuses WAL on a linked SQLite with the WAL-reset bug,
//! sets the pragmas (`busy_timeout`, `synchronous`, `foreign_keys`; a fresh board's page size),
//! migrates the schema, and puts a board kanban created in WAL mode (any other board keeps its
//! journal mode; see `schema` for how kanban knows which boards it created).
//!
//! [`Board::write`] is the only way to write: `BEGIN IMMEDIATE`, the body, `COMMIT`. Only `BEGIN`
//! and `COMMIT` are retried when SQLite still reports busy after its own busy timeout (at most
//! [`BUSY_RETRIES`] more tries, each after a random 20–150 ms pause so retrying processes do not
//! convoy); the body is never replayed. A body error rolls back. Nesting is refused, never
//! silently turned into a savepoint: a transition that needs another one calls its `*_in(tx, …)`
//! form inside the same transaction.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::error::{BoardError, Result};
use super::paths::BoardLocation;
use super::schema;
use crate::identity::settings::{self, Setting};

/// Default `busy_timeout`: 120 s.
pub const DEFAULT_BUSY_TIMEOUT_MS: u64 = 120_000;
/// Page size of a freshly created board (SQLite's default is 4096). A transition dirties 5–8
/// b-tree pages (task row, its index entries, run, event, their indexes, `sqlite_sequence`), and a
/// commit appends each as one WAL frame and fsyncs them all, so smaller pages mean fewer bytes
/// written and flushed per transition: measured with `cargo xtask bench`, 2048-byte pages make
/// create/claim/heartbeat/complete faster than 4096 (1024 was no better than 2048, and would
/// push more task bodies into overflow pages). Durability is unchanged.
const FRESH_PAGE_SIZE: u32 = 2048;
/// `PRAGMA wal_autocheckpoint` in pages: SQLite's default. It was 100, which checkpointed (copy
/// back and fsync the database file) every dozen or so transitions; the WAL is still bounded,
/// and `journal_size_limit` truncates it after a checkpoint.
const WAL_AUTOCHECKPOINT_PAGES: u32 = 1000;
/// Prepared statements kept per connection.
const STATEMENT_CACHE_CAPACITY: usize = 64;
/// Extra tries of `BEGIN IMMEDIATE` / `COMMIT` after SQLite gave up with busy.
pub const BUSY_RETRIES: u32 = 5;

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
}

impl OpenOptions {
    /// Options that create a missing board.
    pub fn create() -> Self {
        Self {
            create: true,
            ..Self::default()
        }
    }
}

/// An open board database.
#[derive(Debug)]
pub struct Board {
    conn: Connection,
    path: PathBuf,
}

/// An open write transaction; SQL that writes takes one. Derefs to the connection.
pub struct Tx<'a> {
    conn: &'a Connection,
}

impl std::ops::Deref for Tx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

/// The first 16 bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Whether the linked SQLite (`MAJOR*1_000_000 + MINOR*1_000 + PATCH`) is free of the WAL-reset
/// corruption bug: affected are 3.7.0 to 3.51.2, except 3.50.7 and later 3.50.x (backport).
pub fn wal_safe(version: i32) -> bool {
    let affected = (3_007_000..3_051_003).contains(&version);
    let backported = (3_050_007..3_051_000).contains(&version);
    !affected || backported
}

fn sqlite_err(path: &Path) -> impl FnOnce(rusqlite::Error) -> BoardError + '_ {
    move |source| BoardError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// A pause of 20–150 ms, random without a `rand` dependency (std's randomly keyed hasher).
fn jitter() -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    Duration::from_millis(20 + h.finish() % 131)
}

/// A random lower-case hex string of `n` digits (ids, tokens; not cryptographic).
pub(crate) fn random_hex(n: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(n);
    while out.len() < n {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        h.write_u32(std::process::id());
        h.write_usize(out.len());
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(n);
    out
}

impl Board {
    /// Opens the board at `location`; see [`Board::open_path`].
    pub fn open(location: &BoardLocation, options: &OpenOptions) -> Result<Board> {
        if !options.create && !location.db_path.exists() {
            return Err(BoardError::BoardNotFound {
                slug: location.slug.clone(),
                path: location.db_path.clone(),
            });
        }
        Self::open_path(&location.db_path, options)
    }

    /// Opens (and with `options.create`, creates) the board database at `path`.
    pub fn open_path(path: &Path, options: &OpenOptions) -> Result<Board> {
        let version = rusqlite::version_number();
        if !wal_safe(version) {
            return Err(BoardError::VulnerableSqlite {
                version: rusqlite::version().to_owned(),
                path: path.to_path_buf(),
            });
        }
        check_header(path)?;
        let exists = path.exists();
        if !exists {
            if !options.create {
                return Err(BoardError::BoardNotFound {
                    slug: path.display().to_string(),
                    path: path.to_path_buf(),
                });
            }
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|source| BoardError::Io {
                    action: "create the directory",
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | if options.create {
                OpenFlags::SQLITE_OPEN_CREATE
            } else {
                OpenFlags::empty()
            };
        let conn = Connection::open_with_flags(path, flags).map_err(sqlite_err(path))?;
        // Every hot statement is `prepare_cached`; the default cache (16) is smaller than the set
        // one dispatch tick plus the transitions use, and an evicted statement is re-prepared.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        let board = Board {
            conn,
            path: path.to_path_buf(),
        };
        board.configure(options)?;
        board.migrate()?;
        board.set_journal_mode()?;
        Ok(board)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection, for read queries inside `board/`.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    fn configure(&self, options: &OpenOptions) -> Result<()> {
        let busy_ms = match options.busy_timeout_ms {
            Some(ms) => ms,
            None => busy_timeout_from_env()?,
        };
        let err = sqlite_err(&self.path);
        self.conn
            .busy_timeout(Duration::from_millis(busy_ms))
            .map_err(err)?;
        // Takes effect only on a board with no content yet (before WAL writes the header);
        // an existing board keeps its page size.
        self.conn
            .execute_batch(&format!("PRAGMA page_size={FRESH_PAGE_SIZE}"))
            .map_err(sqlite_err(&self.path))?;
        let sync = match options.durability {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        };
        self.conn
            .execute_batch(&format!(
                "PRAGMA synchronous={sync}; PRAGMA foreign_keys=ON; PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}; PRAGMA journal_size_limit=8388608;"
            ))
            .map_err(sqlite_err(&self.path))?;
        Ok(())
    }

    /// WAL on a board kanban created (SQLite keeps its rollback journal where WAL is impossible,
    /// e.g. some network filesystems). Any other board keeps the journal mode it has: the
    /// original keeps `DELETE` where its SQLite has the WAL-reset bug, and switching its board to
    /// WAL would expose it to exactly that corruption (the README says how to opt in).
    fn set_journal_mode(&self) -> Result<()> {
        let err = || sqlite_err(&self.path);
        let application_id: i32 = self
            .conn
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(err())?;
        if application_id != schema::APPLICATION_ID {
            return Ok(());
        }
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(err())?;
        if !mode.eq_ignore_ascii_case("wal") {
            self.conn
                .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get::<_, String>(0))
                .map_err(err())?;
        }
        Ok(())
    }

    fn user_version(&self) -> Result<i64> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sqlite_err(&self.path))
    }

    fn migrate(&self) -> Result<()> {
        let current = self.user_version()?;
        if current > schema::LATEST {
            return Err(self.too_new(current));
        }
        if current == schema::LATEST {
            return Ok(());
        }
        let path = self.path.clone();
        self.write(|tx| {
            // Re-read under the write lock: another process may have migrated meanwhile.
            let current: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if current > schema::LATEST {
                return Err(self.too_new(current));
            }
            schema::migrate_in(tx, current, &self.path).map(drop)
        })
        .map_err(|e| match e {
            BoardError::Sql(source) => BoardError::Sqlite { path, source },
            other => other,
        })
    }

    fn too_new(&self, found: i64) -> BoardError {
        BoardError::SchemaTooNew {
            path: self.path.clone(),
            found,
            supported: schema::LATEST,
        }
    }

    /// Runs `body` in one `BEGIN IMMEDIATE` transaction: commit on `Ok`, roll back on `Err`.
    /// Only `BEGIN` and `COMMIT` are retried on busy; nesting is refused.
    pub fn write<T, E>(&self, body: impl FnOnce(&Tx<'_>) -> Result<T, E>) -> Result<T, E>
    where
        E: From<BoardError>,
    {
        if !self.conn.is_autocommit() {
            return Err(BoardError::NestedWrite.into());
        }
        self.retry_busy("begin a write transaction", |c| {
            c.prepare_cached("BEGIN IMMEDIATE")?.execute([]).map(drop)
        })?;
        let tx = Tx { conn: &self.conn };
        match body(&tx) {
            Ok(value) => {
                if let Err(err) = self.retry_busy("commit", |c| {
                    c.prepare_cached("COMMIT")?.execute([]).map(drop)
                }) {
                    self.rollback();
                    return Err(err.into());
                }
                Ok(value)
            }
            Err(err) => {
                self.rollback();
                Err(err)
            }
        }
    }

    fn rollback(&self) {
        if !self.conn.is_autocommit() {
            // A failed rollback leaves nothing more to undo; the connection stays usable.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }

    fn retry_busy(
        &self,
        what: &'static str,
        step: impl Fn(&Connection) -> rusqlite::Result<()>,
    ) -> Result<()> {
        let mut tries = 0;
        loop {
            match step(&self.conn) {
                Ok(()) => return Ok(()),
                Err(e) if is_busy(&e) && tries < BUSY_RETRIES => {
                    tries += 1;
                    std::thread::sleep(jitter());
                }
                Err(e) if is_busy(&e) => {
                    return Err(BoardError::Busy {
                        what,
                        tries: tries + 1,
                    });
                }
                Err(source) => {
                    return Err(BoardError::Sqlite {
                        path: self.path.clone(),
                        source,
                    });
                }
            }
        }
    }
}

/// `HERMES_KANBAN_BUSY_TIMEOUT_MS` (an integer >= 1), else the default.
fn busy_timeout_from_env() -> Result<u64> {
    match settings::get(Setting::BusyTimeoutMs) {
        None => Ok(DEFAULT_BUSY_TIMEOUT_MS),
        Some(text) => match text.trim().parse::<u64>() {
            Ok(ms) if ms >= 1 => Ok(ms),
            _ => Err(BoardError::InvalidSeconds {
                what: format!("{} (milliseconds)", Setting::BusyTimeoutMs.key()),
                value: text,
            }),
        },
    }
}

/// Refuses a non-empty file that does not start with the SQLite header; never writes to it.
fn check_header(path: &Path) -> Result<()> {
    use std::io::Read;
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(BoardError::Io {
                action: "inspect",
                path: path.to_path_buf(),
                source,
            });
        }
    };
    if meta.is_dir() {
        return Err(BoardError::IsDirectory {
            path: path.to_path_buf(),
        });
    }
    if meta.len() == 0 {
        return Ok(());
    }
    let mut head = [0u8; 16];
    let read = std::fs::File::open(path)
        .and_then(|mut f| {
            let mut n = 0;
            while n < head.len() {
                let k = f.read(&mut head[n..])?;
                if k == 0 {
                    break;
                }
                n += k;
            }
            Ok(n)
        })
        .map_err(|source| BoardError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
    if read < head.len() || &head != SQLITE_HEADER {
        return Err(BoardError::NotSqlite {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wal_bug_versions_are_refused() {
        assert!(wal_safe(3_006_023));
        assert!(!wal_safe(3_007_000));
        assert!(!wal_safe(3_045_001));
        assert!(!wal_safe(3_050_006));
        assert!(wal_safe(3_050_007));
        assert!(wal_safe(3_050_009));
        assert!(!wal_safe(3_051_000));
        assert!(!wal_safe(3_051_002));
        assert!(wal_safe(3_051_003));
        assert!(wal_safe(3_054_001));
        assert!(wal_safe(rusqlite::version_number()), "bundled SQLite");
    }

    #[test]
    fn jitter_stays_in_range() {
        for _ in 0..200 {
            let ms = jitter().as_millis();
            assert!((20..=150).contains(&ms), "{ms}");
        }
    }

    #[test]
    fn random_hex_has_the_asked_length() {
        let a = random_hex(8);
        assert_eq!(a.len(), 8);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(random_hex(16), random_hex(16));
    }

    fn open_temp() -> (tempfile::TempDir, Board) {
        let dir = tempfile::tempdir().unwrap();
        let board =
            Board::open_path(&dir.path().join("kanban.db"), &OpenOptions::create()).unwrap();
        (dir, board)
    }

    #[test]
    fn open_sets_pragmas_and_version() {
        let (_dir, board) = open_temp();
        let c = board.conn();
        let mode: String = c
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let sync: i64 = c.query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap();
        assert_eq!(sync, 2, "FULL");
        let fk: i64 = c
            .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
            .unwrap();
        assert_eq!(fk, 1);
        assert_eq!(board.user_version().unwrap(), schema::LATEST);
    }

    #[test]
    fn reopening_is_a_no_op_and_newer_schema_is_refused() {
        let (dir, board) = open_temp();
        board
            .conn()
            .execute_batch("PRAGMA user_version=99")
            .unwrap();
        drop(board);
        let err =
            Board::open_path(&dir.path().join("kanban.db"), &OpenOptions::default()).unwrap_err();
        assert!(
            matches!(err, BoardError::SchemaTooNew { found: 99, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_board_of_the_original_is_adopted_with_missing_columns_added() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        let old = Connection::open(&path).unwrap();
        old.execute_batch(
            "CREATE TABLE tasks (id TEXT PRIMARY KEY, title TEXT NOT NULL, body TEXT, \
             assignee TEXT, status TEXT NOT NULL, priority INTEGER DEFAULT 0, created_by TEXT, \
             created_at INTEGER NOT NULL, started_at INTEGER, completed_at INTEGER, \
             workspace_kind TEXT NOT NULL DEFAULT 'scratch', workspace_path TEXT, \
             claim_lock TEXT, claim_expires INTEGER); \
             CREATE TABLE task_events (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL, \
             kind TEXT NOT NULL, payload TEXT, created_at INTEGER NOT NULL); \
             INSERT INTO tasks (id, title, status, created_at) VALUES ('t_0000aaaa', 'old', 'ready', 1);",
        )
        .unwrap();
        drop(old);
        let board = Board::open_path(&path, &OpenOptions::default()).unwrap();
        assert_eq!(board.user_version().unwrap(), schema::LATEST);
        // Not ours: its journal mode stays the rollback journal it had.
        let mode: String = board
            .conn()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete");
        let task = board.get_task("t_0000aaaa").unwrap();
        assert_eq!((task.title.as_str(), task.block_recurrences), ("old", 0));
        assert!(board.fsck().unwrap().is_empty());
    }

    fn indexes(conn: &Connection) -> Vec<(String, Option<String>)> {
        let mut stmt = conn
            .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    fn page_size(conn: &Connection) -> i64 {
        conn.query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_fresh_board_gets_small_pages_and_an_existing_one_keeps_its_own() {
        let (_dir, board) = open_temp();
        assert_eq!(page_size(board.conn()), i64::from(FRESH_PAGE_SIZE));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        let old = Connection::open(&path).unwrap();
        old.execute_batch("PRAGMA page_size=4096; CREATE TABLE keep(x);")
            .unwrap();
        drop(old);
        let board = Board::open_path(&path, &OpenOptions::default()).unwrap();
        assert_eq!(page_size(board.conn()), 4096);
    }

    #[test]
    fn a_version_1_board_migrates_to_the_indexes_of_a_fresh_board() {
        let (_fresh_dir, fresh) = open_temp();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        let v1 = Connection::open(&path).unwrap();
        v1.execute_batch(schema::MIGRATIONS[0].sql).unwrap();
        // The index set version 1 created.
        v1.execute_batch(
            "CREATE INDEX idx_tasks_status ON tasks(status); \
             CREATE INDEX idx_tasks_idempotency ON tasks(idempotency_key); \
             CREATE INDEX idx_tasks_tenant ON tasks(tenant); \
             CREATE INDEX idx_links_child ON task_links(child_id); \
             CREATE INDEX idx_links_parent ON task_links(parent_id); \
             CREATE INDEX idx_comments_task ON task_comments(task_id, created_at); \
             CREATE INDEX idx_events_task ON task_events(task_id, created_at); \
             CREATE INDEX idx_events_run ON task_events(run_id, id); \
             CREATE INDEX idx_runs_task ON task_runs(task_id, started_at); \
             CREATE INDEX idx_runs_status ON task_runs(status); \
             INSERT INTO tasks (id, title, status, created_at, idempotency_key) \
               VALUES ('t_0000bbbb', 'keyed', 'ready', 1, 'k-1'); \
             PRAGMA user_version=1;",
        )
        .unwrap();
        drop(v1);
        let board = Board::open_path(&path, &OpenOptions::default()).unwrap();
        assert_eq!(board.user_version().unwrap(), schema::LATEST);
        assert_eq!(indexes(board.conn()), indexes(fresh.conn()));
        let names: Vec<String> = indexes(board.conn()).into_iter().map(|i| i.0).collect();
        assert!(
            !names
                .iter()
                .any(|n| n == "idx_runs_status" || n == "idx_events_run")
        );
        let again = board
            .create_task(
                &crate::board::NewTask {
                    title: "keyed again".to_owned(),
                    idempotency_key: Some("k-1".to_owned()),
                    ..Default::default()
                },
                2,
            )
            .unwrap();
        assert!(again.existing);
        assert_eq!(again.id, "t_0000bbbb");
        assert!(board.fsck().unwrap().is_empty());
    }

    #[test]
    fn the_lookups_still_use_the_partial_indexes() {
        let (_dir, board) = open_temp();
        let plan = |sql: &str| -> String {
            let mut stmt = board
                .conn()
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap();
            stmt.query_map(["k"], |r| r.get::<_, String>(3))
                .unwrap()
                .collect::<rusqlite::Result<Vec<_>>>()
                .unwrap()
                .join("; ")
        };
        let by_key = plan(
            "SELECT id, status FROM tasks WHERE idempotency_key = ?1 AND status != 'archived' \
             ORDER BY created_at DESC, rowid DESC LIMIT 1",
        );
        assert!(by_key.contains("idx_tasks_idempotency"), "{by_key}");
        let by_tenant = plan("SELECT id FROM tasks WHERE tenant = ?1");
        assert!(by_tenant.contains("idx_tasks_tenant"), "{by_tenant}");
    }

    #[test]
    fn non_sqlite_file_is_left_byte_identical() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        let bytes = b"this is my shopping list, not a database\n".repeat(10);
        std::fs::write(&path, &bytes).unwrap();
        let err = Board::open_path(&path, &OpenOptions::create()).unwrap_err();
        assert!(matches!(err, BoardError::NotSqlite { .. }), "{err}");
        assert!(err.to_string().contains("not a SQLite database"));
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        assert!(!dir.path().join("kanban.db-wal").exists());
    }

    #[test]
    fn body_error_rolls_back_and_nesting_is_refused() {
        let (_dir, board) = open_temp();
        let r: Result<()> = board.write(|tx| {
            tx.execute(
                "INSERT INTO task_comments (task_id, author, body, created_at) VALUES ('t', 'a', 'b', 0)",
                [],
            )?;
            Err(BoardError::BlankTitle)
        });
        assert!(matches!(r, Err(BoardError::BlankTitle)));
        let n: i64 = board
            .conn()
            .query_row("SELECT COUNT(*) FROM task_comments", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0);
        let nested: Result<Result<()>> = board.write(|_tx| Ok(board.write(|_inner| Ok(()))));
        assert!(matches!(nested, Ok(Err(BoardError::NestedWrite))));
        assert!(board.conn().is_autocommit());
    }
}
