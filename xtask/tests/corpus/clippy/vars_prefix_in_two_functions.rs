// expect: use of a disallowed method `std::env::vars`
// bypass: `env::vars()` filtered by prefix in one function and indexed in another
fn kanban_vars() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(k, _)| k.starts_with("HERMES_"))
        .collect()
}

pub fn first_kanban_value() -> Option<String> {
    kanban_vars().into_iter().next().map(|(_, v)| v)
}
