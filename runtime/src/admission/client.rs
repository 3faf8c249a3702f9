//! The owner's client side: [`Client`] (one socket, line-delimited JSON-RPC) and the submitter
//! ([`submit`], `kanban submit`), which the dispatcher starts in owner mode.
//!
//! The submitter reads its identity only through the gate, never runs an agent, and:
//! 1. finds the owner of the task's profile; if none answers it starts one
//!    (`kanban owner serve`, built by `identity::grant::owner_command`: no `HERMES_KANBAN_*`
//!    identity, no delegated-child marker) and waits for its socket (bounded), launching again
//!    every 2 s while none answers;
//! 2. calls `kanban.run`; a dropped connection (the owner died) is retried with the same params
//!    (a replay returns the original receipt), bounded in time;
//! 3. asks `kanban.receipt` until the turn settles (each ask waits on the owner up to 1 s and is
//!    answered as soon as the turn settles): `completed`/`failed` exit with the managed worker's
//!    exit code (its `last_output` printed), `interrupted` with 130;
//! 4. an `unknown` turn (the owner restarted while it ran) is never replayed: the submitter keeps
//!    the card (heartbeating its claim, so the dispatcher neither reclaims nor re-dispatches it)
//!    until `kanban owner resolve` decides; after `--requeue` the run is no longer current and the
//!    submitter exits 0 without a trailer, like a superseded worker;
//! 5. prints the exit trailer `[kanban-worker-exit] rc=<n>` last.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::protocol;
use crate::board::{Board, Fence, OpenOptions};
use crate::clock::Clock;
use crate::config::Config;
use crate::proc::exit::code;
use crate::worker::heartbeat::{Heartbeat, HeartbeatSpec};

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to the owner at {path}")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the owner's ticket {path}")]
    Ticket {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the connection to the owner broke")]
    Io(#[source] std::io::Error),
    #[error("the owner sent an unreadable answer: {0}")]
    Protocol(String),
    #[error("the owner refused: {code} ({reason})")]
    Refused { code: String, reason: String },
}

impl ClientError {
    /// True when retrying on a new connection may help (the owner went away).
    pub fn is_transport(&self) -> bool {
        matches!(self, ClientError::Connect { .. } | ClientError::Io(_))
    }
}

/// One connection to an owner.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next: u64,
}

impl Client {
    /// Connects to `socket`.
    pub fn connect(socket: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(socket).map_err(|source| ClientError::Connect {
            path: socket.to_owned(),
            source,
        })?;
        let reader = BufReader::new(stream.try_clone().map_err(ClientError::Io)?);
        Ok(Client {
            reader,
            writer: stream,
            next: 1,
        })
    }

    /// Connects to the owner of `profile` and authenticates with its ticket.
    pub fn open(root: &Path, profile: &str, operator: bool) -> Result<Client, ClientError> {
        let ticket_path = super::ticket_path(root, profile);
        let mut client = Client::connect(&super::socket_path(root, profile))?;
        let ticket =
            std::fs::read_to_string(&ticket_path).map_err(|source| ClientError::Ticket {
                path: ticket_path,
                source,
            })?;
        client.call(
            "session.authenticate",
            json!({"ticket": ticket.trim(), "operator": operator}),
        )?;
        Ok(client)
    }

