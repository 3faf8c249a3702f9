//! The owner daemon (`kanban owner serve --profile P`).
//!
//! One per (home, profile): a non-blocking `flock` on `owner.lock` proves it. The folder
//! `<home>/owner/<profile>/` is made `0700`; a fresh ticket is written `0600` at every start. The
//! socket is accepted on the main thread only; every connection is served on its own thread
//! (`identity::spawn`), and every board or `state.db` write happens there or on a turn's executor
//! thread, so a contended board never stalls the accept loop or another session.
//!
//! A peer is served only if its socket credentials name this process's effective uid **and** it
//! presented the ticket (`session.authenticate`); otherwise every request is `permission_denied`
//! and nothing changes.
//!
//! `kanban.run`, in order (each step a separate commit; the crash-window table of
//! docs/owner-admission.md says what a kill between two of them leaves and why a retry is safe):
//! 1. the closed, typed params; request id and session id;
//! 2. a saved session: every param must equal the frozen one (`permission_denied`), the board is
//!    not re-read; a new one: the claim is proved read-only (task and run current, lock equal,
//!    assignee's profile = this owner's, no foreign `owner_admitted`);
//! 3. **A** (`state.db`): session + frozen receipt + `queued` turn, one transaction (a replay
//!    returns the original row, a different payload is `admission_conflict`);
//! 4. **B** (board): `owner_admitted`, appended in the transaction that re-proves the claim (or an
//!    existing marker naming this session accepted);
//! 5. **C+D** (`state.db`, one commit): the marker confirmed on the turn and `queued → started`
//!    — only now is the managed worker started, so a kill after it leaves `started`, which the
//!    next start turns into `interrupted` or `unknown` (never replayed);
//! 7. the worker's `worker_result` (claim-bound) settles the turn `completed` / `failed`; no
//!    result is `unknown`.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::protocol::{self, Capabilities, Code, KanbanRun, RpcError};
use crate::admission::state::{Admitted, NewAdmission, StateDb};
use crate::board::admission::MarkerOutcome;
use crate::board::{self, Board, BoardError, Event, OpenOptions, RunStatus};
use crate::clock::Clock;
use crate::config::Config;
use crate::dispatch::{SpawnRequest, SpawnRole};
use crate::proc::exit::WorkerExit;
use crate::proc::exit::code;
use crate::proc::process;

/// A test-only fault point: the owner kills itself (SIGKILL) right after this commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// After A: session and queued turn in `state.db`.
    AfterSession,
    /// After B: the board's `owner_admitted` marker.
    AfterMarker,
    /// After C+D: the marker confirmed and the turn `started` in `state.db`, before the worker
    /// is spawned.
    AfterStarted,
}

/// Why the owner could not start.
#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    #[error("cannot prepare the owner folder {path}")]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("an owner for profile `{profile}` already runs under this home (lock {path})")]
    AlreadyRunning { profile: String, path: PathBuf },
    #[error("cannot listen on {path}")]
    Listen {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the owner's state.db")]
    State(#[source] BoardError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
}

/// What the owner's socket accepts from a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; one more is answered `too_many_connections` and closed.
    pub max_connections: usize,
    /// The longest request line, in bytes (newline excluded); a longer one is answered
    /// `request_too_large` and the connection closed.
    pub max_line: usize,
    /// How long the owner waits for the next whole request line on a connection (from the end
    /// of its previous answer, or the connect); then `request_timeout` and the connection closed.
    pub request_deadline: Duration,
}

/// Board connections the owner keeps open per board between admissions: as many as turns are
/// admitted or booked at once, about.
const KEPT_BOARDS: usize = 8;

/// The longest request line: 1 MiB.
/// The first and the longest pause between tries to record the end of a turn.
const SETTLE_RETRY_FIRST: Duration = Duration::from_millis(50);
const SETTLE_RETRY_MAX: Duration = Duration::from_secs(2);
pub(crate) const MAX_LINE: usize = 1 << 20;
/// The time a peer has to send a whole request line.
pub(crate) const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// The fewest connections an owner serves at once.
pub(crate) const MIN_CONNECTIONS: usize = 64;

impl Limits {
    /// Room for a submitter per spawn slot twice over (a submitter and its reconnection, or a
    /// second board) plus operators, at least [`MIN_CONNECTIONS`].
    pub fn for_config(config: &Config) -> Limits {
        let spawn = usize::try_from(config.dispatch.max_spawn).unwrap_or(usize::MAX);
        Limits {
            max_connections: spawn.saturating_mul(2).max(MIN_CONNECTIONS),
            max_line: MAX_LINE,
            request_deadline: REQUEST_DEADLINE,
        }
    }
}

/// Why [`serve`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// SIGTERM / SIGINT (`kanban owner stop`): drained, its turns ended.
    Stopped,
    /// `--idle-exit`: no turn and no request for that long.
    Idle,
    /// Its socket file was removed or replaced (the home deleted, or another owner took over).
    SocketGone,
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Ended::Stopped => "stopped: drained, every turn ended",
            Ended::Idle => "idle for its --idle-exit time: exiting (a submitter starts it again)",
            Ended::SocketGone => "its socket was removed (home deleted?): drained and exiting",
        })
    }
}

/// How to run an owner.
pub struct ServeOptions {
    pub root: PathBuf,
    pub profile: String,
    pub config: Config,
    pub clock: Arc<dyn Clock>,
    pub fault: Option<Fault>,
    /// Set (by SIGTERM/SIGINT) to drain: refuse new runs, wait for running turns, exit.
    pub stop: Arc<AtomicBool>,
    /// Exit after this long with no turn running, no connection and no request (owners a
    /// submitter starts); `None`: run until stopped.
    pub idle_exit: Option<Duration>,
    pub limits: Limits,
}

