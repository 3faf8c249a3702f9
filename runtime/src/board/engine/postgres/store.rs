//! Opening a board that lives in PostgreSQL ([`Board::open`] on a location whose store is a
//! `postgres://` URL): connect, configure the session, bring the database to the board schema
//! ([`super::schema`]), and hand the connection to the SQL layer, after which every
//! transition, query, `fsck` rule and event of the board runs unchanged (the layer translates
//! the common dialect; see `db`).
//!
//! * **Credentials**: the URL's settings with the password from libpq's sources
//!   ([`PgTarget::connect_config`]); every message names the board by its redacted URL only.
//! * **Session**: `lock_timeout` is the board's busy timeout (how long `BEGIN` waits for the
//!   board's write lock, see the SQL layer's PostgreSQL backend); [`Durability::Full`] is
//!   `synchronous_commit = on`, [`Durability::Normal`] `off` (a server crash may lose the last
//!   commits, never corrupt: SQLite's `synchronous=NORMAL` promise); a read-only open sets
//!   `default_transaction_read_only`, so any write fails (and `Board::write` refuses first).
//! * **Schema**: one transaction runs [`crate::board::engine::postgres::schema::migrate`] (under its advisory lock: two
//!   processes opening a fresh database migrate it once; a newer version is refused), which also
//!   adds what the board's SQL needs beyond SQLite's tables ([`crate::board::engine::postgres::schema::EXTRAS`]: the change
//!   counter and `tasks.rowid`). An up-to-date database is only read (no DDL, no lock). A
//!   database without a board is made one only by an open with `create` (as a missing SQLite
//!   file is); a read-only open of a database that is not up to date is refused, as for SQLite.

use std::path::PathBuf;
use std::time::Duration;

use crate::board::StorageError;
use crate::board::error::{BoardError, Result};
use crate::board::store::{Board, Durability, OpenOptions};
use crate::db::Db;
use crate::db::target::PgTarget;

impl Board {
    /// Opens the PostgreSQL board at `target` (see the module docs). The database must exist;
    /// without `options.create` it must hold a board already.
    ///
    /// `slug` (when known) names the board in the advice of a database without one.
    pub(crate) fn open_postgres(
        target: &PgTarget,
        slug: Option<&str>,
        options: &OpenOptions,
    ) -> Result<Board> {
        let busy_ms = match options.busy_timeout_ms {
            Some(ms) => ms,
            None => crate::board::store::busy_timeout_from_env()?,
        };
        let url = target.redacted();
        let failed = |source: kanban_pgwire::Error| {
            BoardError::Storage(StorageError::Postgres {
                url: url.clone(),
                source: source.into(),
            })
        };
        let config = target.connect_config().map_err(failed)?;
        let mut client = kanban_pgwire::Client::connect(&config).map_err(|e| match e {
            kanban_pgwire::Error::Io { .. } => BoardError::Storage(StorageError::PgUnreachable {
                url: url.clone(),
                source: e.into(),
            }),
            other => failed(other),
        })?;
        let sync = match options.durability {
            Durability::Full => "on",
            Durability::Normal => "off",
        };
        client
            .batch(&format!(
                "SET synchronous_commit = {sync}; SET lock_timeout = {}",
                busy_ms.max(1)
            ))
            .map_err(failed)?;
        if options.read_only {
            client
                .batch("SET default_transaction_read_only = on")
                .map_err(failed)?;
        }
        bring_up(&mut client, &url, options).map_err(|e| match e {
            BoardError::Storage(StorageError::PgNoBoard { url, .. }) => {
                BoardError::Storage(StorageError::PgNoBoard {
                    url,
                    advice: BoardError::no_board_advice(target.source(), slug),
                })
            }
            other => other,
        })?;
        Ok(Board::from_db(
            Db::postgres_named(client, &url),
            PathBuf::from(&url),
            Duration::from_millis(busy_ms),
            options.read_only,
        ))
    }
}

