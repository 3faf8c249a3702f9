//! The original's default-assignee tests: an unassigned ready task dispatched to the default
//! profile (kanban's `[dispatch] default_profile`, the original's `kanban.default_assignee`) is
//! assigned to it, with an `assigned` event whose `source` is `kanban.default_assignee`.

use super::support::Home;

#[test]
fn unassigned_task_auto_assigned_with_default_assignee() {
    let home = Home::with("default_profile = \"done\"");
    let id = home.create("t1", &[]);
    let out = home.ok(&["dispatch", "--until-idle"]);
    assert!(out.contains(&format!("spawned    {id} (done)")), "{out}");
    assert_eq!(home.task(&id)["assignee"], "done");
    let assigned: Vec<_> = home
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "assigned")
        .collect();
    assert_eq!(assigned.len(), 1);
    assert_eq!(assigned[0]["payload"]["assignee"], "done");
    assert_eq!(assigned[0]["payload"]["source"], "kanban.default_assignee");
}

#[test]
fn explicitly_assigned_task_untouched_by_default_assignee() {
    let home = Home::with("default_profile = \"done\"");
    let id = home.create("t1", &["--assignee", "sh", "--body", "true"]);
    home.ok(&["dispatch", "--until-idle"]);
    assert_eq!(home.task(&id)["assignee"], "sh");
    assert!(!home.kinds(&id).contains(&"assigned".to_owned()));
}

#[test]
fn dry_run_with_default_assignee_reports_without_mutating() {
    let home = Home::with("default_profile = \"done\"");
    let id = home.create("t1", &[]);
    let out = home.ok(&["dispatch", "--dry-run"]);
    assert!(out.contains(&id), "{out}");
    assert!(home.task(&id)["assignee"].is_null());
    assert_eq!(home.task(&id)["status"], "ready");
    assert!(!home.kinds(&id).contains(&"assigned".to_owned()));
}
