use kanban_runtime::identity::{WorkerIdentity, kanban_identity_gated};

#[kanban_identity_gated(fallback =)]
fn owned(_identity: &WorkerIdentity) -> bool {
    true
}

fn main() {}
