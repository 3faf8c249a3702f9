// target: runtime/src/worker/corpus_fixture.rs
// rule: global-mutable-state
// bypass: (own) the static declared by a `macro_rules!` macro, its type invisible to a syn rule
macro_rules! memo {
    ($name:ident) => {
        static $name: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    };
}

memo!(OWNED);

pub fn owned() -> bool {
    *OWNED.get_or_init(crate::identity::is_dispatcher_owned_worker_context)
}
