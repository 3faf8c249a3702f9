//! The `kanban` binary: parse, call the library, print. See [`kanban_runtime::run_cli`].

fn main() -> std::process::ExitCode {
    kanban_runtime::run_cli()
}
