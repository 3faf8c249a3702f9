//! The client against a real server: a throwaway cluster shared by this test binary (each test
//! uses its own database).

use std::time::{Duration, Instant};

use kanban_pgwire::cluster::TestCluster;
use kanban_pgwire::{Client, Config, Error, TransactionStatus, Value};

/// A fresh database `name` on the shared cluster and a superuser connection to it.
fn fresh_db(name: &str) -> Client {
    let cluster = TestCluster::shared().expect("the test cluster starts");
    cluster
        .create_database(name)
        .expect("create the test database");
    cluster.connect(name).expect("connect to the test database")
}

#[test]
fn connects_over_the_unix_socket_with_trust() {
    let mut c = fresh_db("connect_trust");
    let row = c
        .query_one(
            "SELECT current_user, current_database(), pg_backend_pid()",
            &[],
        )
        .unwrap();
    assert_eq!(row.get(0), Some(&Value::Text("postgres".into())));
    assert_eq!(
        row.get_by_name("current_database"),
        Some(&Value::Text("connect_trust".into()))
    );
    assert_eq!(row.get(2), Some(&Value::Int(i64::from(c.backend_pid()))));
    assert!(c.server_parameter("server_version").is_some());
    assert_eq!(c.server_parameter("client_encoding"), Some("UTF8"));
    assert_eq!(c.transaction_status(), TransactionStatus::Idle);
    assert!(!c.is_closed());
}

#[test]
fn every_value_kind_round_trips_as_a_parameter() {
    let mut c = fresh_db("values");
    c.batch(
        "CREATE TABLE v (id int4 PRIMARY KEY, i int8, s int2, r float8, n numeric, t text, \
         b bytea, flag boolean, at timestamptz)",
    )
    .unwrap();
    let big = "long text ✓ ".repeat(100_000);
    let all_bytes: Vec<u8> = (0..=255).collect();
    let rows: Vec<[Value; 6]> = vec![
        [
            Value::Int(1),
            Value::Int(i64::MAX),
            Value::Real(0.1),
            Value::Text("héllo wörld ✓ 🦀 \"'\\".into()),
            Value::Blob(all_bytes.clone()),
            Value::Text("t".into()),
        ],
        [
            Value::Int(2),
            Value::Int(i64::MIN),
            Value::Real(-1.5e300),
            Value::Text(big.clone()),
            Value::Blob(Vec::new()),
            Value::Text("false".into()),
        ],
        [
            Value::Int(3),
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
        ],
        [
            Value::Int(4),
            Value::Int(0),
            Value::Real(f64::INFINITY),
            Value::Text(String::new()),
            Value::Blob(vec![0]),
            Value::Int(1),
        ],
    ];
    for r in &rows {
        // An Int into a boolean column needs a cast (Int is sent as int8); Text is inferred.
        let flag_sql = if matches!(r[5], Value::Int(_)) {
            "$6::int4::bool"
        } else {
            "$6"
        };
        let n = c
            .execute(
                &format!(
                    "INSERT INTO v (id, i, r, t, b, flag) VALUES ($1, $2, $3, $4, $5, {flag_sql})"
                ),
                r,
            )
            .unwrap();
        assert_eq!(n, 1);
    }
    let got = c
        .query("SELECT id, i, r, t, b, flag FROM v ORDER BY id", &[])
        .unwrap();
    assert_eq!(got.len(), 4);
    let want_flags = [Value::Int(1), Value::Int(0), Value::Null, Value::Int(1)];
    for ((row, sent), flag) in got.iter().zip(&rows).zip(want_flags) {
        assert_eq!(&row.values()[..5], &sent[..5]);
        assert_eq!(row.get(5), Some(&flag));
    }
    let names: Vec<&str> = got[0].columns().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["id", "i", "r", "t", "b", "flag"]);
    assert_eq!(got[0].columns()[1].type_oid, kanban_pgwire::oid::INT8);

    // Other column types: int2 and numeric read as numbers, timestamptz as text.
    let row = c
        .query_one(
            "SELECT 7::int2, 2.50::numeric, 'NaN'::float8, $1::timestamptz, NULL::int8, $2::text IS NULL",
            &[Value::Text("2026-01-02 03:04:05+00".into()), Value::Null],
        )
        .unwrap();
    assert_eq!(row.get(0), Some(&Value::Int(7)));
    assert_eq!(row.get(1), Some(&Value::Real(2.5)));
    assert!(row.get(2).and_then(Value::as_f64).is_some_and(f64::is_nan));
    assert_eq!(
        row.get(3),
        Some(&Value::Text("2026-01-02 03:04:05+00".into()))
    );
    assert_eq!(row.get(4), Some(&Value::Null));
    assert_eq!(row.get(5), Some(&Value::Int(1)));
    // A parameter echoed back keeps its kind.
    let row = c
        .query_one(
            "SELECT $1, $2, $3, $4",
            &[
                Value::Int(-9),
                Value::Real(2.25),
                "x".into(),
                Value::Blob(vec![1, 2]),
            ],
        )
        .unwrap();
    assert_eq!(
        row.values(),
        [
            Value::Int(-9),
            Value::Real(2.25),
            Value::Text("x".into()),
            Value::Blob(vec![1, 2])
        ]
    );
}

