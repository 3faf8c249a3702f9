//! Cron: the per-home job store ([`store`]), the schedule grammar ([`schedule`]), the scheduler
//! tick with durable fire claims and a bounded pool ([`scheduler`]), and [`run_job`], which runs a
//! job's agent **outside the dispatcher-owned worker context**.
//!
//! A cron job can fire inside a kanban worker's process or shell (`kanban cron run` typed by the
//! worker's agent, or a scheduler started from there). The worker's identity stays in the process
//! environment, where the worker's own heartbeat needs it; what keeps the job from acting as the
//! worker is the ownership context: [`run_job`] opens a non-owned scope before the agent is even
//! constructed and closes it on every path (errors and panics included), so every gate answers
//! "not yours" to the agent, and every child process the agent starts (built by
//! `identity::command`) loses the identity keys and carries the delegated-child marker.
//!
//! Never here: mutating the process environment or the working directory (a job's workdir is
//! handed to the agent's child `Command` through [`Request::workdir`]), reading `HERMES_KANBAN_*`,
//! reading the wall clock outside an injected [`Clock`], SQL outside [`store`].

pub mod schedule;
pub mod scheduler;
pub mod store;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::agent::{self, Agent, AgentError, Request, TurnExit};
use crate::clock::Clock;
use crate::config::{Config, ConfigError};
use crate::identity;

pub use schedule::Schedule;
pub(crate) use schedule::ScheduleError;
pub(crate) use scheduler::{DaemonEvent, FireReport};
pub use scheduler::{Scheduler, SchedulerSettings};
pub use store::{Job, JobState, NewJob, Repeat, Store};

/// Everything cron can fail with; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum CronError {
    #[error("the operating system's random number generator failed")]
    Random { source: std::io::Error },
    #[error("cannot use {path}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the cron store {path} failed")]
    Db {
        path: PathBuf,
        source: crate::db::Error,
    },
    /// Opening or writing the store failed in the store layer it shares with the board (a busy
    /// store, a read-only file, a file that is not SQLite, …); the message names the file.
    #[error(transparent)]
    Store(crate::board::BoardError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("no cron job `{reference}` (see `kanban cron list`)")]
    NotFound { reference: String },
    #[error("`{reference}` names several cron jobs ({ids}); use the id")]
    Ambiguous { reference: String, ids: String },
    #[error("--repeat must be at least 1 (omit it to repeat forever)")]
    InvalidRepeat,
    #[error("the schedule `{schedule}` never fires")]
    NeverRuns { schedule: String },
    #[error("workdir {path}: {reason}")]
    InvalidWorkdir { path: PathBuf, reason: String },
    #[error("cron job {id} has finished its runs; add a new job instead")]
    Retired { id: String },
    #[error("cron job {id} is a one-shot whose time has passed; remove it and add a new one")]
    OneShotPassed { id: String },
    #[error("cron job {id} is already running (claimed by {owner}); wait for it to finish")]
    AlreadyRunning { id: String, owner: String },
    #[error("cron job {id} is not due (another scheduler fired it, or it was paused)")]
    NotDue { id: String },
    #[error("cron job {id} is stored in an unreadable form: {message}; remove and re-add it")]
    Corrupt { id: String, message: String },
    #[error("{0}")]
    Agent(String),
    #[error("cannot start a cron thread")]
    Thread(#[source] std::io::Error),
}

/// What one run of a job produced (`kanban cron run --json` prints it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOutcome {
    pub success: bool,
    /// The full output document (markdown) that is saved per run.
    pub output: String,
    /// The agent's final response.
    pub final_response: String,
    pub error: Option<String>,
}

/// Builds the agent a job's profile names. [`run_job`] calls it inside the non-owned scope, so
/// whatever the agent captures at construction sees the cron context, not the worker's.
pub trait AgentSource: Send + Sync {
    fn build(&self, profile: &str) -> Result<Box<dyn Agent>, AgentError>;
}

/// The production source: profiles of `<root>/kanban.toml`, built by [`agent::build`].
#[derive(Debug, Clone)]
pub(crate) struct ConfigAgents {
    config: Config,
    root: PathBuf,
}

impl ConfigAgents {
    pub fn new(config: Config, root: &Path) -> Self {
        Self {
            config,
            root: root.to_owned(),
        }
    }
}

