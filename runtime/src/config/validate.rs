//! The accepted range of every duration and count, and the checks of a loaded `kanban.toml`.
//!
//! The same ranges bound the command-line flags and environment variables that override a key
//! (`--interval`, `--max-spawn`, `--ttl`, `HERMES_KANBAN_CLAIM_TTL_SECONDS`, …), so a value is
//! accepted or refused the same way wherever it comes from. The bounds keep every time computation
//! (`now + ttl`, a `Duration` built from seconds) far from overflow.

use std::collections::BTreeMap;
use std::fmt::Display;

use super::{Config, ProfileConfig};

/// The largest number of seconds any duration setting accepts: 365 days.
pub use crate::board::MAX_SECONDS;
/// `[dispatch] max_spawn` and `kanban dispatch --max-spawn`; 0 is a tick that reclaims, sweeps
/// and promotes but spawns nothing (as in the original).
pub(crate) const MAX_SPAWN: (u32, u32) = (0, 1024);
/// `[dispatch] max_in_progress`.
pub(crate) const MAX_IN_PROGRESS: (u32, u32) = (1, 65_536);
/// `[dispatch] failure_limit`.
pub(crate) const FAILURE_LIMIT: (u32, u32) = (1, 1000);
/// `[dispatch] auto_decompose_per_tick`.
pub(crate) const AUTO_DECOMPOSE_PER_TICK: (u32, u32) = (1, 100);
/// `[cron] max_parallel`.
pub(crate) const MAX_PARALLEL: (u32, u32) = (1, 256);
/// `[dispatch] interval_seconds` and `kanban dispatch --interval`.
pub(crate) const DISPATCH_INTERVAL_SECONDS: (f64, f64) = (0.01, 86_400.0);
/// `[cron] interval_seconds` and `kanban cron daemon --interval`.
pub(crate) const CRON_INTERVAL_SECONDS: (f64, f64) = (0.1, 86_400.0);
/// `[dispatch] kill_wait_seconds`.
pub(crate) const KILL_WAIT_SECONDS: (f64, f64) = (0.0, 3600.0);
/// The agents a profile may name.
pub(crate) const AGENTS: &[&str] = &[
    "command",
    "builtin:complete",
    "builtin:shell",
    "builtin:probe",
    "claude-code",
    "codex",
    "gemini",
    "opencode",
    "aider",
    "hermes",
];

/// The agents that drive a known CLI (`agent/preset.rs`); their `command`, when given,
/// replaces the preset's program and fixed arguments.
pub(crate) const PRESET_AGENTS: &[&str] = &[
    "claude-code",
    "codex",
    "gemini",
    "opencode",
    "aider",
    "hermes",
];

/// One value that is not accepted: where it is, what it is, and what would be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} = {value} is not accepted: {expected}")]
pub struct Problem {
    /// The key, with its table (`[dispatch] interval_seconds`) or the flag (`--interval`).
    pub key: String,
    /// The value as given.
    pub value: String,
    /// What is accepted.
    pub expected: String,
}

impl Problem {
    fn new(key: impl Into<String>, value: impl Display, expected: impl Into<String>) -> Problem {
        Problem {
            key: key.into(),
            value: value.to_string(),
            expected: expected.into(),
        }
    }
}

/// `value` if it lies in `min..=max`, else a problem naming `key` and the range.
pub(crate) fn check_int<T: PartialOrd + Display + Copy>(
    key: &str,
    value: T,
    (min, max): (T, T),
    unit: &str,
) -> Result<T, Problem> {
    if value >= min && value <= max {
        Ok(value)
    } else {
        Err(Problem::new(
            key,
            value,
            format!("expected a whole number {unit}from {min} to {max}"),
        ))
    }
}

/// `value` if it is finite and lies in `min..=max` seconds, else a problem naming `key`.
pub(crate) fn check_float(key: &str, value: f64, (min, max): (f64, f64)) -> Result<f64, Problem> {
    if value.is_finite() && value >= min && value <= max {
        Ok(value)
    } else {
        Err(Problem::new(
            key,
            // `1e20`, not twenty-one digits.
            format!("{value:?}"),
            format!("expected a number of seconds from {min} to {max}"),
        ))
    }
}

fn seconds(key: &str, value: i64, min: i64) -> Result<i64, Problem> {
    check_int(key, value, (min, MAX_SECONDS), "of seconds ")
}

