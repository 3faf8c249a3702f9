//! End to end: leases, liveness and exit codes with real worker processes (`builtin:shell` task
//! bodies) and the real `kanban` binary.

mod dispatch_support;

use std::time::Duration;

use dispatch_support::{Home, config, group_alive, kill, pid_alive};
use kanban_runtime::board::{ClaimOutcome, ClaimSpec, Claimed, NewTask, Status};

fn run_outcomes(home: &Home, id: &str) -> Vec<String> {
    home.run_outcomes(id)
}

#[test]
fn a_worker_killed_with_sigkill_is_reclaimed_counted_and_redone_by_a_new_worker() {
    let home = Home::new(&config("max_spawn = 2"));
    let body = "if [ -e .second ]; then echo second try; else touch .second; sleep 60; fi";
    let id = home.create(Home::task("victim", "sh", Some(body), vec![]));
    let _daemon = home.daemon();
    home.wait_for(
        "the first worker to register",
        Duration::from_secs(30),
        |b| {
            b.events(&id, None)
                .unwrap()
                .iter()
                .any(|e| e.kind == "worker_registered")
        },
    );
    // The agent has started (its marker exists) before the kill: a kill that landed between
    // the registration and the agent's `touch` would make the second try sleep too.
    let marker = home
        .root
        .join("kanban/workspaces")
        .join(&id)
        .join(".second");
    home.wait_for("the agent to start", Duration::from_secs(30), |_| {
        marker.exists()
    });
    let pid = home.board().get_task(&id).unwrap().worker_pid.unwrap();
    kill("-KILL", pid);
    home.wait_for("the task to be done", Duration::from_secs(30), |b| {
        b.get_task(&id).unwrap().status == Status::Done
    });
    assert_eq!(run_outcomes(&home, &id), ["crashed", "completed"]);
    let crashed = home
        .events(&id)
        .into_iter()
        .find(|e| e.kind == "crashed")
        .unwrap();
    let payload = crashed.payload.unwrap();
    assert_eq!(payload["exit_kind"], "signaled", "{payload}");
    // The failure was counted on the crashed run (completion then reset the counter).
    let runs = home.board().runs(&id).unwrap();
    assert!(
        runs[0]
            .error
            .as_deref()
            .unwrap_or("")
            .contains("killed by signal 9")
    );
    assert!(runs[1].started_at >= runs[0].ended_at.unwrap());
    // The killed worker's agent (`sleep 60`, same process group) did not outlive it.
    home.wait_for(
        "the orphaned sleep to be gone",
        Duration::from_secs(10),
        |_| !pid_alive(pid) && !group_alive(pid),
    );
}

#[test]
fn a_live_heartbeating_worker_past_its_ttl_keeps_its_claim() {
    // TTL 2 s: the worker heartbeats every ~0.7 s while its agent runs for ~4 s.
    let home = Home::new(&config("max_spawn = 2\nclaim_ttl_seconds = 2"));
    let id = home.create(Home::task(
        "slow",
        "sh",
        Some("sleep 4; echo slow but fine"),
        vec![],
    ));
    let out = home.dispatch_until_idle(&[], Duration::from_secs(60));
    assert!(out.status.success());
    assert_eq!(run_outcomes(&home, &id), ["completed"]);
    let kinds = home.kinds(&id);
    assert!(
        kinds.iter().filter(|k| *k == "heartbeat").count() >= 2,
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| *k == "spawned").count(),
        1,
        "{kinds:?}"
    );
    assert!(!kinds.iter().any(|k| k == "reclaimed"), "{kinds:?}");
}

