//! `tests/hermes_cli/test_kanban_promote.py`: the operator's `promote` (issue #28822 of the
//! original: a child left in todo although its parents are done), with `--force`, and several
//! ids in one command.

use super::support::Home;

/// A child in todo whose parents (`n`) are done when `parents_done`, else still open. The
/// parents are closed with SQL, as the original's test does, so nothing promoted the child.
fn stuck_todo(home: &Home, parents_done: bool, n: usize) -> (String, Vec<String>) {
    let parents: Vec<String> = (0..n)
        .map(|i| home.create(&format!("parent{i}"), &["--assignee", "setup"]))
        .collect();
    let mut args = vec!["--assignee", "setup"];
    for p in &parents {
        args.extend(["--parent", p.as_str()]);
    }
    let child = home.create("child", &args);
    assert_eq!(home.status(&child), "todo");
    if parents_done {
        for p in &parents {
            home.sql(&format!(
                "UPDATE tasks SET status = 'done' WHERE id = '{p}'"
            ));
        }
    }
    (child, parents)
}

#[test]
fn promote_stuck_todo_succeeds() {
    let home = Home::new();
    let (child, _) = stuck_todo(&home, true, 1);
    home.ok(&["promote", &child]);
    assert_eq!(home.status(&child), "ready");
}

#[test]
fn promote_with_force_bypasses_dependency_check() {
    let home = Home::new();
    let (child, _) = stuck_todo(&home, false, 1);
    home.ok(&["promote", &child, "--reason", "recovery", "--force"]);
    assert_eq!(home.status(&child), "ready");
}

#[test]
fn promote_does_not_change_assignee() {
    let home = Home::new();
    let (child, _) = stuck_todo(&home, true, 1);
    let before = home.task(&child)["assignee"].clone();
    home.ok(&["promote", &child]);
    assert_eq!(home.task(&child)["assignee"], before);
}

#[test]
fn promote_blocked_task_works() {
    let home = Home::new();
    let tid = home.create("t", &[]);
    home.sql(&format!(
        "UPDATE tasks SET status = 'blocked' WHERE id = '{tid}'"
    ));
    home.ok(&["promote", &tid, "--reason", "ready now"]);
    assert_eq!(home.status(&tid), "ready");
}

#[test]
fn cli_promote_bulk_ids_promotes_all() {
    let home = Home::new();
    let parent = home.create("parent", &[]);
    let children: Vec<String> = (0..3)
        .map(|i| home.create(&format!("c{i}"), &["--parent", &parent]))
        .collect();
    home.sql(&format!(
        "UPDATE tasks SET status = 'done' WHERE id = '{parent}'"
    ));
    let mut args = vec!["promote"];
    args.extend(children.iter().map(String::as_str));
    let out = home.ok(&args);
    for c in &children {
        assert!(out.contains(c.as_str()), "{out}");
        assert_eq!(home.status(c), "ready");
    }
}

#[test]
fn cli_promote_dedupes_duplicate_ids() {
    let home = Home::new();
    let parent = home.create("parent", &[]);
    let child = home.create("c", &["--parent", &parent]);
    home.sql(&format!(
        "UPDATE tasks SET status = 'done' WHERE id = '{parent}'"
    ));
    home.ok(&["promote", &child, &child, &child]);
    let n = home.count(&format!(
        "SELECT COUNT(*) FROM task_events WHERE task_id = '{child}' AND kind = 'promoted_manual'"
    ));
    assert_eq!(n, 1);
}
