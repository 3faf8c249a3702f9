//! Model of the worker's heartbeat loop against a concurrent takeover of its claim (ARCHITECTURE.md §3:
//! "it stops by itself once the claim is gone … it never fights for a claim it lost").
//!
//! Real code under loom: `worker::heartbeat::{Shared, run_beats}` (the loop, its stop flag and
//! counters, on `kanban_runtime::sync`) on a thread started by `identity::spawn`. Stand-ins: the
//! claim row lives in SQLite in the product (`board::Board::heartbeat` is a compare-and-swap on
//! claim lock and run id; a reclaim rewrites them), so it is [`Claim`] behind a
//! `loom::sync::Mutex`. The loop's wait is the real one on loom's condition variable; loom has no
//! timeouts, so the model makes each interval elapse with `Shared::elapse` (a notify), and the
//! beat still asks the loop to stop after [`MAX_BEATS`] attempts.
#![cfg(loom)]
// Test code: a panic is how a model reports the interleaving that broke its invariant.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kanban_loom_tests::check;
use kanban_runtime::identity;
use kanban_runtime::worker::heartbeat::{Beat, Shared, run_beats};
use loom::sync::{Arc, Mutex};

/// Beat attempts after which the model's loop stops by itself.
const MAX_BEATS: usize = 3;

/// Set (outside loom) when an explored execution had a beat extend the claim and then the
/// takeover refuse a later one: the interleaving the model exists for must be covered.
static EXTENDED_THEN_REFUSED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// The worker's heartbeat extended the claim.
    Extended,
    /// The worker's heartbeat was refused.
    Refused,
    /// The dispatcher reclaimed the task and another run claimed it.
    TakenOver,
}

/// Stand-in for the task's claim columns: who holds it, and what happened to it in order.
#[derive(Debug)]
struct Claim {
    row: Mutex<(&'static str, Vec<Event>)>,
}

impl Claim {
    /// `Board::heartbeat` fenced on the claim lock.
    fn heartbeat(&self, lock: &'static str) -> Beat {
        let mut row = self.row.lock().unwrap();
        if row.0 == lock {
            row.1.push(Event::Extended);
            Beat::Extended
        } else {
            row.1.push(Event::Refused);
            Beat::Lost
        }
    }

    /// A reclaim followed by a new claim under another lock.
    fn take_over(&self, lock: &'static str) {
        let mut row = self.row.lock().unwrap();
        row.0 = lock;
        row.1.push(Event::TakenOver);
    }
}

/// Invariant: while the worker's heartbeat loop runs, the dispatcher may reclaim the task and
/// another run take the claim at any moment. In every interleaving the heartbeat never extends
/// the claim after the takeover, it stops by itself at the first refused beat (so at most one
/// refusal, and no attempt after it), it then reports the claim lost, and its beat counter
/// equals the extensions the claim received.
#[test]
fn heartbeat_never_fights_for_a_lost_claim() {
    check(|| {
        let claim = Arc::new(Claim {
            row: Mutex::new(("host:1", Vec::new())),
        });
        let shared = Arc::new(Shared::new());

        let (inner, c) = (shared.clone(), claim.clone());
        let heartbeat = identity::spawn("kanban-heartbeat", move || {
            let mut attempts = 0;
            let mut beat = || {
                attempts += 1;
                if attempts == MAX_BEATS {
                    inner.request_stop();
                }
                c.heartbeat("host:1")
            };
            run_beats(&inner, Duration::from_secs(300), &mut beat);
        })
        .unwrap();

        // The dispatcher's side: an interval passes, the claim is taken over, another interval
        // passes, then the worker stops its heartbeat. The loop waits on the real condition
        // variable; an `elapse` while it is not waiting is lost, as a wake-up would be.
        shared.elapse();
        claim.take_over("host:2");
        shared.elapse();
        shared.request_stop();
        heartbeat.join().unwrap();

        let row = claim.row.lock().unwrap();
        let events = &row.1;
        let taken = events.iter().position(|e| *e == Event::TakenOver).unwrap();
        assert!(
            !events[taken..].contains(&Event::Extended),
            "the heartbeat extended a claim it had lost: {events:?}"
        );
        let refused = events.iter().filter(|e| **e == Event::Refused).count();
        assert!(
            refused <= 1,
            "the heartbeat kept beating after a refusal: {events:?}"
        );
        if refused == 1 {
            assert_eq!(events.last(), Some(&Event::Refused), "{events:?}");
        }
        assert_eq!(shared.lost(), refused == 1);
        let extended = events.iter().filter(|e| **e == Event::Extended).count();
        assert_eq!(shared.beats(), extended as u64);
        assert!(extended + refused <= MAX_BEATS);
        if extended > 0 && refused == 1 {
            EXTENDED_THEN_REFUSED.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    });
    assert!(
        EXTENDED_THEN_REFUSED.load(std::sync::atomic::Ordering::SeqCst),
        "no explored execution took the claim over between two beats"
    );
}
