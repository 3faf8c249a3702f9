//! Owners' `state.db` files a board reads owner turns from (`Board::owner_turns`, in
//! `board::admission`), kept open between reads. Below both the board's store, which holds them,
//! and the admission reads, which use them.

use crate::db::Db;

/// Owners' `state.db` files opened read-only, by path, kept between reads (a dispatcher in
/// owner mode asks at every tick): each is reopened when the path names another file than the
/// one open (its device and inode differ: the open file keeps its inode from being reused).
#[derive(Debug, Default)]
pub(in crate::board) struct OwnerStates(std::collections::HashMap<String, OwnerState>);

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
            self.0.remove(path);
            return None;
        };
        let file = (meta.dev(), meta.ino());
        if self.0.get(path).is_none_or(|s| s.file != file) {
            self.0.remove(path);
            let db = Db::open_sqlite_read_only(std::path::Path::new(path)).ok()?;
            self.0.insert(path.to_owned(), OwnerState { file, db });
        }
        self.0.get(path).map(|s| &s.db)
    }
}
