// target: runtime/src/worker/corpus_fixture.rs
// rule: global-mutable-state
// bypass: (own) the lock inside a struct of the crate, the static's type a plain name
use std::sync::Mutex;

pub struct Holder {
    owned: Mutex<Option<bool>>,
}

static HOLDER: Holder = Holder {
    owned: Mutex::new(None),
};

pub fn owned_held() -> bool {
    let Ok(mut slot) = HOLDER.owned.lock() else {
        return false;
    };
    let v = slot.unwrap_or_else(crate::identity::is_dispatcher_owned_worker_context);
    slot.clone_from(&Some(v));
    v
}
