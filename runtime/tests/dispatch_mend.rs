//! End to end, with the real `kanban` binary: behaviours of the original's own test suite that
//! an earlier build broke (issue 24) — an external claim is never stolen, `--max-spawn 0` is a
//! tick that spawns nothing, a PostgreSQL board named only in `kanban.toml` dispatches.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary
#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test

mod dispatch_support;

use dispatch_support::{Home, config, now};
use kanban_runtime::board::{ClaimOrigin, ClaimOutcome, ClaimSpec, Status};

fn ok(home: &Home, args: &[&str]) -> String {
    let out = home.kanban(args).output().unwrap();
    assert!(
        out.status.success(),
        "kanban {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_live_external_claim_is_never_released_as_abandoned_nor_run_twice() {
    // crash_grace_seconds = 0, as the original's fixture has it: the first tick would have
    // released the claim of the (exited) `kanban claim` process and spawned a second worker.
    let home = Home::new(&config("max_spawn = 2"));
    let id = home.create(Home::task("external", "done", None, vec![]));
    let claim: serde_json::Value =
        serde_json::from_str(&ok(&home, &["claim", &id, "--json"])).unwrap();
    // The external worker acts as its claim, as a dispatcher's worker does.
    let as_worker = |args: &[&str]| {
        let out = home
            .kanban(args)
            .env("HERMES_KANBAN_TASK", &id)
            .env("HERMES_KANBAN_RUN_ID", claim["run_id"].to_string())
            .env(
                "HERMES_KANBAN_CLAIM_LOCK",
                claim["claim_lock"].as_str().unwrap(),
            )
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ok(&home, &["dispatch", "--once"]);
    as_worker(&["heartbeat"]);
    ok(&home, &["dispatch", "--once"]);
    let kinds = home.kinds(&id);
    assert!(!kinds.iter().any(|k| k == "claim_abandoned"), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k == "spawned"), "{kinds:?}");
    assert_eq!(home.board().get_task(&id).unwrap().status, Status::Running);
    // fsck sees a claim with a heartbeat as alive, not as a claim that never started.
    ok(&home, &["fsck"]);
    // The external worker finishes; one run, its own.
    as_worker(&["complete", "--summary", "done outside"]);
    assert_eq!(home.run_outcomes(&id), ["completed"]);
    // (A dispatcher's own claim left by a dispatcher killed before its spawn is still released
    // at once: dispatch_faults.rs, claims_left_by_a_dispatcher_killed_before_the_spawn_….)
}

#[test]
fn max_spawn_zero_reclaims_and_promotes_but_spawns_nothing() {
    let home = Home::new(&config("max_spawn = 0"));
    let board = home.board();
    // An expired claim with no worker: reclaimed by the tick.
    let expired = home.create(Home::task("expired", "done", None, vec![]));
    let spec = ClaimSpec {
        lock: "elsewhere:1".into(),
        ttl_seconds: 1,
        origin: ClaimOrigin::External,
    };
    assert!(matches!(
        board.claim(&expired, &spec, now() - 100).unwrap(),
        ClaimOutcome::Claimed(_)
    ));
    // A ready task: never spawned.
    let ready = home.create(Home::task("ready", "done", None, vec![]));
    for args in [
        &["dispatch", "--once"][..],
        &["dispatch", "--once", "--max-spawn", "0"][..],
    ] {
        let out = ok(&home, args);
        assert!(!out.contains("spawned"), "{out}");
    }
    assert_eq!(board.get_task(&expired).unwrap().status, Status::Ready);
    assert!(home.kinds(&expired).iter().any(|k| k == "reclaimed"));
    assert_eq!(board.get_task(&ready).unwrap().status, Status::Ready);
    for id in [&expired, &ready] {
        assert!(!home.kinds(id).iter().any(|k| k == "spawned"));
    }
    // `--until-idle` would wait for ever: refused, nothing changed.
    let out = home.kanban(&["dispatch", "--until-idle"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("max_spawn 0"));
    assert_eq!(board.get_task(&ready).unwrap().status, Status::Ready);
}

#[test]
fn show_prints_event_times_as_local_iso_with_an_age_and_json_keeps_the_numbers() {
    let home = Home::new(&config(""));
    let id = home.create(Home::task("timed", "done", None, vec![]));
    ok(&home, &["claim", &id]);
    let show = ok(&home, &["show", &id]);
    let claimed = show
        .lines()
        .find(|l| l.contains(" claimed "))
        .unwrap_or_else(|| panic!("{show}"));
    assert!(claimed.contains("\"expires\":\""), "{claimed}");
    assert!(claimed.contains("(in 15 m)"), "{claimed}");
    // No raw epoch (ten digits) is left in any human line.
    let epoch = regex_like_epoch(&show);
    assert!(epoch.is_none(), "raw epoch {epoch:?} in: {show}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&home, &["--json", "show", &id])).unwrap();
    let events = json["events"].as_array().unwrap();
    let claimed = events.iter().find(|e| e["kind"] == "claimed").unwrap();
    assert!(claimed["payload"]["expires"].is_i64(), "{claimed}");
}

/// The first run of ten or more digits in `text`, if any.
fn regex_like_epoch(text: &str) -> Option<String> {
    text.split(|c: char| !c.is_ascii_digit())
        .find(|run| run.len() >= 10)
        .map(str::to_owned)
}
