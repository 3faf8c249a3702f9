//! The worker's heartbeat: a thread (started with `identity::spawn`, so it carries the worker's
//! owned context) that extends the claim every `min(TTL / 3, 60 s)` on its own board connection,
//! fenced on the worker's claim lock and run id. It never depends on the agent making progress or
//! API calls. It stops when told to, or by itself once the claim is gone (a refused heartbeat:
//! the run was superseded or closed) — it never fights for a claim it lost.

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

#[derive(Debug)]
struct Shared {
    stop: Mutex<bool>,
    wake: Condvar,
    /// Set once a heartbeat was refused: the claim is no longer ours.
    lost: AtomicBool,
    beats: AtomicU64,
}

/// Handle of a running heartbeat thread; [`Heartbeat::stop`] joins it.
#[derive(Debug)]
pub struct Heartbeat {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    /// Starts the thread; the first heartbeat is sent after one interval.
    pub fn start(spec: HeartbeatSpec, clock: Arc<dyn Clock>) -> std::io::Result<Heartbeat> {
        let shared = Arc::new(Shared {
            stop: Mutex::new(false),
            wake: Condvar::new(),
            lost: AtomicBool::new(false),
            beats: AtomicU64::new(0),
        });
        let inner = Arc::clone(&shared);
        let thread =
            crate::identity::spawn("kanban-heartbeat", move || beat(&spec, &*clock, &inner))?;
        Ok(Heartbeat {
            shared,
            thread: Some(thread),
        })
    }

    /// Whether a heartbeat was refused (the claim was taken over or closed).
    pub fn lost(&self) -> bool {
        self.shared.lost.load(Ordering::SeqCst)
    }

    /// Heartbeats sent so far.
    pub fn beats(&self) -> u64 {
        self.shared.beats.load(Ordering::SeqCst)
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.signal_stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    fn signal_stop(&self) {
        if let Ok(mut stop) = self.shared.stop.lock() {
            *stop = true;
        }
        self.shared.wake.notify_all();
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.signal_stop();
    }
}

fn beat(spec: &HeartbeatSpec, clock: &dyn Clock, shared: &Shared) {
    let mut board: Option<Board> = None;
    loop {
        if wait_or_stop(shared, spec.interval) {
            return;
        }
        if board.is_none() {
            board = Board::open_path(&spec.db, &OpenOptions::default()).ok();
        }
        let Some(b) = board.as_ref() else { continue };
        match b.heartbeat(&spec.task, &spec.fence, None, spec.ttl_seconds, clock.now()) {
            Ok(Outcome::Done(_)) => {
                shared.beats.fetch_add(1, Ordering::SeqCst);
            }
            Ok(Outcome::Refused(_)) => {
                shared.lost.store(true, Ordering::SeqCst);
                return;
            }
            // A busy or briefly unavailable board: try again next interval with a fresh connection.
            Err(_) => board = None,
        }
    }
}

/// Sleeps `interval` unless told to stop first; true when told to stop.
fn wait_or_stop(shared: &Shared, interval: Duration) -> bool {
    let deadline = std::time::Instant::now() + interval;
    let Ok(mut stop) = shared.stop.lock() else {
        return true;
    };
    while !*stop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        match shared.wake.wait_timeout(stop, left) {
            Ok((guard, _)) => stop = guard,
            Err(_) => return true,
        }
    }
    true
}
