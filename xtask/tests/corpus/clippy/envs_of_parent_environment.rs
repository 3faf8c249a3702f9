// expect: use of a disallowed method `std::env::vars`
// bypass: `identity::command(..).envs(std::env::vars())` (identity copied back into the child)
pub fn tool() -> std::io::Result<std::process::ExitStatus> {
    crate::identity::command("tool").envs(std::env::vars()).status()
}
