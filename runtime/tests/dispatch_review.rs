//! End to end: the review lane with real workers. An implementer hands its task to review, the
//! dispatcher claims it from `review` for the reviewer, the reviewer requests changes, the
//! implementer runs again and completes.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods)] // test code drives the real binary and real processes

mod dispatch_support;

use std::time::Duration;

use dispatch_support::{Home, config};
use kanban_runtime::board::Status;

/// A `command` profile whose agent is a shell script (the prompt on stdin is drained first).
fn script_profile(name: &str, script: &str) -> String {
    let escaped = script.replace('\\', "\\\\").replace('"', "\\\"");
    format!(
        "\n[profiles.{name}]\nagent = \"command\"\ncommand = [\"sh\", \"-c\", \"cat >/dev/null; {escaped}\"]\n"
    )
}

#[test]
fn review_round_trip_implementer_reviewer_changes_implementer_done() {
    let kanban = env!("CARGO_BIN_EXE_kanban");
    let marks = tempfile::tempdir().unwrap();
    let mark = marks.path().join("implemented-once");
    let mark = mark.display();
    let implementer = format!(
        "if [ -e '{mark}' ]; then '{kanban}' complete --summary 'added the tests'; \
         else touch '{mark}' && '{kanban}' review request --reviewer rev --summary 'first try'; fi"
    );
    let reviewer = format!("'{kanban}' review changes --reason 'needs tests'");
    let text = format!(
        "{}{}{}",
        config("max_spawn = 2"),
        script_profile("impl", &implementer),
        script_profile("rev", &reviewer)
    );
    let home = Home::new(&text);
    let id = home.create(Home::task("feature", "impl", None, vec![]));
    let out = home.dispatch_until_idle(&[], Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let board = home.board();
    let task = board.get_task(&id).unwrap();
    assert_eq!(task.status, Status::Done, "{stdout}");
    assert_eq!(task.assignee.as_deref(), Some("impl"));
    assert_eq!(
        home.run_outcomes(&id),
        ["review_requested", "changes_requested", "completed"]
    );
    let runs = board.runs(&id).unwrap();
    let profiles: Vec<_> = runs.iter().map(|r| r.profile.clone().unwrap()).collect();
    assert_eq!(profiles, ["impl", "rev", "impl"]);
    let claims: Vec<_> = home
        .events(&id)
        .into_iter()
        .filter(|e| e.kind == "claimed")
        .map(|e| e.payload.unwrap()["source_status"].clone())
        .collect();
    assert_eq!(
        claims,
        [
            serde_json::Value::Null,
            serde_json::json!("review"),
            serde_json::Value::Null
        ]
    );
    let kinds = home.kinds(&id);
    for kind in ["review_requested", "changes_requested"] {
        assert_eq!(kinds.iter().filter(|k| *k == kind).count(), 1, "{kinds:?}");
    }
    assert!(stdout.contains("(rev, review)"), "{stdout}");
    assert_eq!(board.fsck().unwrap(), []);
}
