//! The connection: startup and authentication, the simple and extended query protocols, the
//! prepared-statement cache, and notifications.

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{ChannelBinding as ChannelBindingMode, Config, Host, SslMode};
use bytes::BytesMut;
use postgres_protocol::authentication::sasl::ChannelBinding;
use postgres_protocol::authentication::{self, sasl};
use postgres_protocol::escape;
use postgres_protocol::message::frontend;

use crate::error::{DbError, Error, Result};
use crate::tls::{self, TlsStream};
use crate::value::{Column, Row, Value};

/// The number of prepared statements a connection keeps by default.
pub const DEFAULT_STATEMENT_CACHE_CAPACITY: usize = 256;

/// The largest message accepted from the server (PostgreSQL's own limit for a field is 1 GiB).
const MAX_MESSAGE: usize = 1 << 30;

/// Where the connection stands with respect to transactions, as the server last reported it
/// (`ReadyForQuery`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionStatus {
    /// Not in a transaction block.
    Idle,
    /// Inside a transaction block (`BEGIN` ran).
    InTransaction,
    /// Inside a failed transaction block: every statement is refused until `ROLLBACK`.
    Failed,
}

/// A `NOTIFY` delivered to a channel this connection listens on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// The server process that sent it.
    pub process_id: i32,
    /// The channel.
    pub channel: String,
    /// The payload (empty when none was given).
    pub payload: String,
}

/// Counters of the prepared-statement cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Statements currently prepared on the server by the cache.
    pub len: usize,
    /// Executions that reused a prepared statement.
    pub hits: u64,
    /// Executions that had to prepare one.
    pub misses: u64,
}

enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsStream>),
    Unix(UnixStream),
}

impl Stream {
    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Tls(s) => s.sock.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }
    fn set_write_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(t),
            Stream::Tls(s) => s.sock.set_write_timeout(t),
            Stream::Unix(s) => s.set_write_timeout(t),
        }
    }
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(buf),
            Stream::Tls(s) => s.write_all(buf).and_then(|()| s.flush()),
            Stream::Unix(s) => s.write_all(buf),
        }
    }
    fn shutdown(&self) {
        // Best effort: the peer may be gone already.
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Tls(s) => s.sock.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
}

struct Statement {
    name: String,
    columns: Arc<[Column]>,
    last_used: u64,
}

/// The statement cache key: the SQL text and the parameter types it was prepared with.
type StatementKey = (String, Vec<u32>);

/// One message from the server: its tag and body.
struct Message {
    tag: u8,
    body: Vec<u8>,
}

/// What reading a message gave when a deadline applies.
enum Received {
    Message(Message),
    TimedOut,
}

/// A connection to a PostgreSQL server. Blocking, one statement at a time; not `Sync` (one
/// owner), cheap to keep open. After an I/O or protocol error it is closed ([`Client::is_closed`])
/// and every call returns [`Error::Closed`]; reconnecting is the caller's job.
pub struct Client {
    stream: Stream,
    /// What the client is connected to, for error messages (never the password).
    target: String,
    buf: Vec<u8>,
    pos: usize,
    out: Vec<u8>,
    closed: bool,
    status: TransactionStatus,
    notifications: VecDeque<Notification>,
    parameters: HashMap<String, String>,
    backend_pid: i32,
    statements: HashMap<StatementKey, Statement>,
    /// Server statements to close in the next round trip (evicted from the cache).
    to_close: Vec<String>,
    capacity: usize,
    next_statement: u64,
    tick: u64,
    hits: u64,
    misses: u64,
    query_timeout: Option<Duration>,
    /// How many times the output buffer was sent ([`Client::round_trips`]).
    flushes: u64,
    /// Where the messages of the queued statements start in `out`.
    deferred_from: Option<usize>,
    /// Prepared statements whose `Close` is in `out`, not sent yet.
    closing: Vec<String>,
    /// Statements queued by [`Client::execute_deferred`] whose messages are in `out`, not yet
    /// sent or not yet answered, oldest first.
    deferred: Vec<Deferred>,
    /// The last call that sent queued statements failed because one of them did.
    queued_failed: bool,
    /// The TLS channel's `tls-server-end-point` binding, for SCRAM-SHA-256-PLUS.
    server_end_point: Option<Vec<u8>>,
    /// SCRAM bound the login to the TLS channel.
    channel_bound: bool,
}

/// Where the authentication exchange stands during startup.
enum Auth {
    /// The server asked for nothing yet.
    None,
    /// A cleartext or md5 password was sent.
    Sent,
    /// The SCRAM client-first-message was sent.
    ScramStarted(Box<sasl::ScramSha256>),
    /// The SCRAM client-final-message was sent; the server must prove itself next.
    ScramFinal(Box<sasl::ScramSha256>),
    /// The server's SCRAM signature was verified.
    ScramDone,
    /// `AuthenticationOk` received.
    Ok,
}

