//! The built-in agents against a real board: in a dispatcher-owned worker they complete the
//! worker's own task (fenced on its run); inside a cron job's scope they never do.
//!
//! Each scenario runs in a re-executed child of this test binary that carries the worker
//! environment (`Command::env`), never in this process.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary and real processes

use std::path::Path;
use std::process::{Command, Output};

use kanban_runtime::agent::{self, Request, TurnExit};
use kanban_runtime::board::{Board, OpenOptions, Status};
use kanban_runtime::config::ProfileConfig;
use kanban_runtime::identity;

const CHILD_MARK: &str = "KANBAN_CRON_AGENTS_CHILD";

fn kanban(home: &Path, args: &[&str]) -> serde_json::Value {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_kanban"))
        .arg("--home")
        .arg(home)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Creates and claims a task; returns its id and the worker env.
fn worker(home: &Path) -> (String, Vec<(&'static str, String)>) {
    let task = kanban(home, &["create", "work", "--json"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let claim = kanban(home, &["claim", &task, "--json"]);
    let env = vec![
        ("HERMES_KANBAN_TASK", task.clone()),
        ("HERMES_KANBAN_RUN_ID", claim["run_id"].to_string()),
        (
            "HERMES_KANBAN_CLAIM_LOCK",
            claim["claim_lock"].as_str().unwrap().to_owned(),
        ),
        (
            "HERMES_KANBAN_DB",
            home.join("kanban.db").to_string_lossy().into_owned(),
        ),
        ("HERMES_KANBAN_BOARD", "default".into()),
    ];
    (task, env)
}

fn run_child(name: &str, agent_kind: &str, script: &str, env: &[(&str, String)]) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_MARK, agent_kind)
        .env("KANBAN_CRON_AGENTS_SCRIPT", script)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child {name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn board(home: &Path) -> Board {
    Board::open_path(&home.join("kanban.db"), &OpenOptions::default()).unwrap()
}

/// Builds the agent named by the parent and runs one turn; `lowered` runs it in a cron scope.
fn child_turn(lowered: bool) -> agent::Reply {
    let kind = std::env::var(CHILD_MARK).expect("run only by its parent test");
    let script = std::env::var("KANBAN_CRON_AGENTS_SCRIPT").unwrap_or_default();
    let profile = ProfileConfig {
        agent: kind,
        command: Vec::new(),
        env: Default::default(),
        ..Default::default()
    };
    let _scope = lowered.then(identity::non_dispatcher_owned_context);
    let mut agent = agent::build(&profile).unwrap();
    agent
        .run(&Request {
            prompt: &script,
            script: &script,
            workdir: None,
            goal: false,
        })
        .unwrap()
}

#[test]
fn owned_builtins_complete_the_workers_own_task() {
    for (kind, script, summary) in [
        (
            "builtin:complete",
            "tidy the docs",
            "completed by builtin:complete: tidy the docs",
        ),
        (
            "builtin:shell",
            "echo first; echo the tail",
            "first\nthe tail",
        ),
        ("builtin:probe", "", "probe: identity reported"),
    ] {
        let home = tempfile::tempdir().unwrap();
        let (task, env) = worker(home.path());
        run_child("child_owned_turn", kind, script, &env);
        let t = board(home.path()).get_task(&task).unwrap();
        assert_eq!(t.status, Status::Done, "{kind} completed the owned task");
        let runs = board(home.path()).runs(&task).unwrap();
        assert_eq!(runs[0].summary.as_deref(), Some(summary), "{kind}");
    }
}

#[test]
#[ignore = "run by `owned_builtins_complete_the_workers_own_task`"]
fn child_owned_turn() {
    let reply = child_turn(false);
    assert_eq!(reply.exit, TurnExit::Success, "{reply:?}");
}

#[test]
fn builtins_in_a_cron_scope_leave_the_workers_task_alone() {
    for (kind, script) in [
        ("builtin:complete", "tidy"),
        ("builtin:shell", "echo hi"),
        ("builtin:probe", ""),
    ] {
        let home = tempfile::tempdir().unwrap();
        let (task, env) = worker(home.path());
        let before = board(home.path()).get_task(&task).unwrap();
        run_child("child_lowered_turn", kind, script, &env);
        let after = board(home.path()).get_task(&task).unwrap();
        assert_eq!(after.status, Status::Running, "{kind}");
        assert_eq!(after.last_heartbeat_at, before.last_heartbeat_at, "{kind}");
        assert_eq!(after.current_run_id, before.current_run_id, "{kind}");
    }
}

#[test]
#[ignore = "run by `builtins_in_a_cron_scope_leave_the_workers_task_alone`"]
fn child_lowered_turn() {
    let reply = child_turn(true);
    assert_eq!(reply.exit, TurnExit::Success, "{reply:?}");
    // The shell's own child saw no identity either.
    if std::env::var(CHILD_MARK).as_deref() == Ok("builtin:probe") {
        let v: serde_json::Value = serde_json::from_str(&reply.final_response).unwrap();
        assert_eq!(v["identity"]["owned"], false);
        assert!(v["child_env"].get("HERMES_KANBAN_TASK").is_none());
    }
}
