//! Non-identity environment knobs, read at call time.
//!
//! Other modules never call `std::env::var` (clippy's `disallowed-methods` bans it outside
//! `identity/`); they ask here by [`Setting`], or for `HOME`, `HERMES_HOME` and `PATH` by name.
//! No [`Setting`] is an identity key (a test checks every variant against
//! [`super::is_identity_key`]); the worker's board location (`HERMES_KANBAN_DB`,
//! `HERMES_KANBAN_BOARD`) is identity and is read through [`pinned_board`] / [`pinned_db`], which
//! answer only outside a lowered scope. A PostgreSQL board's password sources (`PGPASSWORD`,
//! `PGPASSFILE`, `~/.pgpass` under `HOME`) are read here too ([`pg_password`], [`pg_passfile`]).

// This module is the environment's reader for the rest of the runtime (docs/enforcement.md,
// "What the compiler and the tools enforce"): the `std::env` ban does not apply here.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;

/// A knob read from the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `HERMES_KANBAN_HOME`: the kanban root.
    Home,
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
    /// Every setting (for the classification test and docs).
    pub const ALL: &[Setting] = &[
        Setting::Home,
        Setting::BusyTimeoutMs,
        Setting::ClaimTtlSeconds,
        Setting::CrashGraceSeconds,
        Setting::RateLimitCooldownSeconds,
        Setting::StopNudge,
    ];

    /// The environment variable behind this setting.
    pub const fn key(self) -> &'static str {
        match self {
            Setting::Home => "HERMES_KANBAN_HOME",
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

/// `$PATH`, if set (the dispatcher puts its own directory first for workers).
pub fn path() -> Option<std::ffi::OsString> {
    std::env::var_os("PATH")
}

/// `HERMES_KANBAN_BOARD` (a location key, classified identity): the pinned board slug, unless the
/// current thread runs in a lowered scope (a cron job, a delegated-child scope, a thread not
/// started through `identity::spawn`), where the worker's board is not the code's to find.
pub fn pinned_board() -> Option<String> {
    if !super::context::scope_is_owned() {
        return None;
    }
    std::env::var("HERMES_KANBAN_BOARD")
        .ok()
        .filter(|v| !v.is_empty())
}

/// `HERMES_KANBAN_DB` (a location key, classified identity): the pinned board file, under the same
/// condition as [`pinned_board`].
pub fn pinned_db() -> Option<String> {
    if !super::context::scope_is_owned() {
        return None;
    }
    std::env::var("HERMES_KANBAN_DB")
        .ok()
        .filter(|v| !v.is_empty())
}

/// `$PGPASSWORD`, if set and non-empty: libpq's second password source for a PostgreSQL board
/// (after a password in the board's URL in `kanban.toml`). Handed to
/// `kanban_pgwire::Config::resolve_password`; never logged, never put in a worker's environment by
/// kanban (a worker inherits it from the dispatcher's environment like any other variable).
pub fn pg_password() -> Option<String> {
    std::env::var("PGPASSWORD").ok().filter(|v| !v.is_empty())
}

/// `$PGPASSFILE`, if set and non-empty: the libpq password file used instead of `~/.pgpass`.
pub fn pg_passfile() -> Option<PathBuf> {
    std::env::var_os("PGPASSFILE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}