/// A statement queued in the pipeline: what registering its prepared statement needs.
struct Deferred {
    key: StatementKey,
    name: String,
    /// Prepared by this message sequence (not taken from the cache).
    fresh: bool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("target", &self.target)
            .field("backend_pid", &self.backend_pid)
            .field("status", &self.status)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects (over TLS as `sslmode` says), authenticates (trust, SCRAM-SHA-256, bound to the
    /// TLS channel when the server offers SCRAM-SHA-256-PLUS, and md5 or a
    /// cleartext password over a Unix socket or where [`Config::allow_weak_auth`] says so) and
    /// waits until the server is ready. The connect timeout of `config`
    /// bounds the TCP connect and each read of the handshake.
    pub fn connect(config: &Config) -> Result<Client> {
        match (config.host(), config.ssl_mode()) {
            (Host::Unix(_), _) | (Host::Tcp(_), SslMode::Disable) => {
                Client::connect_with(config, false)
            }
            // libpq's `allow`: plaintext, and TLS only when the server refuses it.
            (Host::Tcp(_), SslMode::Allow) => match Client::connect_with(config, false) {
                Err(Error::Db(_)) => Client::connect_with(config, true),
                other => other,
            },
            (Host::Tcp(_), _) => Client::connect_with(config, true),
        }
    }

    /// One connection attempt; over TCP with `tls`, TLS is asked for first.
    fn connect_with(config: &Config, tls: bool) -> Result<Client> {
        let timeout = config.connect_timeout();
        let (stream, target) = match config.host() {
            Host::Unix(_) => {
                let path = config.socket_path().unwrap_or_default();
                let target = path.display().to_string();
                let s = UnixStream::connect(&path).map_err(|e| {
                    Error::io(
                        format!("cannot connect to the PostgreSQL socket {target}"),
                        e,
                    )
                })?;
                (Stream::Unix(s), target)
            }
            Host::Tcp(host) => {
                let target = if host.contains(':') {
                    format!("[{host}]:{}", config.port())
                } else {
                    format!("{host}:{}", config.port())
                };
                let addrs = (host.as_str(), config.port())
                    .to_socket_addrs()
                    .map_err(|e| {
                        Error::io(format!("cannot resolve the PostgreSQL host {target}"), e)
                    })?;
                let mut last = None;
                let mut stream = None;
                for addr in addrs {
                    let r = match timeout {
                        Some(t) => TcpStream::connect_timeout(&addr, t),
                        None => TcpStream::connect(addr),
                    };
                    match r {
                        Ok(s) => {
                            stream = Some(s);
                            break;
                        }
                        Err(e) => last = Some(e),
                    }
                }
                let s = match stream {
                    Some(s) => s,
                    None => {
                        let e = last.unwrap_or_else(|| {
                            std::io::Error::new(std::io::ErrorKind::NotFound, "no address")
                        });
                        return Err(Error::io(
                            format!("cannot connect to PostgreSQL at {target}"),
                            e,
                        ));
                    }
                };
                // Small request/response messages: do not wait to coalesce them.
                s.set_nodelay(true)
                    .and_then(|()| keep_alive(&s))
                    .and_then(|()| s.set_read_timeout(timeout.or(config.read_timeout())))
                    .and_then(|()| s.set_write_timeout(timeout.or(config.read_timeout())))
                    .map_err(|e| {
                        Error::io(format!("cannot configure the socket to {target}"), e)
                    })?;
                let stream = if tls {
                    negotiate_tls(config, host, s, &target)?
                } else {
                    Stream::Tcp(s)
                };
                (stream, target)
            }
        };
        let server_end_point = match &stream {
            Stream::Tls(s) => tls::server_end_point(s),
            Stream::Tcp(_) | Stream::Unix(_) => None,
        };
        let mut client = Client {
            server_end_point,
            channel_bound: false,
            stream,
            target,
            buf: Vec::with_capacity(8192),
            pos: 0,
            out: Vec::with_capacity(1024),
            closed: false,
            status: TransactionStatus::Idle,
            notifications: VecDeque::new(),
            parameters: HashMap::new(),
            backend_pid: 0,
            statements: HashMap::new(),
            to_close: Vec::new(),
            capacity: DEFAULT_STATEMENT_CACHE_CAPACITY,
            next_statement: 0,
            tick: 0,
            hits: 0,
            misses: 0,
            query_timeout: None,
            deferred: Vec::new(),
            flushes: 0,
            deferred_from: None,
            closing: Vec::new(),
            queued_failed: false,
        };
        client.set_timeouts(timeout.or(config.read_timeout()))?;
        client.startup(config)?;
        client.query_timeout = config.read_timeout();
        client.set_timeouts(client.query_timeout)?;
        Ok(client)
    }

    fn set_timeouts(&mut self, t: Option<Duration>) -> Result<()> {
        let r = self
            .stream
            .set_read_timeout(t)
            .and_then(|()| self.stream.set_write_timeout(t));
        r.map_err(|e| self.fail_io("cannot set the socket timeout", e))
    }

    fn startup(&mut self, config: &Config) -> Result<()> {
        let mut params = vec![
            ("user", config.user()),
            ("database", config.dbname()),
            ("client_encoding", "UTF8"),
            ("DateStyle", "ISO"),
        ];
        if let Some(name) = config.application_name() {
            params.push(("application_name", name));
        }
        self.encode(|b| frontend::startup_message(params, b))?;
        self.flush()?;

        let mut auth = Auth::None;
        loop {
            let msg = self.next()?;
            match msg.tag {
                b'R' => {
                    let mut r = Reader::new(&msg.body);
                    let code = r.i32()?;
                    auth = self.authenticate(config, code, r.rest(), auth)?;
                }
                b'E' => {
                    let e = DbError::parse(&msg.body);
                    self.close_now();
                    return Err(Error::Db(Box::new(e)));
                }
                b'K' => {
                    let mut r = Reader::new(&msg.body);
                    self.backend_pid = r.i32()?;
                }
                b'v' => {} // NegotiateProtocolVersion: we asked for no protocol options.
                b'Z' => {
                    if !matches!(auth, Auth::Ok) {
                        return Err(self.fail_protocol("ReadyForQuery before AuthenticationOk"));
                    }
                    self.status = transaction_status(&msg.body)?;
                    return Ok(());
                }
                other => {
                    return Err(self.fail_protocol(&format!(
                        "unexpected message `{}` during startup",
                        char::from(other)
                    )));
                }
            }
        }
    }

    /// Answers one authentication request (`code`, the rest of the message in `body`) and
    /// returns where the exchange stands.
    fn authenticate(
        &mut self,
        config: &Config,
        code: i32,
        body: &[u8],
        auth: Auth,
    ) -> Result<Auth> {
        match (code, auth) {
            (0, Auth::None | Auth::Sent | Auth::ScramDone)
                if config.channel_binding() == ChannelBindingMode::Require
                    && !self.channel_bound =>
            {
                Err(self.fail_auth(
                    "channel_binding=require, but the server let the client in without a \
                     channel-bound SCRAM-SHA-256-PLUS login"
                        .into(),
                ))
            }
            (0, Auth::None | Auth::Sent | Auth::ScramDone) => Ok(Auth::Ok),
            (0, Auth::ScramStarted(_) | Auth::ScramFinal(_)) => Err(self.fail_auth(
                "the server sent AuthenticationOk before proving it knows the password (no \
                 SCRAM server signature): refusing a server that may be an impostor"
                    .into(),
            )),
            (3 | 5, Auth::None) => {
                let method = if code == 3 { "password" } else { "md5" };
                if config.channel_binding() == ChannelBindingMode::Require {
                    return Err(self.fail_auth(format!(
                        "channel_binding=require, but the server asks for the `{method}` \
                         method, which cannot bind the login to the channel"
                    )));
                }
                if matches!(config.host(), Host::Tcp(_)) && !config.allow_weak_auth() {
                    return Err(self.fail_auth(format!(
                        "the server asks for the `{method}` method over TCP, which exposes the \
                         password to the network or to a spoofed server; use scram-sha-256 on \
                         the server, or add allow_weak_auth=true to the URL to accept it"
                    )));
                }
                let pw = need_password(config, method)?;
                let answer = if code == 3 {
                    pw.as_bytes().to_vec()
                } else {
                    let salt = Reader::new(body).array::<4>()?;
                    authentication::md5_hash(config.user().as_bytes(), pw.as_bytes(), salt)
                        .into_bytes()
                };
                self.encode(|b| frontend::password_message(&answer, b))?;
                self.flush()?;
                Ok(Auth::Sent)
            }
            (10, Auth::None) => {
                let mut r = Reader::new(body);
                let mut mechanisms = Vec::new();
                while r.remaining() > 0 {
                    let m = r.cstr()?;
                    if m.is_empty() {
                        break;
                    }
                    mechanisms.push(m);
                }
                let offers = |name: &str| mechanisms.iter().any(|m| m == name);
                let pw = need_password(config, "scram-sha-256")?;
                // Over TLS, bind the login to the channel when the server can (a man in the
                // middle then cannot relay it); `y` tells a server that stripped the PLUS
                // offer that this client could have bound it.
                // `channel_binding=disable` never binds; `require` binds or refuses.
                let (mechanism, binding) = match (config.channel_binding(), &self.server_end_point)
                {
                    (ChannelBindingMode::Disable, _) => {
                        (sasl::SCRAM_SHA_256, ChannelBinding::unsupported())
                    }
                    (_, Some(hash)) if offers(sasl::SCRAM_SHA_256_PLUS) => (
                        sasl::SCRAM_SHA_256_PLUS,
                        ChannelBinding::tls_server_end_point(hash.clone()),
                    ),
                    (ChannelBindingMode::Require, hash) => {
                        let why = if !self.is_encrypted() {
                            "the connection is not encrypted (TLS is off, or a Unix socket)"
                        } else if hash.is_none() {
                            "the server's certificate has no channel-binding hash (Ed25519 or \
                             RSA-PSS)"
                        } else {
                            "the server does not offer SCRAM-SHA-256-PLUS"
                        };
                        return Err(self.fail_auth(format!(
                            "channel_binding=require, but the login cannot be bound to the \
                             channel: {why}"
                        )));
                    }
                    (ChannelBindingMode::Prefer, Some(_)) => {
                        (sasl::SCRAM_SHA_256, ChannelBinding::unrequested())
                    }
                    (ChannelBindingMode::Prefer, None) => {
                        (sasl::SCRAM_SHA_256, ChannelBinding::unsupported())
                    }
                };
                if !offers(mechanism) {
                    return Err(self.fail_auth(format!(
                        "the server offers only the SASL mechanisms {mechanisms:?} (this client \
                         speaks SCRAM-SHA-256 and, over TLS, SCRAM-SHA-256-PLUS)"
                    )));
                }
                let scram = sasl::ScramSha256::new(pw.as_bytes(), binding);
                self.encode(|b| frontend::sasl_initial_response(mechanism, scram.message(), b))?;
                self.flush()?;
                self.channel_bound = mechanism == sasl::SCRAM_SHA_256_PLUS;
                Ok(Auth::ScramStarted(Box::new(scram)))
            }
            (11, Auth::ScramStarted(mut scram)) => {
                if let Err(e) = scram.update(body) {
                    return Err(self.fail_auth(format!(
                        "the server's SCRAM-SHA-256 challenge is refused: {e}"
                    )));
                }
                self.encode(|b| frontend::sasl_response(scram.message(), b))?;
                self.flush()?;
                Ok(Auth::ScramFinal(scram))
            }
            (12, Auth::ScramFinal(mut scram)) => match scram.finish(body) {
                Ok(()) => Ok(Auth::ScramDone),
                Err(e) => Err(self.fail_auth(format!(
                    "the server's SCRAM-SHA-256 signature is refused, it does not know the \
                     password: {e}"
                ))),
            },
            (10..=12, _) => Err(self.fail_auth(format!(
                "the server sent the SASL message {code} out of order"
            ))),
            (0 | 3 | 5, _) => Err(self.fail_auth(format!(
                "the server asked for authentication (code {code}) twice"
            ))),
            (other, _) => {
                let name = match other {
                    2 => "Kerberos V5",
                    6 => "SCM credentials",
                    7 | 8 => "GSSAPI",
                    9 => "SSPI",
                    _ => "an unknown method",
                };
                Err(self.fail_auth(format!(
                    "the server asks for {name} (code {other}); this client supports trust, \
                     password, md5 and scram-sha-256"
                )))
            }
        }
    }

    /// Appends a message written by `postgres-protocol`'s encoder to the output buffer.
    fn encode(&mut self, write: impl FnOnce(&mut BytesMut) -> std::io::Result<()>) -> Result<()> {
        let mut buf = BytesMut::new();
        write(&mut buf)
            .map_err(|e| self.fail_protocol(&format!("cannot encode a message: {e}")))?;
        self.out.extend_from_slice(&buf);
        Ok(())
    }

    /// True when the login was bound to the TLS channel (SCRAM-SHA-256-PLUS with
    /// `tls-server-end-point`): the server proved it saw the same certificate.
    pub fn is_channel_bound(&self) -> bool {
        self.channel_bound
    }

    /// True when the connection runs over TLS.
    pub fn is_encrypted(&self) -> bool {
        matches!(self.stream, Stream::Tls(_))
    }

    /// True once an I/O, protocol or fatal server error ended the connection.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The transaction status the server reported after the last statement.
    pub fn transaction_status(&self) -> TransactionStatus {
        self.status
    }

    /// The server's process id for this session (`pg_backend_pid()`).
    pub fn backend_pid(&self) -> i32 {
        self.backend_pid
    }

    /// A run-time parameter the server reported (`server_version`, `TimeZone`, …).
    pub fn server_parameter(&self, name: &str) -> Option<&str> {
        self.parameters.get(name).map(String::as_str)
    }

    /// What the client is connected to (socket path or `host:port`), for messages.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Bounds each wait for the server during a statement (`None`: wait as long as it takes;
    /// it starts as the connection's [`Config::read_timeout`]). When it expires the connection is closed and the call returns an
    /// [`Error::Io`] with kind `TimedOut`/`WouldBlock`: the statement may or may not have run.
    pub fn set_query_timeout(&mut self, timeout: Option<Duration>) -> Result<()> {
        self.check_open()?;
        self.query_timeout = timeout;
        self.set_timeouts(timeout)
    }

    /// Sets how many prepared statements the cache keeps (at least 1); the least recently
    /// used are closed on the server beyond it.
    pub fn set_statement_cache_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
        while self.statements.len() > self.capacity {
            self.evict_lru();
        }
    }

