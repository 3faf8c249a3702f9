//! `tests/hermes_cli/test_kanban_core_functionality.py`: idempotency, the failure breaker,
//! crash detection, the daemon loop, the runtime cap, heartbeats, runs as attempts, the worker's
//! prompt, recovery verbs and the adoption of older boards, through the `kanban` binary.

use std::time::Duration;

use rusqlite::Connection;

use super::support::{DEAD_PID, Home, Sleeper, alive, host, now};

// ---------------------------------------------------------------------------------------------
// Idempotency key
// ---------------------------------------------------------------------------------------------

#[test]
fn idempotency_key_returns_existing_task() {
    let home = Home::new();
    let a = home.create("first", &["--idempotency-key", "abc"]);
    let b = home.create("second attempt", &["--idempotency-key", "abc"]);
    assert_eq!(a, b);
    assert_eq!(home.task(&a)["title"], "first");
}

#[test]
fn idempotency_key_ignored_for_archived() {
    let home = Home::new();
    let a = home.create("first", &["--idempotency-key", "abc"]);
    home.ok(&["archive", &a]);
    let b = home.create("second", &["--idempotency-key", "abc"]);
    assert_ne!(a, b);
}

#[test]
fn no_idempotency_key_never_collides() {
    let home = Home::new();
    assert_ne!(home.create("a", &[]), home.create("b", &[]));
}

// ---------------------------------------------------------------------------------------------
// Spawn-failure circuit breaker
// ---------------------------------------------------------------------------------------------

#[test]
fn spawn_failure_auto_blocks_after_limit() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "done"]);
    home.break_spawn(&tid);
    let first = home.tick_report();
    assert!(!first["gave_up"].to_string().contains(&tid), "{first}");
    let task = home.task(&tid);
    assert_eq!(task["status"], "ready");
    assert_eq!(task["consecutive_failures"], 1);
    let second = home.tick_report();
    assert!(second["gave_up"].to_string().contains(&tid), "{second}");
    let task = home.task(&tid);
    assert_eq!(task["status"], "blocked");
    assert!(task["consecutive_failures"].as_i64().unwrap() >= 2);
    assert!(
        task["last_failure_error"]
            .as_str()
            .unwrap_or("")
            .contains("workspace"),
        "{task}"
    );
}

#[test]
fn successful_spawn_does_not_reset_failure_counter() {
    let home = Home::with("failure_limit = 5");
    let tid = home.create("x", &["--assignee", "sh", "--body", "sleep 600"]);
    home.break_spawn(&tid);
    home.tick();
    home.tick();
    assert_eq!(home.task(&tid)["consecutive_failures"], 2);
    home.mend_spawn(&tid);
    home.tick();
    let task = home.task(&tid);
    // The spawn worked, the run is not complete: past failures stay on the books.
    assert_eq!(task["consecutive_failures"], 2, "{task}");
    assert!(!task["last_failure_error"].is_null());
    assert_eq!(task["status"], "running");
    let pid = task["worker_pid"].as_i64().unwrap();
    home.ok(&["reclaim", &tid]);
    home.tick();
    home.wait_for("the worker to stop", Duration::from_secs(30), |_| {
        !alive(pid)
    });
}

#[test]
fn successful_completion_resets_failure_counter() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.sql(&format!(
        "UPDATE tasks SET consecutive_failures = 2, last_failure_error = 'old failure' WHERE id = '{tid}'"
    ));
    home.ok(&["complete", &tid, "--summary", "done"]);
    let task = home.task(&tid);
    assert_eq!(task["consecutive_failures"], 0);
    assert!(task["last_failure_error"].is_null());
}

#[test]
fn reassign_resets_failure_counter_for_new_profile() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.sql(&format!(
        "UPDATE tasks SET consecutive_failures = 1, last_failure_error = 'timed out' WHERE id = '{tid}'"
    ));
    home.ok(&["assign", &tid, "reviewer"]);
    let task = home.task(&tid);
    assert_eq!(task["assignee"], "reviewer");
    assert_eq!(task["consecutive_failures"], 0);
    assert!(task["last_failure_error"].is_null());
}

#[test]
fn per_task_max_retries_overrides_dispatcher_limit() {
    let home = Home::with("failure_limit = 10");
    let tid = home.create("one-shot", &["--assignee", "done", "--max-retries", "1"]);
    assert_eq!(home.task(&tid)["max_retries"], 1);
    home.break_spawn(&tid);
    home.tick();
    let task = home.task(&tid);
    assert_eq!(task["status"], "blocked");
    assert_eq!(task["consecutive_failures"], 1);
    let gave_up = home.event(&tid, "gave_up")["payload"].clone();
    assert_eq!(gave_up["limit_source"], "task", "{gave_up}");
    assert_eq!(gave_up["effective_limit"], 1, "{gave_up}");
}

#[test]
fn per_task_max_retries_allows_more_than_default() {
    let home = Home::new();
    let tid = home.create("flaky-retry", &["--assignee", "done", "--max-retries", "5"]);
    home.break_spawn(&tid);
    for i in 1..5 {
        home.tick();
        assert_eq!(home.status(&tid), "ready", "at failure {i}");
    }
    home.tick();
    let task = home.task(&tid);
    assert_eq!(task["status"], "blocked");
    assert_eq!(task["consecutive_failures"], 5);
}

#[test]
fn max_retries_none_falls_through_to_dispatcher_limit() {
    let home = Home::with("failure_limit = 4");
    let tid = home.create("standard", &["--assignee", "done"]);
    assert!(home.task(&tid)["max_retries"].is_null());
    home.break_spawn(&tid);
    for i in 1..4 {
        home.tick();
        assert_eq!(home.status(&tid), "ready", "premature trip at failure {i}");
    }
    home.tick();
    assert_eq!(home.status(&tid), "blocked");
    let gave_up = home.event(&tid, "gave_up")["payload"].clone();
    assert_eq!(gave_up["limit_source"], "dispatcher", "{gave_up}");
    assert_eq!(gave_up["effective_limit"], 4, "{gave_up}");
}

#[test]
fn workspace_resolution_failure_also_counts() {
    let home = Home::with("failure_limit = 3");
    let tid = home.create("x", &["--assignee", "done"]);
    home.break_spawn(&tid);
    home.tick();
    let task = home.task(&tid);
    assert_eq!(task["consecutive_failures"], 1);
    assert_eq!(task["status"], "ready");
    assert!(
        task["last_failure_error"]
            .as_str()
            .unwrap_or("")
            .contains("workspace")
    );
    home.tick();
    let report = home.tick_report();
    assert!(report["gave_up"].to_string().contains(&tid), "{report}");
    assert_eq!(home.status(&tid), "blocked");
}

// ---------------------------------------------------------------------------------------------
// Crash detection
// ---------------------------------------------------------------------------------------------

#[test]
fn detect_crashed_workers_reclaims() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.claim_as(&tid, "worker");
    home.set_worker_pid(&tid, DEAD_PID);
    home.tick();
    assert!(
        home.kinds(&tid).iter().any(|k| k == "crashed"),
        "{:?}",
        home.kinds(&tid)
    );
    let task = home.task(&tid);
    assert!(task["worker_pid"].is_null(), "{task}");
    assert_eq!(task["status"], "ready");
}

// ---------------------------------------------------------------------------------------------
// Daemon loop
// ---------------------------------------------------------------------------------------------

#[test]
fn daemon_runs_and_stops() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "done"]);
    let mut daemon = home.daemon();
    home.wait_for("a tick to run the task", Duration::from_secs(30), |h| {
        h.status(&tid) == "done"
    });
    let status = daemon.stop().expect("the daemon exits on SIGTERM");
    assert!(status.success(), "{status:?}");
}

#[test]
fn daemon_keeps_going_after_tick_exception() {
    let home = Home::new();
    // Ticks fail while another writer holds the board; the daemon must survive them. A tick
    // with nothing to do takes no write lock (it reads first), so a ready task waits: each tick
    // must write to claim it.
    let waiting = home.create("during the failures", &["--assignee", "done"]);
    let holder = Connection::open(home.k.default_db()).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let log = home.k.home().join("dispatch.err");
    let child = home
        .k
        .cmd()
        .env("HERMES_KANBAN_BUSY_TIMEOUT_MS", "50")
        .args(["dispatch", "--interval", "0.05"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut daemon = super::support::Daemon(child);
    home.wait_for("a failed tick", Duration::from_secs(30), |_| {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("tick failing"))
    });
    assert!(
        daemon.0.try_wait().unwrap().is_none(),
        "the daemon died on a failed tick"
    );
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    let tid = home.create("after the failures", &["--assignee", "done"]);
    home.wait_for(
        "a later tick to run the tasks",
        Duration::from_secs(60),
        |h| h.status(&tid) == "done" && h.status(&waiting) == "done",
    );
    daemon.stop();
}

// ---------------------------------------------------------------------------------------------
// Logs
// ---------------------------------------------------------------------------------------------

#[test]
fn worker_log_rotation_keeps_one_generation() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "done"]);
    let logs = home.k.home().join("kanban").join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let target = logs.join(format!("{tid}.log"));
    std::fs::write(&target, vec![b'x'; 3 * 1024 * 1024]).unwrap();
    assert!(home.until_idle().code == 0);
    let rotated = logs.join(format!("{tid}.log.1"));
    assert_eq!(std::fs::metadata(&rotated).unwrap().len(), 3 * 1024 * 1024);
    assert!(std::fs::metadata(&target).unwrap().len() < 1024 * 1024);
}

#[test]
fn read_worker_log_tail() {
    let home = Home::new();
    let tid = home.create(
        "x",
        &[
            "--assignee",
            "sh",
            "--body",
            "for i in 0 1 2 3 4 5 6 7 8 9; do echo line $i; done",
        ],
    );
    assert_eq!(home.until_idle().code, 0);
    let full = home.ok(&["logs", &tid]);
    assert!(full.contains("line 0") && full.contains("line 9"), "{full}");
    let missing = home.run(&["logs", "t_00000000"]);
    assert_ne!(missing.code, 0);
    assert!(!missing.stderr.is_empty());
}

// ---------------------------------------------------------------------------------------------
// CLI bulk verbs
// ---------------------------------------------------------------------------------------------

