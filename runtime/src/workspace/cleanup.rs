//! Removing a finished task's workspace without losing work (the original's `_cleanup_workspace`,
//! `_cleanup_worktree_workspace` and `_warn_and_event_discarded_scratch_content`): every doubt
//! keeps the workspace, and the outcome says why, for the caller to record as an event.

use std::path::{Path, PathBuf};

use super::git::{self, GitError, Toplevel};
use super::spec::{self, Kind};

/// What cleanup did, or would do with `dry_run`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleanup {
    /// The workspace is gone (a scratch entry that was a symlink or a file: the entry itself, never
    /// what it points at).
    Removed {
        path: PathBuf,
        /// The `wt/*` branch deleted with the worktree.
        branch_deleted: Option<String>,
        /// Why a `wt/*` branch that would have been deleted was kept (its tip on no
        /// remote-tracking ref, or `git branch -D` failed).
        branch_kept: Option<String>,
    },
    /// Kept because it may hold work, or because it could not be proven not to: `reason` is one of
    /// `"dirty"`, `"unpushed"`, `"not_a_linked_worktree"`, `"main_checkout"`, `"git_failed"`,
    /// `"inspect_failed"`, `"remove_failed"`; `detail` says more.
    Preserved {
        path: PathBuf,
        reason: &'static str,
        detail: String,
    },
    /// Never removed: `"dir"` (a `dir:` workspace) or `"outside_managed_root"` (a scratch path not
    /// strictly inside a managed workspaces root, as resolved and as spelled).
    Kept { path: PathBuf, reason: &'static str },
    /// Nothing there (already removed, or never made).
    Missing,
}

/// What a scratch workspace still held when it was removed (measured first): regular files,
/// recursively, symlinks neither followed nor counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discarded {
    pub path: PathBuf,
    pub total_bytes: u64,
    pub file_count: usize,
    /// The ten largest files: path relative to the workspace, size in bytes.
    pub sample: Vec<(String, u64)>,
}

/// Leftovers below this many bytes in total are not reported (the original's threshold).
pub const DISCARDED_THRESHOLD: u64 = 1024;

/// The outcome and, for a scratch directory holding at least [`DISCARDED_THRESHOLD`] bytes, what
/// was (or would be) discarded with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanupReport {
    pub outcome: Cleanup,
    pub discarded: Option<Discarded>,
}

/// Removes what may be removed of a finished task's workspace; see [`Cleanup`] for the outcomes.
/// `managed_roots` are the workspaces roots scratch paths must be strictly inside. With `dry_run`
/// it decides and reports the same, and changes nothing.
pub fn cleanup(
    kind: Kind,
    path: &Path,
    branch: Option<&str>,
    managed_roots: &[PathBuf],
    dry_run: bool,
) -> CleanupReport {
    match kind {
        Kind::Dir => CleanupReport {
            outcome: Cleanup::Kept {
                path: path.to_owned(),
                reason: "dir",
            },
            discarded: None,
        },
        Kind::Scratch => scratch(path, managed_roots, dry_run),
        Kind::Worktree => CleanupReport {
            outcome: worktree(path, branch, dry_run),
            discarded: None,
        },
    }
}

fn report(outcome: Cleanup) -> CleanupReport {
    CleanupReport {
        outcome,
        discarded: None,
    }
}

fn io_detail(e: &std::io::Error) -> String {
    e.to_string()
}

fn git_detail(e: &GitError) -> String {
    match e {
        GitError::Io(source) => format!("{e}: {source}"),
        _ => e.to_string(),
    }
}

