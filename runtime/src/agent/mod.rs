//! Agents: what actually works on a task (or a cron job's prompt) for one turn.
//!
//! The worker and `cron::run_job` both build an agent from a profile in `kanban.toml` with
//! [`build`] and call [`Agent::run`]. Built-in agents act on the board only through `gates`, so
//! inside a non-dispatcher-owned context (a cron job fired in a worker) they cannot touch the
//! worker's task. Every child process (the `command` agent, `builtin:shell`) is built by
//! `identity::command`, which scrubs the worker identity when the context is not owned; the
//! request's `workdir` becomes the child's cwd (the agent never changes the process's cwd or
//! environment).
//!
//! Exit classes keep their meaning everywhere: 0 success, 75 rate limited, 78 terminal provider,
//! death by SIGINT/SIGTERM interrupted, [`RETRYABLE_EXIT`] (76) a failure worth retrying in place,
//! anything else a failure. A worker runs turns with [`Agent::run_streaming`], so what the agent
//! prints reaches the task log while it runs.

mod builtin;
mod command;
mod preset;

use std::path::Path;
use std::sync::Arc;

use crate::config::ProfileConfig;

pub use builtin::ProbeAgent;
pub(crate) use builtin::{CompleteAgent, ShellAgent};
pub(crate) use command::CommandAgent;

/// One turn's input.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The prompt (task context for a worker, the job prompt for cron).
    pub prompt: &'a str,
    /// What `builtin:shell` runs: the task body for a worker, the prompt for a cron job.
    pub script: &'a str,
    /// Working directory for child processes (the workspace, or a cron job's workdir).
    pub workdir: Option<&'a Path>,
    /// A turn of a goal: a successful exit settles the turn only, and the goal loop (the task's
    /// status, the judge, the turn budget) decides what follows, so a built-in agent does not
    /// complete the task on its own.
    pub goal: bool,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "code")]
pub enum TurnExit {
    Success,
    /// The agent failed; the code is its exit status class.
    Failed(i32),
    /// Provider rate limit: the worker exits 75.
    RateLimited,
    /// Terminal provider error: the worker exits 78.
    TerminalProvider,
    /// Interrupted by a signal: the worker exits 130.
    Interrupted,
}

impl TurnExit {
    /// Whether the agent asked for an in-place retry of the turn ([`RETRYABLE_EXIT`]).
    pub fn is_retryable(self) -> bool {
        self == TurnExit::Failed(RETRYABLE_EXIT)
    }

    /// The class recorded in a `turn` event: `ok`, `retryable`, `failed`, `rate_limited`,
    /// `terminal` or `interrupted`.
    pub fn class(self) -> &'static str {
        match self {
            TurnExit::Success => "ok",
            TurnExit::Failed(RETRYABLE_EXIT) => "retryable",
            TurnExit::Failed(75) | TurnExit::RateLimited => "rate_limited",
            TurnExit::Failed(78) | TurnExit::TerminalProvider => "terminal",
            TurnExit::Failed(130) | TurnExit::Interrupted => "interrupted",
            TurnExit::Failed(_) => "failed",
        }
    }

    /// The exit status the agent's process had (0, its code, 75, 78, 130).
    pub fn code(self) -> i32 {
        match self {
            TurnExit::Success => 0,
            TurnExit::Failed(code) => code,
            TurnExit::RateLimited => 75,
            TurnExit::TerminalProvider => 78,
            TurnExit::Interrupted => 130,
        }
    }

    /// The class of a child's exit status.
    pub fn from_status(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(0), _) => TurnExit::Success,
            (Some(75), _) => TurnExit::RateLimited,
            (Some(78), _) => TurnExit::TerminalProvider,
            (Some(code), _) => TurnExit::Failed(code),
            (None, Some(2 | 15)) => TurnExit::Interrupted,
            (None, Some(sig)) => TurnExit::Failed(128 + sig),
            (None, None) => TurnExit::Failed(1),
        }
    }
}

/// One turn's output.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reply {
    pub exit: TurnExit,
    /// The agent's final response (last message).
    pub final_response: String,
    /// Everything it printed (bounded by the agent).
    pub output: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(
        "unknown agent kind `{0}`: use `command`, a preset (`claude-code`, `codex`, `gemini`, `aider`, `hermes`), `builtin:complete`, `builtin:shell` or `builtin:probe`"
    )]
    UnknownKind(String),
    #[error("profile uses agent = \"command\" but its `command` is empty")]
    EmptyCommand,
    #[error("agent failed to start")]
    Start(#[source] std::io::Error),
    #[error("agent I/O failed")]
    Io(#[source] std::io::Error),
    #[error("{0}")]
    Other(String),
}

/// Token usage (and cost, when the CLI reports it) summed over a run's turns.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cache_read_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Usage {
    pub(crate) fn add(&mut self, input: u64, output: u64, cached: u64) {
        self.input_tokens += input;
        self.output_tokens += output;
        self.cache_read_tokens += cached;
    }

    pub(crate) fn add_cost(&mut self, cost: f64) {
        self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + cost);
    }

    pub(crate) fn merge(&mut self, other: &Usage) {
        self.add(
            other.input_tokens,
            other.output_tokens,
            other.cache_read_tokens,
        );
        if let Some(cost) = other.cost_usd {
            self.add_cost(cost);
        }
    }
}

/// What a preset agent knows of its CLI's conversation in this run: stored on the run (its
/// metadata's `agent` object) after every turn, shown by `show` and the run's JSON.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AgentSession {
    /// The preset (`claude-code`, `codex`, …).
    pub agent: String,
    /// The CLI's own session (conversation) id, which follow-up turns resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub usage: Usage,
    /// Turns run with this agent in the run.
    pub turns: u32,
}

