//! `tests/hermes_cli/test_kanban_block_kinds.py`: typed block reasons and the unblock-loop
//! breaker, through the `kanban` binary.

use super::support::Home;

/// A task of profile `assignee`, claimed (running).
fn running_task(home: &Home, title: &str) -> String {
    let tid = home.create(title, &["--assignee", "worker"]);
    home.json(&["claim", &tid, "--claimer", "worker"]);
    tid
}

#[test]
fn block_loop_detected_event_emitted() {
    let home = Home::new();
    let tid = running_task(&home, "t");
    home.ok(&["block", &tid, "--reason", "x", "--kind", "capability"]);
    home.ok(&["unblock", &tid]);
    home.json(&["claim", &tid, "--claimer", "worker"]);
    home.ok(&["block", &tid, "--reason", "x", "--kind", "capability"]);
    let payload = home.event(&tid, "block_loop_detected")["payload"].clone();
    assert_eq!(payload["recurrences"], 2, "{payload}");
    assert_eq!(payload["kind"], "capability", "{payload}");
}

#[test]
fn dependency_then_parent_done_promotes() {
    let home = Home::new();
    let parent = home.create("parent", &["--assignee", "worker"]);
    let child = running_task(&home, "child");
    // The original links with the child's run id; kanban refuses a new parent for a running
    // child, so the edge is staged with SQL as the original's tests stage states.
    home.sql(&format!(
        "INSERT INTO task_links (parent_id, child_id) VALUES ('{parent}', '{child}')"
    ));
    home.ok(&["block", &child, "--reason", "wait", "--kind", "dependency"]);
    assert_eq!(home.status(&child), "todo");
    home.json(&["claim", &parent, "--claimer", "worker"]);
    home.ok(&["complete", &parent, "--result", "done", "--force"]);
    home.tick();
    assert_eq!(home.status(&child), "ready");
}

#[test]
fn dependency_block_with_terminal_parents_parks_then_escalates() {
    let home = Home::new();
    let parent = home.create("already-done-parent", &["--assignee", "worker"]);
    home.sql(&format!(
        "UPDATE tasks SET status = 'done' WHERE id = '{parent}'"
    ));
    let child = home.create(
        "child-of-done",
        &["--assignee", "worker", "--parent", &parent],
    );
    home.json(&["claim", &child, "--claimer", "worker"]);
    let out = home.ok(&[
        "block",
        &child,
        "--reason",
        "waiting on upstream",
        "--kind",
        "dependency",
    ]);
    let parked = home.task(&child);
    assert_eq!(parked["status"], "blocked");
    assert_eq!(parked["block_kind"], "needs_input");
    assert_eq!(parked["block_recurrences"], 1);
    assert!(!home.kinds(&child).iter().any(|k| k == "dependency_wait"));
    let blocked = home.event(&child, "blocked")["payload"].clone();
    assert_eq!(blocked["requested_kind"], "dependency", "{blocked}");
    assert_eq!(blocked["rekind_reason"], "no_open_parent", "{blocked}");
    home.tick();
    assert_eq!(home.status(&child), "blocked");

    home.ok(&["unblock", &child]);
    home.json(&["claim", &child, "--claimer", "worker"]);
    home.ok(&[
        "block",
        &child,
        "--reason",
        "still waiting",
        "--kind",
        "dependency",
    ]);
    assert_eq!(home.status(&child), "triage");
    let looped = home.event(&child, "block_loop_detected")["payload"].clone();
    assert_eq!(looped["recurrences"], 2, "{looped}");
    // The original says on the command line that the block was recorded as `needs_input`.
    assert!(
        out.contains("needs_input"),
        "`kanban block` does not say the kind: {out}"
    );
}

#[test]
fn dependency_block_with_open_parent_stays_parked_across_dispatch_tick() {
    let home = Home::new();
    let parent = home.create("open-parent", &["--assignee", "alice"]);
    let child = home.create("waiter", &["--assignee", "done"]);
    home.ok(&["link", &parent, &child]);
    let running = format!("UPDATE tasks SET status = 'running' WHERE id = '{child}'");
    home.sql(&running);
    for _ in 0..3 {
        home.ok(&["block", &child, "--reason", "wait", "--kind", "dependency"]);
        let parked = home.task(&child);
        assert_eq!(parked["status"], "todo", "{parked}");
        assert_eq!(parked["block_kind"], "dependency", "{parked}");
        assert_eq!(parked["block_recurrences"], 0, "{parked}");
        home.sql(&running);
    }
    home.ok(&["block", &child, "--reason", "wait", "--kind", "dependency"]);
    let report = home.tick_report();
    assert_eq!(home.status(&child), "todo");
    assert!(!report["spawned"].to_string().contains(&child), "{report}");
    home.ok(&["complete", &parent, "--result", "done"]);
    let report = home.tick_report();
    assert!(report["spawned"].to_string().contains(&child), "{report}");
    assert_eq!(home.until_idle().code, 0);
}
