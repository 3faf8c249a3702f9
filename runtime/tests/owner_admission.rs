//! Owner admission end to end (README "Owner admission"): the real `kanban` binary as owner,
//! submitter and managed worker, over the real Unix socket, on real SQLite files. Waits are
//! bounded polls; nothing asserts on wall-clock speed.

// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
// Test helpers: a failed setup step should fail the test at once, with the panic message.
#![allow(clippy::unwrap_used)]

mod dispatch_support;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use dispatch_support::{Home, config, kill, now, pid_alive, wait_output};
use kanban_runtime::admission::client::{Client, ClientError};
use kanban_runtime::admission::state::StateDb;
use kanban_runtime::board::admission::MarkerOutcome;
use kanban_runtime::board::{Board, ClaimOutcome, ClaimSpec, Event, Status};
use serde_json::{Value, json};

/// The owner of profile `done`, stopped with SIGKILL on drop (tests restart it on purpose).
struct Owner(Child);

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_owner(home: &Home, extra: &[&str]) -> Owner {
    let mut args = vec!["owner", "serve", "--profile", "done"];
    args.extend_from_slice(extra);
    let child = home
        .kanban(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let owner = Owner(child);
    wait_until("the owner's socket", Duration::from_secs(30), || {
        Client::open(&home.root, "done", false).is_ok()
    });
    owner
}

fn wait_until(what: &str, limit: Duration, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
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

fn refused(result: Result<Value, ClientError>) -> (String, String) {
    match result {
        Err(ClientError::Refused { code, reason }) => (code, reason),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn state(home: &Home) -> StateDb {
    StateDb::open(&home.root.join("owner/done/state.db")).unwrap()
}

/// Waits until no turn is `queued` or `started`: a card is done as soon as its agent completed
/// it, the owner settles the turn once the managed worker has exited.
fn wait_settled(home: &Home) {
    wait_until("the turns to settle", Duration::from_secs(60), || {
        state(home).list().is_ok_and(|t| {
            t.iter()
                .all(|t| t.status != "started" && t.status != "queued")
        })
    });
}

#[test]
fn bad_kanban_run_requests_get_their_exact_code_and_reason_and_change_nothing() {
    let home = Home::new(&config(""));
    let board = home.board();
    let mine = home.create(Home::task("mine", "done", None, vec![]));
    let (run, lock) = claim(&board, &mine);
    let other_profile = home.create(Home::task("theirs", "sh", None, vec![]));
    let (other_run, other_lock) = claim(&board, &other_profile);
    let superseded = home.create(Home::task("superseded", "done", None, vec![]));
    let (old_run, old_lock) = claim(&board, &superseded);
    let _ = board.reclaim(&superseded, Some("test"), now()).unwrap();
    let _ = claim(&board, &superseded);
    let foreign = home.create(Home::task("foreign", "done", None, vec![]));
    let (foreign_run, foreign_lock) = claim(&board, &foreign);
    let marker = Event::OwnerAdmitted {
        db: "/elsewhere/state.db".into(),
        session_id: "local-someone-else".into(),
        request_id: "kanban:[\"default\",\"x\",1]".into(),
        pid: 1,
        birth: None,
    };
    assert_eq!(
        board
            .append_owner_marker(
                &foreign,
                foreign_run,
                &foreign_lock,
                &marker,
                "local-someone-else",
                now()
            )
            .unwrap(),
        MarkerOutcome::Appended
    );
    let _owner = start_owner(&home, &[]);
    let mut client = Client::open(&home.root, "done", false).unwrap();
    let good = params(&mine, run, &lock);
    let with = |key: &str, value: Value| {
        let mut p = good.clone();
        p[key] = value;
        p
    };
    let without = |key: &str| {
        let mut p = good.clone();
        p.as_object_mut().unwrap().remove(key);
        p
    };
    let table: Vec<(Value, &str, &str)> = vec![
        (json!("x"), "invalid_params", "params_not_object"),
        (without("board"), "invalid_params", "missing_key:board"),
        (without("task_id"), "invalid_params", "missing_key:task_id"),
        (without("run_id"), "invalid_params", "missing_key:run_id"),
        (
            without("claim_lock"),
            "invalid_params",
            "missing_key:claim_lock",
        ),
        (
            with("extra", json!(1)),
            "invalid_params",
            "unknown_key:extra",
        ),
        (
            with("board", json!(7)),
            "invalid_params",
            "not_a_string:board",
        ),
        (
            with("task_id", json!(null)),
            "invalid_params",
            "not_a_string:task_id",
        ),
        (
            with("claim_lock", json!(["l"])),
            "invalid_params",
            "not_a_string:claim_lock",
        ),
        (with("db", json!(42)), "invalid_params", "not_a_string:db"),
        (
            with("run_id", json!("1")),
            "invalid_params",
            "not_an_integer:run_id",
        ),
        (
            with("run_id", json!(true)),
            "invalid_params",
            "not_an_integer:run_id",
        ),
        (
            with("run_id", json!(1.5)),
            "invalid_params",
            "not_an_integer:run_id",
        ),
        (with("board", json!("")), "invalid_params", "empty:board"),
        (
            with("claim_lock", json!("wrong")),
            "stale_kanban_claim",
            "claim_lock_mismatch",
        ),
        (
            params(&superseded, old_run, &old_lock),
            "stale_kanban_claim",
            "run_superseded",
        ),
        (
            params(&other_profile, other_run, &other_lock),
            "profile_mismatch",
            "assignee_profile",
        ),
        (
            params(&foreign, foreign_run, &foreign_lock),
            "stale_kanban_claim",
            "foreign_owner_marker",
        ),
        (with("board", json!("nosuch")), "not_found", "unknown_board"),
        (
            with("board", json!("Bad Slug")),
            "invalid_kanban_claim",
            "invalid_board_slug",
        ),
        (
            with("db", json!("/no/such/kanban.db")),
            "invalid_kanban_claim",
            "db_not_found",
        ),
        (
            with("task_id", json!("t_nosuch")),
            "invalid_kanban_claim",
            "unknown_task",
        ),
        (
            with("run_id", json!(999_999)),
            "invalid_kanban_claim",
            "unknown_run",
        ),
    ];
    for (p, code, reason) in table {
        let got = refused(client.call("kanban.run", p.clone()));
        assert_eq!(got, (code.to_owned(), reason.to_owned()), "params {p}");
    }
    // Nothing was admitted and no marker written (the foreign one is the test's own).
    assert_eq!(state(&home).list().unwrap(), []);
    for id in [&mine, &other_profile, &superseded] {
        assert!(
            !home.kinds(id).iter().any(|k| k == "owner_admitted"),
            "{id}: {:?}",
            home.kinds(id)
        );
    }
    assert_eq!(
        home.kinds(&foreign)
            .iter()
            .filter(|k| *k == "owner_admitted")
            .count(),
        1
    );
    // Unauthenticated and unknown methods.
    let mut raw = Client::connect(&home.root.join("owner/done/owner.sock")).unwrap();
    assert_eq!(
        refused(raw.call("kanban.run", good.clone())),
        ("permission_denied".into(), "not_authenticated".into())
    );
    assert!(matches!(
        client.call("no.such.method", json!({})),
        Err(ClientError::Refused { ref code, .. }) if code == "method_not_found"
    ));
}

#[test]
fn the_same_request_twice_is_one_admission_with_one_receipt_and_the_turn_runs_once() {
    let home = Home::new(&config(""));
    let board = home.board();
    let id = home.create(Home::task("once", "done", None, vec![]));
    let (run, lock) = claim(&board, &id);
    let _owner = start_owner(&home, &[]);
    let mut client = Client::open(&home.root, "done", false).unwrap();
    let first = client.call("kanban.run", params(&id, run, &lock)).unwrap();
    let second = client.call("kanban.run", params(&id, run, &lock)).unwrap();
    assert_eq!(first["session_id"], second["session_id"]);
    assert_eq!(
        first["receipt"]["admission_id"],
        second["receipt"]["admission_id"]
    );
    let sid = first["session_id"].as_str().unwrap().to_owned();
    wait_until("the turn to settle", Duration::from_secs(60), || {
        client_receipt(&home, &sid)["status"] == "completed"
    });
    assert_eq!(state(&home).list().unwrap().len(), 1);
    assert_eq!(home.board().get_task(&id).unwrap().status, Status::Done);
    let kinds = home.kinds(&id);
    for kind in ["owner_admitted", "worker_bound", "worker_result"] {
        assert_eq!(
            kinds.iter().filter(|k| *k == kind).count(),
            1,
            "{kind}: {kinds:?}"
        );
    }
    // A replay after the turn settled still answers the original receipt.
    let third = client.call("kanban.run", params(&id, run, &lock)).unwrap();
    assert_eq!(
        third["receipt"]["admission_id"],
        first["receipt"]["admission_id"]
    );
    assert_eq!(third["receipt"]["status"], "completed");
    assert_eq!(state(&home).list().unwrap().len(), 1);
    // The same request id with a changed claim lock is refused against the frozen receipt.
    assert_eq!(
        refused(client.call("kanban.run", params(&id, run, "changed"))),
        ("permission_denied".into(), "saved_claim_mismatch".into())
    );
    assert_eq!(home.board().fsck().unwrap(), []);
}

fn client_receipt(home: &Home, sid: &str) -> Value {
    Client::open(&home.root, "done", false)
        .and_then(|mut c| c.call("kanban.receipt", json!({"session_id": sid})))
        .unwrap_or(Value::Null)
}

#[test]
fn peers_without_the_ticket_or_under_another_uid_are_refused() {
    let home = Home::new(&config(""));
    let _owner = start_owner(&home, &[]);
    let socket = home.root.join("owner/done/owner.sock");
    let mut client = Client::connect(&socket).unwrap();
    assert_eq!(
        refused(client.call("session.authenticate", json!({"ticket": "not-the-ticket"}))),
        ("permission_denied".into(), "bad_ticket".into())
    );
    assert_eq!(
        refused(client.call("owner.status", json!({}))),
        ("permission_denied".into(), "not_authenticated".into())
    );
    // Operator capability only when asked for.
    let mut plain = Client::open(&home.root, "done", false).unwrap();
    assert_eq!(
        refused(plain.call(
            "owner.resolve",
            json!({"task_id": "t_x", "as": "failed", "requeue": false})
        )),
        (
            "permission_denied".into(),
            "missing_capability:session:operator".into()
        )
    );
    let mode = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    };
    assert_eq!(mode(&home.root.join("owner/done")), 0o700);
    assert_eq!(mode(&home.root.join("owner/done/ticket")), 0o600);

    // The other-uid peer check always runs: without root or python3 the test fails saying what
    // to provide (`cargo xtask ci` runs as root and .ci/shells installs /usr/bin/python3).
    assert!(
        rustix::process::geteuid().is_root(),
        "the other-uid peer check needs root to switch to uid 65534: run the suite as root, as \
         `cargo xtask ci` does"
    );
    let python = Path::new("/usr/bin/python3");
    assert!(
        python.exists(),
        "the other-uid peer check needs /usr/bin/python3 as the foreign client (.ci/shells \
         installs it: run `cargo xtask ci`, or install python3)"
    );
    // Let another user reach the socket at all, to prove the credential check itself refuses.
    let ticket = std::fs::read_to_string(home.root.join("owner/done/ticket")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for dir in [
        home.root.as_path(),
        &home.root.join("owner"),
        &home.root.join("owner/done"),
    ] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    }
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    let script = format!(
        "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect({:?})\n\
         s.sendall(b'{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.authenticate\",\"params\":{{\"ticket\":\"{}\"}}}}\\n')\n\
         sys.stdout.write(s.makefile().readline())\n",
        socket.display().to_string(),
        ticket.trim()
    );
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(line.trim())
        .unwrap_or_else(|e| panic!("{e}: {line} / {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["error"]["message"], "permission_denied", "{v}");
    assert_eq!(v["error"]["data"]["reason"], "peer_uid", "{v}");
}

/// Owner mode; a turn lost with its owner pauses the card for `kanban owner resolve`.
fn owner_config() -> String {
    config("mode = \"owner\"\nmax_spawn = 8\nowner_lost_turn = \"pause\"")
}

/// Stops, on drop, the owner a submitter started.
struct StartedOwner<'h>(&'h Home);

impl Drop for StartedOwner<'_> {
    fn drop(&mut self) {
        // Submitters still reading their receipt would launch a new owner if this one went
        // first: let them finish (bounded), then stop whatever is left, submitters first.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !submitters_of(self.0).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        for pid in submitters_of(self.0) {
            kill("-KILL", pid);
        }
        stop_started_owner(self.0);
    }
}

/// The `kanban submit` processes running for this home (read from /proc).
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

/// Stops an owner a submitter started (its pid from `kanban owner status --json`).
fn stop_started_owner(home: &Home) {
    let out = home
        .kanban(&["--json", "owner", "status", "--profile", "done"])
        .output()
        .unwrap();
    if let Ok(v) = serde_json::from_slice::<Value>(&out.stdout)
        && let Some(pid) = v["pid"].as_i64()
    {
        kill("-KILL", pid);
    }
}

#[test]
fn owner_mode_runs_every_task_once_through_an_owner_the_submitter_started() {
    let home = Home::new(&owner_config());
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(home.create(Home::task(&format!("t{i}"), "done", None, vec![])));
    }
    let _owner = StartedOwner(&home);
    let out = home.dispatch_until_idle(&[], Duration::from_secs(240));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let board = home.board();
    for id in &ids {
        assert_eq!(board.get_task(id).unwrap().status, Status::Done, "{id}");
        assert_eq!(home.run_outcomes(id), ["completed"], "{id}");
        let kinds = home.kinds(id);
        for kind in ["owner_admitted", "worker_bound", "worker_result"] {
            assert_eq!(
                kinds.iter().filter(|k| *k == kind).count(),
                1,
                "{id}: {kinds:?}"
            );
        }
        // The run's worker pid stays the submitter's; the managed worker is named by worker_bound.
        assert!(
            !kinds.iter().any(|k| k == "worker_registered"),
            "{id}: {kinds:?}"
        );
    }
    wait_settled(&home);
    let turns = state(&home).list().unwrap();
    assert_eq!(turns.len(), 20);
    assert!(
        turns
            .iter()
            .all(|t| t.status == "completed" && t.exit_code == Some(0))
    );
    assert_eq!(board.fsck().unwrap(), []);
}

/// A managed turn that runs until killed: profile `done` is `builtin:shell` here.
fn sleeper_config() -> String {
    "[dispatch]\nmode = \"owner\"\nowner_lost_turn = \"pause\"\ncrash_grace_seconds = 0\nkill_wait_seconds = 1.0\n\
     interval_seconds = 0.5\ndefault_profile = \"done\"\n\n[profiles.done]\nagent = \"builtin:shell\"\n"
        .to_owned()
}

fn bound_worker_pid(home: &Home, id: &str) -> Option<i64> {
    home.events(id)
        .into_iter()
        .rev()
        .find(|e| e.kind == "worker_bound")
        .and_then(|e| e.payload.and_then(|p| p["pid"].as_i64()))
}

#[test]
fn a_killed_submitter_ends_its_managed_worker_which_records_its_result() {
    let home = Home::new(&sleeper_config());
    let id = home.create(Home::task("sleeps", "done", Some("sleep 120"), vec![]));
    let _owner = start_owner(&home, &[]);
    let daemon = home.daemon();
    home.wait_for("the managed worker to bind", Duration::from_secs(60), |b| {
        b.events(&id, None)
            .unwrap()
            .iter()
            .any(|e| e.kind == "worker_bound")
    });
    let worker = bound_worker_pid(&home, &id).unwrap();
    let first_run = home.board().get_task(&id).unwrap().current_run_id;
    let submitter = home.board().get_task(&id).unwrap().worker_pid.unwrap();
    assert_ne!(worker, submitter);
    kill("-KILL", submitter);
    wait_until(
        "the managed worker to exit",
        Duration::from_secs(30),
        || !pid_alive(worker),
    );
    let results: Vec<_> = home
        .events(&id)
        .into_iter()
        .filter(|e| e.kind == "worker_result" && e.run_id == first_run)
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    let payload = results[0].payload.clone().unwrap();
    assert_eq!(payload["pid"], worker);
    assert_eq!(payload["exit_code"], 1);
    // The dispatcher books the dead submitter and runs the card again (a new attempt).
    home.wait_for("a second run", Duration::from_secs(60), |b| {
        b.runs(&id).unwrap().len() >= 2
    });
    drop(daemon);
    // The second attempt's submitter goes first, so nobody launches an owner after the test.
    if let Some(pid) = home
        .board()
        .get_task(&id)
        .unwrap()
        .worker_pid
        .filter(|p| pid_alive(*p))
    {
        kill("-KILL", pid);
    }
}

#[test]
fn an_owner_restart_mid_turn_leaves_the_turn_unknown_and_the_card_paused_until_resolved() {
    // One spawn slot: the paused card must not hold it.
    let home = Home::new(&sleeper_config().replace("[dispatch]\n", "[dispatch]\nmax_spawn = 1\n"));
    let id = home.create(Home::task("sleeps", "done", Some("sleep 5"), vec![]));
    let owner = start_owner(&home, &[]);
    let daemon = home.daemon();
    home.wait_for("the managed worker to bind", Duration::from_secs(60), |b| {
        b.events(&id, None)
            .unwrap()
            .iter()
            .any(|e| e.kind == "worker_bound")
    });
    let worker = bound_worker_pid(&home, &id).unwrap();
    drop(owner); // SIGKILL
    wait_until(
        "the orphaned managed worker to exit",
        Duration::from_secs(30),
        || !pid_alive(worker),
    );
    let _owner = start_owner(&home, &[]);
    wait_until("the turn to read unknown", Duration::from_secs(30), || {
        state(&home)
            .list()
            .unwrap()
            .iter()
            .any(|t| t.status == "unknown")
    });
    // Paused: many dispatcher ticks pass and the card keeps its one run.
    let ticks_from = home.events(&id).last().unwrap().id;
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        assert_eq!(home.board().get_task(&id).unwrap().status, Status::Running);
        assert_eq!(home.board().runs(&id).unwrap().len(), 1);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(home.events(&id).last().unwrap().id >= ticks_from);
    // `show` and a tick name the paused card, and it holds no spawn slot: another card runs.
    let show = home.kanban(&["show", &id]).output().unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(show.contains("paused: the owner turn of run"), "{show}");
    wait_until(
        "a tick that names the paused card",
        Duration::from_secs(30),
        || {
            let out = home
                .kanban(&["--json", "dispatch", "--once"])
                .output()
                .unwrap();
            serde_json::from_slice::<serde_json::Value>(&out.stdout).is_ok_and(|r| {
                r["paused"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|t| t == &id))
            })
        },
    );
    let other = home.create(Home::task(
        "beside the paused card",
        "done",
        Some("echo ok"),
        vec![],
    ));
    let deadline = Instant::now() + Duration::from_secs(60);
    while home.board().get_task(&other).unwrap().status != Status::Done {
        if Instant::now() > deadline {
            let out = home.kanban(&["dispatch", "--once"]).output().unwrap();
            let show = home.kanban(&["show", &other]).output().unwrap();
            panic!(
                "the other card is not done: {}\n{}{}",
                String::from_utf8_lossy(&show.stdout),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Even with its submitter killed, the dispatcher keeps the card paused (the owner's turn is
    // unknown): no crash booked, no second run.
    let submitter = home.board().get_task(&id).unwrap().worker_pid.unwrap();
    kill("-KILL", submitter);
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        assert_eq!(home.board().get_task(&id).unwrap().status, Status::Running);
        assert_eq!(home.board().runs(&id).unwrap().len(), 1);
        std::thread::sleep(Duration::from_millis(100));
    }
    // A task the board does not know is refused, and nothing changes.
    let bad = home
        .kanban(&[
            "owner",
            "resolve",
            "t_nosuch",
            "--as",
            "failed",
            "--profile",
            "done",
        ])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        state(&home)
            .list()
            .unwrap()
            .iter()
            .any(|t| t.status == "unknown")
    );
    // The operator requeues it (by a unique id prefix): it runs once more, to its end.
    let prefix = &id[..id.len() - 2];
    let out = home
        .kanban(&[
            "owner",
            "resolve",
            prefix,
            "--as",
            "interrupted",
            "--requeue",
            "--profile",
            "done",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    home.wait_for("the card to be done", Duration::from_secs(90), |b| {
        b.get_task(&id).unwrap().status == Status::Done
    });
    assert_eq!(home.board().runs(&id).unwrap().len(), 2);
    // The card is done once the agent completed it; the owner settles the turn when the managed
    // worker has exited.
    wait_settled(&home);
    let statuses: Vec<String> = state(&home)
        .list()
        .unwrap()
        .into_iter()
        .map(|t| t.status)
        .collect();
    // The lost turn, the other card's, the requeued run's.
    assert_eq!(statuses, ["interrupted", "completed", "completed"]);
    drop(daemon);
    // The submitter may have restarted the owner before the test did.
    drop(StartedOwner(&home));
}

/// Kill -9 the owner right after each of its commits (test-only fault points); the submitter
/// starts a fresh owner and retries with the same params. Never two managed workers for one run;
/// the card ends done, or paused with its turn `unknown` when the kill came after `started`.
#[test]
fn a_kill_after_each_owner_commit_is_reconciled_without_an_operator() {
    for (fault, ends_done) in [
        ("after-session", true),
        ("after-marker", true),
        ("after-started", false),
    ] {
        let home = Home::new(&owner_config());
        let id = home.create(Home::task(fault, "done", None, vec![]));
        let faulty = start_owner(&home, &["--fault-after", fault]);
        let faulty_pid = i64::from(faulty.0.id());
        let daemon = home.daemon();
        wait_until("the faulty owner to die", Duration::from_secs(60), || {
            !pid_alive(faulty_pid)
        });
        drop(faulty);
        if ends_done {
            home.wait_for(
                &format!("{fault}: the card to be done"),
                Duration::from_secs(90),
                |b| b.get_task(&id).unwrap().status == Status::Done,
            );
            assert_eq!(home.run_outcomes(&id), ["completed"], "{fault}");
        } else {
            wait_until(
                &format!("{fault}: the turn to read unknown"),
                Duration::from_secs(60),
                || {
                    state(&home)
                        .list()
                        .is_ok_and(|t| t.iter().any(|t| t.status == "unknown"))
                },
            );
            // Paused across ticks: the card keeps its one run and no worker ever started.
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                assert_eq!(home.board().get_task(&id).unwrap().status, Status::Running);
                std::thread::sleep(Duration::from_millis(100));
            }
            assert_eq!(home.board().runs(&id).unwrap().len(), 1, "{fault}");
        }
        let kinds = home.kinds(&id);
        assert_eq!(
            kinds.iter().filter(|k| *k == "owner_admitted").count(),
            1,
            "{fault}: {kinds:?}"
        );
        assert!(
            kinds.iter().filter(|k| *k == "worker_bound").count() <= 1,
            "{fault}: {kinds:?}"
        );
        assert_eq!(state(&home).list().unwrap().len(), 1, "{fault}");
        let submitter = home.board().get_task(&id).unwrap().worker_pid;
        drop(daemon);
        if let Some(pid) = submitter.filter(|p| pid_alive(*p)) {
            kill("-KILL", pid);
        }
        drop(StartedOwner(&home));
        assert_eq!(home.board().fsck().unwrap(), [], "{fault}");
    }
}

#[test]
fn two_hundred_tasks_in_owner_mode_are_all_done_with_one_run_each() {
    let home = Home::new(&owner_config());
    let mut ids = Vec::new();
    for i in 0..200 {
        ids.push(home.create(Home::task(&format!("t{i}"), "done", None, vec![])));
    }
    let _owner = StartedOwner(&home);
    let out = home.dispatch_until_idle(&[], Duration::from_secs(600));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let board = home.board();
    for id in &ids {
        assert_eq!(board.get_task(id).unwrap().status, Status::Done, "{id}");
        assert_eq!(board.runs(id).unwrap().len(), 1, "{id}");
    }
    wait_settled(&home);
    let turns = state(&home).list().unwrap();
    assert_eq!(turns.len(), 200);
    assert!(turns.iter().all(|t| t.status == "completed"));
    assert_eq!(board.fsck().unwrap(), []);
}

#[test]
fn the_demo_runs_through_owners_in_owner_mode() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("demo");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_kanban"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .arg("--home")
        .arg(&home)
        .args(["demo", "--mode", "owner"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_output(child, Duration::from_secs(180));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("fsck: clean"), "{stdout}");
    assert!(stdout.contains("stopped the `writer` owner"), "{stdout}");
    let location = kanban_runtime::home::resolve(&home, Some("default")).unwrap();
    let board = Board::open(&location, &kanban_runtime::board::OpenOptions::default()).unwrap();
    for task in board
        .list_tasks(&kanban_runtime::board::TaskFilter::default())
        .unwrap()
    {
        let admitted = board
            .events(&task.id, None)
            .unwrap()
            .iter()
            .filter(|e| e.kind == "owner_admitted")
            .count();
        assert_eq!(admitted, board.runs(&task.id).unwrap().len(), "{}", task.id);
    }
}

#[test]
fn a_draining_owner_refuses_new_runs_and_exits_once_its_turns_ended() {
    let home = Home::new(&sleeper_config());
    let board = home.board();
    let long = home.create(Home::task("long", "done", Some("sleep 60"), vec![]));
    let (run, lock) = claim(&board, &long);
    let later = home.create(Home::task("later", "done", None, vec![]));
    let (later_run, later_lock) = claim(&board, &later);
    let mut owner = start_owner(&home, &[]);
    let mut client = Client::open(&home.root, "done", false).unwrap();
    client
        .call("kanban.run", params(&long, run, &lock))
        .unwrap();
    home.wait_for("the managed worker to bind", Duration::from_secs(60), |b| {
        b.events(&long, None)
            .unwrap()
            .iter()
            .any(|e| e.kind == "worker_bound")
    });
    let worker = bound_worker_pid(&home, &long).unwrap();
    kill("-TERM", i64::from(owner.0.id()));
    // Still answering, but no new run is admitted.
    wait_until("the owner to drain", Duration::from_secs(30), || {
        matches!(
            Client::open(&home.root, "done", false)
                .and_then(|mut c| c.call("kanban.run", params(&later, later_run, &later_lock))),
            Err(ClientError::Refused { ref code, ref reason })
                if code == "runtime_draining" && reason == "owner_draining"
        )
    });
    assert!(!home.kinds(&later).iter().any(|k| k == "owner_admitted"));
    assert!(
        owner.0.try_wait().unwrap().is_none(),
        "it waits for its turn"
    );
    // The turn ends (its worker killed): the owner exits.
    let _ = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{worker}")])
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = owner.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the drained owner did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(!home.root.join("owner/done/owner.sock").exists());
    let turns = state(&home).list().unwrap();
    assert_eq!(turns.len(), 1);
    // The owner reaped its worker: killed by SIGKILL, booked as that, not `unknown`.
    assert_eq!(turns[0].status, "failed", "{:?}", turns[0]);
    assert_eq!(turns[0].exit_code, Some(128 + 9), "{:?}", turns[0]);
}

/// `kanban.receipt` with `wait_ms` holds its answer while the turn runs and answers once it
/// settles (the submitter no longer polls); a `wait_ms` that is not a whole number of
/// milliseconds from 0 to 5 000 is refused and changes nothing.
#[test]
fn a_receipt_that_may_wait_is_answered_when_the_turn_settles_and_bad_waits_are_refused() {
    let home = Home::new(&config(""));
    let board = home.board();
    let id = home.create(Home::task("waited", "done", None, vec![]));
    let (run, lock) = claim(&board, &id);
    let _owner = start_owner(&home, &[]);
    let mut client = Client::open(&home.root, "done", false).unwrap();
    let admitted = client.call("kanban.run", params(&id, run, &lock)).unwrap();
    let sid = admitted["session_id"].as_str().unwrap().to_owned();
    // The turn is a managed worker process: it has not settled when `kanban.run` answers.
    assert_ne!(admitted["receipt"]["status"], "completed", "{admitted}");
    let waited = client
        .call(
            "kanban.receipt",
            json!({"session_id": sid, "wait_ms": 5000}),
        )
        .unwrap();
    assert_eq!(waited["status"], "completed", "{waited}");
    assert_eq!(home.board().get_task(&id).unwrap().status, Status::Done);
    let before = state(&home).list().unwrap();
    for (wait, reason) in [
        (json!("100"), "not_an_integer:wait_ms"),
        (json!(-1), "not_an_integer:wait_ms"),
        (json!(1.5), "not_an_integer:wait_ms"),
        (json!(true), "not_an_integer:wait_ms"),
        (json!(5001), "too_large:wait_ms"),
    ] {
        assert_eq!(
            refused(client.call(
                "kanban.receipt",
                json!({"session_id": sid, "wait_ms": wait}),
            )),
            ("invalid_params".into(), reason.into()),
            "wait_ms {wait}"
        );
    }
    assert_eq!(state(&home).list().unwrap(), before);
    // A settled turn is answered at once, waiting or not.
    let again = client
        .call("kanban.receipt", json!({"session_id": sid, "wait_ms": 0}))
        .unwrap();
    assert_eq!(again, waited);
}

/// `kanban submit` as the dispatcher starts it, by hand: the identity of a claimed card, with or
/// without the profile the dispatcher grants (`HERMES_PROFILE`).
fn submitter(home: &Home, id: &str, run: i64, lock: &str, profile: Option<&str>) -> Child {
    let mut cmd = home.kanban(&["submit"]);
    cmd.env("HERMES_KANBAN_TASK", id)
        .env("HERMES_KANBAN_RUN_ID", run.to_string())
        .env("HERMES_KANBAN_CLAIM_LOCK", lock)
        .env("HERMES_KANBAN_BOARD", "default")
        .env(
            "HERMES_KANBAN_DB",
            kanban_runtime::home::db_path(&home.root, "default"),
        )
        .env_remove("HERMES_PROFILE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(p) = profile {
        cmd.env("HERMES_PROFILE", p);
    }
    cmd.spawn().unwrap()
}

/// The submitter asks the owner of the profile the dispatcher granted it, and reads the card's
/// assignee only when no profile was granted; a granted name that is not a profile name is
/// refused with a clear message before any owner is asked.
#[test]
fn a_submitter_finds_its_owner_by_the_granted_profile_or_else_by_the_card() {
    let home = Home::new(&config(""));
    let board = home.board();
    let _owner = start_owner(&home, &[]);
    for granted in [Some(" Done "), None] {
        let id = home.create(Home::task("submitted", "done", None, vec![]));
        let (run, lock) = claim(&board, &id);
        let out = wait_output(
            submitter(&home, &id, run, &lock, granted),
            Duration::from_secs(60),
        );
        assert!(
            out.status.success(),
            "{granted:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            board.get_task(&id).unwrap().status,
            Status::Done,
            "{granted:?}"
        );
        assert_eq!(
            home.kinds(&id)
                .iter()
                .filter(|k| *k == "owner_admitted")
                .count(),
            1,
            "{granted:?}"
        );
    }
    let id = home.create(Home::task("bad profile", "done", None, vec![]));
    let (run, lock) = claim(&board, &id);
    let out = wait_output(
        submitter(&home, &id, run, &lock, Some("../elsewhere")),
        Duration::from_secs(60),
    );
    // The submitter writes to its stdout, the task's log.
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("\"../elsewhere\" is not a profile name"),
        "{said}"
    );
    assert_eq!(board.get_task(&id).unwrap().status, Status::Running);
    assert!(!home.kinds(&id).iter().any(|k| k == "owner_admitted"));
    assert!(!home.root.join("owner/elsewhere").exists());
}
