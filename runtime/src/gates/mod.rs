//! Every consumer of worker identity. Each gate is a `#[kanban_identity_gated]` function: it turns
//! the identity handed out by [`crate::identity::gate`] into behaviour, and outside a
//! dispatcher-owned worker context (a cron job fired in the worker, a delegated child, a thread
//! started from either, a process carrying the delegated-child marker) it returns its fallback, so
//! such code never sees, heartbeats, completes, blocks or comments as the worker's task.
//!
//! No gate caches its verdict: every call asks the gate afresh, which reads the environment at
//! that moment. Only facts of the machine that do not depend on identity (is this a container?)
//! may be cached, and they live outside any gated function.
//!
//! This module never reads the environment itself and never mutates it.

use std::sync::OnceLock;

use kanban_macros::kanban_identity_gated;

use crate::identity::{self, WorkerBinding, WorkerIdentity};

/// True when this context is a dispatcher-owned kanban worker with a task: the lifecycle tools
/// (show, complete, block, heartbeat) are offered to its agent.
#[kanban_identity_gated]
pub fn kanban_mode_enabled(_identity: &WorkerIdentity) -> bool {
    true
}

/// The task a lifecycle command acts on. An explicit id is always honoured, in every context;
/// without one, the owned worker's task, and `None` outside an owned context (a cron job must never
/// inherit the worker's task).
#[kanban_identity_gated(fallback = explicit.map(str::to_owned))]
pub fn default_task_id(identity: &WorkerIdentity, explicit: Option<&str>) -> Option<String> {
    Some(explicit.map_or_else(|| identity.task.clone(), str::to_owned))
}

/// Whether environment `name` applies to this context (skills are offered by environment).
/// `kanban` depends on the ownership context and is decided afresh on every call; the others
/// (`docker`/`container`, `s6`) are facts of the machine, cached for the life of the process.
/// Unknown names are `false`.
#[kanban_identity_gated(fallback = name != "kanban" && machine_environment(name))]
pub fn detect_environment(_identity: &WorkerIdentity, name: &str) -> bool {
    name == "kanban" || machine_environment(name)
}

/// Environments that do not depend on identity; each is probed once per process.
fn machine_environment(name: &str) -> bool {
    static CONTAINER: OnceLock<bool> = OnceLock::new();
    static S6: OnceLock<bool> = OnceLock::new();
    let exists = |p: &str| std::path::Path::new(p).exists();
    match name {
        "docker" | "container" => {
            *CONTAINER.get_or_init(|| exists("/.dockerenv") || exists("/run/.containerenv"))
        }
        "s6" => *S6.get_or_init(|| exists("/run/s6") || exists("/package/admin/s6-overlay")),
        _ => false,
    }
}

/// True when the kanban toolset must be force-added to the agent's tools: only for the
/// dispatcher-owned worker itself.
#[kanban_identity_gated]
pub fn is_dispatcher_owned_worker(_identity: &WorkerIdentity) -> bool {
    true
}

/// The workspaces root the dispatcher gave this worker (`HERMES_KANBAN_WORKSPACES_ROOT`): one of
/// the managed roots a scratch workspace may be removed from when the worker's agent runs
/// `kanban complete` (its kanban root may be spelled otherwise there); `None` outside an owned
/// context.
#[kanban_identity_gated(fallback = None)]
pub fn worker_workspaces_root(identity: &WorkerIdentity) -> Option<std::path::PathBuf> {
    identity.workspaces_root.clone()
}

/// The worker-protocol guidance added to an owned worker's prompt; empty elsewhere (a cron agent
/// or a delegated child must not be told it is the worker).
#[kanban_identity_gated]
pub fn worker_guidance(identity: &WorkerIdentity) -> String {
    guidance_for(&identity.task, identity.workspace.as_deref())
}

