//! A small HTTP/1.1 server: GET and HEAD only, one request per connection (`Connection: close`),
//! a bounded request head, read and write timeouts, and a cap on open connections. Every response
//! carries a restrictive Content-Security-Policy (scripts, styles and connections from this origin
//! only; no inline script or style; no frames, objects or form posts elsewhere).
//!
//! Routes: `/` (board; `?board=SLUG&assignee=NAME&q=TEXT&archived=1`), `/task/ID?board=SLUG`,
//! `/cron`, `/health`, `/events?board=SLUG` (server-sent events: `board` on any board change,
//! `log` with a task id when the log of its open run grew), `/assets/app.js`, `/assets/app.css`.
//! Anything else, an unknown board and an unknown task are 404 pages.
//!
//! Token: when the server has one, every request must carry it — `Authorization: Bearer T`, or
//! the cookie `kanban_token=T`, or `?token=T` in the URL (the answer then sets that cookie, so a
//! browser opened on `http://host:port/?token=T` keeps working). A request without it, or with a
//! wrong one, is answered 401 and reads nothing.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

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

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    /// Required on a non-loopback address.
    pub token: Option<String>,
    /// Open connections at most (event streams included); more are answered 503.
    pub max_connections: usize,
}

/// Why the server did not start.
#[derive(Debug)]
pub enum ServeError {
    /// A non-loopback address without a token.
    TokenRequired { listen: SocketAddr },
    /// An empty or whitespace token.
    BlankToken,
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

struct State<S> {
    source: Arc<S>,
    token: Option<String>,
    hub: Arc<Hub>,
    open: AtomicUsize,
    max_connections: usize,
}

/// A bound server; [`Server::run`] accepts until the listener fails.
pub struct Server<S> {
    listener: TcpListener,
    state: Arc<State<S>>,
}

impl<S: Source> Server<S> {
    /// Checks the token rule and binds the address.
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
        let listener = TcpListener::bind(config.listen).map_err(|source| ServeError::Bind {
            listen: config.listen,
            source,
        })?;
        Ok(Server {
            listener,
            state: Arc::new(State {
                source,
                token: config.token.clone(),
                hub: Arc::new(Hub::default()),
                open: AtomicUsize::new(0),
                max_connections: config.max_connections.max(1),
            }),
        })
    }

    /// The bound address (the real port when asked for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections, each on its own thread, until accepting fails.
    pub fn run(self) -> io::Result<()> {
        for stream in self.listener.incoming() {
            let stream = match stream {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_transient(&e) => continue,
                Err(e) => return Err(e),
            };
            let state = Arc::clone(&self.state);
            if state.open.fetch_add(1, Ordering::SeqCst) >= state.max_connections {
                state.open.fetch_sub(1, Ordering::SeqCst);
                let mut stream = stream;
                let _ = respond_error(
                    &mut stream,
                    false,
                    503,
                    "Service Unavailable",
                    "too many connections; try again",
                );
                continue;
            }
            let job_state = Arc::clone(&state);
            let started = state.source.spawn("kanban-web-conn", move || {
                let _ = handle(&job_state, stream);
                job_state.open.fetch_sub(1, Ordering::SeqCst);
            });
            if started.is_err() {
                state.open.fetch_sub(1, Ordering::SeqCst);
            }
        }
        Ok(())
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::WouldBlock
    ) || e.raw_os_error() == Some(24) // EMFILE: too many open files; the next accept may succeed
}

/// A parsed request head.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub authorization: Option<String>,
    pub cookie: Option<String>,
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

/// Decodes `%XX` and `+` (in query strings); `None` for a malformed escape or invalid UTF-8.
pub fn percent_decode(text: &str, plus_is_space: bool) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
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
        } else if name.eq_ignore_ascii_case("cookie") {
            request.cookie = Some(match request.cookie.take() {
                Some(old) => format!("{old}; {value}"),
                None => value,
            });
        }
    }
    Some(request)
}

/// Compares without an early exit, so the time taken does not tell how much of a guess matched.
fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = (a.len() != b.len()) as u8;
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
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

fn read_head(stream: &mut TcpStream) -> io::Result<Option<String>> {
    let mut reader = BufReader::new((&*stream).take(MAX_HEAD as u64));
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line)?;
        if n == 0 {
            return Ok(None); // closed or too long before the blank line
        }
        if line == "\r\n" || line == "\n" {
            break;
        }
        head.push_str(line.trim_end_matches(['\r', '\n']));
        head.push_str("\r\n");
    }
    Ok(Some(head.trim_end().to_owned()))
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

fn push_common_headers(out: &mut String) {
    out.push_str("Content-Security-Policy: ");
    out.push_str(CSP);
    out.push_str(
        "\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n\
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

fn handle<S: Source>(state: &State<S>, mut stream: TcpStream) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let Some(head) = read_head(&mut stream)? else {
        return respond_error(
            &mut stream,
            false,
            400,
            "Bad Request",
            "incomplete or oversized request",
        );
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
    if request.method != "GET" && !head_only {
        let mut r = Response::error(
            405,
            "Method Not Allowed",
            "this view is read-only: GET only",
        );
        r.extra.push("Allow: GET, HEAD".to_owned());
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
    if request.path == "/events" {
        return event_stream(state, stream, &request, auth);
    }
    let mut response = route(state, &request);
    if auth == Auth::GrantedByQuery
        && let Some(token) = &state.token
    {
        response.extra.push(format!(
            "Set-Cookie: kanban_token={}; Path=/; HttpOnly; SameSite=Strict",
            page::url_component(token)
        ));
    }
    write_response(&mut stream, head_only, &response)
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

fn route<S: Source>(state: &State<S>, request: &Request) -> Response {
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
            match state.source.board(&slug, filter.archived) {
                Ok(Some(view)) => {
                    Response::html(page::board_page(&view, &filter, &state.source.boards()))
                }
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
                    Ok(Some(view)) => Response::html(page::task_page(&view)),
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

fn event_stream<S: Source>(
    state: &State<S>,
    mut stream: TcpStream,
    request: &Request,
    auth: Auth,
) -> io::Result<()> {
    let Some(slug) = board_slug(state, request) else {
        return respond_error(&mut stream, false, 404, "Not Found", "no board is served");
    };
    let subscription = match state.hub.subscribe(&state.source, &slug) {
        Ok(Some(s)) => s,
        Ok(None) => {
            return respond_error(
                &mut stream,
                false,
                404,
                "Not Found",
                &format!("no board {slug} is served"),
            );
        }
        Err(e) => return write_response(&mut stream, false, &source_failure(&e)),
    };
    let mut head = String::from("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n");
    push_common_headers(&mut head);
    if auth == Auth::GrantedByQuery
        && let Some(token) = &state.token
    {
        head.push_str(&format!(
            "Set-Cookie: kanban_token={}; Path=/; HttpOnly; SameSite=Strict\r\n",
            page::url_component(token)
        ));
    }
    head.push_str("\r\nretry: 1000\n: connected\n\n");
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
}
