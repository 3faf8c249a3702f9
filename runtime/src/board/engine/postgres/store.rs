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
        let session = client
            .query_one(
                crate::board::engine::postgres::schema::OPEN_SESSION,
                &[
                    sync.into(),
                    busy_ms.max(1).to_string().into(),
                    match options.read_only {
                        true => "on".into(),
                        false => kanban_pgwire::Value::Null,
                    },
                ],
            )
            .map_err(failed)?;
        let flag = |i| session.get(i).and_then(kanban_pgwire::Value::as_i64) == Some(1);
        let held = Held {
            version_table: flag(3),
            extras: flag(4),
        };
        bring_up(&mut client, &url, options, held).map_err(|e| match e {
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

/// What the session's opening statement found in the database.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// The schema version table exists.
    version_table: bool,
    /// The change counter and `tasks.rowid` exist (`schema::EXTRAS`).
    extras: bool,
}

/// Brings the connected database to the board schema (or checks it, read-only).
fn bring_up(
    client: &mut kanban_pgwire::Client,
    url: &str,
    options: &OpenOptions,
    held: Held,
) -> Result<()> {
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
    let found = match held.version_table {
        true => crate::board::engine::postgres::schema::stored_version(client).map_err(failed)?,
        false => 0,
    };
    if found > crate::board::engine::postgres::schema::LATEST {
        return Err(too_new(found));
    }
    let complete = found == crate::board::engine::postgres::schema::LATEST && held.extras;
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
