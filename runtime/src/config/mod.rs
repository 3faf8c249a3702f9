//! `kanban.toml`: the dispatcher's settings and the agent profiles, read from `<root>/kanban.toml`.
//!
//! A missing file means every default; a file that exists but does not parse, names an unknown
//! key, or holds a value outside its range is an error that names the file, the key and the
//! accepted values (a typo must not silently become a default, and a profile the dispatcher could
//! not run must not be discovered only after a task was claimed for it). Every command that reads
//! the file validates all of it ([`Config::parse`] calls [`Config::validate`]).
//! Environment overrides (`HERMES_KANBAN_CLAIM_TTL_SECONDS` and friends) are read through
//! [`crate::identity::settings`] by the code that applies them, never here; they share the ranges
//! below.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// File name of the configuration inside the kanban root.
pub(crate) const CONFIG_FILE: &str = "kanban.toml";

pub mod boards;
mod turns;
mod validate;

pub(crate) use boards::BoardConfig;
pub(crate) use turns::TURN_RECOVERY_MAX;
#[cfg(test)]
pub(crate) use validate::PRESET_AGENTS;
pub(crate) use validate::{
    CRON_INTERVAL_SECONDS, DISPATCH_INTERVAL_SECONDS, MAX_SECONDS, MAX_SPAWN, Problem, check_float,
    check_int,
};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid {path}: {problem}")]
    Invalid { path: PathBuf, problem: Problem },
    #[error("invalid {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("unknown profile `{name}`: define [profiles.{name}] in {path} (known: {known})")]
    UnknownProfile {
        name: String,
        path: PathBuf,
        known: String,
    },
}

/// The whole `kanban.toml`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub dispatch: DispatchConfig,
    pub profiles: BTreeMap<String, ProfileConfig>,
    pub cron: CronConfig,
    /// `[boards.<slug>]`: boards that live in PostgreSQL (see [`boards`]).
    pub boards: BTreeMap<String, BoardConfig>,
    pub gc: GcConfig,
    pub hooks: HooksConfig,
}

/// `[hooks]`: commands the dispatcher runs after a transition commits, each with the event as
/// JSON on its standard input (argv, like a profile's `command`; empty: no hook).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HooksConfig {
    /// After a claim (`claimed`).
    pub on_claimed: Vec<String>,
    /// After a completion (`completed`).
    pub on_completed: Vec<String>,
    /// After a block (`blocked`).
    pub on_blocked: Vec<String>,
    /// After the failure limit blocked a task (`gave_up`).
    pub on_gave_up: Vec<String>,
    /// After a worker ended without finishing its task (`crashed`, `protocol_violation`,
    /// `rate_limited`, `timed_out`, `worker_result`).
    pub on_worker_exited: Vec<String>,
    /// After a hand-over to review (`review_requested`).
    pub on_review: Vec<String>,
    /// A hook still running after this long is killed (0.1 to 600 s).
    pub timeout_seconds: f64,
    /// At most this many hooks run at once; later events wait their turn (1 to 64).
    pub max_running: usize,
}

impl Default for HooksConfig {
    fn default() -> Self {
        Self {
            on_claimed: Vec::new(),
            on_completed: Vec::new(),
            on_blocked: Vec::new(),
            on_gave_up: Vec::new(),
            on_worker_exited: Vec::new(),
            on_review: Vec::new(),
            timeout_seconds: 30.0,
            max_running: 4,
        }
    }
}

impl HooksConfig {
    /// The hook (its name and argv) an event of `kind` fires, if one is set.
    pub fn for_kind(&self, kind: &str) -> Option<(&'static str, &[String])> {
        let (name, argv) = match kind {
            "claimed" => ("on_claimed", &self.on_claimed),
            "completed" => ("on_completed", &self.on_completed),
            "blocked" => ("on_blocked", &self.on_blocked),
            "gave_up" => ("on_gave_up", &self.on_gave_up),
            "crashed" | "protocol_violation" | "rate_limited" | "timed_out" | "worker_result" => {
                ("on_worker_exited", &self.on_worker_exited)
            }
            "review_requested" => ("on_review", &self.on_review),
            _ => return None,
        };
        Some((name, argv.as_slice())).filter(|(_, a)| !a.is_empty())
    }
}

