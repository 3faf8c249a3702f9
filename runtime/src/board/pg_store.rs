//! Opening a board that lives in PostgreSQL ([`Board::open`] on a location whose store is a
//! `postgres://` URL): connect, configure the session, bring the database to the board schema
//! ([`super::pg_schema`]), and hand the connection to the SQL layer, after which every
//! transition, query, `fsck` rule and event of the board runs unchanged (the layer translates
//! the common dialect; see `board::sql`).
//!
//! * **Credentials**: the URL's settings with the password from libpq's sources
//!   ([`PgTarget::connect_config`]); every message names the board by its redacted URL only.
//! * **Session**: `lock_timeout` is the board's busy timeout (how long `BEGIN` waits for the
//!   board's write lock, see the SQL layer's PostgreSQL backend); [`Durability::Full`] is
//!   `synchronous_commit = on`, [`Durability::Normal`] `off` (a server crash may lose the last
//!   commits, never corrupt: SQLite's `synchronous=NORMAL` promise); a read-only open sets
//!   `default_transaction_read_only`, so any write fails (and `Board::write` refuses first).
//! * **Schema**: one transaction runs [`super::pg_schema::migrate`] (under its advisory lock: two
//!   processes opening a fresh database migrate it once; a newer version is refused), which also
//!   adds what the board's SQL needs beyond SQLite's tables ([`pg_schema::EXTRAS`]: the change
//!   counter and `tasks.rowid`). An up-to-date database is only read (no DDL, no lock). A
//!   database without a board is made one only by an open with `create` (as a missing SQLite
//!   file is); a read-only open of a database that is not up to date is refused, as for SQLite.

use std::path::PathBuf;
use std::time::Duration;

use super::error::{BoardError, Result};
use super::location::PgTarget;
use super::pg_schema;
use super::sql::Db;
use super::store::{Board, Durability, OpenOptions};

impl Board {
    /// Opens the PostgreSQL board at `target` (see the module docs). The database must exist;
    /// without `options.create` it must hold a board already.
    pub(crate) fn open_postgres(target: &PgTarget, options: &OpenOptions) -> Result<Board> {
        let busy_ms = match options.busy_timeout_ms {
            Some(ms) => ms,
            None => super::store::busy_timeout_from_env()?,
        };
        let url = target.redacted();
        let failed = |source: kanban_pgwire::Error| BoardError::Postgres {
            url: url.clone(),
            source: source.into(),
        };
        let config = target.connect_config().map_err(failed)?;
        let mut client = kanban_pgwire::Client::connect(&config).map_err(failed)?;
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
        bring_up(&mut client, &url, options)?;
        Ok(Board::from_db(
            Db::postgres(client),
            PathBuf::from(&url),
            Duration::from_millis(busy_ms),
            options.read_only,
        ))
    }
}

/// Brings the connected database to the board schema (or checks it, read-only).
fn bring_up(client: &mut kanban_pgwire::Client, url: &str, options: &OpenOptions) -> Result<()> {
    let schema = |source| BoardError::PgSchema {
        url: url.to_owned(),
        source,
    };
    let failed = |source: kanban_pgwire::Error| BoardError::Postgres {
        url: url.to_owned(),
        source: source.into(),
    };
    let too_new = |found| BoardError::SchemaTooNew {
        path: PathBuf::from(url),
        found,
        supported: pg_schema::LATEST,
    };
    let found = pg_schema::schema_version(client).map_err(schema)?;
    if found > pg_schema::LATEST {
        return Err(too_new(found));
    }
    let complete = found == pg_schema::LATEST
        && client
            .query_one(pg_schema::HAS_EXTRAS, &[])
            .map_err(failed)?
            .get(0)
            .and_then(kanban_pgwire::Value::as_i64)
            == Some(1);
    if complete {
        return Ok(());
    }
    if found == 0 && (!options.create || options.read_only) {
        return Err(BoardError::PgNoBoard {
            url: url.to_owned(),
        });
    }
    if options.read_only {
        return Err(BoardError::OutdatedReadOnly {
            path: PathBuf::from(url),
            found,
            supported: pg_schema::LATEST,
        });
    }
    client.batch("BEGIN").map_err(failed)?;
    let outcome = pg_schema::migrate(client)
        .map_err(|e| match e {
            pg_schema::PgSchemaError::TooNew { found } => too_new(found),
            other => schema(other),
        })
        .and_then(|_| client.batch("COMMIT").map_err(failed));
    if outcome.is_err() && client.transaction_status() != kanban_pgwire::TransactionStatus::Idle {
        let _ = client.batch("ROLLBACK");
    }
    outcome
}
