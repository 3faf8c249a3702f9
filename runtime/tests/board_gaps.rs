//! Board behaviours of the original that the CLI now matches, driven through the `kanban` binary:
//! a never-claimed completion or block records one zero-length run, `list` keeps creation order
//! among equal priorities, `assign` to another profile forgets the last failure.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test

use kanban_tests::Kanban;
use serde_json::Value;

fn kanban() -> Kanban {
    Kanban::new(env!("CARGO_BIN_EXE_kanban"))
}

fn runs(k: &Kanban, id: &str) -> Vec<Value> {
    k.json(&["show", id])["runs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn events_of(k: &Kanban, id: &str, kind: &str) -> Vec<Value> {
    k.json(&["events", id])
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .cloned()
        .collect()
}

#[test]
fn never_claimed_complete_records_one_zero_length_run_named_by_the_event() {
    let k = kanban();
    let id = k.create("hand-made", &["--assignee", "coder"]);
    k.ok(&["complete", &id, "--summary", "did it by hand"]);
    let runs = runs(&k, &id);
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    assert_eq!(run["outcome"], "completed");
    assert_eq!(run["status"], "done");
    assert_eq!(run["summary"], "did it by hand");
    assert_eq!(run["profile"], "coder");
    assert_eq!(run["started_at"], run["ended_at"], "zero length");
    let completed = events_of(&k, &id, "completed");
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["run_id"], run["id"]);
    k.assert_fsck_clean();
}

#[test]
fn never_claimed_complete_without_a_summary_records_no_run() {
    let k = kanban();
    let id = k.create("quiet", &[]);
    k.ok(&["complete", &id]);
    assert!(runs(&k, &id).is_empty());
    assert_eq!(events_of(&k, &id, "completed")[0]["run_id"], Value::Null);
}

#[test]
fn never_claimed_block_records_one_run_carrying_the_reason() {
    let k = kanban();
    let id = k.create("stuck", &[]);
    k.ok(&[
        "block",
        &id,
        "--reason",
        "needs a key",
        "--kind",
        "needs_input",
    ]);
    let runs = runs(&k, &id);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["outcome"], "blocked");
    assert_eq!(runs[0]["summary"], "needs a key");
    assert_eq!(runs[0]["started_at"], runs[0]["ended_at"]);
    let blocked = events_of(&k, &id, "blocked");
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0]["run_id"], runs[0]["id"]);
    k.assert_fsck_clean();
}

#[test]
fn a_claimed_completion_still_closes_its_own_run_and_adds_none() {
    let k = kanban();
    let id = k.create("claimed", &[]);
    let claim = k.json(&["claim", &id, "--claimer", "h:1"]);
    k.ok(&["complete", &id, "--force", "--summary", "ok"]);
    let runs = runs(&k, &id);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["id"], claim["run_id"]);
}

#[test]
fn list_keeps_creation_order_among_equal_priorities() {
    let k = kanban();
    // Created within the same second: the order must not depend on the random ids.
    let ids: Vec<String> = (0..12).map(|i| k.create(&format!("t{i}"), &[])).collect();
    let high = k.create("urgent", &["--priority", "3"]);
    let listed: Vec<String> = k
        .json(&["list"])
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    let mut expected = vec![high];
    expected.extend(ids);
    assert_eq!(listed, expected);
}

#[test]
fn assigning_another_profile_clears_the_last_failure_error() {
    let k = kanban();
    let id = k.create("flaky", &["--assignee", "a"]);
    // An operator reclaim after a claim leaves no error; a manual failure record is made with a
    // direct write (the board file is ours), as a crashed run would have left it.
    let db = k.default_db();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE tasks SET last_failure_error = 'HTTP 429 quota', consecutive_failures = 1 WHERE id = ?1",
        [&id],
    )
    .unwrap();
    drop(conn);
    k.ok(&["assign", &id, "a"]);
    let same = k.json(&["show", &id])["task"].clone();
    assert_eq!(
        same["last_failure_error"], "HTTP 429 quota",
        "same profile keeps it"
    );
    k.ok(&["assign", &id, "b"]);
    let task = k.json(&["show", &id])["task"].clone();
    assert_eq!(task["last_failure_error"], Value::Null);
    assert_eq!(task["consecutive_failures"], 0);
}
