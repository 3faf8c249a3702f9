//! A small HTTP/1.1 server: GET and HEAD read, POST writes (unless read-only), one request per
//! connection (`Connection: close`),
//! a bounded request head with a deadline for the whole of it, a Host check, write timeouts, and
//! separate caps on connections still sending their head and on live ones. Every response
//! carries a restrictive Content-Security-Policy (scripts, styles and connections from this origin
//! only; no inline script or style; no frames, objects or form posts elsewhere).
//!
//! Routes: `/` (board; `?board=SLUG&assignee=NAME&q=TEXT&archived=1`), `/task/ID?board=SLUG`,
//! `/cron`, `/health`, `/events?board=SLUG` (server-sent events: `board` on any board change,
//! `log` with a task id when the log of its open run grew), `/assets/app.js`, `/assets/app.css`.
//! Anything else, an unknown board and an unknown task are 404 pages. `HEAD` answers the head a
//! `GET` would, and no body (for `/events` too: no stream).
//!
//! Writes: `POST /act/VERB?board=SLUG` with a form (url-encoded; multipart for `attach`), see
//! [`crate::action`]. On top of the Host and token checks a write must carry an `Origin` equal
//! to this server as the `Host` header names it (403), a `Content-Length` within
//! [`MAX_FORM_BODY`] ([`MAX_UPLOAD_BODY`] for an upload; 411, 413), and the browser session's
//! CSRF token twice: as the `kanban_csrf` cookie the board and task pages hand out (drawn from
//! the kernel's random generator, `HttpOnly; SameSite=Strict`) and as the form's `csrf` field,
//! compared in constant time (403). A refused write changes nothing; a done one is a 303 to the
//! task's page. In read-only mode the pages carry no forms and every `POST` is 405.
//!
//! Host: the `Host` header must name this server — `localhost`, the address the connection came
//! in on (or the listen address), or a name given in [`ServeConfig::allowed_hosts`] — else the
//! answer is 421 and nothing is read. A page on another site that rebinds its own name to
//! 127.0.0.1 (DNS rebinding) therefore cannot read a tokenless loopback server: its requests carry
//! its own name.
//!
//! Token: when the server has one, every request must carry it — `Authorization: Bearer T`, or
//! the cookie `kanban_token=T`, or `?token=T` in the URL (the answer then sets that cookie, so a
//! browser opened on `http://host:port/?token=T` keeps working). A request without it, or with a
//! wrong one, is answered 401 and reads nothing.
//!
//! Connections: a new connection is *pending* until its whole head has arrived and passed the
//! Host and token checks, within [`ServeConfig::head_deadline`] (a 408 answer after it); at most
//! [`ServeConfig::max_pending`] are pending, and one more closes the oldest pending one. Then it is
//! *live* (a page being answered, an open event stream); at most
//! [`ServeConfig::max_connections`] are live, more are answered 503. So peers that open
//! connections and dribble their headers (slowloris) only ever hold pending places, for a bounded
//! time, and never keep the server from answering a client that sends its request.
//!
//! Accepting: when accepting fails for want of file descriptors or memory (EMFILE, ENFILE,
//! ENOBUFS, ENOMEM) the loop pauses before the next try ([`AcceptBackoff`]) instead of retrying
//! at once — the waiting connection stays queued, so an immediate retry fails the same way and
//! the loop would spin.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

pub use crate::action::percent_decode;
use crate::live::{Change, Hub};
use crate::page::{self, BoardFilter};
use crate::{Source, SourceError};

const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// The Content-Security-Policy of every response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// Largest request head accepted (request line and headers).
const MAX_HEAD: usize = 16 * 1024;
/// Keep-alive comment interval of an idle event stream.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// How long one write of an answer may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest url-encoded form body accepted (a decomposition's children JSON fits).
pub const MAX_FORM_BODY: usize = 256 * 1024;
/// Largest multipart body accepted (an attachment: the board's 25 MiB cap and the form around
/// it).
pub const MAX_UPLOAD_BODY: usize = 25 * 1024 * 1024 + 64 * 1024;
/// The cookie that carries a browser session's CSRF token.
pub const CSRF_COOKIE: &str = "kanban_csrf";
/// CSRF sessions remembered at most; a new one beyond forgets the oldest.
const MAX_SESSIONS: usize = 4096;

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    /// Required on a non-loopback address.
    pub token: Option<String>,
    /// Host names (or IP addresses) the `Host` header may carry besides `localhost` and the
    /// address the server is reached on: the names a proxy or a DNS entry gives this server.
    pub allowed_hosts: Vec<String>,
    /// Live connections at most (pages being answered and event streams); more are answered 503.
    pub max_connections: usize,
    /// Connections still sending their request head at most; one more closes the oldest.
    pub max_pending: usize,
    /// Time a connection has, from being accepted, to send its whole request head (and the
    /// body of a `POST`).
    pub head_deadline: Duration,
    /// Serve no forms and refuse every `POST` (405): the view changes nothing.
    pub read_only: bool,
}

impl ServeConfig {
    /// The default [`ServeConfig::head_deadline`].
    pub const DEFAULT_HEAD_DEADLINE: Duration = Duration::from_secs(10);
    /// The default [`ServeConfig::max_pending`].
    pub const DEFAULT_MAX_PENDING: usize = 64;
    /// The default [`ServeConfig::max_connections`].
    pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

    /// Serving on `listen` without a token, with the default limits.
    pub fn new(listen: SocketAddr) -> ServeConfig {
        ServeConfig {
            listen,
            token: None,
            allowed_hosts: Vec::new(),
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_pending: Self::DEFAULT_MAX_PENDING,
            head_deadline: Self::DEFAULT_HEAD_DEADLINE,
            read_only: false,
        }
    }
}

/// Why the server did not start.
#[derive(Debug)]
pub enum ServeError {
    /// A non-loopback address without a token.
    TokenRequired { listen: SocketAddr },
    /// An empty or whitespace token.
    BlankToken,
    /// An allowed host that is not a host name or an IP address.
    BadAllowedHost { name: String },
    Bind {
        listen: SocketAddr,
        source: io::Error,
    },
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::TokenRequired { listen } => write!(
                f,
                "refusing to listen on {listen} without a token: a non-loopback address needs \
                 --token T or --token-file PATH (or listen on 127.0.0.1)"
            ),
            ServeError::BlankToken => f.write_str("the token is empty; give a non-blank token"),
            ServeError::BadAllowedHost { name } => write!(
                f,
                "--allow-host {name:?} is not a host name: give a name or an IP address alone, \
                 without scheme, port or path (e.g. --allow-host kanban.example.com)"
            ),
            ServeError::Bind { listen, .. } => write!(f, "cannot listen on {listen}"),
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Bind { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// True for addresses only this machine can reach.
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// A host as the Host header or `--allow-host` names it, without port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostName {
    /// An IP address (IPv4-mapped IPv6 addresses as IPv4).
    Ip(IpAddr),
    /// A DNS name, lowercased, without a trailing dot.
    Name(String),
}

impl HostName {
    /// Parses a bare host (`name`, `1.2.3.4`, `[::1]` or `::1`); `None` when it is none.
    pub fn parse(text: &str) -> Option<HostName> {
        let inner = text
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'));
        if let Some(v6) = inner {
            return v6
                .parse::<Ipv6Addr>()
                .ok()
                .map(|ip| HostName::Ip(IpAddr::V6(ip).to_canonical()));
        }
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Some(HostName::Ip(ip.to_canonical()));
        }
        let name = text.strip_suffix('.').unwrap_or(text);
        let valid = !name.is_empty()
            && name.len() <= 253
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        valid.then(|| HostName::Name(name.to_ascii_lowercase()))
    }

