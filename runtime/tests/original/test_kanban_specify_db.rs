//! `tests/hermes_cli/test_kanban_specify_db.py`: `specify_triage_task`, a triage task fleshed out
//! and moved on, through `kanban specify`.

use super::support::Home;

#[test]
fn specify_promotes_triage_to_todo() {
    let home = Home::new();
    let tid = home.create("rough idea", &["--triage"]);
    assert_eq!(home.status(&tid), "triage");
    home.ok(&[
        "specify",
        &tid,
        "--title",
        "Refined: rough idea",
        "--body",
        "**Goal**\nDo the thing.",
        "--author",
        "specifier-bot",
    ]);
    let task = home.task(&tid);
    // No parents: past todo to ready.
    assert_eq!(task["status"], "ready");
    assert_eq!(task["title"], "Refined: rough idea");
    assert!(task["body"].as_str().unwrap().contains("**Goal**"));
}

#[test]
fn specify_rejects_blank_title() {
    let home = Home::new();
    let tid = home.create("rough", &["--triage"]);
    let run = home.run(&["specify", &tid, "--title", "   ", "--body", "ok"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("title must not be blank"),
        "{}",
        run.stderr
    );
    assert_eq!(home.status(&tid), "triage");
}

#[test]
fn specify_records_audit_comment_only_when_author_given() {
    let home = Home::new();
    let tid1 = home.create("a", &["--triage"]);
    home.ok(&[
        "specify", &tid1, "--title", "A-spec", "--body", "b", "--author", "ace",
    ]);
    let comments1 = home.json(&["show", &tid1])["comments"].clone();
    assert_eq!(comments1.as_array().unwrap().len(), 1, "{comments1}");
    assert!(comments1[0]["body"].as_str().unwrap().contains("Specified"));
    assert_eq!(comments1[0]["author"], "ace");

    let tid2 = home.create("b", &["--triage"]);
    home.ok(&["specify", &tid2, "--title", "B-spec", "--body", "b"]);
    let comments2 = home.json(&["show", &tid2])["comments"].clone();
    assert_eq!(comments2, serde_json::json!([]));
}