    /// Sends one request and reads its answer: the result, or the refusal.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = self.next;
        self.next += 1;
        // The request and its newline in one write: one message on the socket, one wake.
        let mut line = protocol::request(id, method, params);
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(ClientError::Io)?;
        let mut answer = String::new();
        let n = self
            .reader
            .read_line(&mut answer)
            .map_err(ClientError::Io)?;
        if n == 0 {
            return Err(ClientError::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        let v: Value =
            serde_json::from_str(&answer).map_err(|e| ClientError::Protocol(e.to_string()))?;
        if let Some(err) = v.get("error") {
            return Err(ClientError::Refused {
                code: err["message"]
                    .as_str()
                    .unwrap_or("request_failed")
                    .to_owned(),
                reason: err["data"]["reason"].as_str().unwrap_or("").to_owned(),
            });
        }
        Ok(v.get("result").cloned().unwrap_or(Value::Null))
    }
}

/// How long the submitter keeps trying to reach an owner (start-up, restarts).
const REACH_FOR: Duration = Duration::from_secs(60);
/// How long the owner may hold a `kanban.receipt` answer while the turn runs (it answers as soon
/// as the turn settles).
const RECEIPT_WAIT_MS: u64 = 1_000;
/// Pause between receipt polls and reconnection attempts.
const POLL: Duration = Duration::from_millis(100);

/// How long an owner a submitter started lives without a turn, a connection or a request.
pub(crate) const SUBMITTER_OWNER_IDLE_EXIT: Duration = Duration::from_secs(600);

/// Starts `kanban owner serve --profile P --home ROOT --idle-exit 600` detached, without any
/// worker identity.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)] // the owner's launch boundary
fn start_owner(root: &Path, profile: &str, log: &Path) -> std::io::Result<()> {
    let exe = std::env::current_exe()?;
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let err = out.try_clone()?;
    let mut cmd = crate::identity::grant::owner_command(&exe);
    cmd.arg("owner")
        .arg("serve")
        .arg("--profile")
        .arg(profile)
        .arg("--home")
        .arg(root)
        // An owner started here ends on its own once unused (a later submitter starts it again).
        .arg("--idle-exit")
        .arg(SUBMITTER_OWNER_IDLE_EXIT.as_secs().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    // The child is not waited for here: the owner outlives the submitter by design.
    cmd.spawn().map(drop)
}

/// Starts the profile's owner when none answers, at most once per [`RELAUNCH`]: a launched
/// owner that finds another holding the lock (one still dying, or one started meanwhile) exits at
/// once, so trying again later is harmless.
struct Launcher<'a> {
    root: &'a Path,
    profile: &'a str,
    log: &'a Path,
    last: Option<Instant>,
}

/// Pause between two owner launches by one submitter.
const RELAUNCH: Duration = Duration::from_secs(2);

impl Launcher<'_> {
    fn ensure(&mut self, log: &mut dyn Write) {
        if self.last.is_some_and(|at| at.elapsed() < RELAUNCH) {
            return;
        }
        self.last = Some(Instant::now());
        if let Err(e) = std::fs::create_dir_all(super::owner_dir(self.root, self.profile))
            .and_then(|()| start_owner(self.root, self.profile, self.log))
        {
            let _ = writeln!(log, "kanban submit: cannot start the owner: {e}");
        }
    }
}

/// Runs the submitter; returns the exit code (`None`: superseded, exit 0 without the trailer).
pub fn submit(root: &Path, clock: Arc<dyn Clock>, log: &mut dyn Write) -> Option<i32> {
    match submit_inner(root, clock, log) {
        Ok(rc) => rc,
        Err(message) => {
            let _ = writeln!(log, "kanban submit: {message}");
            Some(code::FAILED)
        }
    }
}