    /// Parses a Host header value (`host`, `host:port`, `[v6]:port`); `None` when malformed.
    pub fn from_header(value: &str) -> Option<HostName> {
        let value = value.trim();
        let host = if value.starts_with('[') {
            let end = value.find(']')?;
            let port = &value[end + 1..];
            if !port.is_empty() && !is_port(port.strip_prefix(':')?) {
                return None;
            }
            &value[..=end]
        } else {
            match value.split_once(':') {
                Some((host, port)) if is_port(port) => host,
                Some(_) => return None,
                None => value,
            }
        };
        HostName::parse(host)
    }
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}

/// Which Host header values name this server.
#[derive(Debug, Clone)]
struct HostRule {
    listen: IpAddr,
    allowed: Vec<HostName>,
}

impl HostRule {
    /// True when `host` is `localhost`, an allowed name, the listen address or `local` (the
    /// address the connection came in on).
    fn admits(&self, host: &HostName, local: Option<IpAddr>) -> bool {
        match host {
            HostName::Name(name) if name == "localhost" => true,
            HostName::Ip(ip) if *ip == self.listen.to_canonical() => true,
            HostName::Ip(ip) if local.is_some_and(|l| l.to_canonical() == *ip) => true,
            other => self.allowed.contains(other),
        }
    }
}

/// What the accept loop does after `accept` failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptStep {
    /// Try again at once (the failure was the one connection's).
    Retry,
    /// Out of file descriptors or memory: wait this long before the next try.
    Pause(Duration),
    /// The listener itself failed: stop serving.
    Stop,
}

/// The accept loop's back-off: a pause of 10 ms after the first resource failure, doubling to
/// 1 s while accepting keeps failing, and none again after a connection was accepted.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    pause: Option<Duration>,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(10);
    const LONGEST: Duration = Duration::from_secs(1);

    /// The step after `err`.
    pub fn failed(&mut self, err: &io::Error) -> AcceptStep {
        // Linux errno values: ENOMEM, ENFILE, EMFILE, ENOBUFS.
        const OUT_OF_RESOURCES: [i32; 4] = [12, 23, 24, 105];
        // EPROTO: the peer's handshake failed.
        const PEER_FAILED: i32 = 71;
        if err.kind() == io::ErrorKind::OutOfMemory
            || err
                .raw_os_error()
                .is_some_and(|code| OUT_OF_RESOURCES.contains(&code))
        {
            let pause = self
                .pause
                .map_or(Self::FIRST, |p| (p * 2).min(Self::LONGEST));
            self.pause = Some(pause);
            return AcceptStep::Pause(pause);
        }
        let retry = matches!(
            err.kind(),
            io::ErrorKind::Interrupted
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::WouldBlock
        ) || err.raw_os_error() == Some(PEER_FAILED);
        if retry {
            AcceptStep::Retry
        } else {
            AcceptStep::Stop
        }
    }

    /// A connection was accepted: the next failure pauses briefly again.
    pub fn accepted(&mut self) {
        self.pause = None;
    }
}

/// The connections still sending their head, oldest first, each with a handle to close it.
struct Pending {
    max: usize,
    next_id: AtomicU64,
    open: Mutex<VecDeque<(u64, TcpStream)>>,
}

/// A connection's pending place; dropping it (the head arrived, or the connection ended) frees it.
struct PendingSlot {
    pending: Arc<Pending>,
    id: u64,
}

impl Pending {
    /// Registers `stream` as pending; when `max` are pending already, the oldest is shut down
    /// (its thread's read ends at once) and loses its place.
    fn enter(self: &Arc<Self>, stream: &TcpStream) -> io::Result<PendingSlot> {
        let handle = stream.try_clone()?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        while open.len() >= self.max {
            if let Some((_, oldest)) = open.pop_front() {
                let _ = oldest.shutdown(Shutdown::Both);
            }
        }
        open.push_back((id, handle));
        Ok(PendingSlot {
            pending: Arc::clone(self),
            id,
        })
    }
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        self.pending
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(id, _)| *id != self.id);
    }
}

/// A live connection's place; dropping it frees it.
struct LiveSlot<'a>(&'a AtomicUsize);

impl Drop for LiveSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

struct State<S> {
    source: Arc<S>,
    token: Option<String>,
    hosts: HostRule,
    hub: Arc<Hub>,
    pending: Arc<Pending>,
    live: AtomicUsize,
    max_connections: usize,
    head_deadline: Duration,
    read_only: bool,
    /// The CSRF tokens handed out, oldest first (at most [`MAX_SESSIONS`]).
    sessions: Mutex<VecDeque<String>>,
}

impl<S> State<S> {
    /// The CSRF token of the browser session `request` belongs to (its `kanban_csrf` cookie,
    /// when this server handed it out), or a new one from the kernel's random generator, with
    /// `true` when it is new (the answer then sets the cookie).
    fn csrf_session(&self, request: &Request) -> io::Result<(String, bool)> {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(given) = cookie_value(request, CSRF_COOKIE)
            && sessions.iter().any(|s| same_secret(s, &given))
        {
            return Ok((given, false));
        }
        let token = random_token()?;
        if sessions.len() >= MAX_SESSIONS {
            sessions.pop_front();
        }
        sessions.push_back(token.clone());
        Ok((token, true))
    }

    /// True when the request's `kanban_csrf` cookie is a session this server handed out and
    /// `field` (the form's `csrf`) is the same token; compared in constant time.
    fn csrf_ok(&self, request: &Request, field: Option<&str>) -> bool {
        let (Some(given), Some(field)) = (cookie_value(request, CSRF_COOKIE), field) else {
            return false;
        };
        let known = self
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|s| same_secret(s, &given));
        known && same_secret(&given, field)
    }

    /// Takes a live place, or `None` when all are taken.
    fn enter_live(&self) -> Option<LiveSlot<'_>> {
        if self.live.fetch_add(1, Ordering::SeqCst) >= self.max_connections {
            self.live.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(LiveSlot(&self.live))
    }
}

/// A bound server; [`Server::run`] accepts until the listener fails.
pub struct Server<S> {
    listener: TcpListener,
    state: Arc<State<S>>,
}

