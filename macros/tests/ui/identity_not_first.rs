use kanban_runtime::identity::{WorkerIdentity, kanban_identity_gated};

#[kanban_identity_gated]
fn task_matches(task_id: &str, identity: &WorkerIdentity) -> bool {
    identity.task == task_id
}

fn main() {}