/// Brings the connected database to the board schema (or checks it, read-only).
fn bring_up(client: &mut kanban_pgwire::Client, url: &str, options: &OpenOptions) -> Result<()> {
    let schema = |source| {
        BoardError::Storage(StorageError::PgSchema {
            url: url.to_owned(),
            source,
        })
    };
    let failed = |source: kanban_pgwire::Error| {
        BoardError::Storage(StorageError::Postgres {
            url: url.to_owned(),
            source: source.into(),
        })
    };
    let too_new = |found| {
        BoardError::Storage(StorageError::SchemaTooNew {
            path: PathBuf::from(url),
            found,
            supported: crate::board::engine::postgres::schema::LATEST,
        })
    };
    let found = crate::board::engine::postgres::schema::schema_version(client).map_err(schema)?;
    if found > crate::board::engine::postgres::schema::LATEST {
        return Err(too_new(found));
    }
    let complete = found == crate::board::engine::postgres::schema::LATEST
        && client
            .query_one(crate::board::engine::postgres::schema::HAS_EXTRAS, &[])
            .map_err(failed)?
            .get(0)
            .and_then(kanban_pgwire::Value::as_i64)
            == Some(1);
    if complete {
        return Ok(());
    }
    if found == 0 && (!options.create || options.read_only) {
        return Err(BoardError::Storage(StorageError::PgNoBoard {
            url: url.to_owned(),
            advice: String::new(),
        }));
    }
    if options.read_only {
        return Err(BoardError::Storage(StorageError::OutdatedReadOnly {
            path: PathBuf::from(url),
            found,
            supported: crate::board::engine::postgres::schema::LATEST,
        }));
    }
    migrate_once(client).map(drop).map_err(|e| match e {
        crate::board::engine::postgres::schema::PgSchemaError::TooNew { found } => too_new(found),
        other => schema(other),
    })
}

/// Why a PostgreSQL database could not be brought to the board schema.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BringUpError {
    #[error("cannot connect to {url}")]
    Connect {
        url: String,
        #[source]
        source: kanban_pgwire::Error,
    },

    #[error("cannot create the board schema in {url}; nothing was recorded")]
    Schema {
        url: String,
        #[source]
        source: super::schema::PgSchemaError,
    },
}

/// Connects to `target` and creates the board schema there, or joins the board it holds (see
/// [`migrate_once`]); returns the schema version the database had (0: it was empty).
pub(crate) fn create_or_join(target: &PgTarget) -> std::result::Result<i64, BringUpError> {
    let connect = |source| BringUpError::Connect {
        url: target.redacted(),
        source,
    };
    let config = target.connect_config().map_err(connect)?;
    let mut client = kanban_pgwire::Client::connect(&config).map_err(connect)?;
    migrate_once(&mut client).map_err(|source| BringUpError::Schema {
        url: target.redacted(),
        source,
    })
}

