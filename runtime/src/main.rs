//! The `kanban` binary: parse, call the library, print. See [`kanban_runtime::cli`].

fn main() -> std::process::ExitCode {
    kanban_runtime::cli::main()
}
