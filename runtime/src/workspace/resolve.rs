//! Materialising a task's workspace at spawn: the scratch or `dir:` folder, or the linked git
//! worktree on the task's branch (the original's `resolve_workspace` and its worktree helpers).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::git::{self, GitError, Toplevel};
use super::spec::{self, Kind, SpecError};

/// The folder, inside a repository, that holds the worktrees anchored there.
pub const WORKTREES_DIR: &str = ".worktrees";

/// What [`resolve`] needs of the task and its board.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub task_id: &'a str,
    pub kind: Kind,
    /// The task's `workspace_path` (set at creation, or by a previous resolve).
    pub path: Option<&'a Path>,
    /// The task's `branch_name`.
    pub branch: Option<&'a str>,
    /// The base of a new branch; `None`: the repository's `HEAD`.
    pub base: Option<&'a str>,
    /// Where a scratch workspace goes (`<board workspaces root>/<id>`).
    pub scratch_dir: &'a Path,
    /// The board's default workdir (anchors a worktree with no path).
    pub default_workdir: Option<&'a Path>,
}

/// A materialised workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub path: PathBuf,
    /// The branch checked out there (`Some` for a worktree).
    pub branch: Option<String>,
}

/// A workspace that cannot be materialised.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(
        "task {task} is a worktree task without a path and its board has no default workdir: \
         set the board's default workdir to a git repository, or give the task an absolute \
         worktree path"
    )]
    NoDefaultWorkdir { task: String },
    #[error(
        "{} is not an absolute path (a relative path would resolve against the dispatcher's \
         working directory)",
        path.display()
    )]
    NotAbsolute { path: PathBuf },
    #[error("{} is not inside a git repository", path.display())]
    NotARepo { path: PathBuf },
    #[error("{} exists and is not a directory", path.display())]
    NotADirectory { path: PathBuf },
    #[error(
        "the repository {} has no commits yet: commit once before creating worktree tasks on it",
        repo.display()
    )]
    NoCommits { repo: PathBuf },
    #[error(
        "branch {branch} is already checked out in the worktree {}: a branch is checked out in \
         one worktree at a time; use another branch or switch that worktree away from it",
        at.display()
    )]
    BranchCheckedOut { branch: String, at: PathBuf },
    #[error("the base revision {base} is not a commit in the repository {}", repo.display())]
    UnknownBase { base: String, repo: PathBuf },
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("cannot {action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A board's default workdir: absolute, an existing directory, inside a git work tree. Returns
/// the canonical directory.
pub fn check_default_workdir(dir: &Path) -> Result<PathBuf, ResolveError> {
    if !dir.is_absolute() {
        return Err(ResolveError::NotAbsolute {
            path: dir.to_owned(),
        });
    }
    let canonical = existing_dir(dir)?;
    match git::toplevel(&canonical)? {
        Toplevel::Root(_) => Ok(canonical),
        Toplevel::NotARepo => Err(ResolveError::NotARepo {
            path: dir.to_owned(),
        }),
    }
}

/// Materialises the workspace `req` describes, idempotently: a retry with the same request, or
/// with the path and branch of the previous [`Resolved`], returns the same path.
pub fn resolve(req: &Request) -> Result<Resolved, ResolveError> {
    match req.kind {
        Kind::Scratch => {
            let path = req.path.unwrap_or(req.scratch_dir);
            make_dir(path).map(|path| Resolved { path, branch: None })
        }
        Kind::Dir => {
            let path = req.path.ok_or(SpecError::DirWithoutPath)?;
            make_dir(path).map(|path| Resolved { path, branch: None })
        }
        Kind::Worktree => resolve_worktree(req),
    }
}

/// Creates `path` (absolute) and its parents; an existing non-directory is refused.
fn make_dir(path: &Path) -> Result<PathBuf, ResolveError> {
    if !path.is_absolute() {
        return Err(ResolveError::NotAbsolute {
            path: path.to_owned(),
        });
    }
    if let Ok(meta) = std::fs::metadata(path)
        && !meta.is_dir()
    {
        return Err(ResolveError::NotADirectory {
            path: path.to_owned(),
        });
    }
    std::fs::create_dir_all(path).map_err(|source| ResolveError::Io {
        action: "create the workspace directory",
        path: path.to_owned(),
        source,
    })?;
    Ok(path.to_owned())
}

/// `dir` canonical, when it is an existing directory.
fn existing_dir(dir: &Path) -> Result<PathBuf, ResolveError> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(ResolveError::NotADirectory {
                path: dir.to_owned(),
            });
        }
        Err(source) => {
            return Err(ResolveError::Io {
                action: "open the directory",
                path: dir.to_owned(),
                source,
            });
        }
    }
    dir.canonicalize().map_err(|source| ResolveError::Io {
        action: "resolve",
        path: dir.to_owned(),
        source,
    })
}

