// expect: no method named `env_clear` found
// bypass: `identity::command(..).env_clear().envs(..)` — identity back, marker gone
pub fn tool() -> std::io::Result<std::process::ExitStatus> {
    crate::identity::command("tool")
        .env_clear()
        .env("HERMES_KANBAN_TASK", "t_1")
        .status()
}
