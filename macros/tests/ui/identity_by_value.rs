use kanban_runtime::identity::{WorkerIdentity, kanban_identity_gated};

#[kanban_identity_gated]
fn owned_task(identity: WorkerIdentity) -> Option<String> {
    Some(identity.task.clone())
}

fn main() {}
