// target: runtime/src/agent/corpus_fixture.rs
// rule: drift
// bypass: a child handed the worker's tenant and session source outside the grant
pub fn tool(tenant: &str) -> std::io::Result<std::process::ExitStatus> {
    crate::identity::command("tool")
        .env("HERMES_TENANT", tenant)
        .env("HERMES_SESSION_SOURCE", "kanban")
        .status()
}
