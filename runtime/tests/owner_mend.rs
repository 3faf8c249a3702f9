//! Owner admission, the mends of issue 24 item 4, end to end: the real `kanban` binary as owner,
//! submitter and managed worker over the real socket, on real SQLite files. Waits are bounded
//! polls on observable state; nothing asserts on wall-clock speed.

// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
// Test helpers: a failed setup step should fail the test at once, with the panic message.
#![allow(clippy::unwrap_used)]

mod dispatch_support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use dispatch_support::{Home, kill, now, pid_alive};
use kanban_runtime::admission::client::Client;
use kanban_runtime::admission::state::StateDb;
use kanban_runtime::board::{Board, ClaimOutcome, ClaimSpec, NewTask};
use serde_json::{Value, json};

/// An owner this test started, SIGKILLed on drop unless it already exited.
struct Owner(Child);

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Owner {
    /// Waits (bounded) for the owner to exit on its own; its exit status.
    fn exits(&mut self, what: &str) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `[profiles.done]` and `[profiles.sh]` are both `builtin:shell` here: a turn runs its card's
/// body. The default profile is `done`.
fn shell_config(mode: &str) -> String {
    shell_config_with(mode, "")
}

/// As [`shell_config`], with more `[dispatch]` lines.
fn shell_config_with(mode: &str, extra: &str) -> String {
    format!(
        "[dispatch]\nmode = \"{mode}\"\n{extra}\ncrash_grace_seconds = 0\nkill_wait_seconds = 1.0\n\
         interval_seconds = 0.5\ndefault_profile = \"done\"\n\n\
         [profiles.done]\nagent = \"builtin:shell\"\n\n[profiles.sh]\nagent = \"builtin:shell\"\n"
    )
}

fn start_owner(home: &Home, profile: &str, extra: &[&str]) -> Owner {
    let mut args = vec!["owner", "serve", "--profile", profile];
    args.extend_from_slice(extra);
    let child = home
        .kanban(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let owner = Owner(child);
    wait_until("the owner's socket", || {
        Client::open(&home.root, profile, false).is_ok()
    });
    owner
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn claim(board: &Board, id: &str) -> (i64, String) {
    let spec = ClaimSpec {
        lock: format!("test:{}", std::process::id()),
        ttl_seconds: 900,
        origin: kanban_runtime::board::ClaimOrigin::External,
    };
    match board.claim(id, &spec, now()).unwrap() {
        ClaimOutcome::Claimed(c) => (c.run_id, c.claim_lock),
        other => panic!("not claimed: {other:?}"),
    }
}

fn params(id: &str, run: i64, lock: &str) -> Value {
    json!({"board": "default", "task_id": id, "run_id": run, "claim_lock": lock})
}

fn state(home: &Home, profile: &str) -> StateDb {
    StateDb::open(&home.root.join("owner").join(profile).join("state.db")).unwrap()
}

fn turn_statuses(home: &Home, profile: &str) -> Vec<String> {
    state(home, profile)
        .list()
        .unwrap()
        .into_iter()
        .map(|t| t.status)
        .collect()
}

fn has_event(home: &Home, id: &str, kind: &str) -> bool {
    home.kinds(id).iter().any(|k| k == kind)
}

/// A card body that waits for `go` to exist, then exits 0.
fn wait_for_file(go: &Path) -> String {
    format!("while [ ! -f '{}' ]; do sleep 0.05; done", go.display())
}

/// The pid `kanban owner status` reports for `profile`'s owner, if one answers.
fn owner_pid(home: &Home, profile: &str) -> Option<i64> {
    let out = home
        .kanban(&["--json", "owner", "status", "--profile", profile])
        .output()
        .unwrap();
    serde_json::from_slice::<Value>(&out.stdout).ok()?["pid"].as_i64()
}

/// The `kanban submit` processes of this home (from /proc).
fn submitters_of(home: &Home) -> Vec<i64> {
    let root = home.root.to_string_lossy().into_owned();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i64>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let args: Vec<String> = c
                    .split(|b| *b == 0)
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                args.iter().any(|a| a == "submit") && args.contains(&root)
            }) && pid_alive(*pid)
        })
        .collect()
}

