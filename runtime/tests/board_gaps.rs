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
    // An empty completion is refused unless the board allows it (README "Handoff").
    std::fs::write(
        k.home().join("kanban.toml"),
        "[dispatch]\nallow_empty_completion = true\n",
    )
    .unwrap();
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

#[test]
fn reopen_sends_the_task_back_and_invalidates_a_three_level_chain() {
    let k = kanban();
    let a = k.create("a", &[]);
    let b = k.create("b", &["--parent", &a]);
    let c = k.create("c", &["--parent", &b]);
    let d = k.create("d", &["--parent", &c]);
    let bystander = k.create("bystander", &[]);
    k.ok(&["complete", &a, "--summary", "a done"]);
    k.ok(&["complete", &b, "--summary", "b done"]);
    // c runs under a claim, d waits for it.
    let claim = k.json(&["claim", &c, "--claimer", "h:7"]);
    assert_eq!(k.status(&d), "todo");

    let reopened = k.json(&["reopen", &a, "--reason", "wrong answer"]);
    assert_eq!(reopened["status"], "ready");
    let inv: Vec<(String, String)> = reopened["invalidated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["task_id"].as_str().unwrap().to_owned(),
                i["prior_status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        inv,
        [
            (b.clone(), "done".to_owned()),
            (c.clone(), "running".to_owned())
        ]
    );
    assert_eq!(k.status(&a), "ready");
    for id in [&b, &c, &d] {
        assert_eq!(k.status(id), "todo", "{id}");
    }
    assert_eq!(k.status(&bystander), "ready");
    let c_show = k.json(&["show", &c]);
    assert_eq!(c_show["task"]["claim_lock"], Value::Null);
    assert_eq!(c_show["task"]["current_run_id"], Value::Null);
    let run = &c_show["runs"][0];
    assert_eq!(run["id"], claim["run_id"]);
    assert_eq!(run["outcome"], "reclaimed");
    assert!(run["ended_at"].is_i64());
    assert_eq!(c_show["comments"].as_array().unwrap().len(), 1);
    let b_task = k.json(&["show", &b])["task"].clone();
    assert_eq!(b_task["completed_at"], Value::Null);
    let inv_events = events_of(&k, &b, "descendant_invalidated");
    assert_eq!(inv_events.len(), 1);
    assert_eq!(inv_events[0]["payload"]["ancestor"], a.as_str());
    assert_eq!(inv_events[0]["payload"]["prior_status"], "done");
    assert_eq!(
        events_of(&k, &a, "status")[0]["payload"]["previous_status"],
        "done"
    );
    // The stale worker of c can no longer close anything.
    let stale = k
        .cmd()
        .args(["complete", &c, "--summary", "late"])
        .env("HERMES_KANBAN_TASK", &c)
        .env("HERMES_KANBAN_RUN_ID", claim["run_id"].to_string())
        .env("HERMES_KANBAN_CLAIM_LOCK", "h:7")
        .output()
        .unwrap();
    assert_eq!(stale.status.code(), Some(3));
    k.assert_fsck_clean();
    // The chain flows again in order.
    k.ok(&["complete", &a, "--summary", "a again"]);
    assert_eq!(k.status(&b), "ready");
    assert_eq!(k.status(&c), "todo");
}

#[test]
fn reopen_refuses_a_task_that_is_not_done_and_changes_nothing() {
    let k = kanban();
    let a = k.create("a", &[]);
    let before = k.json(&["show", &a]);
    let run = k.run(&["reopen", &a]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("needs it done"), "{}", run.stderr);
    assert_eq!(k.json(&["show", &a]), before);
    let missing = k.run(&["reopen", "t_00000000"]);
    assert_eq!(missing.code, 1, "{}", missing.stderr);
}

#[test]
fn review_commands_hand_over_and_back_and_refuse_what_does_not_apply() {
    let k = kanban();
    let id = k.create("feature", &["--assignee", "impl"]);
    // Not a reviewer's run: changes are refused and nothing changes.
    let before = k.json(&["show", &id]);
    let refused = k.run(&["review", "changes", &id, "--reason", "x"]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert_eq!(k.json(&["show", &id]), before);
    let blank = k.run(&["review", "request", &id, "--reviewer", " "]);
    assert_eq!(blank.code, 1, "{}", blank.stderr);
    assert_eq!(k.json(&["show", &id]), before);

    let r = k.json(&[
        "review",
        "request",
        &id,
        "--reviewer",
        "Rev",
        "--summary",
        "look",
    ]);
    assert_eq!(r["implementer"], "impl");
    assert_eq!(r["reviewer"], "rev");
    let show = k.json(&["show", &id]);
    assert_eq!(show["task"]["status"], "review");
    assert_eq!(show["task"]["assignee"], "rev");
    assert_eq!(show["runs"][0]["outcome"], "review_requested");
    let requested = events_of(&k, &id, "review_requested");
    assert_eq!(requested[0]["payload"]["implementer"], "impl");

    // An operator takes it back to the implementer.
    let back = k.json(&["review", "reopen", &id]);
    assert_eq!(back["status"], "ready");
    assert_eq!(back["assignee"], "impl");
    assert_eq!(events_of(&k, &id, "review_reopened").len(), 1);
    assert_eq!(k.run(&["review", "reopen", &id]).code, 3);

    // A reviewer's run (claimed from review) may request changes; a blank reason is an error.
    k.ok(&["review", "request", &id, "--reviewer", "rev"]);
    let claim = k.json(&["claim", &id, "--claimer", "h:9"]);
    assert_eq!(
        events_of(&k, &id, "claimed")[0]["payload"]["source_status"],
        "review"
    );
    let worker = |args: &[&str]| {
        k.cmd()
            .args(args)
            .env("HERMES_KANBAN_TASK", &id)
            .env("HERMES_KANBAN_RUN_ID", claim["run_id"].to_string())
            .env("HERMES_KANBAN_CLAIM_LOCK", "h:9")
            .env("HERMES_KANBAN_DB", k.default_db())
            .output()
            .unwrap()
    };
    let blank = worker(&["review", "changes", "--reason", " "]);
    assert_eq!(blank.status.code(), Some(1));
    let changes = worker(&["--json", "review", "changes", "--reason", "needs tests"]);
    assert_eq!(
        changes.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&changes.stderr)
    );
    let show = k.json(&["show", &id]);
    assert_eq!(show["task"]["status"], "ready");
    assert_eq!(show["task"]["assignee"], "impl");
    let runs = show["runs"].as_array().unwrap();
    assert_eq!(runs.last().unwrap()["outcome"], "changes_requested");
    assert_eq!(runs.last().unwrap()["status"], "ready");
    let changed = events_of(&k, &id, "changes_requested");
    assert_eq!(changed[0]["payload"]["reviewer"], "rev");
    assert_eq!(changed[0]["payload"]["implementer"], "impl");
    k.assert_fsck_clean();
}

#[test]
fn a_reviewer_run_reclaimed_goes_back_to_review() {
    let k = kanban();
    let id = k.create("feature", &["--assignee", "impl"]);
    k.ok(&["review", "request", &id, "--reviewer", "rev"]);
    k.json(&["claim", &id, "--claimer", "h:3"]);
    assert_eq!(k.status(&id), "running");
    let r = k.json(&["reclaim", &id, "--reason", "reviewer stuck"]);
    assert_eq!(r["retry_status"], "review");
    let show = k.json(&["show", &id]);
    assert_eq!(show["task"]["status"], "review");
    assert_eq!(show["task"]["assignee"], "rev");
    let reclaimed = events_of(&k, &id, "reclaimed");
    assert_eq!(reclaimed[0]["payload"]["retry_status"], "review");
    // An implementer's run reclaimed goes back to ready, as before.
    let other = k.create("plain", &[]);
    k.json(&["claim", &other, "--claimer", "h:3"]);
    assert_eq!(k.json(&["reclaim", &other])["retry_status"], "ready");
    k.assert_fsck_clean();
}
