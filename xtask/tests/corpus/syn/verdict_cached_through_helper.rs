// target: runtime/src/worker/corpus_fixture.rs
// rule: cached-gated-verdict
// bypass: a gated verdict cached through a helper (memo) function outside gates/
use std::sync::OnceLock;

fn owned_now() -> bool {
    crate::gates::kanban_mode_enabled()
}

pub fn memo_owned() -> bool {
    static MEMO: OnceLock<bool> = OnceLock::new();
    *MEMO.get_or_init(|| crate::worker::corpus_fixture::owned_now())
}