impl<S: Source> Server<S> {
    /// Checks the token rule and the allowed hosts, and binds the address.
    pub fn bind(config: &ServeConfig, source: Arc<S>) -> Result<Server<S>, ServeError> {
        if let Some(token) = &config.token
            && token.trim().is_empty()
        {
            return Err(ServeError::BlankToken);
        }
        if config.token.is_none() && !is_loopback(config.listen.ip()) {
            return Err(ServeError::TokenRequired {
                listen: config.listen,
            });
        }
        let allowed = config
            .allowed_hosts
            .iter()
            .map(|name| {
                HostName::parse(name.trim())
                    .ok_or_else(|| ServeError::BadAllowedHost { name: name.clone() })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let listener = TcpListener::bind(config.listen).map_err(|source| ServeError::Bind {
            listen: config.listen,
            source,
        })?;
        Ok(Server {
            listener,
            state: Arc::new(State {
                source,
                token: config.token.clone(),
                hosts: HostRule {
                    listen: config.listen.ip(),
                    allowed,
                },
                hub: Arc::new(Hub::default()),
                pending: Arc::new(Pending {
                    max: config.max_pending.max(1),
                    next_id: AtomicU64::new(0),
                    open: Mutex::new(VecDeque::new()),
                }),
                live: AtomicUsize::new(0),
                max_connections: config.max_connections.max(1),
                head_deadline: config.head_deadline,
                read_only: config.read_only,
                sessions: Mutex::new(VecDeque::new()),
            }),
        })
    }

    /// The bound address (the real port when asked for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections, each on its own thread, until accepting fails for a reason other
    /// than the one connection or a shortage of resources ([`AcceptBackoff`]).
    pub fn run(self) -> io::Result<()> {
        let mut backoff = AcceptBackoff::default();
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    backoff.accepted();
                    self.admit(stream);
                }
                Err(err) => match backoff.failed(&err) {
                    AcceptStep::Retry => {}
                    AcceptStep::Pause(pause) => std::thread::sleep(pause),
                    AcceptStep::Stop => return Err(err),
                },
            }
        }
    }

    /// Gives a new connection its pending place and its thread.
    fn admit(&self, mut stream: TcpStream) {
        let accepted = Instant::now();
        let slot = match self.state.pending.enter(&stream) {
            Ok(slot) => slot,
            Err(_) => {
                // No descriptor left to track it: answer at once and close.
                let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
                let _ = respond_error(
                    &mut stream,
                    false,
                    503,
                    "Service Unavailable",
                    "the server is out of resources; try again",
                );
                return;
            }
        };
        let state = Arc::clone(&self.state);
        // When the thread cannot start, the job (with the stream and its slot) is dropped: the
        // connection closes and its place is freed.
        let _ = self.state.source.spawn("kanban-web-conn", move || {
            let _ = handle(&state, stream, slot, accepted);
        });
    }
}

/// A parsed request head.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub authorization: Option<String>,
    pub cookie: Option<String>,
    /// The Host header (repeated ones joined with `, `, which no host name matches).
    pub host: Option<String>,
    /// The Origin header (repeated ones joined with `, `, which matches no origin).
    pub origin: Option<String>,
    /// The Content-Length header as sent (repeated ones joined with `, `).
    pub content_length: Option<String>,
    pub content_type: Option<String>,
}

impl Request {
    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses a request head (without the final blank line); `None` when it is not HTTP/1.x.
pub fn parse_head(head: &str) -> Option<Request> {
    let mut lines = head.split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let method = parts.next()?.to_owned();
    let target = parts.next()?;
    let version = parts.next()?;
    if parts.next().is_some() || !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return None;
    }
    let (raw_path, raw_query) = target.split_once('?').unwrap_or((target, ""));
    let path = percent_decode(raw_path, false)?;
    let mut query = Vec::new();
    for pair in raw_query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        query.push((percent_decode(k, true)?, percent_decode(v, true)?));
    }
    let mut request = Request {
        method,
        path,
        query,
        ..Request::default()
    };
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim().to_owned();
        if name.eq_ignore_ascii_case("authorization") {
            request.authorization = Some(value);
        } else if name.eq_ignore_ascii_case("host") {
            request.host = Some(match request.host.take() {
                Some(old) => format!("{old}, {value}"),
                None => value,
            });
        } else if name.eq_ignore_ascii_case("origin") {
            request.origin = Some(join(request.origin.take(), value, ", "));
        } else if name.eq_ignore_ascii_case("content-length") {
            request.content_length = Some(join(request.content_length.take(), value, ", "));
        } else if name.eq_ignore_ascii_case("content-type") {
            request.content_type = Some(join(request.content_type.take(), value, ", "));
        } else if name.eq_ignore_ascii_case("cookie") {
            request.cookie = Some(match request.cookie.take() {
                Some(old) => format!("{old}; {value}"),
                None => value,
            });
        }
    }
    Some(request)
}

fn join(old: Option<String>, value: String, sep: &str) -> String {
    match old {
        Some(old) => format!("{old}{sep}{value}"),
        None => value,
    }
}

/// The value of cookie `name` in the request's Cookie headers.
fn cookie_value(request: &Request, name: &str) -> Option<String> {
    let cookies = request.cookie.as_deref()?;
    cookies.split(';').find_map(|c| {
        let (k, v) = c.trim().split_once('=')?;
        (k == name).then(|| percent_decode(v, false)).flatten()
    })
}

/// 32 bytes from the kernel's random generator (`getrandom(2)`), as 64 hex digits.
fn random_token() -> io::Result<String> {
    let mut bytes = [0u8; 32];
    let mut filled = 0;
    while filled < bytes.len() {
        match rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(0) => {
                return Err(io::Error::other(
                    "the kernel's random generator gave nothing",
                ));
            }
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares in constant time (`subtle`), so the time taken does not tell how much of a guess
/// matched (only whether its length did).
fn same_secret(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq as _;
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// How the request proved it knows the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// No token configured, or a header or cookie carried it.
    Granted,
    /// The URL carried it: answer with the cookie so the page's own requests carry it too.
    GrantedByQuery,
    Denied,
}

/// Checks `request` against `token`.
pub fn authorize(request: &Request, token: Option<&str>) -> Auth {
    let Some(token) = token else {
        return Auth::Granted;
    };
    if let Some(value) = &request.authorization
        && let Some(given) = value.strip_prefix("Bearer ")
        && same_secret(given.trim(), token)
    {
        return Auth::Granted;
    }
    if let Some(cookies) = &request.cookie {
        for cookie in cookies.split(';') {
            if let Some(given) = cookie.trim().strip_prefix("kanban_token=")
                && percent_decode(given, false).is_some_and(|g| same_secret(&g, token))
            {
                return Auth::Granted;
            }
        }
    }
    if request
        .param("token")
        .is_some_and(|g| same_secret(g, token))
    {
        return Auth::GrantedByQuery;
    }
    Auth::Denied
}

/// Why no request head was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeadError {
    /// The peer closed (or was closed) before the blank line.
    Closed,
    /// Longer than [`MAX_HEAD`].
    TooLarge,
    /// Not all of it arrived before the deadline.
    TimedOut,
    /// Not text.
    Malformed,
}

/// Reads from a stream until a deadline for all reads together: each read waits at most for
/// what is left of it.
struct DeadlineRead<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl Read for DeadlineRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        let mut stream = self.stream;
        stream.read(buf)
    }
}