#[test]
fn cli_complete_bulk() {
    // Differences table, "`complete` and `block` take one task": each closes one run, fenced
    // on it, so a second id is a usage error and nothing changes.
    let home = Home::new();
    let a = home.create("a", &[]);
    let b = home.create("b", &[]);
    let run = home.run(&["complete", &a, &b, "--result", "all-done"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(home.status(&a), "ready");
    assert_eq!(home.status(&b), "ready");
}

#[test]
fn cli_archive_bulk() {
    let home = Home::new();
    let a = home.create("a", &[]);
    let b = home.create("b", &[]);
    home.ok(&["archive", &a, &b]);
    assert_eq!(home.status(&a), "archived");
    assert_eq!(home.status(&b), "archived");
}

#[test]
fn cli_unblock_bulk() {
    let home = Home::new();
    let a = home.create("a", &[]);
    let b = home.create("b", &[]);
    home.ok(&["block", &a, "--reason", "x"]);
    home.ok(&["block", &b, "--reason", "x"]);
    let out = home.ok(&["unblock", &a, &b]);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert_eq!(home.status(&a), "ready");
    assert_eq!(home.status(&b), "ready");
}

#[test]
fn cli_block_bulk_via_ids_flag() {
    // Differences table, "`complete` and `block` take one task".
    let home = Home::new();
    let a = home.create("a", &[]);
    let b = home.create("b", &[]);
    let run = home.run(&["block", &a, "--reason", "need input", "--ids", &b]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(home.status(&a), "ready");
    assert_eq!(home.status(&b), "ready");
}

#[test]
fn cli_create_with_idempotency_key() {
    let home = Home::new();
    let one = home.json(&["create", "x", "--idempotency-key", "abc"]);
    let two = home.json(&["create", "y", "--idempotency-key", "abc"]);
    assert_eq!(one["id"], two["id"]);
}

#[test]
fn cli_log_missing_task() {
    let home = Home::new();
    let run = home.run(&["logs", "t_nope"]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("t_nope"), "{}", run.stderr);
}

#[test]
fn run_slash_every_verb_returns_sensible_output() {
    let home = Home::new();
    let a = home.create("a", &[]);
    let b = home.create("b", &["--parent", &a]);
    let invocations: Vec<Vec<&str>> = vec![
        vec![],
        vec!["--help"],
        vec!["init"],
        vec!["create", "smoke"],
        vec!["list"],
        vec!["show", &a],
        vec!["assign", &a, "researcher"],
        vec!["link", &a, &b],
        vec!["unlink", &a, &b],
        vec!["claim", &a],
        vec!["comment", &a, "--body", "hello"],
        vec!["complete", &a, "--force", "--summary", "done"],
        vec!["block", &b, "--reason", "need input"],
        vec!["unblock", &b],
        vec!["archive", &a],
        vec!["--json", "dispatch", "--dry-run"],
        vec!["logs", &a],
        vec!["events", &b],
    ];
    for args in invocations {
        let run = home.run(&args);
        assert!(
            !(run.stdout.trim().is_empty() && run.stderr.trim().is_empty()),
            "no output for `kanban {args:?}`"
        );
        assert_ne!(run.code, 101, "`kanban {args:?}` panicked: {}", run.stderr);
    }
}

// ---------------------------------------------------------------------------------------------
// Max runtime
// ---------------------------------------------------------------------------------------------

/// Claims `tid` for a live stand-in worker whose run started 30 s ago.
fn overrunning(home: &Home, tid: &str) -> Sleeper {
    let worker = Sleeper::start();
    home.claim_as(tid, "worker");
    home.set_worker_pid(tid, worker.pid());
    home.age_run(tid, 30);
    worker
}

#[test]
fn max_runtime_terminates_overrun_worker() {
    let home = Home::new();
    let tid = home.create("long job", &["--assignee", "worker", "--max-runtime", "1"]);
    let mut worker = overrunning(&home, &tid);
    let report = home.tick_report();
    assert!(report["timed_out"].to_string().contains(&tid), "{report}");
    assert!(worker.exited(), "the overrunning worker was not terminated");
    let task = home.task(&tid);
    assert_eq!(task["status"], "ready");
    assert!(task["worker_pid"].is_null());
    let timed_out = home.event(&tid, "timed_out")["payload"].clone();
    assert_eq!(timed_out["limit_seconds"], 1, "{timed_out}");
    assert!(
        timed_out["elapsed_seconds"].as_i64().unwrap() >= 30,
        "{timed_out}"
    );
}

#[test]
fn repeated_timeouts_auto_block_at_default_limit() {
    let home = Home::new();
    let tid = home.create("long job", &["--assignee", "worker", "--max-runtime", "1"]);
    for expected in 1..=2 {
        let _worker = overrunning(&home, &tid);
        home.tick();
        assert_eq!(home.task(&tid)["consecutive_failures"], expected);
    }
    assert_eq!(home.status(&tid), "blocked");
    assert_eq!(
        home.kinds(&tid)
            .iter()
            .filter(|k| *k == "timed_out")
            .count(),
        2
    );
    let gave_up = home.event(&tid, "gave_up")["payload"].clone();
    assert_eq!(gave_up["trigger_outcome"], "timed_out", "{gave_up}");
}

#[test]
fn max_runtime_none_means_no_cap() {
    let home = Home::new();
    let tid = home.create("uncapped", &["--assignee", "worker"]);
    let worker = Sleeper::start();
    home.claim_as(&tid, "worker");
    home.set_worker_pid(&tid, worker.pid());
    home.age_run(&tid, 100_000);
    let report = home.tick_report();
    assert!(
        report["timed_out"].as_array().unwrap().is_empty(),
        "{report}"
    );
    assert_eq!(home.status(&tid), "running");
}

#[test]
fn create_task_persists_max_runtime() {
    let home = Home::new();
    let tid = home.create("x", &["--max-runtime", "600"]);
    assert_eq!(home.task(&tid)["max_runtime_seconds"], 600);
}

#[test]
fn enforce_max_runtime_integrates_with_dispatch() {
    let home = Home::new();
    let tid = home.create("timeout-me", &["--assignee", "done", "--max-runtime", "1"]);
    let _worker = overrunning(&home, &tid);
    let report = home.tick_report();
    assert!(report["timed_out"].to_string().contains(&tid), "{report}");
    // Released and, in the same pass, started again.
    let status = home.status(&tid);
    assert!(
        status == "ready" || status == "running" || status == "done",
        "{status}"
    );
    let again = home.tick_report();
    assert!(!again["timed_out"].to_string().contains(&tid), "{again}");
}

// ---------------------------------------------------------------------------------------------
// Heartbeat
// ---------------------------------------------------------------------------------------------

#[test]
fn heartbeat_on_running_task() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.json(&["claim", &tid]);
    home.json(&["heartbeat", &tid, "--note", "step 3/10"]);
    assert!(!home.task(&tid)["last_heartbeat_at"].is_null());
    let beats: Vec<_> = home
        .events(&tid)
        .into_iter()
        .filter(|e| e["kind"] == "heartbeat")
        .collect();
    assert_eq!(beats.len(), 1);
    assert_eq!(
        beats[0]["payload"],
        serde_json::json!({"note": "step 3/10"})
    );
}

#[test]
fn heartbeat_refused_when_not_running() {
    let home = Home::new();
    let tid = home.create("x", &[]);
    let run = home.run(&["heartbeat", &tid]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(home.task(&tid)["last_heartbeat_at"].is_null());
}

#[test]
fn cli_heartbeat_verb() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.json(&["claim", &tid]);
    home.ok(&["heartbeat", &tid]);
    home.ok(&["heartbeat", &tid, "--note", "step 42"]);
    let notes: Vec<_> = home
        .events(&tid)
        .into_iter()
        .filter(|e| e["kind"] == "heartbeat")
        .map(|e| e["payload"]["note"].clone())
        .collect();
    assert!(notes.contains(&serde_json::json!("step 42")), "{notes:?}");
}

// ---------------------------------------------------------------------------------------------
// Event vocabulary
// ---------------------------------------------------------------------------------------------

#[test]
fn recompute_ready_emits_promoted_not_ready() {
    let home = Home::new();
    let parent = home.create("p", &[]);
    let child = home.create("c", &["--parent", &parent]);
    home.ok(&["complete", &parent, "--result", "ok"]);
    home.tick();
    let kinds = home.kinds(&child);
    assert!(kinds.iter().any(|k| k == "promoted"), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k == "ready"), "{kinds:?}");
}

#[test]
fn spawn_failure_circuit_breaker_emits_gave_up() {
    let home = Home::with("failure_limit = 5");
    let tid = home.create("x", &["--assignee", "done"]);
    home.break_spawn(&tid);
    for _ in 0..5 {
        home.tick();
    }
    let kinds = home.kinds(&tid);
    assert!(kinds.iter().any(|k| k == "gave_up"), "{kinds:?}");
    assert!(
        !kinds.iter().any(|k| k == "spawn_auto_blocked"),
        "{kinds:?}"
    );
}

#[test]
fn spawned_event_emitted_with_pid() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "done"]);
    let report = home.tick_report();
    let pid = report["spawned"][0]["pid"].as_i64().unwrap();
    let spawned: Vec<_> = home
        .events(&tid)
        .into_iter()
        .filter(|e| e["kind"] == "spawned")
        .collect();
    assert_eq!(spawned.len(), 1, "{:?}", home.kinds(&tid));
    assert_eq!(spawned[0]["payload"]["pid"], pid);
    assert_eq!(home.until_idle().code, 0);
}

