use super::tamper;
use super::*;
use kanban_runtime::board::StorageError;

pub(crate) fn reopening_is_a_no_op_and_newer_schema_is_refused(s: &dyn Store) {
    let (d, board) = s.board();
    let id = create(&board, "kept");
    let version = sql(&board).schema_version().unwrap();
    assert!(version > 0, "a fresh board records its schema version");
    drop(board);
    let again = d.reopen(&OpenOptions::default()).unwrap();
    assert_eq!(sql(&again).schema_version().unwrap(), version);
    assert_eq!(again.get_task(&id).unwrap().title, "kept");
    assert_eq!(kinds(&again, &id), ["created"]);
    tamper::set_schema_version(&again, 99);
    drop(again);
    let err = d.reopen(&OpenOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            BoardError::Storage(StorageError::SchemaTooNew { found: 99, .. })
        ),
        "{err}"
    );
}

pub(crate) fn body_error_rolls_back_and_nesting_is_refused(s: &dyn Store) {
    let (_dir, board) = s.board();
    let r: Result<()> = write(&board, |tx| {
        tx.execute(
            "INSERT INTO task_comments (task_id, author, body, created_at) VALUES ('t', 'a', 'b', 0)",
            &[],
        )?;
        Err(BoardError::BlankTitle)
    });
    assert!(matches!(r, Err(BoardError::BlankTitle)));
    let n = sql(&board)
        .rows("SELECT COUNT(*) FROM task_comments", &[], 1)
        .unwrap();
    assert_eq!(n, [[kanban_runtime::db::Value::Integer(0)]]);
    let nested: Result<Result<()>> = write(&board, |_tx| Ok(write(&board, |_inner| Ok(()))));
    assert!(matches!(
        nested,
        Ok(Err(BoardError::Storage(StorageError::NestedWrite)))
    ));
    assert!(sql(&board).is_autocommit());
}

pub(crate) fn a_read_only_open_reads_and_refuses_every_write(s: &dyn Store) {
    let (d, board) = s.board();
    let id = create(&board, "t");
    drop(board);
    let ro = d.reopen(&OpenOptions::read_only()).unwrap();
    assert!(ro.is_read_only());
    assert_eq!(ro.list_tasks(&TaskFilter::default()).unwrap().len(), 1);
    assert_eq!(kinds(&ro, &id), ["created"]);
    // Each store says it in its own words (a file and its folder; a PostgreSQL session).
    let read_only = |err: &BoardError| {
        matches!(err, BoardError::Storage(StorageError::ReadOnly { .. }))
            || matches!(
                err,
                BoardError::Storage(StorageError::PgReadOnly {
                    by_server: false,
                    ..
                })
            )
    };
    let err = ro.create_task(&new("u"), T0).unwrap_err();
    assert!(read_only(&err), "{err}");
    let err = ro.comment(&id, "a", "b", T0).unwrap_err();
    assert!(read_only(&err), "{err}");
    drop(ro);
    let rw = d.reopen(&OpenOptions::default()).unwrap();
    assert_eq!(rw.list_tasks(&TaskFilter::default()).unwrap().len(), 1);
    assert!(rw.comments(&id).unwrap().is_empty());
}

pub(crate) fn another_connection_sees_each_commit_and_loses_a_claim_already_taken(s: &dyn Store) {
    let (d, a) = s.board();
    let other = d.reopen(&OpenOptions::default()).unwrap();
    let id = create(&a, "t");
    let seen = other.data_version().unwrap();
    assert_eq!(other.get_task(&id).unwrap().title, "t");
    claim(&a, &id);
    assert_ne!(
        other.data_version().unwrap(),
        seen,
        "another connection's commit changes the data version"
    );
    assert!(matches!(
        other.claim(&id, &spec("host:2"), T0).unwrap(),
        ClaimOutcome::Lost(Refusal::WrongStatus {
            status: Status::Running,
            ..
        })
    ));
    let free = create(&other, "free");
    assert_eq!(status(&a, &free), Status::Ready);
    let before = a.data_version().unwrap();
    assert!(matches!(
        a.claim(&free, &spec("host:1"), T0).unwrap(),
        ClaimOutcome::Claimed(_)
    ));
    assert_eq!(
        a.data_version().unwrap(),
        before,
        "a connection's own commit does not"
    );
    assert_eq!(
        other.get_task(&free).unwrap().claim_lock.as_deref(),
        Some("host:1")
    );
    assert_eq!(a.runs(&id).unwrap().len(), 1);
    assert_clean(&other);
}

pub(crate) fn the_change_watch_wakes_on_another_connections_commit_once(s: &dyn Store) {
    use std::time::Duration;
    const LONG: Duration = Duration::from_secs(120);
    let (d, watcher) = s.board();
    let writer = d.reopen(&OpenOptions::default()).unwrap();
    let mut watch = watcher.watch_changes();
    assert!(watch.is_notifying());
    create(&writer, "first");
    assert_eq!(watch.wait(&watcher, LONG, LONG).unwrap(), Wake::Notified);
    // Reported once: nothing new since.
    assert_eq!(
        watch.wait(&watcher, Duration::ZERO, LONG).unwrap(),
        Wake::TimedOut
    );
    create(&writer, "second");
    watch.mark_seen(&watcher).unwrap();
    assert_eq!(
        watch.wait(&watcher, Duration::ZERO, LONG).unwrap(),
        Wake::TimedOut,
        "a change marked as seen is not reported"
    );
    create(&writer, "third");
    assert!(
        watch
            .wait(&watcher, LONG, Duration::from_millis(1))
            .unwrap()
            .changed()
    );
}

pub(crate) fn a_write_while_another_connection_writes_gives_up_after_the_busy_timeout(
    s: &dyn Store,
) {
    let (d, holder) = s.board();
    let contender = d
        .reopen(&OpenOptions {
            busy_timeout_ms: Some(30),
            ..OpenOptions::default()
        })
        .unwrap();
    let id = create(&holder, "t");
    // The contender tries to archive while the holder's write transaction is open (not to
    // claim: a PostgreSQL claim takes no board write lock, see `pg_store`'s tests).
    // The holder's transaction reads first: a PostgreSQL transaction takes the board's write
    // lock with its first statement.
    let inner = write(&holder, |tx| {
        tx.load_task(&id)?;
        Ok(contender.archive(&id, T0))
    })
    .unwrap();
    let err = inner.unwrap_err();
    assert!(
        matches!(
            err,
            BoardError::Storage(StorageError::Busy { timeout_ms: 30, .. })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("30 ms"), "{err}");
    assert!(sql(&contender).is_autocommit());
    assert_eq!(status(&contender, &id), Status::Ready);
    assert!(contender.runs(&id).unwrap().is_empty());
    // Once the holder committed, the same write goes through.
    assert!(matches!(
        contender.archive(&id, T0).unwrap(),
        kanban_runtime::board::Outcome::Done(_)
    ));
    assert_clean(&holder);
}
