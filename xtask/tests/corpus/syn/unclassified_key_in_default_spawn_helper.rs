// target: runtime/src/dispatch/corpus_fixture.rs
// rule: drift
// bypass (own): a helper that sets an unclassified kanban key on a std Command, outside the grant
pub fn add_ticket(cmd: &mut std::process::Command, ticket: &str) {
    cmd.env("HERMES_KANBAN_TICKET", ticket);
}
