//! The scheduler against a real store with a test agent and an injected clock: racing schedulers
//! never run one occurrence twice, a one-shot runs once, the pool is bounded, outputs and
//! statuses are recorded.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use kanban_runtime::agent::{Agent, AgentError, Reply, Request, TurnExit};
use kanban_runtime::clock::{Clock, ManualClock};
use kanban_runtime::cron::{
    AgentSource, JobState, NewJob, Schedule, Scheduler, SchedulerSettings, Store,
};

/// Counts runs per prompt; a prompt starting with `fail` fails; tracks peak concurrency.
#[derive(Default)]
struct Counting {
    runs: Mutex<BTreeMap<String, usize>>,
    active: AtomicUsize,
    peak: AtomicUsize,
    /// Spins (bounded) while fewer than this many turns are active, to expose the pool bound.
    gather: usize,
}

struct CountingAgent(Arc<Counting>);

struct Source(Arc<Counting>);

impl AgentSource for Source {
    fn build(&self, _profile: &str) -> Result<Box<dyn Agent>, AgentError> {
        Ok(Box::new(CountingAgent(self.0.clone())))
    }
}

impl Agent for CountingAgent {
    fn run(&mut self, request: &Request<'_>) -> Result<Reply, AgentError> {
        let c = &self.0;
        let now_active = c.active.fetch_add(1, Ordering::SeqCst) + 1;
        c.peak.fetch_max(now_active, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(300);
        while c.active.load(Ordering::SeqCst) < c.gather && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        *c.runs
            .lock()
            .unwrap()
            .entry(request.prompt.to_owned())
            .or_default() += 1;
        c.active.fetch_sub(1, Ordering::SeqCst);
        let failed = request.prompt.starts_with("fail");
        Ok(Reply {
            exit: if failed {
                TurnExit::Failed(2)
            } else {
                TurnExit::Success
            },
            final_response: format!("ran {}", request.prompt),
            output: String::new(),
        })
    }
}

fn add(home: &Path, prompt: &str, schedule: Schedule, now: i64) -> String {
    Store::open(home)
        .unwrap()
        .add(
            NewJob {
                name: None,
                prompt: prompt.into(),
                schedule: schedule.describe(),
                schedule_spec: schedule,
                profile: "test".into(),
                workdir: None,
                repeat: None,
            },
            now,
        )
        .unwrap()
        .id
}

fn scheduler(
    home: &Path,
    clock: &ManualClock,
    agents: &Arc<Counting>,
    parallel: usize,
) -> Scheduler {
    Scheduler::new(
        home,
        Arc::new(clock.clone()),
        Arc::new(Source(agents.clone())),
        SchedulerSettings {
            max_parallel: parallel,
            claim_ttl: 300,
            output_retention: 0,
        },
    )
    .unwrap()
}

const BASE: i64 = 1_800_000_000;

#[test]
fn racing_fire_claims_never_run_an_occurrence_twice() {
    let home = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(BASE);
    let agents = Arc::new(Counting::default());
    let every = add(
        home.path(),
        "every",
        Schedule::Interval { seconds: 60 },
        BASE,
    );
    let once = add(home.path(), "once", Schedule::Once { at: BASE + 600 }, BASE);
    let a = Arc::new(scheduler(home.path(), &clock, &agents, 4));
    let b = Arc::new(scheduler(home.path(), &clock, &agents, 4));
    let rounds = 60;
    let mut granted = 0;
    for round in 1..=rounds {
        clock.set(BASE + 60 * round + 1);
        // Both schedulers saw the same due snapshot and race for every job in it.
        let due = Store::open(home.path()).unwrap().due(clock.now()).unwrap();
        let racers: Vec<_> = [a.clone(), b.clone()]
            .into_iter()
            .map(|s| {
                let due = due.clone();
                kanban_runtime::identity::spawn("racer", move || {
                    due.iter()
                        .filter_map(|job| s.fire_scheduled(job).unwrap())
                        .count()
                })
                .unwrap()
            })
            .collect();
        granted += racers.into_iter().map(|h| h.join().unwrap()).sum::<usize>();
    }
    let runs = agents.runs.lock().unwrap().clone();
    assert_eq!(
        runs.get("every"),
        Some(&(rounds as usize)),
        "one run per occurrence"
    );
    assert_eq!(runs.get("once"), Some(&1), "the one-shot ran once");
    assert_eq!(granted, rounds as usize + 1);
    let store = Store::open(home.path()).unwrap();
    let fires = store.fires(&every).unwrap();
    let occurrences: BTreeSet<_> = fires.iter().map(|f| f.occurrence).collect();
    assert_eq!(
        occurrences.len(),
        fires.len(),
        "no occurrence in the ledger twice"
    );
    assert!(fires.iter().all(|f| f.status == "ok"));
    let once_job = store.get(&once).unwrap().unwrap();
    assert_eq!(once_job.state, JobState::Completed);
    assert_eq!(once_job.repeat.completed, 1);
}

#[test]
fn two_ticking_schedulers_on_one_home_run_each_occurrence_once() {
    let home = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(BASE);
    let agents = Arc::new(Counting::default());
    add(
        home.path(),
        "every",
        Schedule::Interval { seconds: 60 },
        BASE,
    );
    add(
        home.path(),
        "every-2m",
        Schedule::Interval { seconds: 120 },
        BASE,
    );
    add(home.path(), "once", Schedule::Once { at: BASE + 300 }, BASE);
    let a = Arc::new(scheduler(home.path(), &clock, &agents, 2));
    let b = Arc::new(scheduler(home.path(), &clock, &agents, 2));
    let rounds = 40;
    for round in 1..=rounds {
        clock.set(BASE + 60 * round);
        let tickers: Vec<_> = [a.clone(), b.clone()]
            .into_iter()
            .map(|s| kanban_runtime::identity::spawn("ticker", move || s.tick().unwrap()).unwrap())
            .collect();
        for t in tickers {
            let report = t.join().unwrap();
            assert!(report.errors.is_empty(), "{:?}", report.errors);
        }
    }
    let runs = agents.runs.lock().unwrap().clone();
    assert_eq!(runs.get("every"), Some(&(rounds as usize)));
    assert_eq!(runs.get("every-2m"), Some(&(rounds as usize / 2)));
    assert_eq!(runs.get("once"), Some(&1));
}

#[test]
fn the_pool_bounds_parallel_jobs_and_records_status_and_output() {
    let home = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(BASE);
    let agents = Arc::new(Counting {
        gather: 3,
        ..Counting::default()
    });
    let ids: Vec<String> = (0..5)
        .map(|i| {
            add(
                home.path(),
                &format!("job{i}"),
                Schedule::Interval { seconds: 60 },
                BASE,
            )
        })
        .collect();
    let failing = add(
        home.path(),
        "fail-me",
        Schedule::Interval { seconds: 60 },
        BASE,
    );
    let s = scheduler(home.path(), &clock, &agents, 2);
    clock.set(BASE + 61);
    let report = s.tick().unwrap();
    assert_eq!(report.fired.len(), 6);
    assert!(
        agents.peak.load(Ordering::SeqCst) <= 2,
        "at most max_parallel at once"
    );
    let store = Store::open(home.path()).unwrap();
    for id in &ids {
        let job = store.get(id).unwrap().unwrap();
        assert_eq!(job.last_status.as_deref(), Some("ok"));
        assert_eq!(job.failure_streak, 0);
        assert_eq!(job.next_run_at, Some(BASE + 120));
        let fire = &store.fires(id).unwrap()[0];
        let path = fire.output_path.as_deref().expect("output saved");
        let doc = std::fs::read_to_string(path).unwrap();
        assert!(doc.contains("ran job"), "{doc}");
    }
    let bad = store.get(&failing).unwrap().unwrap();
    assert_eq!(bad.last_status.as_deref(), Some("error"));
    assert_eq!(bad.failure_streak, 1);
    assert!(bad.last_error.unwrap_or_default().contains("exit status 2"));
    // A second failure grows the streak.
    clock.set(BASE + 121);
    s.tick().unwrap();
    assert_eq!(store.get(&failing).unwrap().unwrap().failure_streak, 2);
}

#[test]
fn a_manual_run_is_refused_while_the_job_is_claimed_elsewhere() {
    let home = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(BASE);
    let agents = Arc::new(Counting::default());
    let id = add(home.path(), "m", Schedule::Interval { seconds: 60 }, BASE);
    let mut store = Store::open(home.path()).unwrap();
    let claim = store
        .claim_fire(
            &id,
            kanban_runtime::cron::store::FireKind::Manual,
            "other:1:x",
            BASE,
            300,
        )
        .unwrap();
    assert!(matches!(
        claim,
        kanban_runtime::cron::store::ClaimOutcome::Claimed(_)
    ));
    let s = scheduler(home.path(), &clock, &agents, 1);
    let err = s.run_now(&id).unwrap_err();
    assert!(err.to_string().contains("already running"), "{err}");
    // Once the other claim's lease has expired, the run goes ahead and the old one is closed.
    clock.set(BASE + 301);
    let fire = s.run_now("m").unwrap();
    assert!(fire.outcome.success && fire.recorded);
    let fires = store.fires(&id).unwrap();
    assert_eq!(fires[0].status, "lost");
    assert_eq!(fires[1].status, "ok");
}
