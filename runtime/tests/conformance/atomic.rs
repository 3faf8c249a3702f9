use super::*;
use kanban_runtime::board::StorageError;

/// Runs `transition` with the insert of its `kind` event failing: it must fail with the engine's
/// error, and leave the task, its runs, its events and its comments exactly as they were.
fn fails_whole(s: &dyn Store, b: &Board, id: &str, kind: &str, transition: impl FnOnce() -> bool) {
    let task = b.get_task(id).unwrap();
    let runs = b.runs(id).unwrap();
    let events = b.events(id, None).unwrap();
    let comments = b.comments(id).unwrap();
    s.fail_event_insert(b, id, kind);
    let failed = transition();
    s.heal(b);
    assert!(
        failed,
        "the {kind} transition did not report the failed event insert"
    );
    assert_eq!(b.get_task(id).unwrap(), task, "{kind}: the task changed");
    assert_eq!(b.runs(id).unwrap(), runs, "{kind}: the runs changed");
    assert_eq!(
        b.events(id, None).unwrap(),
        events,
        "{kind}: events changed"
    );
    assert_eq!(
        b.comments(id).unwrap(),
        comments,
        "{kind}: comments changed"
    );
    assert!(
        sql(b).is_autocommit(),
        "{kind}: a transaction was left open"
    );
}

fn sql_error<T: std::fmt::Debug>(r: Result<T>) -> bool {
    matches!(r, Err(BoardError::Storage(StorageError::Sql(_))))
}

pub(crate) fn a_transition_whose_event_cannot_be_written_changes_nothing(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let c = child_of(&b, "c", &[&p]);
    fails_whole(s, &b, &p, "claimed", || {
        sql_error(b.claim(&p, &spec("host:1"), T0))
    });
    let run = claim(&b, &p).run_id;
    fails_whole(s, &b, &p, "heartbeat", || {
        sql_error(b.heartbeat(&p, &Fence::default(), Some("x"), 900, T0 + 1))
    });
    let done = Completion {
        expected_run_id: Some(run),
        ..Completion::default()
    };
    // Completing also promotes the child: its `promoted` event failing undoes the completion.
    fails_whole(s, &b, &p, "completed", || {
        sql_error(b.complete(&p, &done, T0 + 2))
    });
    fails_whole(s, &b, &c, "promoted", || {
        sql_error(b.complete(&p, &done, T0 + 2))
    });
    assert_eq!(status(&b, &p), Status::Running);
    assert_eq!(status(&b, &c), Status::Todo);
    fails_whole(s, &b, &p, "blocked", || {
        sql_error(b.block(&p, None, "stop", Some(run), T0 + 3))
    });
    fails_whole(s, &b, &p, "reclaimed", || {
        sql_error(b.reclaim(&p, None, T0 + 3))
    });
    fails_whole(s, &b, &p, "commented", || {
        sql_error(b.comment(&p, "a", "body", T0 + 3))
    });
    fails_whole(s, &b, &c, "unlinked", || {
        sql_error(b.unlink(&p, &c, T0 + 3))
    });
    assert!(b.complete(&p, &done, T0 + 4).unwrap().is_done());
    assert_eq!(status(&b, &c), Status::Ready);
    fails_whole(s, &b, &p, "status", || {
        sql_error(b.reopen(&p, None, T0 + 5))
    });
    assert_eq!(status(&b, &c), Status::Ready);
    assert_clean(&b);
}
