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
//! * [`command`] is the one builder of child processes. It returns a [`ChildCommand`] (not a
//!   `std::process::Command`) that decides what the child inherits when it spawns: outside an
//!   owned context every identity-bearing key ([`is_identity_key`]) is removed and the marker set.
//!   Only `dispatch::default_spawn` grants identity, through [`grant::worker_command`].
//! * [`spawn`] starts a thread that carries the caller's ownership context; [`Job`] carries the
//!   submitter's context into a pool. Fail closed: only the main thread and threads `spawn`
//!   started from an owned context can be owned (see [`context`]).
//! * [`settings`] is every other module's reader of the environment (clippy bans `std::env::var`
//!   and friends outside this folder); no `Setting` is an identity key.
//!
//! This module never mutates the process environment and never caches what it reads.

pub mod child;
pub mod context;
pub mod fence;
pub mod grant;
#[doc(hidden)]
pub mod macro_support;
pub mod settings;
#[cfg(test)]
pub(crate) mod testenv;
#[cfg(test)]
mod tests;

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

pub use child::ChildCommand;

pub use kanban_macros::kanban_identity_gated;

pub use context::{
    Carried as CapturedContext, DelegatedChildGuard, Installed as InstalledContext, Job,
    NonOwnedGuard, NonOwnedToken, capture as capture_context, delegated_child_context,
    enter_non_dispatcher_owned_context, exit_non_dispatcher_owned_context,
    non_dispatcher_owned_context,
};

/// Every identity / location key the dispatcher injects into a worker: its task, run, claim,
/// workspace and board, and the Hermes session keys that say whom the process acts for (its
/// profile, the session source, the tenant). A child started outside an owned context loses all
/// of them.
pub const KANBAN_ENV_KEYS: &[&str] = &[
    "HERMES_KANBAN_TASK",
    "HERMES_KANBAN_RUN_ID",
    "HERMES_KANBAN_CLAIM_LOCK",
    "HERMES_KANBAN_WORKSPACE",
    "HERMES_KANBAN_WORKSPACES_ROOT",
    "HERMES_KANBAN_BOARD",
    "HERMES_KANBAN_DB",
    "HERMES_PROFILE",
    "HERMES_SESSION_SOURCE",
    "HERMES_TENANT",
];

/// Worker-behaviour knobs the dispatcher injects that are not identity.
pub const BEHAVIOR_ONLY_ENV_KEYS: &[&str] = &[
    "HERMES_KANBAN_BRANCH",
    "HERMES_KANBAN_GOAL_MODE",
    "HERMES_KANBAN_GOAL_MAX_TURNS",
];

/// Keys a child may inherit in any context, and that the dispatcher may set for a worker without
/// granting anything: the third class of the drift guard (beside identity and behaviour-only).
/// Every `HERMES_KANBAN_*` key that is in none of the three lists counts as identity (removed from
/// a non-owned child), so a new key fails closed until it is classified.
pub const INHERITABLE_ENV_KEYS: &[&str] = &[
    "PATH",
    "HOME",
    "HERMES_HOME",
    "HERMES_KANBAN_HOME",
    "HERMES_KANBAN_BUSY_TIMEOUT_MS",
    "HERMES_KANBAN_CLAIM_TTL_SECONDS",
    "HERMES_KANBAN_CRASH_GRACE_SECONDS",
    "HERMES_KANBAN_RATE_LIMIT_COOLDOWN_SECONDS",
    "HERMES_KANBAN_STOP_NUDGE",
    // The agent CLIs' own command time limits a preset sets (max runtime − 30 s).
    "TERMINAL_TIMEOUT",
    "BASH_DEFAULT_TIMEOUT_MS",
    "BASH_MAX_TIMEOUT_MS",
];

/// The prefix of every kanban key; such a key is identity-bearing unless it is listed in
/// [`INHERITABLE_ENV_KEYS`].
pub const KANBAN_PREFIX: &str = "HERMES_KANBAN_";

/// The prefix of the Hermes session's routing keys (`HERMES_SESSION_CHAT_ID`, …): they say which
/// conversation a process answers, so every one is identity-bearing. A worker gets only the
/// `HERMES_SESSION_SOURCE=kanban` the dispatcher sets; one it would inherit from the shell that
/// started the dispatcher is stale (the original strips them too).
pub const SESSION_PREFIX: &str = "HERMES_SESSION_";

/// True for a key a child must not inherit outside an owned context: one of
/// [`KANBAN_ENV_KEYS`] or [`BEHAVIOR_ONLY_ENV_KEYS`], any other `HERMES_KANBAN_*` key not listed
/// in [`INHERITABLE_ENV_KEYS`] (unclassified keys fail closed), or a `HERMES_SESSION_*` key.
pub fn is_identity_key(key: &OsStr) -> bool {
    let Some(key) = key.to_str() else {
        return false;
    };
    KANBAN_ENV_KEYS.contains(&key)
        || BEHAVIOR_ONLY_ENV_KEYS.contains(&key)
        || (key.starts_with(KANBAN_PREFIX) && !INHERITABLE_ENV_KEYS.contains(&key))
        || key.starts_with(SESSION_PREFIX)
}

