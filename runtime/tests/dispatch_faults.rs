//! End to end: faults the dispatcher and the cron daemon must survive — a dispatcher killed
//! between its claim commit and the spawn, an operator's reclaim or archive of a running task
//! (the old worker must not outlive its run), and a board or job store that fails for a while.
//! Real processes and the real `kanban` binary; deadlines only guard against hangs.

// Test code drives the real binary, real processes and a reader thread.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
// Test helpers: a failed step fails the test at once, with the panic message.
#![allow(clippy::unwrap_used)]

mod dispatch_support;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use dispatch_support::{Home, config, now, pid_alive, wait_output};
use kanban_runtime::board::{ClaimOutcome, ClaimSpec, Status};

const LIMIT: Duration = Duration::from_secs(120);

/// A pid that certainly belongs to no live process: a child that already exited and was reaped.
fn dead_pid() -> i64 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    child.wait().unwrap();
    i64::from(child.id())
}

/// Whether any process of group `pgid` is still running. Zombies do not count: on a host whose
/// pid 1 does not reap orphans, a killed agent stays a zombie forever, and it runs nothing.
fn group_alive(pgid: i64) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i64>().ok())
        else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        let Some(rest) = stat.rsplit(')').next() else {
            return false;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.len() > 2 && fields[0] != "Z" && fields[0] != "X" && fields[2] == pgid.to_string()
    })
}

fn host_prefix() -> String {
    kanban_runtime::proc::process::host_prefix()
}

#[test]
fn claims_left_by_a_dispatcher_killed_before_the_spawn_are_released_without_a_failure() {
    let home = Home::new(&config(""));
    let ids: Vec<String> = (0..3)
        .map(|i| home.create(Home::task(&format!("t{i}"), "done", None, vec![])))
        .collect();
    // This dispatcher claims all three in one commit, then SIGKILLs itself before the spawn.
    let out = wait_output(
        home.kanban(&["dispatch", "--until-idle", "--fault-die-before-spawn", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        LIMIT,
    );
    assert!(
        !out.status.success(),
        "the faulted dispatcher should have died"
    );
    for id in &ids {
        let t = home.board().get_task(id).unwrap();
        assert_eq!(t.status, Status::Running, "{id}");
        assert_eq!(t.worker_pid, None, "{id}");
    }
    // The next dispatcher does not wait for the claim TTL (900 s): it releases the claims at once
    // (crash grace 0 here), uncounted, and runs the tasks.
    let out = home.dispatch_until_idle(&[], LIMIT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("claimed but never spawned"), "{stdout}");
    for id in &ids {
        let t = home.board().get_task(id).unwrap();
        assert_eq!(t.status, Status::Done, "{id}");
        assert_eq!(t.consecutive_failures, 0, "{id}");
        assert_eq!(home.run_outcomes(id), ["abandoned", "completed"], "{id}");
        let kinds = home.kinds(id);
        assert!(kinds.contains(&"claim_abandoned".to_owned()), "{kinds:?}");
        assert!(!kinds.contains(&"reclaimed".to_owned()), "{kinds:?}");
    }
    let fsck = home.kanban(&["fsck"]).output().unwrap();
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stdout)
    );
}