    /// The cache's counters.
    pub fn cache_stats(&self) -> CacheStats {
        CacheStats {
            len: self.statements.len(),
            hits: self.hits,
            misses: self.misses,
        }
    }

    /// How many times this client has sent messages to the server and (but for `Terminate`)
    /// waited for the answer: the round trips made so far, the start-up included.
    pub fn round_trips(&self) -> u64 {
        self.flushes
    }

    /// Runs one statement with parameters `$1…$n` and returns the rows it affected (or
    /// returned, for a `SELECT`); 0 for statements that report no count.
    pub fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        self.extended(sql, params, false).map(|(_, n)| n)
    }

    /// Queues one statement with parameters `$1…$n` whose result the caller does not need:
    /// its messages are sent with the next call that waits for the server ([`Client::execute`],
    /// [`Client::query`], [`Client::batch`], [`Client::sync`], …), in the same round trip and
    /// before that call's own statement. A queued statement that fails aborts what follows it
    /// up to that call's end: the server skips the rest (the calling statement too), the flushing
    /// call returns the first queued error, and inside a transaction block the transaction is
    /// then failed ([`TransactionStatus::Failed`]: only `ROLLBACK` is accepted). Outside a
    /// transaction block the queued statements and the flushing call's statement run in one
    /// implicit transaction. Parameter and text checks are made here, before anything is queued.
    pub fn execute_deferred(&mut self, sql: &str, params: &[Value]) -> Result<()> {
        self.check_open()?;
        check_statement(sql, params)?;
        let types: Vec<u32> = params.iter().map(Value::param_type).collect();
        let key: StatementKey = (sql.to_string(), types);
        if self.deferred.is_empty() {
            self.deferred_from = Some(self.out.len());
        }
        let (name, _, fresh) = self.write_extended(&key, params);
        self.deferred.push(Deferred { key, name, fresh });
        Ok(())
    }

    /// Drops the statements [`Client::execute_deferred`] queued, unsent: the server never sees
    /// them (e.g. a transaction given up before its first round trip).
    pub fn discard_deferred(&mut self) {
        if let Some(from) = self.deferred_from.take() {
            self.out.truncate(from);
        }
        self.deferred.clear();
        // Statements evicted from the cache meanwhile are closed with the next message.
        self.to_close.append(&mut self.closing);
    }

    /// True when the error of the last call came from a statement queued by
    /// [`Client::execute_deferred`] rather than from the call's own statement.
    pub fn queued_failed(&self) -> bool {
        self.queued_failed
    }

    /// How many statements [`Client::execute_deferred`] queued that have not been sent yet.
    pub fn deferred(&self) -> usize {
        self.deferred.len()
    }

    /// Sends the queued statements (if any) with a `Sync` and waits for their results: the
    /// first queued error, if one failed (see [`Client::execute_deferred`]).
    pub fn sync(&mut self) -> Result<()> {
        self.check_open()?;
        if self.deferred.is_empty() {
            return Ok(());
        }
        self.message(b'S', |_| {});
        self.flush()?;
        let error = self.read_deferred()?;
        self.read_to_ready(error)
    }

    /// Runs one statement with parameters `$1…$n` and returns its rows.
    pub fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        self.extended(sql, params, true).map(|(rows, _)| rows)
    }

    /// Like [`Client::query`], for a statement returning at most one row.
    pub fn query_opt(&mut self, sql: &str, params: &[Value]) -> Result<Option<Row>> {
        let mut rows = self.query(sql, params)?;
        match rows.len() {
            0 | 1 => Ok(rows.pop()),
            n => Err(Error::RowCount {
                expected: "at most one row",
                got: n,
            }),
        }
    }

    /// Like [`Client::query`], for a statement returning exactly one row.
    pub fn query_one(&mut self, sql: &str, params: &[Value]) -> Result<Row> {
        let mut rows = self.query(sql, params)?;
        match rows.len() {
            1 => Ok(rows.remove(0)),
            n => Err(Error::RowCount {
                expected: "exactly one row",
                got: n,
            }),
        }
    }

    /// Runs `sql` with the simple-query protocol: any number of `;`-separated statements
    /// without parameters (DDL, `BEGIN`/`COMMIT`, `SET`). Results are discarded; the first
    /// error is returned (the server stops at it; statements outside an explicit transaction
    /// block run in one implicit transaction).
    pub fn batch(&mut self, sql: &str) -> Result<()> {
        self.check_open()?;
        if sql.contains('\0') {
            return Err(Error::Config("the SQL text contains a NUL byte".into()));
        }
        // Queued statements go first, closed by a Sync: after an error the server skips
        // extended-protocol messages up to the next Sync, and a Query among them would be lost.
        self.queued_failed = false;
        let queued = !self.deferred.is_empty();
        if queued {
            self.message(b'S', |_| {});
        }
        self.message(b'Q', |b| {
            b.extend_from_slice(sql.as_bytes());
            b.push(0);
        });
        self.flush()?;
        let mut error = None;
        if queued {
            let first = self.read_deferred()?;
            if let Err(e) = self.read_to_ready(first) {
                error = Some(e);
            }
        }
        self.read_simple(error)
    }

    /// Runs one statement with parameters `$1…$n` and returns its rows; the statements of
    /// `then` (each with its parameters, e.g. `COMMIT`) follow it in the same round trip, as
    /// [`Client::execute_deferred`] statements would, their results unread but their first
    /// error returned. Statements queued before go first, as for [`Client::query`].
    ///
    /// A failure stops the rest: after a failed statement the server skips what follows up to
    /// the round trip's end, so inside a transaction block nothing of `then` runs (a `COMMIT`
    /// there does not) and the transaction is failed ([`TransactionStatus::Failed`]).
    pub fn query_then(
        &mut self,
        sql: &str,
        params: &[Value],
        then: &[(&str, &[Value])],
    ) -> Result<Vec<Row>> {
        self.check_open()?;
        check_statement(sql, params)?;
        for (sql, params) in then {
            check_statement(sql, params)?;
        }
        let types: Vec<u32> = params.iter().map(Value::param_type).collect();
        let key: StatementKey = (sql.to_string(), types);
        let tick = self.tick + 1;
        let written = self.write_extended(&key, params);
        let before = std::mem::take(&mut self.deferred);
        for (sql, params) in then {
            self.execute_deferred(sql, params)?;
        }
        let after = std::mem::replace(&mut self.deferred, before);
        self.message(b'S', |_| {});
        self.flush()?;
        let main_ran = self.read_extended(&key, written, tick, true, !after.is_empty());
        let rows = match main_ran {
            Ok((rows, _)) if !after.is_empty() => {
                // The statement succeeded: the server runs `then` (else it skipped to the Sync).
                self.deferred = after;
                let error = self.read_deferred()?;
                self.read_to_ready(error)?;
                rows
            }
            other => other?.0,
        };
        Ok(rows)
    }

    /// Reads the answers of one simple query up to its `ReadyForQuery`; returns `error`, else
    /// the first error the server sent.
    fn read_simple(&mut self, mut error: Option<Error>) -> Result<()> {
        loop {
            let msg = self.next()?;
            match msg.tag {
                b'T' | b'D' | b'C' | b'I' | b'H' | b'd' | b'c' => {}
                b'G' => self.copy_fail(false)?,
                b'E' => {
                    let e = self.db_error(&msg.body);
                    error.get_or_insert(e);
                }
                b'Z' => {
                    self.status = transaction_status(&msg.body)?;
                    return match error {
                        Some(e) => Err(e),
                        None => Ok(()),
                    };
                }
                other => return Err(self.unexpected(other)),
            }
        }
    }

    /// `LISTEN` on `channel` (quoted as an identifier, so any name works).
    pub fn listen(&mut self, channel: &str) -> Result<()> {
        self.batch(&format!("LISTEN {}", quote_identifier(channel)?))
    }

    /// `UNLISTEN` `channel`.
    pub fn unlisten(&mut self, channel: &str) -> Result<()> {
        self.batch(&format!("UNLISTEN {}", quote_identifier(channel)?))
    }

    /// Returns the next notification: one buffered while other statements ran, else the first
    /// to arrive within `timeout`; `Ok(None)` when none came in time. `Duration::ZERO` polls:
    /// it reads what the server has already sent, waiting at most a millisecond. A server that
    /// goes away is an error, never a wait beyond `timeout`.
    pub fn wait_notification(&mut self, timeout: Duration) -> Result<Option<Notification>> {
        self.check_open()?;
        self.sync()?;
        if let Some(n) = self.notifications.pop_front() {
            return Ok(Some(n));
        }
        let deadline = Instant::now() + timeout;
        let result = self.wait_until(deadline);
        // Back to the statement timeout for the next statement.
        if !self.closed {
            self.set_timeouts(self.query_timeout)?;
        }
        result
    }

    /// How many notifications are buffered (received while statements ran, not yet returned).
    pub fn pending_notifications(&self) -> usize {
        self.notifications.len()
    }

    /// Returns the notifications already buffered, without waiting or reading the socket.
    pub fn take_notifications(&mut self) -> Vec<Notification> {
        self.notifications.drain(..).collect()
    }

    fn wait_until(&mut self, deadline: Instant) -> Result<Option<Notification>> {
        loop {
            match self.read_message(Some(deadline))? {
                Received::TimedOut => return Ok(None),
                Received::Message(msg) => match msg.tag {
                    b'A' => {
                        let n =
                            parse_notification(&msg.body).map_err(|e| self.fail_protocol_err(e))?;
                        return Ok(Some(n));
                    }
                    b'N' => {}
                    b'S' => self.parameter_status(&msg.body),
                    b'E' => return Err(self.db_error(&msg.body)),
                    other => return Err(self.unexpected(other)),
                },
            }
        }
    }

    /// The extended protocol: (Close…) (Parse Describe) Bind Execute Sync in one round trip.
    fn extended(
        &mut self,
        sql: &str,
        params: &[Value],
        want_rows: bool,
    ) -> Result<(Vec<Row>, u64)> {
        self.check_open()?;
        check_statement(sql, params)?;
        let types: Vec<u32> = params.iter().map(Value::param_type).collect();
        let key: StatementKey = (sql.to_string(), types);
        let was_cached = self.statements.contains_key(&key);
        let queued = !self.deferred.is_empty();
        match self.run_extended(&key, params, want_rows) {
            // A cached statement the server no longer has (DISCARD ALL) or whose result
            // changed shape (ALTER TABLE): prepare it again, once, when no transaction block
            // was affected by the failure and no queued statement ran with it.
            Err(Error::Db(e))
                if was_cached
                    && !queued
                    && stale_statement(&e)
                    && self.status == TransactionStatus::Idle =>
            {
                self.run_extended(&key, params, want_rows)
            }
            other => other,
        }
    }

    /// Appends (Close…) (Parse Describe) Bind Execute of one statement to the output buffer;
    /// returns its server name, its cached columns and whether it is prepared afresh.
    fn write_extended(
        &mut self,
        key: &StatementKey,
        params: &[Value],
    ) -> (String, Option<Arc<[Column]>>, bool) {
        self.tick += 1;
        let tick = self.tick;
        let cached = self.statements.get_mut(key).map(|s| {
            s.last_used = tick;
            (s.name.clone(), Arc::clone(&s.columns))
        });
        self.write_closes();
        let (name, columns, fresh) = match cached {
            Some((name, columns)) => {
                self.hits += 1;
                (name, Some(columns), false)
            }
            None => {
                self.misses += 1;
                while self.statements.len() >= self.capacity {
                    self.evict_lru();
                }
                self.write_closes();
                self.next_statement += 1;
                let name = format!("pgwire_{}", self.next_statement);
                let (sql, types) = key;
                self.message(b'P', |b| {
                    b.extend_from_slice(name.as_bytes());
                    b.push(0);
                    b.extend_from_slice(sql.as_bytes());
                    b.push(0);
                    b.extend_from_slice(&len_i16(types.len()).to_be_bytes());
                    for t in types {
                        b.extend_from_slice(&t.to_be_bytes());
                    }
                });
                self.message(b'D', |b| {
                    b.push(b'S');
                    b.extend_from_slice(name.as_bytes());
                    b.push(0);
                });
                (name, None, true)
            }
        };
        self.message(b'B', |b| {
            b.push(0); // unnamed portal
            b.extend_from_slice(name.as_bytes());
            b.push(0);
            b.extend_from_slice(&0_i16.to_be_bytes()); // every parameter in text format
            b.extend_from_slice(&len_i16(params.len()).to_be_bytes());
            for p in params {
                let at = b.len();
                b.extend_from_slice(&[0; 4]);
                if p.encode(b) {
                    let len = len_i32(b.len() - at - 4);
                    b[at..at + 4].copy_from_slice(&len.to_be_bytes());
                } else {
                    b[at..at + 4].copy_from_slice(&(-1_i32).to_be_bytes());
                }
            }
            b.extend_from_slice(&0_i16.to_be_bytes()); // every result column in text format
        });
        self.message(b'E', |b| {
            b.push(0);
            b.extend_from_slice(&0_i32.to_be_bytes());
        });
        (name, columns, fresh)
    }

    /// Appends a `Close` of each statement waiting to be closed to the output buffer.
    fn write_closes(&mut self) {
        for name in std::mem::take(&mut self.to_close) {
            self.message(b'C', |b| {
                b.push(b'S');
                b.extend_from_slice(name.as_bytes());
                b.push(0);
            });
            self.closing.push(name);
        }
    }

    fn run_extended(
        &mut self,
        key: &StatementKey,
        params: &[Value],
        want_rows: bool,
    ) -> Result<(Vec<Row>, u64)> {
        let tick = self.tick + 1;
        let (name, columns, fresh) = self.write_extended(key, params);
        self.message(b'S', |_| {});
        self.flush()?;
        self.read_extended(key, (name, columns, fresh), tick, want_rows, false)
    }

    /// Reads the answers of the queued statements and then of one statement written by
    /// [`Client::write_extended`] (`written`) and its `Sync`, up to `ReadyForQuery`.
    fn read_extended(
        &mut self,
        key: &StatementKey,
        written: (String, Option<Arc<[Column]>>, bool),
        tick: u64,
        want_rows: bool,
        more: bool,
    ) -> Result<(Vec<Row>, u64)> {
        let (name, mut columns, fresh) = written;
        let mut parsed = false;
        let mut rows = Vec::new();
        let mut affected = 0;
        // A queued statement that failed: the server skipped this one (up to the Sync).
        let mut error: Option<Error> = self.read_deferred()?;
        loop {
            let msg = self.next()?;
            match msg.tag {
                b'1' => parsed = true,
                b'2' | b'3' | b't' | b'I' | b's' | b'H' | b'd' | b'c' => {}
                b'T' => match parse_row_description(&msg.body) {
                    Ok(c) => columns = Some(c.into()),
                    Err(e) => return Err(self.fail_protocol_err(e)),
                },
                b'n' => columns = Some(Arc::from(Vec::new())),
                b'D' => {
                    if want_rows && error.is_none() {
                        let Some(cols) = columns.as_ref() else {
                            return Err(self.fail_protocol("a data row before its description"));
                        };
                        match parse_data_row(cols, &msg.body) {
                            Ok(values) => rows.push(Row {
                                columns: Arc::clone(cols),
                                values,
                            }),
                            Err(e) => error = Some(Error::Protocol(e)),
                        }
                    }
                }
                b'C' => {
                    affected = rows_affected(&msg.body);
                    if more && error.is_none() {
                        // Statements follow before the Sync (`more`): the caller reads them.
                        break;
                    }
                }
                b'G' => self.copy_fail(true)?,
                b'E' => {
                    let e = self.db_error(&msg.body);
                    error.get_or_insert(e);
                }
                b'Z' => {
                    self.status = transaction_status(&msg.body)?;
                    break;
                }
                other => return Err(self.unexpected(other)),
            }
        }
        if fresh && parsed {
            self.register(key, name, columns, tick);
        }
        if let Some(Error::Db(e)) = &error {
            // The server lost or outdated the cached statement: prepare it afresh next time.
            if !fresh
                && stale_statement(e)
                && let Some(s) = self.statements.remove(key)
            {
                self.to_close.push(s.name);
            }
        }
        match error {
            Some(e) => Err(e),
            None => Ok((rows, affected)),
        }
    }

    fn evict_lru(&mut self) {
        let oldest = self
            .statements
            .iter()
            .min_by_key(|(_, s)| s.last_used)
            .map(|(k, _)| k.clone());
        if let Some(key) = oldest
            && let Some(s) = self.statements.remove(&key)
        {
            self.to_close.push(s.name);
        }
    }

    /// Caches a statement the server just prepared (closing it instead when its description is
    /// missing, or when the same text was prepared twice by queued statements).
    fn register(
        &mut self,
        key: &StatementKey,
        name: String,
        columns: Option<Arc<[Column]>>,
        tick: u64,
    ) {
        match columns {
            Some(columns) if !self.statements.contains_key(key) => {
                self.statements.insert(
                    key.clone(),
                    Statement {
                        name,
                        columns,
                        last_used: tick,
                    },
                );
            }
            _ => self.to_close.push(name),
        }
    }

    /// Reads the answers of the queued statements (sent already), registering the statements
    /// they prepared; returns the first error. After an error the server skips to the Sync, so
    /// the next message is the caller's `ReadyForQuery`.
    fn read_deferred(&mut self) -> Result<Option<Error>> {
        self.queued_failed = false;
        let deferred = std::mem::take(&mut self.deferred);
        let tick = self.tick;
        for d in deferred {
            let mut parsed = false;
            let mut columns: Option<Arc<[Column]>> = None;
            loop {
                let msg = self.next()?;
                match msg.tag {
                    b'1' => parsed = true,
                    b'2' | b'3' | b't' | b'D' => {}
                    b'T' => match parse_row_description(&msg.body) {
                        Ok(c) => columns = Some(c.into()),
                        Err(e) => return Err(self.fail_protocol_err(e)),
                    },
                    b'n' => columns = Some(Arc::from(Vec::new())),
                    b'C' | b'I' => break,
                    b'E' => {
                        let e = self.db_error(&msg.body);
                        if d.fresh && parsed {
                            self.register(&d.key, d.name, columns, tick);
                        } else if !d.fresh
                            && let Error::Db(db) = &e
                            && stale_statement(db)
                            && let Some(s) = self.statements.remove(&d.key)
                        {
                            self.to_close.push(s.name);
                        }
                        self.queued_failed = true;
                        return Ok(Some(e));
                    }
                    b'G' => return Err(self.fail_protocol("COPY in a queued statement")),
                    other => return Err(self.unexpected(other)),
                }
            }
            if d.fresh && parsed {
                self.register(&d.key, d.name, columns, tick);
            }
        }
        Ok(None)
    }

    /// Reads up to `ReadyForQuery` (skipping what the server sends before it) and returns
    /// `error` if there is one.
    fn read_to_ready(&mut self, mut error: Option<Error>) -> Result<()> {
        loop {
            let msg = self.next()?;
            match msg.tag {
                b'E' => {
                    let e = self.db_error(&msg.body);
                    error.get_or_insert(e);
                }
                b'Z' => {
                    self.status = transaction_status(&msg.body)?;
                    return match error {
                        Some(e) => Err(e),
                        None => Ok(()),
                    };
                }
                _ => {}
            }
        }
    }

    fn copy_fail(&mut self, extended: bool) -> Result<()> {
        self.message(b'f', |b| {
            b.extend_from_slice(b"COPY is not supported by this client\0")
        });
        if extended {
            // The Sync sent with the statement was ignored in copy mode.
            self.message(b'S', |_| {});
        }
        self.flush()
    }

    // ---- low level -------------------------------------------------------------------------

    fn check_open(&self) -> Result<()> {
        if self.closed {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Appends one frontend message (tag, length, body) to the output buffer.
    fn message(&mut self, tag: u8, body: impl FnOnce(&mut Vec<u8>)) {
        self.out.push(tag);
        let at = self.out.len();
        self.out.extend_from_slice(&[0; 4]);
        body(&mut self.out);
        let len = len_i32(self.out.len() - at);
        self.out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    }

    fn flush(&mut self) -> Result<()> {
        self.flushes += 1;
        self.deferred_from = None;
        self.closing.clear();
        let r = self.stream.write_all(&self.out);
        self.out.clear();
        r.map_err(|e| self.fail_io(&format!("cannot send to PostgreSQL at {}", self.target), e))
    }

    /// The next message that is not asynchronous (notifications are buffered, notices dropped,
    /// parameter changes recorded).
    fn next(&mut self) -> Result<Message> {
        loop {
            let msg = match self.read_message(None)? {
                Received::Message(m) => m,
                Received::TimedOut => {
                    let e = std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "no answer within the query timeout",
                    );
                    return Err(self.fail_io(
                        &format!("PostgreSQL at {} did not answer in time", self.target),
                        e,
                    ));
                }
            };
            match msg.tag {
                b'A' => {
                    let n = parse_notification(&msg.body).map_err(|e| self.fail_protocol_err(e))?;
                    self.notifications.push_back(n);
                }
                b'N' => {}
                b'S' => self.parameter_status(&msg.body),
                _ => return Ok(msg),
            }
        }
    }

    /// Reads one whole message; with a deadline, `TimedOut` when it passes first (a partly
    /// received message stays buffered; a deadline already past still gets one short read, so
    /// a zero timeout polls). Without one, the socket's own timeout applies.
    fn read_message(&mut self, deadline: Option<Instant>) -> Result<Received> {
        let mut tried = false;
        loop {
            let avail = self.buf.len() - self.pos;
            if avail >= 5 {
                let p = self.pos;
                let len = i32::from_be_bytes([
                    self.buf[p + 1],
                    self.buf[p + 2],
                    self.buf[p + 3],
                    self.buf[p + 4],
                ]);
                let len = usize::try_from(len).unwrap_or(0);
                if !(4..=MAX_MESSAGE).contains(&len) {
                    return Err(self.fail_protocol("a message with an impossible length"));
                }
                if avail > len {
                    let tag = self.buf[p];
                    let body = self.buf[p + 5..p + 1 + len].to_vec();
                    self.pos += 1 + len;
                    if self.pos == self.buf.len() {
                        self.buf.clear();
                        self.pos = 0;
                    }
                    return Ok(Received::Message(Message { tag, body }));
                }
            }
            if let Some(deadline) = deadline {
                let now = Instant::now();
                if now >= deadline && tried {
                    return Ok(Received::TimedOut);
                }
                let remaining = deadline
                    .saturating_duration_since(now)
                    .max(Duration::from_millis(1));
                self.set_timeouts(Some(remaining))?;
            }
            tried = true;
            if self.pos > 0 {
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
            let filled = self.buf.len();
            self.buf.resize(filled + 16 * 1024, 0);
            let r = self.stream.read(&mut self.buf[filled..]);
            match r {
                Ok(0) => {
                    self.buf.truncate(filled);
                    let e = std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    );
                    return Err(self.fail_io(
                        &format!("lost the connection to PostgreSQL at {}", self.target),
                        e,
                    ));
                }
                Ok(n) => self.buf.truncate(filled + n),
                Err(e) => {
                    self.buf.truncate(filled);
                    match e.kind() {
                        std::io::ErrorKind::Interrupted => {}
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                            if deadline.is_none() {
                                return Ok(Received::TimedOut);
                            }
                        }
                        _ => {
                            return Err(self.fail_io(
                                &format!("cannot read from PostgreSQL at {}", self.target),
                                e,
                            ));
                        }
                    }
                }
            }
        }
    }

    fn parameter_status(&mut self, body: &[u8]) {
        let mut r = Reader::new(body);
        if let (Ok(k), Ok(v)) = (r.cstr(), r.cstr()) {
            self.parameters.insert(k, v);
        }
    }

    /// A server error; a FATAL one ends the session.
    fn db_error(&mut self, body: &[u8]) -> Error {
        let e = DbError::parse(body);
        if e.is_fatal() {
            self.close_now();
        }
        Error::Db(Box::new(e))
    }

    fn unexpected(&mut self, tag: u8) -> Error {
        self.fail_protocol(&format!("unexpected message `{}`", char::from(tag)))
    }

    fn close_now(&mut self) {
        if !self.closed {
            self.closed = true;
            self.stream.shutdown();
        }
    }

    fn fail_io(&mut self, context: &str, e: std::io::Error) -> Error {
        self.close_now();
        Error::io(context, e)
    }

    fn fail_protocol(&mut self, what: &str) -> Error {
        self.close_now();
        Error::Protocol(format!("{what} (from {})", self.target))
    }

    fn fail_protocol_err(&mut self, e: Error) -> Error {
        self.close_now();
        e
    }

    fn fail_auth(&mut self, what: String) -> Error {
        self.close_now();
        Error::Auth(what)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if !self.closed {
            self.message(b'X', |_| {});
            // Best effort goodbye; the socket closes either way.
            let _ = self.stream.write_all(&self.out);
            self.stream.shutdown();
        }
    }
}

