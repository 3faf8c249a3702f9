//! The PostgreSQL engine of a board against a real server (the test process's shared
//! `kanban_pgwire::cluster::TestCluster`): opening a board (the schema's extras, a database
//! without a board, the session settings), the locking of claims and heartbeats, a lost
//! connection said in PostgreSQL's words, the one-statement fast paths and their round trips,
//! and the change watch's `LISTEN`. The store-neutral behaviour is the conformance suite's
//! (`tests/conformance/`); what needs no server stays with its module's unit tests.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup is a failed test

use kanban_runtime::board::{
    Board, BoardError, ClaimOrigin, ClaimOutcome, ClaimSpec, Completed, Completion, Fence, NewTask,
    OpenOptions, Outcome, Status, StorageError,
};
use kanban_runtime::db::target::{PgTarget, UrlSource};
use kanban_runtime::test_support::{self, open_postgres, sql};

/// The location of a fresh, empty database on the shared test cluster (`open_postgres` with
/// [`OpenOptions::create`] makes it a board).
fn fresh_pg_target() -> PgTarget {
    let cluster = kanban_pgwire::cluster::TestCluster::shared()
        .expect("a PostgreSQL test server (see the README's test command)");
    let name = cluster.fresh_database("unit").unwrap();
    PgTarget::parse(&cluster.url(&name), UrlSource::Argument("--url")).unwrap()
}

/// A fresh PostgreSQL board, and its target (to open it again).
fn pg_board() -> (PgTarget, Board) {
    let target = fresh_pg_target();
    let board = open_postgres(&target, &OpenOptions::create()).unwrap();
    (target, board)
}

/// A ready task titled `title`.
fn create(b: &Board, title: &str) -> String {
    child_of(b, title, &[])
}

/// A task titled `title` under `parents`.
fn child_of(b: &Board, title: &str, parents: &[&str]) -> String {
    let task = NewTask {
        title: title.to_owned(),
        parents: parents.iter().map(|p| p.to_string()).collect(),
        ..NewTask::default()
    };
    b.create_task(&task, 1_700_000_000).unwrap().id
}

/// An external claim under `lock` for 900 s.
fn spec(lock: &str) -> ClaimSpec {
    ClaimSpec {
        lock: lock.to_owned(),
        ttl_seconds: 900,
        origin: ClaimOrigin::External,
    }
}

/// The one-statement fast paths (`board::engine::postgres::fast`).
mod fast {
    use super::*;

    /// The round trips `op` makes on `board`'s connection.
    fn round_trips(board: &Board, op: impl FnOnce()) -> u64 {
        let before = sql(board).pg_round_trips().unwrap();
        op();
        sql(board).pg_round_trips().unwrap() - before
    }

    #[test]
    fn a_claim_a_heartbeat_a_completion_and_a_create_take_one_round_trip_each() {
        let (_target, b) = pg_board();
        let mut id = String::new();
        assert_eq!(round_trips(&b, || id = create(&b, "t")), 1);
        let mut run = 0;
        assert_eq!(
            round_trips(&b, || match b.claim(&id, &spec("h:1"), 100).unwrap() {
                ClaimOutcome::Claimed(c) => run = c.run_id,
                lost => panic!("{lost:?}"),
            }),
            1
        );
        let fence = Fence {
            claim_lock: Some("h:1".into()),
            run_id: Some(run),
        };
        assert_eq!(
            round_trips(&b, || {
                let beat = b.heartbeat(&id, &fence, Some("n"), 900, 101).unwrap();
                assert!(matches!(beat, Outcome::Done(_)), "{beat:?}");
            }),
            1
        );
        let completion = Completion {
            expected_run_id: Some(run),
            summary: Some("done".into()),
            ..Completion::default()
        };
        assert_eq!(
            round_trips(&b, || {
                let done = b.complete(&id, &completion, 102).unwrap();
                assert_eq!(
                    done,
                    Outcome::Done(Completed {
                        task_id: id.clone(),
                        run_id: Some(run),
                        promoted: Vec::new(),
                    })
                );
            }),
            1
        );
        // A refusal costs the fast statement and then the generic transition, which says why.
        let refused = b.complete(&id, &completion, 103).unwrap();
        assert!(matches!(refused, Outcome::Refused(_)), "{refused:?}");
    }