/// `[gc]`: what `kanban gc` keeps (the original's 30-day defaults).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct GcConfig {
    /// Events of finished tasks older than this many days are pruned (`decomposed` and
    /// `workspace_preserved` never are).
    pub event_retention_days: u32,
    /// Worker logs of finished tasks not written to for this many days are removed.
    pub log_retention_days: u32,
}

impl Default for GcConfig {
    fn default() -> Self {
        Self {
            event_retention_days: 30,
            log_retention_days: 30,
        }
    }
}

/// `[dispatch]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DispatchConfig {
    /// Workers spawned per board per tick, and running per board at once.
    pub max_spawn: u32,
    /// Workers running on this host across boards (None: derived from memory,
    /// clamp(MemTotal / 512 MiB, 2, 8), or unlimited when memory is unknown).
    pub max_in_progress: Option<u32>,
    /// Workers running at once per profile on this host (None = no per-profile cap); a
    /// profile's own `max_in_progress` wins.
    pub max_in_progress_per_profile: Option<u32>,
    /// Where the memory guard reads `MemTotal` / `MemAvailable` (default `/proc/meminfo`).
    pub meminfo_path: Option<PathBuf>,
    /// Where the memory guard reads pressure stall information (default
    /// `/proc/pressure/memory`; a missing file falls back to `MemAvailable`).
    pub memory_pressure_path: Option<PathBuf>,
    /// Consecutive failures before a task is blocked with `gave_up` (a task's `max_retries` wins).
    pub failure_limit: u32,
    pub claim_ttl_seconds: i64,
    /// Seconds a dead worker pid is given before its task is released as crashed.
    pub crash_grace_seconds: i64,
    /// Seconds a rate-limited (exit 75) task waits before it is spawned again.
    pub rate_limit_cooldown_seconds: i64,
    /// Seconds without a heartbeat after which a running task counts as stale (0 disables).
    pub stale_timeout_seconds: i64,
    /// Seconds a worker may go without a heartbeat and still count as healthy when its claim
    /// expires (an older heartbeat means "wedged": the worker is terminated and reclaimed).
    pub heartbeat_max_stale_seconds: i64,
    /// Seconds the dispatcher waits after SIGTERM before it sends SIGKILL to a worker.
    pub kill_wait_seconds: f64,
    /// Seconds between daemon ticks when nothing on the board changes.
    pub interval_seconds: f64,
    /// Profile a task without an assignee runs under.
    pub default_profile: String,
    /// "direct" (spawn workers) or "owner" (admission through the owner daemon).
    pub mode: String,
    /// Owner mode: what a turn its owner lost (the owner died while it ran) becomes:
    /// "requeue" (settled `interrupted`, the card dispatched again as a fresh run, counted by the
    /// failure breaker) or "pause" (`unknown`, the card held until `kanban owner resolve`).
    pub owner_lost_turn: String,
    /// Dispatch the review lane: a `review` task whose profile is defined is claimed for its
    /// reviewer after the ready lane (default on).
    pub review_dispatch: bool,
    /// In-place retries per run of an agent turn that failed retryably (exit 76); values above
    /// 10 count as 10 (see the README's worker section).
    pub turn_recovery: u32,
    /// Seconds to wait before each in-place retry (the last entry repeats).
    pub turn_recovery_backoff_seconds: Vec<f64>,
    /// Accept a `kanban complete` that hands nothing over (no summary, result or metadata) on
    /// every board of this home; off by default, as the original refuses it. A profile's own
    /// `allow_empty_completion` wins for its tasks.
    pub allow_empty_completion: bool,
    /// A profile whose agent decomposes the board's triage cards as the dispatcher runs (the
    /// original's `auto_decompose`, with its orchestrator profile named); none by default.
    pub auto_decompose: Option<String>,
    /// Triage cards handed to the `auto_decompose` agent per pass (the original's
    /// `auto_decompose_per_tick`, default 3).
    pub auto_decompose_per_tick: u32,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        Self {
            max_spawn: 4,
            max_in_progress: None,
            max_in_progress_per_profile: None,
            meminfo_path: None,
            memory_pressure_path: None,
            failure_limit: 2,
            claim_ttl_seconds: 900,
            crash_grace_seconds: 30,
            rate_limit_cooldown_seconds: 300,
            stale_timeout_seconds: 0,
            heartbeat_max_stale_seconds: 3600,
            kill_wait_seconds: 5.0,
            interval_seconds: 5.0,
            default_profile: "default".to_owned(),
            mode: "direct".to_owned(),
            owner_lost_turn: "requeue".to_owned(),
            review_dispatch: true,
            turn_recovery: 3,
            turn_recovery_backoff_seconds: vec![15.0, 45.0, 90.0],
            allow_empty_completion: false,
            auto_decompose: None,
            auto_decompose_per_tick: 3,
        }
    }
}

