//! Opening a board that is a SQLite file, and the owner's and cron's own SQLite stores.
//!
//! Before SQLite sees the path: the busy timeout is checked, anything that is not a regular file
//! (a directory, a device such as `/dev/null`, a FIFO, a socket, or a symlink to one) is refused,
//! and a file that is not SQLite is refused untouched (its 16-byte header is read first). A linked
//! SQLite with the WAL-reset bug is refused for WAL boards. Then the pragmas, the migrations and
//! WAL for a board kanban created. docs/board.md has the reasons for each pragma.

use std::path::Path;
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};

use super::schema;
use crate::board::StorageError;
use crate::board::store::{Board, Durability, OpenOptions, busy_timeout_from_env, random_hex};
use crate::board::{BoardError, Result};
use crate::db::{self, Db, ErrorKind};

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

/// The first 16 bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Whether the linked SQLite (`MAJOR*1_000_000 + MINOR*1_000 + PATCH`) is free of the WAL-reset
/// corruption bug: affected are 3.7.0 to 3.51.2, except 3.50.7 and later 3.50.x (backport).
pub fn wal_safe(version: i32) -> bool {
    let affected = (3_007_000..3_051_003).contains(&version);
    let backported = (3_050_007..3_051_000).contains(&version);
    !affected || backported
}

/// Refuses to open `path` with a linked SQLite that has the WAL-reset bug (see [`wal_safe`]).
fn refuse_vulnerable_sqlite(path: &Path) -> Result<()> {
    if wal_safe(db::version_number()) {
        return Ok(());
    }
    Err(BoardError::Storage(StorageError::VulnerableSqlite {
        version: db::version_text().to_owned(),
        path: path.to_path_buf(),
    }))
}

fn sqlite_err<E: Into<db::Error>>(path: &Path) -> impl FnOnce(E) -> BoardError + '_ {
    move |source| {
        BoardError::Storage(StorageError::Sqlite {
            path: path.to_path_buf(),
            source: source.into(),
        })
    }
}

/// `PRAGMA journal_mode=WAL`, or `DELETE` where SQLite cannot use WAL (see
/// `Board::set_journal_mode`).
fn switch_to_wal(db: &Db) -> db::Result<()> {
    let Some(conn) = db.as_sqlite() else {
        return Ok(());
    };
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        conn.query_row("PRAGMA journal_mode=DELETE", [], |r| r.get::<_, String>(0))?;
    }
    Ok(())
}

/// Opens `path` for reading only. In a folder this user cannot write, SQLite cannot create the
/// WAL index (`-shm`) a WAL board needs; when no `-wal` file holds committed pages either, the
/// file alone is the whole board and it is opened `immutable` (nothing can be written next to
/// it, and no writer can be active without having created those files).
fn open_read_only(path: &Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let plain = Connection::open_with_flags(path, flags).and_then(|c| {
        c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
            .map(|_| c)
    });
    match plain.map_err(db::Error::from) {
        Ok(conn) => Ok(conn),
        // SQLITE_CANTOPEN, or SQLITE_READONLY_CANTINIT when the -shm cannot be created.
        Err(e) if matches!(e.kind(), ErrorKind::CannotOpen | ErrorKind::ReadOnly) => {
            let mut wal = path.as_os_str().to_owned();
            wal.push("-wal");
            if Path::new(&wal).exists() {
                return Err(BoardError::Storage(StorageError::CannotOpen {
                    path: path.to_path_buf(),
                }));
            }
            let uri = format!("file:{}?mode=ro&immutable=1", uri_path(path));
            Connection::open_with_flags(uri, flags).map_err(|e| open_error(path, e))
        }
        Err(e) => Err(open_error(path, e)),
    }
}

