//! Methods: the identity parameter comes right after the receiver; `Self` types, generic methods
//! and trait impls work.

use kanban_runtime::identity::{self, WorkerIdentity, kanban_identity_gated};

#[derive(Debug, Default, PartialEq)]
struct Prompt {
    lines: Vec<String>,
}

impl Prompt {
    #[kanban_identity_gated(fallback = self.lines.len())]
    fn with_guidance(&mut self, identity: &WorkerIdentity) -> usize {
        self.lines.push(format!("work on {}", identity.task));
        self.lines.len()
    }

    #[kanban_identity_gated(fallback = Self { lines: vec![seed.to_string()] })]
    fn seeded<S: ToString>(_identity: &WorkerIdentity, seed: S) -> Self {
        Self::default()
    }

    #[kanban_identity_gated]
    fn owned_task(&self, identity: &WorkerIdentity) -> Option<String> {
        Some(identity.task.clone())
    }
}

trait Gate {
    fn verdict(&self) -> bool;
}

impl Gate for Prompt {
    #[kanban_identity_gated]
    fn verdict(&self, _identity: &WorkerIdentity) -> bool {
        true
    }
}

fn main() {
    let _scope = identity::non_dispatcher_owned_context();
    let mut prompt = Prompt::seeded(7);
    assert_eq!(prompt.lines, vec!["7".to_owned()]);
    assert_eq!(prompt.with_guidance(), 1);
    assert_eq!(prompt.owned_task(), None);
    assert!(!prompt.verdict());
}