#[test]
fn rows_affected_and_row_count_helpers() {
    let mut c = fresh_db("affected");
    c.batch("CREATE TABLE t (id int8 PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 5)")
        .unwrap();
    assert_eq!(
        c.execute("UPDATE t SET id = id + 10 WHERE id > $1", &[Value::Int(2)])
            .unwrap(),
        3
    );
    assert_eq!(
        c.execute("DELETE FROM t WHERE id = $1", &[Value::Int(999)])
            .unwrap(),
        0
    );
    assert!(
        c.query_opt("SELECT id FROM t WHERE id = $1", &[Value::Int(999)])
            .unwrap()
            .is_none()
    );
    assert_eq!(
        c.query_opt("SELECT id FROM t WHERE id = $1", &[Value::Int(1)])
            .unwrap()
            .unwrap()
            .get(0),
        Some(&Value::Int(1))
    );
    let err = c.query_one("SELECT id FROM t", &[]).unwrap_err();
    assert!(matches!(err, Error::RowCount { got: 5, .. }), "{err:?}");
    let err = c.query_opt("SELECT id FROM t", &[]).unwrap_err();
    assert!(matches!(err, Error::RowCount { got: 5, .. }), "{err:?}");
    assert!(matches!(
        c.query_one("SELECT 1 WHERE false", &[]).unwrap_err(),
        Error::RowCount { got: 0, .. }
    ));
    // A wrong number of parameters is the server's error and leaves the client usable.
    let err = c.query("SELECT $1::int8", &[]).unwrap_err();
    assert_eq!(err.code(), Some("08P01"), "{err}");
    assert_eq!(
        c.query_one("SELECT 1", &[]).unwrap().get(0),
        Some(&Value::Int(1))
    );
}

#[test]
fn a_unique_violation_reports_sqlstate_23505() {
    let mut c = fresh_db("unique");
    c.batch("CREATE TABLE u (k text CONSTRAINT u_k UNIQUE)")
        .unwrap();
    c.execute("INSERT INTO u VALUES ($1)", &["a".into()])
        .unwrap();
    let err = c
        .execute("INSERT INTO u VALUES ($1)", &["a".into()])
        .unwrap_err();
    assert!(err.is_unique_violation(), "{err}");
    assert!(!err.is_serialization_failure());
    assert_eq!(err.code(), Some("23505"));
    let db = err.as_db().unwrap();
    assert_eq!(db.severity, "ERROR");
    assert_eq!(db.constraint.as_deref(), Some("u_k"));
    assert_eq!(db.table.as_deref(), Some("u"));
    assert!(
        db.detail.as_deref().is_some_and(|d| d.contains("(k)=(a)")),
        "{db:?}"
    );
    assert!(err.to_string().contains("23505"), "{err}");
    assert_eq!(c.transaction_status(), TransactionStatus::Idle);
    assert_eq!(
        c.execute("INSERT INTO u VALUES ($1)", &["b".into()])
            .unwrap(),
        1
    );

    let err = c
        .batch("DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$")
        .unwrap_err();
    assert!(err.is_serialization_failure(), "{err}");
}

