//! The SQL layer's PostgreSQL backend (`db::postgres`) against a real server (the test
//! process's shared `kanban_pgwire::cluster::TestCluster`): the common dialect's statements,
//! transactions, the change counter and its notification, lock waits, and the writes queued to
//! travel with the next statement. The translation and the error classification, which need no
//! server, stay with the module's unit tests.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup is a failed test

use kanban_pgwire::Value;
use kanban_runtime::db::target::{PgTarget, UrlSource};
use kanban_runtime::db::{Error, ErrorKind};
use kanban_runtime::test_support::{self, Connection, is_queued_statement};

/// A fresh database `name` on the test process's throwaway cluster, through the layer, and a
/// second connection to it.
fn db(name: &str) -> (Connection, kanban_pgwire::Client) {
    let cluster = kanban_pgwire::cluster::TestCluster::shared().expect("the test cluster starts");
    cluster
        .create_database(name)
        .expect("create the test database");
    let target = PgTarget::parse(&cluster.url(name), UrlSource::Argument("--url")).unwrap();
    let layer = test_support::postgres_connection(&target).expect("connect");
    let other = cluster.connect(name).expect("connect a second time");
    (layer, other)
}

#[test]
fn statements_of_the_common_dialect_run_on_postgresql() {
    let (conn, _other) = db("sql_layer_statements");
    let db = conn.sql();
    db.execute_batch(
        "CREATE TABLE t (id bigserial PRIMARY KEY, name text UNIQUE, n bigint, \
         lock text, payload text)",
    )
    .unwrap();
    let payload = r#"{"source_status": "review", "x": {"y": 2}}"#;
    let insert = "INSERT INTO t (name, n, lock, payload) VALUES (?1, ?2, ?3, ?4) RETURNING id";
    let a: i64 = db
        .query_row_cached(insert, &[&"a", &1, &None::<String>, &payload], 0)
        .unwrap();
    let b: i64 = db
        .query_row_cached(insert, &[&"b", &2, &"host:1", &"{}"], 0)
        .unwrap();
    assert_eq!((a, b), (1, 2));
    // `IS ?N` matches NULL to NULL, as SQLite's `IS` does.
    let unlocked: i64 = db
        .query_row("SELECT id FROM t WHERE lock IS ?1", &[&None::<String>], 0)
        .unwrap();
    assert_eq!(unlocked, a);
    let others: Vec<i64> = db
        .column_named(
            "SELECT id FROM t WHERE lock IS NOT ?1 ORDER BY id",
            &[&"host:1"],
            "id",
        )
        .unwrap();
    assert_eq!(others, [a]);
    let extract = "SELECT json_extract(payload, '$.source_status'), json_extract(payload, '$.x.y') \
                   FROM t WHERE id = ?1";
    let (status, nested): (String, String) = (
        db.query_row(extract, &[&a], 0).unwrap(),
        db.query_row(extract, &[&a], 1).unwrap(),
    );
    assert_eq!((status.as_str(), nested.as_str()), ("review", "2"));
    // A conflict that does nothing returns no row.
    let again = db
        .query_row_optional::<i64>(
            "INSERT INTO t (name, n) VALUES (?1, 3) ON CONFLICT DO NOTHING RETURNING id",
            &[&"a"],
            0,
        )
        .unwrap();
    assert_eq!(again, None);
    let returning = "INSERT INTO t (name, n) VALUES (?1, 4) ON CONFLICT DO NOTHING RETURNING id";
    let c = db.insert_returning_id(returning, &[&"c"]).unwrap();
    assert!(c > b, "{c}");
    let err = db.insert_returning_id(returning, &[&"c"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NoRows);
    let err = db
        .execute("INSERT INTO t (name, n) VALUES (?1, 3)", &[&"a"])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UniqueViolation, "{err}");
    assert_eq!(
        db.execute("UPDATE t SET n = n + 1 WHERE n >= ?1", &[&1])
            .unwrap(),
        3
    );
    let err = db
        .query_row::<String>("SELECT name FROM t WHERE id = ?1", &[&99], 0)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NoRows);
    // A value `FromSql` refuses is the vocabulary's error, as on SQLite.
    let err = db
        .query_row::<i64>("SELECT name FROM t WHERE id = ?1", &[&a], 0)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other);
    assert!(matches!(
        err,
        Error::Sqlite(rusqlite::Error::InvalidColumnType(0, ..))
    ));
}

