// expect: use of a disallowed method `std::env::var`
// bypass: `for k in KANBAN_ENV_KEYS { env::var(k) }`
pub fn all_identity() -> Vec<String> {
    let mut out = Vec::new();
    for k in crate::identity::KANBAN_ENV_KEYS {
        if let Ok(v) = std::env::var(k) {
            out.push(v);
        }
    }
    out
}
