//! What a task's workspace is, as written at creation: the kind, the `--workspace` value, the
//! branch name and the checks that touch the filesystem without creating anything.

use std::path::{Component, Path, PathBuf};

/// The task's `workspace_kind` column values, as the original spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `<board root>/workspaces/<id>/`, removed when the task is done.
    Scratch,
    /// A directory the user names; never removed.
    Dir,
    /// A linked git worktree on the task's own branch; removed only when it holds no work.
    Worktree,
}

impl Kind {
    /// The column value: `"scratch"`, `"dir"` or `"worktree"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Scratch => "scratch",
            Kind::Dir => "dir",
            Kind::Worktree => "worktree",
        }
    }

    /// The kind a column value names (exact spelling), if any.
    pub fn from_column(s: &str) -> Option<Kind> {
        match s {
            "scratch" => Some(Kind::Scratch),
            "dir" => Some(Kind::Dir),
            "worktree" => Some(Kind::Worktree),
            _ => None,
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A workspace specification (kind, path, branch, base) that is refused before anything is made.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("unknown workspace `{value}`: use scratch, dir:PATH, worktree or worktree:PATH")]
    UnknownKind { value: String },
    #[error("a dir workspace needs a path: dir:/absolute/path")]
    DirWithoutPath,
    #[error("the {kind} workspace has an empty path: put an absolute path after the colon")]
    EmptyPath { kind: Kind },
    #[error(
        "workspace path `{}` is relative: relative paths would resolve against the \
         dispatcher's working directory; give an absolute path{}",
        path.display(),
        if path.starts_with("~") { " (`~` is not expanded)" } else { "" }
    )]
    RelativePath { path: PathBuf },
    #[error(
        "a scratch workspace takes no path (it is always the board's workspaces/<task id>): use \
         dir:PATH for a directory of your own"
    )]
    ScratchWithPath,
    #[error("invalid branch name `{name}`: {why}")]
    InvalidBranch { name: String, why: &'static str },
    #[error("invalid base revision `{base}`: {why}")]
    InvalidBase { base: String, why: &'static str },
    #[error("workspace path {} exists and is not a directory", path.display())]
    NotADirectory { path: PathBuf },
    #[error("cannot inspect workspace path {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `scratch|dir:PATH|worktree|worktree:PATH` → (kind, path). Surrounding whitespace is trimmed
/// (as the original does); the path must be absolute. Does not touch the filesystem.
pub fn parse_flag(value: &str) -> Result<(Kind, Option<PathBuf>), SpecError> {
    let value = value.trim();
    let (name, path) = match value.split_once(':') {
        Some((name, path)) => (name, Some(path.trim())),
        None => (value, None),
    };
    let Some(kind) = Kind::from_column(name) else {
        return Err(SpecError::UnknownKind {
            value: value.to_owned(),
        });
    };
    match (kind, path) {
        (Kind::Scratch, None) | (Kind::Worktree, None) => Ok((kind, None)),
        (Kind::Scratch, Some(_)) => Err(SpecError::ScratchWithPath),
        (Kind::Dir, None) => Err(SpecError::DirWithoutPath),
        (_, Some("")) => Err(SpecError::EmptyPath { kind }),
        (_, Some(path)) => {
            let path = PathBuf::from(path);
            if !path.is_absolute() {
                return Err(SpecError::RelativePath { path });
            }
            Ok((kind, Some(path)))
        }
    }
}

/// The branch a worktree task gets when none is named: `wt/<task id>`.
pub fn branch_default(task_id: &str) -> String {
    format!("wt/{task_id}")
}

/// Refuses a branch name git would refuse (`git check-ref-format --branch`, checked here without
/// running git), and any with whitespace or a leading `-`.
pub fn validate_branch(name: &str) -> Result<(), SpecError> {
    let refuse = |why| {
        Err(SpecError::InvalidBranch {
            name: name.to_owned(),
            why,
        })
    };
    if name.is_empty() {
        return refuse("it is empty");
    }
    if name.chars().any(char::is_whitespace) {
        return refuse("it contains whitespace");
    }
    if name.chars().any(char::is_control) {
        return refuse("it contains a control character");
    }
    if name.starts_with('-') {
        return refuse("it starts with `-`");
    }
    if name == "@" {
        return refuse("`@` alone is not a branch name");
    }
    if name == "HEAD" {
        return refuse("`HEAD` is not a branch name");
    }
    if name.contains("..") {
        return refuse("it contains `..`");
    }
    if name.contains("@{") {
        return refuse("it contains `@{`");
    }
    if let Some(c) = name.chars().find(|c| "~^:?*[\\".contains(*c)) {
        return match c {
            '~' => refuse("it contains `~`"),
            '^' => refuse("it contains `^`"),
            ':' => refuse("it contains `:`"),
            '?' => refuse("it contains `?`"),
            '*' => refuse("it contains `*`"),
            '[' => refuse("it contains `[`"),
            _ => refuse("it contains `\\`"),
        };
    }
    if name.ends_with('/') {
        return refuse("it ends with `/`");
    }
    if name.ends_with('.') {
        return refuse("it ends with `.`");
    }
    for component in name.split('/') {
        if component.is_empty() {
            return refuse("it has an empty component (`//` or a leading `/`)");
        }
        if component.starts_with('.') {
            return refuse("a component starts with `.`");
        }
        if component.ends_with(".lock") {
            return refuse("a component ends with `.lock`");
        }
    }
    Ok(())
}

/// Refuses a base revision that could be read as an option or is not one word.
pub(crate) fn validate_base(base: &str) -> Result<(), SpecError> {
    let refuse = |why| {
        Err(SpecError::InvalidBase {
            base: base.to_owned(),
            why,
        })
    };
    if base.is_empty() {
        return refuse("it is empty");
    }
    if base.starts_with('-') {
        return refuse("it starts with `-`");
    }
    if base.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return refuse("it contains whitespace or a control character");
    }
    Ok(())
}

/// Creation-time checks that look at the filesystem and create nothing: a `dir:` path that exists
/// and is not a directory, or a `worktree:` path that is an existing file, is refused; so is a
/// relative path. A path that does not exist yet is accepted (it is made at spawn).
pub fn check_path(kind: Kind, path: &Path) -> Result<(), SpecError> {
    if !path.is_absolute() {
        return Err(SpecError::RelativePath {
            path: path.to_owned(),
        });
    }
    if kind == Kind::Scratch {
        return Err(SpecError::ScratchWithPath);
    }
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(SpecError::NotADirectory {
            path: path.to_owned(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(SpecError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// `path` made absolute against nothing: `.` dropped and `..` collapsed lexically, symlinks not
/// resolved. `None` for a relative path.
pub(crate) fn lexical(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => out.push(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    Some(out)
}

/// `path` with its longest existing prefix canonicalised and the rest appended lexically.
pub(crate) fn canonical_lenient(path: &Path) -> PathBuf {
    let Some(path) = lexical(path) else {
        return path.to_owned();
    };
    let mut existing = path.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_collapses_without_resolving() {
        assert_eq!(
            lexical(Path::new("/a/./b/../c")),
            Some(PathBuf::from("/a/c"))
        );
        assert_eq!(lexical(Path::new("/../x")), Some(PathBuf::from("/x")));
        assert_eq!(lexical(Path::new("a/b")), None);
    }
}
