// expect: use of a disallowed type `std::process::Command`
// bypass: a `std::process::Command` built at start-up and spawned later from a cron job
use std::sync::Mutex;

pub static STARTUP_TOOL: Mutex<Option<std::process::Command>> = Mutex::new(None);

pub fn spawn_later() {
    if let Some(cmd) = STARTUP_TOOL.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        let _ = cmd.status();
    }
}
