//! Creating a board of the home (`kanban boards create SLUG`): a SQLite file at the board's usual
//! place, unless kanban.toml puts the board in PostgreSQL — then it is created there, never as a
//! SQLite file the configuration would hide. A board that exists is refused.

use std::path::{Path, PathBuf};

use crate::board::StorageError;
use crate::board::{Board, BoardError, OpenOptions};
use crate::db::target::UrlSource;
use crate::db::target::{BoardLocation, PgTarget};
use crate::home as paths;
use crate::home::HomeError;

/// Where [`create_board`] would put (or did put) a new board.
#[derive(Debug)]
pub(crate) enum NewBoard {
    /// A SQLite file, created at this path.
    Sqlite(PathBuf),
    /// kanban.toml's `[boards.SLUG] url` names this database: the caller brings it up
    /// ([`super::migrate_plan::create_configured`]).
    Configured(Box<PgTarget>),
}

/// Why a board was not created (nothing was left behind).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CreateError {
    #[error(transparent)]
    Board(#[from] BoardError),

    #[error(transparent)]
    Home(#[from] HomeError),

    #[error(
        "cannot create board `{slug}`; nothing was left behind, so the same command can be retried"
    )]
    Failed {
        slug: String,
        #[source]
        source: BoardError,
    },
}

/// Creates board `slug` of the home at `root` as a SQLite file, or says which configured
/// PostgreSQL database it belongs in ([`NewBoard::Configured`], created by the caller).
pub(crate) fn create_board(root: &Path, slug: &str) -> Result<NewBoard, CreateError> {
    paths::validate_new_slug(slug)?;
    // A board folder that cannot be read holds no recorded URL; creating the SQLite file there
    // fails below with its own message.
    let located = match paths::locate(root, slug) {
        Err(HomeError::ReadUrlFile { .. }) => None,
        other => Some(other?),
    };
    if let Some(target) = located.as_ref().and_then(BoardLocation::postgres) {
        if matches!(target.source(), UrlSource::Config(_)) {
            return Ok(NewBoard::Configured(Box::new(target.clone())));
        }
        return Err(HomeError::BoardExists {
            path: paths::url_file(root, slug),
            slug: slug.to_owned(),
        }
        .into());
    }
    let path = paths::db_path(root, slug);
    match Board::create_new(&path, &OpenOptions::create()) {
        Ok(()) => Ok(NewBoard::Sqlite(path)),
        Err(BoardError::Storage(StorageError::FileExists { .. })) => Err(HomeError::BoardExists {
            slug: slug.to_owned(),
            path,
        }
        .into()),
        Err(source) => Err(CreateError::Failed {
            slug: slug.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_slug_becomes_a_sqlite_board_and_a_second_create_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let made = create_board(dir.path(), "ops").unwrap();
        let db = paths::db_path(dir.path(), "ops");
        assert!(
            matches!(&made, NewBoard::Sqlite(path) if *path == db),
            "{made:?}"
        );
        assert!(db.is_file());
        let err = create_board(dir.path(), "ops").unwrap_err();
        assert!(
            matches!(&err, CreateError::Home(HomeError::BoardExists { path, .. }) if *path == db),
            "{err}"
        );
    }

    #[test]
    fn a_board_kanban_toml_puts_in_postgres_is_not_made_a_sqlite_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("kanban.toml"),
            "[boards.ops]\nurl = \"postgres://kanban@127.0.0.1:1/kanban\"\n",
        )
        .unwrap();
        let made = create_board(dir.path(), "ops").unwrap();
        assert!(matches!(made, NewBoard::Configured(_)), "{made:?}");
        assert!(!paths::db_path(dir.path(), "ops").exists());
    }

    #[test]
    fn a_board_with_a_recorded_url_exists_already() {
        let dir = tempfile::tempdir().unwrap();
        let target = PgTarget::parse(
            "postgres://kanban@127.0.0.1:1/kanban",
            UrlSource::Argument("--url"),
        )
        .unwrap();
        paths::write_url_file(dir.path(), "ops", &target).unwrap();
        let err = create_board(dir.path(), "ops").unwrap_err();
        assert!(
            matches!(&err, CreateError::Home(HomeError::BoardExists { path, .. })
                if *path == paths::url_file(dir.path(), "ops")),
            "{err}"
        );
    }
}