#[test]
fn migration_renames_legacy_event_kinds() {
    // Differences table, "Older event names": kanban reads and keeps the events it finds.
    let home = Home::new();
    let tid = home.create("x", &[]);
    let at = now();
    home.sql(&format!(
        "INSERT INTO task_events (task_id, kind, payload, created_at) VALUES
           ('{tid}', 'ready', NULL, {at}), ('{tid}', 'priority', NULL, {at}),
           ('{tid}', 'spawn_auto_blocked', NULL, {at});"
    ));
    home.ok(&["init"]);
    let kinds = home.kinds(&tid);
    for old in ["ready", "priority", "spawn_auto_blocked"] {
        assert!(kinds.iter().any(|k| k == old), "{kinds:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// CLI --max-runtime
// ---------------------------------------------------------------------------------------------

#[test]
fn cli_create_max_runtime_bad_format_exits_nonzero() {
    let home = Home::new();
    let run = home.run(&["create", "bad", "--max-runtime", "fish"]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("max-runtime"), "{}", run.stderr);
    assert!(home.json(&["list"]).as_array().unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Runs
// ---------------------------------------------------------------------------------------------

#[test]
fn run_created_on_claim() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    assert!(home.task(&tid)["current_run_id"].is_null());
    home.json(&["claim", &tid]);
    let task = home.task(&tid);
    let runs = home.runs(&tid);
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_eq!(r["id"], task["current_run_id"]);
    assert_eq!(r["profile"], "worker");
    assert_eq!(r["status"], "running");
    assert!(r["outcome"].is_null() && r["ended_at"].is_null());
    assert!(!r["claim_lock"].is_null() && !r["claim_expires"].is_null());
}

#[test]
fn run_closed_on_complete_with_summary() {
    // The original also appends `cost: {cost_status: unknown}` to the metadata; kanban stores
    // the metadata as given (differences table).
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.json(&["claim", &tid]);
    home.ok(&[
        "complete",
        &tid,
        "--force",
        "--result",
        "shipped",
        "--summary",
        "implemented rate limiter, tests pass",
        "--metadata",
        r#"{"changed_files": ["limiter.py"], "tests_run": 12}"#,
    ]);
    let task = home.task(&tid);
    assert!(task["current_run_id"].is_null());
    assert_eq!(task["result"], "shipped");
    let runs = home.runs(&tid);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["status"], "done");
    assert_eq!(runs[0]["outcome"], "completed");
    assert_eq!(runs[0]["summary"], "implemented rate limiter, tests pass");
    assert_eq!(
        runs[0]["metadata"]["changed_files"],
        serde_json::json!(["limiter.py"])
    );
    assert_eq!(runs[0]["metadata"]["tests_run"], 12);
    assert!(!runs[0]["ended_at"].is_null());
}

#[test]
fn run_summary_falls_back_to_result() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.json(&["claim", &tid]);
    home.ok(&["complete", &tid, "--force", "--result", "only-arg"]);
    assert_eq!(home.runs(&tid)[0]["summary"], "only-arg");
}

#[test]
fn multiple_attempts_preserved_as_runs() {
    // An expired claim and a crash are both counted failures here: a limit of 3 keeps the
    // breaker out of the way of the third attempt, as the original's default did for it.
    let home = Home::with("failure_limit = 3");
    let tid = home.create("x", &["--assignee", "worker"]);
    // Attempt 1: the claim expires with no worker.
    home.claim_as(&tid, "worker");
    home.expire_claim(&tid, 10);
    home.tick();
    // Attempt 2: the worker dies.
    home.claim_as(&tid, "worker");
    home.set_worker_pid(&tid, DEAD_PID);
    home.tick();
    // Attempt 3: completed.
    home.json(&["claim", &tid]);
    home.ok(&["complete", &tid, "--force", "--result", "finally"]);
    assert_eq!(home.outcomes(&tid), ["reclaimed", "crashed", "completed"]);
    assert_eq!(home.runs(&tid)[2]["summary"], "finally");
    assert!(home.task(&tid)["current_run_id"].is_null());
}

/// `kanban ARGS…` as the worker of run `run` of `task` under claim lock `lock`.
fn as_worker(home: &Home, task: &str, run: i64, lock: &str, args: &[&str]) -> kanban_tests::Run {
    home.k
        .cmd()
        .env("HERMES_KANBAN_TASK", task)
        .env("HERMES_KANBAN_RUN_ID", run.to_string())
        .env("HERMES_KANBAN_CLAIM_LOCK", lock)
        .args(args)
        .output()
        .unwrap()
        .into()
}

/// Run 1 of `tid` crashed, run 2 is current; returns (run 1, run 2, the lock).
fn crashed_then_reclaimed(home: &Home, tid: &str) -> (i64, i64, String) {
    let lock = format!("{}:worker", host());
    let run1 = home.claim_as(tid, "worker");
    home.set_worker_pid(tid, DEAD_PID);
    home.tick();
    assert_eq!(home.outcomes(tid), ["crashed"]);
    let run2 = home.claim_as(tid, "worker");
    assert_ne!(run1, run2);
    (run1, run2, lock)
}

#[test]
fn stale_run_cannot_complete_new_attempt() {
    let home = Home::new();
    let tid = home.create("retry guarded", &["--assignee", "worker"]);
    let (run1, run2, lock) = crashed_then_reclaimed(&home, &tid);
    let late = as_worker(
        &home,
        &tid,
        run1,
        &lock,
        &["complete", "--summary", "late stale completion"],
    );
    assert_eq!(late.code, 3, "{late:?}");
    let task = home.task(&tid);
    assert_eq!(task["status"], "running");
    assert_eq!(task["current_run_id"], run2);
    let current = as_worker(
        &home,
        &tid,
        run2,
        &lock,
        &["complete", "--summary", "current completion"],
    );
    assert_eq!(current.code, 0, "{current:?}");
    assert_eq!(home.outcomes(&tid), ["crashed", "completed"]);
    assert_eq!(home.runs(&tid)[1]["summary"], "current completion");
}

#[test]
fn stale_run_cannot_block_or_heartbeat_new_attempt() {
    let home = Home::new();
    let tid = home.create("retry heartbeat guarded", &["--assignee", "worker"]);
    let (run1, run2, lock) = crashed_then_reclaimed(&home, &tid);
    let hb = home.task(&tid)["last_heartbeat_at"].clone();
    assert_eq!(
        as_worker(&home, &tid, run1, &lock, &["heartbeat", "--note", "late"]).code,
        3
    );
    assert_eq!(
        as_worker(
            &home,
            &tid,
            run1,
            &lock,
            &["block", "--reason", "late block"]
        )
        .code,
        3
    );
    let task = home.task(&tid);
    assert_eq!(task["status"], "running");
    assert_eq!(task["current_run_id"], run2);
    assert_eq!(task["last_heartbeat_at"], hb);
    assert_eq!(
        as_worker(
            &home,
            &tid,
            run2,
            &lock,
            &["heartbeat", "--note", "current"]
        )
        .code,
        0
    );
    assert_eq!(
        as_worker(
            &home,
            &tid,
            run2,
            &lock,
            &["block", "--reason", "current block"]
        )
        .code,
        0
    );
    assert_eq!(home.status(&tid), "blocked");
}

#[test]
fn run_on_block_with_reason() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.json(&["claim", &tid]);
    home.ok(&["block", &tid, "--reason", "needs API key"]);
    let r = home.runs(&tid).pop().unwrap();
    assert_eq!(r["outcome"], "blocked");
    assert_eq!(r["summary"], "needs API key");
    assert!(!r["ended_at"].is_null());
    assert!(home.task(&tid)["current_run_id"].is_null());
}

#[test]
fn run_on_spawn_failure_records_failed_runs() {
    let home = Home::with("failure_limit = 5");
    let tid = home.create("x", &["--assignee", "done"]);
    home.break_spawn(&tid);
    for _ in 0..5 {
        home.tick();
    }
    let runs = home.runs(&tid);
    assert_eq!(runs.len(), 5);
    // Differences table, "The breaker's last run": the run that tripped it keeps the outcome of
    // what happened (`spawn_failed`); `gave_up` is the task's event.
    assert!(
        runs.iter().all(|r| r["outcome"] == "spawn_failed"),
        "{runs:?}"
    );
    assert!(
        runs[4]["error"]
            .as_str()
            .unwrap_or("")
            .contains("workspace")
    );
    assert!(home.kinds(&tid).iter().any(|k| k == "gave_up"));
}

#[test]
fn event_rows_carry_run_id() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.json(&["claim", &tid]);
    home.ok(&["complete", &tid, "--force", "--result", "ok"]);
    let run_of = |kind: &str| home.event(&tid, kind)["run_id"].clone();
    assert!(run_of("created").is_null());
    assert!(!run_of("claimed").is_null());
    assert_eq!(run_of("claimed"), run_of("completed"));
}

// ---------------------------------------------------------------------------------------------
// The worker's prompt
// ---------------------------------------------------------------------------------------------

#[test]
fn build_worker_context_includes_prior_attempts() {
    let home = Home::new();
    let tid = home.create("port x", &["--assignee", "capture"]);
    home.json(&["claim", &tid]);
    home.ok(&[
        "block",
        &tid,
        "--reason",
        "needs clarification on IP vs user_id",
    ]);
    home.ok(&["unblock", &tid]);
    assert_eq!(home.until_idle().code, 0);
    let prompt = home.prompt(&tid);
    assert!(prompt.contains("Prior attempts on this task"), "{prompt}");
    assert!(prompt.contains("blocked"), "{prompt}");
    assert!(
        prompt.contains("needs clarification on IP vs user_id"),
        "{prompt}"
    );
}

#[test]
fn build_worker_context_caps_prior_attempts() {
    let home = Home::new();
    let tid = home.create("retry", &["--assignee", "capture"]);
    for i in 0..25 {
        let run = home.claim_as(&tid, "worker");
        home.sql(&format!(
            "UPDATE task_runs SET outcome = 'reclaimed', status = 'reclaimed', ended_at = {},
               summary = 'attempt {i} summary' WHERE id = {run};
             UPDATE tasks SET status = 'ready', claim_lock = NULL, claim_expires = NULL,
               current_run_id = NULL WHERE id = '{tid}';",
            now()
        ));
    }
    assert_eq!(home.until_idle().code, 0);
    let prompt = home.prompt(&tid);
    assert_eq!(prompt.matches("### Attempt ").count(), 10, "{prompt}");
    assert!(prompt.contains("15 older attempts omitted"), "{prompt}");
    assert!(prompt.contains("### Attempt 16 "), "{prompt}");
    assert!(prompt.len() < 20_000);
}

