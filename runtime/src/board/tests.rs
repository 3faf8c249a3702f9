//! The board's unit tests that are not part of the store-neutral conformance suite
//! (`runtime/tests/conformance/`, run against every store): the ones that need no store at all (the claim
//! TTL and lock), and the SQLite-only ones (the statement cache of the SQLite connection).

use super::testing::{T0, claim, create};
use super::*;

// ---------------------------------------------------------------- no store

#[test]
fn a_ttl_outside_one_second_to_a_year_is_refused() {
    assert_eq!(check_seconds("--ttl", 30).unwrap(), 30);
    assert!(matches!(
        check_seconds("--ttl", 0),
        Err(BoardError::InvalidSeconds { .. })
    ));
    assert!(check_seconds("--ttl", MAX_SECONDS + 1).is_err());
    assert_eq!(
        crate::config::Config::default().dispatch.claim_ttl_seconds,
        DEFAULT_CLAIM_TTL_SECONDS
    );
}

#[test]
fn default_claim_lock_is_host_and_pid() {
    let lock = default_claim_lock();
    let (host, pid) = lock.rsplit_once(':').unwrap();
    assert!(!host.is_empty());
    assert_eq!(pid, std::process::id().to_string());
}

// ---------------------------------------------------------------- SQLite only: statement cache

#[test]
fn completions_reuse_their_cached_statements_without_re_preparing() {
    let dir = tempfile::tempdir().unwrap();
    let b = Board::open_path(&dir.path().join("kanban.db"), &OpenOptions::create()).unwrap();
    for i in 0..5 {
        let id = create(&b, &format!("t{i}"));
        let c = claim(&b, &id);
        let done = Completion {
            expected_run_id: Some(c.run_id),
            summary: Some("ok".into()),
            ..Default::default()
        };
        assert!(b.complete(&id, &done, T0).unwrap().is_done());
    }
    // The claim's parent gate and the fast completion's `UPDATE`, whose conditions join the
    // parents and the children: SQLite re-planned such joins on every new binding until the
    // query planner stability guarantee was switched on.
    for sql in [
        "SELECT p.id FROM task_links l JOIN tasks p ON p.id = l.parent_id \
         WHERE l.child_id = ?1 AND p.status NOT IN ('done', 'archived') ORDER BY p.id",
        super::engine::sqlite::fast::DONE,
    ] {
        // The SQL layer prepares through rusqlite's cache: the same statement, seen from below.
        let stmt = b.conn().as_sqlite().unwrap().prepare_cached(sql).unwrap();
        assert!(
            stmt.get_status(rusqlite::StatementStatus::VmStep) > 0,
            "not the statement the transitions cached (its SQL changed?): {sql}"
        );
        assert_eq!(
            stmt.get_status(rusqlite::StatementStatus::RePrepare),
            0,
            "re-prepared: {sql}"
        );
    }
}
