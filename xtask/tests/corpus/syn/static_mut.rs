// target: runtime/src/worker/corpus_fixture.rs
// rule: global-mutable-state
// bypass: (own) a `static mut` flag (unsafe code is forbidden too, so the compiler refuses its use)
static mut OWNED: Option<bool> = None;

pub fn owned() -> bool {
    crate::identity::is_dispatcher_owned_worker_context()
}
