//! End to end through the `kanban` binary: the respawn guard holds a task back and says why, and
//! the systemic crash breaker blocks tasks whose workers all died of the same error in one tick.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // drives the real binary

mod dispatch_support;

use std::time::{Duration, Instant};

use dispatch_support::{Home, config, now, pid_alive};
use kanban_runtime::board::{NewTask, Status};

fn once(home: &Home) -> serde_json::Value {
    let out = home
        .kanban(&["--json", "dispatch", "--once"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

fn guarded(report: &serde_json::Value) -> Vec<(String, String)> {
    report["respawn_guarded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["task_id"].as_str().unwrap().to_owned(),
                g["guard"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn an_open_pull_request_holds_a_task_until_it_is_handed_off() {
    let home = Home::new(&config("max_spawn = 4"));
    let id = home.create(Home::task("has a PR", "sh", Some("true"), vec![]));
    let board = home.board();
    board
        .comment(
            &id,
            "sh",
            "see https://github.com/acme/widgets/pull/7",
            now() - 5,
        )
        .unwrap();
    let report = once(&home);
    assert_eq!(guarded(&report), [(id.clone(), "active_pr".to_owned())]);
    assert!(report["spawned"].as_array().unwrap().is_empty());
    // Later ticks still hold it, quietly.
    let out = home.kanban(&["dispatch", "--once"]).output().unwrap();
    assert!(out.status.success());
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let dry = home.kanban(&["dispatch", "--dry-run"]).output().unwrap();
    let dry = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.contains("respawn guard active_pr"), "{dry}");
    let reasons: Vec<String> = home
        .events(&id)
        .into_iter()
        .filter(|e| e.kind == "respawn_guarded")
        .map(|e| e.payload.unwrap()["reason"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(reasons, ["active_pr"], "noted once");
    assert_eq!(board.get_task(&id).unwrap().status, Status::Ready);
    // A hand-off to another profile lifts it.
    let out = home.kanban(&["assign", &id, "done"]).output().unwrap();
    assert!(out.status.success());
    let report = once(&home);
    assert!(guarded(&report).is_empty());
    assert_eq!(report["spawned"][0]["task_id"], id.as_str());
}

#[test]
fn four_workers_dying_of_the_same_error_are_blocked_as_systemic() {
    let home = Home::new(&config("max_spawn = 4\nfailure_limit = 5"));
    let ids: Vec<String> = (0..4)
        .map(|i| {
            home.create(NewTask {
                title: format!("broken {i}"),
                assignee: Some("sh".into()),
                body: Some("echo 'cannot reach the model server'; exit 1".into()),
                ..NewTask::default()
            })
        })
        .collect();
    let first = once(&home);
    assert_eq!(first["spawned"].as_array().unwrap().len(), 4);
    let pids: Vec<i64> = first["spawned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["pid"].as_i64().unwrap())
        .collect();
    // Every worker has died before the next tick looks: one tick sees all four deaths.
    let deadline = Instant::now() + Duration::from_secs(60);
    while pids.iter().any(|p| pid_alive(*p)) {
        assert!(Instant::now() < deadline, "workers did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = once(&home);
    let mut systemic: Vec<String> = second["systemic"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    systemic.sort();
    let mut expected = ids.clone();
    expected.sort();
    let errors: Vec<_> = ids
        .iter()
        .map(|id| home.board().runs(id).unwrap()[0].error.clone())
        .collect();
    assert_eq!(systemic, expected, "{errors:#?}");
    let board = home.board();
    for id in &ids {
        assert_eq!(board.get_task(id).unwrap().status, Status::Blocked, "{id}");
        let gave_up: Vec<_> = home
            .events(id)
            .into_iter()
            .filter(|e| e.kind == "gave_up")
            .collect();
        assert_eq!(gave_up.len(), 1, "{id}");
        let p = gave_up[0].payload.clone().unwrap();
        assert_eq!(p["systemic_workers"], 4);
        assert_eq!(p["sticky"], true);
    }
    assert_eq!(board.fsck().unwrap(), []);
}
