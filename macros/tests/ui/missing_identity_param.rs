use kanban_runtime::identity::kanban_identity_gated;

#[kanban_identity_gated]
fn task_count(limit: usize) -> usize {
    limit
}

fn main() {}
