//! Where boards live: the kanban root, slug validation, board resolution and the per-board paths
//! of workspaces and logs, and the home's board decisions the command line only calls: where
//! `boards create` puts a board ([`create`]), what `boards rm` may remove ([`remove`]), what
//! `boards create --url` / `boards migrate` check, lock and do ([`migrate_plan`], [`migrate`]).
//! Errors here never name a command-line flag; the CLI adds any hint.
//!
//! Layout (the README's "Where boards live"):
//! * root = `--home` > `HERMES_KANBAN_HOME` > `$HERMES_HOME` > `~/.hermes`;
//! * board `default` at `<root>/kanban.db`, board `<slug>` at `<root>/kanban/boards/<slug>/kanban.db`;
//! * the current board in `<root>/kanban/current` (one slug and a newline);
//! * workspaces: board `default` at `<root>/kanban/workspaces/<task_id>/` (where the original keeps
//!   them), board `<slug>` at `<root>/kanban/workspaces/<slug>/<task_id>/`;
//! * worker logs: board `default` at `<root>/kanban/logs/<task_id>.log` (the original's place, so
//!   its log reader finds what kanban ran), board `<slug>` at `<root>/kanban/logs/<slug>/<task_id>.log`.
//! * attachments (SQLite and PostgreSQL boards alike): board `default` at
//!   `<root>/kanban/attachments/<task_id>/` (the original's place), board `<slug>` at
//!   `<root>/kanban/attachments/<slug>/<task_id>/`.
//!
//! Files written elsewhere are still read ([`find_log`], [`find_workspace`]): for the default board
//! the per-board place older kanban builds used (`…/workspaces/default/<id>`, `…/logs/default/
//! <id>.log`), for any other board the original's place (`<root>/kanban/boards/<slug>/workspaces/
//! <id>`, `…/logs/<id>.log`). A slug shaped like a task id (`t_` and hex digits) is refused for a
//! new board: its workspaces directory would sit where the default board keeps that task's one.
//!
//! The root and a pinned database file are made absolute once, against the working directory of
//! the command that resolves them: a worker runs in its workspace, so a relative `--home rel` or
//! `HERMES_KANBAN_HOME=home2` handed on as given would point somewhere else there.
//!
//! Resolution: `--board` > `HERMES_KANBAN_DB` (pins the file) > `HERMES_KANBAN_BOARD` >
//! `<root>/kanban/current` > `default`. An invalid slug in the flag or in `HERMES_KANBAN_BOARD` is
//! an error (never a silent fallback onto another board); a stale or malformed `current` file
//! falls back to `default`, so hand-edited state cannot wedge the dispatcher. Environment values
//! are read only through [`crate::identity::settings`].
//!
//! Which store a resolved board uses ([`BoardLocation::store`]) is decided here (the order is in
//! [`crate::db::target`]):
//! a board with a `postgres://` URL (`[boards.<slug>] url` in `kanban.toml`, the board folder's
//! `postgres.url`, or a worker's `HERMES_KANBAN_DB`) lives in PostgreSQL; every other board is the
//! SQLite file at `db_path`. For a PostgreSQL board `db_path` is still where its SQLite file would
//! be: the anchor of the board folder (its dispatch lock file sits next to it), never opened.

use std::path::{Path, PathBuf};

pub mod create;
pub mod error;
pub mod lock;
pub mod meta;
pub mod migrate;
pub mod migrate_plan;
pub mod overview;
pub mod policy;
pub mod remove;
pub mod steering;
pub mod transfer;

pub(crate) use error::HomeError;
pub use error::Result;

use crate::board::slug::InvalidSlug;

use crate::db::target::{BoardLocation, PgTarget, Store, URL_FILE, UrlSource};
use crate::identity::settings::{self, Setting};

/// The slug of the board that lives at `<root>/kanban.db`.
pub(crate) const DEFAULT_BOARD: &str = "default";
/// File name of every board database.
pub(crate) const DB_FILE: &str = "kanban.db";