struct Owner {
    root: PathBuf,
    profile: String,
    default_profile: String,
    uid: u32,
    ticket: String,
    epoch: i64,
    state: Mutex<StateDb>,
    /// Signalled (with `state`) whenever a turn settles: a `kanban.receipt` that asked to wait
    /// (`wait_ms`) wakes at once instead of its submitter polling.
    settled: Condvar,
    executing: Mutex<HashSet<String>>,
    /// Board connections kept open between admissions, per board: opening one (reading its
    /// schema, preparing its statements again) cost more than the proof, the marker and the
    /// booking it serves. See [`Owner::board`].
    boards: Mutex<HashMap<PathBuf, Vec<Board>>>,
    draining: AtomicBool,
    fault: Option<Fault>,
    clock: Arc<dyn Clock>,
    limits: Limits,
    /// Connections being served now.
    connections: AtomicUsize,
    /// When (clock seconds) a request was last answered or a turn last ended.
    last_activity: AtomicI64,
}

/// Counts one served connection for as long as it lives.
struct Served(Arc<Owner>);

impl Drop for Served {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
        self.0.touch();
    }
}

/// Creates `dir` (and parents) and makes it `0700`, refusing one another user owns.
fn private_dir(dir: &Path) -> Result<(), OwnerError> {
    let err = |source| OwnerError::Folder {
        path: dir.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
    Ok(())
}

/// 32 random hex digits from the kernel.
fn random_ticket() -> std::io::Result<String> {
    crate::proc::random::hex(16)
}

/// Writes the ticket `0600` (a temporary file renamed into place).
fn write_ticket(path: &Path, ticket: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(ticket.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Runs the owner until `stop` is set (or it idled for `idle_exit`, or its socket was removed)
/// and its running turns ended.
pub fn serve(opts: ServeOptions) -> Result<Ended, OwnerError> {
    let dir = super::owner_dir(&opts.root, &opts.profile);
    private_dir(&dir)?;
    let lock_path = super::lock_path(&opts.root, &opts.profile);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .map_err(|source| OwnerError::Folder {
            path: lock_path.clone(),
            source,
        })?;
    if !matches!(crate::proc::lock::try_exclusive(&lock), Ok(true)) {
        return Err(OwnerError::AlreadyRunning {
            profile: opts.profile,
            path: lock_path,
        });
    }
    let state =
        StateDb::open(&super::state_path(&opts.root, &opts.profile)).map_err(OwnerError::State)?;
    let now = opts.clock.now();
    let pause = opts.config.dispatch.owner_lost_turn == "pause";
    let (epoch, lost) = state
        .begin_epoch(now, &lost_turn(pause))
        .map_err(OwnerError::State)?;
    for row in &lost {
        if pause {
            eprintln!(
                "kanban owner: turn {} of task {} run {} was started by an earlier owner: now unknown (never replayed; `kanban owner resolve {}`)",
                row.admission_id, row.task_id, row.run_id, row.task_id
            );
        } else {
            eprintln!(
                "kanban owner: turn {} of task {} run {} was started by an earlier owner: now interrupted (never replayed; the card runs again as a new attempt)",
                row.admission_id, row.task_id, row.run_id
            );
        }
    }
    reconcile_markers(&opts.root, &state, now);

    let ticket_path = super::ticket_path(&opts.root, &opts.profile);
    let ticket = random_ticket()
        .and_then(|t| write_ticket(&ticket_path, &t).map(|()| t))
        .map_err(|source| OwnerError::Folder {
            path: ticket_path.clone(),
            source,
        })?;
    let socket = super::socket_path(&opts.root, &opts.profile);
    // We hold the lock: a socket file left here belongs to a dead owner.
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).map_err(|source| OwnerError::Listen {
        path: socket.clone(),
        source,
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| OwnerError::Listen {
            path: socket.clone(),
            source,
        })?;
    let socket_inode = std::fs::metadata(&socket)
        .map_err(|source| OwnerError::Listen {
            path: socket.clone(),
            source,
        })?
        .ino();
    let owner = Arc::new(Owner {
        root: opts.root.clone(),
        profile: opts.profile.clone(),
        default_profile: opts.config.dispatch.default_profile.trim().to_lowercase(),
        uid: rustix::process::geteuid().as_raw(),
        ticket,
        epoch,
        state: Mutex::new(state),
        settled: Condvar::new(),
        executing: Mutex::new(HashSet::new()),
        boards: Mutex::new(HashMap::new()),
        draining: AtomicBool::new(false),
        fault: opts.fault,
        clock: opts.clock.clone(),
        limits: opts.limits,
        connections: AtomicUsize::new(0),
        last_activity: AtomicI64::new(opts.clock.now()),
    });
    eprintln!(
        "kanban owner: serving profile `{}` on {} (epoch {epoch})",
        opts.profile,
        socket.display()
    );
    let mut ended: Option<Ended> = None;
    let mut next_socket_check = Instant::now();
    loop {
        if ended.is_none() && opts.stop.load(Ordering::SeqCst) {
            ended = Some(Ended::Stopped);
        }
        if ended.is_none() && Instant::now() >= next_socket_check {
            next_socket_check = Instant::now() + SOCKET_CHECK;
            if std::fs::metadata(&socket).map(|m| m.ino()).ok() != Some(socket_inode) {
                ended = Some(Ended::SocketGone);
            }
        }
        if ended.is_none()
            && let Some(idle) = opts.idle_exit
            && owner.idle_for(idle)
        {
            ended = Some(Ended::Idle);
        }
        if ended.is_some() {
            owner.draining.store(true, Ordering::SeqCst);
            if owner.executing.lock().map(|e| e.is_empty()).unwrap_or(true) {
                break;
            }
        }
        match listener.accept() {
            Ok((stream, _)) => owner.admit_connection(stream),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => wait_for_peer(&listener),
            Err(e) => {
                eprintln!("kanban owner: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    // A socket file another owner bound meanwhile is not ours to remove.
    if ended != Some(Ended::SocketGone) {
        let _ = std::fs::remove_file(&socket);
    }
    drop(lock);
    Ok(ended.unwrap_or(Ended::Stopped))
}

/// How often the owner checks that its socket file is still the one it bound.
const SOCKET_CHECK: Duration = Duration::from_secs(1);

/// The longest the accept loop waits for a peer before it looks at its stop flag, its idle time
/// and its socket file again.
const ACCEPT_WAIT: Duration = Duration::from_millis(50);

/// Waits until a peer is ready to be accepted on `listener`, a signal arrives or
/// [`ACCEPT_WAIT`] passes: a submitter is accepted the moment it connects (a fixed pause between
/// two `accept` calls delayed every turn by half of it on average).
fn wait_for_peer(listener: &UnixListener) {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let timeout = Timespec {
        tv_sec: 0,
        tv_nsec: i64::from(ACCEPT_WAIT.subsec_nanos()),
    };
    let mut fds = [PollFd::new(listener, PollFlags::IN)];
    if let Err(e) = rustix::event::poll(&mut fds, Some(&timeout))
        && e != rustix::io::Errno::INTR
    {
        // Not expected of a listening socket; pause as long as a quiet wait would.
        eprintln!("kanban owner: cannot wait for a peer: {e}");
        std::thread::sleep(ACCEPT_WAIT);
    }
}

/// Reads one request line of at most `limits.max_line` bytes, all of it within
/// `limits.request_deadline`; `Ok(None)` at the end of the stream.
fn read_request(
    reader: &mut BufReader<UnixStream>,
    limits: &Limits,
) -> Result<Option<Vec<u8>>, LineError> {
    let deadline = Instant::now() + limits.request_deadline;
    let mut line = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(LineError::Timeout);
        }
        reader
            .get_ref()
            .set_read_timeout(Some(left))
            .map_err(|_| LineError::Broken)?;
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(LineError::Timeout);
            }
            Err(_) => return Err(LineError::Broken),
        };
        if buf.is_empty() {
            return Ok((!line.is_empty()).then_some(line));
        }
        let (take, complete) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        if line.len() + take > limits.max_line {
            return Err(LineError::TooLarge);
        }
        line.extend_from_slice(&buf[..take]);
        reader.consume(if complete { take + 1 } else { take });
        if complete {
            return Ok(Some(line));
        }
    }
}

/// Why a request line was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineError {
    TooLarge,
    Timeout,
    Broken,
}

/// The exit code an operator's decision on a turn carries (`owner.resolve`'s `as`).
pub(crate) fn decision_exit_code(status: &str) -> Option<i32> {
    match status {
        "completed" => Some(code::OK),
        "failed" => Some(code::FAILED),
        "interrupted" => Some(code::INTERRUPTED),
        _ => None,
    }
}

/// `kanban owner resolve` while no owner of `profile` runs: under the owner's lock (so none
/// starts meanwhile; a submitter's launch finds it held and tries again later) the decision is
/// written to `state.db` directly, as the owner would. `Ok(None)`: no `unknown` turn of the task.
pub(crate) fn resolve_offline(
    root: &Path,
    profile: &str,
    task_id: &str,
    status: &str,
    requeue: bool,
    now: i64,
) -> Result<Option<crate::admission::state::AdmissionRow>, OwnerError> {
    let exit_code = decision_exit_code(status).unwrap_or(code::FAILED);
    let lock_path = super::lock_path(root, profile);
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(&lock_path)
        .map_err(|source| OwnerError::Folder {
            path: lock_path.clone(),
            source,
        })?;
    if !matches!(crate::proc::lock::try_exclusive(&lock), Ok(true)) {
        return Err(OwnerError::AlreadyRunning {
            profile: profile.to_owned(),
            path: lock_path,
        });
    }
    let state = StateDb::open(&super::state_path(root, profile)).map_err(OwnerError::State)?;
    // Holding the lock proves no owner runs: a turn still `started` was lost with its owner and
    // is the operator's to decide, as `unknown` is.
    state
        .begin_epoch(now, &lost_turn(true))
        .map_err(OwnerError::State)?;
    let row = state
        .resolve(task_id, status, exit_code, requeue, now)
        .map_err(OwnerError::State)?;
    drop(lock);
    Ok(row)
}

/// What a turn lost with an earlier owner becomes (`[dispatch] owner_lost_turn`): `interrupted`
/// with exit 130 — its submitter exits 130, a crash the dispatcher counts, and the card runs again
/// as a fresh attempt — or, with `"pause"`, `unknown` for `kanban owner resolve`.
fn lost_turn(pause: bool) -> crate::admission::state::LostTurn {
    if pause {
        crate::admission::state::LostTurn {
            status: "unknown",
            exit_code: None,
            output: None,
        }
    } else {
        crate::admission::state::LostTurn {
            status: "interrupted",
            exit_code: Some(code::INTERRUPTED),
            output: Some(
                "the owner stopped while this turn ran: lost (it may have had effects before it was lost), not replayed",
            ),
        }
    }
}

/// At start: a queued turn whose marker was committed on the board but not confirmed in
/// `state.db` (a kill between B and C) is confirmed now, so the window needs no operator.
fn reconcile_markers(root: &Path, state: &StateDb, now: i64) {
    let Ok(rows) = state.list() else {
        return;
    };
    for row in rows
        .iter()
        .filter(|r| r.status == "queued" && !r.marker_confirmed)
    {
        let Ok(Some(receipt)) = state.receipt(&row.session_id) else {
            continue;
        };
        let Ok(receipt) = serde_json::from_str::<Value>(&receipt) else {
            continue;
        };
        let Some(db) = receipt["db_path"].as_str() else {
            continue;
        };
        let _ = root;
        let Ok(board) = Board::open_path(Path::new(db), &OpenOptions::read_only()) else {
            continue;
        };
        if let Ok(Some(view)) = board.claim_view(&row.task_id, row.run_id)
            && view
                .marker
                .as_ref()
                .is_some_and(|(sid, _)| sid == &row.session_id)
        {
            let _ = state.confirm_marker(&row.admission_id, now);
        }
    }
}

/// The credentials of the peer at the other end of `stream`: (pid, uid).
fn peer(stream: &UnixStream) -> Option<(i64, u32)> {
    let cred = rustix::net::sockopt::socket_peercred(stream).ok()?;
    Some((
        i64::from(cred.pid.as_raw_nonzero().get()),
        cred.uid.as_raw(),
    ))
}

impl Owner {
    fn fault(&self, point: Fault) {
        if self.fault == Some(point) {
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        }
    }

    /// Serves `stream` on its own thread, unless [`Limits::max_connections`] are served already:
    /// then it is answered `too_many_connections` and closed (the owner keeps serving the
    /// others).
    fn admit_connection(self: &Arc<Self>, stream: UnixStream) {
        let count = self.connections.fetch_add(1, Ordering::SeqCst) + 1;
        let served = Served(Arc::clone(self));
        if count > self.limits.max_connections {
            // A fresh socket's send buffer takes one short line without blocking.
            let _ = stream.set_nonblocking(true);
            refuse(stream, -32000, "too_many_connections");
            return;
        }
        let _ = stream.set_nonblocking(false);
        if let Err(e) = crate::identity::spawn("kanban-owner-conn", move || {
            served.0.clone().serve_peer(stream)
        }) {
            eprintln!("kanban owner: cannot start a connection thread: {e}");
        }
    }

    /// Notes activity now (a request answered, a connection closed, a turn ended).
    fn touch(&self) {
        self.last_activity.store(self.clock.now(), Ordering::SeqCst);
    }

    /// True when no turn runs, no connection is open and nothing happened for `idle`.
    fn idle_for(&self, idle: Duration) -> bool {
        let quiet = self.clock.now() - self.last_activity.load(Ordering::SeqCst);
        self.connections.load(Ordering::SeqCst) == 0
            && self.executing.lock().map(|e| e.is_empty()).unwrap_or(false)
            && u64::try_from(quiet).is_ok_and(|q| q >= idle.as_secs())
    }

    fn serve_peer(self: Arc<Self>, stream: UnixStream) {
        let peer = peer(&stream);
        let Ok(read) = stream.try_clone() else {
            return;
        };
        let mut out = stream;
        let mut reader = BufReader::new(read);
        let mut caps: Option<Capabilities> = None;
        loop {
            let line = match read_request(&mut reader, &self.limits) {
                Ok(Some(line)) => line,
                Ok(None) | Err(LineError::Broken) => return,
                Err(LineError::TooLarge) => return refuse(out, -32600, "request_too_large"),
                Err(LineError::Timeout) => return refuse(out, -32600, "request_timeout"),
            };
            let Ok(line) = String::from_utf8(line) else {
                return refuse(out, -32700, "parse_error");
            };
            if line.trim().is_empty() {
                continue;
            }
            let mut reply = self.answer(&line, peer, &mut caps);
            reply.push('\n');
            self.touch();
            if out.write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
    }

    fn answer(
        self: &Arc<Self>,
        line: &str,
        peer: Option<(i64, u32)>,
        caps: &mut Option<Capabilities>,
    ) -> String {
        let Ok(msg) = serde_json::from_str::<Value>(line) else {
            return protocol::protocol_error(&Value::Null, -32700, "parse_error");
        };
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        let (Some("2.0"), Some(method)) = (
            msg.get("jsonrpc").and_then(Value::as_str),
            msg.get("method").and_then(Value::as_str),
        ) else {
            return protocol::protocol_error(&id, -32600, "invalid_request");
        };
        let params = msg.get("params").cloned().unwrap_or(json!({}));
        match self.dispatch(method, &params, peer, caps) {
            Ok(Some(result)) => protocol::response(&id, result),
            Ok(None) => protocol::protocol_error(&id, -32601, "method_not_found"),
            Err(err) => protocol::error_response(&id, &err),
        }
    }

    fn dispatch(
        self: &Arc<Self>,
        method: &str,
        params: &Value,
        peer: Option<(i64, u32)>,
        caps: &mut Option<Capabilities>,
    ) -> Result<Option<Value>, RpcError> {
        let denied = |reason: &str| RpcError::new(Code::PermissionDenied, reason);
        let Some((peer_pid, uid)) = peer else {
            return Err(denied("peer_credentials_unreadable"));
        };
        if uid != self.uid {
            return Err(denied("peer_uid"));
        }
        if method == "session.authenticate" {
            let presented = params.get("ticket").and_then(Value::as_str).unwrap_or("");
            if !constant_time_eq(presented.as_bytes(), self.ticket.as_bytes()) {
                *caps = None;
                return Err(denied("bad_ticket"));
            }
            let operator = params.get("operator").and_then(Value::as_bool) == Some(true);
            let granted = Capabilities::granted(operator);
            *caps = Some(granted);
            return Ok(Some(json!({
                "profile": self.profile,
                "capabilities": granted.names(),
                "epoch": self.epoch,
            })));
        }
        let Some(caps) = *caps else {
            return Err(denied("not_authenticated"));
        };
        let principal = format!("uid:{uid}");
        match method {
            "kanban.run" => {
                if !caps.create || !caps.submit {
                    return Err(denied("missing_capability:session:create"));
                }
                if self.draining.load(Ordering::SeqCst) {
                    return Err(RpcError::new(Code::RuntimeDraining, "owner_draining"));
                }
                let run = protocol::parse_kanban_run(params)?;
                self.kanban_run(&run, &principal, peer_pid).map(Some)
            }
            "kanban.receipt" => {
                if !caps.read {
                    return Err(denied("missing_capability:session:read"));
                }
                let Some(sid) = params.get("session_id").and_then(Value::as_str) else {
                    return Err(RpcError::new(
                        Code::InvalidParams,
                        "not_a_string:session_id",
                    ));
                };
                let wait = protocol::parse_wait_ms(params)?;
                let row = self.receipt_row(sid, wait)?;
                match row {
                    Some(row) if row.principal_id == principal || caps.operator => {
                        Ok(Some(receipt(&row)))
                    }
                    Some(_) => Err(denied("other_principal")),
                    None => Err(RpcError::new(Code::NotFound, "unknown_session")),
                }
            }
            "owner.status" => {
                if !caps.read {
                    return Err(denied("missing_capability:session:read"));
                }
                let rows = self.lock_state()?.list()?;
                Ok(Some(json!({
                    "profile": self.profile,
                    "pid": std::process::id(),
                    "epoch": self.epoch,
                    "draining": self.draining.load(Ordering::SeqCst),
                    "connections": self.connections.load(Ordering::SeqCst),
                    "turns": rows.iter().map(receipt).collect::<Vec<_>>(),
                })))
            }
            "owner.resolve" => {
                if !caps.operator {
                    return Err(denied("missing_capability:session:operator"));
                }
                self.resolve(params).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// The admission of session `sid`; while its turn is `queued` or `started`, waits up to
    /// `wait` for it to settle (woken by [`Owner::settled`]).
    fn receipt_row(
        &self,
        sid: &str,
        wait: Duration,
    ) -> Result<Option<crate::admission::state::AdmissionRow>, RpcError> {
        let deadline = Instant::now() + wait;
        let mut state = self.lock_state()?;
        loop {
            let row = state.by_session(sid)?;
            let pending = row
                .as_ref()
                .is_some_and(|r| matches!(r.status.as_str(), "queued" | "started"));
            let left = deadline.saturating_duration_since(Instant::now());
            if !pending || left.is_zero() {
                return Ok(row);
            }
            state = self
                .settled
                .wait_timeout(state, left)
                .map_err(|_| RpcError::new(Code::StorageUnavailable, "state_lock_poisoned"))?
                .0;
        }
    }

    /// A connection to the board at `db`: one kept from an earlier admission, else a new one.
    /// Give it back with [`Owner::give_back`] once done (one dropped instead is only not kept).
    fn board(&self, db: &Path) -> Result<Board, crate::board::BoardError> {
        let kept = self
            .boards
            .lock()
            .ok()
            .and_then(|mut boards| boards.get_mut(db).and_then(Vec::pop));
        match kept {
            Some(board) => Ok(board),
            None => Board::open_path(db, &OpenOptions::default()),
        }
    }

    /// Keeps `board` for the next admission (at most [`KEPT_BOARDS`] per board; a PostgreSQL
    /// connection that was lost is dropped).
    fn give_back(&self, db: &Path, board: Board) {
        if board.connection_lost() {
            return;
        }
        if let Ok(mut boards) = self.boards.lock() {
            let kept = boards.entry(db.to_owned()).or_default();
            if kept.len() < KEPT_BOARDS {
                kept.push(board);
            }
        }
    }

    fn lock_state(&self) -> Result<std::sync::MutexGuard<'_, StateDb>, RpcError> {
        self.state
            .lock()
            .map_err(|_| RpcError::new(Code::StorageUnavailable, "state_lock_poisoned"))
    }

    /// Proves the claim read-only and builds the frozen receipt of a new session.
    fn prove(
        &self,
        run: &KanbanRun,
        request_id: &str,
        session_id: &str,
    ) -> Result<Value, RpcError> {
        let claim = |reason: &str| RpcError::new(Code::InvalidKanbanClaim, reason);
        let stale = |reason: &str| RpcError::new(Code::StaleKanbanClaim, reason);
        crate::home::validate_slug(&run.board).map_err(|_| claim("invalid_board_slug"))?;
        let db = match &run.db {
            // A PostgreSQL board is named by its URL (without a password: the owner finds it
            // where libpq would), opened as it is.
            Some(url) if crate::db::target::is_postgres_url(url) => PathBuf::from(url),
            Some(db) => std::fs::canonicalize(db).map_err(|_| claim("db_not_found"))?,
            None => {
                let path = crate::home::db_path(&self.root, &run.board);
                if !path.exists() {
                    return Err(RpcError::new(Code::NotFound, "unknown_board"));
                }
                std::fs::canonicalize(&path).map_err(|_| claim("db_not_found"))?
            }
        };
        let b = self.board(&db).map_err(|_| claim("board_unreadable"))?;
        let view = b
            .claim_view(&run.task_id, run.run_id)?
            .ok_or_else(|| claim("unknown_task"))?;
        let Some((run_task, run_status, run_lock)) = &view.run else {
            return Err(claim("unknown_run"));
        };
        if run_task != &run.task_id {
            return Err(claim("run_of_another_task"));
        }
        if view.task_status != "running" || view.current_run_id != Some(run.run_id) {
            return Err(stale("run_superseded"));
        }
        if view.claim_lock.as_deref() != Some(run.claim_lock.as_str()) {
            return Err(stale("claim_lock_mismatch"));
        }
        if run_status != "running" || run_lock.as_deref() != Some(run.claim_lock.as_str()) {
            return Err(stale("run_not_running"));
        }
        let assignee = view
            .assignee
            .as_deref()
            .map(|a| a.trim().to_lowercase())
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| self.default_profile.clone());
        if assignee != self.profile {
            return Err(RpcError::new(Code::ProfileMismatch, "assignee_profile"));
        }
        if let Some((sid, rid)) = &view.marker
            && (sid != session_id || rid != request_id)
        {
            return Err(stale("foreign_owner_marker"));
        }
        let task = b.get_task(&run.task_id)?;
        self.give_back(&db, b);
        let workspace = task.workspace_path.as_ref().map_or_else(
            || crate::home::find_workspace(&self.root, &run.board, &run.task_id),
            PathBuf::from,
        );
        Ok(json!({
            "source": "kanban",
            "toolset": "kanban",
            "profile": self.profile,
            "cwd": workspace,
            "params": run,
            "db_path": db,
            "request_id": request_id,
            "session_id": session_id,
            "policy": Policy::of(&task),
        }))
    }

    fn kanban_run(
        self: &Arc<Self>,
        run: &KanbanRun,
        principal: &str,
        peer_pid: i64,
    ) -> Result<Value, RpcError> {
        let request_id = protocol::request_id(&run.board, &run.task_id, run.run_id);
        let session_id = protocol::session_id(&self.profile, principal, &request_id);
        let saved = self.lock_state()?.receipt(&session_id)?;
        let receipt_json = match saved {
            Some(saved) => {
                // Retry: every param must equal the frozen one; the card is never re-read.
                let frozen: Value = serde_json::from_str(&saved)
                    .map_err(|_| RpcError::new(Code::StorageUnavailable, "receipt_unreadable"))?;
                if frozen["params"] != serde_json::to_value(run).unwrap_or(Value::Null) {
                    return Err(RpcError::new(
                        Code::PermissionDenied,
                        "saved_claim_mismatch",
                    ));
                }
                saved
            }
            None => self.prove(run, &request_id, &session_id)?.to_string(),
        };
        let frozen: Value = serde_json::from_str(&receipt_json).unwrap_or(Value::Null);
        let db = PathBuf::from(frozen["db_path"].as_str().unwrap_or_default());
        let policy = Policy::frozen(&frozen, &db, &run.task_id);
        let payload = protocol::turn_payload(&run.task_id);
        let admission_id = format!("adm-{}", random_ticket().unwrap_or_default());
        let new = NewAdmission {
            principal_id: principal,
            session_id: &session_id,
            request_id: &request_id,
            receipt_json: &receipt_json,
            payload_json: &payload,
            task_id: &run.task_id,
            run_id: run.run_id,
            admission_id: &admission_id,
        };
        let now = self.clock.now();
        let row = match self.lock_state()?.admit(&new, self.epoch, now)? {
            Admitted::Created(row) | Admitted::Replay(row) => row,
            Admitted::Conflict => {
                return Err(RpcError::new(Code::AdmissionConflict, "payload_differs"));
            }
        };
        self.fault(Fault::AfterSession);
        if row.status == "queued" && !row.marker_confirmed {
            let b = self.board(&db)?;
            let marker = Event::OwnerAdmitted {
                db: self.lock_state()?.path().display().to_string(),
                session_id: session_id.clone(),
                request_id: request_id.clone(),
                pid: i64::from(std::process::id()),
                birth: process::fingerprint(std::process::id() as i32),
            };
            let appended = b.append_owner_marker(
                &run.task_id,
                run.run_id,
                &run.claim_lock,
                &marker,
                &session_id,
                now,
            );
            self.give_back(&db, b);
            match appended? {
                MarkerOutcome::Appended | MarkerOutcome::Existing => {}
                MarkerOutcome::Foreign => {
                    self.lock_state()?.refuse_queued(
                        &row.admission_id,
                        "foreign_owner_marker",
                        now,
                    )?;
                    return Err(RpcError::new(
                        Code::StaleKanbanClaim,
                        "foreign_owner_marker",
                    ));
                }
                MarkerOutcome::Stale => {
                    self.lock_state()?.refuse_queued(
                        &row.admission_id,
                        "claim_not_current",
                        now,
                    )?;
                    return Err(RpcError::new(Code::StaleKanbanClaim, "claim_not_current"));
                }
            }
            self.fault(Fault::AfterMarker);
            // C: the marker is confirmed by the commit that starts the turn (`start`).
            self.start(&row.admission_id, run.clone(), db, peer_pid, policy, true)?;
        } else if row.status == "queued" && row.marker_confirmed {
            self.start(&row.admission_id, run.clone(), db, peer_pid, policy, false)?;
        }
        let row = self.lock_state()?.get(&row.admission_id)?.unwrap_or(row);
        Ok(json!({"session_id": session_id, "receipt": receipt(&row)}))
    }

    /// Starts the turn's executor thread (once per admission in this process); `confirm`: the
    /// board's marker was just appended, and the commit that starts the turn also confirms it
    /// (C and D in one commit: a kill before it leaves the unconfirmed turn B leaves).
    fn start(
        self: &Arc<Self>,
        admission_id: &str,
        run: KanbanRun,
        db: PathBuf,
        submitter_pid: i64,
        frozen_policy: Result<Policy, RpcError>,
        confirm: bool,
    ) -> Result<(), RpcError> {
        {
            let mut executing = self
                .executing
                .lock()
                .map_err(|_| RpcError::new(Code::StorageUnavailable, "executor_lock_poisoned"))?;
            if !executing.insert(admission_id.to_owned()) {
                return Ok(());
            }
        }
        let now = self.clock.now();
        let started = self
            .lock_state()?
            .mark_started(admission_id, self.epoch, now, confirm);
        match started {
            Ok(true) => {}
            Ok(false) => {
                self.done(admission_id);
                return Ok(());
            }
            Err(e) => {
                self.done(admission_id);
                return Err(e.into());
            }
        }
        self.fault(Fault::AfterStarted);
        let fingerprint = i32::try_from(submitter_pid)
            .ok()
            .and_then(process::fingerprint);
        let request = self.spawn_request(&run, &db, submitter_pid, fingerprint, frozen_policy);
        let owner = Arc::clone(self);
        let id = admission_id.to_owned();
        let spawned = crate::identity::spawn("kanban-owner-turn", move || {
            owner.execute(&id, &run, request);
        });
        if let Err(e) = spawned {
            let _ = self.lock_state()?.settle(
                admission_id,
                self.epoch,
                "failed",
                Some(1),
                Some(&format!("cannot start the turn thread: {e}")),
                now,
            );
            self.settled.notify_all();
            self.done(admission_id);
        }
        Ok(())
    }

    fn done(&self, admission_id: &str) {
        if let Ok(mut e) = self.executing.lock() {
            e.remove(admission_id);
        }
        self.touch();
    }

    /// The managed worker's launch: the card's policy as frozen at admission (`policy`), never
    /// the live card's.
    fn spawn_request(
        &self,
        run: &KanbanRun,
        db: &Path,
        submitter_pid: i64,
        submitter_fingerprint: Option<String>,
        policy: Result<Policy, RpcError>,
    ) -> Result<SpawnRequest, String> {
        let policy = policy.map_err(|e| format!("the turn's frozen receipt: {e}"))?;
        let workspace = policy.workspace.as_ref().map_or_else(
            || crate::home::find_workspace(&self.root, &run.board, &run.task_id),
            PathBuf::from,
        );
        Ok(SpawnRequest {
            task_id: run.task_id.clone(),
            run_id: run.run_id,
            claim_lock: run.claim_lock.clone(),
            profile: self.profile.clone(),
            root: self.root.clone(),
            board: run.board.clone(),
            db: db.to_owned(),
            workspaces_root: workspace.parent().map_or_else(
                || crate::home::workspaces_root(&self.root, &run.board),
                Path::to_path_buf,
            ),
            workspace,
            log: crate::home::log_path(&self.root, &run.board, &run.task_id),
            branch: policy.branch,
            goal_mode: policy.goal_mode,
            goal_max_turns: policy.goal_max_turns,
            tenant: policy.tenant,
            role: SpawnRole::Managed {
                submitter_pid,
                submitter_fingerprint,
                owner_pid: i64::from(std::process::id()),
            },
        })
    }

    /// Runs one started turn in a managed worker and settles it from its `worker_result`.
    fn execute(&self, admission_id: &str, run: &KanbanRun, request: Result<SpawnRequest, String>) {
        // The end of a turn is recorded whatever it takes: a submitter waits for it. A write the
        // state file refuses for a moment (a full disk, a busy lock) is tried again, backing off;
        // were this owner to die meanwhile, the next one settles the turn `interrupted`.
        let settle = |status: &str, code: Option<i32>, output: Option<&str>| {
            let mut pause = SETTLE_RETRY_FIRST;
            loop {
                let Ok(state) = self.state.lock() else {
                    return;
                };
                let written = state.settle(
                    admission_id,
                    self.epoch,
                    status,
                    code,
                    output,
                    self.clock.now(),
                );
                drop(state);
                match written {
                    Ok(_) => {
                        self.settled.notify_all();
                        return;
                    }
                    Err(e) => {
                        eprintln!(
                            "kanban owner: cannot record the end of turn {admission_id} ({}); \
                             trying again in {pause:?}",
                            crate::error_chain(&e)
                        );
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(SETTLE_RETRY_MAX);
                    }
                }
            }
        };
        let outcome = request.and_then(|req| {
            crate::dispatch::default_spawn(&req).map_err(|e| crate::error_chain(&e))
        });
        match outcome {
            Err(message) => settle("failed", Some(1), Some(&message)),
            Ok(mut child) => {
                if let Ok(state) = self.state.lock() {
                    let _ = state.note_worker(admission_id, i64::from(child.id()));
                }
                let pid = i64::from(child.id());
                let exit = match child.wait() {
                    Ok(status) => WorkerExit::from_status(status),
                    Err(_) => WorkerExit::Unknown,
                };
                // One connection for the three facts the booking needs.
                let db = self.frozen_db(run);
                let board = db.as_deref().and_then(|db| self.board(db).ok());
                let booked = book(&TurnEvidence {
                    result: board.as_ref().and_then(|b| {
                        b.worker_result_for(&run.task_id, run.run_id, &run.claim_lock)
                            .ok()?
                    }),
                    bound_here: board
                        .as_ref()
                        .and_then(|b| b.bound_worker(&run.task_id, run.run_id).ok()?)
                        == Some(pid),
                    exit,
                    run: board.as_ref().and_then(|b| {
                        b.turn_run_status(&run.task_id, run.run_id, &run.claim_lock)
                            .ok()
                    }),
                });
                if let (Some(db), Some(board)) = (db, board) {
                    self.give_back(&db, board);
                }
                settle(booked.status, booked.exit_code, Some(&booked.output));
            }
        }
        self.done(admission_id);
    }

    /// The board file frozen in the run's receipt.
    fn frozen_db(&self, run: &KanbanRun) -> Option<PathBuf> {
        let receipt = self
            .lock_state()
            .ok()?
            .receipt(&protocol::session_id(
                &self.profile,
                &format!("uid:{}", self.uid),
                &protocol::request_id(&run.board, &run.task_id, run.run_id),
            ))
            .ok()??;
        let frozen: Value = serde_json::from_str(&receipt).ok()?;
        Some(PathBuf::from(frozen["db_path"].as_str()?))
    }

    /// `owner.resolve {task_id, as, requeue}`.
    fn resolve(&self, params: &Value) -> Result<Value, RpcError> {
        let bad = |r: &str| RpcError::new(Code::InvalidParams, r);
        let task = params
            .get("task_id")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| bad("not_a_string:task_id"))?;
        // The submitter exits with the decided outcome's code.
        let (status, exit_code) = match params.get("as").and_then(Value::as_str) {
            Some(s) => match decision_exit_code(s) {
                Some(c) => (s, c),
                None => return Err(bad("as_not_interrupted_failed_completed")),
            },
            None => return Err(bad("as_not_interrupted_failed_completed")),
        };
        let requeue = params
            .get("requeue")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let row = self
            .lock_state()?
            .resolve(task, status, exit_code, requeue, self.clock.now())?
            .ok_or_else(|| RpcError::new(Code::NotFound, "no_unknown_turn"))?;
        self.settled.notify_all();
        Ok(receipt(&row))
    }
}

/// Answers a peer the owner will not serve (any further) with one protocol error, then closes.
fn refuse(mut stream: UnixStream, number: i64, message: &str) {
    let line = protocol::protocol_error(&Value::Null, number, message);
    let _ = stream
        .write_all(line.as_bytes())
        .and_then(|()| stream.write_all(b"\n"));
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// What the card asked of its run when the owner admitted it: frozen in the session's receipt,
/// so a turn started later (a retry after an owner restart) runs under the policy the claim was
/// proved with, never an edited card's.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Policy {
    pub branch: Option<String>,
    /// The run's workspace as the dispatcher recorded it before the submitter started (absent
    /// from an older owner's receipts: then the board's scratch place, as then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    pub goal_mode: bool,
    pub goal_max_turns: Option<i64>,
    pub tenant: Option<String>,
}

impl Policy {
    /// The card's policy now.
    pub fn of(task: &board::Task) -> Policy {
        Policy {
            branch: task.branch_name.clone(),
            workspace: task.workspace_path.clone(),
            goal_mode: task.goal_mode,
            goal_max_turns: task.goal_max_turns,
            tenant: task.tenant.clone(),
        }
    }

    /// The policy frozen in a receipt. A receipt frozen before receipts carried one (an older
    /// owner's `state.db`) has none: then, and only then, the card is read.
    fn frozen(receipt: &Value, db: &Path, task_id: &str) -> Result<Policy, RpcError> {
        match receipt.get("policy") {
            Some(policy) => serde_json::from_value(policy.clone())
                .map_err(|_| RpcError::new(Code::StorageUnavailable, "receipt_policy_unreadable")),
            None => {
                let b = Board::open_path(db, &OpenOptions::read_only())?;
                Ok(Policy::of(&b.get_task(task_id)?))
            }
        }
    }
}

/// What the owner knows when a managed worker has exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TurnEvidence {
    /// The run's `worker_result` from its bound worker under the run's claim lock.
    pub result: Option<(i32, Option<String>)>,
    /// Whether the run's latest `worker_bound` names the worker this owner started.
    pub bound_here: bool,
    /// The worker's exit status, as reaped.
    pub exit: WorkerExit,
    /// Where the run stands on the board now (`None`: unreadable).
    pub run: Option<RunStatus>,
}

/// How a turn is booked in `state.db`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Booking {
    pub status: &'static str,
    pub exit_code: Option<i32>,
    pub output: String,
}

/// Books what happened to a turn whose managed worker exited: its `worker_result`; else, when
/// it never bound, a clean failure (nothing ran); else a claim lost after the bind (the run
/// reclaimed, timed out or superseded: `interrupted`); else the worker's own exit status (a
/// `worker_result` write that failed never turns a real exit into `unknown`). Only a worker
/// whose status could not be reaped is `unknown`.
pub(crate) fn book(evidence: &TurnEvidence) -> Booking {
    let booking = |status, exit_code, output: &str| Booking {
        status,
        exit_code,
        output: output.to_owned(),
    };
    let lost = booking(
        "interrupted",
        Some(code::INTERRUPTED),
        "the claim was lost after the managed worker bound (reclaimed, timed out or superseded)",
    );
    let superseded = evidence.run == Some(RunStatus::Superseded);
    match &evidence.result {
        Some((code, out)) if *code != code::OK => {
            return booking("failed", Some(*code), out.as_deref().unwrap_or_default());
        }
        // An exit 0 whose run was taken away: the agent's work did not land on the card.
        Some((_, out)) if superseded => {
            return Booking {
                output: match out {
                    Some(o) => format!("{}: {o}", lost.output),
                    None => lost.output,
                },
                ..lost
            };
        }
        Some((_, out)) => {
            return booking(
                "completed",
                Some(code::OK),
                out.as_deref().unwrap_or_default(),
            );
        }
        None => {}
    }
    if !evidence.bound_here {
        return booking(
            "failed",
            Some(code::FAILED),
            "the claim was no longer current when the managed worker bound",
        );
    }
    if superseded {
        return lost;
    }
    match evidence.exit {
        WorkerExit::Exited { code: 0 } => booking(
            "completed",
            Some(code::OK),
            "the managed worker exited 0 without a worker_result",
        ),
        WorkerExit::Exited { code } => booking(
            "failed",
            Some(code),
            &format!("the managed worker exited {code} without a worker_result"),
        ),
        WorkerExit::Signaled { signal } => booking(
            "failed",
            Some(128 + signal),
            &format!("the managed worker was killed by signal {signal}"),
        ),
        WorkerExit::Unknown => booking(
            "unknown",
            None,
            "the managed worker left no worker_result and no exit status",
        ),
    }
}

/// Compares in constant time (`subtle`): the time taken does not tell how much of a guessed
/// ticket matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq as _;
    bool::from(a.ct_eq(b))
}

