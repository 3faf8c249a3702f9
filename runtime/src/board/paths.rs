//! Where boards live: the kanban root, slug validation, board resolution and the per-board paths
//! of workspaces and logs. Pure path arithmetic plus the `current` file; it never opens SQLite.
//!
//! Layout (DESIGN §2):
//! * root = `--home` > `HERMES_KANBAN_HOME` > `$HERMES_HOME` > `~/.hermes`;
//! * board `default` at `<root>/kanban.db`, board `<slug>` at `<root>/kanban/boards/<slug>/kanban.db`;
//! * the current board in `<root>/kanban/current` (one slug and a newline);
//! * workspaces at `<root>/kanban/workspaces/<board>/<task_id>/`;
//! * worker logs at `<root>/kanban/logs/<board>/<task_id>.log`.
//!
//! Resolution: `--board` > `HERMES_KANBAN_DB` (pins the file) > `HERMES_KANBAN_BOARD` >
//! `<root>/kanban/current` > `default`. An invalid slug in the flag or in `HERMES_KANBAN_BOARD` is
//! an error (never a silent fallback onto another board); a stale or malformed `current` file
//! falls back to `default`, so hand-edited state cannot wedge the dispatcher. Environment values
//! are read only through [`crate::identity::settings`].

use std::path::{Path, PathBuf};

use super::error::{BoardError, Result};
use crate::identity::settings::{self, Setting};

/// The slug of the board that lives at `<root>/kanban.db`.
pub const DEFAULT_BOARD: &str = "default";
/// File name of every board database.
pub const DB_FILE: &str = "kanban.db";

/// A resolved board: its slug and its database file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardLocation {
    pub slug: String,
    pub db_path: PathBuf,
    /// True when `HERMES_KANBAN_DB` pinned the file (a worker's board).
    pub pinned: bool,
}

/// The kanban root: `home_flag` > `HERMES_KANBAN_HOME` > `$HERMES_HOME` > `~/.hermes`.
pub fn root_dir(home_flag: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = home_flag {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = settings::get(Setting::Home) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = settings::hermes_home() {
        return Ok(dir);
    }
    settings::user_home()
        .map(|h| h.join(".hermes"))
        .ok_or(BoardError::NoRoot)
}

/// Checks `slug` against `^[a-z0-9][a-z0-9_-]{0,63}$`.
pub fn validate_slug(slug: &str) -> Result<()> {
    let bad = |reason| {
        Err(BoardError::InvalidSlug {
            slug: slug.to_owned(),
            reason,
        })
    };
    let bytes = slug.as_bytes();
    let Some(first) = bytes.first() else {
        return bad("it is empty");
    };
    if bytes.len() > 64 {
        return bad("it is longer than 64 characters");
    }
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return bad("it must start with a lower-case letter or a digit");
    }
    if slug.contains('/') || slug.contains('\\') || slug.contains("..") {
        return bad("it must not contain path separators or `..`");
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
    {
        return bad("it may only contain lower-case letters, digits, `_` and `-`");
    }
    Ok(())
}

/// The database file of board `slug` under `root` (the slug must be valid).
pub fn db_path(root: &Path, slug: &str) -> PathBuf {
    if slug == DEFAULT_BOARD {
        root.join(DB_FILE)
    } else {
        boards_dir(root).join(slug).join(DB_FILE)
    }
}

/// `<root>/kanban/boards`: one directory per non-default board.
pub fn boards_dir(root: &Path) -> PathBuf {
    root.join("kanban").join("boards")
}

/// `<root>/kanban/current`: the slug `kanban boards switch` selected.
pub fn current_file(root: &Path) -> PathBuf {
    root.join("kanban").join("current")
}

/// `<root>/kanban/workspaces/<board>/<task_id>/`.
pub fn workspace_dir(root: &Path, slug: &str, task_id: &str) -> PathBuf {
    workspaces_root(root, slug).join(task_id)
}

/// `<root>/kanban/workspaces/<board>/`.
pub fn workspaces_root(root: &Path, slug: &str) -> PathBuf {
    root.join("kanban").join("workspaces").join(slug)
}

/// `<root>/kanban/logs/<board>/<task_id>.log`.
pub fn log_path(root: &Path, slug: &str, task_id: &str) -> PathBuf {
    root.join("kanban")
        .join("logs")
        .join(slug)
        .join(format!("{task_id}.log"))
}

/// The slug in `<root>/kanban/current`, if the file holds a valid one.
pub fn current_slug(root: &Path) -> Option<String> {
    let text = std::fs::read_to_string(current_file(root)).ok()?;
    let slug = text.trim_start_matches('\u{feff}').trim();
    validate_slug(slug).ok().map(|()| slug.to_owned())
}

/// Resolves the board: `board_flag` > `HERMES_KANBAN_DB` > `HERMES_KANBAN_BOARD` > current > default.
pub fn resolve(root: &Path, board_flag: Option<&str>) -> Result<BoardLocation> {
    if let Some(slug) = board_flag {
        validate_slug(slug)?;
        return Ok(BoardLocation {
            slug: slug.to_owned(),
            db_path: db_path(root, slug),
            pinned: false,
        });
    }
    let env_board = match settings::pinned_board() {
        Some(slug) => {
            validate_slug(&slug)?;
            Some(slug)
        }
        None => None,
    };
    if let Some(db) = settings::pinned_db() {
        let db_path = PathBuf::from(db);
        let slug = env_board
            .or_else(|| slug_of_db_path(root, &db_path))
            .unwrap_or_else(|| DEFAULT_BOARD.to_owned());
        return Ok(BoardLocation {
            slug,
            db_path,
            pinned: true,
        });
    }
    let slug = env_board
        .or_else(|| current_slug(root))
        .unwrap_or_else(|| DEFAULT_BOARD.to_owned());
    Ok(BoardLocation {
        db_path: db_path(root, &slug),
        slug,
        pinned: false,
    })
}

/// The slug whose default database path is `db` under `root`, if any.
fn slug_of_db_path(root: &Path, db: &Path) -> Option<String> {
    if db == db_path(root, DEFAULT_BOARD) {
        return Some(DEFAULT_BOARD.to_owned());
    }
    let rel = db.strip_prefix(boards_dir(root)).ok()?;
    let mut parts = rel.components();
    let slug = parts.next()?.as_os_str().to_str()?.to_owned();
    let leaf = parts.next()?.as_os_str();
    (leaf == DB_FILE && parts.next().is_none() && validate_slug(&slug).is_ok()).then_some(slug)
}

/// Every board under `root` whose database exists (`default` always listed), sorted by slug.
pub fn list_boards(root: &Path) -> Result<Vec<BoardLocation>> {
    let mut boards = vec![BoardLocation {
        slug: DEFAULT_BOARD.to_owned(),
        db_path: db_path(root, DEFAULT_BOARD),
        pinned: false,
    }];
    let dir = boards_dir(root);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(boards),
        Err(source) => {
            return Err(BoardError::Io {
                action: "list",
                path: dir,
                source,
            });
        }
    };
    for entry in entries.flatten() {
        let Some(slug) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if slug == DEFAULT_BOARD || validate_slug(&slug).is_err() {
            continue;
        }
        let path = db_path(root, &slug);
        if path.is_file() {
            boards.push(BoardLocation {
                slug,
                db_path: path,
                pinned: false,
            });
        }
    }
    boards.sort_by(|a, b| a.slug.cmp(&b.slug));
    Ok(boards)
}

