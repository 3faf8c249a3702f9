//! The dispatcher's effective settings: `[dispatch]` of `kanban.toml`, overridden by the
//! environment knobs (`HERMES_KANBAN_CLAIM_TTL_SECONDS`, `HERMES_KANBAN_CRASH_GRACE_SECONDS`,
//! `HERMES_KANBAN_RATE_LIMIT_COOLDOWN_SECONDS`, read through `identity::settings`), else the
//! defaults. Precedence: environment > kanban.toml > default. An invalid value is an error that
//! names the key and its range (the ranges of [`crate::config`]), never a silent default; the
//! whole configuration is validated here too, so a `Config` built in code is held to the same
//! ranges as one read from the file.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::board::{self, BoardError};
use crate::config::{self, Config, ConfigError};
use crate::db::target::BoardLocation;
use crate::identity::settings::{self as env, Setting};

use crate::proc::process::{self, KillWait};

/// Seconds a claim is pushed out when our worker survived termination (reference: 120 s).
pub(crate) const RECLAIM_DEFER_SECONDS: i64 = 120;
/// Consecutive protocol violations (rc 0 without complete/block) before a task is blocked, unless
/// the task's `max_retries` says otherwise.
pub(crate) const PROTOCOL_VIOLATION_LIMIT: i64 = 3;

/// Errors building [`Settings`].
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("invalid {key}={value:?}: {expected}")]
    Invalid {
        key: &'static str,
        value: String,
        expected: String,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Everything one board's tick needs besides the board, the clock and the workers.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Kanban root (workspaces, logs, `kanban.toml`).
    pub root: PathBuf,
    /// The board this dispatcher serves.
    pub location: BoardLocation,
    /// Running workers per board (running + this tick's spawns).
    pub max_spawn: u32,
    /// Running workers on this host across boards: `[dispatch] max_in_progress`, else derived
    /// from the host's memory ([`super::memory`]); `None` = unlimited (memory unknown).
    pub max_in_progress: Option<u32>,
    /// Running workers per profile on this host (lower-cased profile → cap): each profile's
    /// `max_in_progress`, else `[dispatch] max_in_progress_per_profile`.
    pub profile_caps: std::collections::BTreeMap<String, u32>,
    /// Where the memory guard reads the host's memory.
    pub memory: super::memory::MemorySource,
    /// Each profile's skills folder (lower-cased profile → folder); a profile not listed uses
    /// `<root>/skills`.
    pub skills_dirs: std::collections::BTreeMap<String, PathBuf>,
    /// The other boards of this home, whose tasks claimed on this host (claim lock
    /// `"<hostname>:…"`) count against `max_in_progress`: SQLite and PostgreSQL boards alike.
    pub other_boards: Vec<BoardLocation>,
    pub failure_limit: i64,
    pub claim_ttl_seconds: i64,
    pub crash_grace_seconds: i64,
    pub rate_limit_cooldown_seconds: i64,
    /// 0 disables the stale-heartbeat phase.
    pub stale_timeout_seconds: i64,
    pub heartbeat_max_stale_seconds: i64,
    pub reclaim_defer_seconds: i64,
    pub kill_wait: KillWait,
    /// Profile of a task without an assignee.
    pub default_profile: String,
    /// Profiles defined in `kanban.toml`; a task whose profile is not one of them is not spawned.
    pub profiles: BTreeSet<String>,
    /// `"<hostname>:<dispatcher pid>"`.
    pub claim_lock: String,
    /// `"<hostname>:"`.
    pub host_prefix: String,
    /// Report what would be spawned without claiming or spawning anything.
    pub dry_run: bool,
    /// Dispatch `review` tasks to their reviewer after the ready lane.
    pub review_dispatch: bool,
    /// `[dispatch] mode = "owner"`: start `kanban submit` (admission through the profile's
    /// owner) instead of `kanban worker`.
    pub owner_mode: bool,
    /// `[dispatch] owner_lost_turn = "pause"`: a turn whose owner died is held for the operator
    /// (else it is released by the usual rules once its owner is gone).
    pub owner_lost_turn_pauses: bool,
    /// `[hooks]`: what the daemon loop runs after transitions.
    pub hooks: crate::config::HooksConfig,
    /// `[dispatch] auto_decompose`: the profile whose agent decomposes triage cards, and how
    /// many per pass.
    pub auto_decompose: Option<(String, usize)>,
}