    #[test]
    fn a_statement_that_did_nothing_leaves_the_generic_transition_to_say_why() {
        let (_target, b) = pg_board();
        let parent = create(&b, "parent");
        let child = child_of(&b, "child", &[&parent]);
        // The child is `todo`: the fast claim does nothing, the generic one refuses it.
        assert_eq!(
            test_support::fast_claim(&b, &child, Status::Ready, &spec("h:1"), 100).unwrap(),
            None
        );
        assert!(matches!(
            b.claim(&child, &spec("h:1"), 100).unwrap(),
            ClaimOutcome::Lost(_)
        ));
        // A heartbeat under a fence that does not hold: nothing, then the generic refusal.
        let ClaimOutcome::Claimed(c) = b.claim(&parent, &spec("h:1"), 100).unwrap() else {
            panic!("parent not claimed");
        };
        let wrong = Fence {
            claim_lock: Some("other:2".into()),
            run_id: Some(c.run_id),
        };
        assert_eq!(
            test_support::fast_heartbeat(&b, &parent, &wrong, None, 900, 101).unwrap(),
            None
        );
        assert!(matches!(
            b.heartbeat(&parent, &wrong, None, 900, 101).unwrap(),
            Outcome::Refused(_)
        ));
        // A completion with a child waiting: the generic one promotes it.
        let completion = Completion {
            expected_run_id: Some(c.run_id),
            ..Completion::default()
        };
        assert_eq!(
            test_support::fast_complete(&b, &parent, &completion, 102).unwrap(),
            None
        );
        let Outcome::Done(done) = b.complete(&parent, &completion, 102).unwrap() else {
            panic!("parent not completed");
        };
        assert_eq!(done.promoted, vec![child]);
    }

    #[test]
    fn a_heartbeat_takes_no_board_lock_and_waits_only_for_its_own_task() {
        let (target, b) = pg_board();
        let (held, free) = (create(&b, "held"), create(&b, "free"));
        let mut runs = Vec::new();
        for id in [&held, &free] {
            let ClaimOutcome::Claimed(c) = b.claim(id, &spec("h:1"), 100).unwrap() else {
                panic!("{id} not claimed");
            };
            runs.push(c.run_id);
        }
        let fence = |run: i64| Fence {
            claim_lock: Some("h:1".into()),
            run_id: Some(run),
        };
        let impatient = open_postgres(
            &target,
            &OpenOptions {
                busy_timeout_ms: Some(100),
                ..OpenOptions::default()
            },
        )
        .unwrap();
        // Another writer holds the board's write lock and the row of `held`.
        let mut other = kanban_pgwire::Client::connect(
            &kanban_pgwire::Config::parse(&b.path().to_string_lossy()).unwrap(),
        )
        .unwrap();
        other.batch("BEGIN").unwrap();
        other
            .execute(
                "SELECT pg_advisory_xact_lock($1)",
                &[kanban_pgwire::Value::Int(test_support::POSTGRES_WRITE_LOCK)],
            )
            .unwrap();
        other
            .execute(
                "SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE",
                &[kanban_pgwire::Value::Text(held.clone())],
            )
            .unwrap();
        // The heartbeat of the other task goes through at once.
        let beat = impatient
            .heartbeat(&free, &fence(runs[1]), None, 900, 101)
            .unwrap();
        assert!(matches!(beat, Outcome::Done(_)), "{beat:?}");
        // The held task's heartbeat waits for its row, gives up busy, and changes nothing.
        let err = impatient
            .heartbeat(&held, &fence(runs[0]), None, 900, 101)
            .unwrap_err();
        assert!(
            matches!(err, BoardError::Storage(StorageError::Busy { .. })),
            "{err}"
        );
        assert!(sql(&impatient).is_autocommit());
        other.batch("ROLLBACK").unwrap();
        assert_eq!(b.get_task(&held).unwrap().last_heartbeat_at, Some(100));
        let beat = impatient
            .heartbeat(&held, &fence(runs[0]), None, 900, 102)
            .unwrap();
        assert!(matches!(beat, Outcome::Done(_)), "{beat:?}");
        assert_eq!(b.get_task(&held).unwrap().last_heartbeat_at, Some(102));
    }