/// Writes `slug` to `<root>/kanban/current` (the board must exist).
pub fn switch_board(root: &Path, slug: &str) -> Result<()> {
    validate_slug(slug)?;
    let path = db_path(root, slug);
    if !path.is_file() {
        return Err(BoardError::BoardNotFound {
            slug: slug.to_owned(),
            path,
        });
    }
    let file = current_file(root);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).map_err(|source| BoardError::Io {
            action: "create",
            path: parent.to_path_buf(),
            source,
        })?;
    }
    std::fs::write(&file, format!("{slug}\n")).map_err(|source| BoardError::Io {
        action: "write",
        path: file,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_validated() {
        for good in ["default", "a", "0", "team-2", "a_b", &"a".repeat(64)] {
            assert!(validate_slug(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "A",
            "../x",
            "a/b",
            "-a",
            "_a",
            "a.b",
            "a b",
            "é",
            &"a".repeat(65),
        ] {
            let err = validate_slug(bad).expect_err(bad);
            assert!(err.to_string().contains("invalid board slug"), "{err}");
        }
    }

    #[test]
    fn paths_follow_the_layout() {
        let root = Path::new("/r");
        assert_eq!(db_path(root, "default"), Path::new("/r/kanban.db"));
        assert_eq!(
            db_path(root, "x"),
            Path::new("/r/kanban/boards/x/kanban.db")
        );
        assert_eq!(
            workspace_dir(root, "x", "t_1"),
            Path::new("/r/kanban/workspaces/x/t_1")
        );
        assert_eq!(
            log_path(root, "x", "t_1"),
            Path::new("/r/kanban/logs/x/t_1.log")
        );
        assert_eq!(
            slug_of_db_path(root, Path::new("/r/kanban/boards/x/kanban.db")).as_deref(),
            Some("x")
        );
        assert_eq!(slug_of_db_path(root, Path::new("/elsewhere.db")), None);
    }

    #[test]
    fn flag_wins_and_is_validated() {
        let root = Path::new("/r");
        let loc = resolve(root, Some("ops")).unwrap();
        assert_eq!(loc.slug, "ops");
        assert!(resolve(root, Some("../x")).is_err());
    }

    #[test]
    fn malformed_current_file_falls_back_to_default() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("kanban")).unwrap();
        std::fs::write(current_file(dir.path()), "../etc\n").unwrap();
        assert_eq!(current_slug(dir.path()), None);
        std::fs::write(current_file(dir.path()), "\u{feff}ops\n").unwrap();
        assert_eq!(current_slug(dir.path()).as_deref(), Some("ops"));
    }
}
