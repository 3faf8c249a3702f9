//! Worker identity: the only module that reads `HERMES_KANBAN_*` from the process environment.
//!
//! The dispatcher gives a worker process its identity through environment variables
//! ([`KANBAN_ENV_KEYS`]). Inside that process other code runs that is *not* the worker — a cron
//! job fired in-process, a delegated child, a tool run for someone else. Ownership is therefore a
//! property of the **execution context**, not of the process:
//!
//! * [`context`] keeps a thread-local ownership state. [`non_dispatcher_owned_context`] and
//!   [`delegated_child_context`] return `#[must_use]`, `!Send` guards that lower authority for
//!   their scope and restore the previous state on drop; scopes nest, and nothing can raise
//!   authority back inside a lowered scope (there is no "enter owned" operation at all).
//! * [`gate`] is the one place a [`WorkerIdentity`] is made: it reads the environment at call time
//!   (a verdict is never memoized) and answers `None` outside an owned context. Everything else
//!   receives a `&WorkerIdentity` from the gate (through `#[kanban_identity_gated]`) or nothing.
//! * A process carrying [`DELEGATED_CHILD_MARKER`] is never owned and [`fence`] refuses it board
//!   mutations.
//! * [`command`] is the one builder of child `Command`s: in a non-owned context it removes every
//!   identity key and sets the marker. Only `dispatch::default_spawn` grants identity.
//! * [`spawn`] starts a thread that carries the caller's ownership context.
//!
//! This module never mutates the process environment and never caches what it reads.

pub mod context;
pub mod fence;
#[doc(hidden)]
pub mod macro_support;
pub mod settings;
#[cfg(test)]
pub(crate) mod testenv;
#[cfg(test)]
mod tests;

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;

pub use kanban_macros::kanban_identity_gated;

pub use context::{
    Carried as CapturedContext, DelegatedChildGuard, Installed as InstalledContext, NonOwnedGuard,
    NonOwnedToken, capture as capture_context, delegated_child_context,
    enter_non_dispatcher_owned_context, exit_non_dispatcher_owned_context,
    non_dispatcher_owned_context,
};

/// Every identity / location key the dispatcher injects into a worker.
pub const KANBAN_ENV_KEYS: &[&str] = &[
    "HERMES_KANBAN_TASK",
    "HERMES_KANBAN_RUN_ID",
    "HERMES_KANBAN_CLAIM_LOCK",
    "HERMES_KANBAN_WORKSPACE",
    "HERMES_KANBAN_WORKSPACES_ROOT",
    "HERMES_KANBAN_BOARD",
    "HERMES_KANBAN_DB",
];

/// Worker-behaviour knobs the dispatcher injects that are not identity.
pub const BEHAVIOR_ONLY_ENV_KEYS: &[&str] = &[
    "HERMES_KANBAN_BRANCH",
    "HERMES_KANBAN_GOAL_MODE",
    "HERMES_KANBAN_GOAL_MAX_TURNS",
];

/// Set on every child process started from a non-owned context; a process that carries it is
/// never a dispatcher-owned worker and may not mutate its board.
pub const DELEGATED_CHILD_MARKER: &str = "HERMES_DELEGATED_CHILD_CONTEXT";

/// What a dispatcher-owned worker knows about itself. Made only by [`gate`]: the private field
/// makes a struct literal impossible outside this module.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkerIdentity {
    #[serde(skip)]
    sealed: Sealed,
    pub task: String,
    pub run_id: Option<i64>,
    pub claim_lock: Option<String>,
    pub workspace: Option<PathBuf>,
    pub workspaces_root: Option<PathBuf>,
    pub board: Option<String>,
    pub db: Option<PathBuf>,
    /// `HERMES_KANBAN_BRANCH` (behaviour only).
    pub branch: Option<String>,
    /// `HERMES_KANBAN_GOAL_MODE` (behaviour only).
    pub goal_mode: bool,
    /// `HERMES_KANBAN_GOAL_MAX_TURNS` (behaviour only).
    pub goal_max_turns: Option<u32>,
}

/// Seals [`WorkerIdentity`] against construction outside this module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sealed;

