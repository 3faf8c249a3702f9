//! Running git: every call is `git -C <dir> …` through [`crate::identity::command`], with
//! `.output()` (never a shell, never the process's working directory), and the few questions the
//! workspace engine asks of a repository.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::identity;

/// Running git failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// No `git` executable on `PATH`.
    #[error(
        "git is not installed (no `git` executable on PATH): install git to use worktree \
         workspaces and repository default workdirs"
    )]
    Missing,
    /// git ran and exited unsuccessfully.
    #[error("`git {args}` failed: {stderr}")]
    Failed { args: String, stderr: String },
    /// git could not be started, or its output could not be read.
    #[error("cannot run git")]
    Io(#[source] std::io::Error),
}

/// Runs `git -C dir args…` and returns its output whatever the exit status; only a git that cannot
/// be started is an error.
pub(crate) fn run<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Result<Output, GitError> {
    let mut cmd = identity::command("git");
    cmd.arg("-C").arg(dir).args(args);
    // Never prompt for credentials; never let a caller's GIT_DIR/GIT_WORK_TREE redirect `-C`.
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_COMMON_DIR");
    cmd.output().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => GitError::Missing,
        _ => GitError::Io(e),
    })
}

/// Runs `git -C dir args…` and returns its stdout (trailing newline removed); a non-zero exit is
/// [`GitError::Failed`].
pub(crate) fn out<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Result<String, GitError> {
    let output = run(dir, args)?;
    if output.status.success() {
        Ok(stdout(&output))
    } else {
        Err(failed(dir, args, &output))
    }
}

/// The [`GitError::Failed`] for an unsuccessful `output`.
pub(crate) fn failed<S: AsRef<OsStr>>(dir: &Path, args: &[S], output: &Output) -> GitError {
    let mut text = format!("-C {}", dir.display());
    for a in args {
        text.push(' ');
        text.push_str(&a.as_ref().to_string_lossy());
    }
    let mut stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    if stderr.is_empty() {
        stderr = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    }
    if stderr.is_empty() {
        stderr = format!("exited with {}", output.status);
    }
    GitError::Failed { args: text, stderr }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout)
        .trim_end_matches(['\n', '\r'])
        .to_owned()
}

/// What `git rev-parse --show-toplevel` says of `dir`.
pub(crate) enum Toplevel {
    /// The root of the work tree `dir` is in (canonical).
    Root(PathBuf),
    /// `dir` is not inside a git work tree.
    NotARepo,
}

/// The work tree root containing `dir` (an existing directory).
pub(crate) fn toplevel(dir: &Path) -> Result<Toplevel, GitError> {
    let args = ["rev-parse", "--show-toplevel"];
    let output = run(dir, &args)?;
    if output.status.success() {
        let root = PathBuf::from(stdout(&output));
        return Ok(Toplevel::Root(root.canonicalize().unwrap_or(root)));
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("not a git repository") || stderr.contains("must be run in a work tree") {
        Ok(Toplevel::NotARepo)
    } else {
        Err(failed(dir, &args, &output))
    }
}

/// `git rev-parse <flag>` (`--git-dir`, `--git-common-dir`) of `dir`, absolute and canonical.
pub(crate) fn rev_parse_dir(dir: &Path, flag: &str) -> Result<PathBuf, GitError> {
    let raw = PathBuf::from(out(dir, &["rev-parse", flag])?);
    let abs = if raw.is_absolute() {
        raw
    } else {
        dir.join(raw)
    };
    Ok(abs.canonicalize().unwrap_or(abs))
}

/// Whether `refs/heads/<branch>` exists in the repository of `dir`.
pub(crate) fn branch_exists(dir: &Path, branch: &str) -> Result<bool, GitError> {
    let reference = format!("refs/heads/{branch}");
    let args = ["show-ref", "--verify", "--quiet", reference.as_str()];
    let output = run(dir, &args)?;
    match output.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(failed(dir, &args, &output)),
    }
}

/// Whether `rev` names a commit in the repository of `dir`.
pub(crate) fn commit_exists(dir: &Path, rev: &str) -> Result<bool, GitError> {
    let spec = format!("{rev}^{{commit}}");
    let args = [
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        spec.as_str(),
    ];
    let output = run(dir, &args)?;
    match output.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(failed(dir, &args, &output)),
    }
}

/// The branch checked out in the work tree at `dir` (`None`: detached HEAD).
pub(crate) fn current_branch(dir: &Path) -> Result<Option<String>, GitError> {
    let name = out(dir, &["branch", "--show-current"])?;
    Ok((!name.is_empty()).then_some(name))
}

/// One entry of `git worktree list --porcelain`.
#[derive(Debug, Clone)]
pub(crate) struct WorktreeEntry {
    /// As git prints it (git records canonical paths).
    pub path: PathBuf,
    /// `refs/heads/` stripped; `None` when detached or bare.
    pub branch: Option<String>,
    pub bare: bool,
    /// The first entry: the main worktree (or the bare repository).
    pub main: bool,
}

/// Every worktree of the repository of `dir`, the main one first.
pub(crate) fn worktrees(dir: &Path) -> Result<Vec<WorktreeEntry>, GitError> {
    let text = out(dir, &["worktree", "list", "--porcelain"])?;
    Ok(parse_worktree_list(&text))
}

/// Parses `git worktree list --porcelain` (records separated by blank lines).
pub(crate) fn parse_worktree_list(text: &str) -> Vec<WorktreeEntry> {
    let mut entries: Vec<WorktreeEntry> = Vec::new();
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("worktree ") {
            let main = entries.is_empty();
            entries.push(WorktreeEntry {
                path: PathBuf::from(path),
                branch: None,
                bare: false,
                main,
            });
        } else if let Some(entry) = entries.last_mut() {
            if let Some(reference) = line.strip_prefix("branch ") {
                let name = reference.strip_prefix("refs/heads/").unwrap_or(reference);
                entry.branch = Some(name.to_owned());
            } else if line == "bare" {
                entry.bare = true;
            }
        }
    }
    entries
}

/// `git status --porcelain` of the work tree at `dir` (untracked files included).
pub(crate) fn status_porcelain(dir: &Path) -> Result<String, GitError> {
    out(dir, &["status", "--porcelain", "--untracked-files=normal"])
}

/// The commits reachable from `rev` that are on no remote-tracking ref, or `None` when the
/// repository has no remote-tracking ref at all (nothing can be proven pushed).
pub(crate) fn unpushed(dir: &Path, rev: &str) -> Result<Option<Vec<String>>, GitError> {
    let remotes = out(
        dir,
        &["for-each-ref", "--format=%(refname)", "refs/remotes"],
    )?;
    if remotes.trim().is_empty() {
        return Ok(None);
    }
    let list = out(dir, &["rev-list", rev, "--not", "--remotes", "--"])?;
    Ok(Some(
        list.lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worktree_list_porcelain_is_parsed() {
        let text = "worktree /r\nHEAD abc\nbranch refs/heads/main\n\nworktree /r/.worktrees/t1\n\
                    HEAD def\nbranch refs/heads/wt/t1\n\nworktree /x\nHEAD 123\ndetached\n\n";
        let e = parse_worktree_list(text);
        assert_eq!(e.len(), 3);
        assert!(e[0].main && !e[1].main);
        assert_eq!(e[0].branch.as_deref(), Some("main"));
        assert_eq!(e[1].path, PathBuf::from("/r/.worktrees/t1"));
        assert_eq!(e[1].branch.as_deref(), Some("wt/t1"));
        assert_eq!(e[2].branch, None);
    }
}
