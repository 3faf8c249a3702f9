//! Shared helpers of the dispatch end-to-end tests: a temporary kanban home with a `kanban.toml`,
//! the real `kanban` binary, the real board file, and polling with deadlines (never sleeps used
//! as synchronisation, never assertions on wall-clock durations).

#![allow(dead_code)]
// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
// Test helpers: a failed setup step should fail the test at once, with the panic message.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kanban_runtime::board::{Board, NewTask, OpenOptions, StoredEvent};

/// Identity and location knobs a test must never leak from its own environment into a child.
const SCRUB: &[&str] = &[
    "HERMES_KANBAN_TASK",
    "HERMES_KANBAN_RUN_ID",
    "HERMES_KANBAN_CLAIM_LOCK",
    "HERMES_KANBAN_WORKSPACE",
    "HERMES_KANBAN_WORKSPACES_ROOT",
    "HERMES_KANBAN_BOARD",
    "HERMES_KANBAN_DB",
    "HERMES_KANBAN_HOME",
    "HERMES_KANBAN_BRANCH",
    "HERMES_KANBAN_GOAL_MODE",
    "HERMES_KANBAN_GOAL_MAX_TURNS",
    "HERMES_KANBAN_CLAIM_TTL_SECONDS",
    "HERMES_KANBAN_CRASH_GRACE_SECONDS",
    "HERMES_KANBAN_RATE_LIMIT_COOLDOWN_SECONDS",
    "HERMES_DELEGATED_CHILD_CONTEXT",
    "HERMES_HOME",
];

/// A `[dispatch]` section with short timings plus the built-in profiles `done` (builtin:complete)
/// and `sh` (builtin:shell).
pub fn config(extra_dispatch: &str) -> String {
    format!(
        "[dispatch]\ncrash_grace_seconds = 0\nrate_limit_cooldown_seconds = 2\nkill_wait_seconds = 1.0\n\
         interval_seconds = 0.5\ndefault_profile = \"done\"\n{extra_dispatch}\n\n\
         [profiles.done]\nagent = \"builtin:complete\"\n\n[profiles.sh]\nagent = \"builtin:shell\"\n"
    )
}

pub struct Home {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

impl Home {
    pub fn new(config_text: &str) -> Home {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        std::fs::write(root.join("kanban.toml"), config_text).unwrap();
        let home = Home { _dir: dir, root };
        drop(home.board());
        home
    }

    pub fn board(&self) -> Board {
        let location = kanban_runtime::home::resolve(&self.root, Some("default")).unwrap();
        Board::open(&location, &OpenOptions::create()).unwrap()
    }

    pub fn create(&self, new: NewTask) -> String {
        self.board().create_task(&new, now()).unwrap().id
    }

    pub fn task(title: &str, assignee: &str, body: Option<&str>, parents: Vec<String>) -> NewTask {
        NewTask {
            title: title.to_owned(),
            assignee: Some(assignee.to_owned()),
            body: body.map(str::to_owned),
            parents,
            ..NewTask::default()
        }
    }

    /// `kanban --home <root> <args…>` with a scrubbed environment.
    pub fn kanban(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kanban"));
        for key in SCRUB {
            cmd.env_remove(key);
        }
        cmd.arg("--home").arg(&self.root).args(args);
        cmd
    }

    /// Runs `kanban dispatch --until-idle`, failing the test after `limit`.
    pub fn dispatch_until_idle(&self, extra: &[&str], limit: Duration) -> Output {
        let mut args = vec!["dispatch", "--until-idle"];
        args.extend_from_slice(extra);
        let child = self
            .kanban(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_output(child, limit)
    }

    /// Starts the dispatcher daemon; it is stopped with SIGTERM when the guard drops.
    pub fn daemon(&self) -> Daemon {
        self.daemon_with_interval("0.5")
    }

    /// Starts the daemon with `--interval SECS`.
    pub fn daemon_with_interval(&self, secs: &str) -> Daemon {
        let child = self
            .kanban(&["dispatch", "--interval", secs])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Daemon(child)
    }

    pub fn events(&self, id: &str) -> Vec<StoredEvent> {
        let mut events = self.board().events(id, None).unwrap();
        events.sort_by_key(|e| e.id);
        events
    }

    /// Outcomes of the task's runs, oldest first.
    pub fn run_outcomes(&self, id: &str) -> Vec<String> {
        self.board()
            .runs(id)
            .unwrap()
            .into_iter()
            .map(|r| r.outcome.unwrap_or_default())
            .collect()
    }

    pub fn kinds(&self, id: &str) -> Vec<String> {
        self.events(id).into_iter().map(|e| e.kind).collect()
    }

    /// Polls `cond` on a fresh board connection every 20 ms until it holds or `limit` passes.
    pub fn wait_for(&self, what: &str, limit: Duration, cond: impl Fn(&Board) -> bool) {
        let board = self.board();
        let deadline = Instant::now() + limit;
        while !cond(&board) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Waits for a child's output, killing it and failing the test after `limit`.
pub fn wait_output(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "timed out after {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running `kanban dispatch` daemon, stopped (SIGTERM, then waited for) on drop.
pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.0.try_wait().ok().flatten().is_none() {
            if Instant::now() >= deadline {
                let _ = self.0.kill();
                let _ = self.0.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Sends `signal` (e.g. "-KILL") to `pid` with the system `kill`.
pub fn kill(signal: &str, pid: i64) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid} failed");
}

/// Whether a process with `pid` exists and is not a zombie.
pub fn pid_alive(pid: i64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Whether any process is still in process group `pgid`.
pub fn group_alive(pgid: i64) -> bool {
    Command::new("kill")
        .args(["-0", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}
