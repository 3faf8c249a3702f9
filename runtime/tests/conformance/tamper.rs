//! Test-only hooks that write what no transition would: the broken rows `fsck` must name, and
//! the state an operator or another process could leave behind. Each goes through the board's
//! SQL layer in its common dialect, so it means the same on every store.

use kanban_runtime::board::Board;
use kanban_runtime::test_support::sql;

fn run(b: &Board, statement: &str, params: &[&str]) {
    let values: Vec<&dyn kanban_runtime::db::ToSql> = params
        .iter()
        .map(|p| p as &dyn kanban_runtime::db::ToSql)
        .collect();
    let changed = sql(b).execute(statement, values.as_slice()).unwrap();
    assert!(
        changed > 0,
        "the hook changed nothing: {statement} {params:?}"
    );
}

/// Sets the stored status of `id` to `status`, whatever it is (even one outside the nine).
pub(crate) fn set_status(b: &Board, id: &str, status: &str) {
    run(
        b,
        "UPDATE tasks SET status = ?2 WHERE id = ?1",
        &[id, status],
    );
}

/// Adds the edge `parent → child` without any of `link`'s checks.
pub(crate) fn add_link(b: &Board, parent: &str, child: &str) {
    run(
        b,
        "INSERT INTO task_links (parent_id, child_id) VALUES (?1, ?2)",
        &[parent, child],
    );
}

/// Clears the claim lock of `id` and nothing else.
pub(crate) fn clear_claim_lock(b: &Board, id: &str) {
    run(b, "UPDATE tasks SET claim_lock = NULL WHERE id = ?1", &[id]);
}

/// Ends every run of the board (at time 1) without touching the tasks.
pub(crate) fn end_every_run(b: &Board) {
    run(b, "UPDATE task_runs SET ended_at = 1", &[]);
}

/// An event of `task_id` (which need not exist) of kind `kind`.
pub(crate) fn insert_event(b: &Board, task_id: &str, kind: &str) {
    run(
        b,
        "INSERT INTO task_events (task_id, kind, created_at) VALUES (?1, ?2, 0)",
        &[task_id, kind],
    );
}

/// Sets the consecutive-failure counter of `id`.
pub(crate) fn set_failures(b: &Board, id: &str, n: i64) {
    let changed = sql(b)
        .execute(
            "UPDATE tasks SET consecutive_failures = ?2 WHERE id = ?1",
            rusqlite::params![id, n],
        )
        .unwrap();
    assert_eq!(changed, 1, "no task {id}");
}

/// Records a worker pid on `id`, as a dispatcher's spawn would.
pub(crate) fn set_worker_pid(b: &Board, id: &str, pid: i64) {
    let changed = sql(b)
        .execute(
            "UPDATE tasks SET worker_pid = ?2 WHERE id = ?1",
            rusqlite::params![id, pid],
        )
        .unwrap();
    assert_eq!(changed, 1, "no task {id}");
}

/// Stores `version` as the board's schema version.
pub(crate) fn set_schema_version(b: &Board, version: i64) {
    sql(b).set_schema_version(version).unwrap();
}

/// Sets the claim lock of `id` and nothing else.
pub(crate) fn set_claim_lock(b: &Board, id: &str, lock: &str) {
    run(
        b,
        "UPDATE tasks SET claim_lock = ?2 WHERE id = ?1",
        &[id, lock],
    );
}

/// Points `id`'s `current_run_id` at the current run of `other` (`NULL` when it has none).
pub(crate) fn borrow_current_run(b: &Board, id: &str, other: &str) {
    run(
        b,
        "UPDATE tasks SET current_run_id = (SELECT o.current_run_id FROM tasks o WHERE o.id = ?2) \
         WHERE id = ?1",
        &[id, other],
    );
}

/// An open run of `task_id` (which need not exist).
pub(crate) fn insert_open_run(b: &Board, task_id: &str) {
    run(
        b,
        "INSERT INTO task_runs (task_id, status, started_at) VALUES (?1, 'running', 0)",
        &[task_id],
    );
}

/// A comment on `task_id` (which need not exist).
pub(crate) fn insert_comment(b: &Board, task_id: &str) {
    run(
        b,
        "INSERT INTO task_comments (task_id, author, body, created_at) VALUES (?1, 'a', 'b', 0)",
        &[task_id],
    );
}