/// The receipt of a turn as the protocol shows it.
pub fn receipt(row: &crate::admission::state::AdmissionRow) -> Value {
    json!({
        "admission_id": row.admission_id,
        "session_id": row.session_id,
        "request_id": row.request_id,
        "task_id": row.task_id,
        "run_id": row.run_id,
        "sequence": row.sequence,
        "status": row.status,
        "exit_code": row.exit_code,
        "last_output": row.last_output,
        "authority_epoch": row.authority_epoch,
        "marker_confirmed": row.marker_confirmed,
        "requeue": row.requeue,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_matches_only_itself() {
        let ticket = random_ticket().unwrap();
        assert_eq!(ticket.len(), 32);
        assert!(constant_time_eq(
            ticket.as_bytes(),
            ticket.clone().as_bytes()
        ));
        assert!(!constant_time_eq(
            ticket.as_bytes(),
            &ticket.as_bytes()[..31]
        ));
        assert!(!constant_time_eq(ticket.as_bytes(), b""));
        let mut other = ticket.clone().into_bytes();
        other[31] = if other[31] == b'0' { b'1' } else { b'0' };
        assert!(!constant_time_eq(ticket.as_bytes(), &other));
    }

    fn evidence(exit: WorkerExit, run: Option<RunStatus>) -> TurnEvidence {
        TurnEvidence {
            result: None,
            bound_here: true,
            exit,
            run,
        }
    }

    #[test]
    fn a_turn_without_a_worker_result_is_booked_by_the_workers_exit_status() {
        // F8 in owner mode: the worker_result write failed, the worker exited with its code.
        let b = book(&evidence(
            WorkerExit::Exited { code: 3 },
            Some(RunStatus::Running),
        ));
        assert_eq!((b.status, b.exit_code), ("failed", Some(3)));
        let b = book(&evidence(
            WorkerExit::Exited { code: 0 },
            Some(RunStatus::Done),
        ));
        assert_eq!((b.status, b.exit_code), ("completed", Some(0)));
        let b = book(&evidence(WorkerExit::Exited { code: 75 }, None));
        assert_eq!((b.status, b.exit_code), ("failed", Some(75)));
        let b = book(&evidence(
            WorkerExit::Signaled { signal: 9 },
            Some(RunStatus::Running),
        ));
        assert_eq!((b.status, b.exit_code), ("failed", Some(137)));
        // Only a worker nobody could reap is unknown.
        assert_eq!(
            book(&evidence(WorkerExit::Unknown, Some(RunStatus::Running))).status,
            "unknown"
        );
    }

    #[test]
    fn a_claim_lost_after_the_bind_is_booked_interrupted_and_a_result_wins() {
        let b = book(&evidence(
            WorkerExit::Exited { code: 0 },
            Some(RunStatus::Superseded),
        ));
        assert_eq!((b.status, b.exit_code), ("interrupted", Some(130)));
        assert!(b.output.contains("claim was lost"), "{}", b.output);
        let mut e = evidence(WorkerExit::Exited { code: 0 }, Some(RunStatus::Superseded));
        e.result = Some((4, Some("out".into())));
        let b = book(&e);
        assert_eq!(
            (b.status, b.exit_code, b.output.as_str()),
            ("failed", Some(4), "out")
        );
        // A worker that reports 0 although its completion was refused (the run was reclaimed).
        e.result = Some((0, Some("could not complete".into())));
        let b = book(&e);
        assert_eq!(b.status, "interrupted");
        assert!(b.output.ends_with(": could not complete"), "{}", b.output);
        e.run = Some(RunStatus::Done);
        assert_eq!(book(&e).status, "completed");
        let mut e = evidence(WorkerExit::Exited { code: 0 }, Some(RunStatus::Superseded));
        e.bound_here = false;
        assert_eq!(book(&e).status, "failed");
    }
}
