//! `[hooks]` end to end (README "Hooks"): a real dispatcher runs each hook once per event with
//! the event as JSON on its standard input and no worker identity; a hook that sleeps 60 s or
//! exits 1 holds up no tick and is reported; a bad `[hooks]` table is refused.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary

use std::time::{Duration, Instant};

use kanban_tests::Kanban;
use serde_json::Value;

fn home(hooks: &str) -> Kanban {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    std::fs::write(
        k.home().join("kanban.toml"),
        format!(
            "[dispatch]\ninterval_seconds = 0.05\n\n[profiles.done]\nagent = \"builtin:complete\"\n\n[hooks]\n{hooks}"
        ),
    )
    .unwrap();
    k.ok(&["init"]);
    k
}

/// The JSON lines of the file `name` in `dir`, once there are `n` (waiting up to 30 s).
fn lines(dir: &std::path::Path, name: &str, n: usize) -> Vec<Value> {
    let path = dir.join(name);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let found: Vec<Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if found.len() >= n || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn each_transition_fires_its_hook_once_with_the_event_and_no_worker_identity() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let k = home(&format!(
        "on_claimed = [\"sh\", \"-c\", \"cat >> {d}/claimed.jsonl\"]\n\
         on_completed = [\"sh\", \"-c\", \"cat >> {d}/completed.jsonl; env > {d}/env.txt\"]\n\
         max_running = 1\n"
    ));
    let ids: Vec<String> = (0..3)
        .map(|i| k.create(&format!("t{i}"), &["--assignee", "done"]))
        .collect();
    // One hook at a time: `--until-idle` must not end while events still wait for a slot.
    let run = k.run(&["dispatch", "--until-idle"]);
    assert_eq!(run.code, 0, "{run:?}");
    let completed = lines(dir.path(), "completed.jsonl", 3);
    let claimed = lines(dir.path(), "claimed.jsonl", 3);
    for (events, kind) in [(&completed, "completed"), (&claimed, "claimed")] {
        let mut tasks: Vec<&str> = events
            .iter()
            .map(|e| e["task_id"].as_str().unwrap())
            .collect();
        tasks.sort_unstable();
        let mut want: Vec<&str> = ids.iter().map(String::as_str).collect();
        want.sort_unstable();
        assert_eq!(tasks, want, "one {kind} hook per task: {events:?}");
        assert!(
            events
                .iter()
                .all(|e| e["kind"] == kind && e["id"].as_i64().is_some())
        );
    }
    assert!(
        completed.iter().all(|e| e["payload"].is_object()),
        "{completed:?}"
    );
    // Nothing more arrives later: each event fired once.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(lines(dir.path(), "completed.jsonl", 0).len(), 3);
    let env = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
    assert!(!env.contains("HERMES_KANBAN_TASK="), "{env}");
    assert!(!env.contains("HERMES_KANBAN_CLAIM_LOCK="), "{env}");
}

#[test]
fn a_slow_or_failing_hook_holds_up_no_tick_and_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let k = home(&format!(
        "on_claimed = [\"sh\", \"-c\", \"echo boom >&2; exit 1\"]\n\
         on_completed = [\"sh\", \"-c\", \"sleep 60\"]\n\
         on_blocked = [\"sh\", \"-c\", \"cat >> {d}/blocked.jsonl\"]\n\
         timeout_seconds = 120\nmax_running = 16\n"
    ));
    for i in 0..4 {
        k.create(&format!("t{i}"), &["--assignee", "done"]);
    }
    let started = Instant::now();
    let run = k.run(&["dispatch", "--until-idle"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "the dispatcher waited for a 60 s hook"
    );
    assert_eq!(k.json(&["stats"])["by_status"]["done"], 4);
    assert!(
        run.stdout.contains("on_claimed for t_")
            && run.stdout.contains("failed: exit status: 1: boom"),
        "{}",
        run.stdout
    );
    assert!(
        lines(dir.path(), "blocked.jsonl", 0).is_empty(),
        "no task was blocked"
    );
}

#[test]
fn a_bad_hooks_table_is_refused_naming_the_key() {
    for (table, key) in [
        ("timeout_seconds = 0\n", "[hooks] timeout_seconds"),
        ("max_running = 0\n", "[hooks] max_running"),
        ("on_completed = [\"\"]\n", "[hooks] on_completed"),
        ("on_finished = [\"true\"]\n", "on_finished"),
    ] {
        let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
        std::fs::write(k.home().join("kanban.toml"), format!("[hooks]\n{table}")).unwrap();
        let run = k.run(&["dispatch", "--once"]);
        assert_eq!(run.code, 1, "{table}: {run:?}");
        assert!(
            run.stderr.contains(key),
            "{table}: want `{key}` in {}",
            run.stderr
        );
    }
}

#[test]
fn a_hook_past_its_timeout_is_killed_with_its_children_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let k = home(&format!(
        "on_completed = [\"sh\", \"-c\", \"sleep 30 & echo $! > {d}/pid; wait\"]\ntimeout_seconds = 0.3\n"
    ));
    k.create("t", &["--assignee", "done"]);
    let out = dir.path().join("dispatch.out");
    let mut daemon = k
        .cmd()
        .args(["dispatch", "--interval", "0.1"])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if text.contains("killed after") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(text.contains("hook       on_completed for t_"), "{text}");
    assert!(text.contains("failed: killed after 0.3 s"), "{text}");
    let pid = std::fs::read_to_string(dir.path().join("pid")).unwrap();
    let gone = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
            .map_or(true, |stat| stat.split_whitespace().nth(2) == Some("Z"))
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gone(&pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(gone(&pid), "the hook's child {pid} outlived the kill");
}
