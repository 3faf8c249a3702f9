// target: runtime/src/worker/corpus_fixture.rs
// rule: global-mutable-state
// bypass: a gated verdict cached in a `static Mutex` written through `extend` (not a storing method cached-gated-verdict knows)
use std::sync::Mutex;

static SEEN: Mutex<Vec<bool>> = Mutex::new(Vec::new());

pub fn owned_once() -> bool {
    let Ok(mut seen) = SEEN.lock() else {
        return false;
    };
    if seen.is_empty() {
        seen.extend([crate::identity::is_dispatcher_owned_worker_context()]);
    }
    seen[0]
}