#[test]
fn an_error_inside_a_transaction_then_rollback_leaves_the_client_usable() {
    let mut c = fresh_db("tx_error");
    c.batch("CREATE TABLE t (id int8 PRIMARY KEY)").unwrap();
    c.batch("BEGIN").unwrap();
    assert_eq!(c.transaction_status(), TransactionStatus::InTransaction);
    c.execute("INSERT INTO t VALUES ($1)", &[Value::Int(1)])
        .unwrap();
    let err = c
        .execute("INSERT INTO t VALUES ($1)", &[Value::Int(1)])
        .unwrap_err();
    assert!(err.is_unique_violation());
    assert_eq!(c.transaction_status(), TransactionStatus::Failed);
    let err = c.query("SELECT count(*) FROM t", &[]).unwrap_err();
    assert_eq!(err.code(), Some("25P02"), "{err}");
    c.batch("ROLLBACK").unwrap();
    assert_eq!(c.transaction_status(), TransactionStatus::Idle);
    let row = c.query_one("SELECT count(*) FROM t", &[]).unwrap();
    assert_eq!(
        row.get(0),
        Some(&Value::Int(0)),
        "the insert was rolled back"
    );

    // A committed transaction through execute() as well.
    c.execute("BEGIN", &[]).unwrap();
    c.execute("INSERT INTO t VALUES ($1)", &[Value::Int(2)])
        .unwrap();
    c.execute("COMMIT", &[]).unwrap();
    assert_eq!(
        c.query_one("SELECT count(*) FROM t", &[]).unwrap().get(0),
        Some(&Value::Int(1))
    );

    // batch() stops at the first error and reports it.
    let err = c
        .batch("INSERT INTO t VALUES (3); SELECT nope; INSERT INTO t VALUES (4)")
        .unwrap_err();
    assert_eq!(err.code(), Some("42703"), "{err}");
    assert_eq!(
        c.query_one("SELECT count(*) FROM t", &[]).unwrap().get(0),
        Some(&Value::Int(1))
    );
}

#[test]
fn the_statement_cache_prepares_a_statement_once_and_evicts_the_oldest() {
    let mut c = fresh_db("stmt_cache");
    let before = c.cache_stats();
    for i in 0..50 {
        let row = c
            .query_one("SELECT $1::int8 + 1", &[Value::Int(i)])
            .unwrap();
        assert_eq!(row.get(0), Some(&Value::Int(i + 1)));
    }
    let after = c.cache_stats();
    assert_eq!(after.misses - before.misses, 1);
    assert_eq!(after.hits - before.hits, 49);
    let rows = c
        .query(
            "SELECT name FROM pg_prepared_statements WHERE statement = $1",
            &["SELECT $1::int8 + 1".into()],
        )
        .unwrap();
    assert_eq!(rows.len(), 1, "one server-side statement for the hot query");

    c.set_statement_cache_capacity(3);
    for sql in ["SELECT 'a'", "SELECT 'b'", "SELECT 'c'"] {
        c.query(sql, &[]).unwrap();
    }
    // This query is the fourth statement: preparing it closes the least recently used one.
    let live: Vec<String> = c
        .query(
            "SELECT statement FROM pg_prepared_statements ORDER BY statement",
            &[],
        )
        .unwrap()
        .into_iter()
        .map(|r| r.get(0).and_then(Value::as_str).unwrap().to_string())
        .collect();
    assert_eq!(live.len(), 3, "{live:?}");
    assert!(!live.iter().any(|s| s == "SELECT 'a'"), "{live:?}");
    assert!(live.iter().any(|s| s == "SELECT 'c'"), "{live:?}");
    assert_eq!(c.cache_stats().len, 3);

    // A cached statement whose result changed shape, or that the server dropped, is prepared
    // again transparently outside a transaction.
    c.batch("CREATE TABLE s (a int8)").unwrap();
    c.execute("INSERT INTO s VALUES ($1)", &[Value::Int(1)])
        .unwrap();
    assert_eq!(c.query_one("SELECT * FROM s", &[]).unwrap().len(), 1);
    c.batch("ALTER TABLE s ADD COLUMN b text DEFAULT 'x'")
        .unwrap();
    let row = c.query_one("SELECT * FROM s", &[]).unwrap();
    assert_eq!(row.values(), [Value::Int(1), Value::Text("x".into())]);
    c.batch("DISCARD ALL").unwrap();
    assert_eq!(c.query_one("SELECT * FROM s", &[]).unwrap().len(), 2);
}

