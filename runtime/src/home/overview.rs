//! What `kanban boards list` shows of each board besides where it lives: its task counts (by
//! status, total and open) and the boards the original archived. The original's `boards rm`
//! moves a board's folder to `<root>/kanban/boards/_archived/<slug>-<epoch>[-n]/` instead of
//! deleting it, and its dashboard marks a board `"archived": true` in `board.json`; both are
//! listed as archived (the folders read-only: such a board is no longer resolvable by its slug).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{DB_FILE, HomeError, Result, boards_dir, validate_slug};
use crate::board::model::Status;
use crate::board::{Board, BoardError, OpenOptions};
use crate::db::target::BoardLocation;

/// The folder the original moves a removed board into.
pub const ARCHIVE_DIR: &str = "_archived";

/// A board's task counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TaskCounts {
    /// Tasks per status (only the statuses present).
    pub by_status: BTreeMap<String, i64>,
    pub total: i64,
    /// Tasks neither `done` nor `archived`.
    pub open: i64,
}

/// The counts of the board at `location`, read without writing (a PostgreSQL board is asked
/// over one connection).
pub fn counts(location: &BoardLocation) -> std::result::Result<TaskCounts, BoardError> {
    let board = Board::open(location, &OpenOptions::read_only())?;
    counts_of(&board)
}

fn counts_of(board: &Board) -> std::result::Result<TaskCounts, BoardError> {
    let mut out = TaskCounts::default();
    for (status, n) in board.status_counts()? {
        out.total += n;
        if !matches!(status, Status::Done | Status::Archived) {
            out.open += n;
        }
        out.by_status.insert(status.to_string(), n);
    }
    Ok(out)
}

/// A board folder the original's `boards rm` archived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedFolder {
    /// The slug the board had (the folder's name without its `-<epoch>[-n]` suffix).
    pub slug: String,
    /// The folder, under `<root>/kanban/boards/_archived/`.
    pub folder: PathBuf,
    /// When it was archived (Unix seconds), from the folder's name.
    pub archived_at: Option<i64>,
}

impl ArchivedFolder {
    /// The SQLite file of the archived board (absent for a board that had only settings).
    pub fn db_path(&self) -> PathBuf {
        self.folder.join(DB_FILE)
    }

    /// Its counts, read-only; `None` when the folder holds no board file.
    pub fn counts(&self) -> std::result::Result<Option<TaskCounts>, BoardError> {
        let db = self.db_path();
        if !db.is_file() {
            return Ok(None);
        }
        let board = Board::open_path(&db, &OpenOptions::read_only())?;
        Ok(Some(counts_of(&board)?))
    }
}

/// `name` split as the original names an archived folder: `<slug>-<epoch>` or
/// `<slug>-<epoch>-<n>`.
fn split_archived(name: &str) -> Option<(String, i64)> {
    let mut parts: Vec<&str> = name.rsplitn(3, '-').collect();
    parts.reverse();
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (slug, epoch) = match parts.as_slice() {
        [slug, epoch, n] if numeric(epoch) && numeric(n) => (*slug, *epoch),
        [a, b, epoch] if numeric(epoch) => (&name[..a.len() + 1 + b.len()], *epoch),
        [slug, epoch] if numeric(epoch) => (*slug, *epoch),
        _ => return None,
    };
    validate_slug(slug).ok()?;
    Some((slug.to_owned(), epoch.parse().ok()?))
}

/// The archived board folders under `root`, sorted by name.
pub fn archived_folders(root: &Path) -> Result<Vec<ArchivedFolder>> {
    let dir = boards_dir(root).join(ARCHIVE_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(HomeError::Io {
                action: "list",
                path: dir,
                source,
            });
        }
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let folder = entry.path();
        if !folder.is_dir() {
            continue;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let (slug, archived_at) = match split_archived(&name) {
            Some((slug, at)) => (slug, Some(at)),
            None => (name, None),
        };
        out.push(ArchivedFolder {
            slug,
            folder,
            archived_at,
        });
    }
    out.sort_by(|a, b| a.folder.cmp(&b.folder));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archived_folder_names_give_the_slug_and_the_time() {
        assert_eq!(
            split_archived("ops-1700000000"),
            Some(("ops".into(), 1_700_000_000))
        );
        assert_eq!(
            split_archived("ops-1700000000-2"),
            Some(("ops".into(), 1_700_000_000))
        );
        assert_eq!(split_archived("my-ops-17"), Some(("my-ops".into(), 17)));
        assert_eq!(split_archived("ops"), None);
        assert_eq!(split_archived("Bad-17"), None);
    }
}
