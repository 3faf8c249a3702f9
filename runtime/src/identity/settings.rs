//! Non-identity `HERMES_KANBAN_*` knobs and the board-location keys, read at call time.
//!
//! Other modules never call `std::env::var("HERMES_KANBAN_…")`; they ask here by [`Setting`].

use std::path::PathBuf;

/// A knob read from the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `HERMES_KANBAN_HOME`: the kanban root.
    Home,
    /// `HERMES_KANBAN_DB`: pins the board database file.
    Db,
    /// `HERMES_KANBAN_BOARD`: the board slug.
    Board,
    /// `HERMES_KANBAN_BUSY_TIMEOUT_MS`.
    BusyTimeoutMs,
    /// `HERMES_KANBAN_CLAIM_TTL_SECONDS`.
    ClaimTtlSeconds,
    /// `HERMES_KANBAN_CRASH_GRACE_SECONDS`.
    CrashGraceSeconds,
    /// `HERMES_KANBAN_RATE_LIMIT_COOLDOWN_SECONDS`.
    RateLimitCooldownSeconds,
    /// `HERMES_KANBAN_STOP_NUDGE`: `0`/`false`/`off`/`no` turns the worker's stop nudge off.
    StopNudge,
}

impl Setting {
    /// The environment variable behind this setting.
    pub const fn key(self) -> &'static str {
        match self {
            Setting::Home => "HERMES_KANBAN_HOME",
            Setting::Db => "HERMES_KANBAN_DB",
            Setting::Board => "HERMES_KANBAN_BOARD",
            Setting::BusyTimeoutMs => "HERMES_KANBAN_BUSY_TIMEOUT_MS",
            Setting::ClaimTtlSeconds => "HERMES_KANBAN_CLAIM_TTL_SECONDS",
            Setting::CrashGraceSeconds => "HERMES_KANBAN_CRASH_GRACE_SECONDS",
            Setting::RateLimitCooldownSeconds => "HERMES_KANBAN_RATE_LIMIT_COOLDOWN_SECONDS",
            Setting::StopNudge => "HERMES_KANBAN_STOP_NUDGE",
        }
    }
}

/// The value of `setting`, if set and non-empty.
pub fn get(setting: Setting) -> Option<String> {
    std::env::var(setting.key()).ok().filter(|v| !v.is_empty())
}

/// `setting` read as a boolean: `Some(true)` for `1`/`true`/`yes`/`on`, `Some(false)` for
/// `0`/`false`/`no`/`off` (any case), `None` when unset or anything else.
pub fn flag(setting: Setting) -> Option<bool> {
    let value = get(setting)?.trim().to_ascii_lowercase();
    match value.as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// `$HERMES_HOME`, if set and non-empty.
pub fn hermes_home() -> Option<PathBuf> {
    std::env::var_os("HERMES_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The user's home directory (`$HOME`).
pub fn user_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}
