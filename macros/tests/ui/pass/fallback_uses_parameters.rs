//! Free functions: a fallback that uses the other parameters, a generic function, the default
//! fallback of a `Default` type, a path-qualified identity type and a `_` pattern. Run outside a
//! worker and inside a non-owned scope, every call returns its fallback.

use kanban_runtime::identity::{self, WorkerIdentity, kanban_identity_gated};

#[kanban_identity_gated(fallback = explicit.map(str::to_owned))]
fn default_task_id(identity: &WorkerIdentity, explicit: Option<&str>) -> Option<String> {
    Some(explicit.map_or_else(|| identity.task.clone(), str::to_owned))
}

#[kanban_identity_gated(fallback = items.len() + extra)]
fn weighted<T: Clone>(_identity: &WorkerIdentity, items: &[T], extra: usize) -> usize
where
    T: std::fmt::Debug,
{
    items.len() * 2 + extra
}

#[derive(Debug, Default, PartialEq)]
struct Budget {
    turns: u32,
}

#[kanban_identity_gated]
fn budget(identity: &kanban_runtime::identity::WorkerIdentity) -> Budget {
    Budget {
        turns: identity.goal_max_turns.unwrap_or(1),
    }
}

#[kanban_identity_gated]
fn touch(_: &WorkerIdentity) {}

#[kanban_identity_gated(fallback = Err(format!("no worker owns {task_id}")),)]
fn must_own(identity: &WorkerIdentity, task_id: &str) -> Result<(), String> {
    if identity.task == task_id {
        Ok(())
    } else {
        Err(format!("{} is not {task_id}", identity.task))
    }
}

fn check_fallbacks() {
    assert_eq!(default_task_id(None), None);
    assert_eq!(default_task_id(Some("t_explicit")), Some("t_explicit".to_owned()));
    assert_eq!(weighted(&["a", "b"], 1), 3);
    assert_eq!(budget(), Budget::default());
    touch();
    assert_eq!(must_own("t_1"), Err("no worker owns t_1".to_owned()));
}

fn main() {
    check_fallbacks();
    let _scope = identity::non_dispatcher_owned_context();
    check_fallbacks();
}