/// `path` percent-encoded for a `file:` URI.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The error of a failed `create_dir_all(dir)`: a permission problem says what to do.
fn folder_error(dir: &Path, source: std::io::Error) -> BoardError {
    match source.kind() {
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
            BoardError::Storage(StorageError::CannotCreateFolder {
                path: dir.to_path_buf(),
                source,
            })
        }
        _ => BoardError::Storage(StorageError::Io {
            action: "create the directory",
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// The error of a failed `open` of `path`, naming the file and what to do.
fn open_error(path: &Path, source: impl Into<db::Error>) -> BoardError {
    let source = source.into();
    match source.kind() {
        ErrorKind::CannotOpen => BoardError::Storage(StorageError::CannotOpen {
            path: path.to_path_buf(),
        }),
        ErrorKind::ReadOnly => BoardError::Storage(StorageError::ReadOnly {
            path: path.to_path_buf(),
        }),
        _ => BoardError::Storage(StorageError::Sqlite {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Whether a board file exists at `path`. Refuses, without writing anything, whatever is there and
/// is not a regular file (following symlinks) and a non-empty file that does not start with the
/// SQLite header.
fn check_file(path: &Path) -> Result<bool> {
    check_file_with(path, || {})
}

/// [`check_file`] with a step run between finding nothing at `path` and looking at the name
/// itself (tests create the file there, as a concurrent first open does).
fn check_file_with(path: &Path, after_missing: impl FnOnce()) -> Result<bool> {
    use std::io::Read;
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            after_missing();
            return match std::fs::symlink_metadata(path) {
                // A dangling symlink: SQLite would create a file wherever it points.
                Ok(name) if name.file_type().is_symlink() => {
                    Err(BoardError::Storage(StorageError::NotRegularFile {
                        path: path.to_path_buf(),
                        kind: "symlink to nothing",
                    }))
                }
                // Something appeared meanwhile (another process creating the board on its first
                // use): judge it like any file found there.
                Ok(_) => check_file(path),
                Err(_) => Ok(false),
            };
        }
        Err(source) => {
            return Err(BoardError::Storage(StorageError::Io {
                action: "inspect",
                path: path.to_path_buf(),
                source,
            }));
        }
    };
    if !meta.is_file() {
        return Err(BoardError::Storage(StorageError::NotRegularFile {
            path: path.to_path_buf(),
            kind: file_kind(&meta.file_type()),
        }));
    }
    if meta.len() == 0 {
        return Ok(true);
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
        .map_err(|source| {
            BoardError::Storage(StorageError::Io {
                action: "read",
                path: path.to_path_buf(),
                source,
            })
        })?;
    if read < head.len() || &head != SQLITE_HEADER {
        return Err(BoardError::Storage(StorageError::NotSqlite {
            path: path.to_path_buf(),
        }));
    }
    Ok(true)
}

/// What a non-regular file is, in words.
fn file_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "directory"
    } else if kind.is_char_device() {
        "character device"
    } else if kind.is_block_device() {
        "block device"
    } else if kind.is_fifo() {
        "FIFO (named pipe)"
    } else if kind.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

impl Board {
    /// Opens (and with `options.create`, creates) the board database at `path`. Before SQLite
    /// sees the path: the busy timeout is checked, anything that is not a regular file is
    /// refused, and a file that is not SQLite is refused untouched.
    ///
    /// A `path` that is a `postgres://` / `postgresql://` URL (a worker's `HERMES_KANBAN_DB` for
    /// a PostgreSQL board, which every process of a run opens by that value) opens that board
    /// instead, its password from libpq's sources (see `crate::db::target`).
    pub fn open_path(path: &Path, options: &OpenOptions) -> Result<Board> {
        if let Some(url) = path
            .to_str()
            .filter(|p| crate::db::target::is_postgres_url(p))
        {
            let target =
                crate::db::target::PgTarget::parse(url, crate::db::target::UrlSource::Pinned)?;
            return Self::open_postgres(&target, None, options);
        }
        refuse_vulnerable_sqlite(path)?;
        let busy_ms = match options.busy_timeout_ms {
            Some(ms) => ms,
            None => busy_timeout_from_env()?,
        };
        let exists = check_file(path)?;
        let create = options.create && !options.read_only;
        if !exists {
            if !create {
                return Err(BoardError::Storage(StorageError::MissingFile {
                    path: path.to_path_buf(),
                }));
            }
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|source| folder_error(parent, source))?;
            }
        }
        let conn = if options.read_only {
            open_read_only(path)?
        } else {
            let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | if create {
                    OpenFlags::SQLITE_OPEN_CREATE
                } else {
                    OpenFlags::empty()
                };
            Connection::open_with_flags(path, flags).map_err(|e| open_error(path, e))?
        };
        // Every hot statement is `prepare_cached`; the default cache (16) is smaller than the set
        // one dispatch tick plus the transitions use, and an evicted statement is re-prepared.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        let board = Board {
            conn: Db::sqlite(conn),
            path: path.to_path_buf(),
            busy_timeout: Duration::from_millis(busy_ms),
            read_only: options.read_only,
            nothing_promotable_at: std::cell::Cell::new(None),
            owner_states: Default::default(),
        };
        board.configure(options).map_err(|e| board.classify(e))?;
        board.migrate().map_err(|e| board.classify(e))?;
        if !board.read_only {
            board.set_journal_mode().map_err(|e| board.classify(e))?;
        }
        Ok(board)
    }

    /// Opens (creating it and its folder) a database that is not a board, with the board's
    /// checks (a linked SQLite with the WAL-reset bug and anything at `path` that is not a SQLite
    /// file are refused), pragmas, busy handling and [`Board::write`]: the owner's `state.db` and
    /// the cron store `cron/jobs.db`. `schema` is applied in one write transaction (idempotent
    /// `CREATE … IF NOT EXISTS` statements); the file is put in WAL mode. The board's own
    /// migrations never run on it.
    pub(crate) fn open_store(path: &Path, schema: &str) -> Result<Board> {
        refuse_vulnerable_sqlite(path)?;
        let busy_ms = busy_timeout_from_env()?;
        check_file(path)?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| folder_error(parent, source))?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| open_error(path, e))?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        let store = Board {
            conn: Db::sqlite(conn),
            path: path.to_path_buf(),
            busy_timeout: Duration::from_millis(busy_ms),
            read_only: false,
            nothing_promotable_at: std::cell::Cell::new(None),
            owner_states: Default::default(),
        };
        store
            .configure(&OpenOptions::create())
            .map_err(|e| store.classify(e))?;
        // Retried on busy as a board's switch is (processes opening a fresh store at once).
        store
            .retry_busy("switch the store to WAL", |db| match db.as_sqlite() {
                Some(conn) => conn
                    .query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
                    .map(drop)
                    .map_err(db::Error::from),
                None => Ok(()),
            })
            .map_err(|e| store.classify(e))?;
        store
            .write(|tx| tx.execute_batch(schema).map_err(BoardError::from))
            .map_err(|e| store.classify(e))?;
        Ok(store)
    }

    /// Creates a new board database at `path`, all or nothing: the schema is written to a
    /// temporary file in the same folder, which is linked into place only while nothing exists at
    /// `path` (a board made meanwhile is never replaced). On any failure, a full disk included,
    /// the temporary files are removed and nothing is left at `path`, so a retry starts afresh.
    pub fn create_new(path: &Path, options: &OpenOptions) -> Result<()> {
        Self::create_new_with(path, options, |_| Ok(()))
    }

    /// [`Board::create_new`] with a step run on the finished temporary file just before it is
    /// linked into place (tests inject failures there).
    fn create_new_with(
        path: &Path,
        options: &OpenOptions,
        before_link: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<()> {
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(BoardError::Storage(StorageError::FileExists {
                path: path.to_path_buf(),
            }));
        }
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|source| folder_error(parent, source))?;
        let mut name = std::ffi::OsString::from(".");
        name.push(path.file_name().unwrap_or_default());
        name.push(format!(".creating-{}", random_hex(8)?));
        let temp = parent.join(name);
        let result = (|| {
            let board = Board::open_path(
                &temp,
                &OpenOptions {
                    create: true,
                    read_only: false,
                    ..options.clone()
                },
            )?;
            // Fold the WAL into the file and close, so the one file is the whole board.
            board
                .sqlite()
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .map_err(sqlite_err(&temp))?;
            board.conn.close().map_err(sqlite_err(&temp))?;
            before_link(&temp)?;
            std::fs::hard_link(&temp, path).map_err(|source| {
                if source.kind() == std::io::ErrorKind::AlreadyExists {
                    BoardError::Storage(StorageError::FileExists {
                        path: path.to_path_buf(),
                    })
                } else {
                    BoardError::Storage(StorageError::Io {
                        action: "create",
                        path: path.to_path_buf(),
                        source,
                    })
                }
            })?;
            // Make the new name durable; a failure here leaves a complete board behind.
            if let Ok(dir) = std::fs::File::open(parent) {
                let _ = dir.sync_all();
            }
            Ok(())
        })();
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = temp.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
        result
    }

    /// The SQLite connection: opening, pragmas and checkpoints are the SQLite backend's own.
    fn sqlite(&self) -> &Connection {
        match self.conn.as_sqlite() {
            Some(c) => c,
            None => unreachable!("Board::open_path and Board::open_store open SQLite files only"),
        }
    }

    fn configure(&self, options: &OpenOptions) -> Result<()> {
        self.conn
            .set_lock_wait(self.busy_timeout)
            .map_err(sqlite_err(&self.path))?;
        // The query planner stability guarantee: a plan never depends on the values bound to a
        // statement. Without it, SQLite re-parses and re-plans a statement whose plan might
        // depend on a bound value each time a new value is bound, so the statement cache bought
        // nothing for the parent and child joins of `create` and `complete` (most of their
        // time, measured with `cargo xtask bench`).
        self.sqlite()
            .set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
            .map_err(sqlite_err(&self.path))?;
        if options.read_only {
            // Nothing that writes: the journal mode and page size stay as the file has them.
            return self
                .sqlite()
                .execute_batch("PRAGMA foreign_keys=ON;")
                .map_err(sqlite_err(&self.path));
        }
        // Takes effect only on a board with no content yet (before WAL writes the header);
        // an existing board keeps its page size.
        self.sqlite()
            .execute_batch(&format!("PRAGMA page_size={FRESH_PAGE_SIZE}"))
            .map_err(sqlite_err(&self.path))?;
        let sync = match options.durability {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        };
        self.sqlite()
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
            .sqlite()
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(err())?;
        if application_id != schema::APPLICATION_ID {
            return Ok(());
        }
        // The switch reads the header and then takes the write lock without waiting when
        // another connection holds it (SQLite never waits for a lock while it holds a read lock),
        // so processes opening a fresh board at once meet busy here; retried like `BEGIN`. Once
        // one of them has switched, the others find WAL and change nothing.
        self.retry_busy("switch the board to WAL", switch_to_wal)
    }

    fn user_version(&self) -> Result<i64> {
        self.conn.schema_version().map_err(sqlite_err(&self.path))
    }

    fn migrate(&self) -> Result<()> {
        let current = self.user_version()?;
        if current > schema::LATEST {
            return Err(self.too_new(current));
        }
        if current == schema::LATEST {
            return Ok(());
        }
        if self.read_only {
            return Err(BoardError::Storage(StorageError::OutdatedReadOnly {
                path: self.path.clone(),
                found: current,
                supported: schema::LATEST,
            }));
        }
        let path = self.path.clone();
        self.write(|tx| {
            // Re-read under the write lock: another process may have migrated meanwhile.
            let current = tx.schema_version()?;
            if current > schema::LATEST {
                return Err(self.too_new(current));
            }
            schema::migrate_in(tx, current, &self.path).map(drop)
        })
        .map_err(|e| match e {
            BoardError::Storage(StorageError::Sql(source)) => {
                BoardError::Storage(StorageError::Sqlite { path, source })
            }
            other => other,
        })
    }

    fn too_new(&self, found: i64) -> BoardError {
        BoardError::Storage(StorageError::SchemaTooNew {
            path: self.path.clone(),
            found,
            supported: schema::LATEST,
        })
    }
}