/// The worker-protocol guidance for the worker of `task` working in `workspace` (what
/// [`worker_guidance`] gives that worker; `kanban context` shows it to anyone).
pub fn guidance_for(task: &str, workspace: Option<&std::path::Path>) -> String {
    format!(
        "# Kanban task execution protocol\n\
         You are the kanban worker for task {task}. Start with `kanban show` to read the task, its \
         parents' results and the comments. Work in {workspace}. When the work is done run \
         `kanban complete --summary \"…\"`; if you cannot finish, run `kanban block --reason \
         \"…\"`. `kanban comment {task} --body \"…\"` records a note; `kanban heartbeat` extends \
         your lease during long steps. Fan work out with `kanban create`, never by acting on \
         another task: you may only complete, block or heartbeat your own.",
        workspace = workspace.map_or_else(
            || "the current directory".to_owned(),
            |w| w.display().to_string()
        ),
    )
}

/// Whether a turn that ended without complete/block gets a stop nudge: owned workers only, and
/// not when `HERMES_KANBAN_STOP_NUDGE` turns it off.
#[kanban_identity_gated]
pub fn stop_nudge_enabled(_identity: &WorkerIdentity) -> bool {
    identity::settings::flag(identity::settings::Setting::StopNudge).unwrap_or(true)
}

/// What the auto-heartbeat extends: the owned task, run and claim lock; `None` elsewhere (a cron
/// job or delegated child must never keep the worker's claim alive).
#[kanban_identity_gated]
pub fn auto_heartbeat_target(identity: &WorkerIdentity) -> Option<WorkerBinding> {
    Some(identity.binding())
}

/// The task whose new operator comments are injected into the running agent; `None` outside an
/// owned context (comments meant for the worker must not be consumed by a cron job).
#[kanban_identity_gated]
pub fn comment_injection_task(identity: &WorkerIdentity) -> Option<String> {
    Some(identity.task.clone())
}

/// The run id a lifecycle call on `task_id` passes, so that a superseded worker cannot close its
/// successor's run: the owned run when `task_id` is the owned task, else `None`.
#[kanban_identity_gated]
pub fn run_id_for(identity: &WorkerIdentity, task_id: &str) -> Option<i64> {
    if identity.task == task_id {
        identity.run_id
    } else {
        None
    }
}

/// The claim lock a heartbeat of `task_id` is fenced on: the owned claim lock when `task_id` is
/// the owned task, else `None`.
#[kanban_identity_gated]
pub fn claim_lock_for(identity: &WorkerIdentity, task_id: &str) -> Option<String> {
    identity
        .claim_lock
        .clone()
        .filter(|_| identity.task == task_id)
}

/// The owned worker's run id.
#[kanban_identity_gated]
pub fn owned_run_id(identity: &WorkerIdentity) -> Option<i64> {
    identity.run_id
}

/// The claim lock of the owned worker, for heartbeat fencing.
#[kanban_identity_gated]
pub fn owned_claim_lock(identity: &WorkerIdentity) -> Option<String> {
    identity.claim_lock.clone()
}

/// The full owned identity, for code that binds a worker to its claim.
#[kanban_identity_gated]
pub fn owned_identity(identity: &WorkerIdentity) -> Option<WorkerBinding> {
    Some(identity.binding())
}

/// A mutation refused because the owned worker may only mutate its own task.
#[derive(Debug, thiserror::Error)]
#[error(
    "refused: this worker is scoped to task {owned} and may not mutate task {target}; work on \
     {owned} only, and fan new work out with `kanban create`"
)]
pub struct NotOwner {
    pub owned: String,
    pub target: String,
}

/// Inside an owned worker only the owned task may be mutated; outside one (an operator's shell, a
/// cron job) the worker's ownership does not apply.
#[kanban_identity_gated(fallback = Ok(()))]
pub fn check_mutation(identity: &WorkerIdentity, task_id: &str) -> Result<(), NotOwner> {
    if identity.task == task_id {
        Ok(())
    } else {
        Err(NotOwner {
            owned: identity.task.clone(),
            target: task_id.to_owned(),
        })
    }
}

