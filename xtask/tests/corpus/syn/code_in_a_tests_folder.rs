// target: runtime/src/cron/tests/corpus_fixture.rs
// rule: global-mutable-state
// bypass: (own) real code in a folder named `tests` inside src/ (`cron/mod.rs` declaring `pub mod tests;`, no `#[cfg(test)]`), which the checks used to skip wholesale
use std::sync::Mutex;

pub static OWNED: Mutex<Option<bool>> = Mutex::new(None);