/// Every identity-bearing key to remove from a non-owned child: the listed ones and any other
/// identity key present in the process environment now.
#[allow(clippy::disallowed_methods)] // identity scans the environment for identity keys
fn process_identity_keys() -> Vec<OsString> {
    let mut keys: Vec<OsString> = KANBAN_ENV_KEYS
        .iter()
        .chain(BEHAVIOR_ONLY_ENV_KEYS)
        .map(OsString::from)
        .collect();
    for (key, _) in std::env::vars_os() {
        if is_identity_key(&key) && !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

/// Set on every child process started from a non-owned context; a process that carries it is
/// never a dispatcher-owned worker and may not mutate its board.
pub const DELEGATED_CHILD_MARKER: &str = "HERMES_DELEGATED_CHILD_CONTEXT";

/// The worker identity the gate lends for one call. Made only by [`gate`] (the private field makes
/// a struct literal impossible elsewhere); `!Send`, `!Sync` and not `Clone`, so it cannot leave the
/// thread whose context the gate judged nor be duplicated into a cache: a gated function receives
/// it as `&WorkerIdentity` for the duration of its body. Its facts read through
/// [`std::ops::Deref`] as a [`WorkerBinding`]; code that needs them beyond the call (the worker's
/// heartbeat, a completion) copies that plain data with [`WorkerIdentity::binding`], which no
/// gated function accepts in place of an identity.
///
/// It cannot be sent to another thread:
/// ```compile_fail
/// fn needs_send<T: Send>() {}
/// needs_send::<kanban_runtime::identity::WorkerIdentity>();
/// ```
/// nor shared with one:
/// ```compile_fail
/// fn needs_sync<T: Sync>() {}
/// needs_sync::<kanban_runtime::identity::WorkerIdentity>();
/// ```
/// nor cloned:
/// ```compile_fail
/// fn needs_clone<T: Clone>() {}
/// needs_clone::<kanban_runtime::identity::WorkerIdentity>();
/// ```
/// while its plain-data binding can (the control case):
/// ```
/// fn needs_all<T: Send + Sync + Clone>() {}
/// needs_all::<kanban_runtime::identity::WorkerBinding>();
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct WorkerIdentity {
    sealed: Sealed,
    facts: WorkerBinding,
}

impl std::ops::Deref for WorkerIdentity {
    type Target = WorkerBinding;

    fn deref(&self) -> &WorkerBinding {
        &self.facts
    }
}

impl WorkerIdentity {
    /// A copy of the facts (task, run, claim lock, locations, behaviour knobs) as plain data.
    pub fn binding(&self) -> WorkerBinding {
        self.facts.clone()
    }
}

/// What a dispatcher-owned worker knows about itself, as plain data: a snapshot taken from a
/// [`WorkerIdentity`] inside a gated call. It is not an identity (no gated function takes it) and
/// is made only here.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct WorkerBinding {
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
    /// `HERMES_PROFILE`: the profile the dispatcher started this process under (behaviour only:
    /// the submitter's choice of owner, which proves the card's profile itself).
    pub profile: Option<String>,
}

/// Seals [`WorkerIdentity`] against construction outside this module and pins it to its thread.
#[derive(Debug, PartialEq, Eq)]
struct Sealed(std::marker::PhantomData<*const ()>);

#[allow(clippy::disallowed_methods)] // identity reads the environment (the gate's source)
fn env_str(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// True when the process carries the delegated-child marker.
#[allow(clippy::disallowed_methods)] // identity reads the environment (the marker)
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
        sealed: Sealed(std::marker::PhantomData),
        facts: WorkerBinding {
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
            profile: env_str("HERMES_PROFILE"),
        },
    })
}

/// The task id of the owned worker, if this context is one.
pub fn owned_kanban_task() -> Option<String> {
    gate().map(|id| id.facts.task)
}

/// The sanctioned builder of every child process the runtime starts (see [`child`]): when the
/// child spawns outside an owned context it loses every identity-bearing key and gains the
/// delegated-child marker, so it can neither act as the worker nor mutate the worker's board.
pub fn command(program: impl AsRef<OsStr>) -> ChildCommand {
    ChildCommand::new(program.as_ref())
}

/// The identity-relevant environment a child built by [`command`] and spawned in the current
/// context would receive: every identity-bearing key and the marker, after the removals and sets.
#[allow(clippy::disallowed_methods)] // identity reads the environment (a preview of it)
pub fn child_env_preview() -> std::collections::BTreeMap<String, String> {
    let changes = command("true").planned_env().unwrap_or_default();
    let mut env: std::collections::BTreeMap<String, String> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .filter(|(k, _)| is_identity_key(OsStr::new(k)) || k == DELEGATED_CHILD_MARKER)
        .collect();
    for (k, v) in changes {
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
            context::sanction_current_thread();
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
    /// Every gate's verdict, as the caller passed it in.
    pub gates: serde_json::Map<String, serde_json::Value>,
}

/// The report for the current context, carrying `gates`, every gate's verdict. The gates consume
/// identity, so identity does not ask them: the gates module passes its own snapshot in.
pub fn report(gates: serde_json::Map<String, serde_json::Value>) -> IdentityReport {
    let identity = gate();
    IdentityReport {
        owned: is_dispatcher_owned_worker_context(),
        task: identity.as_ref().map(|i| i.task.clone()),
        run_id: identity.as_ref().and_then(|i| i.run_id),
        delegated_child: is_delegated_child(),
        gates,
    }
}