#[cfg(test)]
/// SQLite only: opening a board file (header and special-file checks, pragmas, page size, WAL,
/// read-only fallback by path), adoption of the original's board and the busy retry against a
/// raw SQLite lock. What every store must do is in the conformance suite (`runtime/tests/conformance/`).
mod tests {
    use super::*;
    use crate::board::store::BUSY_RETRIES;
    use std::path::PathBuf;

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
    fn a_version_4_board_of_an_older_kanban_gains_workspace_base_and_keeps_its_tasks() {
        let (dir, board) = open_temp();
        let id = board
            .create_task(
                &crate::board::NewTask {
                    title: "before".to_owned(),
                    ..Default::default()
                },
                1,
            )
            .unwrap()
            .id;
        drop(board);
        let path = dir.path().join("kanban.db");
        let old = Connection::open(&path).unwrap();
        // A version-4 board has neither column of versions 5 and 7.
        old.execute_batch(
            "ALTER TABLE tasks DROP COLUMN workspace_base; \
             ALTER TABLE tasks DROP COLUMN completion_contract; PRAGMA user_version = 4;",
        )
        .unwrap();
        drop(old);
        let board = Board::open_path(&path, &OpenOptions::default()).unwrap();
        assert_eq!(board.user_version().unwrap(), schema::LATEST);
        let task = board.get_task(&id).unwrap();
        assert_eq!((task.title.as_str(), task.workspace_base), ("before", None));
        assert_eq!(task.completion_contract, None, "gained, empty: local-only");
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
        assert_eq!(page_size(board.sqlite()), i64::from(FRESH_PAGE_SIZE));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        let old = Connection::open(&path).unwrap();
        old.execute_batch("PRAGMA page_size=4096; CREATE TABLE keep(x);")
            .unwrap();
        drop(old);
        let board = Board::open_path(&path, &OpenOptions::default()).unwrap();
        assert_eq!(page_size(board.sqlite()), 4096);
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
        assert_eq!(indexes(board.sqlite()), indexes(fresh.sqlite()));
        let names: Vec<String> = indexes(board.sqlite()).into_iter().map(|i| i.0).collect();
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
                .collect::<db::Result<Vec<_>>>()
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
        let lingering = plan(
            "SELECT id FROM task_runs WHERE worker_pid IS NOT NULL AND ended_at IS NOT NULL \
             AND ended_at <= ?1 ORDER BY ended_at, id",
        );
        assert!(lingering.contains("idx_runs_lingering"), "{lingering}");
    }

