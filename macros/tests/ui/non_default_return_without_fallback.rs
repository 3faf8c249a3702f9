use kanban_runtime::identity::{WorkerIdentity, kanban_identity_gated};

pub struct Verdict {
    pub task: String,
}

#[kanban_identity_gated]
fn verdict(identity: &WorkerIdentity) -> Verdict {
    Verdict {
        task: identity.task.clone(),
    }
}

fn main() {}
