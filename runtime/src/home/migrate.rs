//! `kanban boards migrate`: a board of the home moved to PostgreSQL. The copy is the engines'
//! (`crate::board::engine::migrate`); the home records where the board now lives, in its folder's
//! `postgres.url`, while the copy still holds the SQLite board's write lock.

use std::path::Path;

pub use crate::board::engine::migrate::{MigrateError, Migrated, ROWS_PER_INSERT, kept_path};
use crate::db::target::{BoardLocation, PgTarget};

/// Copies the SQLite board `board` of the home at `root` into `target` and switches the board to
/// it; `now` names the kept SQLite file (see `crate::board::engine::migrate`).
pub fn to_postgres(
    root: &Path,
    board: &BoardLocation,
    target: &PgTarget,
    now: i64,
) -> Result<Migrated, MigrateError> {
    crate::board::engine::migrate::to_postgres(board, target, now, || {
        Ok(super::write_url_file(root, &board.slug, target)?)
    })
}