#[test]
fn transactions_versions_and_lock_waits_on_postgresql() {
    let (conn, mut other) = db("sql_layer_transactions");
    let db = conn.sql();
    db.execute_batch(
        "CREATE TABLE t (id bigint PRIMARY KEY, n bigint); \
         CREATE SEQUENCE kanban_change_seq",
    )
    .unwrap();
    db.execute("INSERT INTO t VALUES (1, 0)", &[]).unwrap();
    assert!(db.is_autocommit());
    db.begin_immediate().unwrap();
    assert!(!db.is_autocommit());
    db.execute("UPDATE t SET n = 1 WHERE id = 1", &[]).unwrap();
    db.commit().unwrap();
    db.begin_immediate().unwrap();
    db.execute("UPDATE t SET n = 2 WHERE id = 1", &[]).unwrap();
    db.rollback();
    assert!(db.is_autocommit());
    let n: i64 = db.query_row("SELECT n FROM t", &[], 0).unwrap();
    assert_eq!(n, 1);

    assert_eq!(db.schema_version().unwrap(), 0);
    db.set_schema_version(3).unwrap();
    db.set_schema_version(4).unwrap();
    assert_eq!(db.schema_version().unwrap(), 4);
    assert!(db.quick_check().unwrap().is_empty());
    // The change counter: this connection's own commits do not move it, another's do.
    let seen = db.data_version().unwrap();
    db.begin_immediate().unwrap();
    db.execute("UPDATE t SET n = 3 WHERE id = 1", &[]).unwrap();
    db.commit().unwrap();
    assert_eq!(db.data_version().unwrap(), seen);
    other.batch("LISTEN kanban_board_changed").unwrap();
    other
        .batch(
            "BEGIN; SELECT pg_advisory_xact_lock(1262638897); COMMIT; \
             SELECT nextval('kanban_change_seq')",
        )
        .unwrap();
    assert_eq!(db.data_version().unwrap(), seen + 1);
    // A transaction that changed nothing is not a change (and notifies nobody).
    db.begin_immediate().unwrap();
    db.execute("UPDATE t SET n = 9 WHERE id = 42", &[]).unwrap();
    db.commit().unwrap();
    assert_eq!(db.data_version().unwrap(), seen + 1);
    // (The test server commits without waiting for the disk; this session does.)
    db.execute_batch("SET synchronous_commit = on").unwrap();
    db.begin_immediate().unwrap();
    db.execute("UPDATE t SET n = 1 WHERE id = 1", &[]).unwrap();
    db.commit().unwrap();
    let note = other
        .wait_notification(std::time::Duration::from_secs(10))
        .unwrap()
        .expect("the commit notified the watchers");
    assert_eq!(note.channel, test_support::POSTGRES_CHANGE_CHANNEL);
    assert_eq!(
        other.wait_notification(std::time::Duration::ZERO).unwrap(),
        None,
        "one change, one notification"
    );
    // The `NOTIFY` went after the commit, in a transaction of its own that did not wait for
    // the disk; the session itself still commits durably.
    let sync: String = db.query_row("SHOW synchronous_commit", &[], 0).unwrap();
    assert_eq!(sync, "on");
    // A claim's transaction (no board lock) moves the counter but wakes nobody.
    let counter = |c: &mut kanban_pgwire::Client| {
        c.query_one("SELECT last_value FROM kanban_change_seq", &[])
            .unwrap()
            .get(0)
            .and_then(Value::as_i64)
            .unwrap()
    };
    let seen_by_other = counter(&mut other);
    db.begin_claim().unwrap();
    db.execute("UPDATE t SET n = 2 WHERE id = 1", &[]).unwrap();
    db.commit().unwrap();
    assert_eq!(
        counter(&mut other),
        seen_by_other + 1,
        "the claim's change is counted"
    );
    assert_eq!(
        other
            .wait_notification(std::time::Duration::from_millis(200))
            .unwrap(),
        None,
        "a claim's change notifies nobody"
    );
    // The next locked transaction notifies again.
    db.begin_immediate().unwrap();
    db.execute("UPDATE t SET n = 1 WHERE id = 1", &[]).unwrap();
    db.commit().unwrap();
    assert!(
        other
            .wait_notification(std::time::Duration::from_secs(10))
            .unwrap()
            .is_some(),
        "a locked transaction's change notifies"
    );

    // A row another connection holds: the lock wait runs out with a busy error.
    other.batch("BEGIN").unwrap();
    other
        .execute("UPDATE t SET n = 5 WHERE id = 1", &[])
        .unwrap();
    db.set_lock_wait(std::time::Duration::from_millis(50))
        .unwrap();
    let err = db
        .execute("UPDATE t SET n = 6 WHERE id = 1", &[])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
    other.batch("ROLLBACK").unwrap();
    assert_eq!(
        db.execute("UPDATE t SET n = 6 WHERE id = 1", &[]).unwrap(),
        1
    );
    // Writers run one at a time: while another holds the board's write lock, a write
    // transaction's first statement (which carries its `BEGIN` and the lock) waits and
    // gives up busy after the lock wait; the rollback leaves no transaction open.
    other.batch("BEGIN").unwrap();
    other
        .execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[Value::Int(test_support::POSTGRES_WRITE_LOCK)],
        )
        .unwrap();
    db.begin_immediate().unwrap();
    assert!(!db.is_autocommit(), "begun, though nothing was sent yet");
    let err = db
        .execute("UPDATE t SET n = 7 WHERE id = 1", &[])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
    db.rollback();
    assert!(db.is_autocommit());
    let n: i64 = db
        .query_row("SELECT n FROM t WHERE id = 1", &[], 0)
        .unwrap();
    assert_eq!(n, 6, "the waiting write changed nothing");
    other.batch("COMMIT").unwrap();
    db.begin_immediate().unwrap();
    assert_eq!(
        db.execute("UPDATE t SET n = 7 WHERE id = 1", &[]).unwrap(),
        1
    );
    db.commit().unwrap();
    // A transaction that sent nothing commits (and rolls back) without a round trip.
    db.begin_immediate().unwrap();
    db.commit().unwrap();
    assert!(db.is_autocommit());
}

