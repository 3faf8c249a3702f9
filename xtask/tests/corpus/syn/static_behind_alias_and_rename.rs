// target: runtime/src/worker/corpus_fixture.rs
// rule: global-mutable-state
// bypass: (own) the lock hidden behind a renamed import and a type alias, the static's type naming neither
use std::sync::Mutex as Guarded;

type Memo = Guarded<Option<bool>>;

static MEMO: Memo = Guarded::new(None);

pub fn owned_memo() -> bool {
    let Ok(mut memo) = MEMO.lock() else {
        return false;
    };
    if let Some(v) = *memo {
        return v;
    }
    let v = crate::identity::is_dispatcher_owned_worker_context();
    *Option::insert(&mut *memo, v)
}