/// Which store board `slug` under `root` uses (see [`super::location`] for the order).
pub(crate) fn store_of(root: &Path, slug: &str) -> Result<Store> {
    let configured = crate::config::boards::load(root)
        .map_err(|e| HomeError::Config(Box::new(e)))?
        .remove(slug);
    let recorded = read_url_file(root, slug)?;
    Ok(match (configured, recorded) {
        (Some(c), Some(f)) if !c.redacted_eq(&f) => {
            let path = |t: &PgTarget| match t.source() {
                UrlSource::Config(p) | UrlSource::File(p) => p.clone(),
                other => PathBuf::from(other.to_string()),
            };
            return Err(HomeError::Conflict {
                slug: slug.to_owned(),
                config_url: c.redacted(),
                config_path: path(&c),
                file_url: f.redacted(),
                file_path: path(&f),
            });
        }
        (Some(c), _) => Store::Postgres(c),
        (None, Some(f)) => Store::Postgres(f),
        (None, None) => Store::Sqlite,
    })
}

/// The location of board `slug` under `root` (the slug must be valid).
pub fn locate(root: &Path, slug: &str) -> Result<BoardLocation> {
    Ok(BoardLocation {
        slug: slug.to_owned(),
        db_path: db_path(root, slug),
        pinned: false,
        store: store_of(root, slug)?,
    })
}

/// The kanban root, absolute: `home_flag` > `HERMES_KANBAN_HOME` > `$HERMES_HOME` > `~/.hermes`.
pub(crate) fn root_dir(home_flag: Option<&Path>) -> Result<PathBuf> {
    let dir = if let Some(dir) = home_flag {
        dir.to_path_buf()
    } else if let Some(dir) = settings::get(Setting::Home) {
        PathBuf::from(dir)
    } else if let Some(dir) = settings::hermes_home() {
        dir
    } else {
        settings::user_home()
            .map(|h| h.join(".hermes"))
            .ok_or(HomeError::NoRoot)?
    };
    if dir.as_os_str().is_empty() {
        return Err(HomeError::NoRoot);
    }
    absolute(&dir)
}

/// `path` made absolute against the current directory (lexically: symlinks are kept).
pub fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|source| HomeError::Io {
        action: "resolve the current directory for",
        path: path.to_path_buf(),
        source,
    })
}

/// Checks `slug` against `^[a-z0-9][a-z0-9_-]{0,63}$` (see [`crate::board::slug`]).
pub(crate) fn validate_slug(slug: &str) -> Result<()> {
    Ok(crate::board::slug::validate(slug)?)
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
pub(crate) fn boards_dir(root: &Path) -> PathBuf {
    root.join("kanban").join("boards")
}

/// `<root>/kanban/current`: the slug `kanban boards switch` selected.
pub(crate) fn current_file(root: &Path) -> PathBuf {
    root.join("kanban").join("current")
}

/// Where a new workspace of task `task_id` goes: `<root>/kanban/workspaces/<task_id>/` on the
/// default board (the original's place), `<root>/kanban/workspaces/<board>/<task_id>/` otherwise.
pub(crate) fn workspace_dir(root: &Path, slug: &str, task_id: &str) -> PathBuf {
    workspaces_root(root, slug).join(task_id)
}

/// The directory holding the board's workspaces (`HERMES_KANBAN_WORKSPACES_ROOT` of its workers).
pub(crate) fn workspaces_root(root: &Path, slug: &str) -> PathBuf {
    let all = root.join("kanban").join("workspaces");
    if slug == DEFAULT_BOARD {
        all
    } else {
        all.join(slug)
    }
}

/// The folders scratch workspaces of board `slug` live in (where [`workspace_dirs`] looks): a
/// scratch path is removed only strictly inside one of them.
pub(crate) fn managed_workspace_roots(root: &Path, slug: &str) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = workspace_dirs(root, slug, "t_0")
        .iter()
        .filter_map(|dir| dir.parent().map(Path::to_path_buf))
        .collect();
    roots.dedup();
    roots
}

