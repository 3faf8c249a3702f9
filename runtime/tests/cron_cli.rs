//! `kanban cron …` end to end: the real binary on a temporary home.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary and real processes

use std::path::Path;
use std::process::{Command, Output};

use kanban_runtime::board::{Board, OpenOptions, Status};
use serde_json::Value;

const PROFILES: &str = r#"
[profiles.probe]
agent = "builtin:probe"

[profiles.shell]
agent = "builtin:shell"

[profiles.envdump]
agent = "command"
command = ["sh", "-c", "cat >/dev/null; env"]
"#;

fn home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kanban.toml"), PROFILES).unwrap();
    dir
}

/// `kanban --home <home> <args>` with `env` set on the child only.
fn kanban_env(home: &Path, args: &[&str], env: &[(&str, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kanban"))
        .arg("--home")
        .arg(home)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("run kanban")
}

fn kanban(home: &Path, args: &[&str]) -> Output {
    kanban_env(home, args, &[])
}

fn ok_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "kanban failed ({:?}): {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn add(home: &Path, args: &[&str]) -> String {
    let mut all = vec!["cron", "add", "--json"];
    all.extend_from_slice(args);
    let v = ok_json(&kanban(home, &all));
    v["id"].as_str().unwrap().to_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn add_show_list_pause_resume_remove() {
    let h = home();
    let id = add(
        h.path(),
        &[
            "--name",
            "nightly",
            "--schedule",
            "every 30m",
            "--prompt",
            "echo hi",
            "--profile",
            "shell",
            "--repeat",
            "3",
        ],
    );
    assert_eq!(id.len(), 12);
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    let show = ok_json(&kanban(h.path(), &["cron", "show", &id, "--json"]));
    assert_eq!(show["repeat"]["times"], 3);
    assert_eq!(show["repeat"]["completed"], 0);
    assert!(show["next_run_at"].is_i64());
    assert!(show["last_status"].is_null());
    assert_eq!(show["schedule"], "every 30m");
    let by_name = ok_json(&kanban(h.path(), &["cron", "show", "nightly", "--json"]));
    assert_eq!(by_name["id"], id.as_str());
    let list = ok_json(&kanban(h.path(), &["cron", "list", "--json"]));
    assert_eq!(list.as_array().map(Vec::len), Some(1));

    let paused = ok_json(&kanban(h.path(), &["cron", "pause", &id, "--json"]));
    assert_eq!(paused["state"], "paused");
    assert!(paused["next_run_at"].is_null());
    let resumed = ok_json(&kanban(h.path(), &["cron", "resume", &id, "--json"]));
    assert_eq!(resumed["state"], "scheduled");
    assert!(resumed["next_run_at"].is_i64());

    let human = kanban(h.path(), &["cron", "list"]);
    assert!(String::from_utf8_lossy(&human.stdout).contains("nightly"));
    ok_json(&kanban(h.path(), &["cron", "remove", &id, "--json"]));
    let gone = kanban(h.path(), &["cron", "show", &id]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(stderr(&gone).contains("no cron job"), "{}", stderr(&gone));
}

#[test]
fn add_rejects_unknown_profiles_bad_schedules_and_bad_workdirs() {
    let h = home();
    let out = kanban(
        h.path(),
        &[
            "cron",
            "add",
            "--schedule",
            "every 1h",
            "--prompt",
            "p",
            "--profile",
            "ghost",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("unknown profile `ghost`"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("probe"),
        "lists the known profiles: {}",
        stderr(&out)
    );

    let out = kanban(
        h.path(),
        &[
            "cron",
            "add",
            "--schedule",
            "whenever",
            "--prompt",
            "p",
            "--profile",
            "shell",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("accepted forms"), "{}", stderr(&out));

    let out = kanban(
        h.path(),
        &[
            "cron",
            "add",
            "--schedule",
            "every 1h",
            "--prompt",
            "p",
            "--profile",
            "shell",
            "--workdir",
            "/nonexistent/dir",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("workdir"), "{}", stderr(&out));
    let list = ok_json(&kanban(h.path(), &["cron", "list", "--json"]));
    assert_eq!(list.as_array().map(Vec::len), Some(0), "nothing was stored");
}

#[test]
fn run_prints_the_outcome_and_records_it() {
    let h = home();
    let work = tempfile::tempdir().unwrap();
    let id = add(
        h.path(),
        &[
            "--schedule",
            "0 9 * * 1-5",
            "--prompt",
            "pwd; echo done",
            "--profile",
            "shell",
            "--workdir",
            work.path().to_str().unwrap(),
        ],
    );
    let outcome = ok_json(&kanban(h.path(), &["cron", "run", &id, "--json"]));
    assert_eq!(outcome["success"], true);
    assert!(outcome["error"].is_null());
    let canonical = work.path().canonicalize().unwrap();
    assert_eq!(
        outcome["final_response"],
        format!("{}\ndone", canonical.display()),
        "the job's workdir is its shell's cwd"
    );
    assert!(outcome["output"].as_str().unwrap().contains("## Response"));
    let show = ok_json(&kanban(h.path(), &["cron", "show", &id, "--json"]));
    assert_eq!(show["last_status"], "ok");
    assert_eq!(
        show["repeat"]["completed"], 0,
        "a manual run leaves the schedule alone"
    );
    let outputs = h.path().join("cron/output").join(&id);
    assert_eq!(
        std::fs::read_dir(outputs).unwrap().count(),
        1,
        "output saved per run"
    );

    let failing = add(
        h.path(),
        &[
            "--schedule",
            "every 1h",
            "--prompt",
            "exit 3",
            "--profile",
            "shell",
        ],
    );
    let out = kanban(h.path(), &["cron", "run", &failing, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["success"], false);
    assert!(outcome["error"].as_str().unwrap().contains("exit status 3"));
    let show = ok_json(&kanban(h.path(), &["cron", "show", &failing, "--json"]));
    assert_eq!(show["last_status"], "error");
    assert_eq!(show["failure_streak"], 1);
}

/// A task created and claimed with `kanban create` / `kanban claim`; returns the env the
/// dispatcher would give its worker.
fn claimed_task(home: &Path) -> (Vec<(&'static str, String)>, String) {
    let created = ok_json(&kanban(home, &["create", "real work", "--json"]));
    let task = created["id"].as_str().unwrap().to_owned();
    let claim = ok_json(&kanban(
        home,
        &["claim", &task, "--claimer", "worker-host:777", "--json"],
    ));
    let db = home.join("kanban.db");
    assert!(db.exists(), "the default board lives at <root>/kanban.db");
    let env = vec![
        ("HERMES_KANBAN_TASK", task.clone()),
        ("HERMES_KANBAN_RUN_ID", claim["run_id"].to_string()),
        (
            "HERMES_KANBAN_CLAIM_LOCK",
            claim["claim_lock"].as_str().unwrap().to_owned(),
        ),
        ("HERMES_KANBAN_DB", db.to_string_lossy().into_owned()),
        ("HERMES_KANBAN_BOARD", "default".into()),
        (
            "HERMES_KANBAN_WORKSPACE",
            home.to_string_lossy().into_owned(),
        ),
        // The session keys default_spawn grants beside the kanban ones.
        ("HERMES_PROFILE", "coder".into()),
        ("HERMES_SESSION_SOURCE", "kanban".into()),
        ("HERMES_TENANT", "acme".into()),
    ];
    (env, task)
}

#[test]
fn cron_run_from_a_worker_shell_cannot_see_or_touch_the_workers_task() {
    let h = home();
    let (env, task) = claimed_task(h.path());
    let board = Board::open_path(&h.path().join("kanban.db"), &OpenOptions::default()).unwrap();
    let before = board.get_task(&task).unwrap();
    let events_before = board.events(&task, None).unwrap().len();

    // Sanity: in that environment, outside cron, the process *is* the worker.
    let me = ok_json(&kanban_env(h.path(), &["identity", "--json"], &env));
    assert_eq!(me["owned"], true);
    assert_eq!(me["task"], task.as_str());

    let id = add(
        h.path(),
        &[
            "--schedule",
            "every 1h",
            "--prompt",
            "probe",
            "--profile",
            "probe",
        ],
    );
    let outcome = ok_json(&kanban_env(h.path(), &["cron", "run", &id, "--json"], &env));
    assert_eq!(outcome["success"], true, "{outcome}");
    let probe: Value = serde_json::from_str(outcome["final_response"].as_str().unwrap()).unwrap();
    assert_eq!(probe["identity"]["owned"], false, "{probe}");
    assert!(probe["identity"]["task"].is_null());
    assert!(probe["identity"]["run_id"].is_null());
    let child_env = probe["child_env"].as_object().unwrap();
    for key in kanban_runtime::identity::KANBAN_ENV_KEYS {
        assert!(
            !child_env.contains_key(*key),
            "{key} leaked to the job's children: {probe}"
        );
    }
    for key in ["HERMES_PROFILE", "HERMES_SESSION_SOURCE", "HERMES_TENANT"] {
        assert!(!child_env.contains_key(key), "{key} leaked: {probe}");
    }
    assert!(
        !child_env.keys().any(|k| k.starts_with("HERMES_KANBAN_")),
        "a HERMES_KANBAN_* key leaked: {probe}"
    );
    assert_eq!(child_env["HERMES_DELEGATED_CHILD_CONTEXT"], "1");

    let after = board.get_task(&task).unwrap();
    assert_eq!(after.status, Status::Running, "not completed, not blocked");
    assert_eq!(
        after.last_heartbeat_at, before.last_heartbeat_at,
        "not heartbeated by the job"
    );
    assert_eq!(after.claim_expires, before.claim_expires);
    assert_eq!(after.current_run_id, before.current_run_id);
    assert_eq!(after.claim_lock, before.claim_lock);
    assert_eq!(
        board.events(&task, None).unwrap().len(),
        events_before,
        "no event on the task"
    );
}

#[test]
fn two_scheduler_processes_run_each_occurrence_once_and_a_one_shot_once() {
    let h = home();
    let log = h.path().join("every.log");
    let once_log = h.path().join("once.log");
    let every = add(
        h.path(),
        &[
            "--schedule",
            "every 1m",
            "--prompt",
            &format!("echo run >> {}", log.display()),
            "--profile",
            "shell",
        ],
    );
    let once = add(
        h.path(),
        &[
            "--schedule",
            "in 3m",
            "--prompt",
            &format!("echo run >> {}", once_log.display()),
            "--profile",
            "shell",
        ],
    );
    let first = ok_json(&kanban(h.path(), &["cron", "show", &every, "--json"]))["next_run_at"]
        .as_i64()
        .unwrap();
    let rounds = 12;
    for round in 0..rounds {
        let now = (first + 60 * round).to_string();
        let children: Vec<_> = (0..2)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_kanban"))
                    .arg("--home")
                    .arg(h.path())
                    .args(["cron", "tick", "--json", "--now", &now])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            ok_json(&out);
        }
    }
    let lines = |p: &Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert_eq!(
        lines(&log),
        rounds as usize,
        "each occurrence ran exactly once"
    );
    assert_eq!(lines(&once_log), 1, "the one-shot ran once");
    let once_job = ok_json(&kanban(h.path(), &["cron", "show", &once, "--json"]));
    assert_eq!(once_job["state"], "completed");
    assert_eq!(once_job["repeat"]["completed"], 1);
}

#[test]
fn the_daemon_runs_a_due_one_shot_once() {
    let h = home();
    let log = h.path().join("daemon.log");
    let at = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let id = add(
        h.path(),
        &[
            "--schedule",
            &at,
            "--prompt",
            &format!("echo run >> {}", log.display()),
            "--profile",
            "shell",
        ],
    );
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_kanban"))
        .arg("--home")
        .arg(h.path())
        .args(["cron", "daemon", "--interval", "0.1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut state = Value::Null;
    while std::time::Instant::now() < deadline {
        state = ok_json(&kanban(h.path(), &["cron", "show", &id, "--json"]))["state"].clone();
        if state == "completed" {
            break;
        }
        std::thread::yield_now();
    }
    // SIGTERM stops it cleanly (after its running jobs).
    let term = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = daemon.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            daemon.kill().unwrap();
            daemon.wait().unwrap();
            break None;
        }
        std::thread::yield_now();
    };
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "the daemon exits 0 on SIGTERM"
    );
    assert_eq!(state, "completed", "the daemon ran the job");
    // Read after the daemon stopped (it kept ticking meanwhile): the one-shot ran exactly once.
    let lines = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .count();
    assert_eq!(lines, 1);
}

#[test]
fn a_cron_jobs_real_child_processes_get_the_scrubbed_environment() {
    let h = home();
    let (env, _task) = claimed_task(h.path());
    for profile in ["envdump", "shell"] {
        let id = add(
            h.path(),
            &[
                "--schedule",
                "every 1h",
                "--prompt",
                "env",
                "--profile",
                profile,
            ],
        );
        let outcome = ok_json(&kanban_env(h.path(), &["cron", "run", &id, "--json"], &env));
        assert_eq!(outcome["success"], true, "{outcome}");
        let child_env = outcome["final_response"].as_str().unwrap();
        let keys: Vec<&str> = child_env
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, _)| k)
            .collect();
        assert!(
            keys.contains(&"PATH"),
            "{profile}: the child got an environment: {child_env}"
        );
        for key in kanban_runtime::identity::KANBAN_ENV_KEYS {
            assert!(
                !keys.contains(key),
                "{profile}: {key} reached the job's child process"
            );
        }
        assert!(
            child_env
                .lines()
                .any(|l| l == "HERMES_DELEGATED_CHILD_CONTEXT=1"),
            "{profile}: the child carries the delegated-child marker"
        );
    }
}