fn env_seconds(setting: Setting, min: i64) -> Result<Option<i64>, SettingsError> {
    let Some(value) = env::get(setting) else {
        return Ok(None);
    };
    match value.trim().parse::<i64>() {
        Ok(n) if (min..=config::MAX_SECONDS).contains(&n) => Ok(Some(n)),
        _ => Err(SettingsError::Invalid {
            key: setting.key(),
            value,
            expected: format!(
                "expected a whole number of seconds from {min} to {}",
                config::MAX_SECONDS
            ),
        }),
    }
}

impl Settings {
    /// The effective settings for `location` under `root`, from `config` and the environment.
    pub fn new(
        root: PathBuf,
        location: BoardLocation,
        config: &Config,
    ) -> Result<Settings, SettingsError> {
        config.validate(&root.join(config::CONFIG_FILE))?;
        let d = &config.dispatch;
        let claim_ttl_seconds =
            env_seconds(Setting::ClaimTtlSeconds, 1)?.unwrap_or(d.claim_ttl_seconds);
        let crash_grace_seconds =
            env_seconds(Setting::CrashGraceSeconds, 0)?.unwrap_or(d.crash_grace_seconds);
        let rate_limit_cooldown_seconds = env_seconds(Setting::RateLimitCooldownSeconds, 0)?
            .unwrap_or(d.rate_limit_cooldown_seconds);
        // In range (validated above): 0 to an hour, so the conversion cannot panic.
        let kill_wait = KillWait {
            after_term: Duration::from_secs_f64(d.kill_wait_seconds),
            ..KillWait::default()
        };
        let memory = super::memory::MemorySource::with_paths(
            &root,
            d.meminfo_path.as_deref(),
            d.memory_pressure_path.as_deref(),
        );
        let max_in_progress = d
            .max_in_progress
            .or_else(|| memory.read().derived_max_in_progress());
        let profile_caps = config
            .profiles
            .keys()
            .filter_map(|name| config.profile_cap(name).map(|n| (name.to_lowercase(), n)))
            .collect();
        let skills_dirs = config
            .profiles
            .keys()
            .map(|name| (name.to_lowercase(), config.skills_dir(name, &root)))
            .collect();
        Ok(Settings {
            max_in_progress,
            profile_caps,
            memory,
            skills_dirs,
            root,
            location,
            max_spawn: d.max_spawn,
            other_boards: Vec::new(),
            failure_limit: i64::from(d.failure_limit),
            claim_ttl_seconds,
            crash_grace_seconds,
            rate_limit_cooldown_seconds,
            stale_timeout_seconds: d.stale_timeout_seconds,
            heartbeat_max_stale_seconds: d.heartbeat_max_stale_seconds,
            reclaim_defer_seconds: RECLAIM_DEFER_SECONDS,
            kill_wait,
            default_profile: d.default_profile.trim().to_lowercase(),
            profiles: config.profiles.keys().map(|k| k.to_lowercase()).collect(),
            claim_lock: process::claimer_id(),
            host_prefix: process::host_prefix(),
            dry_run: false,
            review_dispatch: d.review_dispatch,
            owner_mode: d.mode == "owner",
            hooks: config.hooks.clone(),
            auto_decompose: d
                .auto_decompose
                .clone()
                .map(|p| (p, d.auto_decompose_per_tick as usize)),
            owner_lost_turn_pauses: d.owner_lost_turn == "pause",
        })
    }