fn scratch(path: &Path, roots: &[PathBuf], dry_run: bool) -> CleanupReport {
    let outside = || {
        report(Cleanup::Kept {
            path: path.to_owned(),
            reason: "outside_managed_root",
        })
    };
    let Some(lex) = spec::lexical(path) else {
        return outside();
    };
    let meta = match std::fs::symlink_metadata(&lex) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return report(Cleanup::Missing),
        Err(e) => {
            return report(Cleanup::Preserved {
                path: path.to_owned(),
                reason: "inspect_failed",
                detail: io_detail(&e),
            });
        }
    };
    // The entry itself, resolved: its parent's real path and its own name (a final symlink is the
    // entry, not its target).
    let (Some(parent), Some(name)) = (lex.parent(), lex.file_name()) else {
        return outside();
    };
    let Ok(resolved) = parent.canonicalize().map(|p| p.join(name)) else {
        return outside();
    };
    let managed = roots.iter().any(|root| {
        let (Some(root_lex), Ok(root_real)) = (spec::lexical(root), root.canonicalize()) else {
            return false;
        };
        strictly_inside(&lex, &root_lex) && strictly_inside(&resolved, &root_real)
    });
    if !managed {
        return outside();
    }
    let removed = Cleanup::Removed {
        path: path.to_owned(),
        branch_deleted: None,
        branch_kept: None,
    };
    if !meta.is_dir() {
        // A symlink (never followed) or a file in place of the folder: only the entry goes.
        if !dry_run && let Err(e) = std::fs::remove_file(&lex) {
            return report(Cleanup::Preserved {
                path: path.to_owned(),
                reason: "remove_failed",
                detail: io_detail(&e),
            });
        }
        return report(removed);
    }
    let discarded = measure(&lex).filter(|d| d.total_bytes >= DISCARDED_THRESHOLD);
    if !dry_run && let Err(e) = std::fs::remove_dir_all(&lex) {
        return CleanupReport {
            outcome: Cleanup::Preserved {
                path: path.to_owned(),
                reason: "remove_failed",
                detail: io_detail(&e),
            },
            discarded,
        };
    }
    CleanupReport {
        outcome: removed,
        discarded,
    }
}

/// `path` is below `root`, and not `root` itself (both already in the same form).
fn strictly_inside(path: &Path, root: &Path) -> bool {
    path != root && path.starts_with(root)
}

/// The regular files under `dir` (not following symlinks); unreadable folders are skipped.
fn measure(dir: &Path) -> Option<Discarded> {
    let mut files: Vec<(String, u64)> = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(d) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.is_file() {
                let rel = entry.path();
                let rel = rel.strip_prefix(dir).unwrap_or(&rel);
                files.push((rel.to_string_lossy().into_owned(), meta.len()));
            }
        }
    }
    if files.is_empty() {
        return None;
    }
    let total_bytes = files.iter().map(|(_, n)| n).sum();
    let file_count = files.len();
    files.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    files.truncate(10);
    Some(Discarded {
        path: dir.to_owned(),
        total_bytes,
        file_count,
        sample: files,
    })
}

