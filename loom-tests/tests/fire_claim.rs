//! Models of the cron fire claim (ARCHITECTURE.md §6): a durable claim with a lease, a heartbeat and an
//! owner-fenced completion stops two schedulers from running one occurrence of a job.
//!
//! The real claim lives in SQLite (`cron::store::Store::claim_fire`), which loom cannot run, so
//! the job row is modelled by [`JobRow`] behind a `loom::sync::Mutex` standing for the store's
//! write transaction (SQLite serialises writers with `BEGIN IMMEDIATE`). Each method repeats, step
//! for step, the conditions of the store's SQL: a scheduled claim needs `next_run_at` to still be
//! the occurrence the scheduler read earlier, no live claim, and a first row in the fire ledger
//! (`UNIQUE (job_id, occurrence)`); it advances `next_run_at` in the same transaction. The
//! scheduler reads the due jobs in an earlier, separate transaction — the window the claim's
//! compare-and-swap has to close.
#![cfg(loom)]
// Test code: a panic is how a model reports the interleaving that broke its invariant.
#![allow(clippy::unwrap_used)]

use kanban_loom_tests::check;
use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// Lease of a fire claim, seconds.
const TTL: i64 = 30;
/// The occurrence both schedulers see due, and the one after it.
const OCCURRENCE: i64 = 100;
const NEXT: i64 = 160;