/// Every place a workspace of the task may already be, [`workspace_dir`] first.
pub(crate) fn workspace_dirs(root: &Path, slug: &str, task_id: &str) -> Vec<PathBuf> {
    let other = if slug == DEFAULT_BOARD {
        root.join("kanban")
            .join("workspaces")
            .join(DEFAULT_BOARD)
            .join(task_id)
    } else {
        boards_dir(root).join(slug).join("workspaces").join(task_id)
    };
    vec![workspace_dir(root, slug, task_id), other]
}

/// The task's existing workspace (the first of [`workspace_dirs`] that is a directory), else
/// where a new one goes: a task that already ran keeps its workspace wherever it is.
pub(crate) fn find_workspace(root: &Path, slug: &str, task_id: &str) -> PathBuf {
    let dirs = workspace_dirs(root, slug, task_id);
    dirs.iter()
        .find(|d| d.is_dir())
        .unwrap_or(&dirs[0])
        .to_path_buf()
}

/// The directory holding board `slug`'s attachments, one folder per task:
/// `<root>/kanban/attachments/` on the default board (the original's place),
/// `<root>/kanban/attachments/<board>/` otherwise.
pub fn attachments_root(root: &Path, slug: &str) -> PathBuf {
    let all = root.join("kanban").join("attachments");
    if slug == DEFAULT_BOARD {
        all
    } else {
        all.join(slug)
    }
}

/// The kanban root under which [`workspaces_root`] of board `slug` is `workspaces_root`, when
/// it has that shape: how a worker's own `kanban` commands, which get no `--home`, find the
/// board's attachments from the workspaces root their dispatcher handed them.
pub fn root_of_workspaces_root(workspaces_root: &Path, slug: &str) -> Option<PathBuf> {
    let all = if slug == DEFAULT_BOARD {
        workspaces_root
    } else {
        (workspaces_root.file_name()? == slug)
            .then(|| workspaces_root.parent())
            .flatten()?
    };
    let kanban = all.parent()?;
    (all.file_name()? == "workspaces" && kanban.file_name()? == "kanban")
        .then(|| kanban.parent().map(Path::to_path_buf))
        .flatten()
}

/// The folder of task `task_id`'s attachments (the original's `task_attachments_dir`).
pub fn attachments_dir(root: &Path, slug: &str, task_id: &str) -> PathBuf {
    attachments_root(root, slug).join(task_id)
}

/// Where a worker's log is written: `<root>/kanban/logs/<task_id>.log` on the default board (the
/// original's place), `<root>/kanban/logs/<board>/<task_id>.log` otherwise.
pub fn log_path(root: &Path, slug: &str, task_id: &str) -> PathBuf {
    let logs = root.join("kanban").join("logs");
    let file = format!("{task_id}.log");
    if slug == DEFAULT_BOARD {
        logs.join(file)
    } else {
        logs.join(slug).join(file)
    }
}

/// Every place a log of the task may be, [`log_path`] first.
pub(crate) fn log_paths(root: &Path, slug: &str, task_id: &str) -> Vec<PathBuf> {
    let file = format!("{task_id}.log");
    let other = if slug == DEFAULT_BOARD {
        root.join("kanban")
            .join("logs")
            .join(DEFAULT_BOARD)
            .join(file)
    } else {
        boards_dir(root).join(slug).join("logs").join(file)
    };
    vec![log_path(root, slug, task_id), other]
}

/// The log a reader wants: of [`log_paths`], the existing one written last (the newest worker's),
/// else [`log_path`].
pub(crate) fn find_log(root: &Path, slug: &str, task_id: &str) -> PathBuf {
    let paths = log_paths(root, slug, task_id);
    paths
        .iter()
        .filter_map(|p| {
            let modified = std::fs::metadata(p).and_then(|m| m.modified()).ok()?;
            Some((modified, p))
        })
        // On equal times the first (kanban's own place) wins.
        .fold(
            None,
            |best: Option<(std::time::SystemTime, &PathBuf)>, (t, p)| match best {
                Some((bt, _)) if bt >= t => best,
                _ => Some((t, p)),
            },
        )
        .map_or_else(|| paths[0].clone(), |(_, p)| p.clone())
}

