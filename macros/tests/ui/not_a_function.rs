use kanban_runtime::identity::{WorkerIdentity, kanban_identity_gated};

#[kanban_identity_gated]
struct Gated<'a> {
    identity: &'a WorkerIdentity,
}

fn main() {}