/// The server's answer to a cached statement it lost (`DISCARD ALL`: 26000) or whose result
/// changed shape (`cached plan must not change result type`: 0A000).
fn stale_statement(e: &DbError) -> bool {
    e.code == "26000" || (e.code == "0A000" && e.message.contains("cached plan"))
}

/// The checks made before a statement's messages are written: its parameter count, a NUL
/// byte in its text, and the 1 GiB message limit.
fn check_statement(sql: &str, params: &[Value]) -> Result<()> {
    if params.len() > usize::from(u16::MAX) {
        return Err(Error::Config(format!(
            "{} parameters: a statement takes at most 65535",
            params.len()
        )));
    }
    if sql.contains('\0') {
        return Err(Error::Config("the SQL text contains a NUL byte".into()));
    }
    let size: usize = params
        .iter()
        .map(|p| match p {
            Value::Text(t) => t.len(),
            Value::Blob(b) => 2 * b.len() + 2,
            _ => 24,
        })
        .sum();
    if size + sql.len() >= MAX_MESSAGE {
        return Err(Error::Config(
            "the statement and its parameters exceed PostgreSQL's 1 GiB message limit".into(),
        ));
    }
    Ok(())
}

/// Sends PostgreSQL's `SSLRequest` and, when the server agrees, runs the TLS handshake; a
/// server without TLS is refused under `require` and `verify-*`, kept in plaintext otherwise.
fn negotiate_tls(config: &Config, host: &str, mut s: TcpStream, target: &str) -> Result<Stream> {
    let mut request = BytesMut::new();
    frontend::ssl_request(&mut request);
    let mut answer = [0u8; 1];
    s.write_all(&request)
        .and_then(|()| s.read_exact(&mut answer))
        .map_err(|e| Error::io(format!("cannot ask PostgreSQL at {target} for TLS"), e))?;
    match answer[0] {
        b'S' => Ok(Stream::Tls(Box::new(tls::handshake(
            config, host, s, target,
        )?))),
        b'N' if matches!(config.ssl_mode(), SslMode::Allow | SslMode::Prefer) => Ok(Stream::Tcp(s)),
        b'N' => Err(Error::Config(format!(
            "PostgreSQL at {target} does not offer TLS, and sslmode={} requires it",
            config.ssl_mode()
        ))),
        other => Err(Error::Protocol(format!(
            "PostgreSQL at {target} answered the TLS request with `{}` (neither S nor N)",
            char::from(other).escape_default()
        ))),
    }
}

