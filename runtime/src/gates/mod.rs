//! Every consumer of worker identity. Each gate turns the identity handed out by
//! [`crate::identity::gate`] into behaviour, and outside a dispatcher-owned worker context returns
//! its fallback, so a cron job or a delegated child never sees, heartbeats, completes or blocks the
//! worker's task. No gate caches its verdict: each call asks the gate afresh.
//!
//! (Each gate is being moved onto `#[kanban_identity_gated]`; until then each one matches on
//! `identity::gate()` by hand, with the same semantics.)

use std::sync::OnceLock;

use crate::identity::{self, WorkerIdentity};

/// True when this context is a dispatcher-owned kanban worker with a task.
pub fn kanban_mode_enabled() -> bool {
    identity::gate().is_some()
}

/// The task a lifecycle command acts on: an explicit id always wins; otherwise the owned task.
pub fn default_task_id(explicit: Option<&str>) -> Option<String> {
    if let Some(id) = explicit {
        return Some(id.to_owned());
    }
    identity::gate().map(|id| id.task)
}

/// The run id a lifecycle call passes so that a superseded worker cannot close its successor's run.
pub fn owned_run_id() -> Option<i64> {
    identity::gate().and_then(|id| id.run_id)
}

/// The claim lock of the owned worker, for heartbeat fencing.
pub fn owned_claim_lock() -> Option<String> {
    identity::gate().and_then(|id| id.claim_lock)
}

/// True when the kanban toolset must be force-added (a dispatcher-owned worker).
pub fn is_dispatcher_owned_worker() -> bool {
    identity::gate().is_some()
}

/// The full owned identity, for code that binds a worker to its claim.
pub fn owned_identity() -> Option<WorkerIdentity> {
    identity::gate()
}

/// Whether environment `name` applies to this context. `kanban` is decided afresh on every call
/// (it depends on the ownership context); other environments are facts of the machine and may be
/// cached.
pub fn detect_environment(name: &str) -> bool {
    match name {
        "kanban" => kanban_mode_enabled(),
        "container" => {
            static CONTAINER: OnceLock<bool> = OnceLock::new();
            *CONTAINER.get_or_init(|| {
                std::path::Path::new("/.dockerenv").exists()
                    || std::path::Path::new("/run/.containerenv").exists()
            })
        }
        _ => false,
    }
}

/// A mutation refused because the owned worker may only mutate its own task.
#[derive(Debug, thiserror::Error)]
#[error("refused: this worker owns task {owned} and may not mutate task {target}")]
pub struct NotOwner {
    pub owned: String,
    pub target: String,
}

/// Inside an owned worker, only the owned task may be mutated; outside one (an operator's shell)
/// any task may.
pub fn check_mutation(task_id: &str) -> Result<(), NotOwner> {
    match identity::gate() {
        Some(id) if id.task != task_id => Err(NotOwner {
            owned: id.task,
            target: task_id.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// The worker-protocol guidance added to an owned worker's prompt; empty elsewhere.
pub fn worker_guidance() -> String {
    match identity::gate() {
        Some(id) => format!(
            "You are the kanban worker for task {task}. When the work is done run \
             `kanban complete --summary \"…\"`; if you cannot finish, run \
             `kanban block --reason \"…\"`. `kanban show` prints the task, `kanban comment {task} \
             --body \"…\"` records a note, `kanban heartbeat` extends your lease.",
            task = id.task
        ),
        None => String::new(),
    }
}

/// Whether a turn that ended without complete/block gets a stop nudge (owned workers only).
pub fn stop_nudge_enabled() -> bool {
    identity::gate().is_some()
}

/// What the auto-heartbeat extends: the owned task, run and claim lock; `None` elsewhere.
pub fn auto_heartbeat_target() -> Option<WorkerIdentity> {
    identity::gate()
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
    m.insert("stop_nudge_enabled".into(), stop_nudge_enabled().into());
    m.insert(
        "auto_heartbeat".into(),
        auto_heartbeat_target().is_some().into(),
    );
    m
}