/// `[hooks] timeout_seconds`.
pub(crate) const HOOK_TIMEOUT_SECONDS: (f64, f64) = (0.1, 600.0);
/// `[hooks] max_running`.
pub(crate) const HOOK_MAX_RUNNING: (usize, usize) = (1, 64);

fn check_hooks(h: &super::HooksConfig) -> Result<(), Problem> {
    check_float(
        "[hooks] timeout_seconds",
        h.timeout_seconds,
        HOOK_TIMEOUT_SECONDS,
    )?;
    check_int("[hooks] max_running", h.max_running, HOOK_MAX_RUNNING, "")?;
    for (name, argv) in [
        ("on_claimed", &h.on_claimed),
        ("on_completed", &h.on_completed),
        ("on_blocked", &h.on_blocked),
        ("on_gave_up", &h.on_gave_up),
        ("on_worker_exited", &h.on_worker_exited),
        ("on_review", &h.on_review),
    ] {
        if argv.first().is_some_and(|p| p.trim().is_empty()) {
            return Err(Problem::new(
                format!("[hooks] {name}"),
                format!("{argv:?}"),
                "expected a command line whose first word is the program",
            ));
        }
    }
    Ok(())
}

/// Every check of a parsed configuration; the first problem found.
pub(super) fn check(config: &Config) -> Result<(), Problem> {
    check_hooks(&config.hooks)?;
    let d = &config.dispatch;
    check_int("[dispatch] max_spawn", d.max_spawn, MAX_SPAWN, "")?;
    if let Some(n) = d.max_in_progress {
        check_int("[dispatch] max_in_progress", n, MAX_IN_PROGRESS, "")?;
    }
    if let Some(n) = d.max_in_progress_per_profile {
        check_int(
            "[dispatch] max_in_progress_per_profile",
            n,
            MAX_IN_PROGRESS,
            "",
        )?;
    }
    check_int(
        "[dispatch] auto_decompose_per_tick",
        d.auto_decompose_per_tick,
        AUTO_DECOMPOSE_PER_TICK,
        "",
    )?;
    if let Some(profile) = &d.auto_decompose
        && !config
            .profiles
            .keys()
            .any(|k| k.eq_ignore_ascii_case(profile))
    {
        return Err(Problem::new(
            "[dispatch] auto_decompose",
            profile,
            "the name of a profile defined in [profiles.*]",
        ));
    }
    check_int(
        "[dispatch] failure_limit",
        d.failure_limit,
        FAILURE_LIMIT,
        "",
    )?;
    seconds("[dispatch] claim_ttl_seconds", d.claim_ttl_seconds, 1)?;
    seconds("[dispatch] crash_grace_seconds", d.crash_grace_seconds, 0)?;
    seconds(
        "[dispatch] rate_limit_cooldown_seconds",
        d.rate_limit_cooldown_seconds,
        0,
    )?;
    seconds(
        "[dispatch] stale_timeout_seconds",
        d.stale_timeout_seconds,
        0,
    )?;
    seconds(
        "[dispatch] heartbeat_max_stale_seconds",
        d.heartbeat_max_stale_seconds,
        1,
    )?;
    check_float(
        "[dispatch] kill_wait_seconds",
        d.kill_wait_seconds,
        KILL_WAIT_SECONDS,
    )?;
    check_float(
        "[dispatch] interval_seconds",
        d.interval_seconds,
        DISPATCH_INTERVAL_SECONDS,
    )?;
    if d.default_profile.trim().is_empty() {
        return Err(Problem::new(
            "[dispatch] default_profile",
            format!("{:?}", d.default_profile),
            "expected a profile name (the profile of tasks without an assignee)",
        ));
    }
    check_profile_name("[dispatch] default_profile", &d.default_profile)?;
    match d.mode.as_str() {
        "direct" | "owner" => {}
        other => {
            return Err(Problem::new(
                "[dispatch] mode",
                format!("{other:?}"),
                "the accepted values are \"direct\" (the dispatcher starts workers) and \"owner\" (admission through the profile's owner)",
            ));
        }
    }
    match d.owner_lost_turn.as_str() {
        "requeue" | "pause" => {}
        other => {
            return Err(Problem::new(
                "[dispatch] owner_lost_turn",
                format!("{other:?}"),
                "the accepted values are \"requeue\" (a turn its owner lost settles interrupted and the card runs again) and \"pause\" (the card waits for `kanban owner resolve`)",
            ));
        }
    }
    check_profiles(&config.profiles)?;
    let c = &config.cron;
    check_int("[cron] max_parallel", c.max_parallel, MAX_PARALLEL, "")?;
    seconds("[cron] claim_ttl_seconds", c.claim_ttl_seconds, 1)?;
    check_float(
        "[cron] interval_seconds",
        c.interval_seconds,
        CRON_INTERVAL_SECONDS,
    )?;
    if let Some(tz) = &c.timezone {
        // The lookup cron's `schedule::zone` makes (jiff's bundled database), asked here directly
        // so that the configuration does not depend on the scheduler.
        jiff::tz::TimeZone::get(tz).map_err(|_| {
            Problem::new(
                "[cron] timezone",
                format!("{tz:?}"),
                "expected an IANA time zone such as \"Europe/Berlin\" or \"UTC\"",
            )
        })?;
    }
    Ok(())
}