/// Reads the request head (without the blank line ending it), all of it before `deadline`,
/// and the bytes read past it (the start of a body).
fn read_head(stream: &TcpStream, deadline: Instant) -> Result<(String, Vec<u8>), HeadError> {
    let mut reader = BufReader::new(DeadlineRead { stream, deadline }.take(MAX_HEAD as u64));
    let mut head = String::new();
    let mut total = 0;
    loop {
        let mut line = Vec::new();
        let n = match reader.read_until(b'\n', &mut line) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError::TimedOut);
            }
            Err(_) => return Err(HeadError::Closed),
        };
        total += n;
        if !line.ends_with(b"\n") {
            return Err(if total >= MAX_HEAD {
                HeadError::TooLarge
            } else {
                HeadError::Closed
            });
        }
        let line = String::from_utf8(line).map_err(|_| HeadError::Malformed)?;
        if line == "\r\n" || line == "\n" {
            break;
        }
        head.push_str(line.trim_end_matches(['\r', '\n']));
        head.push_str("\r\n");
    }
    Ok((head.trim_end().to_owned(), reader.buffer().to_vec()))
}

/// Why a request body was not read.
enum BodyError {
    Missing,
    Malformed,
    TooLarge { max: usize },
    TimedOut,
    Closed,
}

/// Reads the body `request` announces with `Content-Length` (at most `max` bytes), `start`
/// being what came with the head, all of it before `deadline`.
fn read_body(
    stream: &TcpStream,
    request: &Request,
    start: Vec<u8>,
    max: usize,
    deadline: Instant,
) -> Result<Vec<u8>, BodyError> {
    let text = request
        .content_length
        .as_deref()
        .ok_or(BodyError::Missing)?;
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BodyError::Malformed);
    }
    let len: usize = text.parse().map_err(|_| BodyError::TooLarge { max })?;
    if len > max {
        return Err(BodyError::TooLarge { max });
    }
    if start.len() > len {
        return Err(BodyError::Malformed);
    }
    let mut body = start;
    let missing = (len - body.len()) as u64;
    let mut rest = DeadlineRead { stream, deadline }.take(missing);
    match rest.read_to_end(&mut body) {
        Ok(_) if body.len() == len => Ok(body),
        Ok(_) => Err(BodyError::Closed),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Err(BodyError::TimedOut)
        }
        Err(_) => Err(BodyError::Closed),
    }
}

struct Response {
    status: u16,
    reason: &'static str,
    content_type: &'static str,
    body: String,
    extra: Vec<String>,
}

impl Response {
    fn html(body: String) -> Self {
        Response {
            status: 200,
            reason: "OK",
            content_type: "text/html; charset=utf-8",
            body,
            extra: Vec::new(),
        }
    }

    fn error(status: u16, reason: &'static str, detail: &str) -> Self {
        Response {
            status,
            reason,
            content_type: "text/html; charset=utf-8",
            body: page::error_page(status, reason, detail),
            extra: Vec::new(),
        }
    }
}

fn write_response(stream: &mut TcpStream, head_only: bool, r: &Response) -> io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
        r.status,
        r.reason,
        r.content_type,
        r.body.len()
    );
    push_common_headers(&mut out);
    for h in &r.extra {
        out.push_str(h);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    stream.write_all(out.as_bytes())?;
    if !head_only {
        stream.write_all(r.body.as_bytes())?;
    }
    stream.flush()
}

/// The headers of every answer. `Referrer-Policy: same-origin`, not `no-referrer`: under
/// `no-referrer` a browser sends `Origin: null` with the page's own form posts, which the
/// Origin check of a write must refuse; `same-origin` still sends nothing to another site.
fn push_common_headers(out: &mut String) {
    out.push_str("Content-Security-Policy: ");
    out.push_str(CSP);
    out.push_str(
        "\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: same-origin\r\n\
         X-Frame-Options: DENY\r\nCache-Control: no-store\r\nConnection: close\r\n",
    );
}

fn respond_error(
    stream: &mut TcpStream,
    head_only: bool,
    status: u16,
    reason: &'static str,
    detail: &str,
) -> io::Result<()> {
    write_response(stream, head_only, &Response::error(status, reason, detail))
}