/// `[profiles.<name>]`: which agent runs a task (or cron job) assigned to this profile.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProfileConfig {
    /// `command`, `builtin:complete`, `builtin:shell` or `builtin:probe`.
    pub agent: String,
    /// What this profile is for, in a sentence: an agent that decomposes or specifies a triage
    /// task reads it to route the work (`decompose --with`, `specify --with`).
    #[serde(default)]
    pub description: Option<String>,
    /// For `agent = "command"`: argv of the external agent (prompt on stdin).
    #[serde(default)]
    pub command: Vec<String>,
    /// Extra environment for the agent's process (never `HERMES_KANBAN_*`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Run this profile's tasks in goal mode even when they were not created with `--goal`.
    #[serde(default)]
    pub goal: bool,
    /// Turn budget of a goal task of this profile created without `--max-turns` (default 20).
    #[serde(default)]
    pub goal_max_turns: Option<u32>,
    /// Optional goal judge: argv of a command that reads the goal and the last response on stdin
    /// and prints `continue`, `done` or `blocked` (see the README's worker section).
    #[serde(default)]
    pub judge: Vec<String>,
    /// Accept empty completions of this profile's tasks (`None`: `[dispatch]`'s setting).
    #[serde(default)]
    pub allow_empty_completion: Option<bool>,
    /// The `gh` configuration folder (`GH_CONFIG_DIR`) whose login reads this profile's pull
    /// requests for a completion contract (default `<root>/profiles/<name>/gh`).
    #[serde(default)]
    pub gh_config_dir: Option<PathBuf>,
    /// Workers of this profile running at once on this host (None: `[dispatch]
    /// max_in_progress_per_profile`).
    #[serde(default)]
    pub max_in_progress: Option<u32>,
    /// Where this profile's skills (`NAME.md`) live (default `<root>/skills`; relative to the
    /// root).
    #[serde(default)]
    pub skills_dir: Option<PathBuf>,
}

/// `[cron]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CronConfig {
    /// Jobs run at once by one scheduler tick.
    pub max_parallel: u32,
    /// Lease of a fire claim; the runner heartbeats it every third of this.
    pub claim_ttl_seconds: i64,
    /// Seconds between daemon ticks.
    pub interval_seconds: f64,
    /// IANA zone for cron expressions (None = UTC).
    pub timezone: Option<String>,
}

impl Default for CronConfig {
    fn default() -> Self {
        Self {
            max_parallel: 4,
            claim_ttl_seconds: 600,
            interval_seconds: 30.0,
            timezone: None,
        }
    }
}

