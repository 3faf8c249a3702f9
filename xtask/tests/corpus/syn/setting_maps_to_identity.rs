// target: runtime/src/identity/settings.rs
// rule: drift
// replace: true
// bypass: a new `Setting` variant mapping to `HERMES_KANBAN_TASK`
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Home,
    Task,
}

impl Setting {
    pub const fn key(self) -> &'static str {
        match self {
            Setting::Home => "HERMES_KANBAN_HOME",
            Setting::Task => "HERMES_KANBAN_TASK",
        }
    }
}

pub fn get(setting: Setting) -> Option<String> {
    std::env::var(setting.key()).ok()
}