#[test]
fn a_worker_ignoring_sigterm_makes_the_reclaim_wait_and_never_gets_a_twin() {
    let home = Home::new(&config("max_spawn = 2"));
    let body = "if [ -e .again ]; then echo ok; else touch .again; trap '' TERM; sleep 60; fi";
    let id = home.create(NewTask {
        // Whole seconds: a cap of N means "after N to N+1 s"; 3 leaves the retry ample time.
        max_runtime_seconds: Some(3),
        ..Home::task("stubborn", "sh", Some(body), vec![])
    });
    let out = home.dispatch_until_idle(&[], Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(run_outcomes(&home, &id), ["timed_out", "completed"]);
    let events = home.events(&id);
    let timed_out = events.iter().find(|e| e.kind == "timed_out").unwrap();
    let payload = timed_out.payload.clone().unwrap();
    // SIGTERM was ignored: the dispatcher had to wait and then SIGKILL before releasing.
    assert_eq!(payload["sigkill"], true, "{payload}");
    let first_pid = payload["pid"].as_i64().unwrap();
    assert!(!pid_alive(first_pid));
    let spawns: Vec<_> = events.iter().filter(|e| e.kind == "spawned").collect();
    assert_eq!(spawns.len(), 2);
    assert!(
        spawns[1].id > timed_out.id,
        "second worker before the first was released"
    );
}

#[test]
fn exit_75_requeues_without_a_failure_and_respawns_only_after_the_cooldown() {
    let home = Home::new(&config("max_spawn = 2"));
    let body = "if [ -e .limited ]; then echo fine; else touch .limited; exit 75; fi";
    let id = home.create(Home::task("quota", "sh", Some(body), vec![]));
    let out = home.dispatch_until_idle(&[], Duration::from_secs(60));
    assert!(out.status.success());
    assert_eq!(run_outcomes(&home, &id), ["rate_limited", "completed"]);
    let runs = home.board().runs(&id).unwrap();
    // Cooldown 2 s (config): the board's own timestamps show the gap.
    assert!(
        runs[1].started_at >= runs[0].ended_at.unwrap() + 2,
        "{runs:?}"
    );
    let kinds = home.kinds(&id);
    assert!(kinds.contains(&"rate_limited".to_owned()));
    assert!(!kinds.contains(&"crashed".to_owned()) && !kinds.contains(&"gave_up".to_owned()));
}

#[test]
fn exit_78_blocks_and_stays_blocked_through_ticks() {
    let home = Home::new(&config("max_spawn = 2"));
    let id = home.create(Home::task("bad credentials", "sh", Some("exit 78"), vec![]));
    let out = home.dispatch_until_idle(&[], Duration::from_secs(60));
    assert!(out.status.success());
    for _ in 0..3 {
        let out = home.kanban(&["dispatch", "--once"]).output().unwrap();
        assert!(out.status.success());
    }
    assert_eq!(home.board().get_task(&id).unwrap().status, Status::Blocked);
    assert_eq!(run_outcomes(&home, &id), ["crashed"]);
    let kinds = home.kinds(&id);
    assert!(kinds.contains(&"gave_up".to_owned()), "{kinds:?}");
}

#[test]
fn exit_0_without_complete_is_a_protocol_violation() {
    // An external agent that does nothing and exits 0: nudged twice, then the worker exits 0.
    let text = format!(
        "{}\n[profiles.lazy]\nagent = \"command\"\ncommand = [\"sh\", \"-c\", \"cat >/dev/null; echo did nothing\"]\n",
        config("max_spawn = 2")
    );
    let home = Home::new(&text);
    let id = home.create(Home::task("lazy", "lazy", None, vec![]));
    let out = home.dispatch_until_idle(&[], Duration::from_secs(90));
    assert!(out.status.success());
    let kinds = home.kinds(&id);
    assert_eq!(
        kinds.iter().filter(|k| *k == "protocol_violation").count(),
        3,
        "{kinds:?}"
    );
    assert!(kinds.contains(&"gave_up".to_owned()));
    let task = home.board().get_task(&id).unwrap();
    assert_eq!(task.status, Status::Blocked);
    let log = std::fs::read_to_string(home.root.join(format!("kanban/logs/{id}.log"))).unwrap();
    assert_eq!(log.matches("stop nudge").count(), 6, "{log}");
    assert!(log.contains("[kanban-worker-exit] rc=0"));
}

#[test]
fn a_superseded_run_id_can_neither_complete_nor_heartbeat() {
    let home = Home::new(&config("max_spawn = 2"));
    let id = home.create(Home::task("handover", "done", None, vec![]));
    let board = home.board();
    let spec = |lock: &str| ClaimSpec {
        lock: lock.to_owned(),
        ttl_seconds: 900,
        origin: kanban_runtime::board::ClaimOrigin::External,
    };
    let first = match board
        .claim(&id, &spec("host:1"), dispatch_support::now())
        .unwrap()
    {
        ClaimOutcome::Claimed(c) => c,
        ClaimOutcome::Lost(r) => panic!("{r}"),
    };
    board
        .reclaim(&id, Some("test"), dispatch_support::now())
        .unwrap();
    let second = match board
        .claim(&id, &spec("host:2"), dispatch_support::now())
        .unwrap()
    {
        ClaimOutcome::Claimed(c) => c,
        ClaimOutcome::Lost(r) => panic!("{r}"),
    };
    let db = home.root.join("kanban.db");
    let as_worker = |run: &Claimed, args: &[&str]| {
        home.kanban(args)
            .env("HERMES_KANBAN_TASK", &id)
            .env("HERMES_KANBAN_RUN_ID", run.run_id.to_string())
            .env("HERMES_KANBAN_CLAIM_LOCK", &run.claim_lock)
            .env("HERMES_KANBAN_DB", &db)
            .output()
            .unwrap()
    };
    let stale_hb = as_worker(&first, &["heartbeat"]);
    assert_eq!(stale_hb.status.code(), Some(3), "{stale_hb:?}");
    let stale_done = as_worker(&first, &["complete", "--summary", "stale"]);
    assert_eq!(stale_done.status.code(), Some(3), "{stale_done:?}");
    assert_eq!(board.get_task(&id).unwrap().status, Status::Running);
    // The current run's worker can.
    assert_eq!(as_worker(&second, &["heartbeat"]).status.code(), Some(0));
    assert_eq!(
        as_worker(&second, &["complete", "--summary", "current"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(board.get_task(&id).unwrap().status, Status::Done);
}

#[test]
fn an_agent_uses_the_lifecycle_commands_from_inside_its_worker() {
    let home = Home::new(&config("max_spawn = 2"));
    let body = "kanban show >/dev/null && kanban heartbeat --note working \
                && kanban comment \"$HERMES_KANBAN_TASK\" --body 'halfway' \
                && kanban complete --summary 'done by the agent'";
    let id = home.create(Home::task("self-serve", "sh", Some(body), vec![]));
    let out = home.dispatch_until_idle(&[], Duration::from_secs(60));
    assert!(out.status.success());
    let runs = home.board().runs(&id).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome.as_deref(), Some("completed"));
    assert_eq!(runs[0].summary.as_deref(), Some("done by the agent"));
    let kinds = home.kinds(&id);
    assert!(kinds.contains(&"commented".to_owned()), "{kinds:?}");
    let result = home
        .events(&id)
        .into_iter()
        .find(|e| e.kind == "worker_result")
        .unwrap();
    assert_eq!(result.payload.unwrap()["exit_code"], 0);
}

#[test]
fn a_worker_stopped_with_sigterm_waits_for_its_agent_and_exits_130_with_its_trailer() {
    let home = Home::new(&config("max_spawn = 2"));
    let body = "if [ -e .again ]; then echo ok; else touch .again; sleep 60; fi";
    let id = home.create(NewTask {
        max_runtime_seconds: Some(2),
        ..Home::task("interrupted", "sh", Some(body), vec![])
    });
    let out = home.dispatch_until_idle(&[], Duration::from_secs(60));
    assert!(out.status.success());
    assert_eq!(run_outcomes(&home, &id), ["timed_out", "completed"]);
    let events = home.events(&id);
    let timed_out = events.iter().find(|e| e.kind == "timed_out").unwrap();
    // The agent honoured SIGTERM, so no SIGKILL was needed.
    assert_eq!(timed_out.payload.as_ref().unwrap()["sigkill"], false);
    let first_result = events.iter().find(|e| e.kind == "worker_result").unwrap();
    assert_eq!(first_result.payload.as_ref().unwrap()["exit_code"], 130);
    let log = std::fs::read_to_string(home.root.join(format!("kanban/logs/{id}.log"))).unwrap();
    assert!(log.contains("[kanban-worker-exit] rc=130"), "{log}");
}

#[test]
fn a_stopped_but_live_worker_past_its_ttl_gets_its_claim_extended_not_a_twin() {
    // TTL 2 s; the worker is frozen with SIGSTOP so it cannot heartbeat. Alive, with a heartbeat
    // younger than heartbeat_max_stale_seconds: the dispatcher must extend, never reclaim.
    let home = Home::new(&config("max_spawn = 2\nclaim_ttl_seconds = 2"));
    let id = home.create(Home::task(
        "frozen",
        "sh",
        Some("sleep 2; echo thawed"),
        vec![],
    ));
    let _daemon = home.daemon();
    home.wait_for("the worker to register", Duration::from_secs(30), |b| {
        b.events(&id, None)
            .unwrap()
            .iter()
            .any(|e| e.kind == "worker_registered")
    });
    let pid = home.board().get_task(&id).unwrap().worker_pid.unwrap();
    kill("-STOP", pid);
    home.wait_for("claim_extended", Duration::from_secs(30), |b| {
        b.events(&id, None)
            .unwrap()
            .iter()
            .any(|e| e.kind == "claim_extended")
    });
    kill("-CONT", pid);
    home.wait_for("the task to be done", Duration::from_secs(30), |b| {
        b.get_task(&id).unwrap().status == Status::Done
    });
    assert_eq!(run_outcomes(&home, &id), ["completed"]);
    let kinds = home.kinds(&id);
    assert_eq!(
        kinds.iter().filter(|k| *k == "spawned").count(),
        1,
        "{kinds:?}"
    );
    assert!(!kinds.iter().any(|k| k == "reclaimed"), "{kinds:?}");
}