impl AgentSource for ConfigAgents {
    fn build(&self, profile: &str) -> Result<Box<dyn Agent>, AgentError> {
        let profile = self
            .config
            .profile(profile, &self.root)
            .map_err(|e| AgentError::Other(crate::error_chain(&e)))?;
        // A job has no task to steer it: every placeholder argument of a `command` profile is
        // left out, as for a task that sets none.
        let unsteered = crate::config::ProfileConfig {
            command: crate::home::steering::TaskSteering::default().expand_argv(&profile.command),
            ..profile.clone()
        };
        agent::build(&unsteered)
    }
}

/// Runs one job's agent for one turn and reports the outcome. Never panics and never returns
/// early past the scope: the non-owned scope is opened before the agent is built and closed when
/// this returns, whether the agent succeeded, failed, or panicked (the panic becomes an error
/// outcome). `clock` stamps the output document.
pub fn run_job(job: &Job, agents: &dyn AgentSource, clock: &dyn Clock) -> RunOutcome {
    let started = clock.now();
    let scope = identity::non_dispatcher_owned_context();
    let turn = std::panic::catch_unwind(AssertUnwindSafe(|| one_turn(job, agents)));
    drop(scope);
    let (success, final_response, agent_output, error) = match turn {
        Ok(Ok(reply)) => {
            let error = match reply.exit {
                TurnExit::Success => None,
                TurnExit::Failed(code) => Some(format!("the agent failed (exit status {code})")),
                TurnExit::RateLimited => {
                    Some("the agent's provider is rate limited (exit 75); it runs again at its next occurrence".to_owned())
                }
                TurnExit::TerminalProvider => Some(
                    "the agent's provider refused permanently (exit 78); check the profile's credentials"
                        .to_owned(),
                ),
                TurnExit::Interrupted => Some("the agent was interrupted".to_owned()),
            };
            (error.is_none(), reply.final_response, reply.output, error)
        }
        Ok(Err(e)) => (
            false,
            String::new(),
            String::new(),
            Some(crate::error_chain(&e)),
        ),
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            let error = format!("the agent panicked: {message}");
            (false, String::new(), String::new(), Some(error))
        }
    };
    let output = output_document(
        job,
        started,
        clock.now(),
        &final_response,
        &agent_output,
        error.as_deref(),
    );
    RunOutcome {
        success,
        output,
        final_response,
        error,
    }
}

/// Builds the agent and runs its turn; runs inside the non-owned scope.
fn one_turn(job: &Job, agents: &dyn AgentSource) -> Result<agent::Reply, CronError> {
    if let Some(dir) = &job.workdir
        && !dir.is_dir()
    {
        return Err(CronError::InvalidWorkdir {
            path: dir.clone(),
            reason: "is no longer a directory; fix or remove the job".to_owned(),
        });
    }
    let mut agent = agents
        .build(&job.profile)
        .map_err(|e| CronError::Agent(crate::error_chain(&e)))?;
    let request = Request {
        prompt: &job.prompt,
        script: &job.prompt,
        workdir: job.workdir.as_deref(),
        goal: false,
    };
    agent
        .run(&request)
        .map_err(|e| CronError::Agent(crate::error_chain(&e)))
}

fn output_document(
    job: &Job,
    started: i64,
    ended: i64,
    final_response: &str,
    agent_output: &str,
    error: Option<&str>,
) -> String {
    use std::fmt::Write as _;
    let mut doc = String::new();
    let _ = writeln!(doc, "# Cron job {} ({})\n", job.name, job.id);
    let _ = writeln!(doc, "- schedule: {}", job.schedule);
    let _ = writeln!(doc, "- profile: {}", job.profile);
    let _ = writeln!(doc, "- started: {}", iso(started));
    let _ = writeln!(doc, "- ended: {}", iso(ended));
    let _ = writeln!(
        doc,
        "- status: {}",
        if error.is_none() { "ok" } else { "error" }
    );
    let _ = writeln!(doc, "\n## Prompt\n\n{}", job.prompt);
    let _ = writeln!(doc, "\n## Response\n\n{final_response}");
    if !agent_output.is_empty() && agent_output != final_response {
        let _ = writeln!(doc, "\n## Output\n\n```\n{agent_output}\n```");
    }
    if let Some(e) = error {
        let _ = writeln!(doc, "\n## Error\n\n{e}");
    }
    doc
}

/// Epoch seconds as `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn iso(epoch: i64) -> String {
    jiff::Timestamp::from_second(epoch)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|_| epoch.to_string())
}