fn submit_inner(
    root: &Path,
    clock: Arc<dyn Clock>,
    log: &mut dyn Write,
) -> Result<Option<i32>, String> {
    let identity = crate::gates::owned_identity().ok_or_else(|| {
        "`kanban submit` runs only as a dispatcher-spawned submitter: no owned worker identity"
            .to_owned()
    })?;
    let (Some(run_id), Some(lock), Some(db), Some(board)) = (
        identity.run_id,
        identity.claim_lock.clone(),
        identity.db.clone(),
        identity.board.clone(),
    ) else {
        return Err(format!(
            "the identity of task {} lacks its run, claim lock, board or database",
            identity.task
        ));
    };
    let config = || Config::load(root).map_err(|e| crate::error_chain(&e));
    // The owner to ask: the profile the dispatcher started this submitter under (it resolved the
    // card's assignee as the owner will: the owner proves the card's profile is its own), else
    // the card's, read from the board. The name becomes `<root>/owner/<profile>`: a profile
    // name, never a path.
    let profile = match identity.profile.as_deref() {
        Some(given) => super::profile_for(Some(given), "")
            .map_err(|e| format!("task {}: {e}", identity.task))?,
        None => {
            let b = Board::open_path(&db, &OpenOptions::read_only())
                .map_err(|e| crate::error_chain(&e))?;
            let task = b
                .get_task(&identity.task)
                .map_err(|e| crate::error_chain(&e))?;
            drop(b);
            super::profile_for(
                task.assignee.as_deref(),
                &config()?.dispatch.default_profile,
            )
            .map_err(|e| format!("task {}: {e}", identity.task))?
        }
    };
    let params = json!({
        "board": board,
        "task_id": identity.task,
        "run_id": run_id,
        "claim_lock": lock,
        "db": std::fs::canonicalize(&db).unwrap_or(db.clone()),
    });
    let owner_log = super::owner_dir(root, &profile).join("owner.log");
    let mut launcher = Launcher {
        root,
        profile: &profile,
        log: &owner_log,
        last: None,
    };
    let deadline = Instant::now() + REACH_FOR;
    // Admission, with retries across owner restarts (same params: a replay).
    let mut admitted = loop {
        match Client::open(root, &profile, false).and_then(|mut c| {
            let r = c.call("kanban.run", params.clone())?;
            Ok((c, r))
        }) {
            Ok(pair) => break pair,
            Err(e) if e.is_transport() || matches!(e, ClientError::Ticket { .. }) => {
                if Instant::now() > deadline {
                    return Err(crate::error_chain(&e));
                }
                // A run that is no longer current needs no owner (nor a new one launched).
                if run_superseded(&db, &identity.task, run_id, &lock) {
                    return Ok(None);
                }
                launcher.ensure(log);
                std::thread::sleep(POLL);
            }
            Err(e) => return Err(crate::error_chain(&e)),
        }
    };
    let session_id = admitted.1["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let _ = writeln!(
        log,
        "kanban submit: admitted by the `{profile}` owner as session {session_id}"
    );
    let mut heartbeat: Option<Heartbeat> = None;
    let mut deadline = Instant::now() + REACH_FOR;
    let outcome = loop {
        let asked = Instant::now();
        let receipt = match admitted.0.call(
            "kanban.receipt",
            json!({"session_id": session_id, "wait_ms": RECEIPT_WAIT_MS}),
        ) {
            Ok(r) => {
                deadline = Instant::now() + REACH_FOR;
                r
            }
            Err(e) if e.is_transport() || matches!(e, ClientError::Ticket { .. }) => {
                // The owner went away: reconnect and replay `kanban.run` (same receipt).
                if Instant::now() > deadline {
                    break Err(crate::error_chain(&e));
                }
                // The turn's end closed the run before its receipt was read (the owner went away
                // meanwhile): the board has the outcome, no owner is needed any more.
                if run_superseded(&db, &identity.task, run_id, &lock) {
                    break Ok(None);
                }
                launcher.ensure(log);
                std::thread::sleep(POLL);
                if let Ok(mut c) = Client::open(root, &profile, false)
                    && c.call("kanban.run", params.clone()).is_ok()
                {
                    admitted.0 = c;
                }
                continue;
            }
            Err(e) => break Err(crate::error_chain(&e)),
        };
        if let Some(rc) = settled_exit(&receipt) {
            if let Some(out) = receipt["last_output"].as_str() {
                let _ = writeln!(log, "{out}");
            }
            break Ok(Some(rc));
        }
        match receipt["status"].as_str().unwrap_or("") {
            "unknown" | "interrupted" => {
                // Paused: hold the card until an operator resolves the turn.
                if heartbeat.is_none() {
                    let _ = writeln!(
                        log,
                        "kanban submit: the owner lost this turn (unknown); the card stays paused until `kanban owner resolve {}`",
                        identity.task
                    );
                    let ttl = crate::dispatch::Settings::new(
                        root.to_owned(),
                        crate::home::resolve(root, Some(&board))
                            .map_err(|e| crate::error_chain(&e))?,
                        &config()?,
                    )
                    .map(|s| s.claim_ttl_seconds)
                    .unwrap_or(900);
                    heartbeat = Heartbeat::start(
                        HeartbeatSpec {
                            db: db.clone(),
                            task: identity.task.clone(),
                            fence: Fence {
                                claim_lock: Some(lock.clone()),
                                run_id: Some(run_id),
                            },
                            ttl_seconds: ttl,
                            interval: Duration::from_secs(
                                u64::try_from((ttl / 3).clamp(1, 60)).unwrap_or(60),
                            ),
                        },
                        clock.clone(),
                    )
                    .ok();
                }
                if run_superseded(&db, &identity.task, run_id, &lock) {
                    break Ok(None);
                }
                std::thread::sleep(POLL * 5);
            }
            // The owner held the answer until the turn settled or `wait_ms` passed; one that
            // answered at once (an older owner ignores `wait_ms`) is polled no faster than before.
            _ => std::thread::sleep(POLL.saturating_sub(asked.elapsed())),
        }
    };
    if let Some(h) = heartbeat {
        h.stop();
    }
    outcome
}

