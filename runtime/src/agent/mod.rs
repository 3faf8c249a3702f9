//! Agents: what actually works on a task (or a cron job's prompt) for one turn.
//!
//! The worker and `cron::run_job` both build an agent from a profile in `kanban.toml` and call
//! [`Agent::run`]. Built-in agents act on the board only through `gates`, so inside a
//! non-dispatcher-owned context (a cron job fired in a worker) they cannot touch the worker's task.
//! External agents are child processes built by the identity module's sanctioned builder.

use std::path::Path;

/// One turn's input.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The prompt (task context for a worker, the job prompt for cron).
    pub prompt: &'a str,
    /// What `builtin:shell` runs: the task body for a worker, the prompt for a cron job.
    pub script: &'a str,
    /// Working directory for child processes (the workspace, or a cron job's workdir).
    pub workdir: Option<&'a Path>,
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
        "unknown agent kind `{0}`: use `command`, `builtin:complete`, `builtin:shell` or `builtin:probe`"
    )]
    UnknownKind(String),
    #[error("profile uses agent = \"command\" but its `command` is empty")]
    EmptyCommand,
    #[error("agent failed to start: {0}")]
    Start(#[source] std::io::Error),
    #[error("agent I/O failed: {0}")]
    Io(#[source] std::io::Error),
    #[error("{0}")]
    Other(String),
}

/// An agent runs turns.
pub trait Agent: Send {
    fn run(&mut self, request: &Request<'_>) -> Result<Reply, AgentError>;
}
