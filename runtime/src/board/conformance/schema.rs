use super::tamper;
use super::*;

pub(crate) fn reopening_is_a_no_op_and_newer_schema_is_refused(s: &dyn Store) {
    let (d, board) = s.board();
    let id = create(&board, "kept");
    let version = board.conn().schema_version().unwrap();
    assert!(version > 0, "a fresh board records its schema version");
    drop(board);
    let again = d.reopen(&OpenOptions::default()).unwrap();
    assert_eq!(again.conn().schema_version().unwrap(), version);
    assert_eq!(again.get_task(&id).unwrap().title, "kept");
    assert_eq!(kinds(&again, &id), ["created"]);
    tamper::set_schema_version(&again, 99);
    drop(again);
    let err = d.reopen(&OpenOptions::default()).unwrap_err();
    assert!(
        matches!(err, BoardError::SchemaTooNew { found: 99, .. }),
        "{err}"
    );
}

pub(crate) fn body_error_rolls_back_and_nesting_is_refused(s: &dyn Store) {
    let (_dir, board) = s.board();
    let r: Result<()> = board.write(|tx| {
        tx.execute(
            "INSERT INTO task_comments (task_id, author, body, created_at) VALUES ('t', 'a', 'b', 0)",
            [],
        )?;
        Err(BoardError::BlankTitle)
    });
    assert!(matches!(r, Err(BoardError::BlankTitle)));
    let n: i64 = board
        .conn()
        .query_row("SELECT COUNT(*) FROM task_comments", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    let nested: Result<Result<()>> = board.write(|_tx| Ok(board.write(|_inner| Ok(()))));
    assert!(matches!(nested, Ok(Err(BoardError::NestedWrite))));
    assert!(board.conn().is_autocommit());
}