/// [`validate_slug`], plus what a *new* board's slug must not be: shaped like a task id
/// (`t_` and hex digits), whose workspaces directory would be the default board's workspace of
/// that task.
pub(crate) fn validate_new_slug(slug: &str) -> Result<()> {
    validate_slug(slug)?;
    let hex = slug.strip_prefix("t_").unwrap_or("");
    if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(HomeError::InvalidSlug(InvalidSlug {
            slug: slug.to_owned(),
            reason: "it is shaped like a task id (`t_` and hex digits), whose workspace the default board keeps at `kanban/workspaces/<id>`",
        }));
    }
    Ok(())
}

/// The slug in `<root>/kanban/current`, if the file holds a valid one.
pub(crate) fn current_slug(root: &Path) -> Option<String> {
    let text = std::fs::read_to_string(current_file(root)).ok()?;
    let slug = text.trim_start_matches('\u{feff}').trim();
    validate_slug(slug).ok().map(|()| slug.to_owned())
}

/// Resolves the board: `board_flag` > `HERMES_KANBAN_DB` > `HERMES_KANBAN_BOARD` > current > default.
pub fn resolve(root: &Path, board_flag: Option<&str>) -> Result<BoardLocation> {
    if let Some(slug) = board_flag {
        validate_slug(slug)?;
        return locate(root, slug);
    }
    let env_board = match settings::pinned_board() {
        Some(slug) => {
            validate_slug(&slug)?;
            Some(slug)
        }
        None => None,
    };
    if let Some(db) = settings::pinned_db() {
        if crate::db::target::is_postgres_url(&db) {
            return pinned_postgres(root, env_board, &db);
        }
        let db_path = absolute(Path::new(&db))?;
        let slug = env_board
            .or_else(|| slug_of_db_path(root, &db_path))
            .unwrap_or_else(|| DEFAULT_BOARD.to_owned());
        return Ok(BoardLocation {
            slug,
            db_path,
            pinned: true,
            store: Store::Sqlite,
        });
    }
    let slug = env_board
        .or_else(|| current_slug(root))
        .unwrap_or_else(|| DEFAULT_BOARD.to_owned());
    locate(root, &slug)
}

/// A worker's PostgreSQL board, pinned by `HERMES_KANBAN_DB=<url without password>`: the
/// `kanban.toml` entry of its board supplies a password when it names the same database.
fn pinned_postgres(root: &Path, env_board: Option<String>, url: &str) -> Result<BoardLocation> {
    let pinned = PgTarget::parse(url, UrlSource::Pinned)?;
    if pinned.has_password() {
        return Err(HomeError::PasswordInEnvironment);
    }
    let slug = env_board.unwrap_or_else(|| DEFAULT_BOARD.to_owned());
    let configured = crate::config::boards::load(root)
        .map_err(|e| HomeError::Config(Box::new(e)))?
        .remove(&slug)
        .filter(|c| c.redacted_eq(&pinned));
    Ok(BoardLocation {
        db_path: db_path(root, &slug),
        slug,
        pinned: true,
        store: Store::Postgres(configured.unwrap_or(pinned)),
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

/// Every board under `root` whose database exists or that has a PostgreSQL URL (`default` always
/// listed), sorted by slug.
pub(crate) fn list_boards(root: &Path) -> Result<Vec<BoardLocation>> {
    let mut boards = vec![locate(root, DEFAULT_BOARD)?];
    let configured =
        crate::config::boards::load(root).map_err(|e| HomeError::Config(Box::new(e)))?;
    let dir = boards_dir(root);
    let mut slugs: std::collections::BTreeSet<String> = configured
        .into_keys()
        .filter(|s| s != DEFAULT_BOARD)
        .collect();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => Some(entries),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(HomeError::Io {
                action: "list",
                path: dir,
                source,
            });
        }
    };
    for entry in entries.into_iter().flatten().flatten() {
        let Some(slug) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if slug == DEFAULT_BOARD || validate_slug(&slug).is_err() {
            continue;
        }
        if db_path(root, &slug).is_file() || url_file(root, &slug).is_file() {
            slugs.insert(slug);
        }
    }
    for slug in slugs {
        boards.push(locate(root, &slug)?);
    }
    boards.sort_by(|a, b| a.slug.cmp(&b.slug));
    Ok(boards)
}

/// Writes `slug` to `<root>/kanban/current` (the board must exist).
pub(crate) fn switch_board(root: &Path, slug: &str) -> Result<()> {
    validate_slug(slug)?;
    let path = db_path(root, slug);
    if !locate(root, slug)?.exists() {
        return Err(HomeError::BoardNotFound {
            slug: slug.to_owned(),
            path,
        });
    }
    let file = current_file(root);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).map_err(|source| HomeError::Io {
            action: "create",
            path: parent.to_path_buf(),
            source,
        })?;
    }
    std::fs::write(&file, format!("{slug}\n")).map_err(|source| HomeError::Io {
        action: "write",
        path: file,
        source,
    })
}