/// The columns of a cron job row the claim reads and writes.
#[derive(Debug, Default)]
struct JobRow {
    next_run_at: Option<i64>,
    fire_owner: Option<&'static str>,
    fire_expires: i64,
    /// The fire ledger: `(occurrence, owner)`, `None` for a manual run.
    fires: Vec<(Option<i64>, &'static str)>,
    /// Completions recorded against the job (last_status written).
    completed: usize,
    /// Every granted claim and recorded completion, in transaction order.
    log: Vec<Event>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Claimed(&'static str),
    Completed(&'static str),
}

impl JobRow {
    /// Every recorded completion belongs to the claim granted last before it: a result is only
    /// ever recorded by the runner that held the claim at that moment.
    fn assert_completions_fenced(&self) {
        let mut holder = None;
        for event in &self.log {
            match *event {
                Event::Claimed(owner) => holder = Some(owner),
                Event::Completed(owner) => {
                    assert_eq!(
                        holder,
                        Some(owner),
                        "`{owner}` recorded a result over another claim: {:?}",
                        self.log
                    );
                    holder = None;
                }
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Claim {
    Claimed,
    Busy,
    NotDue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Scheduled { occurrence: i64 },
    Manual,
}

/// Stand-in for the cron store: one job row behind the write lock.
#[derive(Debug)]
struct Store {
    row: Mutex<JobRow>,
}

impl Store {
    fn new() -> Self {
        Store {
            row: Mutex::new(JobRow {
                next_run_at: Some(OCCURRENCE),
                ..JobRow::default()
            }),
        }
    }

    /// `Store::due`: the job's next occurrence if it is due at `now` (its own read transaction).
    fn due(&self, now: i64) -> Option<i64> {
        let row = self.row.lock().unwrap();
        row.next_run_at.filter(|&at| at <= now)
    }

    /// `Store::claim_fire`, one transaction.
    fn claim_fire(&self, kind: Kind, owner: &'static str, now: i64) -> Claim {
        let mut row = self.row.lock().unwrap();
        if row.fire_owner.is_some() {
            if row.fire_expires > now {
                return Claim::Busy;
            }
            row.fire_owner = None;
        }
        let (occurrence, next) = match kind {
            Kind::Manual => (None, row.next_run_at),
            Kind::Scheduled { occurrence } => {
                if row.next_run_at != Some(occurrence) || occurrence > now {
                    return Claim::NotDue;
                }
                (Some(occurrence), Some(NEXT))
            }
        };
        if occurrence.is_some() && row.fires.iter().any(|(o, _)| *o == occurrence) {
            return Claim::NotDue;
        }
        row.fires.push((occurrence, owner));
        row.next_run_at = next;
        row.fire_owner = Some(owner);
        row.fire_expires = now + TTL;
        row.log.push(Event::Claimed(owner));
        Claim::Claimed
    }

    /// `Store::heartbeat_fire`: extends the lease only for its owner.
    fn heartbeat_fire(&self, owner: &str, now: i64) -> bool {
        let mut row = self.row.lock().unwrap();
        if row.fire_owner == Some(owner) {
            row.fire_expires = now + TTL;
            true
        } else {
            false
        }
    }

    /// `Store::complete_fire`: records the result and releases the claim, fenced on the owner.
    fn complete_fire(&self, owner: &'static str) -> bool {
        let mut row = self.row.lock().unwrap();
        if row.fire_owner != Some(owner) {
            return false;
        }
        row.fire_owner = None;
        row.completed += 1;
        row.log.push(Event::Completed(owner));
        true
    }
}

/// What one fire did, counted across the model's threads.
#[derive(Debug, Default)]
struct Runs {
    /// Jobs started.
    started: AtomicUsize,
    /// Jobs running right now.
    running: AtomicUsize,
}

impl Runs {
    /// Runs the job body: never two at once.
    fn run(&self) {
        self.started.fetch_add(1, SeqCst);
        let others = self.running.fetch_add(1, SeqCst);
        assert_eq!(others, 0, "two fires of one job ran at the same time");
        self.running.fetch_sub(1, SeqCst);
    }
}

/// One scheduler's tick for the job: read what is due, claim it, run, heartbeat, complete.
fn scheduler_tick(store: &Store, runs: &Runs, owner: &'static str, now: i64) -> Claim {
    let Some(occurrence) = store.due(now) else {
        return Claim::NotDue;
    };
    let claim = store.claim_fire(Kind::Scheduled { occurrence }, owner, now);
    if claim == Claim::Claimed {
        runs.run();
        assert!(
            store.heartbeat_fire(owner, now),
            "the winner lost its live claim"
        );
        assert!(
            store.complete_fire(owner),
            "the winner's completion was fenced off"
        );
    }
    claim
}

/// Invariant: two schedulers that both saw one occurrence due race to claim it, and exactly one
/// runs it: the other is told `NotDue` (the occurrence moved on) or `Busy` (the winner's claim
/// is live), `next_run_at` advanced exactly once, the ledger holds one fire, and the claim is
/// released after the winner's owner-fenced completion.
#[test]
fn two_schedulers_claim_one_occurrence_and_exactly_one_runs_it() {
    check(|| {
        let store = Arc::new(Store::new());
        let runs = Arc::new(Runs::default());

        let (s, r) = (store.clone(), runs.clone());
        let a = thread::spawn(move || scheduler_tick(&s, &r, "scheduler-a", OCCURRENCE + 5));
        let (s, r) = (store.clone(), runs.clone());
        let b = thread::spawn(move || scheduler_tick(&s, &r, "scheduler-b", OCCURRENCE + 5));
        let outcomes = [a.join().unwrap(), b.join().unwrap()];

        let winners = outcomes.iter().filter(|c| **c == Claim::Claimed).count();
        assert_eq!(winners, 1, "outcomes {outcomes:?}");
        assert_eq!(runs.started.load(SeqCst), 1);
        let row = store.row.lock().unwrap();
        assert_eq!(row.next_run_at, Some(NEXT));
        assert_eq!(row.fires.len(), 1);
        assert_eq!(row.completed, 1);
        assert_eq!(row.fire_owner, None);
        row.assert_completions_fenced();
    });
}

/// Invariant: a manual `kanban cron run` racing a scheduler's fire of the same job never runs
/// beside it. Whichever claims first runs; the other is refused while that claim is live (or,
/// for the scheduler, finds the occurrence already fired) and may only run after the first
/// completed — so at most one fire of the job runs at any moment, every fire that ran completed
/// under its own claim, and the scheduled occurrence is fired at most once.
#[test]
fn manual_run_and_scheduled_fire_never_run_together() {
    check(|| {
        let store = Arc::new(Store::new());
        let runs = Arc::new(Runs::default());

        let (s, r) = (store.clone(), runs.clone());
        let scheduler = thread::spawn(move || scheduler_tick(&s, &r, "scheduler", OCCURRENCE));
        let (s, r) = (store.clone(), runs.clone());
        let manual = thread::spawn(move || {
            let claim = s.claim_fire(Kind::Manual, "manual", OCCURRENCE);
            if claim == Claim::Claimed {
                r.run();
                assert!(s.complete_fire("manual"));
            }
            claim
        });
        let scheduled = scheduler.join().unwrap();
        let manual = manual.join().unwrap();

        let row = store.row.lock().unwrap();
        let ran = usize::from(scheduled == Claim::Claimed) + usize::from(manual == Claim::Claimed);
        assert!(ran >= 1, "neither fire ran: {scheduled:?} {manual:?}");
        assert_eq!(runs.started.load(SeqCst), ran);
        assert_eq!(row.completed, ran);
        assert_eq!(row.fires.len(), ran);
        let scheduled_fires = row.fires.iter().filter(|(o, _)| o.is_some()).count();
        assert!(scheduled_fires <= 1);
        assert_eq!(row.fire_owner, None);
        row.assert_completions_fenced();
    });
}

/// Invariant: a runner whose lease expired (it stopped heartbeating) cannot record its result
/// over its successor's: after a second scheduler takes over the expired claim to run the next
/// occurrence, the stale runner's heartbeat and completion are both refused (owner fence), while
/// the successor's succeed, whatever the interleaving.
#[test]
fn stale_runner_cannot_complete_over_its_successor() {
    check(|| {
        let store = Arc::new(Store::new());
        // The first runner claimed the occurrence and then hung past its lease.
        assert_eq!(
            store.claim_fire(
                Kind::Scheduled {
                    occurrence: OCCURRENCE
                },
                "stale",
                OCCURRENCE
            ),
            Claim::Claimed
        );
        let later = NEXT + TTL;

        let s = store.clone();
        let stale = thread::spawn(move || {
            let beat = s.heartbeat_fire("stale", later);
            (beat, s.complete_fire("stale"))
        });
        let s = store.clone();
        let successor = thread::spawn(move || {
            let claim = scheduler_tick_claim_only(&s, "successor", later);
            if claim == Claim::Claimed {
                assert!(
                    s.heartbeat_fire("successor", later),
                    "the successor lost its claim"
                );
                assert!(
                    s.complete_fire("successor"),
                    "the stale runner released the successor's claim"
                );
            }
            claim
        });
        let (stale_beat, stale_done) = stale.join().unwrap();
        let successor = successor.join().unwrap();

        let row = store.row.lock().unwrap();
        row.assert_completions_fenced();
        // The stale runner's heartbeat succeeds only before the takeover (its lease had expired
        // but nobody had claimed yet); it then makes the claim live again, so its completion
        // succeeds too. After a takeover both are refused.
        assert_eq!(stale_beat, stale_done);
        match successor {
            Claim::Claimed => {
                assert_eq!(row.fires.len(), 2, "the successor ran the next occurrence")
            }
            _ => assert!(
                stale_done,
                "nobody took over, yet the stale runner was refused"
            ),
        }
        let successor_done = usize::from(successor == Claim::Claimed);
        assert_eq!(row.completed, usize::from(stale_done) + successor_done);
        assert_eq!(row.fire_owner, None);
    });
}

/// A scheduler's due read and claim, without running.
fn scheduler_tick_claim_only(store: &Store, owner: &'static str, now: i64) -> Claim {
    match store.due(now) {
        Some(occurrence) => store.claim_fire(Kind::Scheduled { occurrence }, owner, now),
        None => Claim::NotDue,
    }
}
