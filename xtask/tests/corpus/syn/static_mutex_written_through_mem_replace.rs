// target: runtime/src/worker/corpus_fixture.rs
// rule: global-mutable-state
// bypass: a gated verdict cached in a `static Mutex` written through `std::mem::replace`
use std::sync::Mutex;

static LAST: Mutex<Option<bool>> = Mutex::new(None);

pub fn owned_cached() -> bool {
    let Ok(mut last) = LAST.lock() else {
        return false;
    };
    if let Some(v) = *last {
        return v;
    }
    let now = crate::identity::is_dispatcher_owned_worker_context();
    let _previous = std::mem::replace(&mut *last, Some(now));
    now
}