#[test]
fn build_worker_context_renders_author_with_safe_framing() {
    let home = Home::new();
    let tid = home.create("t", &["--assignee", "capture"]);
    home.ok(&[
        "comment",
        &tid,
        "--author",
        "hermes-system",
        "--body",
        "some note",
    ]);
    assert_eq!(home.until_idle().code, 0);
    let prompt = home.prompt(&tid);
    assert!(!prompt.contains("**hermes-system**"), "{prompt}");
    assert!(prompt.contains("comment from `hermes-system`"), "{prompt}");
    assert!(prompt.contains("some note"), "{prompt}");
}

#[test]
fn build_worker_context_caps_comments() {
    let home = Home::new();
    let tid = home.create("chatty", &["--assignee", "capture"]);
    let at = now();
    let rows: Vec<String> = (0..100)
        .map(|i| format!("('{tid}', 'u{}', 'comment {i}', {at})", i % 3))
        .collect();
    home.sql(&format!(
        "INSERT INTO task_comments (task_id, author, body, created_at) VALUES {};",
        rows.join(", ")
    ));
    assert_eq!(home.until_idle().code, 0);
    let prompt = home.prompt(&tid);
    let shown = prompt.lines().filter(|l| l.contains(": comment ")).count();
    assert_eq!(shown, 30, "{prompt}");
    assert!(prompt.contains("70 older comments omitted"), "{prompt}");
}

#[test]
fn build_worker_context_caps_huge_summary() {
    let home = Home::new();
    let tid = home.create("giant", &["--assignee", "capture"]);
    let run = home.claim_as(&tid, "worker");
    let huge = "X".repeat(1024 * 1024);
    home.sql(&format!(
        "UPDATE task_runs SET outcome = 'reclaimed', status = 'reclaimed', ended_at = {},
           summary = '{huge}' WHERE id = {run};
         UPDATE tasks SET status = 'ready', claim_lock = NULL, claim_expires = NULL,
           current_run_id = NULL WHERE id = '{tid}';",
        now()
    ));
    assert_eq!(home.until_idle().code, 0);
    let prompt = home.prompt(&tid);
    assert!(prompt.len() < 10_000, "{} chars", prompt.len());
    assert!(prompt.contains("truncated"));
}

// ---------------------------------------------------------------------------------------------
// Archive and never-claimed completions
// ---------------------------------------------------------------------------------------------

#[test]
fn archive_of_running_task_closes_run() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    let claim = home.json(&["claim", &tid]);
    home.ok(&["archive", &tid]);
    let task = home.task(&tid);
    assert_eq!(task["status"], "archived");
    assert!(task["current_run_id"].is_null());
    let run = home.runs(&tid).pop().unwrap();
    assert_eq!(run["id"], claim["run_id"]);
    assert!(!run["ended_at"].is_null());
    assert_eq!(run["outcome"], "reclaimed");
}

#[test]
fn archive_of_ready_task_does_not_create_spurious_run() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.ok(&["archive", &tid]);
    assert!(home.runs(&tid).is_empty());
}

#[test]
fn cli_bulk_complete_with_summary_rejects() {
    // Differences table, "`complete` and `block` take one task".
    let home = Home::new();
    let a = home.create("a", &["--assignee", "worker"]);
    let b = home.create("b", &["--assignee", "worker"]);
    home.json(&["claim", &a]);
    home.json(&["claim", &b]);
    let run = home.run(&["complete", &a, &b, "--summary", "oops"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(home.status(&a), "running");
    assert_eq!(home.status(&b), "running");
}

#[test]
fn cli_bulk_complete_without_summary_still_works() {
    // Differences table, "`complete` and `block` take one task": one call per task.
    let home = Home::new();
    let a = home.create("a", &["--assignee", "worker"]);
    let b = home.create("b", &["--assignee", "worker"]);
    home.json(&["claim", &a]);
    home.json(&["claim", &b]);
    assert_eq!(home.run(&["complete", &a, &b, "--summary", "done"]).code, 2);
    home.ok(&["complete", &a, "--force", "--summary", "done"]);
    home.ok(&["complete", &b, "--force", "--summary", "done"]);
    assert_eq!(home.status(&a), "done");
    assert_eq!(home.status(&b), "done");
}

#[test]
fn completed_event_payload_carries_summary() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.json(&["claim", &tid]);
    home.ok(&[
        "complete",
        &tid,
        "--force",
        "--summary",
        "handoff line 1\nextra",
    ]);
    let completed: Vec<_> = home
        .events(&tid)
        .into_iter()
        .filter(|e| e["kind"] == "completed")
        .collect();
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["payload"]["summary"], "handoff line 1");
}

#[test]
fn completed_event_payload_summary_none_when_missing() {
    // A completion with nothing handed over needs the knob that accepts it (README "Handoff").
    let home = Home::with("allow_empty_completion = true");
    let tid = home.create("x", &["--assignee", "worker"]);
    home.json(&["claim", &tid]);
    home.ok(&["complete", &tid, "--force"]);
    let payload = home.event(&tid, "completed")["payload"].clone();
    assert!(
        payload.get("summary").is_none_or(|s| s.is_null()),
        "{payload}"
    );
}

#[test]
fn complete_never_claimed_task_synthesizes_run() {
    let home = Home::new();
    let tid = home.create("skip claim", &["--assignee", "worker"]);
    assert!(home.runs(&tid).is_empty());
    home.ok(&[
        "complete",
        &tid,
        "--summary",
        "did it manually",
        "--metadata",
        r#"{"reason": "human intervention"}"#,
    ]);
    let runs = home.runs(&tid);
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_eq!(r["outcome"], "completed");
    assert_eq!(r["summary"], "did it manually");
    assert_eq!(
        r["metadata"],
        serde_json::json!({"reason": "human intervention"})
    );
    assert_eq!(r["started_at"], r["ended_at"]);
    assert!(home.task(&tid)["current_run_id"].is_null());
    assert_eq!(home.event(&tid, "completed")["run_id"], r["id"]);
}

#[test]
fn block_never_claimed_task_synthesizes_run() {
    let home = Home::new();
    let tid = home.create("drop this", &["--assignee", "worker"]);
    home.ok(&["block", &tid, "--reason", "deprioritized"]);
    let runs = home.runs(&tid);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["outcome"], "blocked");
    assert_eq!(runs[0]["summary"], "deprioritized");
    assert_eq!(runs[0]["started_at"], runs[0]["ended_at"]);
    assert_eq!(home.event(&tid, "blocked")["run_id"], runs[0]["id"]);
}

#[test]
fn complete_never_claimed_without_handoff_skips_synthesis() {
    // An empty completion needs the knob that accepts it (the original refuses it too).
    let home = Home::with("allow_empty_completion = true");
    let tid = home.create("simple", &["--assignee", "worker"]);
    home.ok(&["complete", &tid]);
    assert!(home.runs(&tid).is_empty());
}

#[test]
fn event_dataclass_carries_run_id() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    let run_id = home.json(&["claim", &tid])["run_id"].clone();
    home.ok(&["complete", &tid, "--force", "--summary", "done"]);
    assert!(home.event(&tid, "created")["run_id"].is_null());
    assert_eq!(home.event(&tid, "claimed")["run_id"], run_id);
    assert_eq!(home.event(&tid, "completed")["run_id"], run_id);
}

#[test]
fn claim_task_recovers_from_invariant_leak() {
    let home = Home::new();
    let tid = home.create("invariant test", &["--assignee", "worker"]);
    let leaked = home.json(&["claim", &tid])["run_id"].as_i64().unwrap();
    home.sql(&format!(
        "UPDATE tasks SET status = 'ready', claim_lock = NULL, claim_expires = NULL WHERE id = '{tid}'"
    ));
    let fresh = home.json(&["claim", &tid])["run_id"].as_i64().unwrap();
    assert_ne!(fresh, leaked);
    let runs = home.runs(&tid);
    let old = runs.iter().find(|r| r["id"] == leaked).unwrap();
    assert!(!old["ended_at"].is_null(), "{old}");
    assert_eq!(old["outcome"], "reclaimed");
    let new = runs.iter().find(|r| r["id"] == fresh).unwrap();
    assert!(new["ended_at"].is_null());
}

// ---------------------------------------------------------------------------------------------
// A fresh home, show --json
// ---------------------------------------------------------------------------------------------

#[test]
fn cli_create_on_fresh_home_auto_inits() {
    let k = kanban_tests::Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    assert!(!k.default_db().exists());
    let id = k.create("smoke", &["--assignee", "worker"]);
    assert_eq!(k.status(&id), "ready");
    assert!(k.default_db().exists());
}

#[test]
fn connect_auto_inits_fresh_db() {
    let k = kanban_tests::Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    let list = k.json(&["list"]);
    assert!(list.as_array().unwrap().is_empty());
    let id = k.create("x", &[]);
    assert_eq!(k.json(&["show", &id])["task"]["title"], "x");
}

