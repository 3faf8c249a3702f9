// target: runtime/src/agent/corpus_fixture.rs
// rule: drift
// bypass: an extension trait on the child builder that sets a new identity key
use crate::identity::ChildCommand;

pub trait WithTicket {
    fn with_ticket(&mut self, ticket: &str) -> &mut Self;
}

impl WithTicket for ChildCommand {
    fn with_ticket(&mut self, ticket: &str) -> &mut Self {
        self.env("HERMES_KANBAN_TICKET", ticket)
    }
}