/// A profile name: 1–64 characters, no whitespace or control characters.
fn check_profile_name(key: &str, name: &str) -> Result<(), Problem> {
    let ok = !name.is_empty()
        && name.chars().count() <= 64
        && !name.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(())
    } else {
        Err(Problem::new(
            key,
            format!("{name:?}"),
            "a profile name is 1 to 64 characters without spaces or control characters",
        ))
    }
}

fn check_profiles(profiles: &BTreeMap<String, ProfileConfig>) -> Result<(), Problem> {
    let mut seen = BTreeMap::new();
    for (name, profile) in profiles {
        check_profile_name(&format!("[profiles.{name:?}]"), name)?;
        if let Some(other) = seen.insert(name.to_lowercase(), name) {
            return Err(Problem::new(
                format!("[profiles.{name}]"),
                format!("(also [profiles.{other}])"),
                "profile names are compared without case (assignees are lower-cased); keep one of them",
            ));
        }
        check_profile(name, profile)?;
    }
    Ok(())
}

fn check_profile(name: &str, profile: &ProfileConfig) -> Result<(), Problem> {
    let key = |k: &str| format!("[profiles.{name}] {k}");
    if let Some(n) = profile.max_in_progress {
        check_int(&key("max_in_progress"), n, MAX_IN_PROGRESS, "")?;
    }
    if !AGENTS.contains(&profile.agent.as_str()) {
        return Err(Problem::new(
            key("agent"),
            format!("{:?}", profile.agent),
            format!("expected one of {}", quoted(AGENTS)),
        ));
    }
    if profile.agent == "command" {
        match profile.command.first() {
            None => {
                return Err(Problem::new(
                    key("command"),
                    "[]",
                    "agent = \"command\" needs the agent's argv, e.g. command = [\"my-agent\", \"--print\"]",
                ));
            }
            Some(program) if program.trim().is_empty() => {
                return Err(Problem::new(
                    key("command"),
                    format!("{:?}", profile.command),
                    "the first element is the program to run and must not be blank",
                ));
            }
            Some(_) => {}
        }
    } else if !profile.command.is_empty() && !PRESET_AGENTS.contains(&profile.agent.as_str()) {
        return Err(Problem::new(
            key("command"),
            format!("{:?}", profile.command),
            format!(
                "only agent = \"command\" runs a command; remove it, or set agent = \"command\" (this profile's agent is {:?})",
                profile.agent
            ),
        ));
    }
    if let Some(arg) = profile.command.iter().find(|a| a.contains('\0')) {
        return Err(Problem::new(
            key("command"),
            format!("{arg:?}"),
            "an argument must not contain a NUL character",
        ));
    }
    for (k, v) in &profile.env {
        let reserved = k.starts_with("HERMES_KANBAN_") || k == "HERMES_DELEGATED_CHILD_CONTEXT";
        if k.is_empty() || k.contains('=') || k.contains('\0') || reserved {
            return Err(Problem::new(
                key("env"),
                format!("{{ {k:?} = … }}"),
                "a variable name must be non-empty, without `=` or NUL, and not HERMES_KANBAN_* or HERMES_DELEGATED_CHILD_CONTEXT (the dispatcher alone sets those)",
            ));
        }
        if v.contains('\0') {
            return Err(Problem::new(
                key("env"),
                format!("{{ {k} = {v:?} }}"),
                "a value must not contain a NUL character",
            ));
        }
    }
    Ok(())
}

fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("\"{i}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn problem(text: &str) -> String {
        Config::parse(text, Path::new("/h/kanban.toml"))
            .expect_err(text)
            .to_string()
    }

    #[test]
    fn every_range_is_enforced_at_its_edges() {
        for (text, key) in [
            ("[dispatch]\nmax_spawn = -1", "max_spawn"),
            ("[dispatch]\nmax_spawn = 1025", "max_spawn"),
            ("[dispatch]\nmax_in_progress = 0", "max_in_progress"),
            ("[dispatch]\nfailure_limit = 0", "failure_limit"),
            ("[dispatch]\nclaim_ttl_seconds = 0", "claim_ttl_seconds"),
            (
                "[dispatch]\nclaim_ttl_seconds = 31536001",
                "claim_ttl_seconds",
            ),
            (
                "[dispatch]\nclaim_ttl_seconds = 9223372036854775807",
                "claim_ttl_seconds",
            ),
            (
                "[dispatch]\ncrash_grace_seconds = -1",
                "crash_grace_seconds",
            ),
            ("[dispatch]\nkill_wait_seconds = 1e20", "kill_wait_seconds"),
            ("[dispatch]\nkill_wait_seconds = nan", "kill_wait_seconds"),
            ("[dispatch]\ninterval_seconds = 1e20", "interval_seconds"),
            ("[dispatch]\ninterval_seconds = 0.0", "interval_seconds"),
            ("[dispatch]\ninterval_seconds = inf", "interval_seconds"),
            ("[cron]\ninterval_seconds = 1e308", "interval_seconds"),
            ("[cron]\nmax_parallel = 0", "max_parallel"),
            ("[cron]\ntimezone = \"Mars/Olympus\"", "timezone"),
        ] {
            let err = problem(text);
            assert!(err.contains("/h/kanban.toml"), "{err}");
            assert!(err.contains(key), "{text}: {err}");
            assert!(
                err.contains("expected") || err.contains("accepted"),
                "{err}"
            );
        }
        for ok in [
            "[dispatch]\nmax_spawn = 0",
            "[dispatch]\nmax_spawn = 1",
            "[dispatch]\nmax_spawn = 1024",
            "[dispatch]\nclaim_ttl_seconds = 31536000",
            "[dispatch]\ninterval_seconds = 0.01",
            "[dispatch]\nkill_wait_seconds = 0.0",
            "[cron]\ninterval_seconds = 86400.0",
        ] {
            Config::parse(ok, Path::new("k.toml")).expect(ok);
        }
    }

    #[test]
    fn profiles_are_checked_at_load() {
        let err = problem("[profiles.a]\nagent = \"builtin:compelte\"");
        assert!(err.contains("[profiles.a] agent"), "{err}");
        assert!(err.contains("\"builtin:complete\""), "{err}");
        let err = problem("[profiles.a]\nagent = \"command\"\ncommand = []");
        assert!(err.contains("[profiles.a] command"), "{err}");
        let err = problem("[profiles.a]\nagent = \"command\"");
        assert!(err.contains("command"), "{err}");
        let err = problem("[profiles.a]\nagent = \"builtin:shell\"\ncommand = [\"x\"]");
        assert!(err.contains("only agent = \"command\""), "{err}");
        // A preset runs without `command`, or with one replacing its program and fixed args.
        for ok in [
            "[profiles.a]\nagent = \"claude-code\"",
            "[profiles.a]\nagent = \"codex\"\ncommand = [\"my-codex\", \"exec\", \"--json\"]",
        ] {
            Config::parse(ok, Path::new("k.toml")).expect(ok);
        }
        let err = problem("[profiles.a]\nagent = \"claude\"");
        assert!(err.contains("\"claude-code\""), "{err}");
        let err = problem(
            "[profiles.a]\nagent = \"builtin:shell\"\nenv = { HERMES_KANBAN_TASK = \"t\" }",
        );
        assert!(err.contains("HERMES_KANBAN_"), "{err}");
        let err = problem(
            "[profiles.A]\nagent = \"builtin:shell\"\n[profiles.a]\nagent = \"builtin:shell\"",
        );
        assert!(err.contains("without case"), "{err}");
        let err = problem("[profiles.\"a b\"]\nagent = \"builtin:shell\"");
        assert!(err.contains("profile name"), "{err}");
    }

    #[test]
    fn mode_accepts_direct_and_owner_only() {
        let err = problem("[dispatch]\nmode = \"bogus\"");
        assert!(
            err.contains("\"direct\"") && err.contains("\"owner\""),
            "{err}"
        );
        let owner = Config::parse("[dispatch]\nmode = \"owner\"", Path::new("k.toml")).unwrap();
        assert_eq!(owner.dispatch.mode, "owner");
    }
}
