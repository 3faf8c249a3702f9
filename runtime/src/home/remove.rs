//! Removing a board from the home (`kanban boards rm`): which boards may go, the checks, and the
//! removal of the board's folder and, for a SQLite board, its attachments. A PostgreSQL board
//! loses only its folder (the recorded URL, its workspaces), never its database or the
//! attachments the database lists.

use std::path::{Path, PathBuf};

use crate::board::StorageError;
use crate::board::{Board, BoardError, OpenOptions};
use crate::db::target::PgTarget;
use crate::db::target::UrlSource;
use crate::home as paths;
use crate::home::DEFAULT_BOARD;

/// What [`remove_board`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Removed {
    /// The board's folder, `<root>/kanban/boards/<slug>/`, now gone.
    pub folder: PathBuf,
    /// The board's attachments folder, removed with a SQLite board (whose rows went with its
    /// file); a PostgreSQL board keeps it, since its database still lists the files.
    pub attachments: Option<PathBuf>,
    /// The removed board was the current one (the default board is current now).
    pub was_current: bool,
    /// The current board after the removal.
    pub current: String,
}

/// Why a board was not removed (nothing was).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RemoveError {
    #[error(transparent)]
    Board(#[from] BoardError),

    #[error(transparent)]
    Home(#[from] crate::home::HomeError),

    #[error("the default board cannot be removed (archive its tasks instead)")]
    DefaultBoard,

    /// A board kanban.toml declares would come back with the next command: the entry goes first.
    #[error(
        "board `{slug}` is declared by [boards.{slug}] in {}; remove that entry (and {} if present) instead; nothing was removed",
        file.display(),
        folder.display()
    )]
    Declared {
        slug: String,
        file: PathBuf,
        folder: PathBuf,
    },

    /// Its worker may still write to the board.
    #[error(
        "board `{slug}` still has running workers ({}); stop the dispatcher or reclaim those tasks first; nothing was removed",
        tasks.join(", ")
    )]
    Running { slug: String, tasks: Vec<String> },

    #[error("cannot remove {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl RemoveError {
    /// True for a refusal of the board's state (exit 3), false for an error (exit 1).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            RemoveError::DefaultBoard | RemoveError::Running { .. }
        )
    }
}

/// Removes board `slug` of the home at `root`: refused for the default board, for a board
/// kanban.toml declares, and while one of its tasks runs under a claim live at `now`. When it was
/// the current board, the default board becomes current.
pub(crate) fn remove_board(root: &Path, slug: &str, now: i64) -> Result<Removed, RemoveError> {
    paths::validate_slug(slug)?;
    if slug == DEFAULT_BOARD {
        return Err(RemoveError::DefaultBoard);
    }
    let folder = paths::boards_dir(root).join(slug);
    let location = paths::locate(root, slug)?;
    if !location.exists() {
        return Err(BoardError::Storage(StorageError::BoardNotFound {
            slug: slug.to_owned(),
            path: paths::db_path(root, slug),
        })
        .into());
    }
    if let Some(UrlSource::Config(file)) = location.postgres().map(PgTarget::source) {
        return Err(RemoveError::Declared {
            slug: slug.to_owned(),
            file: file.clone(),
            folder,
        });
    }
    let board = Board::open(&location, &OpenOptions::read_only())?;
    let live: Vec<String> = board
        .running_tasks()?
        .into_iter()
        .filter(|t| t.claim_expires.is_some_and(|e| e > now))
        .map(|t| t.id)
        .collect();
    drop(board);
    if !live.is_empty() {
        return Err(RemoveError::Running {
            slug: slug.to_owned(),
            tasks: live,
        });
    }
    let gone = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RemoveError::Io { path, source }
    };
    std::fs::remove_dir_all(&folder).map_err(gone(&folder))?;
    let attachments = paths::attachments_root(root, slug);
    let attachments = match location.postgres() {
        None if attachments.is_dir() => {
            std::fs::remove_dir_all(&attachments).map_err(gone(&attachments))?;
            Some(attachments)
        }
        _ => None,
    };
    let was_current = paths::current_slug(root).as_deref() == Some(slug);
    if was_current {
        let file = paths::current_file(root);
        std::fs::remove_file(&file).map_err(gone(&file))?;
    }
    let current = match was_current {
        true => DEFAULT_BOARD.to_owned(),
        false => paths::current_slug(root).unwrap_or_else(|| DEFAULT_BOARD.to_owned()),
    };
    Ok(Removed {
        folder,
        attachments,
        was_current,
        current,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{ClaimOrigin, ClaimSpec, NewTask};

    fn board_in(root: &Path, slug: &str) -> Board {
        let path = paths::db_path(root, slug);
        Board::create_new(&path, &OpenOptions::create()).unwrap();
        Board::open(&paths::locate(root, slug).unwrap(), &OpenOptions::default()).unwrap()
    }

    #[test]
    fn the_default_board_and_a_missing_board_are_not_removed() {
        let dir = tempfile::tempdir().unwrap();
        let err = remove_board(dir.path(), DEFAULT_BOARD, 0).unwrap_err();
        assert!(matches!(err, RemoveError::DefaultBoard) && err.is_refusal());
        let err = remove_board(dir.path(), "nope", 0).unwrap_err();
        assert!(
            matches!(
                err,
                RemoveError::Board(BoardError::Storage(StorageError::BoardNotFound { .. }))
            ),
            "{err}"
        );
        assert!(!err.is_refusal());
    }

    #[test]
    fn a_board_with_a_live_claim_stays_until_the_claim_expires() {
        let dir = tempfile::tempdir().unwrap();
        let board = board_in(dir.path(), "ops");
        let new = NewTask {
            title: "t".to_owned(),
            ..NewTask::default()
        };
        let task = board.create_task(&new, 100).unwrap();
        let spec = ClaimSpec {
            lock: "host:1".to_owned(),
            ttl_seconds: 60,
            origin: ClaimOrigin::External,
        };
        board.claim(&task.id, &spec, 100).unwrap();
        drop(board);
        let err = remove_board(dir.path(), "ops", 120).unwrap_err();
        assert!(
            matches!(&err, RemoveError::Running { tasks, .. } if *tasks == [task.id.clone()]),
            "{err}"
        );
        assert!(err.is_refusal());
        assert!(paths::db_path(dir.path(), "ops").is_file());
        // Once the claim expired, the board goes.
        let removed = remove_board(dir.path(), "ops", 1000).unwrap();
        assert!(!removed.folder.exists());
        assert!(!removed.was_current);
        assert_eq!(removed.current, DEFAULT_BOARD);
    }

    #[test]
    fn removing_the_current_board_makes_the_default_board_current() {
        let dir = tempfile::tempdir().unwrap();
        drop(board_in(dir.path(), "ops"));
        paths::switch_board(dir.path(), "ops").unwrap();
        let removed = remove_board(dir.path(), "ops", 0).unwrap();
        assert!(removed.was_current);
        assert_eq!(removed.current, DEFAULT_BOARD);
        assert_eq!(paths::current_slug(dir.path()), None);
    }
}