/// A TCP connection idle this long is probed…
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
/// …every this long…
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// …and given up after this many unanswered probes.
const KEEPALIVE_PROBES: u32 = 3;
/// Data sent and not acknowledged for this long also ends the connection (`TCP_USER_TIMEOUT`,
/// in milliseconds: keepalive alone does not cover a peer gone while a statement is in flight).
const TCP_USER_TIMEOUT_MS: u32 = 60_000;

/// Turns on TCP keepalive, so a half-open connection (the server's host gone, a NAT or
/// firewall that forgot it) fails within about a minute instead of the operating system's
/// two hours, and bounds how long sent data may stay unacknowledged.
fn keep_alive(s: &TcpStream) -> std::io::Result<()> {
    use rustix::net::sockopt;
    sockopt::set_socket_keepalive(s, true)?;
    sockopt::set_tcp_keepidle(s, KEEPALIVE_IDLE)?;
    sockopt::set_tcp_keepintvl(s, KEEPALIVE_INTERVAL)?;
    sockopt::set_tcp_keepcnt(s, KEEPALIVE_PROBES)?;
    sockopt::set_tcp_user_timeout(s, TCP_USER_TIMEOUT_MS)?;
    Ok(())
}

fn need_password<'c>(config: &'c Config, method: &str) -> Result<&'c str> {
    config.password().ok_or_else(|| {
        Error::Auth(format!(
            "the server asks for a password ({method}) and none is set: put it in the password \
             file or PGPASSWORD"
        ))
    })
}