#[test]
fn fsck_reports_a_claim_whose_worker_never_started() {
    let home = Home::new(&config(""));
    let id = home.create(Home::task("stranded", "done", None, vec![]));
    let spec = ClaimSpec {
        lock: format!("{}{}", host_prefix(), dead_pid()),
        ttl_seconds: 900,
        origin: kanban_runtime::board::ClaimOrigin::Dispatcher,
    };
    let claimed = home.board().claim(&id, &spec, now() - 300).unwrap();
    assert!(matches!(claimed, ClaimOutcome::Claimed(_)));
    let out = home.kanban(&["fsck"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("claim_never_started"), "{stderr}");
    assert!(stderr.contains(&id), "{stderr}");
    // fsck changed nothing; the dispatcher then releases it.
    assert_eq!(home.board().get_task(&id).unwrap().status, Status::Running);
    let out = home.dispatch_until_idle(&[], LIMIT);
    assert!(out.status.success());
    assert_eq!(home.board().get_task(&id).unwrap().status, Status::Done);
    assert!(home.kanban(&["fsck"]).output().unwrap().status.success());
}

/// The registered pid of the task's current worker, once it has one.
fn registered_pid(home: &Home, id: &str, nth: usize) -> i64 {
    home.wait_for("a worker to register", LIMIT, |b| {
        b.events(id, None)
            .unwrap()
            .iter()
            .filter(|e| e.kind == "worker_registered")
            .count()
            >= nth
    });
    home.events(id)
        .into_iter()
        .filter(|e| e.kind == "worker_registered")
        .nth(nth - 1)
        .and_then(|e| e.payload)
        .and_then(|p| p["pid"].as_i64())
        .unwrap()
}

#[test]
fn an_operator_reclaim_stops_the_old_worker_before_its_successor_starts() {
    let home = Home::new(&config(""));
    let body = "if [ -e .second ]; then echo second run; else touch .second; sleep 300; fi";
    let id = home.create(Home::task("long", "sh", Some(body), vec![]));
    let _daemon = home.daemon();
    let old = registered_pid(&home, &id, 1);
    let out = home.kanban(&["reclaim", &id]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    home.wait_for("the successor to finish", LIMIT, |b| {
        b.get_task(&id).unwrap().status == Status::Done
    });
    // The old worker and its agent (`sleep 300`, same process group) are gone, and were stopped
    // before the successor was spawned.
    assert!(!pid_alive(old));
    assert!(!group_alive(old));
    let kinds = home.kinds(&id);
    let stopped = kinds.iter().position(|k| k == "worker_superseded");
    let second_spawn = kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| *k == "spawned")
        .nth(1)
        .map(|(i, _)| i);
    assert!(
        stopped.is_some() && stopped < second_spawn,
        "worker_superseded must precede the second spawn: {kinds:?}"
    );
    let event = home
        .events(&id)
        .into_iter()
        .find(|e| e.kind == "worker_superseded")
        .unwrap();
    let payload = event.payload.unwrap();
    assert_eq!(payload["pid"], old, "{payload}");
    assert_eq!(payload["termination"]["terminated"], true, "{payload}");
    assert_eq!(home.run_outcomes(&id), ["reclaimed", "completed"]);
}

#[test]
fn archiving_a_running_task_stops_its_worker_and_agent() {
    let home = Home::new(&config(""));
    let id = home.create(Home::task("archived", "sh", Some("sleep 300"), vec![]));
    let _daemon = home.daemon();
    let old = registered_pid(&home, &id, 1);
    let out = home.kanban(&["archive", &id]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    home.wait_for("the superseded worker to be stopped", LIMIT, |b| {
        b.events(&id, None)
            .unwrap()
            .iter()
            .any(|e| e.kind == "worker_superseded")
    });
    home.wait_for("the old worker and its agent to be gone", LIMIT, |_| {
        !pid_alive(old) && !group_alive(old)
    });
    assert_eq!(home.board().get_task(&id).unwrap().status, Status::Archived);
}

/// Forwards a child's stderr lines to a channel (a reader thread, so the test never blocks on a
/// silent child; receiving has a deadline).
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Receives lines until one contains `needle`; returns every line seen (the match last).
fn until_line(rx: &mpsc::Receiver<String>, needle: &str, seen: &mut Vec<String>) {
    loop {
        match rx.recv_timeout(LIMIT) {
            Ok(line) => {
                let hit = line.contains(needle);
                seen.push(line);
                if hit {
                    return;
                }
            }
            Err(e) => panic!("no line containing {needle:?} ({e}); seen: {seen:#?}"),
        }
    }
}

#[test]
fn a_dispatcher_whose_board_is_locked_keeps_running_says_so_once_and_resumes() {
    let home = Home::new(&config(""));
    let id = home.create(Home::task("after the outage", "done", None, vec![]));
    // Another writer holds the board's write lock.
    let db = home.root.join("kanban.db");
    let locker = rusqlite::Connection::open(&db).unwrap();
    locker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut daemon = dispatch_support::Daemon(
        home.kanban(&["dispatch", "--interval", "0.2"])
            .env("HERMES_KANBAN_BUSY_TIMEOUT_MS", "100")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let rx = stderr_lines(&mut daemon.0);
    let mut seen = Vec::new();
    until_line(&rx, "tick failing", &mut seen);
    // Let it fail some more (the assertions below hold however many ticks failed).
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        daemon.0.try_wait().unwrap().is_none(),
        "the daemon gave up: {seen:#?}"
    );
    assert_eq!(home.board().get_task(&id).unwrap().status, Status::Ready);
    locker.execute_batch("ROLLBACK").unwrap();
    until_line(&rx, "recovered", &mut seen);
    home.wait_for("the task to be done", LIMIT, |b| {
        b.get_task(&id).unwrap().status == Status::Done
    });
    assert!(daemon.0.try_wait().unwrap().is_none(), "{seen:#?}");
    let failing = seen.iter().filter(|l| l.contains("tick failing")).count();
    assert_eq!(failing, 1, "one line per state change: {seen:#?}");
    assert!(
        seen.iter().any(|l| l.contains("kanban.db")),
        "the message names the board: {seen:#?}"
    );
}

#[test]
fn a_cron_daemon_whose_store_fails_keeps_running_says_so_once_and_resumes() {
    let home = Home::new(&config(""));
    // The scheduler's tick lock cannot be opened while a directory sits at its path.
    let lock = home.root.join("cron").join(".tick.lock");
    std::fs::create_dir_all(&lock).unwrap();
    let mut daemon = dispatch_support::Daemon(
        home.kanban(&["cron", "daemon", "--interval", "0.2"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let rx = stderr_lines(&mut daemon.0);
    let mut seen = Vec::new();
    until_line(&rx, "tick failing", &mut seen);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(daemon.0.try_wait().unwrap().is_none(), "{seen:#?}");
    std::fs::remove_dir(&lock).unwrap();
    until_line(&rx, "recovered", &mut seen);
    assert!(daemon.0.try_wait().unwrap().is_none(), "{seen:#?}");
    let failing = seen.iter().filter(|l| l.contains("tick failing")).count();
    assert_eq!(failing, 1, "one line per state change: {seen:#?}");
}
