//! End to end: the real `kanban` binary dispatching real worker processes on a real SQLite board.
//! Throughput, dependency order, two competing dispatchers.

mod dispatch_support;

use std::collections::HashMap;
use std::time::Duration;

use dispatch_support::{Home, config};
use kanban_runtime::board::{Status, TaskFilter};

#[test]
fn two_hundred_tasks_each_complete_exactly_once_and_fsck_is_clean() {
    let home = Home::new(&config("max_spawn = 8"));
    let board = home.board();
    let mut ids = Vec::new();
    for i in 0..200 {
        ids.push(home.create(Home::task(&format!("task {i}"), "done", None, vec![])));
    }
    let out = home.dispatch_until_idle(&[], Duration::from_secs(150));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for id in &ids {
        let task = board.get_task(id).unwrap();
        assert_eq!(task.status, Status::Done, "{id}");
        let runs = board.runs(id).unwrap();
        assert_eq!(runs.len(), 1, "{id}: {runs:?}");
        assert_eq!(runs[0].outcome.as_deref(), Some("completed"));
    }
    assert_eq!(board.fsck().unwrap(), []);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("spawned ").count(), 200, "{stdout}");
}

#[test]
fn a_dependency_chain_completes_strictly_in_order() {
    let home = Home::new(&config("max_spawn = 4"));
    let mut chain: Vec<String> = Vec::new();
    for i in 0..5 {
        let parents = chain.last().cloned().into_iter().collect();
        // Later links get a higher priority: order must still come from the dependencies.
        let mut new = Home::task(&format!("step {i}"), "done", None, parents);
        new.priority = i;
        chain.push(home.create(new));
    }
    let out = home.dispatch_until_idle(&[], Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Event ids are a total order of commits: each step is claimed after its parent completed.
    let event_id = |id: &str, kind: &str| {
        home.events(id)
            .into_iter()
            .find(|e| e.kind == kind)
            .unwrap_or_else(|| panic!("{id} has no {kind} event"))
            .id
    };
    for pair in chain.windows(2) {
        assert!(
            event_id(&pair[1], "claimed") > event_id(&pair[0], "completed"),
            "{} claimed before {} completed",
            pair[1],
            pair[0]
        );
    }
    assert!(
        chain
            .iter()
            .all(|id| home.board().get_task(id).unwrap().status == Status::Done)
    );
}

#[test]
fn two_dispatchers_on_one_board_never_run_two_workers_for_one_task() {
    for round in 0..4 {
        let home = Home::new(&config("max_spawn = 6"));
        let ids: Vec<String> = (0..24)
            .map(|i| home.create(Home::task(&format!("r{round} t{i}"), "done", None, vec![])))
            .collect();
        let a = home
            .kanban(&["dispatch", "--until-idle"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let b = home
            .kanban(&["dispatch", "--until-idle"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out_a = dispatch_support::wait_output(a, Duration::from_secs(60));
        let out_b = dispatch_support::wait_output(b, Duration::from_secs(60));
        assert!(out_a.status.success() && out_b.status.success());
        let board = home.board();
        let mut spawned_by: HashMap<String, usize> = HashMap::new();
        for id in &ids {
            assert_eq!(board.get_task(id).unwrap().status, Status::Done);
            let runs = board.runs(id).unwrap();
            assert_eq!(
                runs.len(),
                1,
                "round {round}: {id} ran {} times",
                runs.len()
            );
            let spawns = home.kinds(id).iter().filter(|k| *k == "spawned").count();
            *spawned_by.entry(id.clone()).or_default() += spawns;
        }
        assert!(spawned_by.values().all(|n| *n == 1), "{spawned_by:?}");
        assert_eq!(board.fsck().unwrap(), []);
        assert_eq!(
            board.list_tasks(&TaskFilter::default()).unwrap().len(),
            ids.len()
        );
    }
}