/// Kills, on drop, the submitters of the home and then the owners of `profiles` it started.
struct Cleanup<'h>(&'h Home, &'static [&'static str]);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for pid in submitters_of(self.0) {
            kill("-KILL", pid);
        }
        for profile in self.1 {
            if let Some(pid) = owner_pid(self.0, profile) {
                kill("-KILL", pid);
            }
        }
    }
}

#[test]
fn resolve_asks_the_owner_of_the_tasks_own_profile_and_completed_exits_the_submitter_0() {
    let home = Home::new(&shell_config_with("owner", "owner_lost_turn = \"pause\""));
    let id = home.create(Home::task("on sh", "sh", Some("true"), vec![]));
    // The `sh` owner dies right after the turn is started: the turn will read `unknown`.
    let mut faulty = start_owner(&home, "sh", &["--fault-after", "after-started"]);
    let _cleanup = Cleanup(&home, &["sh"]);
    let daemon = home.daemon();
    faulty.exits("the faulty owner to die");
    // The submitter starts a fresh owner, which finds the turn `unknown`; the card is paused.
    wait_until("the turn to read unknown", || {
        turn_statuses(&home, "sh").iter().any(|s| s == "unknown")
    });
    // A submitter starts its owner with an idle timeout.
    let started = owner_pid(&home, "sh").unwrap();
    let cmdline = std::fs::read(format!("/proc/{started}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("--idle-exit"),
        "{}",
        String::from_utf8_lossy(&cmdline)
    );
    let submitter = home.board().get_task(&id).unwrap().worker_pid.unwrap();
    // No --profile: the task's own profile (`sh`), not [dispatch] default_profile (`done`).
    let out = home
        .kanban(&["owner", "resolve", &id, "--as", "completed"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(turn_statuses(&home, "sh"), ["completed"]);
    // `--as completed`: the submitter exits 0 (its trailer says so in the task log).
    let log = kanban_runtime::home::log_path(&home.root, "default", &id);
    wait_until("the submitter to exit", || !pid_alive(submitter));
    wait_until("the submitter's trailer", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("[kanban-worker-exit] rc=0"))
    });
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("[kanban-worker-exit] rc=1"), "{text}");
    drop(daemon);
}