/// Quotes an identifier (`"…"`, inner quotes doubled).
pub fn quote_identifier(name: &str) -> Result<String> {
    if name.is_empty() || name.contains('\0') {
        return Err(Error::Config(
            "an identifier must be non-empty and free of NUL bytes".into(),
        ));
    }
    Ok(escape::escape_identifier(name))
}

/// Quotes a string literal (`'…'`, inner quotes doubled; one with a backslash is written
/// ` E'…'` with the backslashes doubled, right whatever `standard_conforming_strings` says).
pub fn quote_literal(value: &str) -> Result<String> {
    if value.contains('\0') {
        return Err(Error::Config(
            "a string literal must be free of NUL bytes".into(),
        ));
    }
    Ok(escape::escape_literal(value))
}

fn len_i32(n: usize) -> i32 {
    // Messages are far below 2 GiB: the parameter count is checked, and the server caps
    // messages at 1 GiB anyway.
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn len_i16(n: usize) -> i16 {
    // Parameter counts are checked against 65535 first; the wire field is an Int16 that the
    // server reads as unsigned.
    u16::try_from(n).unwrap_or(u16::MAX) as i16
}

fn transaction_status(body: &[u8]) -> Result<TransactionStatus> {
    match body.first() {
        Some(b'I') => Ok(TransactionStatus::Idle),
        Some(b'T') => Ok(TransactionStatus::InTransaction),
        Some(b'E') => Ok(TransactionStatus::Failed),
        _ => Err(Error::Protocol(
            "a ReadyForQuery with an unknown status".into(),
        )),
    }
}

fn rows_affected(tag: &[u8]) -> u64 {
    let tag = String::from_utf8_lossy(tag);
    tag.trim_end_matches('\0')
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn parse_notification(body: &[u8]) -> Result<Notification> {
    let mut r = Reader::new(body);
    Ok(Notification {
        process_id: r.i32()?,
        channel: r.cstr()?,
        payload: r.cstr()?,
    })
}

fn parse_row_description(body: &[u8]) -> Result<Vec<Column>> {
    let mut r = Reader::new(body);
    let n = r.i16()?;
    let mut columns = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    for _ in 0..n {
        let name = r.cstr()?;
        r.bytes(6)?; // table oid, column number
        let type_oid = u32::from_be_bytes(r.array()?);
        r.bytes(8)?; // type size, type modifier, format
        columns.push(Column { name, type_oid });
    }
    Ok(columns)
}

fn parse_data_row(columns: &[Column], body: &[u8]) -> Result<Vec<Value>, String> {
    let mut r = Reader::new(body);
    let n = r.i16().map_err(|e| e.to_string())?;
    if usize::try_from(n).ok() != Some(columns.len()) {
        return Err(format!(
            "a data row of {n} columns where the description has {}",
            columns.len()
        ));
    }
    let mut values = Vec::with_capacity(columns.len());
    for col in columns {
        let len = r.i32().map_err(|e| e.to_string())?;
        if len < 0 {
            values.push(Value::Null);
            continue;
        }
        let bytes = r
            .bytes(usize::try_from(len).unwrap_or(0))
            .map_err(|e| e.to_string())?;
        let v = Value::decode(col.type_oid, bytes).ok_or_else(|| {
            format!(
                "column `{}` (type oid {}) holds text this client cannot read as that type",
                col.name, col.type_oid
            )
        })?;
        values.push(v);
    }
    Ok(values)
}

/// A cursor over a message body.
struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8]) -> Self {
        Reader { data }
    }
    fn remaining(&self) -> usize {
        self.data.len()
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.data.len() < n {
            return Err(Error::Protocol("a message shorter than its fields".into()));
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let b = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }
    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array()?))
    }
    fn cstr(&mut self) -> Result<String> {
        let end = self
            .data
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| Error::Protocol("a string without its terminator".into()))?;
        let s = String::from_utf8_lossy(&self.data[..end]).into_owned();
        self.data = &self.data[end + 1..];
        Ok(s)
    }
    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_tags_give_the_row_count() {
        assert_eq!(rows_affected(b"INSERT 0 5\0"), 5);
        assert_eq!(rows_affected(b"UPDATE 12\0"), 12);
        assert_eq!(rows_affected(b"SELECT 0\0"), 0);
        assert_eq!(rows_affected(b"CREATE TABLE\0"), 0);
    }

    #[test]
    fn tcp_connections_get_keepalive() {
        use rustix::net::sockopt;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert!(!sockopt::socket_keepalive(&s).unwrap(), "off by default");
        keep_alive(&s).unwrap();
        assert!(sockopt::socket_keepalive(&s).unwrap());
        assert_eq!(sockopt::tcp_keepidle(&s).unwrap(), KEEPALIVE_IDLE);
        assert_eq!(sockopt::tcp_keepintvl(&s).unwrap(), KEEPALIVE_INTERVAL);
        assert_eq!(sockopt::tcp_keepcnt(&s).unwrap(), KEEPALIVE_PROBES);
        assert_eq!(sockopt::tcp_user_timeout(&s).unwrap(), TCP_USER_TIMEOUT_MS);
    }

    #[test]
    fn identifiers_and_literals_are_quoted() {
        assert_eq!(quote_identifier("a\"b").unwrap(), "\"a\"\"b\"");
        assert_eq!(quote_literal("it's").unwrap(), "'it''s'");
        assert!(quote_identifier("").is_err());
        assert!(quote_literal("a\0b").is_err());
        assert_eq!(quote_literal("a\\b").unwrap(), " E'a\\\\b'");
    }
}