fn resolve_worktree(req: &Request) -> Result<Resolved, ResolveError> {
    let branch = match req.branch.map(str::trim) {
        Some(b) if !b.is_empty() => b.to_owned(),
        _ => spec::branch_default(req.task_id),
    };
    spec::validate_branch(&branch)?;
    if let Some(base) = req.base {
        spec::validate_base(base)?;
    }
    let Some(requested) = req.path else {
        let anchor = req
            .default_workdir
            .ok_or_else(|| ResolveError::NoDefaultWorkdir {
                task: req.task_id.to_owned(),
            })?;
        let repo = repo_of_dir(anchor)?;
        return anchored(&repo, req, &branch);
    };
    if !requested.is_absolute() {
        return Err(ResolveError::NotAbsolute {
            path: requested.to_owned(),
        });
    }
    match std::fs::metadata(requested) {
        Ok(meta) if !meta.is_dir() => {
            return Err(ResolveError::NotADirectory {
                path: requested.to_owned(),
            });
        }
        Ok(_) => {
            let dir = existing_dir(requested)?;
            if let Some(resolved) = existing_checkout(&dir, req, &branch)? {
                return Ok(resolved);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(ResolveError::Io {
                action: "inspect",
                path: requested.to_owned(),
                source,
            });
        }
    }
    // A path that does not exist yet, or an existing directory that is not a checkout's root:
    // a new worktree there, in the repository around its nearest existing ancestor.
    let target = spec::canonical_lenient(requested);
    let repo = repo_around(&target)?;
    ensure_worktree(&repo, &target, req, &branch)
}

/// What an existing directory `dir` (canonical) means for the request: the root of a linked
/// worktree (reused on our branch, else our own anchored worktree), or the root of a repository
/// (anchors `<repo>/.worktrees/<id>`); `None` for anything else.
fn existing_checkout(
    dir: &Path,
    req: &Request,
    branch: &str,
) -> Result<Option<Resolved>, ResolveError> {
    let Toplevel::Root(top) = git::toplevel(dir)? else {
        return Ok(None);
    };
    if top != dir {
        return Ok(None);
    }
    let git_dir = git::rev_parse_dir(dir, "--git-dir")?;
    let common = git::rev_parse_dir(dir, "--git-common-dir")?;
    if git_dir == common {
        // The main checkout's root: the task's own worktree inside it.
        return anchored(dir, req, branch).map(Some);
    }
    let current = git::current_branch(dir)?;
    if current.as_deref() == Some(branch) {
        return Ok(Some(Resolved {
            path: dir.to_owned(),
            branch: current,
        }));
    }
    // Another branch is checked out there (a sibling's worktree, inherited by a decomposed
    // child): never share it, use this task's own worktree in the same repository.
    let main = main_worktree(dir)?;
    let own = own_worktree_path(&main, req.task_id);
    if own == dir {
        // The task's own worktree, switched to another branch by its agent: still its own.
        return Ok(Some(Resolved {
            path: dir.to_owned(),
            branch: current.or_else(|| Some(branch.to_owned())),
        }));
    }
    anchored(&main, req, branch).map(Some)
}

/// The root of the repository containing the existing directory `anchor`.
fn repo_of_dir(anchor: &Path) -> Result<PathBuf, ResolveError> {
    if !anchor.is_absolute() {
        return Err(ResolveError::NotAbsolute {
            path: anchor.to_owned(),
        });
    }
    let dir = existing_dir(anchor)?;
    match git::toplevel(&dir)? {
        Toplevel::Root(root) => Ok(root),
        Toplevel::NotARepo => Err(ResolveError::NotARepo {
            path: anchor.to_owned(),
        }),
    }
}

/// The repository around the nearest existing ancestor of `target`.
fn repo_around(target: &Path) -> Result<PathBuf, ResolveError> {
    let mut dir = target.parent();
    while let Some(d) = dir {
        if d.is_dir() {
            return match git::toplevel(d)? {
                Toplevel::Root(root) => Ok(root),
                Toplevel::NotARepo => Err(ResolveError::NotARepo {
                    path: target.to_owned(),
                }),
            };
        }
        dir = d.parent();
    }
    Err(ResolveError::NotARepo {
        path: target.to_owned(),
    })
}

/// The main worktree of the repository `dir` belongs to (the first entry git lists; for a bare
/// repository, the repository itself).
fn main_worktree(dir: &Path) -> Result<PathBuf, ResolveError> {
    let entries = git::worktrees(dir)?;
    match entries.into_iter().next() {
        Some(e) => Ok(e.path.canonicalize().unwrap_or(e.path)),
        None => Err(ResolveError::NotARepo {
            path: dir.to_owned(),
        }),
    }
}

fn own_worktree_path(repo: &Path, task_id: &str) -> PathBuf {
    repo.join(WORKTREES_DIR).join(task_id)
}

/// `<repo>/.worktrees/<task id>` on `branch`.
fn anchored(repo: &Path, req: &Request, branch: &str) -> Result<Resolved, ResolveError> {
    let target = own_worktree_path(repo, req.task_id);
    ensure_worktree(repo, &target, req, branch)
}

/// `target` (canonical as far as it exists) as a linked worktree of `repo` on `branch`: reused
/// when it already is one, else added.
fn ensure_worktree(
    repo: &Path,
    target: &Path,
    req: &Request,
    branch: &str,
) -> Result<Resolved, ResolveError> {
    let entries = git::worktrees(repo)?;
    let same = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_owned()) == target;
    if let Some(entry) = entries.iter().find(|e| same(&e.path)) {
        if target.is_dir() {
            if entry.main {
                // The main checkout is never a task's worktree.
                return anchored(target, req, branch);
            }
            return Ok(Resolved {
                path: target.to_owned(),
                branch: entry.branch.clone().or_else(|| Some(branch.to_owned())),
            });
        }
        // Registered but its folder is gone: drop git's stale record before adding it again.
        git::out(repo, &["worktree", "prune"])?;
    }
    if let Some(other) = entries
        .iter()
        .find(|e| e.branch.as_deref() == Some(branch) && !same(&e.path))
    {
        return Err(ResolveError::BranchCheckedOut {
            branch: branch.to_owned(),
            at: other.path.clone(),
        });
    }
    let mut args: Vec<String> = vec!["worktree".into(), "add".into()];
    let target_arg = target.to_string_lossy().into_owned();
    if git::branch_exists(repo, branch)? {
        args.extend([target_arg, branch.to_owned()]);
    } else {
        let base = req.base.unwrap_or("HEAD");
        if !git::commit_exists(repo, base)? {
            return Err(match req.base {
                None => ResolveError::NoCommits {
                    repo: repo.to_owned(),
                },
                Some(b) => ResolveError::UnknownBase {
                    base: b.to_owned(),
                    repo: repo.to_owned(),
                },
            });
        }
        args.extend(["-b".into(), branch.to_owned(), target_arg, base.to_owned()]);
    }
    if target.parent() == Some(repo.join(WORKTREES_DIR).as_path()) {
        ensure_exclude(repo)?;
    }
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|source| ResolveError::Io {
            action: "create",
            path: parent.to_owned(),
            source,
        })?;
    }
    git::out(repo, &args)?;
    Ok(Resolved {
        path: target.to_owned(),
        branch: Some(branch.to_owned()),
    })
}

/// Adds `.worktrees/` to the repository's `info/exclude` (in its common git dir) when absent, so
/// the anchored worktrees never show up as untracked in the main checkout.
fn ensure_exclude(repo: &Path) -> Result<(), ResolveError> {
    let common = git::rev_parse_dir(repo, "--git-common-dir")?;
    let info = common.join("info");
    let exclude = info.join("exclude");
    let line = format!("/{WORKTREES_DIR}/");
    let current = match std::fs::read_to_string(&exclude) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(ResolveError::Io {
                action: "read",
                path: exclude,
                source,
            });
        }
    };
    let present = current.lines().any(|l| {
        let l = l.trim();
        l == line || l == &line[1..] || l == format!("/{WORKTREES_DIR}") || l == WORKTREES_DIR
    });
    if present {
        return Ok(());
    }
    let io = |action, path: &Path| {
        let path = path.to_owned();
        move |source| ResolveError::Io {
            action,
            path,
            source,
        }
    };
    std::fs::create_dir_all(&info).map_err(io("create", &info))?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&exclude)
        .map_err(io("open", &exclude))?;
    let sep = if current.is_empty() || current.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    writeln!(file, "{sep}{line}").map_err(io("write", &exclude))?;
    Ok(())
}