#[test]
fn resolve_with_a_profile_asks_that_owner() {
    let home = Home::new(&shell_config("owner"));
    let id = home.create(Home::task("on sh", "sh", Some("true"), vec![]));
    let _sh = start_owner(&home, "sh", &[]);
    // `--profile done` overrides the task's profile: no `done` owner ever ran.
    let out = home
        .kanban(&[
            "owner",
            "resolve",
            &id,
            "--as",
            "failed",
            "--profile",
            "done",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the owner of `done` does not answer"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without it, the `sh` owner answers (it has no unknown turn of this task).
    let out = home
        .kanban(&["owner", "resolve", &id, "--as", "failed"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no_unknown_turn"), "{stderr}");
}

#[test]
fn a_claim_lost_after_the_bind_is_booked_interrupted_not_unknown() {
    let home = Home::new(&shell_config("direct"));
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let id = home.create(Home::task(
        "lost",
        "done",
        Some(&wait_for_file(&go)),
        vec![],
    ));
    let board = home.board();
    let (run, lock) = claim(&board, &id);
    let _owner = start_owner(&home, "done", &[]);
    let mut client = Client::open(&home.root, "done", false).unwrap();
    client.call("kanban.run", params(&id, run, &lock)).unwrap();
    home.wait_for(
        "the managed worker to bind",
        Duration::from_secs(60),
        |_| has_event(&home, &id, "worker_bound"),
    );
    // An operator takes the card back while the turn runs; then the agent's turn ends.
    board.reclaim(&id, Some("test"), now()).unwrap();
    std::fs::write(&go, "").unwrap();
    wait_until("the turn to settle", || {
        turn_statuses(&home, "done")
            .iter()
            .all(|s| s != "started" && s != "queued")
    });
    let turn = state(&home, "done").list().unwrap().remove(0);
    assert_eq!(turn.status, "interrupted", "{turn:?}");
    assert!(
        turn.last_output
            .as_deref()
            .is_some_and(|o| o.contains("claim was lost")),
        "{turn:?}"
    );
}

#[test]
fn a_turn_started_after_an_owner_restart_runs_under_the_policy_frozen_at_admission() {
    let home = Home::new(&shell_config("direct"));
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    let body = format!(
        "printf '%s|%s|%s' \"$HERMES_KANBAN_BRANCH\" \"$HERMES_TENANT\" \"$HERMES_KANBAN_GOAL_MODE\" > '{}'",
        seen.display()
    );
    let id = home.create(NewTask {
        workspace: kanban_runtime::board::WorkspaceSpec {
            branch: Some("frozen-branch".into()),
            ..Default::default()
        },
        tenant: Some("acme".into()),
        ..Home::task("policy", "done", Some(&body), vec![])
    });
    let board = home.board();
    let (run, lock) = claim(&board, &id);
    // The owner dies after appending the marker, before the turn starts.
    let mut faulty = start_owner(&home, "done", &["--fault-after", "after-marker"]);
    let mut client = Client::open(&home.root, "done", false).unwrap();
    assert!(client.call("kanban.run", params(&id, run, &lock)).is_err());
    faulty.exits("the faulty owner to die");
    // The card is edited meanwhile.
    let conn =
        rusqlite::Connection::open(kanban_runtime::home::db_path(&home.root, "default")).unwrap();
    conn.execute(
        "UPDATE tasks SET branch_name = 'live-branch', tenant = 'other', goal_mode = 1 WHERE id = ?1",
        [&id],
    )
    .unwrap();
    drop(conn);
    // The retry on a fresh owner starts the turn: under the frozen policy.
    let _owner = start_owner(&home, "done", &[]);
    let mut client = Client::open(&home.root, "done", false).unwrap();
    client.call("kanban.run", params(&id, run, &lock)).unwrap();
    wait_until("the turn's agent to run", || {
        std::fs::read_to_string(&seen).is_ok_and(|s| !s.is_empty())
    });
    let text = std::fs::read_to_string(&seen).unwrap();
    assert!(text.starts_with("frozen-branch|acme|"), "{text}");
    assert!(!text.ends_with("|1"), "goal mode was not frozen: {text}");
}

/// Reads one answer line from a raw connection (`None` at end of stream, on a reset, or when
/// nothing came for a minute: an owner that never answers fails the test instead of hanging it).
fn read_line(stream: &UnixStream) -> Option<String> {
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut line = String::new();
    match BufReader::new(stream).read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line),
    }
}

/// Waits until the owner serves exactly `n` connections (its status call is one of them).
fn wait_connections(home: &Home, n: u64) {
    wait_until("the owner's connection count", || {
        Client::open(&home.root, "done", false)
            .and_then(|mut c| c.call("owner.status", json!({})))
            .is_ok_and(|s| s["connections"] == json!(n))
    });
}

#[test]
fn an_over_long_request_line_is_refused_and_the_owner_keeps_serving() {
    let home = Home::new(&shell_config("direct"));
    let _owner = start_owner(&home, "done", &[]);
    let mut stream = UnixStream::connect(home.root.join("owner/done/owner.sock")).unwrap();
    let chunk = vec![b'x'; 64 * 1024];
    // 1 MiB and one chunk more, no newline: the owner stops reading at the bound.
    for _ in 0..17 {
        if stream.write_all(&chunk).is_err() {
            break;
        }
    }
    let answer = read_line(&stream).unwrap();
    assert!(answer.contains("request_too_large"), "{answer}");
    assert_eq!(read_line(&stream), None, "the connection is closed");
    let status = Client::open(&home.root, "done", false)
        .unwrap()
        .call("owner.status", json!({}))
        .unwrap();
    assert_eq!(status["profile"], "done");
}

#[test]
fn a_request_line_not_sent_in_time_is_refused_and_the_owner_keeps_serving() {
    let home = Home::new(&shell_config("direct"));
    let _owner = start_owner(&home, "done", &["--request-deadline-ms", "300"]);
    let mut stream = UnixStream::connect(home.root.join("owner/done/owner.sock")).unwrap();
    stream.write_all(br#"{"jsonrpc": "2.0", "#).unwrap();
    // The owner answers once the deadline passed; the test only reads.
    let answer = read_line(&stream).unwrap();
    assert!(answer.contains("request_timeout"), "{answer}");
    assert_eq!(read_line(&stream), None, "the connection is closed");
    let status = Client::open(&home.root, "done", false)
        .unwrap()
        .call("owner.status", json!({}))
        .unwrap();
    assert_eq!(status["profile"], "done");
}

#[test]
fn connections_over_the_cap_are_refused_and_the_owner_keeps_serving() {
    let home = Home::new(&shell_config("direct"));
    let _owner = start_owner(&home, "done", &["--max-connections", "3"]);
    wait_connections(&home, 1);
    let socket = home.root.join("owner/done/owner.sock");
    let held: Vec<UnixStream> = (0..3)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    let over = UnixStream::connect(&socket).unwrap();
    let answer = read_line(&over).unwrap();
    assert!(answer.contains("too_many_connections"), "{answer}");
    assert_eq!(read_line(&over), None, "the connection is closed");
    // The held ones are still served.
    let mut first = &held[0];
    first
        .write_all(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"owner.status\"}\n")
        .unwrap();
    let answer = read_line(&held[0]).unwrap();
    assert!(answer.contains("not_authenticated"), "{answer}");
    drop(held);
    wait_connections(&home, 1);
}

#[test]
fn owner_stop_drains_and_ends_the_owner() {
    let home = Home::new(&shell_config("direct"));
    let mut owner = start_owner(&home, "done", &[]);
    let out = home
        .kanban(&["owner", "stop", "--profile", "done"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(owner.exits("the stopped owner to exit").success());
    assert!(!home.root.join("owner/done/owner.sock").exists());
    // Nothing left to stop: a clear refusal.
    let out = home
        .kanban(&["owner", "stop", "--profile", "done"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no owner of `done` answered"));
}

#[test]
fn an_owner_with_an_idle_exit_ends_once_unused() {
    let home = Home::new(&shell_config("direct"));
    // 3 s, not 1: on a loaded machine the test's first connection, which `start_owner` waits
    // for, once came more than a second after the socket was bound and found the owner gone.
    let mut owner = start_owner(&home, "done", &["--idle-exit", "3"]);
    assert!(owner.exits("the idle owner to exit").success());
    assert!(!home.root.join("owner/done/owner.sock").exists());
}

#[test]
fn an_owner_whose_home_is_deleted_ends() {
    let home = Home::new(&shell_config("direct"));
    let mut owner = start_owner(&home, "done", &[]);
    std::fs::remove_dir_all(home.root.join("owner")).unwrap();
    assert!(owner.exits("the orphaned owner to exit").success());
}

/// A card body that sleeps on its first run and exits 0 on every later one.
fn sleeps_once(dir: &Path) -> String {
    let m = dir.join("ran-once");
    format!(
        "if [ -f '{m}' ]; then exit 0; fi; touch '{m}'; sleep 120",
        m = m.display()
    )
}

fn owner_lost_turn_is_dispatched_again(kill_submitter_too: bool) {
    let home = Home::new(&shell_config("owner"));
    let dir = tempfile::tempdir().unwrap();
    let id = home.create(Home::task(
        "lost",
        "done",
        Some(&sleeps_once(dir.path())),
        vec![],
    ));
    let _cleanup = Cleanup(&home, &["done"]);
    let daemon = home.daemon();
    home.wait_for(
        "the managed worker to bind",
        Duration::from_secs(60),
        |_| has_event(&home, &id, "worker_bound"),
    );
    let owner = owner_pid(&home, "done").unwrap();
    let submitter = home.board().get_task(&id).unwrap().worker_pid.unwrap();
    kill("-KILL", owner);
    if kill_submitter_too {
        kill("-KILL", submitter);
    }
    // No operator: the card runs again as a fresh attempt and ends done.
    home.wait_for("the card to be done", Duration::from_secs(120), |b| {
        b.get_task(&id).unwrap().status == kanban_runtime::board::Status::Done
    });
    let outcomes = home.run_outcomes(&id);
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert_eq!(outcomes[1], "completed", "{outcomes:?}");
    // The lost attempt counted as a failure (the breaker sees it).
    assert_ne!(outcomes[0], "completed", "{outcomes:?}");
    drop(daemon);
    assert_eq!(home.board().fsck().unwrap(), []);
}

#[test]
fn an_owner_killed_mid_turn_leaves_no_stalled_card() {
    owner_lost_turn_is_dispatched_again(false);
}

#[test]
fn an_owner_and_its_submitter_killed_mid_turn_leave_no_stalled_card() {
    owner_lost_turn_is_dispatched_again(true);
}

#[test]
fn a_restarted_owner_settles_a_lost_turn_interrupted() {
    let home = Home::new(&shell_config("direct"));
    let id = home.create(Home::task("lost", "done", Some("true"), vec![]));
    let board = home.board();
    let (run, lock) = claim(&board, &id);
    let mut faulty = start_owner(&home, "done", &["--fault-after", "after-started"]);
    let mut client = Client::open(&home.root, "done", false).unwrap();
    assert!(client.call("kanban.run", params(&id, run, &lock)).is_err());
    faulty.exits("the faulty owner to die");
    let _owner = start_owner(&home, "done", &[]);
    let turn = state(&home, "done").list().unwrap().remove(0);
    assert_eq!(
        (turn.status.as_str(), turn.exit_code),
        ("interrupted", Some(130)),
        "{turn:?}"
    );
    assert!(
        turn.last_output
            .as_deref()
            .is_some_and(|o| o.contains("may have had effects")),
        "{turn:?}"
    );
}

#[test]
fn owner_resolve_decides_a_lost_turn_while_the_owner_is_down() {
    let home = Home::new(&shell_config_with("direct", "owner_lost_turn = \"pause\""));
    let id = home.create(Home::task("lost", "done", Some("true"), vec![]));
    let board = home.board();
    let (run, lock) = claim(&board, &id);
    let mut faulty = start_owner(&home, "done", &["--fault-after", "after-started"]);
    let mut client = Client::open(&home.root, "done", false).unwrap();
    assert!(client.call("kanban.run", params(&id, run, &lock)).is_err());
    faulty.exits("the faulty owner to die");
    // No owner runs: the decision is written to its state.db directly.
    let out = home
        .kanban(&["owner", "resolve", &id, "--as", "failed"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let turn = state(&home, "done").list().unwrap().remove(0);
    assert_eq!(
        (turn.status.as_str(), turn.exit_code),
        ("failed", Some(1)),
        "{turn:?}"
    );
    // A second decision finds nothing left to decide.
    let out = home
        .kanban(&["owner", "resolve", &id, "--as", "failed"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn an_unknown_owner_lost_turn_is_refused_naming_the_key() {
    let home = Home::new(&shell_config_with("owner", "owner_lost_turn = \"retry\""));
    let out = home
        .kanban(&["owner", "serve", "--profile", "done"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("owner_lost_turn"), "{stderr}");
    assert!(stderr.contains("\"requeue\""), "{stderr}");
}