#[test]
fn wait_notification_returns_none_when_nothing_arrives_in_time() {
    let mut c = fresh_db("notify_timeout");
    c.listen("quiet").unwrap();
    let timeout = Duration::from_millis(300);
    let started = Instant::now();
    assert_eq!(c.wait_notification(timeout).unwrap(), None);
    // A lower bound only: the call waited instead of returning at once.
    assert!(started.elapsed() >= timeout);
    assert!(!c.is_closed());
    assert_eq!(
        c.query_one("SELECT 1", &[]).unwrap().get(0),
        Some(&Value::Int(1))
    );
}

#[test]
fn a_notification_from_another_session_is_delivered_with_its_payload() {
    let mut listener = fresh_db("notify_deliver");
    let cluster = TestCluster::shared().unwrap();
    let mut sender = cluster.connect("notify_deliver").unwrap();
    listener.listen("Board Events").unwrap();
    sender
        .execute(
            "SELECT pg_notify($1, $2)",
            &["Board Events".into(), "task 7 ✓".into()],
        )
        .unwrap();
    let n = listener
        .wait_notification(Duration::from_secs(60))
        .unwrap()
        .expect("a notification");
    assert_eq!(n.channel, "Board Events");
    assert_eq!(n.payload, "task 7 ✓");
    assert_eq!(n.process_id, sender.backend_pid());
    // A zero timeout polls: it finds a notification that already arrived on the socket.
    sender.batch("NOTIFY \"Board Events\", 'polled'").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let polled = loop {
        if let Some(n) = listener.wait_notification(Duration::ZERO).unwrap() {
            break n;
        }
        assert!(Instant::now() < deadline, "the notification never arrived");
    };
    assert_eq!(polled.payload, "polled");
    listener.unlisten("Board Events").unwrap();
    sender.batch("NOTIFY \"Board Events\"").unwrap();
    assert_eq!(
        listener
            .wait_notification(Duration::from_millis(100))
            .unwrap(),
        None
    );
}

#[test]
fn notifications_arriving_during_a_query_are_buffered_and_returned_first() {
    let mut listener = fresh_db("notify_buffer");
    let cluster = TestCluster::shared().unwrap();
    let mut sender = cluster.connect("notify_buffer").unwrap();
    listener.listen("ch").unwrap();
    sender.batch("NOTIFY ch, 'one'; NOTIFY ch, 'two'").unwrap();
    sender.batch("NOTIFY ch, 'three'").unwrap();
    // The listener's session is idle, so the server sends them as soon as it is signalled;
    // the client reads them off the socket while it reads a query's answer and keeps them.
    // Queries (not sleeps) until all three are buffered, bounded against a broken server.
    let deadline = Instant::now() + Duration::from_secs(60);
    while listener.pending_notifications() < 3 {
        assert!(Instant::now() < deadline, "the notifications never arrived");
        assert_eq!(
            listener.query_one("SELECT 1", &[]).unwrap().get(0),
            Some(&Value::Int(1))
        );
    }
    // Handed out in order from the buffer, before anything new is read.
    for want in ["one", "two", "three"] {
        let n = listener
            .wait_notification(Duration::ZERO)
            .unwrap()
            .expect("buffered");
        assert_eq!(n.payload, want);
        assert_eq!(n.process_id, sender.backend_pid());
    }
    assert_eq!(listener.pending_notifications(), 0);

    sender.batch("NOTIFY ch, 'four'").unwrap();
    while listener.pending_notifications() < 1 {
        assert!(Instant::now() < deadline, "the notification never arrived");
        listener.execute("SELECT 1", &[]).unwrap();
    }
    let taken: Vec<String> = listener
        .take_notifications()
        .into_iter()
        .map(|n| n.payload)
        .collect();
    assert_eq!(taken, ["four"]);
    assert_eq!(
        listener
            .wait_notification(Duration::from_millis(50))
            .unwrap(),
        None
    );
}