#[test]
fn cli_show_json_carries_runs() {
    let home = Home::new();
    let tid = home.create("show test", &["--assignee", "worker"]);
    home.json(&["claim", &tid]);
    home.ok(&["complete", &tid, "--force", "--summary", "inspected"]);
    let shown = home.json(&["show", &tid]);
    let runs = shown["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["outcome"], "completed");
    assert_eq!(runs[0]["summary"], "inspected");
    for e in shown["events"].as_array().unwrap() {
        assert!(e.get("run_id").is_some(), "{e}");
    }
}

#[test]
fn unblock_invariant_recovery() {
    let home = Home::new();
    let tid = home.create("unblock invariant", &["--assignee", "worker"]);
    let leaked = home.json(&["claim", &tid])["run_id"].clone();
    home.sql(&format!(
        "UPDATE tasks SET status = 'blocked' WHERE id = '{tid}'"
    ));
    home.ok(&["unblock", &tid]);
    let task = home.task(&tid);
    assert_eq!(task["status"], "ready");
    assert!(task["current_run_id"].is_null(), "{task}");
    let run = home
        .runs(&tid)
        .into_iter()
        .find(|r| r["id"] == leaked)
        .unwrap();
    assert_eq!(run["outcome"], "reclaimed");
    assert!(!run["ended_at"].is_null());
}

#[test]
fn unblock_normal_path_no_spurious_run() {
    let home = Home::new();
    let tid = home.create("normal unblock", &["--assignee", "worker"]);
    home.json(&["claim", &tid]);
    home.ok(&["block", &tid, "--reason", "pause"]);
    let before = home.runs(&tid).len();
    home.ok(&["unblock", &tid]);
    assert_eq!(home.runs(&tid).len(), before);
    let task = home.task(&tid);
    assert_eq!(task["status"], "ready");
    assert!(task["current_run_id"].is_null());
}

#[test]
fn migration_backfills_inflight_run_for_legacy_db() {
    // Differences table, "A running task without a run": kanban synthesizes no run row; the
    // dispatcher treats the claim like any other and `complete` still closes the task.
    let home = Home::new();
    let tid = home.create("pre-migration", &["--assignee", "worker"]);
    home.claim_as(&tid, "worker");
    home.sql(&format!(
        "DELETE FROM task_runs WHERE task_id = '{tid}';
         UPDATE tasks SET current_run_id = NULL WHERE id = '{tid}';"
    ));
    home.ok(&["init"]);
    assert!(home.runs(&tid).is_empty());
    home.ok(&[
        "complete",
        &tid,
        "--force",
        "--result",
        "done",
        "--summary",
        "ok",
    ]);
    assert_eq!(home.status(&tid), "done");
}

#[test]
fn migration_backfill_idempotent_under_re_run() {
    // Differences table, "A running task without a run": re-opening the board never adds rows.
    let home = Home::new();
    let tid = home.create("legacy inflight", &["--assignee", "worker"]);
    let at = now();
    home.sql(&format!(
        "UPDATE tasks SET status = 'running', claim_lock = 'old', claim_expires = {},
           started_at = {at}, current_run_id = NULL WHERE id = '{tid}';
         DELETE FROM task_runs WHERE task_id = '{tid}';",
        at + 900
    ));
    for _ in 0..3 {
        home.ok(&["init"]);
    }
    assert!(home.runs(&tid).len() <= 1);
}

// ---------------------------------------------------------------------------------------------
// Liveness, ids, display
// ---------------------------------------------------------------------------------------------

#[test]
fn pid_alive_detects_zombie() {
    // A worker that exited but was not reaped by its parent (a zombie) is dead to kanban.
    let home = Home::new();
    let tid = home.create("zombie", &["--assignee", "worker"]);
    let mut child = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    let pid = i64::from(child.id());
    std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(std::time::Instant::now() < deadline, "no zombie");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok(),
        "reaped too early"
    );
    home.claim_as(&tid, "worker");
    home.set_worker_pid(&tid, pid);
    home.tick();
    assert!(
        home.kinds(&tid).iter().any(|k| k == "crashed"),
        "{:?}",
        home.kinds(&tid)
    );
    child.wait().unwrap();
}

#[test]
fn task_ids_dont_collide_at_scale() {
    let home = Home::new();
    let script = "i=0; while [ $i -lt 500 ]; do \"$KANBAN\" --home \"$KHOME\" create scale-$i >/dev/null || exit 1; i=$((i+1)); done";
    let status = std::process::Command::new("sh")
        .args(["-c", script])
        .env("KANBAN", home.k.bin())
        .env("KHOME", home.k.home())
        .status()
        .unwrap();
    assert!(status.success());
    let list = home.json(&["list"]);
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 500);
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), 500);
    for id in &ids[..10] {
        assert!(id.starts_with("t_") && id.len() == 10, "{id}");
    }
}

#[test]
fn cli_show_clamps_negative_elapsed() {
    let home = Home::new();
    let tid = home.create("time-skewed", &["--assignee", "worker"]);
    home.json(&["claim", &tid]);
    home.sql(&format!(
        "UPDATE task_runs SET started_at = {} WHERE task_id = '{tid}'",
        now() + 3600
    ));
    home.ok(&["complete", &tid, "--force", "--summary", "after skew"]);
    let shown = home.ok(&["show", &tid]);
    let negative = shown
        .split(|c: char| c.is_whitespace() || c == '(' || c == ',')
        .any(|w| {
            w.strip_prefix('-')
                .and_then(|rest| rest.strip_suffix('s'))
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        });
    assert!(!negative, "show prints a negative elapsed time:\n{shown}");
}

// ---------------------------------------------------------------------------------------------
// Older boards
// ---------------------------------------------------------------------------------------------

/// Replaces the default board by one with this `tasks` table and a minimal `task_events`.
fn legacy(home: &Home, tasks: &str, insert: &str) {
    let db = home.k.default_db();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE tasks ({tasks});
         CREATE TABLE task_events (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL,
             kind TEXT NOT NULL, payload TEXT, created_at INTEGER NOT NULL);
         {insert}"
    ))
    .unwrap();
}

fn task_columns(home: &Home) -> Vec<String> {
    let conn = Connection::open(home.k.default_db()).unwrap();
    let mut stmt = conn
        .prepare("SELECT name FROM pragma_table_info('tasks')")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<Vec<String>>>()
        .unwrap()
}

const MINIMAL: &str =
    "id TEXT PRIMARY KEY, title TEXT NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL";

#[test]
fn legacy_db_without_skills_column_migrates() {
    let home = Home::new();
    legacy(
        &home,
        MINIMAL,
        "INSERT INTO tasks (id, title, status, created_at) VALUES ('legacy', 'old task', 'ready', 1);",
    );
    assert!(!task_columns(&home).iter().any(|c| c == "skills"));
    home.ok(&["list"]);
    assert!(task_columns(&home).iter().any(|c| c == "skills"));
    home.ok(&["list"]);
    assert!(home.task("legacy")["skills"].is_null());
}

#[test]
fn legacy_spawn_failure_columns_are_copied_not_renamed() {
    let home = Home::new();
    legacy(
        &home,
        "id TEXT PRIMARY KEY, title TEXT NOT NULL, body TEXT, assignee TEXT, status TEXT NOT NULL,
         priority INTEGER DEFAULT 0, created_by TEXT, created_at INTEGER NOT NULL, started_at INTEGER,
         completed_at INTEGER, workspace_kind TEXT NOT NULL DEFAULT 'scratch', workspace_path TEXT,
         claim_lock TEXT, claim_expires INTEGER, tenant TEXT, result TEXT, idempotency_key TEXT,
         spawn_failures INTEGER NOT NULL DEFAULT 0, worker_pid INTEGER, last_spawn_error TEXT",
        "INSERT INTO tasks (id, title, assignee, status, created_at, spawn_failures, last_spawn_error)
         VALUES ('legacy', 'old task', 'default', 'ready', 1, 4, 'missing profile');",
    );
    home.ok(&["list"]);
    let cols = task_columns(&home);
    for c in [
        "spawn_failures",
        "consecutive_failures",
        "last_spawn_error",
        "last_failure_error",
    ] {
        assert!(cols.iter().any(|x| x == c), "{c}: {cols:?}");
    }
    let task = home.task("legacy");
    assert_eq!(task["consecutive_failures"], 4, "{task}");
    assert_eq!(task["last_failure_error"], "missing profile", "{task}");
    home.ok(&["list"]);
    assert_eq!(home.task("legacy")["consecutive_failures"], 4);
}

#[test]
fn legacy_migration_no_legacy_columns_at_all() {
    let home = Home::new();
    legacy(
        &home,
        MINIMAL,
        "INSERT INTO tasks (id, title, status, created_at) VALUES ('t1', 'ancient task', 'ready', 1);",
    );
    home.ok(&["list"]);
    let cols = task_columns(&home);
    assert!(cols.iter().any(|c| c == "consecutive_failures"));
    assert!(cols.iter().any(|c| c == "last_failure_error"));
    assert!(!cols.iter().any(|c| c == "spawn_failures"));
    let task = home.task("t1");
    assert_eq!(task["consecutive_failures"], 0);
    assert!(task["last_failure_error"].is_null());
    home.ok(&["list"]);
    assert_eq!(home.task("t1")["consecutive_failures"], 0);
}

#[test]
fn legacy_migration_both_columns_already_present() {
    let home = Home::new();
    legacy(
        &home,
        "id TEXT PRIMARY KEY, title TEXT NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL,
         spawn_failures INTEGER NOT NULL DEFAULT 0, consecutive_failures INTEGER NOT NULL DEFAULT 0,
         last_spawn_error TEXT, last_failure_error TEXT",
        "INSERT INTO tasks (id, title, status, created_at, spawn_failures, consecutive_failures,
           last_spawn_error, last_failure_error)
         VALUES ('t2', 'partial task', 'ready', 1, 2, 3, 'old error', 'new error');",
    );
    home.ok(&["list"]);
    let task = home.task("t2");
    assert_eq!(task["consecutive_failures"], 3);
    assert_eq!(task["last_failure_error"], "new error");
    assert_eq!(
        home.count("SELECT spawn_failures FROM tasks WHERE id = 't2'"),
        2
    );
    home.ok(&["list"]);
    assert_eq!(home.task("t2")["consecutive_failures"], 3);
}

// ---------------------------------------------------------------------------------------------
// Recovery: reclaim and reassign
// ---------------------------------------------------------------------------------------------

/// Stages a live, unexpired claim of `tid` by worker pid `pid` under `lock`, as the original's
/// recovery tests do by hand; returns the run id.
fn live_claim(home: &Home, tid: &str, lock: &str, pid: i64, failures: i64) -> i64 {
    let future = now() + 3600;
    let at = now();
    home.sql(&format!(
        "UPDATE tasks SET status = 'running', claim_lock = '{lock}', claim_expires = {future},
           worker_pid = {pid}, consecutive_failures = {failures},
           last_failure_error = CASE WHEN {failures} > 0 THEN 'prior issue' END WHERE id = '{tid}';
         INSERT INTO task_runs (task_id, status, claim_lock, claim_expires, worker_pid, started_at)
           VALUES ('{tid}', 'running', '{lock}', {future}, {pid}, {at});
         UPDATE tasks SET current_run_id = last_insert_rowid() WHERE id = '{tid}';"
    ));
    home.task(tid)["current_run_id"].as_i64().unwrap()
}