    /// The taken-id half of the unit test `a_taken_id_is_drawn_again_eight_times_at_most`: the
    /// insert a PostgreSQL create makes, with an id another task has, is refused and recognised.
    #[test]
    fn a_create_whose_drawn_id_is_taken_draws_again() {
        let (_target, b) = pg_board();
        let taken = create(&b, "first");
        // The insert a PostgreSQL create makes, with an id another task has: refused by the
        // primary key at the commit, nothing written, and recognised as a taken id.
        let err = test_support::write(&b, |tx| {
            tx.execute_unchecked(
                "INSERT INTO tasks (id, title, status, created_at) VALUES (?1, 'again', 'ready', 1)",
                &[&taken],
            )?;
            Ok(())
        })
        .unwrap_err();
        assert!(test_support::is_taken_task_id(&err), "{err}");
        let counts = b.status_counts().unwrap();
        assert_eq!(counts.iter().map(|(_, n)| n).sum::<i64>(), 1, "{counts:?}");
    }
}

/// Opening a PostgreSQL board, its sessions and its connection (`board::engine::postgres::store`).
mod store {
    use super::*;

    fn show(board: &Board, setting: &str) -> String {
        sql(board)
            .query_row(&format!("SHOW {setting}"), &[], 0)
            .unwrap()
    }

    #[test]
    fn a_board_without_the_postgresql_extras_gets_them_at_its_next_open() {
        let target = fresh_pg_target();
        drop(open_postgres(&target, &OpenOptions::create()).unwrap());
        let mut client = kanban_pgwire::Client::connect(target.config()).unwrap();
        let has_extras = |client: &mut kanban_pgwire::Client| {
            client
                .query_one(test_support::POSTGRES_HAS_EXTRAS, &[])
                .unwrap()
                .get(0)
                .and_then(kanban_pgwire::Value::as_i64)
        };
        assert_eq!(has_extras(&mut client), Some(1));
        // What an earlier build made: no change counter, no `tasks.rowid` (a dropped column
        // stays in the catalog, marked dropped).
        client
            .batch("DROP SEQUENCE kanban_change_seq; ALTER TABLE tasks DROP COLUMN rowid")
            .unwrap();
        assert_eq!(has_extras(&mut client), Some(0));
        client.batch("CREATE SEQUENCE kanban_change_seq").unwrap();
        assert_eq!(has_extras(&mut client), Some(0), "rowid is still missing");
        client.batch("DROP SEQUENCE kanban_change_seq").unwrap();
        let board = open_postgres(&target, &OpenOptions::default()).unwrap();
        assert_eq!(has_extras(&mut client), Some(1));
        create(&board, "after");
    }

    #[test]
    fn a_database_without_a_board_is_made_one_only_by_an_open_that_creates() {
        use kanban_runtime::board::engine::postgres::schema;
        let target = fresh_pg_target();
        for options in [OpenOptions::default(), OpenOptions::read_only()] {
            let err = open_postgres(&target, &options).unwrap_err();
            assert!(
                matches!(err, BoardError::Storage(StorageError::PgNoBoard { .. })),
                "{err}"
            );
            assert!(err.to_string().contains(&target.redacted()), "{err}");
        }
        let mut client = kanban_pgwire::Client::connect(target.config()).unwrap();
        assert_eq!(schema::schema_version(&mut client).unwrap(), 0);
        let board = open_postgres(&target, &OpenOptions::create()).unwrap();
        assert!(board.is_postgres());
        assert_eq!(board.path(), std::path::Path::new(&target.redacted()));
        assert_eq!(schema::schema_version(&mut client).unwrap(), schema::LATEST);
        // Open again without create: the board is there; nothing is migrated twice.
        drop(open_postgres(&target, &OpenOptions::default()).unwrap());
    }

