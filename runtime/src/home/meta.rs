//! A board's settings file, `board.json` in its folder (`<root>/kanban/boards/<slug>/board.json`,
//! `…/boards/default/board.json` for the default board), where the original keeps them: today
//! the default workdir, the repository a worktree task with no path of its own is a worktree of
//! (`kanban boards create --default-workdir`, `kanban boards set-default-workdir`), the display
//! name (`kanban boards rename`; the slug never changes) and the original's `archived` flag
//! (`kanban boards list` marks such a board).
//!
//! The file is kept per home, beside the board, for SQLite and PostgreSQL boards alike: a
//! workdir is a path on this machine, so two hosts sharing a PostgreSQL board each name their own
//! checkout. Keys this build does not know (the original's name, icon, colour…) are kept as
//! written. A missing file is no settings; a file that is not a JSON object is an error naming
//! it, never read as "no default workdir".

use std::path::{Path, PathBuf};

use super::{HomeError, Result, boards_dir, validate_slug};

/// The settings file's name.
pub const META_FILE: &str = "board.json";

/// Where board `slug`'s settings are.
pub(crate) fn meta_path(root: &Path, slug: &str) -> PathBuf {
    boards_dir(root).join(slug).join(META_FILE)
}

/// The settings kanban reads from `board.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoardMeta {
    /// Absolute; `None` when unset (or empty, as the original writes an unset one).
    pub default_workdir: Option<PathBuf>,
    /// The display name (`boards rename`); `None` when unset or empty.
    pub name: Option<String>,
    /// The original marks a board it archived with `"archived": true`.
    pub archived: bool,
}

/// The name a board without one is shown by, as the original derives it from the slug
/// (`atm10-server` → `Atm10 Server`).
pub fn default_name(slug: &str) -> String {
    let words: Vec<String> = slug
        .split(['-', '_'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|c| c.to_uppercase().chain(chars).collect())
                .unwrap_or_default()
        })
        .collect();
    if words.is_empty() {
        slug.to_owned()
    } else {
        words.join(" ")
    }
}

pub(super) fn read_object(path: &Path) -> Result<serde_json::Map<String, serde_json::Value>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(serde_json::Map::new()),
        Err(source) => {
            return Err(HomeError::Io {
                action: "read",
                path: path.to_owned(),
                source,
            });
        }
    };
    match serde_json::from_str(&text) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err(HomeError::BoardMeta {
            path: path.to_owned(),
            message: "not an object".to_owned(),
        }),
        Err(e) => Err(HomeError::BoardMeta {
            path: path.to_owned(),
            message: e.to_string(),
        }),
    }
}

/// Writes `map` as the settings file at `path`, atomically: written beside it and renamed over
/// it, so a reader sees the old file or the new, whole.
pub(super) fn write_object(
    path: &Path,
    map: serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let io = |action, source| HomeError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    let folder = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder).map_err(|e| io("create the folder of", e))?;
    let mut text = serde_json::to_string_pretty(&serde_json::Value::Object(map))
        .map_err(|e| io("encode", std::io::Error::other(e)))?;
    text.push('\n');
    let temp = folder.join(format!(".{META_FILE}.{}.tmp", std::process::id()));
    std::fs::write(&temp, text).map_err(|e| io("write", e))?;
    std::fs::rename(&temp, path).map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        io("replace", e)
    })
}

/// Board `slug`'s settings.
pub fn read(root: &Path, slug: &str) -> Result<BoardMeta> {
    validate_slug(slug)?;
    let path = meta_path(root, slug);
    let map = read_object(&path)?;
    let default_workdir = match map.get("default_workdir") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) if s.trim().is_empty() => None,
        Some(serde_json::Value::String(s)) => Some(PathBuf::from(s.trim())),
        Some(_) => {
            return Err(HomeError::BoardMeta {
                path,
                message: "default_workdir is not a string".to_owned(),
            });
        }
    };
    let name = match map.get("name") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) if s.trim().is_empty() => None,
        Some(serde_json::Value::String(s)) => Some(s.trim().to_owned()),
        Some(_) => {
            return Err(HomeError::BoardMeta {
                path,
                message: "name is not a string".to_owned(),
            });
        }
    };
    // The original writes a boolean; anything else is read as it would read it (truthiness of
    // `true`) only when it is `true` itself.
    let archived = matches!(map.get("archived"), Some(serde_json::Value::Bool(true)));
    Ok(BoardMeta {
        default_workdir,
        name,
        archived,
    })
}

