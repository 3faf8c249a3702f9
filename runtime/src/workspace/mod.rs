//! Task workspaces: where a task's agent runs, and what is removed when the task is done (issue
//! 26; the original's `hermes_cli/kanban_db_workspace.py`).
//!
//! * `spec` — the kinds ([`Kind`]: `scratch`, `dir`, `worktree`, the original's column values),
//!   the `--workspace` value ([`parse_flag`]), branch names ([`validate_branch`]) and the
//!   creation-time checks that create nothing ([`check_path`]).
//! * [`resolve()`] — materialises a workspace at spawn: the scratch or `dir:`
//!   folder, or a linked git worktree on the task's own branch (`wt/<task id>` unless named),
//!   anchored at `<repo>/.worktrees/<task id>`; idempotent, so a retry reuses it. It adds
//!   `/.worktrees/` to the repository's `info/exclude` so the main checkout never shows them as
//!   untracked.
//! * [`cleanup()`] — removes a finished task's workspace only when no work can
//!   be lost: a scratch folder only strictly inside a managed root (as resolved and as spelled,
//!   a symlink never followed), a worktree only when clean and pushed (`git worktree remove`
//!   without `--force`), a `dir:` never; the outcome says what was kept and why.
//!
//! Git runs only as `git -C <dir> …` through [`crate::identity::command`] (never a shell, never a
//! change of the process's working directory). This module is a leaf the board and the
//! dispatcher call: it never imports `board`, `dispatch`, `home` or `cli`, reads no
//! configuration or environment, and records nothing — the caller turns outcomes into events.

mod cleanup;
mod git;
mod resolve;
mod spec;

pub use cleanup::{Cleanup, CleanupReport, DISCARDED_THRESHOLD, Discarded, cleanup};
pub use git::GitError;
pub use resolve::{Request, ResolveError, Resolved, WORKTREES_DIR, check_default_workdir, resolve};
pub use spec::{
    Kind, SpecError, branch_default, check_path, parse_flag, validate_base, validate_branch,
};
