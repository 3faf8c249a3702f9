// expect: use of a disallowed type `std::process::Command`
// bypass: an extension trait on `Command` that sets a new key (the drift guard missed it)
pub trait Ticketed {
    fn ticketed(&mut self) -> &mut Self;
}

impl Ticketed for std::process::Command {
    fn ticketed(&mut self) -> &mut Self {
        self.env("HERMES_KANBAN_TICKET", "1")
    }
}