pub use super::error::{BadName, MAX_NAME_CHARS};

/// `name` trimmed, or why it cannot be a display name.
pub fn check_name(name: &str) -> std::result::Result<String, BadName> {
    let name = name.trim();
    if name.is_empty() {
        return Err(BadName::Empty);
    }
    if name.chars().any(char::is_control) {
        return Err(BadName::Control);
    }
    let n = name.chars().count();
    if n > MAX_NAME_CHARS {
        return Err(BadName::TooLong(n));
    }
    Ok(name.to_owned())
}

/// Sets board `slug`'s display name (checked by [`check_name`]; the caller checks the board
/// exists) and returns it as stored; every other key of the file is kept.
pub fn set_name(root: &Path, slug: &str, name: &str) -> Result<String> {
    validate_slug(slug)?;
    let name = check_name(name).map_err(|source| HomeError::BadName {
        slug: slug.to_owned(),
        source,
    })?;
    let path = meta_path(root, slug);
    let mut map = read_object(&path)?;
    map.insert("name".to_owned(), serde_json::Value::String(name.clone()));
    write_object(&path, map)?;
    Ok(name)
}

/// Sets board `slug`'s default workdir after checking it ([`crate::workspace::check_default_workdir`]:
/// absolute, a directory inside a git work tree); returns the directory as stored (canonical).
/// The file is replaced atomically and every other key is kept.
pub fn set_default_workdir(root: &Path, slug: &str, dir: &Path) -> Result<PathBuf> {
    validate_slug(slug)?;
    let checked = crate::workspace::check_default_workdir(dir).map_err(|source| {
        HomeError::DefaultWorkdir {
            slug: slug.to_owned(),
            dir: dir.to_owned(),
            source,
        }
    })?;
    let path = meta_path(root, slug);
    let mut map = read_object(&path)?;
    map.insert(
        "default_workdir".to_owned(),
        serde_json::Value::String(checked.to_string_lossy().into_owned()),
    );
    write_object(&path, map)?;
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_no_settings_and_a_malformed_one_is_an_error_naming_it() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(read(root.path(), "default").unwrap(), BoardMeta::default());
        let path = meta_path(root.path(), "default");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "[1, 2]").unwrap();
        let err = read(root.path(), "default").unwrap_err().to_string();
        assert!(
            err.contains("board.json") && err.contains("not an object"),
            "{err}"
        );
        std::fs::write(&path, "{\"default_workdir\": 3}").unwrap();
        let err = read(root.path(), "default").unwrap_err().to_string();
        assert!(err.contains("default_workdir is not a string"), "{err}");
        std::fs::write(&path, "{\"default_workdir\": \"\", \"name\": \" \"}").unwrap();
        assert_eq!(read(root.path(), "default").unwrap(), BoardMeta::default());
        std::fs::write(&path, "{\"name\": 3}").unwrap();
        let err = read(root.path(), "default").unwrap_err().to_string();
        assert!(err.contains("name is not a string"), "{err}");
    }

    #[test]
    fn names_are_checked_and_kept_with_the_other_keys() {
        assert_eq!(default_name("atm10-server"), "Atm10 Server");
        assert_eq!(default_name("a_b"), "A B");
        assert_eq!(check_name("  x "), Ok("x".to_owned()));
        assert_eq!(check_name(" "), Err(BadName::Empty));
        assert_eq!(check_name("a\nb"), Err(BadName::Control));
        assert_eq!(check_name(&"é".repeat(101)), Err(BadName::TooLong(101)));
        let root = tempfile::tempdir().unwrap();
        let path = meta_path(root.path(), "b");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{\"icon\": \"*\", \"archived\": true}").unwrap();
        assert_eq!(
            set_name(root.path(), "b", " Ops board ").unwrap(),
            "Ops board"
        );
        let meta = read(root.path(), "b").unwrap();
        assert_eq!(meta.name.as_deref(), Some("Ops board"));
        assert!(meta.archived);
        assert!(std::fs::read_to_string(&path).unwrap().contains("\"icon\""));
        assert!(set_name(root.path(), "b", "").is_err());
        assert_eq!(
            read(root.path(), "b").unwrap().name.as_deref(),
            Some("Ops board")
        );
    }
}
