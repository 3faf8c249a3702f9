// target: runtime/src/agent/corpus_fixture.rs
// rule: drift
// bypass (own): a child builder asked to drop the delegated-child marker
pub fn unfenced_tool() -> std::io::Result<std::process::ExitStatus> {
    crate::identity::command("tool")
        .env_remove("HERMES_DELEGATED_CHILD_CONTEXT")
        .status()
}
