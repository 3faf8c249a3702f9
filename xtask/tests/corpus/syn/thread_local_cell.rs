// target: runtime/src/cron/corpus_fixture.rs
// rule: global-mutable-state
// bypass: a gated verdict cached in a `thread_local!` cell, written through `Cell::set` called as a function
use std::cell::Cell;

thread_local! {
    static OWNED: Cell<Option<bool>> = const { Cell::new(None) };
}

pub fn owned() -> bool {
    OWNED.with(|cell| {
        if let Some(v) = cell.get() {
            return v;
        }
        let v = crate::identity::is_dispatcher_owned_worker_context();
        Cell::set(cell, Some(v));
        v
    })
}