/// The exit code of a settled receipt, `None` while the turn is not settled (queued, started,
/// unknown) or was requeued: `completed` exits 0 and `failed` 1 unless the receipt records the
/// managed worker's own code, `interrupted` 130.
pub(crate) fn settled_exit(receipt: &Value) -> Option<i32> {
    let recorded = receipt["exit_code"]
        .as_i64()
        .and_then(|c| i32::try_from(c).ok());
    match receipt["status"].as_str()? {
        "completed" => Some(recorded.unwrap_or(code::OK)),
        "failed" => Some(recorded.filter(|c| *c != code::OK).unwrap_or(code::FAILED)),
        "interrupted" if !receipt["requeue"].as_bool().unwrap_or(false) => Some(code::INTERRUPTED),
        _ => None,
    }
}

/// True when the run is no longer the task's current run under this lock.
fn run_superseded(db: &Path, task: &str, run_id: i64, lock: &str) -> bool {
    Board::open_path(db, &OpenOptions::read_only())
        .and_then(|b| b.claim_view(task, run_id))
        .is_ok_and(|v| v.is_none_or(|v| !v.is_current(task, run_id, lock)))
}

/// Asks the owner of `profile` under `root` to drain and exit (SIGTERM to the pid it reports);
/// returns that pid, or `None` when no owner answered.
pub fn stop_owner(root: &Path, profile: &str) -> Option<i64> {
    let status = Client::open(root, profile, false)
        .and_then(|mut c| c.call("owner.status", json!({})))
        .ok()?;
    let pid = status["pid"].as_i64()?;
    let raw = i32::try_from(pid).ok()?;
    let pid_t = rustix::process::Pid::from_raw(raw)?;
    rustix::process::kill_process(pid_t, rustix::process::Signal::TERM).ok()?;
    Some(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resolved_turn_exits_with_its_decision_and_a_settled_one_with_its_code() {
        let r = |status: &str, code: Value, requeue: bool| {
            settled_exit(&json!({"status": status, "exit_code": code, "requeue": requeue}))
        };
        // `owner resolve --as completed` records no worker code: the submitter exits 0.
        assert_eq!(r("completed", Value::Null, false), Some(0));
        assert_eq!(r("failed", Value::Null, false), Some(1));
        assert_eq!(r("interrupted", Value::Null, false), Some(130));
        assert_eq!(r("completed", json!(0), false), Some(0));
        assert_eq!(r("failed", json!(3), false), Some(3));
        assert_eq!(r("failed", json!(75), false), Some(75));
        // A failed turn never exits 0.
        assert_eq!(r("failed", json!(0), false), Some(1));
        for waiting in ["queued", "started", "unknown"] {
            assert_eq!(r(waiting, Value::Null, false), None, "{waiting}");
        }
        assert_eq!(r("interrupted", json!(130), true), None);
    }
}