/// Serves one connection: reads its head while it holds `pending`, checks Host, method and
/// token, then answers as a live connection.
fn handle<S: Source>(
    state: &State<S>,
    mut stream: TcpStream,
    pending: PendingSlot,
    accepted: Instant,
) -> io::Result<()> {
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let (head, start) = match read_head(&stream, accepted + state.head_deadline) {
        Ok(read) => read,
        Err(HeadError::Closed) => return Ok(()),
        Err(HeadError::TimedOut) => {
            return respond_error(
                &mut stream,
                false,
                408,
                "Request Timeout",
                "the request head did not arrive in time",
            );
        }
        Err(HeadError::TooLarge) => {
            return respond_error(
                &mut stream,
                false,
                431,
                "Request Header Fields Too Large",
                "the request head is too long",
            );
        }
        Err(HeadError::Malformed) => {
            return respond_error(
                &mut stream,
                false,
                400,
                "Bad Request",
                "the request head is not text",
            );
        }
    };
    let Some(request) = parse_head(&head) else {
        return respond_error(
            &mut stream,
            false,
            400,
            "Bad Request",
            "not an HTTP/1.x request",
        );
    };
    let head_only = request.method == "HEAD";
    let Some(host) = request.host.as_deref() else {
        return respond_error(
            &mut stream,
            head_only,
            400,
            "Bad Request",
            "the request has no Host header",
        );
    };
    let Some(host_name) = HostName::from_header(host) else {
        return respond_error(
            &mut stream,
            head_only,
            400,
            "Bad Request",
            "the Host header is not a host name",
        );
    };
    let local = stream.local_addr().ok().map(|a| a.ip());
    if !state.hosts.admits(&host_name, local) {
        return respond_error(
            &mut stream,
            head_only,
            421,
            "Misdirected Request",
            &format!(
                "this server does not answer for host {host}: open it by its address or as \
                 localhost, or start it with --allow-host NAME for a name that points to it"
            ),
        );
    }
    let post = request.method == "POST";
    let misplaced = post && !state.read_only && !request.path.starts_with("/act/");
    if misplaced {
        let mut r = Response::error(
            405,
            "Method Not Allowed",
            "this page is read with GET; writes are POSTed to /act/VERB by the page's forms",
        );
        r.extra.push("Allow: GET, HEAD".to_owned());
        return write_response(&mut stream, false, &r);
    }
    if (post && state.read_only) || !(post || request.method == "GET" || head_only) {
        let mut r = if state.read_only {
            let mut r = Response::error(
                405,
                "Method Not Allowed",
                "this server is read-only (kanban serve --read-only): GET and HEAD only",
            );
            r.extra.push("Allow: GET, HEAD".to_owned());
            r
        } else {
            let mut r = Response::error(
                405,
                "Method Not Allowed",
                "GET and HEAD read, POST writes; nothing else is served",
            );
            r.extra.push("Allow: GET, HEAD, POST".to_owned());
            r
        };
        if post {
            r.extra.push("X-Kanban-Refused: read-only".to_owned());
        }
        return write_response(&mut stream, head_only, &r);
    }
    let auth = authorize(&request, state.token.as_deref());
    if auth == Auth::Denied {
        let mut r = Response::error(
            401,
            "Unauthorized",
            "this server needs its token: an `Authorization: Bearer` header, the kanban_token \
             cookie, or ?token= in the URL",
        );
        r.extra.push("WWW-Authenticate: Bearer".to_owned());
        return write_response(&mut stream, head_only, &r);
    }
    let body = if post {
        match post_body(state, &stream, &request, start, accepted) {
            Ok(body) => Some(body),
            Err(refusal) => return write_response(&mut stream, false, &refusal),
        }
    } else {
        None
    };
    drop(pending);
    let Some(_live) = state.enter_live() else {
        return respond_error(
            &mut stream,
            head_only,
            503,
            "Service Unavailable",
            "too many connections; try again",
        );
    };
    if let Some(body) = body {
        return write_response(&mut stream, false, &post_action(state, &request, &body));
    }
    if request.path == "/events" {
        return event_stream(state, stream, &request, auth);
    }
    let page = request.path == "/" || request.path.starts_with("/task/");
    let session = if state.read_only || !page || head_only {
        None
    } else {
        match state.csrf_session(&request) {
            Ok(session) => Some(session),
            Err(e) => {
                return respond_error(
                    &mut stream,
                    false,
                    500,
                    "Internal Server Error",
                    &format!("no CSRF token could be drawn: {e}"),
                );
            }
        }
    };
    let mut response = route(state, &request, session.as_ref().map(|(t, _)| t.as_str()));
    if auth == Auth::GrantedByQuery
        && let Some(token) = &state.token
    {
        response.extra.push(token_cookie(token));
    }
    if let Some((token, true)) = &session {
        response.extra.push(csrf_cookie(token));
    }
    write_response(&mut stream, head_only, &response)
}

/// True when the request's `Origin` is this server as the request names it (`http://` or
/// `https://` and exactly the `Host` header's value): a form posted by a page of another site
/// carries that site's origin. A missing or `null` Origin does not match.
fn same_origin(request: &Request) -> bool {
    let (Some(origin), Some(host)) = (request.origin.as_deref(), request.host.as_deref()) else {
        return false;
    };
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|rest| rest.eq_ignore_ascii_case(host.trim()))
}

/// The checks of a `POST` before its body is read (its `Origin`, its type and announced size)
/// and the body itself; a refusal is the answer to send.
fn post_body<S>(
    state: &State<S>,
    stream: &TcpStream,
    request: &Request,
    start: Vec<u8>,
    accepted: Instant,
) -> Result<Vec<u8>, Response> {
    if !same_origin(request) {
        return Err(Response::error(
            403,
            "Forbidden",
            "a write must come from this server's own page: the request's Origin is missing \
             or names another site",
        ));
    }
    let max = match request.content_type.as_deref() {
        Some(t) if is_form(t) => MAX_FORM_BODY,
        Some(t) if crate::action::multipart_boundary(t).is_some() => MAX_UPLOAD_BODY,
        _ => {
            return Err(Response::error(
                415,
                "Unsupported Media Type",
                "a write is a form: application/x-www-form-urlencoded, or multipart/form-data \
                 for an attachment",
            ));
        }
    };
    read_body(stream, request, start, max, accepted + state.head_deadline).map_err(|e| match e {
        BodyError::Missing => {
            Response::error(411, "Length Required", "a write needs a Content-Length")
        }
        BodyError::Malformed => {
            Response::error(400, "Bad Request", "the Content-Length is malformed")
        }
        BodyError::TooLarge { max } => Response::error(
            413,
            "Content Too Large",
            &format!("the form is larger than {max} bytes; nothing was changed"),
        ),
        BodyError::TimedOut => Response::error(
            408,
            "Request Timeout",
            "the request body did not arrive in time",
        ),
        BodyError::Closed => Response::error(400, "Bad Request", "the request body was cut short"),
    })
}

fn is_form(content_type: &str) -> bool {
    content_type.split(';').next().is_some_and(|t| {
        t.trim()
            .eq_ignore_ascii_case("application/x-www-form-urlencoded")
    })
}

/// `POST /act/VERB?board=SLUG`: the form's CSRF token, then the action; a success is a 303 to
/// the task's page.
fn post_action<S: Source>(state: &State<S>, request: &Request, body: &[u8]) -> Response {
    use crate::action::{Action, ActionError, Form};
    let Some(verb) = request.path.strip_prefix("/act/") else {
        return Response::error(
            404,
            "Not Found",
            &format!("no action at {}; writes go to /act/VERB", request.path),
        );
    };
    let content_type = request.content_type.as_deref().unwrap_or("");
    let parsed = if is_form(content_type) {
        match Form::parse(body) {
            Some(form) => form
                .single("csrf")
                .map(|csrf| (csrf.map(str::to_owned), Action::from_form(verb, &form))),
            None => Err(ActionError::Invalid(
                "the form is not url-encoded UTF-8".to_owned(),
            )),
        }
    } else {
        let parts = crate::action::multipart_boundary(content_type)
            .and_then(|b| crate::action::parse_multipart(body, &b));
        match parts {
            None => Err(ActionError::Invalid(
                "the multipart form is malformed".to_owned(),
            )),
            Some(parts) => {
                let csrf = parts
                    .iter()
                    .find(|p| p.name == "csrf")
                    .and_then(|p| String::from_utf8(p.data.clone()).ok());
                let action = if verb == "attach" {
                    Action::from_upload(&parts)
                } else {
                    Err(ActionError::Invalid(format!(
                        "{verb} takes a url-encoded form; only attach is multipart"
                    )))
                };
                Ok((csrf, action))
            }
        }
    };
    // The CSRF token is checked before anything else the form says is looked at.
    let (csrf, action) = match parsed {
        Ok(found) => found,
        Err(e) => return action_refused(&e),
    };
    if !state.csrf_ok(request, csrf.as_deref()) {
        return Response::error(
            403,
            "Forbidden",
            "the form's CSRF token is missing or not this browser session's: reload the page \
             and try again; nothing was changed",
        );
    }
    let action = match action {
        Ok(action) => action,
        Err(e) => return action_refused(&e),
    };
    let Some(slug) = board_slug(state, request) else {
        return Response::error(404, "Not Found", "no board is served");
    };
    match state.source.act(&slug, &action) {
        Ok(done) => {
            let location = format!(
                "/task/{}?board={}",
                page::url_component(&done.task_id),
                page::url_component(&slug)
            );
            let mut r = Response {
                status: 303,
                reason: "See Other",
                ..Response::html(page::done_page(&done.message, &location))
            };
            r.extra.push(format!("Location: {location}"));
            r
        }
        Err(e) => action_refused(&e),
    }
}

