// expect: use of a disallowed method `std::env::var`
// bypass: the key held in a `let`, built with `format!` or `concat!`, then read
pub fn task_via_let() -> Option<String> {
    let key = "HERMES_KANBAN_TASK";
    std::env::var(key).ok()
}

pub fn task_via_format() -> Option<String> {
    std::env::var(format!("HERMES_KANBAN_{}", "TASK")).ok()
}

pub fn task_via_concat() -> Option<String> {
    std::env::var(concat!("HERMES_KANBAN_", "TASK")).ok()
}
