//! `kanban-pgwire`: a small, blocking PostgreSQL client speaking the v3 wire protocol over a
//! Unix socket or TCP (TLS through rustls), with no async runtime and no threads, and, behind
//! the `cluster` feature, a throwaway server for tests and benchmarks.
//!
//! # Connecting
//!
//! ```no_run
//! use kanban_pgwire::{Client, Config, Value};
//! # fn main() -> Result<(), kanban_pgwire::Error> {
//! let mut config = Config::parse("postgres://kanban@db.example:5432/board?application_name=kanban")?;
//! // The library reads no environment variable: the caller passes the values of PGPASSWORD,
//! // PGPASSFILE and HOME (libpq's order: URL, PGPASSWORD, PGPASSFILE or ~/.pgpass).
//! let (pgpassword, pgpassfile, home): (Option<String>, Option<std::path::PathBuf>, _) =
//!     (None, None, Some(std::path::PathBuf::from("/home/me")));
//! config.resolve_password(pgpassword.as_deref(), pgpassfile.as_deref(), home.as_deref())?;
//! println!("connecting to {config}"); // the redacted URL: never the password
//! let mut client = Client::connect(&config)?;
//! client.batch("CREATE TABLE IF NOT EXISTS t (id bigint PRIMARY KEY, body text)")?;
//! client.execute("INSERT INTO t VALUES ($1, $2)", &[Value::Int(1), "hello".into()])?;
//! let row = client.query_one("SELECT body FROM t WHERE id = $1", &[Value::Int(1)])?;
//! assert_eq!(row.get(0).and_then(Value::as_str), Some("hello"));
//! # Ok(()) }
//! ```
//!
//! * URLs: `postgres://` or `postgresql://`, `user[:password]@host[:port]/dbname`, with
//!   `?host=`, `port`, `user`, `password`, `dbname`, `sslmode`, `application_name`,
//!   `connect_timeout`, `read_timeout` (each wait for an answer; [`DEFAULT_READ_TIMEOUT`]
//!   unless set), `allow_weak_auth`. A TCP connection has keepalive on. A host that is an
//!   absolute path (`%2Ftmp%2Fpg` or `?host=/tmp/pg`) is the directory of the server's Unix socket `.s.PGSQL.<port>`. `sslmode` is libpq's
//!   (`disable`, `allow`, `prefer` by default, `require`, `verify-ca`, `verify-full`; see
//!   [`SslMode`]) with `sslrootcert` (else the built-in Mozilla roots), `sslcert` and `sslkey`.
//! * Secrets: [`Config`]'s `Display` and `Debug` and [`Config::redacted`] leave the password
//!   out, and no [`Error`] message contains it; log the redacted URL.
//! * Authentication (on the `postgres-protocol` crate): trust, `scram-sha-256` (SASLprep, at
//!   most 100 000 PBKDF2 iterations, the server's signature checked in constant time and
//!   required before `AuthenticationOk` is accepted; over TLS bound to the channel with
//!   SCRAM-SHA-256-PLUS when the server offers it), and `md5` and
//!   cleartext `password` over a Unix socket. Over TCP those two are refused unless the URL
//!   says `allow_weak_auth=true` (md5 can be replayed or attacked offline, cleartext is the
//!   password itself, and both hand it to a spoofed server).
//!
//! # Statements
//!
//! [`Client::execute`] and [`Client::query`] use the extended protocol with text-format
//! parameters `$1…$n` and text-format results, converted to [`Value`] by column type (see its
//! docs). Each distinct SQL text (with its parameter types) is prepared once per connection and
//! kept in a cache of [`DEFAULT_STATEMENT_CACHE_CAPACITY`] statements (least recently used are
//! closed beyond it), so a repeated statement costs one round trip: Bind, Execute, Sync.
//! [`Client::batch`] runs several `;`-separated statements without parameters (simple protocol)
//! for DDL. Transactions are plain SQL (`BEGIN`, `COMMIT`, `ROLLBACK`);
//! [`Client::transaction_status`] tells whether a block is open or failed. A server error
//! ([`Error::Db`], with the SQLSTATE in [`DbError::code`]) leaves the connection usable; an I/O
//! or protocol error closes it ([`Client::is_closed`]) and reconnecting is the caller's job.
//!
//! # Notifications
//!
//! [`Client::listen`] subscribes; `NOTIFY` is plain SQL. [`Client::wait_notification`] returns a
//! notification received while earlier statements ran, else waits up to its timeout for one and
//! returns `Ok(None)` when none came.
//!
//! # The test cluster (feature `cluster`)
//!
//! `cluster::TestCluster::start()` runs `initdb` and `pg_ctl` from the newest
//! `/usr/lib/postgresql/<version>/bin` (else `PATH`) in a fresh temporary directory, listening
//! only on a Unix socket there (no TCP). When the server is missing and the process runs as
//! root, it installs Debian's `postgresql` package first (`apt-get install -y
//! --no-install-recommends postgresql`, serialized across processes by a file lock). The server
//! refuses to run as root, so as root it runs as `nobody`. Dropping the cluster stops the
//! server and removes the directory; a watcher process does the same if the test process dies
//! first. See the module's docs for the builder options (`fsync` for benchmarks, extra
//! settings, a TCP listener on `127.0.0.1`, TLS with a given certificate and key).
//!
//! ```toml
//! # A crate's tests that need a server:
//! [dev-dependencies]
//! kanban-pgwire = { workspace = true, features = ["cluster"] }
//! ```
//!
//! ```no_run
//! use kanban_pgwire::cluster::TestCluster;
//! // One server per test binary; each test takes its own database.
//! let cluster = TestCluster::shared().expect("a PostgreSQL test server");
//! cluster.create_database("my_test").expect("a fresh database");
//! let url = cluster.url("my_test"); // postgres://postgres@%2Ftmp%2Fkanban-pg-…:5432/my_test
//! let mut client = cluster.connect("my_test").expect("connect");
//! # let _ = (url, &mut client);
//! ```

mod client;
mod config;
mod error;
mod tls;
mod value;

#[cfg(feature = "cluster")]
pub mod cluster;
#[cfg(feature = "cluster")]
pub mod test_ca;

pub use client::{
    CacheStats, Client, DEFAULT_STATEMENT_CACHE_CAPACITY, Notification, TransactionStatus,
    quote_identifier, quote_literal,
};
pub use config::{
    ChannelBinding, Config, DEFAULT_PORT, DEFAULT_READ_TIMEOUT, DEFAULT_SOCKET_DIR, Host, SslMode,
    url_parameter_names,
};
pub use error::{DbError, Error, Result};
pub use value::{Column, Row, Value, oid};