/// The board folder's [`URL_FILE`] (the default board's too: `<root>/kanban/boards/default/`).
pub fn url_file(root: &Path, slug: &str) -> PathBuf {
    boards_dir(root).join(slug).join(URL_FILE)
}

/// The URL recorded in the board folder, if there is one.
pub(crate) fn read_url_file(root: &Path, slug: &str) -> Result<Option<PgTarget>> {
    let path = url_file(root, slug);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(HomeError::ReadUrlFile { path, source }),
    };
    let url = text.trim();
    let target = PgTarget::parse(url, UrlSource::File(path.clone()))?;
    if target.has_password() {
        return Err(HomeError::PasswordInFile { path });
    }
    Ok(Some(target))
}

/// Records `target` (its redacted URL: never a password) in the board folder, atomically (a
/// temporary file renamed into place), creating the folder if needed.
pub(crate) fn write_url_file(root: &Path, slug: &str, target: &PgTarget) -> Result<PathBuf> {
    let path = url_file(root, slug);
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| HomeError::WriteUrlFile {
            action,
            path,
            source,
        }
    };
    let dir = path.parent().unwrap_or(root);
    std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    let temp = dir.join(format!(".{URL_FILE}.{}.tmp", std::process::id()));
    std::fs::write(&temp, format!("{}\n", target.redacted())).map_err(io("write", &temp))?;
    std::fs::rename(&temp, &path).map_err(|source| {
        let _ = std::fs::remove_file(&temp);
        HomeError::WriteUrlFile {
            action: "rename into place",
            path: path.clone(),
            source,
        }
    })?;
    Ok(path)
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
        // The default board's files where the original keeps them.
        assert_eq!(
            workspace_dir(root, "default", "t_1"),
            Path::new("/r/kanban/workspaces/t_1")
        );
        assert_eq!(
            attachments_dir(root, "default", "t_1"),
            Path::new("/r/kanban/attachments/t_1")
        );
        assert_eq!(
            attachments_dir(root, "x", "t_1"),
            Path::new("/r/kanban/attachments/x/t_1")
        );
        for slug in ["default", "x"] {
            assert_eq!(
                root_of_workspaces_root(&workspaces_root(root, slug), slug).as_deref(),
                Some(root)
            );
        }
        assert_eq!(root_of_workspaces_root(Path::new("/r/ws"), "default"), None);
        assert_eq!(
            root_of_workspaces_root(&workspaces_root(root, "x"), "y"),
            None
        );
        assert_eq!(
            workspaces_root(root, "default"),
            Path::new("/r/kanban/workspaces")
        );
        assert_eq!(
            log_path(root, "default", "t_1"),
            Path::new("/r/kanban/logs/t_1.log")
        );
        // And the other places files may already be.
        assert_eq!(
            log_paths(root, "default", "t_1")[1],
            Path::new("/r/kanban/logs/default/t_1.log")
        );
        assert_eq!(
            log_paths(root, "x", "t_1")[1],
            Path::new("/r/kanban/boards/x/logs/t_1.log")
        );
        assert_eq!(
            workspace_dirs(root, "default", "t_1")[1],
            Path::new("/r/kanban/workspaces/default/t_1")
        );
        assert_eq!(
            workspace_dirs(root, "x", "t_1")[1],
            Path::new("/r/kanban/boards/x/workspaces/t_1")
        );
        assert_eq!(
            slug_of_db_path(root, Path::new("/r/kanban/boards/x/kanban.db")).as_deref(),
            Some("x")
        );
        assert_eq!(slug_of_db_path(root, Path::new("/elsewhere.db")), None);
    }

    #[test]
    fn files_in_either_place_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // Nothing yet: the new places.
        assert_eq!(
            find_log(root, "default", "t_1"),
            log_path(root, "default", "t_1")
        );
        assert_eq!(
            find_workspace(root, "default", "t_1"),
            workspace_dir(root, "default", "t_1")
        );
        // Only in the old place: found there.
        let old_log = log_paths(root, "default", "t_1")[1].clone();
        std::fs::create_dir_all(old_log.parent().unwrap()).unwrap();
        std::fs::write(&old_log, "[kanban-worker-exit] rc=0\n").unwrap();
        assert_eq!(find_log(root, "default", "t_1"), old_log);
        let old_ws = workspace_dirs(root, "x", "t_2")[1].clone();
        std::fs::create_dir_all(&old_ws).unwrap();
        assert_eq!(find_workspace(root, "x", "t_2"), old_ws);
        // In both: the log written last wins, the new workspace place wins.
        let new_log = log_path(root, "default", "t_1");
        std::fs::create_dir_all(new_log.parent().unwrap()).unwrap();
        std::fs::write(&new_log, "newer").unwrap();
        let later = std::fs::metadata(&old_log).unwrap().modified().unwrap()
            + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&new_log)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert_eq!(find_log(root, "default", "t_1"), new_log);
        std::fs::create_dir_all(workspace_dir(root, "x", "t_2")).unwrap();
        assert_eq!(
            find_workspace(root, "x", "t_2"),
            workspace_dir(root, "x", "t_2")
        );
    }

    #[test]
    fn a_new_board_may_not_look_like_a_task_id() {
        for bad in ["t_10aa94eb", "t_0"] {
            let err = validate_new_slug(bad).unwrap_err();
            assert!(err.to_string().contains("shaped like a task id"), "{err}");
        }
        for good in ["t_", "t_ops", "team", "t-10aa94eb"] {
            assert!(validate_new_slug(good).is_ok(), "{good}");
        }
        // An existing board of that shape still resolves.
        assert!(validate_slug("t_10aa94eb").is_ok());
    }

    #[test]
    fn a_relative_home_becomes_absolute_once() {
        let root = root_dir(Some(Path::new("rel/home"))).unwrap();
        assert!(root.is_absolute(), "{}", root.display());
        assert!(root.ends_with("rel/home"));
        assert_eq!(root, std::env::current_dir().unwrap().join("rel/home"));
        assert!(root_dir(Some(Path::new(""))).is_err());
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

    #[test]
    fn the_url_file_never_holds_a_password() {
        let dir = tempfile::tempdir().unwrap();
        let t = crate::db::target::PgTarget::parse(
            "postgres://u:Sekr1t@h/db",
            crate::db::target::UrlSource::Pinned,
        )
        .unwrap();
        let path = write_url_file(dir.path(), "ops", &t).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "postgres://u@h:5432/db\n");
        let back = read_url_file(dir.path(), "ops").unwrap().unwrap();
        assert!(back.redacted_eq(&t));
        std::fs::write(&path, "postgres://u:Sekr1t@h/db\n").unwrap();
        let err = read_url_file(dir.path(), "ops").unwrap_err();
        assert!(matches!(err, HomeError::PasswordInFile { .. }));
        assert!(!crate::error_chain(&err).contains("Sekr1t"));
        assert_eq!(read_url_file(dir.path(), "none").unwrap(), None);
    }
}
