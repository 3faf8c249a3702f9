//! The per-board tick lock: `<db>.dispatch.lock`, a non-blocking exclusive `flock`. A dispatcher
//! that cannot take it skips the tick (`skipped_locked`); it never waits, so two dispatchers on one
//! board never run a tick at the same time, and a crashed holder releases it with its descriptor.
//!
//! A PostgreSQL board has no database file, so its lock is the file where its SQLite database
//! would be (`<root>/kanban.db.dispatch.lock` for `default`, `<root>/kanban/boards/<slug>/…`):
//! a local file of the home, taken by the dispatchers of that home on this host. Dispatchers of
//! other hosts (other homes) share no lock with it and tick concurrently; that is safe because
//! every transition of a tick is a compare-and-swap on the board (a claim is won by one
//! dispatcher, a stale row makes a write refuse), and a dispatcher judges and signals only the
//! workers whose claim lock names its own host. `runtime/tests/three_hosts.rs` runs three hosts
//! that way on one PostgreSQL board.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

/// Errors taking the tick lock.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "cannot open the dispatch lock file {path}; check that the board directory is writable"
    )]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot lock {path}")]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Held while a tick runs; dropping it releases the lock.
#[derive(Debug)]
pub struct TickLock {
    _file: File,
}

/// The lock file next to a board database.
pub(crate) fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".dispatch.lock");
    PathBuf::from(name)
}

impl TickLock {
    /// Takes the lock without waiting; `Ok(None)` when another dispatcher holds it.
    pub fn try_acquire(db: &Path) -> Result<Option<TickLock>, LockError> {
        let path = lock_path(db);
        // A PostgreSQL board selected only by a URL (`[boards.<slug>] url`, `$HERMES_KANBAN_DB`)
        // may have no folder in the home yet: the lock's folder is made on first use.
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| LockError::Open {
                path: path.clone(),
                source,
            })?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| LockError::Open {
                path: path.clone(),
                source,
            })?;
        match crate::proc::lock::try_exclusive(&file) {
            Ok(true) => Ok(Some(TickLock { _file: file })),
            Ok(false) => Ok(None),
            Err(source) => Err(LockError::Lock { path, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_s_missing_folder_is_made_on_first_use() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("kanban/boards/pg/kanban.db");
        let held = TickLock::try_acquire(&db).unwrap();
        assert!(held.is_some());
        assert!(lock_path(&db).is_file());
    }

    #[test]
    fn a_second_holder_is_refused_until_the_first_drops() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("kanban.db");
        let first = TickLock::try_acquire(&db).unwrap();
        assert!(first.is_some());
        assert!(TickLock::try_acquire(&db).unwrap().is_none());
        drop(first);
        // A child that another test of this process forks at this moment shares the lock's
        // open file (and so the lock) until it execs, when the close-on-exec descriptor goes:
        // the lock is free again once that copy is gone, a bounded number of tries later.
        let again = (0..100_000).find_map(|_| {
            let lock = TickLock::try_acquire(&db).unwrap();
            if lock.is_none() {
                std::thread::yield_now();
            }
            lock
        });
        assert!(again.is_some(), "the lock was never released");
        assert!(lock_path(&db).ends_with("kanban.db.dispatch.lock"));
    }
}
