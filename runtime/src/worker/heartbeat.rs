//! The worker's heartbeat: a thread (started with `identity::spawn`, so it carries the worker's
//! owned context) that extends the claim every `min(TTL / 3, 60 s)` on its own board connection,
//! fenced on the worker's claim lock and run id. It never depends on the agent making progress or
//! API calls. It stops when told to, or by itself once the claim is gone (a refused heartbeat:
//! the run was superseded or closed) — it never fights for a claim it lost.
//!
//! The thread's loop ([`run_beats`]) is separate from the board so that the stop handshake can be
//! model-checked with loom: it only uses `crate::sync` primitives, and a beat is any closure.
//! Invariant: once [`Heartbeat::stop`] returns, the thread has ended and no beat starts after it.

use std::path::PathBuf;
use std::time::Duration;

use crate::board::{Board, Fence, OpenOptions, Outcome};
use crate::clock::Clock;
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::sync::{Arc, Condvar, Mutex};

/// What the heartbeat needs to know.
#[derive(Debug, Clone)]
pub struct HeartbeatSpec {
    pub db: PathBuf,
    pub task: String,
    pub fence: Fence,
    pub ttl_seconds: i64,
    pub interval: Duration,
}

/// What one beat found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beat {
    /// The claim was extended.
    Extended,
    /// The claim is no longer ours: stop beating.
    Lost,
    /// The board was busy or unavailable: try again next interval.
    Failed,
}

/// State shared between the handle and the thread.
#[derive(Debug)]
pub struct Shared {
    stop: Mutex<bool>,
    wake: Condvar,
    /// Set once a beat found the claim gone.
    lost: AtomicBool,
    beats: AtomicU64,
}

impl Shared {
    pub fn new() -> Self {
        Self {
            stop: Mutex::new(false),
            wake: Condvar::new(),
            lost: AtomicBool::new(false),
            beats: AtomicU64::new(0),
        }
    }

    /// Asks the loop to stop and wakes it.
    pub fn request_stop(&self) {
        if let Ok(mut stop) = self.stop.lock() {
            *stop = true;
        }
        self.wake.notify_all();
    }

    /// Under `--cfg loom`: the interval elapses now (wakes the loop without asking it to stop),
    /// standing for the clock the model cannot run.
    #[cfg(loom)]
    pub fn elapse(&self) {
        self.wake.notify_all();
    }

    /// Whether a beat found the claim gone.
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Successful beats so far.
    pub fn beats(&self) -> u64 {
        self.beats.load(Ordering::SeqCst)
    }

    /// Waits up to `interval` unless a stop is requested; true when stopping.
    fn wait(&self, interval: Duration) -> bool {
        let Ok(stop) = self.stop.lock() else {
            return true;
        };
        if *stop {
            return true;
        }
        // One timed wait: a spurious wake-up only makes one beat early, which is harmless. Under
        // `--cfg loom` this is loom's condition variable, whose timed wait never times out: a
        // model makes the interval elapse with `Shared::elapse`.
        match self.wake.wait_timeout(stop, interval) {
            Ok((stop, _)) => *stop,
            Err(_) => true,
        }
    }

    /// Whether a stop was requested (checked again right before each beat).
    fn stopping(&self) -> bool {
        self.stop.lock().map_or(true, |stop| *stop)
    }
}

impl Default for Shared {
    fn default() -> Self {
        Self::new()
    }
}

/// The heartbeat loop: wait an interval, beat, until told to stop or the claim is lost.
pub fn run_beats(shared: &Shared, interval: Duration, beat: &mut dyn FnMut() -> Beat) {
    loop {
        if shared.wait(interval) || shared.stopping() {
            return;
        }
        match beat() {
            Beat::Extended => {
                shared.beats.fetch_add(1, Ordering::SeqCst);
            }
            Beat::Lost => {
                shared.lost.store(true, Ordering::SeqCst);
                return;
            }
            Beat::Failed => {}
        }
    }
}

/// Handle of a running heartbeat thread; [`Heartbeat::stop`] joins it.
#[derive(Debug)]
pub struct Heartbeat {
    shared: Arc<Shared>,
    thread: Option<crate::sync::thread::JoinHandle<()>>,
}

impl Heartbeat {
    /// Starts the thread; the first heartbeat is sent after one interval.
    pub fn start(
        spec: HeartbeatSpec,
        clock: std::sync::Arc<dyn Clock>,
    ) -> std::io::Result<Heartbeat> {
        let shared = Arc::new(Shared::new());
        let inner = Arc::clone(&shared);
        let thread = crate::identity::spawn("kanban-heartbeat", move || {
            let mut board: Option<Board> = None;
            let mut beat = || board_beat(&spec, &*clock, &mut board);
            run_beats(&inner, spec.interval, &mut beat);
        })?;
        Ok(Heartbeat {
            shared,
            thread: Some(thread),
        })
    }

    /// Whether a heartbeat was refused (the claim was taken over or closed).
    pub fn lost(&self) -> bool {
        self.shared.lost()
    }

    /// Heartbeats sent so far.
    pub fn beats(&self) -> u64 {
        self.shared.beats()
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.shared.request_stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.shared.request_stop();
    }
}

/// One heartbeat on the board (opening a connection on first use or after an error).
fn board_beat(spec: &HeartbeatSpec, clock: &dyn Clock, board: &mut Option<Board>) -> Beat {
    if board.is_none() {
        *board = Board::open_path(&spec.db, &OpenOptions::default()).ok();
    }
    let Some(b) = board.as_ref() else {
        return Beat::Failed;
    };
    match b.heartbeat(&spec.task, &spec.fence, None, spec.ttl_seconds, clock.now()) {
        Ok(Outcome::Done(_)) => Beat::Extended,
        Ok(Outcome::Refused(_)) => Beat::Lost,
        Err(_) => {
            *board = None;
            Beat::Failed
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn stop_ends_the_loop_and_no_beat_follows() {
        let shared = Arc::new(Shared::new());
        let inner = Arc::clone(&shared);
        let count = Arc::new(AtomicU64::new(0));
        let c = Arc::clone(&count);
        let thread = crate::identity::spawn("test-heartbeat", move || {
            run_beats(&inner, Duration::from_millis(1), &mut || {
                c.fetch_add(1, Ordering::SeqCst);
                Beat::Extended
            });
        })
        .unwrap();
        while shared.beats() < 3 {
            std::thread::yield_now();
        }
        shared.request_stop();
        thread.join().unwrap();
        // Joined: the loop is over, and every beat it started was counted.
        assert_eq!(count.load(Ordering::SeqCst), shared.beats());
    }

    #[test]
    fn a_lost_claim_stops_the_heartbeat_by_itself() {
        let shared = Shared::new();
        let mut n = 0;
        run_beats(&shared, Duration::from_millis(1), &mut || {
            n += 1;
            if n == 2 { Beat::Lost } else { Beat::Extended }
        });
        assert!(shared.lost());
        assert_eq!(shared.beats(), 1);
    }
}