#[test]
fn reclaim_task_resets_running_to_ready() {
    // Differences table, "Archive and reclaim do not signal": the operator's reclaim releases
    // the claim at once and names the pid; the dispatcher stops the worker.
    let home = Home::new();
    let t = home.create("stuck", &["--assignee", "broken"]);
    let worker = Sleeper::start();
    live_claim(
        &home,
        &t,
        &format!("{}:0123456789abcdef", host()),
        worker.pid(),
        0,
    );
    let report = home.tick_report();
    assert!(
        report["reclaimed"].as_array().unwrap().is_empty(),
        "{report}"
    );
    home.ok(&["reclaim", &t, "--reason", "test reason"]);
    let task = home.task(&t);
    assert_eq!(task["status"], "ready");
    assert!(task["claim_lock"].is_null());
    assert!(task["worker_pid"].is_null());
    let reclaims: Vec<_> = home
        .events(&t)
        .into_iter()
        .filter(|e| e["kind"] == "reclaimed")
        .collect();
    assert_eq!(reclaims.len(), 1);
    assert_eq!(reclaims[0]["payload"]["manual"], true);
    assert_eq!(reclaims[0]["payload"]["reason"], "test reason");
    assert!(
        alive(worker.pid()),
        "the operator's reclaim signalled the worker"
    );
}

#[test]
fn reclaim_task_returns_false_for_already_ready() {
    let home = Home::new();
    let t = home.create("ready task", &["--assignee", "x"]);
    assert_eq!(home.run(&["reclaim", &t]).code, 3);
}

#[test]
fn reassign_task_refuses_running_without_reclaim_first() {
    let home = Home::new();
    let t = home.create("running", &["--assignee", "orig"]);
    home.sql(&format!(
        "UPDATE tasks SET status = 'running', claim_lock = 'live' WHERE id = '{t}'"
    ));
    assert_eq!(home.run(&["reassign", &t, "new"]).code, 3);
    assert_eq!(home.run(&["assign", &t, "new"]).code, 3);
    assert_eq!(home.task(&t)["assignee"], "orig");
}

#[test]
fn reassign_task_with_reclaim_first_switches_profile() {
    let home = Home::new();
    let t = home.create("switch me", &["--assignee", "orig"]);
    // A claim of another host (not host-local): the reclaim releases it and names the pid.
    live_claim(&home, &t, "other-host:0123456789abcdef", 99_999, 0);
    home.ok(&["reassign", &t, "new", "--reclaim"]);
    let task = home.task(&t);
    assert_eq!(task["status"], "ready");
    assert_eq!(task["assignee"], "new");
    assert!(task["claim_lock"].is_null());
    assert!(task["worker_pid"].is_null());
    let kinds = home.kinds(&t);
    assert_eq!(&kinds[kinds.len() - 2..], ["reclaimed", "assigned"]);
}

// ---------------------------------------------------------------------------------------------
// The --max-runtime flag and the duration forms
// ---------------------------------------------------------------------------------------------

/// `create --max-runtime TEXT`: the seconds stored, or the run's failure.
fn max_runtime(home: &Home, text: &str) -> Result<i64, String> {
    let run = home.run(&["--json", "create", "d", "--max-runtime", text]);
    if run.code != 0 {
        return Err(run.stderr);
    }
    let id: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    Ok(home.task(id["id"].as_str().unwrap())["max_runtime_seconds"]
        .as_i64()
        .unwrap())
}

#[test]
fn parse_duration_accepts_formats() {
    let home = Home::new();
    // The original's `None`/`""` (no flag, no cap) is the flag left out.
    let t = home.create("no cap", &[]);
    assert!(home.task(&t)["max_runtime_seconds"].is_null());
    for (text, secs) in [
        ("42", 42),
        ("30s", 30),
        ("5m", 300),
        ("2h", 7_200),
        ("1d", 86_400),
        ("1.5h", 5_400),
    ] {
        assert_eq!(max_runtime(&home, text), Ok(secs), "{text}");
    }
}

#[test]
fn parse_duration_rejects_garbage() {
    let home = Home::new();
    for text in ["tenminutes", "fish"] {
        let err = max_runtime(&home, text).unwrap_err();
        assert!(err.contains("unknown duration unit"), "{text}: {err}");
    }
    assert_eq!(home.count("SELECT COUNT(*) FROM tasks"), 0);
}

#[test]
fn cli_create_max_runtime_via_duration() {
    let home = Home::new();
    assert_eq!(max_runtime(&home, "2h"), Ok(7_200));
}

#[test]
fn enforce_max_runtime_increments_consecutive_failures() {
    let home = Home::new();
    let tid = home.create("overrun", &["--assignee", "worker", "--max-runtime", "1"]);
    let _worker = overrunning(&home, &tid);
    assert_eq!(home.task(&tid)["consecutive_failures"], 0);
    home.tick();
    let after = home.task(&tid);
    assert_eq!(after["consecutive_failures"], 1);
    assert!(
        after["last_failure_error"]
            .as_str()
            .unwrap_or("")
            .contains("elapsed"),
        "{after}"
    );
    assert_eq!(after["status"], "ready");
}

#[test]
fn repeated_timeouts_trip_the_circuit_breaker() {
    let home = Home::with("failure_limit = 3");
    let tid = home.create(
        "loop forever",
        &["--assignee", "slow-worker", "--max-runtime", "1"],
    );
    for _ in 0..3 {
        let _worker = overrunning(&home, &tid);
        home.tick();
    }
    let task = home.task(&tid);
    assert_eq!(task["status"], "blocked");
    assert!(task["consecutive_failures"].as_i64().unwrap() >= 3);
    let kinds = home.kinds(&tid);
    assert!(kinds.iter().filter(|k| *k == "timed_out").count() >= 3);
    assert!(kinds.iter().any(|k| k == "gave_up"));
}

#[test]
fn detect_crashed_workers_increments_counter() {
    let home = Home::new();
    let tid = home.create("crashy", &["--assignee", "worker"]);
    home.claim_as(&tid, "worker");
    home.set_worker_pid(&tid, DEAD_PID);
    home.tick();
    let task = home.task(&tid);
    assert_eq!(task["consecutive_failures"], 1);
    assert_eq!(task["status"], "ready");
}

#[test]
fn detect_crashed_workers_protocol_violation_auto_blocks() {
    // Differences table, "A protocol violation": kanban blocks after three in a row (the
    // task's max_retries, when set, decides), not on the first; each is `protocol_violation`,
    // never `crashed`.
    let home = Home::new();
    let tid = home.create("quiet", &["--assignee", "worker"]);
    for n in 1..=3 {
        home.claim_as(&tid, "mock");
        home.set_worker_pid(&tid, DEAD_PID);
        home.record_exit(&tid, 0);
        home.tick();
        let task = home.task(&tid);
        let expected = if n < 3 { "ready" } else { "blocked" };
        assert_eq!(task["status"], expected, "violation {n}: {task}");
    }
    let task = home.task(&tid);
    assert!(
        task["last_failure_error"]
            .as_str()
            .unwrap_or("")
            .contains("kanban complete"),
        "{task}"
    );
    let kinds = home.kinds(&tid);
    assert!(kinds.iter().any(|k| k == "protocol_violation"), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k == "crashed"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "gave_up"), "{kinds:?}");
}

#[test]
fn detect_crashed_workers_nonzero_exit_uses_default_limit() {
    let home = Home::new();
    let tid = home.create("crashy", &["--assignee", "worker"]);
    home.claim_as(&tid, "mock");
    home.set_worker_pid(&tid, DEAD_PID);
    home.record_exit(&tid, 1);
    home.tick();
    let task = home.task(&tid);
    assert_eq!(task["status"], "ready");
    assert_eq!(task["consecutive_failures"], 1);
    let kinds = home.kinds(&tid);
    assert!(kinds.iter().any(|k| k == "crashed"));
    assert!(!kinds.iter().any(|k| k == "protocol_violation"));
}

#[test]
fn reclaim_task_clears_failure_counter() {
    let home = Home::new();
    let tid = home.create("stuck", &["--assignee", "worker"]);
    live_claim(&home, &tid, "0123abcd", 12345, 4);
    home.ok(&["reclaim", &tid, "--reason", "operator fixed config"]);
    let task = home.task(&tid);
    assert_eq!(task["consecutive_failures"], 0);
    assert!(task["last_failure_error"].is_null());
    assert_eq!(task["status"], "ready");
}

// Assignees: the original's profiles on disk are the `[profiles.<name>]` tables of kanban.toml
// (the harness's home defines `done`, `sh` and `capture`); kanban has no implicit `default`
// profile (docs/interchangeability.md).

#[test]
fn known_assignees_merges_disk_and_board() {
    let home = Home::new();
    home.create("a", &["--assignee", "done"]);
    home.create("b", &["--assignee", "on_board_only"]);
    let data = home.json(&["assignees"]);
    let by_name = |name: &str| {
        data.as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {data}"))
            .clone()
    };
    assert_eq!(by_name("sh")["on_disk"], true);
    assert_eq!(by_name("sh")["counts"], serde_json::json!({}));
    assert_eq!(by_name("done")["on_disk"], true);
    assert_eq!(by_name("done")["counts"], serde_json::json!({"ready": 1}));
    assert_eq!(by_name("on_board_only")["on_disk"], false);
    assert_eq!(
        by_name("on_board_only")["counts"],
        serde_json::json!({"ready": 1})
    );
}

#[test]
fn known_assignees_omits_off_disk_done_only_ghosts() {
    let home = Home::new();
    let ghost_done = home.create("old alias", &["--assignee", "ghost_done"]);
    home.ok(&["complete", &ghost_done, "--result", "ok"]);
    let mixed_done = home.create("old mixed", &["--assignee", "ghost_mixed"]);
    home.ok(&["complete", &mixed_done, "--result", "ok"]);
    home.create("needs reassignment", &["--assignee", "ghost_mixed"]);
    let sh_done = home.create("spawnable history", &["--assignee", "sh"]);
    home.ok(&["complete", &sh_done, "--result", "ok"]);
    home.sql(
        "INSERT INTO tasks (id, title, status, assignee, created_at) \
         VALUES ('t_blank_ghost', 'historical blank', 'ready', '', 1)",
    );
    let data = home.json(&["assignees"]);
    let names: Vec<&str> = data
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"ghost_done"), "{names:?}");
    assert!(!names.contains(&""), "{names:?}");
    let find = |name: &str| {
        data.as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(find("ghost_mixed")["on_disk"], false);
    assert_eq!(
        find("ghost_mixed")["counts"],
        serde_json::json!({"done": 1, "ready": 1})
    );
    assert_eq!(find("sh")["on_disk"], true);
    assert_eq!(find("sh")["counts"], serde_json::json!({"done": 1}));
}

