//! Putting a board in PostgreSQL: `boards create SLUG --url URL` (bring a database to the board
//! schema or join the board it holds, then record the URL in the board folder) and `boards
//! migrate SLUG --to URL` (its preconditions and the dispatch lock held for the whole copy, then
//! [`migrate::to_postgres`]). The URL is parsed, and refused with a password, by the caller.

use std::path::{Path, PathBuf};

use crate::board::BoardError;
use crate::board::engine::postgres::store::BringUpError;
use crate::db::target::{PgTarget, UrlSource};
use crate::home as paths;
use crate::home::lock::{LockError, TickLock, lock_path};
use crate::home::migrate::{self, MigrateError, Migrated};

/// Why a board was not put in PostgreSQL.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlanError {
    #[error(transparent)]
    Board(#[from] BoardError),

    #[error(transparent)]
    Migrate(#[from] MigrateError),

    #[error(transparent)]
    Lock(#[from] LockError),

    #[error(transparent)]
    Home(#[from] crate::home::HomeError),

    #[error(transparent)]
    BringUp(#[from] BringUpError),
}

impl PlanError {
    /// True for a refusal of the board's or the target's state (exit 3), false for an error
    /// (exit 1).
    pub fn is_refusal(&self) -> bool {
        matches!(self, PlanError::Migrate(e) if e.is_refusal())
    }
}

/// What [`create_in_postgres`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PgCreated {
    /// The file the URL was recorded in (none for a board configured in kanban.toml).
    pub url_file: Option<PathBuf>,
    /// The schema version the database had (0: it was empty, and now holds a new board).
    pub joined_version: i64,
}

/// Creates board `slug` of the home at `root` in `target`'s database (a new slug: one that
/// exists as a SQLite file or a recorded URL is refused), and records the URL in its folder.
pub(crate) fn create_in_postgres(
    root: &Path,
    slug: &str,
    target: &PgTarget,
) -> Result<PgCreated, PlanError> {
    paths::validate_new_slug(slug)?;
    let existing = paths::locate(root, slug)?;
    if existing.exists() {
        return Err(crate::home::HomeError::BoardExists {
            slug: slug.to_owned(),
            path: match existing.postgres().map(PgTarget::source) {
                Some(UrlSource::Config(path) | UrlSource::File(path)) => path.clone(),
                Some(_) => paths::url_file(root, slug),
                None => existing.db_path,
            },
        }
        .into());
    }
    bring_up(slug, target, Some(root))
}

/// Creates board `slug` whose URL `[boards.SLUG] url` in kanban.toml names: as
/// [`create_in_postgres`], but nothing is recorded (the configuration is the record).
pub(crate) fn create_configured(slug: &str, target: &PgTarget) -> Result<PgCreated, PlanError> {
    paths::validate_new_slug(slug)?;
    bring_up(slug, target, None)
}

/// Creates the board schema in `target`'s database or joins the board it holds, then (with
/// `record_in`, a root) records the URL in the board folder.
fn bring_up(
    slug: &str,
    target: &PgTarget,
    record_in: Option<&Path>,
) -> Result<PgCreated, PlanError> {
    let joined_version = crate::board::engine::postgres::store::create_or_join(target)?;
    let url_file = match record_in {
        Some(root) => Some(paths::write_url_file(root, slug, target)?),
        None => None,
    };
    Ok(PgCreated {
        url_file,
        joined_version,
    })
}

/// Copies SQLite board `slug` of the home at `root` into `target` and switches the board to it
/// ([`migrate::to_postgres`]). Refused for a board already in PostgreSQL or without its SQLite
/// file, and while a dispatcher ticks the board: the tick lock is held for the whole copy, so no
/// dispatcher starts meanwhile.
pub(crate) fn migrate_board(
    root: &Path,
    slug: &str,
    target: &PgTarget,
    now: i64,
) -> Result<Migrated, PlanError> {
    paths::validate_slug(slug)?;
    let board = paths::locate(root, slug)?;
    if let Some(current) = board.postgres() {
        return Err(MigrateError::AlreadyPostgres {
            slug: slug.to_owned(),
            url: current.redacted(),
        }
        .into());
    }
    if !board.db_path.is_file() {
        return Err(MigrateError::NotFound {
            slug: slug.to_owned(),
            path: board.db_path,
        }
        .into());
    }
    let Some(_lock) = TickLock::try_acquire(&board.db_path)? else {
        return Err(MigrateError::DispatchLocked {
            slug: slug.to_owned(),
            lock: lock_path(&board.db_path),
        }
        .into());
    };
    Ok(migrate::to_postgres(root, &board, target, now)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{Board, OpenOptions};

    /// A target no test connects to: the preconditions are checked before any connection.
    fn target() -> PgTarget {
        PgTarget::parse(
            "postgres://kanban@127.0.0.1:1/kanban",
            UrlSource::Argument("--to"),
        )
        .unwrap()
    }

    #[test]
    fn a_missing_board_or_one_already_in_postgres_is_not_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let err = migrate_board(dir.path(), "ops", &target(), 0).unwrap_err();
        assert!(
            matches!(err, PlanError::Migrate(MigrateError::NotFound { .. })),
            "{err}"
        );
        assert!(!err.is_refusal());
        paths::write_url_file(dir.path(), "ops", &target()).unwrap();
        let err = migrate_board(dir.path(), "ops", &target(), 0).unwrap_err();
        assert!(
            matches!(
                err,
                PlanError::Migrate(MigrateError::AlreadyPostgres { .. })
            ),
            "{err}"
        );
    }

    #[test]
    fn a_board_a_dispatcher_ticks_is_refused_before_any_connection() {
        let dir = tempfile::tempdir().unwrap();
        let db = paths::db_path(dir.path(), "ops");
        Board::create_new(&db, &OpenOptions::create()).unwrap();
        let _held = TickLock::try_acquire(&db).unwrap().unwrap();
        let err = migrate_board(dir.path(), "ops", &target(), 0).unwrap_err();
        assert!(
            matches!(err, PlanError::Migrate(MigrateError::DispatchLocked { .. })),
            "{err}"
        );
        assert!(err.is_refusal());
    }

    #[test]
    fn a_board_that_exists_is_not_created_again_in_postgres() {
        let dir = tempfile::tempdir().unwrap();
        let db = paths::db_path(dir.path(), "ops");
        Board::create_new(&db, &OpenOptions::create()).unwrap();
        let err = create_in_postgres(dir.path(), "ops", &target()).unwrap_err();
        assert!(
            matches!(err, PlanError::Home(crate::home::HomeError::BoardExists { ref path, .. }) if *path == db),
            "{err}"
        );
    }
}