fn action_refused(e: &crate::action::ActionError) -> Response {
    let (status, reason) = e.status();
    let mut r = Response::error(
        status,
        reason,
        &format!("{}; nothing was changed", e.message()),
    );
    r.extra.push("X-Kanban-Refused: action".to_owned());
    r
}

/// The header that hands a new browser session its CSRF token (the forms carry it too).
fn csrf_cookie(token: &str) -> String {
    format!("Set-Cookie: {CSRF_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict")
}

/// The header that hands a token given in the URL back as a cookie.
fn token_cookie(token: &str) -> String {
    format!(
        "Set-Cookie: kanban_token={}; Path=/; HttpOnly; SameSite=Strict",
        page::url_component(token)
    )
}

fn source_failure(err: &SourceError) -> Response {
    Response::error(500, "Internal Server Error", &err.0)
}

fn board_slug<S: Source>(state: &State<S>, request: &Request) -> Option<String> {
    match request.param("board") {
        Some(b) if !b.is_empty() => Some(b.to_owned()),
        _ => state.source.boards().into_iter().next(),
    }
}

/// Answers a read; `csrf` is the session's token when the pages carry forms.
fn route<S: Source>(state: &State<S>, request: &Request, csrf: Option<&str>) -> Response {
    let path = request.path.as_str();
    match path {
        "/" => {
            let Some(slug) = board_slug(state, request) else {
                return Response::error(404, "Not Found", "no board is served");
            };
            let filter = BoardFilter {
                assignee: request
                    .param("assignee")
                    .filter(|a| !a.trim().is_empty())
                    .map(str::to_owned),
                text: request
                    .param("q")
                    .filter(|q| !q.trim().is_empty())
                    .map(str::to_owned),
                archived: request.param("archived").is_some_and(|a| a == "1"),
            };
            // An unfiltered page shows the first cards of each column only: read just those.
            let read = if filter.assignee.is_none() && filter.text.is_none() {
                state
                    .source
                    .board_page(&slug, filter.archived, page::COLUMN_LIMIT)
            } else {
                state.source.board(&slug, filter.archived)
            };
            match read {
                Ok(Some(view)) => Response::html(page::board_page(
                    &view,
                    &filter,
                    &state.source.boards(),
                    csrf,
                )),
                Ok(None) => {
                    Response::error(404, "Not Found", &format!("no board {slug} is served"))
                }
                Err(e) => source_failure(&e),
            }
        }
        "/cron" => match state.source.cron() {
            Ok(view) => Response::html(page::cron_page(
                &view,
                board_slug(state, request).as_deref(),
            )),
            Err(e) => source_failure(&e),
        },
        "/health" => match state.source.health() {
            Ok(view) => Response::html(page::health_page(
                &view,
                board_slug(state, request).as_deref(),
            )),
            Err(e) => source_failure(&e),
        },
        "/metrics" => match state.source.metrics() {
            Ok(view) => Response {
                content_type: crate::metrics::CONTENT_TYPE,
                ..Response::html(crate::metrics::render(&view))
            },
            Err(e) => source_failure(&e),
        },
        "/assets/app.js" => Response {
            content_type: "text/javascript; charset=utf-8",
            ..Response::html(APP_JS.to_owned())
        },
        "/assets/app.css" => Response {
            content_type: "text/css; charset=utf-8",
            ..Response::html(APP_CSS.to_owned())
        },
        _ => {
            if let Some(id) = path.strip_prefix("/task/")
                && !id.is_empty()
                && !id.contains('/')
            {
                let Some(slug) = board_slug(state, request) else {
                    return Response::error(404, "Not Found", "no board is served");
                };
                return match state.source.task(&slug, id) {
                    Ok(Some(view)) => Response::html(page::task_page(&view, csrf)),
                    Ok(None) => {
                        Response::error(404, "Not Found", &format!("no task {id} on board {slug}"))
                    }
                    Err(e) => source_failure(&e),
                };
            }
            Response::error(404, "Not Found", &format!("no page at {path}"))
        }
    }
}