impl Config {
    /// Reads `<root>/kanban.toml`; a missing file yields the defaults.
    pub fn load(root: &Path) -> Result<Self, ConfigError> {
        let path = root.join(CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(ConfigError::Read { path, source }),
        }
    }

    /// Parses and validates the text of a `kanban.toml`; `path` only names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| boards::parse_error(path, &e))?;
        config.validate(path)?;
        Ok(config)
    }

    /// Checks every value against its documented range and every profile (see the README's
    /// Configuration section); the error names `path`, the key and what is accepted.
    pub fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        validate::check(self)
            .and_then(|()| turns::check(self))
            .and_then(|()| boards::check(&self.boards, path))
            .map_err(|problem| ConfigError::Invalid {
                path: path.to_owned(),
                problem,
            })
    }

    /// Whether a completion of a task of `profile` (its assignee; `None`: the default profile)
    /// must hand something over: the profile's `allow_empty_completion`, else `[dispatch]`'s.
    pub fn completion_requires_evidence(&self, profile: Option<&str>) -> bool {
        let name = profile.unwrap_or(&self.dispatch.default_profile);
        let allow = self
            .profiles
            .get(name)
            .and_then(|p| p.allow_empty_completion)
            .unwrap_or(self.dispatch.allow_empty_completion);
        !allow
    }

    /// The `gh` configuration folder of profile `name`: its `gh_config_dir`, else
    /// `<root>/profiles/<name>/gh` (a folder of its own even for a profile `kanban.toml` does
    /// not define, so a profile without a login is refused, never served by another's).
    pub fn gh_config_dir(&self, name: &str, root: &Path) -> PathBuf {
        self.profiles
            .get(name)
            .and_then(|p| p.gh_config_dir.as_ref())
            .map(|dir| root.join(dir))
            .unwrap_or_else(|| root.join("profiles").join(name).join("gh"))
    }

    /// The per-profile cap of profile `name`: its own `max_in_progress`, else `[dispatch]
    /// max_in_progress_per_profile`.
    pub fn profile_cap(&self, name: &str) -> Option<u32> {
        self.profiles
            .get(name)
            .and_then(|p| p.max_in_progress)
            .or(self.dispatch.max_in_progress_per_profile)
    }

    /// The skills folder of profile `name`: its `skills_dir` (under `root` when relative), else
    /// `<root>/skills`.
    pub fn skills_dir(&self, name: &str, root: &Path) -> PathBuf {
        self.profiles
            .get(name)
            .and_then(|p| p.skills_dir.as_ref())
            .map(|dir| root.join(dir))
            .unwrap_or_else(|| root.join("skills"))
    }

    /// The profile called `name`, or an error listing the known ones.
    pub fn profile(&self, name: &str, root: &Path) -> Result<&ProfileConfig, ConfigError> {
        self.profiles
            .get(name)
            .ok_or_else(|| ConfigError::UnknownProfile {
                name: name.to_owned(),
                path: root.join(CONFIG_FILE),
                known: self
                    .profiles
                    .keys()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_is_all_defaults() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Config::load(dir.path()).unwrap(), Config::default());
    }

    #[test]
    fn design_example_parses() {
        let text = r#"
[dispatch]
max_spawn = 4
failure_limit = 2
claim_ttl_seconds = 900
mode = "direct"

[profiles.coder]
agent = "command"
command = ["my-agent", "--print"]

[profiles.bot]
agent = "builtin:shell"
"#;
        let c = Config::parse(text, Path::new("kanban.toml")).unwrap();
        assert_eq!(c.dispatch.max_spawn, 4);
        assert_eq!(c.profiles["coder"].command, ["my-agent", "--print"]);
        assert_eq!(c.profiles["bot"].agent, "builtin:shell");
    }

    #[test]
    fn unknown_key_is_an_error_naming_it() {
        let err = Config::parse("[dispatch]\nmax_spwan = 3\n", Path::new("k.toml")).unwrap_err();
        assert!(err.to_string().contains("max_spwan"), "{err}");
    }
}
