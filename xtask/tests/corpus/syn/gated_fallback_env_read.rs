// target: runtime/src/gates/corpus_fixture.rs
// rule: identity-key-read
// bypass: an env read hidden in a `#[kanban_identity_gated(fallback = …)]` argument
use crate::identity::{WorkerIdentity, kanban_identity_gated};

#[kanban_identity_gated(fallback = std::env::var("HERMES_KANBAN_TASK").ok())]
pub fn corpus_task(identity: &WorkerIdentity) -> Option<String> {
    Some(identity.task.clone())
}
