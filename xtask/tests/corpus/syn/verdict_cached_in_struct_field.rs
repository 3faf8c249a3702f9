// target: runtime/src/worker/corpus_fixture.rs
// rule: cached-gated-verdict
// bypass: a gated verdict cached in a struct field kept in a static
use std::sync::OnceLock;

pub struct Facts {
    pub task: Option<String>,
}

pub fn facts() -> &'static Facts {
    static FACTS: OnceLock<Facts> = OnceLock::new();
    FACTS.get_or_init(|| Facts {
        task: crate::gates::default_task_id(None),
    })
}