/// `/events`: the head of an event stream, then (for GET) its events until the peer leaves.
fn event_stream<S: Source>(
    state: &State<S>,
    mut stream: TcpStream,
    request: &Request,
    auth: Auth,
) -> io::Result<()> {
    let head_only = request.method == "HEAD";
    let Some(slug) = board_slug(state, request) else {
        return respond_error(
            &mut stream,
            head_only,
            404,
            "Not Found",
            "no board is served",
        );
    };
    let not_served = |stream: &mut TcpStream| {
        respond_error(
            stream,
            head_only,
            404,
            "Not Found",
            &format!("no board {slug} is served"),
        )
    };
    let mut head = String::from("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n");
    push_common_headers(&mut head);
    if auth == Auth::GrantedByQuery
        && let Some(token) = &state.token
    {
        head.push_str(&token_cookie(token));
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    if head_only {
        // The head a GET would get, and no stream: nothing to subscribe to.
        if !state.source.boards().contains(&slug) {
            return not_served(&mut stream);
        }
        stream.write_all(head.as_bytes())?;
        return stream.flush();
    }
    let subscription = match state.hub.subscribe(&state.source, &slug) {
        Ok(Some(s)) => s,
        Ok(None) => return not_served(&mut stream),
        Err(e) => return write_response(&mut stream, false, &source_failure(&e)),
    };
    head.push_str("retry: 1000\n: connected\n\n");
    let result = (|| -> io::Result<()> {
        stream.write_all(head.as_bytes())?;
        stream.flush()?;
        loop {
            let message = match subscription.changes.recv_timeout(KEEPALIVE) {
                Ok(Change::Board) => "event: board\ndata: changed\n\n".to_owned(),
                Ok(Change::Log(task)) => format!("event: log\ndata: {task}\n\n"),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => ": keepalive\n\n".to_owned(),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            };
            stream.write_all(message.as_bytes())?;
            stream.flush()?;
        }
    })();
    state.hub.leave(subscription);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding_is_strict_and_plus_is_a_space_only_in_queries() {
        assert_eq!(
            percent_decode("a+b%2Bc%20d", true).as_deref(),
            Some("a b+c d")
        );
        assert_eq!(percent_decode("a+b%2F", false).as_deref(), Some("a+b/"));
        assert_eq!(percent_decode("%C3%A9", false).as_deref(), Some("é"));
        for bad in ["%", "%4", "%G1", "%+f", "a%-1", "%FF"] {
            assert_eq!(percent_decode(bad, true), None, "{bad}");
        }
    }

    #[test]
    fn parse_head_decodes_path_query_and_auth_headers() {
        let r = parse_head(
            "GET /task/t_1%20x?board=my-board&q=a+b%2Fc HTTP/1.1\r\nHost: x\r\n\
             Authorization: Bearer s3cret\r\nCookie: a=1\r\nCookie: kanban_token=z",
        )
        .expect("parsed");
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/task/t_1 x");
        assert_eq!(r.param("board"), Some("my-board"));
        assert_eq!(r.param("q"), Some("a b/c"));
        assert_eq!(r.authorization.as_deref(), Some("Bearer s3cret"));
        assert_eq!(r.cookie.as_deref(), Some("a=1; kanban_token=z"));
        assert_eq!(r.host.as_deref(), Some("x"));
        let twice = parse_head("GET / HTTP/1.1\r\nHost: a\r\nhost: b").expect("parsed");
        assert_eq!(twice.host.as_deref(), Some("a, b"));
        assert_eq!(HostName::from_header("a, b"), None);
    }

    #[test]
    fn parse_head_rejects_what_is_not_http() {
        assert_eq!(parse_head("GET / SPDY/3"), None);
        assert_eq!(parse_head("GET http://x/ HTTP/1.1"), None);
        assert_eq!(parse_head("GET /%zz HTTP/1.1"), None);
        assert_eq!(parse_head(""), None);
    }

    #[test]
    fn authorize_takes_the_token_from_header_cookie_or_query_and_nothing_else() {
        let with = |auth: Option<&str>, cookie: Option<&str>, query: &[(&str, &str)]| Request {
            method: "GET".into(),
            path: "/".into(),
            query: query
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            authorization: auth.map(str::to_owned),
            cookie: cookie.map(str::to_owned),
            ..Request::default()
        };
        let t = Some("s3cret");
        assert_eq!(authorize(&with(None, None, &[]), None), Auth::Granted);
        assert_eq!(authorize(&with(None, None, &[]), t), Auth::Denied);
        assert_eq!(
            authorize(&with(Some("Bearer s3cret"), None, &[]), t),
            Auth::Granted
        );
        assert_eq!(
            authorize(&with(Some("Bearer s3cre"), None, &[]), t),
            Auth::Denied
        );
        assert_eq!(authorize(&with(Some("s3cret"), None, &[]), t), Auth::Denied);
        assert_eq!(
            authorize(&with(None, Some("x=1; kanban_token=s3cret"), &[]), t),
            Auth::Granted
        );
        assert_eq!(
            authorize(&with(None, Some("kanban_token=s3cret2"), &[]), t),
            Auth::Denied
        );
        assert_eq!(
            authorize(&with(None, None, &[("token", "s3cret")]), t),
            Auth::GrantedByQuery
        );
        assert_eq!(
            authorize(&with(None, None, &[("token", "")]), t),
            Auth::Denied
        );
    }

    #[test]
    fn loopback_is_recognised_for_v4_v6_and_mapped_addresses() {
        for (addr, expected) in [
            ("127.0.0.1", true),
            ("127.1.2.3", true),
            ("::1", true),
            ("::ffff:127.0.0.1", true),
            ("0.0.0.0", false),
            ("192.168.1.2", false),
            ("::", false),
        ] {
            let ip: IpAddr = addr.parse().expect("ip");
            assert_eq!(is_loopback(ip), expected, "{addr}");
        }
    }

    #[test]
    fn host_headers_parse_with_or_without_port_and_junk_is_refused() {
        let name = |n: &str| Some(HostName::Name(n.to_owned()));
        let ip = |a: &str| Some(HostName::Ip(a.parse::<IpAddr>().expect("ip")));
        assert_eq!(HostName::from_header("localhost"), name("localhost"));
        assert_eq!(HostName::from_header("LocalHost.:8077"), name("localhost"));
        assert_eq!(HostName::from_header("127.0.0.1:8077"), ip("127.0.0.1"));
        assert_eq!(HostName::from_header("[::1]:8077"), ip("::1"));
        assert_eq!(HostName::from_header("[::ffff:127.0.0.1]"), ip("127.0.0.1"));
        assert_eq!(
            HostName::from_header("Evil.Example.com:80"),
            name("evil.example.com")
        );
        for junk in [
            "",
            ":8077",
            "::1",
            "[::1",
            "[::1]x",
            "[nope]:1",
            "a b",
            "a/b",
            "host:",
            "host:port",
            "host:123456",
            "a..b",
            "user@host",
            "http://host",
        ] {
            assert_eq!(HostName::from_header(junk), None, "{junk:?}");
        }
        assert_eq!(HostName::parse("::1"), ip("::1"));
        assert_eq!(HostName::parse("kanban.internal"), name("kanban.internal"));
        assert_eq!(HostName::parse("kanban.internal:80"), None);
    }

    #[test]
    fn the_host_rule_admits_localhost_the_addresses_and_allowed_names_only() {
        let rule = HostRule {
            listen: "0.0.0.0".parse().expect("ip"),
            allowed: vec![HostName::Name("board.example.com".to_owned())],
        };
        let local: Option<IpAddr> = Some("192.168.1.5".parse().expect("ip"));
        let admits =
            |header: &str| rule.admits(&HostName::from_header(header).expect("host"), local);
        assert!(admits("localhost:8077"));
        assert!(admits("192.168.1.5:8077"));
        assert!(admits("0.0.0.0"));
        assert!(admits("BOARD.example.com:443"));
        assert!(!admits("evil.example.com:8077"));
        assert!(!admits("board.example.com.evil.com"));
        assert!(!admits("10.0.0.1:8077"));
        let loopback = HostRule {
            listen: "127.0.0.1".parse().expect("ip"),
            allowed: Vec::new(),
        };
        let local = Some("127.0.0.1".parse().expect("ip"));
        assert!(loopback.admits(&HostName::Ip("127.0.0.1".parse().expect("ip")), local));
        assert!(!loopback.admits(&HostName::Name("evil.example.com".into()), local));
    }

    fn os_error(code: i32) -> io::Error {
        io::Error::from_raw_os_error(code)
    }

    #[test]
    fn accepting_out_of_descriptors_pauses_growing_and_a_success_resets_it() {
        let mut backoff = AcceptBackoff::default();
        let emfile = os_error(24);
        let pauses: Vec<AcceptStep> = (0..9).map(|_| backoff.failed(&emfile)).collect();
        let ms = |m: u64| AcceptStep::Pause(Duration::from_millis(m));
        assert_eq!(
            pauses,
            vec![
                ms(10),
                ms(20),
                ms(40),
                ms(80),
                ms(160),
                ms(320),
                ms(640),
                ms(1000),
                ms(1000)
            ]
        );
        backoff.accepted();
        assert_eq!(backoff.failed(&os_error(23)), ms(10), "ENFILE");
        assert_eq!(backoff.failed(&os_error(105)), ms(20), "ENOBUFS");
        assert_eq!(backoff.failed(&os_error(12)), ms(40), "ENOMEM");
        let aborted = io::Error::from(io::ErrorKind::ConnectionAborted);
        assert_eq!(backoff.failed(&aborted), AcceptStep::Retry);
        assert_eq!(backoff.failed(&os_error(71)), AcceptStep::Retry, "EPROTO");
        assert_eq!(backoff.failed(&os_error(9)), AcceptStep::Stop, "EBADF");
    }

    /// A source with no boards: the server's own pages (`/health`, the assets) need none.
    struct NoBoards;

    impl Source for NoBoards {
        fn boards(&self) -> Vec<String> {
            Vec::new()
        }
        fn board(&self, _: &str, _: bool) -> Result<Option<crate::BoardView>, SourceError> {
            Ok(None)
        }
        fn task(&self, _: &str, _: &str) -> Result<Option<crate::TaskView>, SourceError> {
            Ok(None)
        }
        fn cron(&self) -> Result<crate::CronView, SourceError> {
            Ok(crate::CronView::default())
        }
        fn health(&self) -> Result<crate::HealthView, SourceError> {
            Ok(crate::HealthView::default())
        }
        fn metrics(&self) -> Result<crate::MetricsView, SourceError> {
            Ok(crate::MetricsView::default())
        }
        fn watcher(&self, _: &str) -> Result<Option<Box<dyn crate::Watcher>>, SourceError> {
            Ok(None)
        }
        fn act(
            &self,
            slug: &str,
            _: &crate::Action,
        ) -> Result<crate::ActionDone, crate::ActionError> {
            Err(crate::ActionError::NotFound(format!("no board {slug}")))
        }
        #[allow(
            clippy::disallowed_methods,
            reason = "test code: a plain thread stands in for the runtime's `identity::spawn`"
        )]
        fn spawn<F>(&self, name: &str, job: F) -> io::Result<()>
        where
            F: FnOnce() + Send + 'static,
        {
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(job)
                .map(drop)
        }
    }

    /// How long a test waits for the server to act before it fails (a hang guard, not a
    /// measurement).
    const GUARD: Duration = Duration::from_secs(60);

    /// Starts a server on a free loopback port with `config`'s limits; it runs until the test
    /// process ends.
    #[allow(
        clippy::disallowed_methods,
        reason = "test code: the server under test runs on a plain thread of the test"
    )]
    fn serve(config: ServeConfig) -> SocketAddr {
        let server = Server::bind(&config, Arc::new(NoBoards)).expect("bind");
        let addr = server.local_addr().expect("addr");
        std::thread::spawn(move || server.run());
        addr
    }

    fn loopback_config() -> ServeConfig {
        ServeConfig::new("127.0.0.1:0".parse().expect("addr"))
    }

    /// Sends a whole GET and reads the answer to its end.
    fn get(addr: SocketAddr, path: &str) -> String {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(GUARD)).expect("timeout");
        write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("answer");
        answer
    }

    /// Reads until the server closes `stream`; what it sent before.
    fn until_closed(stream: &mut TcpStream) -> String {
        stream.set_read_timeout(Some(GUARD)).expect("timeout");
        let mut answer = Vec::new();
        match stream.read_to_end(&mut answer) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("the server did not close the connection: {e}"),
        }
        String::from_utf8_lossy(&answer).into_owned()
    }

    #[test]
    fn a_head_dribbled_past_the_deadline_is_closed_and_others_are_still_served() {
        let addr = serve(ServeConfig {
            head_deadline: Duration::from_millis(300),
            ..loopback_config()
        });
        let mut slow = TcpStream::connect(addr).expect("connect");
        slow.write_all(b"GET /health HTTP/1.1\r\n").expect("send");
        // One header line every 50 ms: each read of the server gets data well within any
        // per-read timeout; only a deadline for the whole head ends it.
        slow.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        let started = Instant::now();
        let mut answer = Vec::new();
        loop {
            assert!(
                started.elapsed() < GUARD,
                "the dribbling client was never closed"
            );
            if slow.write_all(b"X-Slow: 1\r\n").is_err() {
                break;
            }
            let mut buf = [0u8; 4096];
            match slow.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
        }
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
            "{answer}"
        );
        assert!(get(addr, "/health").starts_with("HTTP/1.1 200"));
    }

    #[test]
    fn connections_that_never_finish_their_head_do_not_keep_a_client_from_being_served() {
        let addr = serve(ServeConfig {
            max_connections: 1,
            max_pending: 3,
            ..loopback_config()
        });
        // Ten peers open a request and stop half-way, more than both caps together.
        let mut idle: Vec<TcpStream> = (0..10)
            .map(|_| {
                let mut s = TcpStream::connect(addr).expect("connect");
                s.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")
                    .expect("send");
                s
            })
            .collect();
        let answer = get(addr, "/health");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        // The oldest pending ones lost their place to the newer ones and were closed.
        assert_eq!(until_closed(&mut idle[0]), "");
        assert!(get(addr, "/health").starts_with("HTTP/1.1 200"));
    }

    #[test]
    fn head_on_an_unknown_event_stream_is_a_404_head_without_a_page() {
        let addr = serve(loopback_config());
        let mut stream = TcpStream::connect(addr).expect("connect");
        write!(stream, "HEAD /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("send");
        let answer = until_closed(&mut stream);
        // No board is served by this source: the 404 head, no page.
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
        assert!(answer.ends_with("\r\n\r\n"), "a body followed: {answer}");
    }

    #[test]
    fn a_foreign_host_is_misdirected_and_a_missing_one_is_a_bad_request() {
        let addr = serve(ServeConfig {
            allowed_hosts: vec!["Board.Example.com".to_owned()],
            ..loopback_config()
        });
        let ask = |host: &str| {
            let mut stream = TcpStream::connect(addr).expect("connect");
            write!(stream, "GET /health HTTP/1.1\r\n{host}\r\n").expect("send");
            until_closed(&mut stream)
        };
        assert!(ask("Host: evil.example.com\r\n").starts_with("HTTP/1.1 421"));
        assert!(ask("Host: localhost\r\nHost: evil.example.com\r\n").starts_with("HTTP/1.1 400"));
        assert!(ask("").starts_with("HTTP/1.1 400"));
        assert!(ask("Host: board.example.com:8077\r\n").starts_with("HTTP/1.1 200"));
        assert!(ask("Host: localhost\r\n").starts_with("HTTP/1.1 200"));
        let bad = ServeConfig {
            allowed_hosts: vec!["http://x".to_owned()],
            ..loopback_config()
        };
        assert!(matches!(
            Server::bind(&bad, Arc::new(NoBoards)),
            Err(ServeError::BadAllowedHost { .. })
        ));
    }
}
