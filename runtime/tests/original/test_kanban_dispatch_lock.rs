//! `tests/hermes_cli/test_kanban_dispatch_lock.py`: the per-board single-writer tick lock. The
//! original holds its `_dispatch_tick_lock` and calls `dispatch_once`; here the test holds the
//! board's lock file (`<db>.dispatch.lock`, the same `flock` kanban takes) and runs
//! `kanban dispatch --once`.

use kanban_runtime::home::lock::TickLock;

use super::support::Home;

/// Holds the tick lock of the board whose database is `db`.
fn hold(db: &std::path::Path) -> TickLock {
    TickLock::try_acquire(db)
        .unwrap()
        .expect("the lock is free")
}

#[test]
fn uncontended_tick_runs_and_is_not_skipped() {
    let home = Home::new();
    let t = home.create("t", &["--assignee", "done"]);
    let report = home.tick_report();
    assert_eq!(report["skipped_locked"], false, "{report}");
    assert!(report["spawned"].to_string().contains(&t), "{report}");
}

#[test]
fn held_lock_skips_the_tick_without_writes() {
    let home = Home::new();
    let t = home.create("t", &["--assignee", "done"]);
    let events = home.events(&t).len();
    {
        let _held = hold(&home.k.default_db());
        let report = home.tick_report();
        assert_eq!(report["skipped_locked"], true, "{report}");
        assert_eq!(report["spawned"], serde_json::json!([]), "{report}");
        let text = home.tick();
        assert!(text.contains("another dispatcher"), "{text}");
    }
    // Nothing was written: no claim, no run, no event.
    assert_eq!(home.status(&t), "ready");
    assert!(home.runs(&t).is_empty());
    assert_eq!(home.events(&t).len(), events);
}

#[test]
fn lock_releases_so_next_tick_runs() {
    let home = Home::new();
    let t = home.create("t", &["--assignee", "done"]);
    {
        let _held = hold(&home.k.default_db());
        assert_eq!(home.tick_report()["skipped_locked"], true);
    }
    let report = home.tick_report();
    assert_eq!(report["skipped_locked"], false, "{report}");
    assert!(report["spawned"].to_string().contains(&t), "{report}");
}

#[test]
fn lock_is_board_scoped() {
    let home = Home::new();
    home.ok(&["boards", "create", "other"]);
    let t = home.create("t", &["--board", "other", "--assignee", "done"]);
    let _held = hold(&home.k.default_db());
    // The default board's tick is locked out; the other board's is not.
    assert_eq!(home.tick_report()["skipped_locked"], true);
    let report = home.json(&["--board", "other", "dispatch", "--once"]);
    assert_eq!(report["skipped_locked"], false, "{report}");
    assert!(report["spawned"].to_string().contains(&t), "{report}");
}

#[test]
fn reentrant_same_path_lock_is_exclusive() {
    let home = Home::new();
    let db = home.k.default_db();
    let _first = hold(&db);
    // A second holder on this host, even in the same process, does not get it.
    assert!(TickLock::try_acquire(&db).unwrap().is_none());
}