#[test]
fn a_terminated_session_gives_an_error_not_a_hang_and_the_client_is_closed() {
    let mut victim = fresh_db("terminate");
    let cluster = TestCluster::shared().unwrap();
    let mut admin = cluster.connect("terminate").unwrap();
    victim.listen("x").unwrap();
    let pid = victim.backend_pid();
    admin
        .query_one(
            "SELECT pg_terminate_backend($1::int4)",
            &[Value::Int(pid.into())],
        )
        .unwrap();
    let err = victim
        .wait_notification(Duration::from_secs(60))
        .unwrap_err();
    assert!(
        err.code() == Some("57P01") || matches!(err, Error::Io { .. }),
        "a FATAL admin shutdown or the closed socket: {err:?}"
    );
    assert!(victim.is_closed());
    assert!(matches!(
        victim.query("SELECT 1", &[]).unwrap_err(),
        Error::Closed
    ));
    assert!(matches!(
        victim.wait_notification(Duration::ZERO).unwrap_err(),
        Error::Closed
    ));
}

#[test]
fn a_query_timeout_closes_the_connection_instead_of_waiting() {
    let mut c = fresh_db("query_timeout");
    c.set_query_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    assert_eq!(
        c.query_one("SELECT 1", &[]).unwrap().get(0),
        Some(&Value::Int(1))
    );
    // The server takes 60 s; the client gives up after its timeout.
    let err = c.execute("SELECT pg_sleep(60)", &[]).unwrap_err();
    let Error::Io { source, .. } = &err else {
        panic!("an I/O timeout, got {err:?}");
    };
    assert!(
        matches!(
            source.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{source:?}"
    );
    assert!(c.is_closed());
    assert!(matches!(c.batch("SELECT 1").unwrap_err(), Error::Closed));
}

#[test]
fn the_urls_read_timeout_bounds_every_statement_of_the_connection() {
    let cluster = TestCluster::shared().expect("the test cluster starts");
    cluster.create_database("read_timeout").unwrap();
    let config = Config::parse(&format!("{}?read_timeout=1", cluster.url("read_timeout"))).unwrap();
    assert_eq!(config.read_timeout(), Some(Duration::from_secs(1)));
    let mut c = Client::connect(&config).unwrap();
    // The server takes 60 s; the connection gives up after the URL's read timeout.
    let err = c.execute("SELECT pg_sleep(60)", &[]).unwrap_err();
    let Error::Io { source, .. } = &err else {
        panic!("an I/O timeout, got {err:?}");
    };
    assert!(
        matches!(
            source.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{source:?}"
    );
    assert!(err.to_string().contains("did not answer in time"), "{err}");
    assert!(c.is_closed());
}

#[test]
fn bad_statements_are_refused_before_anything_is_sent() {
    let mut c = fresh_db("bad_input");
    c.batch("CREATE TABLE t (id int8)").unwrap();
    let too_many = vec![Value::Int(1); 65_536];
    for err in [
        c.execute("INSERT INTO t VALUES (1)\0", &[]).unwrap_err(),
        c.batch("SELECT 1\0").unwrap_err(),
        c.listen("bad\0channel").unwrap_err(),
        c.listen("").unwrap_err(),
        c.execute("INSERT INTO t VALUES ($1)", &too_many)
            .unwrap_err(),
    ] {
        assert!(matches!(err, Error::Config(_)), "{err:?}");
    }
    // Nothing ran, and the connection is fine.
    assert!(!c.is_closed());
    assert_eq!(
        c.query_one("SELECT count(*) FROM t", &[]).unwrap().get(0),
        Some(&Value::Int(0))
    );
    // A NUL inside a text value reaches the server, which refuses it.
    let err = c.query("SELECT $1::text", &["a\0b".into()]).unwrap_err();
    assert_eq!(err.code(), Some("22021"), "{err}");
    assert_eq!(c.transaction_status(), TransactionStatus::Idle);
}

#[test]
fn queued_statements_run_in_order_with_the_next_statement_in_one_round_trip() {
    let mut c = fresh_db("pipeline_order");
    c.batch("CREATE TABLE log (seq bigserial PRIMARY KEY, v text NOT NULL)")
        .unwrap();
    c.batch("BEGIN").unwrap();
    for v in ["a", "b", "c"] {
        c.execute_deferred("INSERT INTO log (v) VALUES ($1)", &[Value::Text(v.into())])
            .unwrap();
    }
    assert_eq!(
        c.deferred(),
        3,
        "nothing is sent before a call needs an answer"
    );
    // The flushing statement runs after the queued ones and sees their rows, in order.
    let rows = c.query("SELECT v FROM log ORDER BY seq", &[]).unwrap();
    let got: Vec<_> = rows.iter().map(|r| r.get(0).cloned()).collect();
    assert_eq!(
        got,
        ["a", "b", "c"]
            .map(|v| Some(Value::Text(v.into())))
            .to_vec()
    );
    assert_eq!(c.deferred(), 0);
    assert!(!c.queued_failed());
    assert_eq!(c.transaction_status(), TransactionStatus::InTransaction);
    // Queued before a simple-protocol COMMIT: they go in its round trip and are committed.
    c.execute_deferred(
        "INSERT INTO log (v) VALUES ($1)",
        &[Value::Text("d".into())],
    )
    .unwrap();
    c.batch("COMMIT").unwrap();
    assert_eq!(c.transaction_status(), TransactionStatus::Idle);
    let n = c.query_one("SELECT count(*) FROM log", &[]).unwrap();
    assert_eq!(n.get(0), Some(&Value::Int(4)));
    // The prepared statement was cached once and reused by the later queued runs.
    let before = c.cache_stats();
    c.batch("BEGIN").unwrap();
    c.execute_deferred(
        "INSERT INTO log (v) VALUES ($1)",
        &[Value::Text("e".into())],
    )
    .unwrap();
    c.sync().unwrap();
    c.batch("COMMIT").unwrap();
    let after = c.cache_stats();
    assert_eq!(after.hits, before.hits + 1);
    assert_eq!(after.misses, before.misses);
}

#[test]
fn a_queued_failure_is_reported_by_the_flushing_call_and_fails_the_transaction() {
    let mut c = fresh_db("pipeline_error");
    c.batch("CREATE TABLE t (id bigint PRIMARY KEY)").unwrap();
    c.batch("INSERT INTO t VALUES (1)").unwrap();

    // Reported by the next extended-protocol statement, which the server then skipped.
    c.batch("BEGIN").unwrap();
    c.execute_deferred("INSERT INTO t VALUES ($1)", &[Value::Int(2)])
        .unwrap();
    c.execute_deferred("INSERT INTO t VALUES ($1)", &[Value::Int(1)])
        .unwrap();
    c.execute_deferred("INSERT INTO t VALUES ($1)", &[Value::Int(3)])
        .unwrap();
    let err = c
        .execute("INSERT INTO t VALUES ($1)", &[Value::Int(4)])
        .unwrap_err();
    match &err {
        Error::Db(db) => assert_eq!(db.code, "23505", "{err}"),
        other => panic!("expected the unique violation, got {other:?}"),
    }
    assert!(c.queued_failed(), "the error is the queued statement's");
    assert_eq!(c.transaction_status(), TransactionStatus::Failed);
    assert_eq!(c.deferred(), 0);
    c.batch("ROLLBACK").unwrap();
    let n = c.query_one("SELECT count(*) FROM t", &[]).unwrap();
    assert_eq!(
        n.get(0),
        Some(&Value::Int(1)),
        "nothing of the transaction kept"
    );
    assert!(!c.queued_failed(), "a later call's own outcome");

    // Reported by a simple-protocol COMMIT: nothing is committed.
    c.batch("BEGIN").unwrap();
    c.execute_deferred("INSERT INTO t VALUES ($1)", &[Value::Int(5)])
        .unwrap();
    c.execute_deferred("INSERT INTO t VALUES ($1)", &[Value::Int(1)])
        .unwrap();
    let err = c.batch("COMMIT").unwrap_err();
    assert!(matches!(&err, Error::Db(db) if db.code == "23505"), "{err}");
    assert!(c.queued_failed());
    // The server ended the failed transaction at COMMIT (a rollback).
    assert_eq!(c.transaction_status(), TransactionStatus::Idle);
    let n = c.query_one("SELECT count(*) FROM t", &[]).unwrap();
    assert_eq!(n.get(0), Some(&Value::Int(1)));

    // Reported by `sync`; the connection stays usable and the cache intact.
    c.batch("BEGIN").unwrap();
    c.execute_deferred("INSERT INTO t VALUES ($1)", &[Value::Int(1)])
        .unwrap();
    assert!(matches!(c.sync(), Err(Error::Db(_))));
    assert_eq!(c.transaction_status(), TransactionStatus::Failed);
    c.batch("ROLLBACK").unwrap();
    assert!(!c.is_closed());
    c.execute("INSERT INTO t VALUES ($1)", &[Value::Int(6)])
        .unwrap();
    let n = c.query_one("SELECT count(*) FROM t", &[]).unwrap();
    assert_eq!(n.get(0), Some(&Value::Int(2)));

    // A statement the server cannot parse fails the same way, and is not cached.
    c.batch("BEGIN").unwrap();
    c.execute_deferred("INSERT INTO nowhere VALUES ($1)", &[Value::Int(1)])
        .unwrap();
    let err = c.query("SELECT 1", &[]).unwrap_err();
    assert!(matches!(&err, Error::Db(db) if db.code == "42P01"), "{err}");
    assert_eq!(c.transaction_status(), TransactionStatus::Failed);
    c.batch("ROLLBACK").unwrap();
    let misses = c.cache_stats().misses;
    c.query("SELECT 1", &[]).unwrap();
    assert_eq!(
        c.cache_stats().misses,
        misses + 1,
        "the skipped SELECT is prepared afresh"
    );
}

#[test]
fn a_queued_statement_is_checked_before_it_is_queued() {
    let mut c = fresh_db("pipeline_checks");
    c.batch("BEGIN").unwrap();
    assert!(matches!(
        c.execute_deferred("SELECT '\0'", &[]),
        Err(Error::Config(_))
    ));
    assert_eq!(c.deferred(), 0, "a refused statement queues nothing");
    c.batch("COMMIT").unwrap();
}

#[test]
fn discarded_queued_statements_never_reach_the_server() {
    let mut c = fresh_db("pipeline_discard");
    c.batch("CREATE TABLE log (v text NOT NULL)").unwrap();
    c.set_statement_cache_capacity(2);
    let trips = c.round_trips();
    // A transaction queued whole (its BEGIN too), then given up: nothing is sent.
    c.execute_deferred("BEGIN", &[]).unwrap();
    for v in ["a", "b", "c"] {
        // Three texts through a cache of two: the first is evicted (its Close queued too).
        c.execute_deferred(
            &format!("INSERT INTO log (v) VALUES ($1) -- {v}"),
            &[Value::Text(v.into())],
        )
        .unwrap();
    }
    c.discard_deferred();
    assert_eq!(c.deferred(), 0);
    assert_eq!(c.round_trips(), trips, "nothing was sent");
    assert_eq!(c.transaction_status(), TransactionStatus::Idle);
    // The connection goes on as if they had never been queued; the evicted statement's
    // Close goes with the next message and the cache stays consistent.
    let n = c.query_one("SELECT count(*) FROM log", &[]).unwrap();
    assert_eq!(n.get(0), Some(&Value::Int(0)));
    assert_eq!(c.transaction_status(), TransactionStatus::Idle);
    for v in ["a", "b", "c", "a"] {
        c.execute(
            &format!("INSERT INTO log (v) VALUES ($1) -- {v}"),
            &[Value::Text(v.into())],
        )
        .unwrap();
    }
    let n = c.query_one("SELECT count(*) FROM log", &[]).unwrap();
    assert_eq!(n.get(0), Some(&Value::Int(4)));
    let prepared = c
        .query_one("SELECT count(*) FROM pg_prepared_statements", &[])
        .unwrap();
    assert_eq!(
        prepared.get(0),
        Some(&Value::Int(i64::try_from(c.cache_stats().len).unwrap())),
        "the server holds exactly the statements the cache names"
    );
}
