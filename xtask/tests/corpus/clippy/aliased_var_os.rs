// expect: use of a disallowed method `std::env::var_os`
// bypass (own): an env read through a renamed import, which a path-spelling rule does not see
use std::env::var_os as read;

pub fn task() -> Option<std::ffi::OsString> {
    read("HERMES_KANBAN_TASK")
}