fn env_str(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// True when the process carries the delegated-child marker.
pub fn process_is_delegated_child() -> bool {
    std::env::var_os(DELEGATED_CHILD_MARKER).is_some_and(|v| !v.is_empty())
}

/// True unless the current execution context was lowered (a non-owned or delegated-child scope on
/// this thread, or a thread started from one) or the process is a delegated child. True by
/// default: a plain process is its own principal.
pub fn is_dispatcher_owned_worker_context() -> bool {
    context::scope_is_owned() && !process_is_delegated_child()
}

/// True inside a [`delegated_child_context`] scope or in a process carrying the marker.
pub fn is_delegated_child() -> bool {
    context::in_delegated_scope() || process_is_delegated_child()
}

/// The one identity gate: the worker identity, read from the environment now, if and only if the
/// current context is dispatcher-owned and `HERMES_KANBAN_TASK` is set (non-empty). A run id
/// that is not an integer reads as `None` (lifecycle calls then carry no run fence; the
/// dispatcher always injects an integer).
pub fn gate() -> Option<WorkerIdentity> {
    if !is_dispatcher_owned_worker_context() {
        return None;
    }
    let task = env_str("HERMES_KANBAN_TASK")?.trim().to_owned();
    if task.is_empty() {
        return None;
    }
    Some(WorkerIdentity {
        sealed: Sealed,
        task,
        run_id: env_str("HERMES_KANBAN_RUN_ID").and_then(|v| v.parse().ok()),
        claim_lock: env_str("HERMES_KANBAN_CLAIM_LOCK"),
        workspace: env_str("HERMES_KANBAN_WORKSPACE").map(PathBuf::from),
        workspaces_root: env_str("HERMES_KANBAN_WORKSPACES_ROOT").map(PathBuf::from),
        board: env_str("HERMES_KANBAN_BOARD"),
        db: env_str("HERMES_KANBAN_DB").map(PathBuf::from),
        branch: env_str("HERMES_KANBAN_BRANCH"),
        goal_mode: env_str("HERMES_KANBAN_GOAL_MODE")
            .is_some_and(|v| matches!(v.as_str(), "1" | "true" | "yes" | "on")),
        goal_max_turns: env_str("HERMES_KANBAN_GOAL_MAX_TURNS").and_then(|v| v.parse().ok()),
    })
}

/// The task id of the owned worker, if this context is one.
pub fn owned_kanban_task() -> Option<String> {
    gate().map(|id| id.task)
}

/// The sanctioned builder of every child process the runtime starts. In a non-owned context the
/// child loses every `HERMES_KANBAN_*` identity and behaviour key and gains the delegated-child
/// marker, so it can neither act as the worker nor mutate the worker's board.
#[allow(clippy::disallowed_methods)] // the sanctioned builder
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    if !is_dispatcher_owned_worker_context() {
        for key in KANBAN_ENV_KEYS.iter().chain(BEHAVIOR_ONLY_ENV_KEYS) {
            cmd.env_remove(key);
        }
        cmd.env(DELEGATED_CHILD_MARKER, "1");
    }
    cmd
}

/// The identity-relevant environment a child built by [`command`] in the current context would
/// receive: every `HERMES_KANBAN_*` key and the marker, after the builder's removals and sets.
pub fn child_env_preview() -> std::collections::BTreeMap<String, String> {
    let cmd = command("true");
    let mut env: std::collections::BTreeMap<String, String> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .filter(|(k, _)| k.starts_with("HERMES_KANBAN_") || k == DELEGATED_CHILD_MARKER)
        .collect();
    for (k, v) in cmd.get_envs() {
        let key = k.to_string_lossy().into_owned();
        match v {
            Some(v) => {
                env.insert(key, v.to_string_lossy().into_owned());
            }
            None => {
                env.remove(&key);
            }
        }
    }
    env
}

/// Starts a named thread that runs `f` in the caller's ownership context: a thread started from a
/// non-owned scope is non-owned for its whole life.
#[allow(clippy::disallowed_methods)] // the sanctioned spawner
///
/// Threads come from [`crate::sync::thread`], so under `--cfg loom` this is a loom thread and the
/// models can check the carrying itself.
pub fn spawn<F, T>(name: &str, f: F) -> std::io::Result<crate::sync::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let carried = context::capture();
    crate::sync::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let _scope = carried.install();
            f()
        })
}

/// What `kanban identity --json` prints: what the current context believes about itself.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IdentityReport {
    /// [`is_dispatcher_owned_worker_context`]: true unless the context was lowered or the process
    /// carries the marker (so `true` in a plain shell, where `task` is `null`).
    pub owned: bool,
    /// The owned worker's task: non-null only when the gate hands out an identity.
    pub task: Option<String>,
    /// The owned worker's run id, under the same condition.
    pub run_id: Option<i64>,
    /// [`is_delegated_child`]: a delegated-child scope or the marker in the process.
    pub delegated_child: bool,
    /// Every gate's verdict ([`crate::gates::snapshot`]).
    pub gates: serde_json::Map<String, serde_json::Value>,
}

/// The report for the current context; `gates` is filled by [`crate::gates::snapshot`].
pub fn report() -> IdentityReport {
    let identity = gate();
    IdentityReport {
        owned: is_dispatcher_owned_worker_context(),
        task: identity.as_ref().map(|i| i.task.clone()),
        run_id: identity.as_ref().and_then(|i| i.run_id),
        delegated_child: is_delegated_child(),
        gates: crate::gates::snapshot(),
    }
}
