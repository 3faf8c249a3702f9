//! Helpers of the board's unit tests (the store-neutral suite, with its own, is
//! `runtime/tests/conformance/`; the tests that need a PostgreSQL server are integration tests,
//! `runtime/tests/pg_engine.rs`): a board file, a task created or claimed in one line.

use super::*;

/// The time the tests start at (epoch seconds).
pub(crate) const T0: i64 = 1_700_000_000;

/// A board file in a fresh temporary folder, and the folder (drop the board first).
pub(crate) fn sqlite_board() -> (tempfile::TempDir, Board) {
    let dir = tempfile::tempdir().unwrap();
    let board = Board::open_path(&dir.path().join("kanban.db"), &OpenOptions::create()).unwrap();
    (dir, board)
}

/// A ready task titled `title`.
pub(crate) fn create(b: &Board, title: &str) -> String {
    child_of(b, title, &[])
}

/// A task titled `title` under `parents`.
pub(crate) fn child_of(b: &Board, title: &str, parents: &[&str]) -> String {
    let task = NewTask {
        title: title.to_owned(),
        parents: parents.iter().map(|p| p.to_string()).collect(),
        ..NewTask::default()
    };
    b.create_task(&task, T0).unwrap().id
}

/// An external claim under `lock` for 900 s.
pub(crate) fn spec(lock: &str) -> ClaimSpec {
    ClaimSpec {
        lock: lock.to_owned(),
        ttl_seconds: 900,
        origin: ClaimOrigin::External,
    }
}

/// Claims `id` under `host:1`; panics if the claim is lost.
pub(crate) fn claim(b: &Board, id: &str) -> Claimed {
    match b.claim(id, &spec("host:1"), T0).unwrap() {
        ClaimOutcome::Claimed(c) => c,
        ClaimOutcome::Lost(r) => panic!("lost: {r}"),
    }
}

/// The status of `id`.
pub(crate) fn status(b: &Board, id: &str) -> Status {
    b.get_task(id).unwrap().status
}