/// Why a lifecycle mutation (complete, block, heartbeat) of a task was refused.
#[derive(Debug, thiserror::Error)]
pub enum MutationRefused {
    #[error(transparent)]
    Fenced(#[from] identity::fence::Fenced),
    #[error(transparent)]
    NotOwner(#[from] NotOwner),
}

/// The full check before a lifecycle mutation of `task_id`: the delegated-child fence first (a
/// fenced process mutates nothing), then worker ownership.
pub fn authorize_mutation(task_id: &str) -> Result<(), MutationRefused> {
    identity::fence::check_board_mutation()?;
    check_mutation(task_id)?;
    Ok(())
}

/// What a lifecycle command (complete, block, heartbeat) acts on, once authorized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleTarget {
    /// The task: the explicit id, else the owned worker's task.
    pub task_id: String,
    /// The run the call is fenced on: the owned run when the task is the owned one, else `None`
    /// (an operator acting on any run).
    pub expected_run_id: Option<i64>,
    /// The owned worker's claim lock under the same condition, for heartbeat fencing.
    pub claim_lock: Option<String>,
}

/// Why a lifecycle command was not even attempted.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleRefused {
    #[error(
        "no task id: pass one (e.g. `kanban complete t_1a2b3c4d --summary …`), or run the \
         command as the dispatcher-owned worker, where it defaults to the worker's task"
    )]
    NoTask,
    #[error(transparent)]
    Fenced(#[from] identity::fence::Fenced),
    #[error(transparent)]
    NotOwner(#[from] NotOwner),
}

impl From<MutationRefused> for LifecycleRefused {
    fn from(refused: MutationRefused) -> Self {
        match refused {
            MutationRefused::Fenced(f) => LifecycleRefused::Fenced(f),
            MutationRefused::NotOwner(n) => LifecycleRefused::NotOwner(n),
        }
    }
}

/// Resolves and authorizes the target of a lifecycle command, in this order: the delegated-child
/// fence (a fenced process mutates nothing, explicit id or not), the task id
/// ([`default_task_id`]), worker ownership ([`check_mutation`]), then the run fence
/// ([`run_id_for`]) and claim lock.
pub fn lifecycle_target(explicit: Option<&str>) -> Result<LifecycleTarget, LifecycleRefused> {
    identity::fence::check_board_mutation()?;
    let task_id = default_task_id(explicit).ok_or(LifecycleRefused::NoTask)?;
    check_mutation(&task_id)?;
    let expected_run_id = run_id_for(&task_id);
    let claim_lock = claim_lock_for(&task_id);
    Ok(LifecycleTarget {
        task_id,
        expected_run_id,
        claim_lock,
    })
}

/// What `kanban identity --json` prints for the current context: identity's own facts with
/// every gate's verdict ([`snapshot`]).
pub fn report() -> identity::IdentityReport {
    identity::report(snapshot())
}

/// Every gate's verdict in the current context, for `kanban identity --json`.
pub fn snapshot() -> serde_json::Map<String, serde_json::Value> {
    use serde_json::Value;
    let mut m = serde_json::Map::new();
    m.insert("kanban_mode_enabled".into(), kanban_mode_enabled().into());
    m.insert(
        "default_task_id".into(),
        default_task_id(None).map_or(Value::Null, Value::from),
    );
    m.insert(
        "detect_environment_kanban".into(),
        detect_environment("kanban").into(),
    );
    m.insert(
        "is_dispatcher_owned_worker".into(),
        is_dispatcher_owned_worker().into(),
    );
    m.insert(
        "owned_run_id".into(),
        owned_run_id().map_or(Value::Null, Value::from),
    );
    m.insert(
        "worker_guidance".into(),
        (!worker_guidance().is_empty()).into(),
    );
    m.insert("stop_nudge_enabled".into(), stop_nudge_enabled().into());
    m.insert(
        "auto_heartbeat".into(),
        auto_heartbeat_target().is_some().into(),
    );
    m.insert(
        "comment_injection".into(),
        comment_injection_task().is_some().into(),
    );
    m.insert(
        "board_mutation_allowed".into(),
        identity::fence::check_board_mutation().is_ok().into(),
    );
    m
}

#[cfg(test)]
mod tests;
