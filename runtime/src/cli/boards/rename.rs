//! `kanban boards rename SLUG NAME`: the board's display name in its `board.json`
//! ([`crate::home::meta::set_name`]); the slug, the folder and the database never change.

use std::path::Path;

use serde::Serialize;

use crate::cli::session::{fence, print_out};
use crate::cli::{CmdResult, Globals};
use crate::home as paths;

/// `kanban boards rename SLUG NAME`: the board must exist; an empty name, one with a control
/// character or longer than [`paths::meta::MAX_NAME_CHARS`] is refused and nothing is written.
pub(super) fn rename(root: &Path, slug: &str, name: &str, globals: &Globals) -> CmdResult {
    fence()?;
    paths::validate_slug(slug)?;
    if !paths::locate(root, slug)?.exists() {
        return Err(crate::home::HomeError::BoardNotFound {
            slug: slug.to_owned(),
            path: paths::db_path(root, slug),
        }
        .into());
    }
    let stored = paths::meta::set_name(root, slug, name)?;
    #[derive(Serialize)]
    struct Renamed<'a> {
        slug: &'a str,
        name: &'a str,
    }
    print_out(
        globals.json,
        &Renamed {
            slug,
            name: &stored,
        },
        || format!("board {slug} is now named \"{stored}\""),
    )
}
