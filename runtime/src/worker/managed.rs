//! The owner's managed worker (README "Owner admission"): the bind and the watch.
//!
//! * [`bind`]: in one board transaction the claim is re-proved and `worker_bound {pid,
//!   claim_lock, started_at, submitter_pid}` appended; the run's `worker_pid` stays the
//!   submitter's (reclaims, timeouts and operator kills keep targeting the dispatcher's process).
//!   The claim TTL for heartbeats is the one the dispatcher claimed the run with (its `claimed`
//!   event), not this process's configuration.
//! * [`start_watch`]: a thread (`identity::spawn`) that checks every 200 ms the submitter — the
//!   pid and fingerprint the owner saw at admission, passed on the command line, never a board
//!   column a reclaim may clear — and the owner. Only a positive proof counts as gone (no such
//!   process, a zombie, a pid recycled under a readable fingerprint); a probe that fails to read
//!   `/proc` proves nothing ([`Probe::proves_gone`]): an unreadable probe never ends a turn. When one is gone the watch records a claim-bound `worker_result` (exit 1)
//!   first, then kills this worker's process group (its agent and itself), well within 2 s.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::board::{Board, BoardError, Event, OpenOptions};
use crate::clock::Clock;
use crate::proc::process;

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

/// Why the watch ended the attempt, if it must: only on a positive proof that the submitter or
/// the owner is gone ([`proved_gone`]).
pub fn gone(watch: &Watch) -> Option<&'static str> {
    if proved_gone(watch.submitter_pid, watch.submitter_fingerprint.as_deref()) {
        return Some("the submitter is gone");
    }
    if proved_gone(watch.owner_pid, None) {
        return Some("the owner is gone");
    }
    None
}

/// What a probe of one process read: `exists` from `kill(pid, 0)` (`Some(false)`: no such
/// process; `None`: the call failed otherwise), `stat` the state and start time from
/// `/proc/<pid>/stat` (`None`: unreadable), `boot` this host's boot id (`None`: unreadable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Probe {
    pub exists: Option<bool>,
    pub stat: Option<(char, u64)>,
    pub boot: Option<String>,
}

impl Probe {
    /// Probes `pid` now.
    pub fn of(pid: i64) -> Probe {
        let raw = i32::try_from(pid)
            .ok()
            .filter(|p| *p > 0)
            .and_then(rustix::process::Pid::from_raw);
        let exists = raw.map(|p| match rustix::process::test_kill_process(p) {
            Ok(()) | Err(rustix::io::Errno::PERM) => Some(true),
            Err(rustix::io::Errno::SRCH) => Some(false),
            Err(_) => None,
        });
        Probe {
            // A pid that is no pid at all (0, negative, too large) names no process.
            exists: exists.unwrap_or(Some(false)),
            stat: raw.and_then(|p| process::stat_of(p.as_raw_nonzero().get())),
            boot: process::boot_id(),
        }
    }

    /// True only on a positive proof of death: no such process, a zombie, or a live process
    /// whose start time differs from the fingerprint recorded at admission (its pid was
    /// recycled, or it was recorded in an earlier boot). A probe that could not read something proves nothing: the process is taken to
    /// be alive (a transient `/proc` error must never end a live turn).
    pub fn proves_gone(&self, recorded: Option<&str>) -> bool {
        if self.exists == Some(false) {
            return true;
        }
        let Some((state, start)) = self.stat else {
            return false;
        };
        if state == 'Z' || state == 'X' {
            return true;
        }
        match (recorded, &self.boot) {
            // A fingerprint of another boot, or of another start time in this one: not ours.
            (Some(fp), Some(boot)) if fp != process::UNVERIFIED => fp != format!("{boot}|{start}"),
            _ => false,
        }
    }
}

/// Whether `pid` is proved gone now (see [`Probe::proves_gone`]).
pub(crate) fn proved_gone(pid: i64, recorded: Option<&str>) -> bool {
    Probe::of(pid).proves_gone(recorded)
}

/// A running watch; [`WatchHandle::stop`] ends it.
pub(crate) struct WatchHandle {
    stop: Arc<AtomicBool>,
}

impl WatchHandle {
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Starts the watch thread. `settled` is shared with the worker: whoever sets it first records
/// the attempt's `worker_result`.
pub(crate) fn start_watch(
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
                    exit_code: crate::proc::exit::code::FAILED,
                    last_output: Some(why),
                };
                // Only the run's bound worker may settle it (another bind took over: not ours).
                if let Ok(board) = Board::open_path(&attempt.db, &OpenOptions::default()) {
                    let _ = board.record_bound_worker_result(&result, clock.now());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(exists: Option<bool>, stat: Option<(char, u64)>, boot: Option<&str>) -> Probe {
        Probe {
            exists,
            stat,
            boot: boot.map(str::to_owned),
        }
    }

    #[test]
    fn only_a_positive_proof_of_death_ends_a_managed_turn() {
        let fp = Some("b1|42");
        // A live process whose /proc/<pid>/stat could not be read (F10): alive.
        assert!(!probe(Some(true), None, Some("b1")).proves_gone(fp));
        assert!(!probe(None, None, None).proves_gone(fp));
        assert!(!probe(Some(true), None, None).proves_gone(None));
        // Stat read, boot id not: the fingerprint cannot be checked, so alive.
        assert!(!probe(Some(true), Some(('S', 7)), None).proves_gone(fp));
        // Ours and running.
        assert!(!probe(Some(true), Some(('S', 42)), Some("b1")).proves_gone(fp));
        assert!(!probe(Some(true), Some(('R', 7)), Some("b1")).proves_gone(None));
        // Proofs: no such process, a zombie, a recycled pid.
        assert!(probe(Some(false), None, None).proves_gone(fp));
        assert!(probe(Some(true), Some(('Z', 42)), Some("b1")).proves_gone(fp));
        assert!(probe(Some(true), Some(('S', 7)), Some("b1")).proves_gone(fp));
        // A process of an earlier boot is gone whatever holds its pid now.
        assert!(probe(Some(true), Some(('S', 42)), Some("b2")).proves_gone(fp));
        // A fingerprint nothing could read at admission proves nothing.
        assert!(!probe(Some(true), Some(('S', 7)), Some("b1")).proves_gone(Some("unverified")));
    }

    #[test]
    fn this_process_is_alive_and_no_pid_is_gone() {
        let me = i64::from(std::process::id());
        let fp = process::fingerprint(std::process::id() as i32);
        assert!(!proved_gone(me, fp.as_deref()));
        assert!(proved_gone(0, None));
        assert!(proved_gone(-5, None));
    }
}