/// What the task asks of the agent beyond the prompt: the task's model, provider, reasoning
/// effort and skills (read from the task as they are), the profile's name and the runtime cap.
/// Each preset maps it to its CLI's own flags in one function (`steering_args`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Steering {
    pub profile: String,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub reasoning_effort: Option<String>,
    pub skills: Vec<String>,
    pub max_runtime_seconds: Option<i64>,
}

/// An agent runs turns.
pub trait Agent: Send {
    fn run(&mut self, request: &Request<'_>) -> Result<Reply, AgentError>;

    /// [`Agent::run`], handing what the agent prints to `sink` as it is printed (an agent whose
    /// output is not a process's, a built-in one, hands it over when the turn ends).
    fn run_streaming(
        &mut self,
        request: &Request<'_>,
        sink: &Arc<dyn OutputSink>,
    ) -> Result<Reply, AgentError> {
        let reply = self.run(request)?;
        if !reply.output.is_empty() {
            sink.write(reply.output.as_bytes());
            if !reply.output.ends_with('\n') {
                sink.write(b"\n");
            }
        }
        Ok(reply)
    }

    /// The CLI's session and usage so far in this run (a preset agent), else `None`.
    fn session(&self) -> Option<&AgentSession> {
        None
    }

    /// Whether the next turn resumes the agent's own conversation, so a follow-up turn needs
    /// only the new instructions, not the whole task prompt again.
    fn resumes_session(&self) -> bool {
        false
    }
}

/// Receives an agent process's stdout and stderr chunk by chunk, as they are read (the worker's
/// task log). Called from the reading threads, so it must serialise writes itself.
pub trait OutputSink: Send + Sync {
    fn write(&self, bytes: &[u8]);
}

/// The exit status an agent uses to say "this turn failed, but retrying it in place may work"
/// (a transient error). The worker retries such a turn in the same run (see the README's worker
/// section); any other failure ends the worker. Distinct from 75 (rate limited), 78 (terminal
/// provider) and 130 (interrupted), which are never retried in place.
pub(crate) const RETRYABLE_EXIT: i32 = 76;

/// Builds the agent a profile names (`agent = "command" | "builtin:complete" | "builtin:shell" |
/// "builtin:probe"`). Construction starts nothing and reads no identity.
pub fn build(profile: &ProfileConfig) -> Result<Box<dyn Agent>, AgentError> {
    build_for(profile, &Steering::default())
}

/// [`build`] with the task's steering (a preset maps it to its CLI's flags).
pub fn build_for(
    profile: &ProfileConfig,
    steering: &Steering,
) -> Result<Box<dyn Agent>, AgentError> {
    if let Some(preset) = preset::Preset::parse(&profile.agent) {
        return Ok(Box::new(preset::PresetAgent::new(
            preset, profile, steering,
        )));
    }
    match profile.agent.as_str() {
        "command" => Ok(Box::new(CommandAgent::new(profile)?)),
        "builtin:complete" => Ok(Box::new(CompleteAgent)),
        "builtin:shell" => Ok(Box::new(ShellAgent::new(profile))),
        "builtin:probe" => Ok(Box::new(ProbeAgent)),
        other => Err(AgentError::UnknownKind(other.to_owned())),
    }
}

/// Output kept from a child (the tail), in bytes.
pub(crate) const OUTPUT_LIMIT: usize = 64 * 1024;

/// The last `max` bytes of `text`, cut at a character boundary.
pub fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Profile environment entries a child may receive: never an identity key or the marker, which
/// only `identity::command` decides.
fn profile_env(profile: &ProfileConfig) -> ProfileEnv {
    let mut env = ProfileEnv::default();
    for (k, v) in &profile.env {
        if !k.starts_with("HERMES_KANBAN_") && k.as_str() != crate::identity::DELEGATED_CHILD_MARKER
        {
            env.0.insert(k.clone(), v.clone());
        }
    }
    env
}

/// A profile's own environment for its agent's process, as [`profile_env`] filtered it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProfileEnv(pub(crate) std::collections::BTreeMap<String, String>);

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(agent: &str, command: &[&str]) -> ProfileConfig {
        ProfileConfig {
            agent: agent.to_owned(),
            command: command.iter().map(|s| (*s).to_owned()).collect(),
            env: Default::default(),
            ..Default::default()
        }
    }

    #[test]
    fn build_knows_every_kind_and_names_them_on_error() {
        for kind in ["builtin:complete", "builtin:shell", "builtin:probe"] {
            assert!(build(&profile(kind, &[])).is_ok(), "{kind}");
        }
        assert!(build(&profile("command", &["cat"])).is_ok());
        assert!(matches!(
            build(&profile("command", &[])),
            Err(AgentError::EmptyCommand)
        ));
        let err = build(&profile("gpt", &[])).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("builtin:probe")));
    }

    #[test]
    fn tail_cuts_at_a_char_boundary() {
        assert_eq!(tail("hello", 10), "hello");
        assert_eq!(tail("hello", 3), "llo");
        assert_eq!(tail("aé", 1), "");
    }

    #[test]
    fn profile_env_drops_identity_keys() {
        let mut p = profile("command", &["x"]);
        p.env.insert("HERMES_KANBAN_TASK".into(), "t_x".into());
        p.env
            .insert("HERMES_DELEGATED_CHILD_CONTEXT".into(), "".into());
        p.env.insert("MODEL".into(), "m".into());
        assert_eq!(
            profile_env(&p).0.into_iter().collect::<Vec<_>>(),
            vec![("MODEL".to_owned(), "m".to_owned())]
        );
    }
}