    #[test]
    fn non_sqlite_file_is_left_byte_identical() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        let bytes = b"this is my shopping list, not a database\n".repeat(10);
        std::fs::write(&path, &bytes).unwrap();
        let err = Board::open_path(&path, &OpenOptions::create()).unwrap_err();
        assert!(
            matches!(err, BoardError::Storage(StorageError::NotSqlite { .. })),
            "{err}"
        );
        assert!(err.to_string().contains("not a SQLite database"));
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        assert!(!dir.path().join("kanban.db-wal").exists());
    }

    #[test]
    fn create_new_is_all_or_nothing_and_a_retry_works() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("boards/x/kanban.db");
        let err = Board::create_new_with(&path, &OpenOptions::create(), |_| {
            Err(BoardError::Storage(StorageError::Io {
                action: "write",
                path: PathBuf::from("disk"),
                source: std::io::Error::from(std::io::ErrorKind::StorageFull),
            }))
        })
        .unwrap_err();
        assert!(
            matches!(err, BoardError::Storage(StorageError::Io { .. })),
            "{err}"
        );
        assert!(!path.exists());
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "temporary files left behind: {left:?}");
        Board::create_new(&path, &OpenOptions::create()).unwrap();
        let board = Board::open_path(&path, &OpenOptions::default()).unwrap();
        assert_eq!(board.user_version().unwrap(), schema::LATEST);
        assert!(board.fsck().unwrap().is_empty());
        drop(board);
        let err = Board::create_new(&path, &OpenOptions::create()).unwrap_err();
        assert!(
            matches!(err, BoardError::Storage(StorageError::FileExists { .. })),
            "{err}"
        );
    }

    #[test]
    fn create_new_never_replaces_a_board_made_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        let err = Board::create_new_with(&path, &OpenOptions::create(), |_| {
            std::fs::write(&path, b"theirs").unwrap();
            Ok(())
        })
        .unwrap_err();
        assert!(
            matches!(err, BoardError::Storage(StorageError::FileExists { .. })),
            "{err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"theirs");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_write_against_a_locked_board_gives_up_naming_the_timeout_in_milliseconds() {
        let (dir, _board) = open_temp();
        let path = dir.path().join("kanban.db");
        let holder = Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        let options = OpenOptions {
            busy_timeout_ms: Some(30),
            ..OpenOptions::default()
        };
        let board = Board::open_path(&path, &options).unwrap();
        let err = board.write(|_tx| Ok::<_, BoardError>(())).unwrap_err();
        assert!(
            matches!(
                err,
                BoardError::Storage(StorageError::Busy { timeout_ms: 30, .. })
            ),
            "{err}"
        );
        let text = err.to_string();
        assert!(
            text.contains("30 ms") && text.contains("milliseconds"),
            "{text}"
        );
        assert!(text.contains(&path.display().to_string()), "{text}");
        holder.execute_batch("ROLLBACK").unwrap();
        board.write(|_tx| Ok::<_, BoardError>(())).unwrap();
    }

    #[test]
    fn a_board_file_created_while_the_path_is_inspected_is_not_a_dangling_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        // Another process's first open creates the file between the two looks at the path.
        let exists = check_file_with(&path, || std::fs::write(&path, b"").unwrap()).unwrap();
        assert!(exists, "the file made meanwhile is found");
        // A symlink to nothing is still refused.
        let dangling = dir.path().join("dangling.db");
        std::os::unix::fs::symlink(dir.path().join("nowhere.db"), &dangling).unwrap();
        let err = check_file_with(&dangling, || {}).unwrap_err();
        assert!(
            matches!(
                err,
                BoardError::Storage(StorageError::NotRegularFile {
                    kind: "symlink to nothing",
                    ..
                })
            ),
            "{err}"
        );
    }

    #[test]
    fn switching_a_board_to_wal_retries_a_held_write_lock_instead_of_failing_at_once() {
        let (dir, board) = open_temp();
        drop(board);
        let path = dir.path().join("kanban.db");
        // A board of kanban's still on its rollback journal, as a fresh board is between its
        // schema and the switch, while another connection holds the write lock.
        let holder = Connection::open(&path).unwrap();
        let mode: String = holder
            .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete");
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        let options = OpenOptions {
            busy_timeout_ms: Some(60_000),
            ..OpenOptions::default()
        };
        let err = Board::open_path(&path, &options).unwrap_err();
        assert!(
            matches!(
                err,
                BoardError::Storage(StorageError::Busy {
                    what: "switch the board to WAL",
                    tries,
                    ..
                }) if tries == BUSY_RETRIES + 1
            ),
            "{err}"
        );
        holder.execute_batch("ROLLBACK").unwrap();
        let board = Board::open_path(&path, &options).unwrap();
        let mode: String = board
            .sqlite()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn opening_a_store_retries_its_switch_to_wal_instead_of_failing_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let schema = "CREATE TABLE IF NOT EXISTS t (x INTEGER);";
        drop(Board::open_store(&path, schema).unwrap());
        // A store on its rollback journal, as a fresh one is before its switch, while another
        // connection holds the write lock.
        let holder = Connection::open(&path).unwrap();
        let mode: String = holder
            .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete");
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        let err = Board::open_store(&path, schema).unwrap_err();
        assert!(
            matches!(
                err,
                BoardError::Storage(StorageError::Busy {
                    what: "switch the store to WAL",
                    tries,
                    ..
                }) if tries == BUSY_RETRIES + 1
            ),
            "{err}"
        );
        holder.execute_batch("ROLLBACK").unwrap();
        let store = Board::open_store(&path, schema).unwrap();
        let mode: String = store
            .sqlite()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn special_files_at_the_board_path_are_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("null.db");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        let dangling = dir.path().join("dangling.db");
        std::os::unix::fs::symlink(dir.path().join("nowhere/x.db"), &dangling).unwrap();
        let fifo = dir.path().join("fifo.db");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::RWXU).unwrap();
        let socket = dir.path().join("sock.db");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        for (path, kind) in [
            (Path::new("/dev/null"), "character device"),
            (Path::new("/dev/zero"), "character device"),
            (link.as_path(), "character device"),
            (dangling.as_path(), "symlink to nothing"),
            (fifo.as_path(), "FIFO"),
            (socket.as_path(), "socket"),
            (dir.path(), "directory"),
        ] {
            for options in [OpenOptions::create(), OpenOptions::read_only()] {
                let err = Board::open_path(path, &options).unwrap_err();
                assert!(
                    matches!(
                        err,
                        BoardError::Storage(StorageError::NotRegularFile { .. })
                    ),
                    "{}: {err}",
                    path.display()
                );
                assert!(err.to_string().contains(kind), "{err}");
            }
        }
        assert!(!Path::new("/dev/null-journal").exists());
        assert!(!dir.path().join("null.db-wal").exists());
        assert!(!dir.path().join("nowhere").exists());
    }

    #[test]
    fn a_read_only_open_reads_and_refuses_writes_by_name() {
        let (dir, board) = open_temp();
        board
            .create_task(
                &crate::board::NewTask {
                    title: "t".to_owned(),
                    ..Default::default()
                },
                1,
            )
            .unwrap();
        drop(board);
        let path = dir.path().join("kanban.db");
        let ro = Board::open_path(&path, &OpenOptions::read_only()).unwrap();
        assert!(ro.is_read_only());
        assert_eq!(
            ro.list_tasks(&crate::board::TaskFilter::default())
                .unwrap()
                .len(),
            1
        );
        let err = ro.write(|_tx| Ok::<_, BoardError>(())).unwrap_err();
        assert!(
            matches!(err, BoardError::Storage(StorageError::ReadOnly { .. })),
            "{err}"
        );
        assert!(err.to_string().contains(&path.display().to_string()));
        // A missing file is never created by a read-only open.
        let missing = dir.path().join("missing.db");
        let err = Board::open_path(&missing, &OpenOptions::read_only()).unwrap_err();
        assert!(
            matches!(err, BoardError::Storage(StorageError::MissingFile { .. })),
            "{err}"
        );
        assert!(!missing.exists());
    }
}
