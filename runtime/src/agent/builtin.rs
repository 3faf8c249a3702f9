//! The built-in agents: `builtin:complete`, `builtin:shell` and `builtin:probe`.
//!
//! They touch the board only through [`crate::gates::owned_identity`]: a task is completed only
//! when the current context is a dispatcher-owned worker, and then only that worker's own task,
//! fenced on its run id. Inside a cron job (a non-owned context) they never see the worker's
//! task, so they reply without completing anything.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use super::command::collect;
use super::{
    Agent, AgentError, OUTPUT_LIMIT, OutputSink, Reply, Request, TurnExit, profile_env, tail,
};
use crate::board::{Board, Completion, OpenOptions, Outcome};
use crate::clock::{Clock, SystemClock};
use crate::config::ProfileConfig;
use crate::{gates, identity};

/// Summary length `builtin:shell` completes with (the stdout tail).
const SUMMARY_LIMIT: usize = 2_000;

/// Completes the owned task (if this context owns one) with `summary`, fenced on the worker's
/// run id. Returns the task id completed, `None` when no task is owned.
fn complete_owned_task(summary: &str) -> Result<Option<String>, AgentError> {
    let Some(worker) = gates::owned_identity() else {
        return Ok(None);
    };
    let db: PathBuf = match &worker.db {
        Some(db) => db.clone(),
        None => {
            let root = crate::home::root_dir(None)
                .map_err(|e| AgentError::Other(crate::error_chain(&e)))?;
            crate::home::resolve(&root, worker.board.as_deref())
                .map_err(|e| AgentError::Other(crate::error_chain(&e)))?
                .db_path
        }
    };
    let board = Board::open_path(&db, &OpenOptions::default())
        .map_err(|e| AgentError::Other(crate::error_chain(&e)))?;
    let completion = Completion {
        expected_run_id: worker.run_id,
        summary: Some(summary.to_owned()),
        require_evidence: true,
        ..Completion::default()
    };
    match board
        .complete(&worker.task, &completion, SystemClock.now())
        .map_err(|e| AgentError::Other(crate::error_chain(&e)))?
    {
        Outcome::Done(_) => Ok(Some(worker.task)),
        Outcome::Refused(refusal) => Err(AgentError::Other(format!(
            "could not complete task {}: {refusal}",
            worker.task
        ))),
    }
}

/// `builtin:complete`: completes the owned task with a short summary; elsewhere just replies.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CompleteAgent;

impl Agent for CompleteAgent {
    fn run(&mut self, request: &Request<'_>) -> Result<Reply, AgentError> {
        let first_line = request
            .prompt
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        let summary = format!(
            "completed by builtin:complete: {}",
            first_line.chars().take(200).collect::<String>()
        );
        let final_response = match complete_owned_task(&summary)? {
            Some(task) => format!("completed task {task}"),
            None => "no owned task; nothing to complete".to_owned(),
        };
        Ok(Reply {
            exit: TurnExit::Success,
            output: final_response.clone(),
            final_response,
        })
    }
}

/// `builtin:shell`: runs the request's script with `sh -c` in the workdir (scrubbed env inside a
/// non-owned context). Exit 0 completes the owned task, if any, with the stdout tail — except
/// in a goal's turn, which exit 0 only settles (the goal loop decides what follows).
#[derive(Debug, Clone)]
pub(crate) struct ShellAgent {
    env: super::ProfileEnv,
}

impl ShellAgent {
    pub fn new(profile: &ProfileConfig) -> Self {
        Self {
            env: profile_env(profile),
        }
    }
}

impl Agent for ShellAgent {
    fn run(&mut self, request: &Request<'_>) -> Result<Reply, AgentError> {
        self.turn(request, None)
    }

    fn run_streaming(
        &mut self,
        request: &Request<'_>,
        sink: &Arc<dyn OutputSink>,
    ) -> Result<Reply, AgentError> {
        self.turn(request, Some(sink))
    }
}

impl ShellAgent {
    fn turn(
        &mut self,
        request: &Request<'_>,
        sink: Option<&Arc<dyn OutputSink>>,
    ) -> Result<Reply, AgentError> {
        let mut cmd = identity::command("sh");
        cmd.arg("-c")
            .arg(request.script)
            .envs(&self.env.0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(dir) = request.workdir {
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn().map_err(AgentError::Start)?;
        let (stdout, stderr, status) = collect(&mut child, sink)?;
        let exit = TurnExit::from_status(status);
        let mut output = stdout.clone();
        if !stderr.is_empty() {
            output.push_str("\n[stderr]\n");
            output.push_str(&stderr);
        }
        let final_response = tail(stdout.trim_end(), OUTPUT_LIMIT).to_owned();
        if exit == TurnExit::Success && !request.goal {
            let summary = tail(stdout.trim_end(), SUMMARY_LIMIT);
            let summary = if summary.is_empty() {
                "shell script exited 0"
            } else {
                summary
            };
            complete_owned_task(summary)?;
        }
        Ok(Reply {
            exit,
            final_response,
            output: tail(&output, OUTPUT_LIMIT).to_owned(),
        })
    }
}

/// `builtin:probe`: reports what its context believes (`kanban identity --json`) and the
/// identity environment a child it started would receive; completes a task only if it owns one.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProbeAgent;

impl Agent for ProbeAgent {
    fn run(&mut self, _request: &Request<'_>) -> Result<Reply, AgentError> {
        let report = serde_json::json!({
            "identity": gates::report(),
            "child_env": identity::child_env_preview(),
        });
        let final_response = report.to_string();
        complete_owned_task("probe: identity reported")?;
        Ok(Reply {
            exit: TurnExit::Success,
            output: final_response.clone(),
            final_response,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(script: &str) -> Request<'_> {
        Request {
            prompt: script,
            script,
            workdir: None,
            goal: false,
        }
    }

    #[test]
    fn shell_reports_its_exit_class() {
        let mut shell = ShellAgent {
            env: crate::agent::ProfileEnv::default(),
        };
        let ok = shell.run(&req("echo one; echo two")).unwrap();
        assert_eq!(ok.exit, TurnExit::Success);
        assert_eq!(ok.final_response, "one\ntwo");
        assert_eq!(
            shell.run(&req("exit 75")).unwrap().exit,
            TurnExit::RateLimited
        );
        assert_eq!(
            shell.run(&req("exit 78")).unwrap().exit,
            TurnExit::TerminalProvider
        );
        let failed = shell.run(&req("echo oops >&2; exit 4")).unwrap();
        assert_eq!(failed.exit, TurnExit::Failed(4));
        assert!(failed.output.contains("oops"));
    }

    #[test]
    fn probe_inside_a_non_owned_scope_reports_not_owned_and_the_marker() {
        let _scope = identity::non_dispatcher_owned_context();
        let reply = ProbeAgent.run(&req("")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&reply.final_response).unwrap();
        assert_eq!(v["identity"]["owned"], false);
        assert_eq!(v["child_env"]["HERMES_DELEGATED_CHILD_CONTEXT"], "1");
    }
}
