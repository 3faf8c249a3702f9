//! Model of the cron scheduler's bounded run pool (`cron::scheduler::Pool`, ARCHITECTURE.md §6: "jobs run
//! on a bounded parallel pool"), real code: under `--cfg loom` its `Mutex`, `Condvar` and `Arc`
//! come from loom through `kanban_runtime::sync`.
#![cfg(loom)]
// Test code: a panic is how a model reports the interleaving that broke its invariant.
#![allow(clippy::unwrap_used)]

use kanban_loom_tests::check;
use kanban_runtime::cron::scheduler::{Acquire, Pool};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::thread;

/// Slots in use and runs of job `a` in use, as the model's threads see them.
#[derive(Default)]
struct Running {
    all: AtomicUsize,
    job_a: AtomicUsize,
    runs_of_a: AtomicUsize,
}

impl Running {
    /// Runs `job` while holding a slot: never beyond the limit of one, never `a` twice at once.
    fn run(&self, job: &str) {
        let others = self.all.fetch_add(1, SeqCst);
        assert_eq!(others, 0, "the pool let two jobs run with a limit of one");
        if job == "a" {
            self.runs_of_a.fetch_add(1, SeqCst);
            let twins = self.job_a.fetch_add(1, SeqCst);
            assert_eq!(twins, 0, "the pool let job `a` run twice at once");
            self.job_a.fetch_sub(1, SeqCst);
        }
        self.all.fetch_sub(1, SeqCst);
    }
}

/// Invariant: with a limit of one slot, two threads asking for job `a` and one asking for job `b`
/// (all with the blocking `acquire`), in every interleaving at most one job runs at a time, job
/// `a` never runs twice at once (a second request while it runs is told it is in flight), every
/// waiter is woken when the slot frees (loom reports a deadlock if one is left waiting), `b`
/// always runs, and afterwards the pool is empty and hands out a slot again.
#[test]
fn cron_pool_keeps_its_limit_and_never_runs_a_job_twice() {
    check(|| {
        let pool = Pool::new(1);
        let running = Arc::new(Running::default());

        let spawn_a = |pool: &Pool, running: &Arc<Running>| {
            let (pool, running) = (pool.clone(), running.clone());
            thread::spawn(move || match pool.acquire("a") {
                Some(slot) => {
                    running.run("a");
                    drop(slot);
                    true
                }
                None => false,
            })
        };
        let first = spawn_a(&pool, &running);
        let second = spawn_a(&pool, &running);

        let slot = pool
            .acquire("b")
            .expect("job `b` is not in flight: it waits for the slot");
        running.run("b");
        drop(slot);

        let ran = [first.join().unwrap(), second.join().unwrap()];
        let ran_a = ran.iter().filter(|r| **r).count();
        assert!(ran_a >= 1, "job `a` never ran");
        assert_eq!(running.runs_of_a.load(SeqCst), ran_a);
        assert_eq!(pool.running(), 0);
        assert!(matches!(pool.try_acquire("a"), Acquire::Slot(_)));
    });
}
