//! The owner's managed worker (README "Owner admission"): the bind and the watch.
//!
//! * [`bind`]: in one board transaction the claim is re-proved and `worker_bound {pid,
//!   claim_lock, started_at, submitter_pid}` appended; the run's `worker_pid` stays the
//!   submitter's (reclaims, timeouts and operator kills keep targeting the dispatcher's process).
//!   The claim TTL for heartbeats is the one the dispatcher claimed the run with (its `claimed`
//!   event), not this process's configuration.
//! * [`start_watch`]: a thread (`identity::spawn`) that checks every 200 ms the submitter — the
//!   pid and fingerprint the owner saw at admission, passed on the command line, never a board
//!   column a reclaim may clear — and the owner. A process that is gone or whose pid was recycled
//!   counts as gone; one whose start time cannot be read does not (an unreadable probe never
//!   ends a turn). When one is gone the watch records a claim-bound `worker_result` (exit 1)
//!   first, then kills this worker's process group (its agent and itself), well within 2 s.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::board::{Board, BoardError, Event, OpenOptions};
use crate::clock::Clock;
use crate::dispatch::process;

/// Whom a managed worker watches (from `kanban worker --managed …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    pub submitter_pid: i64,
    pub submitter_fingerprint: Option<String>,
    pub owner_pid: i64,
}

/// The attempt a watch ends.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub db: PathBuf,
    pub task: String,
    pub run_id: i64,
    pub claim_lock: String,
    pub pid: i64,
}

/// How often the watch looks.
const EVERY: Duration = Duration::from_millis(200);

/// Re-proves the claim and appends `worker_bound`; `Ok(None)` when the claim is gone (nothing
/// written), else the TTL of the run's claim (if its `claimed` event says).
#[allow(clippy::too_many_arguments)]
pub fn bind(
    board: &Board,
    task: &str,
    run_id: i64,
    claim_lock: &str,
    pid: i64,
    fingerprint: &str,
    watch: &Watch,
    now: i64,
) -> Result<Option<Option<i64>>, BoardError> {
    let event = Event::WorkerBound {
        pid,
        claim_lock: claim_lock.to_owned(),
        started_at: Some(fingerprint.to_owned()),
        submitter_pid: Some(watch.submitter_pid),
    };
    board.bind_managed_worker(task, run_id, claim_lock, &event, now)
}

/// Why the watch ended the attempt, if it must.
pub fn gone(watch: &Watch) -> Option<&'static str> {
    let submitter = process::liveness(watch.submitter_pid, watch.submitter_fingerprint.as_deref());
    if !submitter.may_be_running() {
        return Some("the submitter is gone");
    }
    if !process::liveness(watch.owner_pid, None).may_be_running() {
        return Some("the owner is gone");
    }
    None
}

/// A running watch; [`WatchHandle::stop`] ends it.
pub struct WatchHandle {
    stop: Arc<AtomicBool>,
}

impl WatchHandle {
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Starts the watch thread. `settled` is shared with the worker: whoever sets it first records
/// the attempt's `worker_result`.
pub fn start_watch(
    watch: Watch,
    attempt: Attempt,
    settled: Arc<AtomicBool>,
    clock: Arc<dyn Clock>,
) -> std::io::Result<WatchHandle> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    crate::identity::spawn("kanban-submitter-watch", move || {
        while !flag.load(Ordering::SeqCst) {
            if let Some(why) = gone(&watch) {
                if settled.swap(true, Ordering::SeqCst) {
                    return;
                }
                let result = crate::board::WorkerResult {
                    task_id: &attempt.task,
                    run_id: Some(attempt.run_id),
                    pid: attempt.pid,
                    claim_lock: Some(&attempt.claim_lock),
                    exit_code: crate::dispatch::exit::code::FAILED,
                    last_output: Some(why),
                };
                if let Ok(board) = Board::open_path(&attempt.db, &OpenOptions::default()) {
                    let _ = board.record_worker_result(&result, clock.now());
                }
                eprintln!("kanban worker: {why}; ending this managed turn");
                // This worker leads its process group (default_spawn): the agent goes with it.
                let _ = rustix::process::kill_process_group(
                    rustix::process::getpid(),
                    rustix::process::Signal::KILL,
                );
                return;
            }
            std::thread::sleep(EVERY);
        }
    })?;
    Ok(WatchHandle { stop })
}
