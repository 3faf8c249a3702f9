//! Owners' `state.db` files a board reads owner turns from (`Board::owner_turns`, in
//! `board::admission`), kept open between reads. Below both the board's store, which holds them,
//! and the admission reads, which use them.

use crate::db::Db;

/// Owners' `state.db` files opened read-only, by path, kept between reads (a dispatcher in
/// owner mode asks at every tick): each is reopened when the path names another file than the
/// one open (its device and inode differ: the open file keeps its inode from being reused).
#[derive(Debug, Default)]
pub(in crate::board) struct OwnerStates {
    files: std::collections::HashMap<String, OwnerState>,
    /// The `owner_admitted` marker of each run read so far, by (task, run): a run carries at
    /// most one (a later admission of the same session finds it, another session's is refused),
    /// so once read it is kept while the run is asked about.
    markers: std::collections::HashMap<(String, i64), Marker>,
}

/// What a run's `owner_admitted` marker says.
#[derive(Debug, Clone)]
pub(in crate::board) struct Marker {
    pub db: String,
    pub pid: Option<i64>,
    pub birth: Option<String>,
}

#[derive(Debug)]
struct OwnerState {
    file: (u64, u64),
    db: Db,
}

impl OwnerStates {
    /// The open state file at `path`, opened (again) when needed; `None` when it cannot be read.
    pub(in crate::board) fn get(&mut self, path: &str) -> Option<&Db> {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata(path) else {
            self.files.remove(path);
            return None;
        };
        let file = (meta.dev(), meta.ino());
        if self.files.get(path).is_none_or(|s| s.file != file) {
            self.files.remove(path);
            let db = Db::open_sqlite_read_only(std::path::Path::new(path)).ok()?;
            self.files.insert(path.to_owned(), OwnerState { file, db });
        }
        self.files.get(path).map(|s| &s.db)
    }

    /// The marker of (task, run) read before, if any.
    pub(in crate::board) fn marker(&self, task: &str, run: i64) -> Option<&Marker> {
        self.markers.get(&(task.to_owned(), run))
    }

    /// Keeps the marker of (task, run).
    pub(in crate::board) fn keep_marker(&mut self, task: &str, run: i64, marker: Marker) {
        self.markers.insert((task.to_owned(), run), marker);
    }

    /// Forgets the markers of runs not in `runs` (a dispatcher's running cards of this tick).
    pub(in crate::board) fn keep_only(&mut self, runs: &[(&str, i64)]) {
        self.markers
            .retain(|(task, run), _| runs.iter().any(|(t, r)| t == task && r == run));
    }
}