/// Brings the connected database to the board schema in one transaction ([`crate::board::engine::postgres::schema::migrate`];
/// an up-to-date database gets no DDL) and returns the version it found; what `Board::open`
/// with `create`, `kanban boards create --url` and a configured board's first use run, so
/// processes racing on a fresh database create the schema exactly once.
///
/// The schema's advisory lock is taken for the session first and the transaction begun after
/// it is granted: a transaction's start is where the server applies other sessions' catalog
/// changes to this one's caches, so a process that waited here while another created the tables
/// sees them (inside a transaction begun before the wait, a cached "no such table" would stand,
/// and it would create them again). `migrate` takes the same key for the transaction, which this
/// session already holds. On failure the transaction is rolled back and the lock released.
pub(crate) fn migrate_once(
    client: &mut kanban_pgwire::Client,
) -> std::result::Result<i64, crate::board::engine::postgres::schema::PgSchemaError> {
    let step = |source| crate::board::engine::postgres::schema::PgSchemaError::Statement {
        version: 0,
        source,
    };
    client
        .execute(
            "SELECT pg_advisory_lock($1)",
            &[kanban_pgwire::Value::Int(
                crate::board::engine::postgres::schema::ADVISORY_LOCK,
            )],
        )
        .map_err(step)?;
    let outcome = client.batch("BEGIN").map_err(step).and_then(|()| {
        let found = crate::board::engine::postgres::schema::migrate(client)?;
        client.batch("COMMIT").map_err(step)?;
        Ok(found)
    });
    if outcome.is_err() && client.transaction_status() != kanban_pgwire::TransactionStatus::Idle {
        let _ = client.batch("ROLLBACK");
    }
    let unlocked = client
        .execute(
            "SELECT pg_advisory_unlock($1)",
            &[kanban_pgwire::Value::Int(
                crate::board::engine::postgres::schema::ADVISORY_LOCK,
            )],
        )
        .map_err(step);
    let found = outcome?;
    unlocked?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::testing::fresh_pg_target;

    fn show(board: &Board, setting: &str) -> String {
        board
            .conn()
            .query_row(&format!("SHOW {setting}"), [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_board_without_the_postgresql_extras_gets_them_at_its_next_open() {
        let target = fresh_pg_target();
        drop(Board::open_postgres(&target, None, &OpenOptions::create()).unwrap());
        let mut client = kanban_pgwire::Client::connect(target.config()).unwrap();
        let has_extras = |client: &mut kanban_pgwire::Client| {
            client
                .query_one(crate::board::engine::postgres::schema::HAS_EXTRAS, &[])
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
        let board = Board::open_postgres(&target, None, &OpenOptions::default()).unwrap();
        assert_eq!(has_extras(&mut client), Some(1));
        crate::board::testing::create(&board, "after");
    }

    #[test]
    fn a_database_without_a_board_is_made_one_only_by_an_open_that_creates() {
        let target = fresh_pg_target();
        for options in [OpenOptions::default(), OpenOptions::read_only()] {
            let err = Board::open_postgres(&target, None, &options).unwrap_err();
            assert!(
                matches!(err, BoardError::Storage(StorageError::PgNoBoard { .. })),
                "{err}"
            );
            assert!(err.to_string().contains(&target.redacted()), "{err}");
        }
        let mut client = kanban_pgwire::Client::connect(target.config()).unwrap();
        assert_eq!(
            crate::board::engine::postgres::schema::schema_version(&mut client).unwrap(),
            0
        );
        let board = Board::open_postgres(&target, None, &OpenOptions::create()).unwrap();
        assert!(board.is_postgres());
        assert_eq!(board.path(), std::path::Path::new(&target.redacted()));
        assert_eq!(
            crate::board::engine::postgres::schema::schema_version(&mut client).unwrap(),
            crate::board::engine::postgres::schema::LATEST
        );
        // Open again without create: the board is there; nothing is migrated twice.
        drop(Board::open_postgres(&target, None, &OpenOptions::default()).unwrap());
    }

    #[test]
    fn durability_busy_timeout_and_read_only_become_session_settings() {
        let target = fresh_pg_target();
        let full = Board::open_postgres(
            &target,
            None,
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
        let normal = Board::open_postgres(
            &target,
            None,
            &OpenOptions {
                durability: Durability::Normal,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        assert_eq!(show(&normal, "synchronous_commit"), "off");
        let reader = Board::open_postgres(&target, None, &OpenOptions::read_only()).unwrap();
        assert_eq!(show(&reader, "default_transaction_read_only"), "on");
        // A write through the read-only board is refused before it reaches the server, and
        // one that reaches it anyway is refused by the server as read-only.
        let new = crate::board::NewTask {
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
        reader.conn().begin_immediate().unwrap();
        let err = reader
            .conn()
            .execute("DELETE FROM task_links", [])
            .unwrap_err();
        assert_eq!(err.kind(), crate::db::ErrorKind::ReadOnly, "{err}");
        reader.conn().rollback();
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
        use crate::board::{ClaimOutcome, ClaimSpec, Refusal, Status};
        let target = fresh_pg_target();
        let options = OpenOptions {
            create: true,
            busy_timeout_ms: Some(60_000),
            ..OpenOptions::default()
        };
        let board = Board::open_postgres(&target, None, &options).unwrap();
        let ids: Vec<String> = (0..4)
            .map(|i| {
                let new = crate::board::NewTask {
                    title: format!("t{i}"),
                    ..Default::default()
                };
                board.create_task(&new, 1).unwrap().id
            })
            .collect();
        let watcher = Board::open_postgres(&target, None, &OpenOptions::default()).unwrap();
        let seen = watcher.data_version().unwrap();
        let mut other = kanban_pgwire::Client::connect(target.config()).unwrap();
        other.batch("BEGIN").unwrap();
        other
            .execute(
                "SELECT pg_advisory_xact_lock($1)",
                &[kanban_pgwire::Value::Int(crate::db::POSTGRES_WRITE_LOCK)],
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
            origin: crate::board::ClaimOrigin::External,
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
        let impatient = Board::open_postgres(
            &target,
            None,
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
            crate::error_chain(&err).contains("lock"),
            "{}",
            crate::error_chain(&err)
        );
        other.batch("ROLLBACK").unwrap();
        assert_eq!(board.get_task(&ids[3]).unwrap().status, Status::Ready);
        let claimed = board.claim(&ids[0], &spec, 4).unwrap();
        assert!(matches!(claimed, ClaimOutcome::Claimed(_)), "{claimed:?}");
    }

    #[test]
    fn a_lost_connection_is_said_in_postgres_words_and_changes_nothing() {
        let target = fresh_pg_target();
        let board = Board::open_postgres(&target, None, &OpenOptions::create()).unwrap();
        let pid = board
            .conn()
            .query_row("SELECT pg_backend_pid()", [], |r| r.get::<_, i64>(0))
            .unwrap();
        let mut admin = kanban_pgwire::Client::connect(target.config()).unwrap();
        admin
            .execute(
                "SELECT pg_terminate_backend($1::int)",
                &[kanban_pgwire::Value::Int(pid)],
            )
            .unwrap();
        let new = crate::board::NewTask {
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
        let again = Board::open_postgres(&target, None, &OpenOptions::default()).unwrap();
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
            crate::db::target::UrlSource::Argument("--url"),
        )
        .unwrap();
        let board = Board::open_postgres(&target, None, &OpenOptions::create()).unwrap();
        let id = board
            .create_task(
                &crate::board::NewTask {
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
                crate::error_chain(&err)
            );
            let chain = crate::error_chain(&err);
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
                    &crate::board::NewTask {
                        title: "t".to_owned(),
                        ..Default::default()
                    },
                    2,
                )
                .unwrap_err(),
        );
        // Nothing was lost on the server: a new connection reads the board.
        let again = Board::open_postgres(&target, None, &OpenOptions::default()).unwrap();
        assert_eq!(again.get_task(&id).unwrap().title, "kept");
    }

    #[test]
    fn a_server_that_never_answers_fails_within_the_connect_timeout() {
        // Listening, never accepting: the connect succeeds, no greeting ever comes.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let target = PgTarget::parse(
            &format!("postgres://kb:Sekr1t-xyz@127.0.0.1:{port}/board?connect_timeout=1"),
            crate::db::target::UrlSource::Argument("--url"),
        )
        .unwrap();
        let err = Board::open_postgres(&target, None, &OpenOptions::create()).unwrap_err();
        assert!(
            matches!(err, BoardError::Storage(StorageError::PgUnreachable { .. })),
            "{err}"
        );
        let chain = crate::error_chain(&err);
        assert!(
            chain.contains(&format!("kb@127.0.0.1:{port}/board")),
            "{chain}"
        );
        assert!(chain.contains("connect timeout"), "{chain}");
        assert!(!chain.contains("Sekr1t-xyz"), "{chain}");
        drop(silent);
    }

    #[test]
    fn an_unreachable_server_is_an_error_naming_the_board_without_its_password() {
        let target = PgTarget::parse(
            "postgres://kanban:Sekr1t-xyz@%2Fnonexistent%2Fkanban-socket/board",
            crate::db::target::UrlSource::Argument("--url"),
        )
        .unwrap();
        let err = Board::open_postgres(&target, None, &OpenOptions::create()).unwrap_err();
        let chain = crate::error_chain(&err);
        assert!(chain.contains("kanban@"), "{chain}");
        assert!(!chain.contains("Sekr1t-xyz"), "{chain}");
        assert!(
            matches!(err, BoardError::Storage(StorageError::PgUnreachable { .. })),
            "{chain}"
        );
    }
}