    #[test]
    fn durability_busy_timeout_and_read_only_become_session_settings() {
        let target = fresh_pg_target();
        let full = open_postgres(
            &target,
            &OpenOptions {
                create: true,
                busy_timeout_ms: Some(1500),
                ..OpenOptions::default()
            },
        )
        .unwrap();
        assert_eq!(show(&full, "synchronous_commit"), "on");
        assert_eq!(show(&full, "lock_timeout"), "1500ms");
        assert_eq!(show(&full, "default_transaction_read_only"), "off");
        let normal = open_postgres(
            &target,
            &OpenOptions {
                durability: kanban_runtime::board::Durability::Normal,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        assert_eq!(show(&normal, "synchronous_commit"), "off");
        let reader = open_postgres(&target, &OpenOptions::read_only()).unwrap();
        assert_eq!(show(&reader, "default_transaction_read_only"), "on");
        // A write through the read-only board is refused before it reaches the server, and
        // one that reaches it anyway is refused by the server as read-only.
        let new = NewTask {
            title: "t".to_owned(),
            ..Default::default()
        };
        let err = reader.create_task(&new, 1).unwrap_err();
        assert!(
            matches!(
                err,
                BoardError::Storage(StorageError::PgReadOnly {
                    by_server: false,
                    ..
                })
            ),
            "{err}"
        );
        assert!(err.to_string().contains(&target.redacted()), "{err}");
        assert!(!err.to_string().contains("file"), "{err}");
        sql(&reader).begin_immediate().unwrap();
        let err = sql(&reader)
            .execute("DELETE FROM task_links", &[])
            .unwrap_err();
        assert_eq!(err.kind(), kanban_runtime::db::ErrorKind::ReadOnly, "{err}");
        sql(&reader).rollback();
        assert!(full.list_tasks(&Default::default()).unwrap().is_empty());
    }

    /// A claim takes neither the board's write lock nor waits for a row: while another
    /// connection holds an open transaction with the write lock and one task's row, claims of
    /// other tasks complete (had they waited, the open transaction would never end: it ends
    /// only after them, so a claim that waited would fail busy after a minute), and the claim
    /// of the held row is lost at once. A transition other than a claim still waits for the
    /// row.
    #[test]
    fn a_claim_neither_waits_for_the_write_lock_nor_for_a_row_another_holds() {
        use kanban_runtime::board::Refusal;
        let target = fresh_pg_target();
        let options = OpenOptions {
            create: true,
            busy_timeout_ms: Some(60_000),
            ..OpenOptions::default()
        };
        let board = open_postgres(&target, &options).unwrap();
        let ids: Vec<String> = (0..4)
            .map(|i| {
                let new = NewTask {
                    title: format!("t{i}"),
                    ..Default::default()
                };
                board.create_task(&new, 1).unwrap().id
            })
            .collect();
        let watcher = open_postgres(&target, &OpenOptions::default()).unwrap();
        let seen = watcher.data_version().unwrap();
        let mut other = kanban_pgwire::Client::connect(target.config()).unwrap();
        other.batch("BEGIN").unwrap();
        other
            .execute(
                "SELECT pg_advisory_xact_lock($1)",
                &[kanban_pgwire::Value::Int(test_support::POSTGRES_WRITE_LOCK)],
            )
            .unwrap();
        other
            .execute(
                "UPDATE tasks SET priority = priority WHERE id = $1",
                &[kanban_pgwire::Value::Text(ids[0].clone())],
            )
            .unwrap();
        let spec = ClaimSpec {
            lock: "host:1".to_owned(),
            ttl_seconds: 60,
            origin: ClaimOrigin::External,
        };
        let claimed = board.claim(&ids[1], &spec, 2).unwrap();
        assert!(matches!(claimed, ClaimOutcome::Claimed(_)), "{claimed:?}");
        let lost = board.claim(&ids[0], &spec, 2).unwrap();
        assert!(
            matches!(lost, ClaimOutcome::Lost(Refusal::Raced { ref task_id }) if *task_id == ids[0]),
            "{lost:?}"
        );
        let batch = board
            .claim_batch(
                &[
                    (ids[0].clone(), Status::Ready),
                    (ids[2].clone(), Status::Ready),
                ],
                &spec,
                2,
            )
            .unwrap();
        assert!(
            matches!(batch[0], Ok(ClaimOutcome::Lost(Refusal::Raced { .. }))),
            "{batch:?}"
        );
        assert!(
            matches!(batch[1], Ok(ClaimOutcome::Claimed(_))),
            "{batch:?}"
        );
        // An unknown task is still an error, not a lost claim.
        let err = board.claim("t_00000000", &spec, 2).unwrap_err();
        assert!(matches!(err, BoardError::TaskNotFound { .. }), "{err}");
        // Another connection's claims moved the change counter; the held row is unchanged.
        assert_ne!(watcher.data_version().unwrap(), seen);
        assert_eq!(watcher.get_task(&ids[0]).unwrap().status, Status::Ready);
        other.batch("COMMIT").unwrap();

        // Any other transition reads its task with the row locked: while a transaction holds
        // the row, it waits (here until its short lock wait runs out) and changes nothing.
        let impatient = open_postgres(
            &target,
            &OpenOptions {
                busy_timeout_ms: Some(100),
                ..OpenOptions::default()
            },
        )
        .unwrap();
        other.batch("BEGIN").unwrap();
        other
            .execute(
                "SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE",
                &[kanban_pgwire::Value::Text(ids[3].clone())],
            )
            .unwrap();
        let err = impatient.archive(&ids[3], 3).unwrap_err();
        assert!(
            kanban_runtime::error_chain(&err).contains("lock"),
            "{}",
            kanban_runtime::error_chain(&err)
        );
        other.batch("ROLLBACK").unwrap();
        assert_eq!(board.get_task(&ids[3]).unwrap().status, Status::Ready);
        let claimed = board.claim(&ids[0], &spec, 4).unwrap();
        assert!(matches!(claimed, ClaimOutcome::Claimed(_)), "{claimed:?}");
    }

    #[test]
    fn a_lost_connection_is_said_in_postgres_words_and_changes_nothing() {
        let target = fresh_pg_target();
        let board = open_postgres(&target, &OpenOptions::create()).unwrap();
        let pid: i64 = sql(&board)
            .query_row("SELECT pg_backend_pid()", &[], 0)
            .unwrap();
        let mut admin = kanban_pgwire::Client::connect(target.config()).unwrap();
        admin
            .execute(
                "SELECT pg_terminate_backend($1::int)",
                &[kanban_pgwire::Value::Int(pid)],
            )
            .unwrap();
        let new = NewTask {
            title: "t".to_owned(),
            ..Default::default()
        };
        let err = board.create_task(&new, 1).unwrap_err();
        assert!(
            matches!(
                err,
                BoardError::Storage(StorageError::PgConnectionLost { .. })
            ),
            "{err}"
        );
        let shown = err.to_string();
        for says in [
            target.redacted().as_str(),
            "closed it or is unreachable",
            "reconnects",
        ] {
            assert!(shown.contains(says), "{shown}");
        }
        for sqlite in ["file", "folder", "SQLite", "disk"] {
            assert!(!shown.contains(sqlite), "{shown}");
        }
        assert!(board.connection_lost());
        let again = open_postgres(&target, &OpenOptions::default()).unwrap();
        assert!(again.list_tasks(&Default::default()).unwrap().is_empty());
    }

    /// Reads say a lost connection as writes do: every read of the board API after the server
    /// ended the board's session (`pg_terminate_backend` from another connection, as a fast
    /// shutdown or an operator does) fails with the error naming the board's URL, never its
    /// password, and never as "a board query failed".
    #[test]
    fn a_read_after_the_server_ended_the_session_says_the_connection_was_lost() {
        let cluster = kanban_pgwire::cluster::TestCluster::shared()
            .expect("a PostgreSQL test server (see the README's test command)");
        let db = cluster.fresh_database("read_lost").unwrap();
        // A password in the URL (the test server trusts its socket and never asks for it): it
        // must appear in no message.
        let url = cluster.url(&db);
        let (scheme, rest) = url.split_once("://").unwrap();
        let (user, host) = rest.split_once('@').unwrap();
        let target = PgTarget::parse(
            &format!("{scheme}://{user}:Sekr1t-read@{host}"),
            UrlSource::Argument("--url"),
        )
        .unwrap();
        let board = open_postgres(&target, &OpenOptions::create()).unwrap();
        let id = board
            .create_task(
                &NewTask {
                    title: "kept".to_owned(),
                    ..Default::default()
                },
                1,
            )
            .unwrap()
            .id;
        assert_eq!(board.list_tasks(&Default::default()).unwrap().len(), 1);
        let mut admin = kanban_pgwire::Client::connect(target.config()).unwrap();
        // Every other session of the board's database is the board's; wait until it is gone.
        let ended = admin
            .query(
                "SELECT pg_terminate_backend(pid, 60000) FROM pg_stat_activity \
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[kanban_pgwire::Value::Text(db.clone())],
            )
            .unwrap();
        assert_eq!(ended.len(), 1, "the board's one session");
        let check = |what: &str, err: BoardError| {
            assert!(
                matches!(
                    err,
                    BoardError::Storage(StorageError::PgConnectionLost { .. })
                ),
                "{what}: {}",
                kanban_runtime::error_chain(&err)
            );
            let chain = kanban_runtime::error_chain(&err);
            assert!(chain.contains(&target.redacted()), "{what}: {chain}");
            assert!(chain.contains("lost the connection"), "{what}: {chain}");
            assert!(!chain.contains("Sekr1t-read"), "{what}: {chain}");
            assert!(!chain.contains("a board query failed"), "{what}: {chain}");
            for sqlite in ["file", "folder", "SQLite", "disk"] {
                assert!(!err.to_string().contains(sqlite), "{what}: {chain}");
            }
        };
        // The first read meets the ended session; those after it a closed connection.
        check("list", board.list_tasks(&Default::default()).unwrap_err());
        assert!(board.connection_lost());
        check("show", board.get_task(&id).unwrap_err());
        check("runs", board.runs(&id).unwrap_err());
        check("events", board.events(&id, None).unwrap_err());
        check("comments", board.comments(&id).unwrap_err());
        check("counts", board.status_counts().unwrap_err());
        check("fsck", board.fsck().unwrap_err());
        check("data_version", board.data_version().unwrap_err());
        check(
            "create",
            board
                .create_task(
                    &NewTask {
                        title: "t".to_owned(),
                        ..Default::default()
                    },
                    2,
                )
                .unwrap_err(),
        );
        // Nothing was lost on the server: a new connection reads the board.
        let again = open_postgres(&target, &OpenOptions::default()).unwrap();
        assert_eq!(again.get_task(&id).unwrap().title, "kept");
    }
}

/// The change watch of a PostgreSQL board (`board::wake`): `LISTEN/NOTIFY` and its fallback poll.
mod wake {
    use std::time::Duration;

    use kanban_runtime::board::Wake;

    use super::*;

    const LONG: Duration = Duration::from_secs(120);

    /// Two connections to one fresh PostgreSQL board.
    fn two_postgres_connections() -> (Board, Board) {
        let target = fresh_pg_target();
        let watcher = open_postgres(&target, &OpenOptions::create()).unwrap();
        let writer = open_postgres(&target, &OpenOptions::default()).unwrap();
        (watcher, writer)
    }

    #[test]
    fn on_postgresql_another_connection_s_commit_is_notified_and_own_commits_are_not() {
        let (watcher, writer) = two_postgres_connections();
        let mut watch = watcher.watch_changes();
        assert!(watch.is_notifying());
        create(&writer, "first");
        assert_eq!(watch.wait(&watcher, LONG, LONG).unwrap(), Wake::Notified);
        // The watcher's own commit is no change for it (as SQLite's data_version).
        create(&watcher, "own");
        assert_eq!(
            watch
                .wait(&watcher, Duration::from_millis(20), LONG)
                .unwrap(),
            Wake::TimedOut
        );
        // A transaction that changed nothing (a lost claim) notifies nobody.
        let id = watcher.list_tasks(&Default::default()).unwrap()[0]
            .id
            .clone();
        let spec = spec("host:1");
        // A claim's change is counted but notifies nobody (it gives a dispatcher no work): the
        // watch finds it by reading the counter.
        assert!(matches!(
            writer.claim(&id, &spec, 1_700_000_000).unwrap(),
            ClaimOutcome::Claimed(_)
        ));
        assert_eq!(watch.wait(&watcher, LONG, LONG).unwrap(), Wake::Polled);
        assert!(matches!(
            writer.claim(&id, &spec, 1_700_000_000).unwrap(),
            ClaimOutcome::Lost(_)
        ));
        assert_eq!(
            watch
                .wait(&watcher, Duration::from_millis(20), LONG)
                .unwrap(),
            Wake::TimedOut
        );
        // Marked as seen: a change already acted on is not reported again.
        create(&writer, "second");
        watch.mark_seen(&watcher).unwrap();
        assert_eq!(
            watch.wait(&watcher, Duration::ZERO, LONG).unwrap(),
            Wake::TimedOut
        );
    }

    #[test]
    fn on_postgresql_without_listen_the_fallback_poll_sees_the_commit() {
        let (watcher, writer) = two_postgres_connections();
        let mut watch = watcher.watch_changes();
        test_support::stop_listening(&mut watch);
        assert!(!watch.is_notifying());
        create(&writer, "polled");
        assert_eq!(
            watch
                .wait(&watcher, LONG, Duration::from_millis(1))
                .unwrap(),
            Wake::Polled
        );
    }
}
