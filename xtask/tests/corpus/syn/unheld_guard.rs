// target: runtime/src/cron/corpus_fixture.rs
// rule: unheld-guard
// bypass: `let _ =` drops the non-owned guard at once (`#[must_use]` is silent)
pub fn run_careless_job() {
    let _ = crate::identity::non_dispatcher_owned_context();
    crate::agent::corpus_noop();
}