#[test]
fn cli_assignees_json() {
    let home = Home::new();
    home.create("x", &["--assignee", "someone"]);
    let data = home.json(&["assignees"]);
    let names: Vec<&str> = data
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"someone"), "{names:?}");
}

#[test]
fn cli_runs_verb() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.ok(&["claim", &tid]);
    // The original's library call completes under the claim; kanban's CLI wants --force for a
    // claim it does not own.
    home.ok(&[
        "complete",
        &tid,
        "--result",
        "ok",
        "--summary",
        "shipped",
        "--force",
    ]);
    let out = home.ok(&["runs", &tid]);
    assert!(out.contains("completed"), "{out}");
    assert!(out.contains("shipped"), "{out}");
    assert!(out.contains("worker"), "{out}");
}

#[test]
fn cli_runs_json() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.ok(&["claim", &tid]);
    home.ok(&[
        "complete",
        &tid,
        "--result",
        "ok",
        "--summary",
        "shipped",
        "--metadata",
        r#"{"files": 1}"#,
        "--force",
    ]);
    let data = home.json(&["runs", &tid]);
    assert_eq!(data.as_array().unwrap().len(), 1);
    assert_eq!(data[0]["outcome"], "completed");
    assert_eq!(data[0]["metadata"], serde_json::json!({"files": 1}));
}

// The worker's prompt: the original's `build_worker_context` is `kanban context ID`, which prints
// exactly the prompt the next worker of the task gets.

#[test]
fn build_worker_context_uses_parent_run_summary() {
    let home = Home::new();
    let parent = home.create("research", &["--assignee", "researcher"]);
    let child = home.create("write", &["--assignee", "writer", "--parent", &parent]);
    home.json(&["claim", &parent]);
    home.ok(&[
        "complete",
        &parent,
        "--force",
        "--result",
        "done",
        "--summary",
        "three angles explored; B looks strongest",
        "--metadata",
        r#"{"sources": ["paper A", "paper B", "paper C"]}"#,
    ]);
    let ctx = home.ok(&["context", &child]);
    assert!(ctx.contains("Parent task results"), "{ctx}");
    assert!(
        ctx.contains("three angles explored; B looks strongest"),
        "{ctx}"
    );
    assert!(ctx.contains("\"sources\""), "{ctx}");
}

#[test]
fn build_worker_context_stamps_parent_freshness() {
    let home = Home::new();
    let parent = home.create("research", &["--assignee", "researcher"]);
    let child = home.create("write", &["--assignee", "writer", "--parent", &parent]);
    home.json(&["claim", &parent]);
    home.ok(&[
        "complete",
        &parent,
        "--force",
        "--result",
        "done",
        "--summary",
        "meeting ingest workflow finished; pipeline ready",
    ]);
    let old = now() - 18 * 3600;
    home.sql(&format!(
        "UPDATE tasks SET completed_at = {old} WHERE id = '{parent}'; \
         UPDATE task_runs SET ended_at = {old} WHERE task_id = '{parent}'"
    ));
    let ctx = home.ok(&["context", &child]);
    assert!(ctx.contains("meeting ingest workflow finished"), "{ctx}");
    assert!(ctx.contains("completed 18h ago"), "{ctx}");
    // Differences table: kanban words the caveat its own way ("a snapshot of that moment, not
    // the current state"), not "point-in-time snapshots, not live state".
    assert!(
        ctx.contains("snapshot of that moment, not the current state"),
        "{ctx}"
    );
}

#[test]
fn build_worker_context_includes_role_history() {
    let home = Home::new();
    for (title, summary) in [
        ("Review security PR #1", "approved, focus on CSRF"),
        (
            "Review security PR #2",
            "requested changes: SQL injection vector",
        ),
        ("Review security PR #3", "approved, rate-limit added"),
    ] {
        let tid = home.create(title, &["--assignee", "reviewer"]);
        home.json(&["claim", &tid]);
        home.ok(&["complete", &tid, "--force", "--summary", summary]);
    }
    let new_tid = home.create("Review perf PR", &["--assignee", "reviewer"]);
    let ctx = home.ok(&["context", &new_tid]);
    assert!(ctx.contains("## Recent work by @reviewer"), "{ctx}");
    assert!(ctx.contains("Review security PR #3"), "{ctx}");
    assert!(ctx.contains("approved, rate-limit added"), "{ctx}");
    let recent = ctx.split("## Recent work by").nth(1).unwrap();
    assert!(!recent.contains("Review perf PR"), "{ctx}");
}

#[test]
fn build_worker_context_role_history_skipped_when_no_assignee() {
    let home = Home::new();
    let done = home.create("earlier", &[]);
    home.ok(&["complete", &done, "--summary", "unassigned work"]);
    let tid = home.create("orphan task", &[]);
    let ctx = home.ok(&["context", &tid]);
    assert!(!ctx.contains("## Recent work by"), "{ctx}");
}

#[test]
fn build_worker_context_role_history_bounded_to_5() {
    let home = Home::new();
    for i in 0..10 {
        let tid = home.create(&format!("prior #{i}"), &["--assignee", "worker"]);
        home.json(&["claim", &tid]);
        home.ok(&[
            "complete",
            &tid,
            "--force",
            "--summary",
            &format!("done #{i}"),
        ]);
    }
    let new_tid = home.create("new", &["--assignee", "worker"]);
    let ctx = home.ok(&["context", &new_tid]);
    let section = ctx.split("## Recent work by @worker").nth(1).unwrap();
    let section = section.split("\n## ").next().unwrap();
    let bullets = section.lines().filter(|l| l.starts_with("- ")).count();
    assert_eq!(bullets, 5, "{ctx}");
}

#[test]
fn cli_complete_with_summary_and_metadata() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.json(&["claim", &tid]);
    home.ok(&[
        "complete",
        &tid,
        "--force",
        "--summary",
        "done it",
        "--metadata",
        r#"{"files": 3}"#,
    ]);
    let runs = home.runs(&tid);
    let r = runs.last().unwrap();
    assert_eq!(r["summary"], "done it");
    assert_eq!(r["metadata"]["files"], 3);
}

#[test]
fn cli_edit_backfills_result_on_done_task() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.ok(&["complete", &tid, "--summary", "first"]);
    home.ok(&[
        "edit",
        &tid,
        "--result",
        "DECIDED: done",
        "--summary",
        "DECIDED: done",
        "--metadata",
        r#"{"source": "dashboard-recovery"}"#,
    ]);
    assert_eq!(home.task(&tid)["result"], "DECIDED: done");
    let runs = home.runs(&tid);
    let run = runs.last().unwrap();
    assert_eq!(run["summary"], "DECIDED: done");
    assert_eq!(
        run["metadata"],
        serde_json::json!({"source": "dashboard-recovery"})
    );
    assert_eq!(home.kinds(&tid).last().unwrap(), "edited");
}

#[test]
fn cli_edit_rejects_non_done_task() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    let run = home.run(&["edit", &tid, "--result", "nope"]);
    assert_ne!(run.code, 0, "{run:?}");
    // Differences table: kanban's refusal names the status it found and the one it needs.
    assert!(
        run.stderr.contains("is ready; this needs it done"),
        "{}",
        run.stderr
    );
    assert!(home.task(&tid)["result"].is_null());
}

#[test]
fn cli_complete_bad_metadata_exits_nonzero() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "worker"]);
    home.json(&["claim", &tid]);
    let run = home.run(&["complete", &tid, "--force", "--metadata", "not-json"]);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.to_lowercase().contains("metadata"),
        "{}",
        run.stderr
    );
    assert_eq!(home.status(&tid), "running");
}

// The hallucination gate. The original's tests pass `created_by` to its library; a card created
// by `kanban create` in a worker records the worker's task, so these set `created_by` with SQL
// to stand for the cards another principal made.

fn created_by(home: &Home, card: &str, by: &str) {
    home.sql(&format!(
        "UPDATE tasks SET created_by = '{by}' WHERE id = '{card}'"
    ));
}

#[test]
fn complete_with_created_cards_all_verified_records_manifest() {
    let home = Home::new();
    let parent = home.create("parent", &["--assignee", "alice"]);
    let c1 = home.create("c1", &["--assignee", "x"]);
    let c2 = home.create("c2", &["--assignee", "y"]);
    created_by(&home, &c1, "alice");
    created_by(&home, &c2, "alice");
    home.ok(&[
        "complete",
        &parent,
        "--summary",
        "done, created c1+c2",
        "--created-cards",
        &format!("{c1},{c2}"),
    ]);
    let payload = home.event(&parent, "completed")["payload"].clone();
    assert_eq!(payload["verified_cards"], serde_json::json!([c1, c2]));
}

#[test]
fn complete_with_phantom_created_cards_raises_and_audits() {
    let home = Home::new();
    let parent = home.create("parent", &["--assignee", "alice"]);
    let real = home.create("real", &["--assignee", "x"]);
    created_by(&home, &real, "alice");
    let phantom = "t_deadbeefcafe";
    let run = home.run(&[
        "complete",
        &parent,
        "--summary",
        "claimed phantom",
        "--created-cards",
        &format!("{real},{phantom}"),
    ]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains(phantom), "{}", run.stderr);
    assert!(!run.stderr.contains(&format!("{real},")), "{}", run.stderr);
    assert_eq!(home.status(&parent), "ready");
    let kinds = home.kinds(&parent);
    assert!(
        kinds
            .iter()
            .any(|k| k == "completion_blocked_hallucination"),
        "{kinds:?}"
    );
    assert!(!kinds.iter().any(|k| k == "completed"), "{kinds:?}");
    let audit = home.event(&parent, "completion_blocked_hallucination")["payload"].clone();
    assert_eq!(
        audit["phantom_cards"],
        serde_json::json!([phantom]),
        "{audit}"
    );
}