    /// The profile a task runs under: its assignee, else the default profile.
    pub fn profile_for(&self, assignee: Option<&str>) -> String {
        assignee
            .map(|a| a.trim().to_lowercase())
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| self.default_profile.clone())
    }

    /// The skills folder of `profile` (lower-cased).
    pub fn skills_dir(&self, profile: &str) -> PathBuf {
        self.skills_dirs
            .get(profile)
            .cloned()
            .unwrap_or_else(|| self.root.join("skills"))
    }

    /// How often a worker heartbeats: a third of the claim TTL, at most 60 s, at least 1 s.
    pub fn heartbeat_interval(&self) -> Duration {
        heartbeat_interval(self.claim_ttl_seconds)
    }
}

/// Checks, before anything is claimed, that the program of every `agent = "command"` profile can
/// be started: an absolute path must be an executable file, a bare name must be one in a
/// directory of the agent's `PATH` (the profile's `env.PATH`, else `search_path`). A relative
/// path with a `/` is resolved in the task's workspace and is left to the worker. Without this a
/// missing agent program would be found only by a claimed task's worker, whose failures block the
/// task.
pub(crate) fn check_programs(
    config: &Config,
    root: &Path,
    search_path: Option<&OsStr>,
) -> Result<(), ConfigError> {
    for (name, profile) in &config.profiles {
        if profile.agent != "command" {
            continue;
        }
        let Some(program) = profile.command.first() else {
            continue;
        };
        let path = profile.env.get("PATH").map(OsStr::new).or(search_path);
        let found = if program.starts_with('/') {
            is_executable(Path::new(program))
        } else if program.contains('/') {
            true
        } else {
            path.is_some_and(|p| {
                std::env::split_paths(p).any(|dir| is_executable(&dir.join(program)))
            })
        };
        if !found {
            return Err(ConfigError::Invalid {
                path: root.join(config::CONFIG_FILE),
                problem: config::Problem {
                    key: format!("[profiles.{name}] command"),
                    value: format!("{:?}", profile.command),
                    expected: format!(
                        "`{program}` is not an executable file{}; install it, fix the name, or \
                         give its absolute path (tasks of this profile would fail)",
                        if program.starts_with('/') {
                            String::new()
                        } else {
                            " in any directory of PATH".to_owned()
                        }
                    ),
                },
            });
        }
    }
    Ok(())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `min(ttl / 3, 60 s)`, at least 200 ms.
pub(crate) fn heartbeat_interval(ttl_seconds: i64) -> Duration {
    let third_ms = u64::try_from(ttl_seconds.max(1)).unwrap_or(1) * 1000 / 3;
    Duration::from_millis(third_ms.clamp(200, 60_000))
}

/// The claim TTL of a claim made outside a tick (`kanban claim` without its own TTL):
/// `HERMES_KANBAN_CLAIM_TTL_SECONDS` > the config's `[dispatch] claim_ttl_seconds` (900 s when
/// unset). Each must be from 1 to [`board::MAX_SECONDS`].
pub fn claim_ttl_seconds(config: &Config) -> Result<i64, BoardError> {
    use board::check_seconds;
    if let Some(text) = env::get(Setting::ClaimTtlSeconds) {
        let what = Setting::ClaimTtlSeconds.key();
        return match text.trim().parse::<i64>() {
            Ok(ttl) => check_seconds(what, ttl),
            Err(_) => Err(BoardError::InvalidSeconds {
                what: what.to_owned(),
                value: text,
            }),
        };
    }
    check_seconds(
        "[dispatch] claim_ttl_seconds in kanban.toml",
        config.dispatch.claim_ttl_seconds,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location() -> BoardLocation {
        BoardLocation {
            slug: "default".into(),
            db_path: PathBuf::from("/tmp/x/kanban.db"),
            pinned: false,
            store: crate::db::target::Store::Sqlite,
        }
    }

    #[test]
    fn defaults_follow_the_reference() {
        let s = Settings::new(PathBuf::from("/tmp/x"), location(), &Config::default()).unwrap();
        assert_eq!(s.max_spawn, 4);
        assert_eq!(s.failure_limit, 2);
        assert_eq!(s.reclaim_defer_seconds, 120);
        assert_eq!(s.heartbeat_max_stale_seconds, 3600);
        assert!(s.claim_lock.starts_with(&s.host_prefix));
        assert_eq!(s.profile_for(None), "default");
        assert_eq!(s.profile_for(Some(" Coder ")), "coder");
    }

    #[test]
    fn heartbeat_is_a_third_of_the_ttl_capped_at_a_minute() {
        assert_eq!(heartbeat_interval(900), Duration::from_secs(60));
        assert_eq!(heartbeat_interval(30), Duration::from_secs(10));
        assert_eq!(heartbeat_interval(3), Duration::from_secs(1));
        assert_eq!(heartbeat_interval(0), Duration::from_millis(333));
    }

    #[test]
    fn a_missing_agent_program_is_found_before_anything_is_claimed() {
        let parse = |text: &str| Config::parse(text, Path::new("k.toml")).unwrap();
        let root = Path::new("/h");
        let path = Some(OsStr::new("/usr/bin:/bin"));
        let ok = parse(
            "[profiles.a]\nagent = \"command\"\ncommand = [\"sh\", \"-c\", \"true\"]\n\
             [profiles.b]\nagent = \"command\"\ncommand = [\"/bin/sh\"]\n\
             [profiles.c]\nagent = \"command\"\ncommand = [\"./in-the-workspace\"]\n\
             [profiles.d]\nagent = \"builtin:shell\"\n",
        );
        check_programs(&ok, root, path).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("not-executable");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        for text in [
            "[profiles.a]\nagent = \"command\"\ncommand = [\"no-such-agent-xyz\"]\n".to_owned(),
            "[profiles.a]\nagent = \"command\"\ncommand = [\"/no/such/agent\"]\n".to_owned(),
            format!("[profiles.a]\nagent = \"command\"\ncommand = [{:?}]\n", plain.display().to_string()),
            "[profiles.a]\nagent = \"command\"\ncommand = [\"sh\"]\nenv = { PATH = \"/nowhere\" }\n".to_owned(),
        ] {
            let err = check_programs(&parse(&text), root, path).unwrap_err();
            let err = err.to_string();
            assert!(err.contains("/h/kanban.toml"), "{err}");
            assert!(err.contains("[profiles.a] command"), "{err}");
        }
        assert!(
            check_programs(
                &parse("[profiles.a]\nagent = \"command\"\ncommand = [\"sh\"]\n"),
                root,
                None
            )
            .is_err()
        );
    }

    #[test]
    fn a_config_built_in_code_is_held_to_the_ranges() {
        let mut c = Config::default();
        c.dispatch.failure_limit = 0;
        let err = Settings::new(PathBuf::from("/tmp/x"), location(), &c).unwrap_err();
        assert!(err.to_string().contains("failure_limit"), "{err}");
        let mut c = Config::default();
        c.dispatch.kill_wait_seconds = 1e20;
        let err = Settings::new(PathBuf::from("/tmp/x"), location(), &c).unwrap_err();
        assert!(err.to_string().contains("kill_wait_seconds"), "{err}");
    }

    #[test]
    fn the_claim_ttl_outside_a_tick_is_the_configs() {
        // The environment is not touched by unit tests; the e2e tests cover the variable.
        let mut config = Config::default();
        config.dispatch.claim_ttl_seconds = 77;
        assert_eq!(super::claim_ttl_seconds(&config).unwrap(), 77);
        config.dispatch.claim_ttl_seconds = -1;
        let err = super::claim_ttl_seconds(&config).unwrap_err();
        assert!(err.to_string().contains("claim_ttl_seconds"), "{err}");
    }
}