fn worktree(path: &Path, branch: Option<&str>, dry_run: bool) -> Cleanup {
    let preserved = |reason: &'static str, detail: String| Cleanup::Preserved {
        path: path.to_owned(),
        reason,
        detail,
    };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Cleanup::Missing,
        Err(e) => return preserved("inspect_failed", io_detail(&e)),
        Ok(_) if !path.is_dir() => {
            return preserved("not_a_linked_worktree", "it is not a directory".into());
        }
        Ok(_) => {}
    }
    let dir = match path.canonicalize() {
        Ok(dir) => dir,
        Err(e) => return preserved("inspect_failed", io_detail(&e)),
    };
    match git::toplevel(&dir) {
        Ok(Toplevel::Root(top)) if top == dir => {}
        Ok(Toplevel::Root(top)) => {
            return preserved(
                "not_a_linked_worktree",
                format!("it is inside the work tree {}, not its root", top.display()),
            );
        }
        Ok(Toplevel::NotARepo) => {
            return preserved("not_a_linked_worktree", "it is not a git work tree".into());
        }
        Err(e) => return preserved("git_failed", git_detail(&e)),
    }
    let dirs = git::rev_parse_dir(&dir, "--git-dir")
        .and_then(|g| Ok((g, git::rev_parse_dir(&dir, "--git-common-dir")?)));
    let (git_dir, common) = match dirs {
        Ok(dirs) => dirs,
        Err(e) => return preserved("git_failed", git_detail(&e)),
    };
    if git_dir == common {
        return preserved(
            "main_checkout",
            "it is a repository's main checkout, never removed".into(),
        );
    }
    let entries = match git::worktrees(&dir) {
        Ok(entries) => entries,
        Err(e) => return preserved("git_failed", git_detail(&e)),
    };
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());
    let Some(main) = entries.first().map(|e| canonical(&e.path)) else {
        return preserved("git_failed", "git lists no worktree".into());
    };
    if main == dir {
        return preserved(
            "main_checkout",
            "it is a repository's main checkout, never removed".into(),
        );
    }
    if !entries.iter().any(|e| !e.main && canonical(&e.path) == dir) {
        return preserved(
            "not_a_linked_worktree",
            "git does not list it as a linked worktree of its repository".into(),
        );
    }
    match git::status_porcelain(&dir) {
        Ok(status) if !status.trim().is_empty() => {
            let changed = status.lines().count();
            return preserved(
                "dirty",
                format!("{changed} uncommitted or untracked path(s) (git status --porcelain)"),
            );
        }
        Ok(_) => {}
        Err(e) => return preserved("git_failed", git_detail(&e)),
    }
    match git::unpushed(&dir, "HEAD") {
        Ok(None) => {
            return preserved(
                "unpushed",
                "the repository has no remote-tracking ref: no commit is known to be pushed".into(),
            );
        }
        Ok(Some(commits)) if !commits.is_empty() => {
            return preserved(
                "unpushed",
                format!(
                    "{} commit(s) on HEAD are on no remote-tracking ref",
                    commits.len()
                ),
            );
        }
        Ok(Some(_)) => {}
        Err(e) => return preserved("git_failed", git_detail(&e)),
    }
    // The branch to delete with it: the task's recorded branch, else the one checked out there;
    // only an automatic `wt/*` one, and only when its own tip is pushed too.
    let recorded = branch.map(str::trim).filter(|b| !b.is_empty());
    let branch = match recorded {
        Some(b) => Some(b.to_owned()),
        None => git::current_branch(&dir).ok().flatten(),
    };
    let mut plan: (Option<String>, Option<String>) = (None, None);
    if let Some(b) = branch.filter(|b| b.starts_with("wt/")) {
        plan = match branch_deletable(&main, &b) {
            Ok(Deletable::Yes) => (Some(b), None),
            Ok(Deletable::Absent) => (None, None),
            Ok(Deletable::No(why)) => (None, Some(format!("branch {b} kept: {why}"))),
            Err(e) => (None, Some(format!("branch {b} kept: {}", git_detail(&e)))),
        };
    }
    if dry_run {
        return Cleanup::Removed {
            path: path.to_owned(),
            branch_deleted: plan.0,
            branch_kept: plan.1,
        };
    }
    // No --force: git re-checks the tree itself, so a change since our check keeps it.
    let dir_arg = dir.to_string_lossy().into_owned();
    if let Err(e) = git::out(&main, &["worktree", "remove", dir_arg.as_str()]) {
        return preserved("git_failed", git_detail(&e));
    }
    let (mut deleted, mut kept) = plan;
    if let Some(b) = deleted.take() {
        match git::out(&main, &["branch", "-D", "--", b.as_str()]) {
            Ok(_) => deleted = Some(b),
            Err(e) => kept = Some(format!("branch {b} kept: {}", git_detail(&e))),
        }
    }
    Cleanup::Removed {
        path: path.to_owned(),
        branch_deleted: deleted,
        branch_kept: kept,
    }
}

enum Deletable {
    /// It exists and its tip is on a remote-tracking ref.
    Yes,
    /// There is no such branch.
    Absent,
    /// Why not.
    No(String),
}

fn branch_deletable(repo: &Path, branch: &str) -> Result<Deletable, GitError> {
    if !git::branch_exists(repo, branch)? {
        return Ok(Deletable::Absent);
    }
    let reference = format!("refs/heads/{branch}");
    Ok(match git::unpushed(repo, &reference)? {
        None => Deletable::No("the repository has no remote-tracking ref".into()),
        Some(c) if !c.is_empty() => Deletable::No(format!(
            "{} of its commit(s) are on no remote-tracking ref",
            c.len()
        )),
        Some(_) => Deletable::Yes,
    })
}