#[test]
fn complete_with_cross_worker_card_is_rejected() {
    let home = Home::new();
    let parent = home.create("parent", &["--assignee", "alice"]);
    let other = home.create("other", &["--assignee", "x"]);
    created_by(&home, &other, "bob");
    let run = home.run(&[
        "complete",
        &parent,
        "--summary",
        "claiming someone else's card",
        "--created-cards",
        &other,
    ]);
    assert_eq!(run.code, 3, "{run:?}");
    let audit = home.event(&parent, "completion_blocked_hallucination")["payload"].clone();
    assert_eq!(
        audit["phantom_cards"],
        serde_json::json!([other]),
        "{audit}"
    );
}

#[test]
fn complete_accepts_cross_worker_card_when_linked_as_child() {
    let home = Home::new();
    let parent = home.create("parent", &["--assignee", "alice"]);
    let other = home.create("other", &["--assignee", "x", "--parent", &parent]);
    created_by(&home, &other, "bob");
    home.ok(&[
        "complete",
        &parent,
        "--summary",
        "completed with linked child",
        "--created-cards",
        &other,
    ]);
    let payload = home.event(&parent, "completed")["payload"].clone();
    assert!(
        payload["verified_cards"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(other)),
        "{payload}"
    );
}

#[test]
fn complete_can_retry_after_phantom_rejection() {
    let home = Home::new();
    let parent_a = home.create("retry-empty", &["--assignee", "alice"]);
    home.json(&["claim", &parent_a]);
    let parent_b = home.create("retry-corrected", &["--assignee", "alice"]);
    home.json(&["claim", &parent_b]);
    let real = home.create("real-child", &["--assignee", "x"]);
    created_by(&home, &real, "alice");

    let first = home.run(&[
        "complete",
        &parent_a,
        "--force",
        "--summary",
        "oops",
        "--created-cards",
        "t_phantomdeadbeef",
    ]);
    assert_eq!(first.code, 3, "{first:?}");
    assert_eq!(home.status(&parent_a), "running");
    // No cards claimed: the gate is skipped.
    home.ok(&[
        "complete",
        &parent_a,
        "--force",
        "--summary",
        "retry without claims",
    ]);
    assert_eq!(home.status(&parent_a), "done");

    let first = home.run(&[
        "complete",
        &parent_b,
        "--force",
        "--summary",
        "oops",
        "--created-cards",
        &format!("{real},t_anotherphantom"),
    ]);
    assert_eq!(first.code, 3, "{first:?}");
    assert_eq!(home.status(&parent_b), "running");
    home.ok(&[
        "complete",
        &parent_b,
        "--force",
        "--summary",
        "retry with corrected list",
        "--created-cards",
        &real,
    ]);
    assert_eq!(home.status(&parent_b), "done");
    for parent in [&parent_a, &parent_b] {
        let kinds = home.kinds(parent);
        let count = |kind: &str| kinds.iter().filter(|k| *k == kind).count();
        assert_eq!(count("completion_blocked_hallucination"), 1, "{kinds:?}");
        assert_eq!(count("completed"), 1, "{kinds:?}");
    }
}

#[test]
fn complete_prose_scan_flags_nonexistent_ids() {
    let home = Home::new();
    let parent = home.create("parent", &["--assignee", "x"]);
    home.ok(&[
        "complete",
        &parent,
        "--summary",
        "also saw t_abcd1234ffff failing in CI",
    ]);
    assert_eq!(home.status(&parent), "done");
    let susp = home.event(&parent, "suspected_hallucinated_references")["payload"].clone();
    assert!(
        susp["phantom_refs"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("t_abcd1234ffff")),
        "{susp}"
    );
}

#[test]
fn complete_prose_scan_ignores_existing_ids() {
    let home = Home::new();
    let other = home.create("other", &["--assignee", "x"]);
    let parent = home.create("parent", &["--assignee", "x"]);
    home.ok(&[
        "complete",
        &parent,
        "--summary",
        &format!("depended on {other}, now done"),
    ]);
    let kinds = home.kinds(&parent);
    assert!(
        !kinds
            .iter()
            .any(|k| k == "suspected_hallucinated_references"),
        "{kinds:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Per-task skills (issue 28 item 2): skills are files `<root>/skills/NAME.md` put before the
// worker's prompt, not `--skills` flags of the original's `hermes` argv.
// ---------------------------------------------------------------------------------------------

#[test]
fn create_task_persists_skills() {
    let home = Home::new();
    let id = home.create(
        "skilled task",
        &[
            "--assignee",
            "linguist",
            "--skill",
            "translation",
            "--skill",
            "github-code-review",
        ],
    );
    assert_eq!(
        home.task(&id)["skills"],
        serde_json::json!(["translation", "github-code-review"])
    );
}

#[test]
fn create_task_skills_none_stays_none() {
    let home = Home::new();
    let id = home.create("plain task", &["--assignee", "someone"]);
    assert!(home.task(&id)["skills"].is_null());
}

#[test]
fn create_task_skills_deduplicates_and_strips() {
    let home = Home::new();
    let id = home.create(
        "dedupe",
        &[
            "--assignee",
            "x",
            "--skill",
            "  translation  ",
            "--skill",
            "translation",
            "--skill",
            "",
            "--skill",
            "review",
        ],
    );
    assert_eq!(
        home.task(&id)["skills"],
        serde_json::json!(["translation", "review"])
    );
}

#[test]
fn create_task_skills_rejects_comma_embedded() {
    let home = Home::new();
    let run = home.run(&["create", "bad", "--assignee", "x", "--skill", "a,b"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("cannot contain a comma"),
        "{}",
        run.stderr
    );
    assert_eq!(home.json(&["list"]).as_array().unwrap().len(), 0);
}

#[test]
fn create_task_skills_rejects_toolset_names() {
    let home = Home::new();
    let run = home.run(&[
        "create",
        "bad toolset skill",
        "--assignee",
        "x",
        "--skill",
        "web",
        "--skill",
        "translation",
    ]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("toolset name"), "{}", run.stderr);
    assert_eq!(home.json(&["list"]).as_array().unwrap().len(), 0);
}

#[test]
fn create_task_skills_lists_all_toolset_typos() {
    let home = Home::new();
    let run = home.run(&[
        "create",
        "three bad",
        "--assignee",
        "x",
        "--skill",
        "web",
        "--skill",
        "browser",
        "--skill",
        "terminal",
    ]);
    assert_eq!(run.code, 1);
    for name in ["'web'", "'browser'", "'terminal'"] {
        assert!(run.stderr.contains(name), "{}", run.stderr);
    }
    assert!(run.stderr.contains("are toolset names"), "{}", run.stderr);
}

/// The original checks one `--skills X` pair per task skill in declared order in the worker's
/// argv; kanban's skills are files put before the prompt, in the declared order.
#[test]
fn default_spawn_appends_per_task_skills() {
    let home = Home::new();
    let skills = home.k.home().join("skills");
    std::fs::create_dir_all(&skills).unwrap();
    std::fs::write(skills.join("translation.md"), "SKILL-TRANSLATION").unwrap();
    std::fs::write(skills.join("github-code-review.md"), "SKILL-REVIEW").unwrap();
    let id = home.create(
        "multi-skill worker",
        &[
            "--assignee",
            "capture",
            "--skill",
            "translation",
            "--skill",
            "github-code-review",
        ],
    );
    home.ok(&["dispatch", "--until-idle"]);
    assert_eq!(home.status(&id), "done");
    let prompt = home.prompt(&id);
    let a = prompt.find("SKILL-TRANSLATION").expect(&prompt);
    let b = prompt.find("SKILL-REVIEW").expect(&prompt);
    assert!(
        a < b && b < prompt.find("multi-skill worker").unwrap(),
        "{prompt}"
    );
}

#[test]
fn cli_create_skill_flag_repeatable() {
    let home = Home::new();
    let id = home.create(
        "multi-skill",
        &[
            "--assignee",
            "default",
            "--skill",
            "translation",
            "--skill",
            "github-code-review",
        ],
    );
    assert_eq!(
        home.task(&id)["skills"],
        serde_json::json!(["translation", "github-code-review"])
    );
}

#[test]
fn cli_create_without_skill_flag_leaves_none() {
    let home = Home::new();
    let id = home.create("no-skill", &["--assignee", "default"]);
    assert!(home.task(&id)["skills"].is_null());
}

#[test]
fn cli_create_rejects_toolset_names_in_skills() {
    let home = Home::new();
    let run = home.run(&[
        "create", "toolsets", "--skill", "terminal", "--skill", "file",
    ]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("'terminal', 'file' are toolset names"),
        "{}",
        run.stderr
    );
    assert_eq!(home.json(&["list"]).as_array().unwrap().len(), 0);
}

#[test]
fn cli_show_renders_skills() {
    let home = Home::new();
    let id = home.create(
        "show-test",
        &["--assignee", "default", "--skill", "translation"],
    );
    let shown = home.ok(&["show", &id]);
    assert!(shown.contains("skills:"), "{shown}");
    assert!(shown.contains("translation"), "{shown}");
}

#[test]
fn cli_edit_clear_skills_on_non_running_task() {
    let home = Home::new();
    let id = home.create("skilled", &["--skill", "translation"]);
    let out = home.ok(&["edit", &id, "--clear-skills"]);
    assert!(out.contains("skills"), "{out}");
    assert!(home.task(&id)["skills"].is_null());
    assert_eq!(
        home.event(&id, "edited")["payload"]["fields"],
        serde_json::json!(["skills"])
    );
}

#[test]
fn cli_edit_clear_skills_rejects_running_task() {
    let home = Home::new();
    let id = home.create("skilled", &["--skill", "translation"]);
    home.ok(&["claim", &id]);
    let run = home.run(&["edit", &id, "--clear-skills"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("running"), "{}", run.stderr);
    assert_eq!(home.task(&id)["skills"], serde_json::json!(["translation"]));
}

#[test]
fn cli_edit_clear_skills_rejects_result_fields() {
    let home = Home::new();
    let id = home.create("skilled", &["--skill", "translation"]);
    let run = home.run(&["edit", &id, "--clear-skills", "--result", "r"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(home.task(&id)["skills"], serde_json::json!(["translation"]));
}
