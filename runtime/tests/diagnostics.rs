//! `kanban diagnostics` end to end (README "Watching a board"): a board built so that each of
//! the seven rules fires on exactly one task, and on no other; the severity and task filters;
//! the JSON shape; `show` naming a task's diagnostics; a diagnostic clearing once the task moves
//! on.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary

use std::collections::BTreeMap;

use kanban_tests::Kanban;
use serde_json::Value;

fn sql(k: &Kanban, statement: &str) {
    let conn = rusqlite::Connection::open(k.default_db()).unwrap();
    conn.execute_batch(statement).unwrap();
}

/// Task id → the kinds of its diagnostics.
fn kinds(report: &Value) -> BTreeMap<String, Vec<String>> {
    report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let kinds = t["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["kind"].as_str().unwrap().to_owned())
                .collect();
            (t["task_id"].as_str().unwrap().to_owned(), kinds)
        })
        .collect()
}

#[test]
fn each_rule_fires_on_the_task_built_for_it_and_on_no_other() {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    k.ok(&["init"]);
    // hallucinated_cards: a completion refused for a card that does not exist.
    let a = k.create("claims a phantom card", &[]);
    let refused = k.run(&[
        "complete",
        &a,
        "--summary",
        "x",
        "--created-cards",
        "t_deadbeef00",
    ]);
    assert_eq!(refused.code, 3, "{refused:?}");
    // prose_phantom_refs: a completion whose summary names an id that does not exist.
    let b = k.create("mentions a phantom", &[]);
    k.ok(&["complete", &b, "--summary", "see t_abcd1234ffff"]);
    // repeated_failures: the failure counter at the threshold.
    let c = k.create("keeps failing", &[]);
    sql(
        &k,
        &format!(
            "UPDATE tasks SET consecutive_failures = 3, last_failure_error = 'boom\nmore' WHERE id = '{c}'"
        ),
    );
    // repeated_crashes: its last two runs crashed.
    let d = k.create("keeps crashing", &[]);
    sql(
        &k,
        &format!(
            "INSERT INTO task_runs (task_id, status, started_at, ended_at, outcome, error) VALUES \
         ('{d}', 'crashed', 1, 2, 'crashed', 'segfault'), ('{d}', 'crashed', 3, 4, 'crashed', 'segfault again')"
        ),
    );
    // stuck_in_blocked: blocked 25 hours ago, nobody answered.
    let e = k.create("waits for a person", &[]);
    k.ok(&["block", &e, "--reason", "which database?"]);
    sql(
        &k,
        &format!("UPDATE task_events SET created_at = created_at - 90000 WHERE task_id = '{e}'"),
    );
    // ghost_running: running with no claim and no run.
    let f = k.create("ghost", &[]);
    sql(
        &k,
        &format!("UPDATE tasks SET status = 'running' WHERE id = '{f}'"),
    );
    // stranded_in_ready: ready for two hours, assigned to a profile no dispatcher serves.
    let g = k.create("stranded", &["--assignee", "nobody-serves-this"]);
    sql(
        &k,
        &format!(
            "UPDATE tasks SET created_at = created_at - 7200 WHERE id = '{g}'; \
         UPDATE task_events SET created_at = created_at - 7200 WHERE task_id = '{g}'"
        ),
    );
    // Healthy tasks: ready and unassigned, assigned and fresh, done cleanly.
    let h1 = k.create("healthy", &[]);
    let h2 = k.create("fresh", &["--assignee", "coder"]);
    let h3 = k.create("done well", &[]);
    k.ok(&["complete", &h3, "--summary", "shipped"]);

    let report = k.json(&["diagnostics"]);
    let found = kinds(&report);
    let expected: BTreeMap<String, Vec<String>> = [
        (a.clone(), "hallucinated_cards"),
        (b.clone(), "prose_phantom_refs"),
        (c.clone(), "repeated_failures"),
        (d.clone(), "repeated_crashes"),
        (e.clone(), "stuck_in_blocked"),
        (f.clone(), "ghost_running"),
        (g.clone(), "stranded_in_ready"),
    ]
    .into_iter()
    .map(|(id, kind)| (id, vec![kind.to_owned()]))
    .collect();
    assert_eq!(found, expected, "{report}");
    assert_eq!(report["count"], 7);
    for healthy in [&h1, &h2, &h3] {
        assert!(!found.contains_key(healthy.as_str()));
    }
    // Worst first: the ghost is critical.
    assert_eq!(report["diagnostics"][0]["task_id"], f.as_str());
    let ghost = &report["diagnostics"][0]["diagnostics"][0];
    assert_eq!(ghost["severity"], "critical");
    assert_eq!(
        ghost["actions"][0]["command"],
        format!("kanban reclaim {f}")
    );
    assert_eq!(ghost["actions"][0]["suggested"], true);
    let phantom = &report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task_id"] == a.as_str())
        .unwrap()["diagnostics"][0];
    assert_eq!(
        phantom["data"]["phantom_ids"],
        serde_json::json!(["t_deadbeef00"])
    );

    // --severity error leaves the warnings out; --task narrows to one task.
    let errors = kinds(&k.json(&["diagnostics", "--severity", "error"]));
    assert!(
        !errors.contains_key(&b) && !errors.contains_key(&e),
        "{errors:?}"
    );
    assert!(errors.contains_key(&c) && errors.contains_key(&g));
    let one = kinds(&k.json(&["diagnostics", "--task", &d]));
    assert_eq!(one.len(), 1);
    assert_eq!(one[&d], ["repeated_crashes"]);
    let none = k.json(&["diagnostics", "--task", &h1]);
    assert_eq!(none["count"], 0);
    let bad = k.run(&["diagnostics", "--severity", "loud"]);
    assert_eq!(bad.code, 2, "{bad:?}");

    // The text: the task, then each diagnostic with the command to try.
    let text = k.ok(&["diagnostics"]);
    assert!(
        text.contains("[critical] ghost_running: Ghost running state: missing"),
        "{text}"
    );
    assert!(text.contains(&format!("try: kanban logs {d}")), "{text}");
    let shown = k.ok(&["show", &c]);
    assert!(
        shown.contains("diagnostics:\n  [error] repeated_failures: Agent failure x3: boom"),
        "{shown}"
    );

    // A clean completion after the refused one clears it.
    k.ok(&["complete", &a, "--summary", "no cards after all"]);
    let after = kinds(&k.json(&["diagnostics"]));
    assert!(!after.contains_key(&a), "{after:?}");
    assert_eq!(after.len(), 6);
}
