//! The workspace of a claimed run, materialised by the dispatcher before its worker starts
//! (README "Working on a repository"): the task's columns and its board's default workdir go to
//! [`crate::workspace::resolve`], which makes the scratch or `dir:` folder or the git worktree;
//! the tick records the result on the task (`workspace_resolved`) and starts the worker there.
//!
//! A retry resolves the same columns again and gets the same place back (the worktree is reused).
//! A workspace that cannot be made for a reason only an operator can fix — no default workdir, a
//! path outside any repository, a repository without commits, a branch a person has checked out,
//! git missing — blocks the task `needs_input` ([`PrepareError::needs_input`]) instead of
//! failing the run again every tick; a passing fault (a git lock file, a full disk, a file where
//! the folder goes) is a counted spawn failure, retried under the breaker.

use std::path::{Path, PathBuf};

use crate::board::Candidate;
use crate::workspace::{GitError, Kind, Request, ResolveError};

/// A materialised workspace, to record and run in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prepared {
    pub kind: Kind,
    pub path: PathBuf,
    pub branch: Option<String>,
}

/// Why a claimed run has no workspace.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrepareError {
    #[error("task {task} has an unknown workspace kind `{kind}`: use scratch, dir or worktree")]
    UnknownKind { task: String, kind: String },
    #[error(
        "{source}; run `kanban boards set-default-workdir {slug} DIR` with DIR inside the board's git repository, then `kanban unblock {task}`"
    )]
    NoDefaultWorkdir {
        slug: String,
        task: String,
        source: ResolveError,
    },
    #[error("the workspace of task {task} cannot be made: {source}")]
    Resolve { task: String, source: ResolveError },
    #[error(transparent)]
    Home(#[from] crate::home::HomeError),
}

impl PrepareError {
    /// True when retrying cannot help: the task is blocked `needs_input`.
    pub(crate) fn needs_input(&self) -> bool {
        match self {
            PrepareError::UnknownKind { .. } | PrepareError::NoDefaultWorkdir { .. } => true,
            // A board.json that cannot be read is the operator's to fix, too.
            PrepareError::Home(_) => true,
            // A file or a failing disk where the folder goes is the host's fault of the moment,
            // as the original counts it: retried under the breaker.
            PrepareError::Resolve { source, .. } => !matches!(
                source,
                ResolveError::Io { .. }
                    | ResolveError::NotADirectory { .. }
                    | ResolveError::Git(GitError::Failed { .. } | GitError::Io(_))
            ),
        }
    }
}

/// Materialises the workspace of claimed task `c` on board `slug` of home `root`.
pub(crate) fn prepare(root: &Path, slug: &str, c: &Candidate) -> Result<Prepared, PrepareError> {
    let kind = Kind::from_column(&c.workspace_kind).ok_or_else(|| PrepareError::UnknownKind {
        task: c.id.clone(),
        kind: c.workspace_kind.clone(),
    })?;
    let scratch_dir = crate::home::find_workspace(root, slug, &c.id);
    let default_workdir = match kind {
        Kind::Worktree => crate::home::meta::read(root, slug)?.default_workdir,
        Kind::Scratch | Kind::Dir => None,
    };
    let path = c.workspace_path.as_deref().map(Path::new);
    let request = Request {
        task_id: &c.id,
        kind,
        path,
        branch: c.branch_name.as_deref(),
        base: c.workspace_base.as_deref(),
        scratch_dir: &scratch_dir,
        default_workdir: default_workdir.as_deref(),
    };
    match crate::workspace::resolve(&request) {
        Ok(resolved) => Ok(Prepared {
            kind,
            path: resolved.path,
            branch: resolved.branch,
        }),
        Err(source @ ResolveError::NoDefaultWorkdir { .. }) => {
            Err(PrepareError::NoDefaultWorkdir {
                slug: slug.to_owned(),
                task: c.id.clone(),
                source,
            })
        }
        Err(source) => Err(PrepareError::Resolve {
            task: c.id.clone(),
            source,
        }),
    }
}