#[test]
fn unchecked_writes_travel_with_the_next_statement_and_fail_the_transaction() {
    let (conn, _other) = db("sql_layer_unchecked");
    let db = conn.sql();
    db.execute_batch(
        "CREATE TABLE t (id bigint PRIMARY KEY); \
         CREATE SEQUENCE kanban_change_seq",
    )
    .unwrap();
    // Outside a transaction: run at once.
    db.execute_unchecked("INSERT INTO t VALUES (?1)", &[&1_i64])
        .unwrap();
    let n: i64 = db.query_row("SELECT count(*) FROM t", &[], 0).unwrap();
    assert_eq!(n, 1);
    // Inside: queued, sent with the next query (which sees it) and committed.
    db.begin_immediate().unwrap();
    db.execute_unchecked("INSERT INTO t VALUES (?1)", &[&2_i64])
        .unwrap();
    let n: i64 = db.query_row("SELECT count(*) FROM t", &[], 0).unwrap();
    assert_eq!(n, 2);
    db.execute_unchecked("INSERT INTO t VALUES (?1)", &[&3_i64])
        .unwrap();
    db.commit().unwrap();
    assert!(db.is_autocommit());
    let n: i64 = db.query_row("SELECT count(*) FROM t", &[], 0).unwrap();
    assert_eq!(n, 3);
    // A queued write that fails is reported by the commit as the statement's error, and
    // nothing of the transaction is kept.
    db.begin_immediate().unwrap();
    db.execute("INSERT INTO t VALUES (4)", &[]).unwrap();
    db.execute_unchecked("INSERT INTO t VALUES (?1)", &[&1_i64])
        .unwrap();
    let err = db.commit().unwrap_err();
    assert!(is_queued_statement(&err), "{err}");
    assert_eq!(err.kind(), ErrorKind::UniqueViolation, "{err}");
    db.rollback();
    assert!(db.is_autocommit());
    let n: i64 = db.query_row("SELECT count(*) FROM t", &[], 0).unwrap();
    assert_eq!(n, 3);
    // Reported by the next statement instead; a commit after it commits nothing.
    db.begin_immediate().unwrap();
    db.execute("INSERT INTO t VALUES (5)", &[]).unwrap();
    db.execute_unchecked("INSERT INTO t VALUES (?1)", &[&1_i64])
        .unwrap();
    let err = db.execute("INSERT INTO t VALUES (6)", &[]).unwrap_err();
    assert!(is_queued_statement(&err), "{err}");
    let err = db.commit().unwrap_err();
    assert!(matches!(err, Error::Aborted), "{err}");
    db.rollback();
    let n: i64 = db.query_row("SELECT count(*) FROM t", &[], 0).unwrap();
    assert_eq!(n, 3);
    // `sync` reports it too; its own statement's failure is not a queued one.
    db.begin_immediate().unwrap();
    db.execute_unchecked("INSERT INTO t VALUES (?1)", &[&1_i64])
        .unwrap();
    assert!(is_queued_statement(&db.sync().unwrap_err()));
    db.rollback();
    let err = db.execute("INSERT INTO t VALUES (1)", &[]).unwrap_err();
    assert!(!is_queued_statement(&err), "{err}");
}
