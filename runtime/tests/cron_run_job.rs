//! Ports of the original's `run_job` isolation cases: a cron job run inside a kanban worker's
//! process must not be treated as that worker, and must leave the process environment alone.
//!
//! The worker environment is never put into this test process (its environment is never
//! mutated): each `#[test]` re-executes this test binary with the worker's `HERMES_KANBAN_*`
//! variables set on the child (`Command::env`) and runs one `#[ignore]`d `child_*` scenario there.
//! The scenario refuses to run outside such a child.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary and real processes

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kanban_runtime::agent::{Agent, AgentError, Reply, Request, TurnExit};
use kanban_runtime::board::{self, Board, ClaimOutcome, ClaimSpec, NewTask, OpenOptions};
use kanban_runtime::clock::{Clock, ManualClock, SystemClock};
use kanban_runtime::cron::{self, AgentSource, Job, NewJob, Schedule, Store};
use kanban_runtime::{gates, identity};

const CHILD_MARK: &str = "KANBAN_CRON_RUN_JOB_CHILD";

/// The worker environment of the original's fixture.
fn worker_env() -> Vec<(&'static str, String)> {
    vec![
        ("HERMES_KANBAN_TASK", "t_worker_real_task".into()),
        ("HERMES_KANBAN_WORKSPACE", "/tmp/ws".into()),
        ("HERMES_KANBAN_RUN_ID", "42".into()),
        ("HERMES_KANBAN_CLAIM_LOCK", "lock-abc".into()),
        ("HERMES_KANBAN_BOARD", "team-alpha".into()),
    ]
}

/// Runs the ignored scenario `name` in a child of this test binary with `env` added.
fn run_child(name: &str, env: &[(&str, String)]) {
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new(exe)
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_MARK, "1")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("re-exec the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child scenario {name} failed:\n{stdout}\n{stderr}"
    );
}

fn require_child() {
    assert!(
        std::env::var_os(CHILD_MARK).is_some(),
        "this scenario runs only inside the worker environment its parent test sets up"
    );
}

/// The process's `HERMES_KANBAN_*` variables (the test reads them to prove they are untouched).
fn kanban_env() -> BTreeMap<String, String> {
    std::env::vars()
        .filter(|(k, _)| k.starts_with("HERMES_KANBAN_"))
        .collect()
}

#[derive(Debug, Clone, Default)]
struct Seen {
    owned_at_build: Option<bool>,
    owned_in_run: Option<bool>,
    task_at_build: Option<String>,
    task_in_run: Option<String>,
    env_at_build: BTreeMap<String, String>,
    env_in_run: BTreeMap<String, String>,
}

#[derive(Clone, Copy)]
enum Behaviour {
    Succeed,
    Fail,
    Panic,
}

/// An agent source that records what the agent observes at construction and while running.
struct Fake {
    behaviour: Behaviour,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Called inside `run` before replying (to hold the job open).
    during_run: Option<Arc<dyn Fn() + Send + Sync>>,
}

struct FakeAgent {
    behaviour: Behaviour,
    seen: Arc<Mutex<Vec<Seen>>>,
    record: Seen,
    during_run: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl AgentSource for Fake {
    fn build(&self, _profile: &str) -> Result<Box<dyn Agent>, AgentError> {
        Ok(Box::new(FakeAgent {
            behaviour: self.behaviour,
            seen: self.seen.clone(),
            record: Seen {
                owned_at_build: Some(identity::is_dispatcher_owned_worker_context()),
                task_at_build: gates::default_task_id(None),
                env_at_build: kanban_env(),
                ..Seen::default()
            },
            during_run: self.during_run.clone(),
        }))
    }
}

impl Agent for FakeAgent {
    fn run(&mut self, _request: &Request<'_>) -> Result<Reply, AgentError> {
        let mut record = self.record.clone();
        record.owned_in_run = Some(identity::is_dispatcher_owned_worker_context());
        record.task_in_run = gates::default_task_id(None);
        record.env_in_run = kanban_env();
        if let Some(f) = &self.during_run {
            f();
        }
        self.seen.lock().unwrap().push(record);
        match self.behaviour {
            Behaviour::Succeed => Ok(Reply {
                exit: TurnExit::Success,
                final_response: "done".into(),
                output: "done".into(),
            }),
            Behaviour::Fail => Err(AgentError::Other("boom".into())),
            Behaviour::Panic => panic!("the agent exploded"),
        }
    }
}

fn fake(behaviour: Behaviour) -> (Fake, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    (
        Fake {
            behaviour,
            seen: seen.clone(),
            during_run: None,
        },
        seen,
    )
}

/// A stored job (workdir-less) in a fresh cron home.
fn job(home: &Path, name: &str) -> Job {
    Store::open(home)
        .unwrap()
        .add(
            NewJob {
                name: Some(name.into()),
                prompt: "hi".into(),
                schedule: "every 1h".into(),
                schedule_spec: Schedule::Interval { seconds: 3_600 },
                profile: "fake".into(),
                workdir: None,
                repeat: None,
            },
            1_000,
        )
        .unwrap()
}

fn assert_worker_owned() {
    assert!(identity::is_dispatcher_owned_worker_context());
    assert_eq!(
        identity::owned_kanban_task().as_deref(),
        Some("t_worker_real_task")
    );
}

#[test]
fn agent_runs_as_non_dispatcher() {
    run_child("child_agent_runs_as_non_dispatcher", &worker_env());
}

#[test]
#[ignore = "run by `agent_runs_as_non_dispatcher` in a worker environment"]
fn child_agent_runs_as_non_dispatcher() {
    require_child();
    assert_worker_owned();
    let home = tempfile::tempdir().unwrap();
    let (agents, seen) = fake(Behaviour::Succeed);
    let outcome = cron::run_job(&job(home.path(), "iso"), &agents, &ManualClock::new(5));
    assert!(outcome.success, "{outcome:?}");
    assert_eq!(outcome.final_response, "done");
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[0].owned_at_build,
        Some(false),
        "not owned at construction"
    );
    assert_eq!(seen[0].owned_in_run, Some(false), "not owned while running");
    assert_eq!(
        seen[0].task_at_build, None,
        "no default task id at construction"
    );
    assert_eq!(
        seen[0].task_in_run, None,
        "no default task id while running"
    );
}

#[test]
fn environment_is_left_untouched() {
    run_child("child_environment_is_left_untouched", &worker_env());
}

#[test]
#[ignore = "run by `environment_is_left_untouched` in a worker environment"]
fn child_environment_is_left_untouched() {
    require_child();
    let before = kanban_env();
    assert_eq!(
        before.len(),
        5,
        "the parent populated the worker env: {before:?}"
    );
    let cwd = std::env::current_dir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (agents, seen) = fake(Behaviour::Succeed);
    let outcome = cron::run_job(&job(home.path(), "env"), &agents, &ManualClock::new(5));
    assert!(outcome.success);
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[0].env_at_build, before,
        "untouched during construction"
    );
    assert_eq!(seen[0].env_in_run, before, "untouched while running");
    assert_eq!(kanban_env(), before, "untouched after");
    assert_eq!(std::env::current_dir().unwrap(), cwd, "cwd untouched");
}

#[test]
fn context_is_owned_again_after_the_job() {
    run_child("child_context_is_owned_again_after_the_job", &worker_env());
}

#[test]
#[ignore = "run by `context_is_owned_again_after_the_job` in a worker environment"]
fn child_context_is_owned_again_after_the_job() {
    require_child();
    let home = tempfile::tempdir().unwrap();
    let (agents, _) = fake(Behaviour::Succeed);
    cron::run_job(&job(home.path(), "reset"), &agents, &ManualClock::new(5));
    assert_worker_owned();
}

#[test]
fn context_is_owned_again_when_the_agent_fails_or_panics() {
    run_child(
        "child_context_is_owned_again_when_the_agent_fails_or_panics",
        &worker_env(),
    );
}

#[test]
#[ignore = "run by `context_is_owned_again_when_the_agent_fails_or_panics` in a worker environment"]
fn child_context_is_owned_again_when_the_agent_fails_or_panics() {
    require_child();
    let before = kanban_env();
    let home = tempfile::tempdir().unwrap();
    for (behaviour, needle) in [(Behaviour::Fail, "boom"), (Behaviour::Panic, "exploded")] {
        let (agents, seen) = fake(behaviour);
        let outcome = cron::run_job(&job(home.path(), needle), &agents, &ManualClock::new(5));
        assert!(!outcome.success);
        let error = outcome.error.unwrap_or_default();
        assert!(error.contains(needle), "{error}");
        assert_eq!(seen.lock().unwrap()[0].owned_in_run, Some(false));
        assert_worker_owned();
        assert_eq!(kanban_env(), before, "the env survived the failure");
    }
    // An agent that cannot even be built fails the same way, and the scope still closes.
    struct Unbuildable;
    impl AgentSource for Unbuildable {
        fn build(&self, profile: &str) -> Result<Box<dyn Agent>, AgentError> {
            assert!(!identity::is_dispatcher_owned_worker_context());
            Err(AgentError::Other(format!("no profile {profile}")))
        }
    }
    let outcome = cron::run_job(&job(home.path(), "x"), &Unbuildable, &ManualClock::new(5));
    assert_eq!(outcome.error.as_deref(), Some("no profile fake"));
    assert_worker_owned();
}

/// Sets up a real board with a claimed task and returns the worker env of that claim.
fn claimed_worker(home: &Path) -> (Vec<(&'static str, String)>, String) {
    let db = home.join("kanban.db");
    let board = Board::open_path(&db, &OpenOptions::create()).unwrap();
    let created = board
        .create_task(
            &NewTask {
                title: "the worker's real task".into(),
                ..NewTask::default()
            },
            SystemClock.now(),
        )
        .unwrap();
    let claim = match board
        .claim(
            &created.id,
            &ClaimSpec {
                lock: "host:4242".into(),
                ttl_seconds: 900,
                origin: kanban_runtime::board::ClaimOrigin::External,
            },
            SystemClock.now(),
        )
        .unwrap()
    {
        ClaimOutcome::Claimed(c) => c,
        ClaimOutcome::Lost(r) => panic!("claim lost: {r}"),
    };
    let env = vec![
        ("HERMES_KANBAN_TASK", created.id.clone()),
        ("HERMES_KANBAN_RUN_ID", claim.run_id.to_string()),
        ("HERMES_KANBAN_CLAIM_LOCK", claim.claim_lock.clone()),
        ("HERMES_KANBAN_DB", db.to_string_lossy().into_owned()),
        ("HERMES_KANBAN_BOARD", "default".into()),
    ];
    (env, created.id)
}

#[test]
fn concurrent_jobs_keep_the_worker_identity_and_its_heartbeat() {
    let home = tempfile::tempdir().unwrap();
    let (env, task) = claimed_worker(home.path());
    run_child(
        "child_concurrent_jobs_keep_the_worker_identity_and_its_heartbeat",
        &env,
    );
    let board = Board::open_path(&home.path().join("kanban.db"), &OpenOptions::default()).unwrap();
    let t = board.get_task(&task).unwrap();
    assert_eq!(
        t.status,
        board::Status::Running,
        "the worker's task is still running"
    );
    assert!(
        t.last_heartbeat_at.is_some(),
        "the worker's own heartbeats landed"
    );
}

#[test]
#[ignore = "run by `concurrent_jobs_keep_the_worker_identity_and_its_heartbeat` in a worker env"]
fn child_concurrent_jobs_keep_the_worker_identity_and_its_heartbeat() {
    require_child();
    let before = kanban_env();
    let worker = gates::owned_identity().expect("the child is an owned worker");
    let db = worker.db.clone().expect("HERMES_KANBAN_DB");

    // The worker's own heartbeat thread: an owned context that keeps extending its claim.
    let beats = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let heartbeat = {
        let (beats, failures, stop, db) =
            (beats.clone(), failures.clone(), stop.clone(), db.clone());
        identity::spawn("worker-heartbeat", move || {
            let board = Board::open_path(&db, &OpenOptions::default()).unwrap();
            while !stop.load(Ordering::SeqCst) {
                let Some(me) = gates::owned_identity() else {
                    failures
                        .lock()
                        .unwrap()
                        .push("heartbeat thread lost its identity".into());
                    return;
                };
                let fence = board::Fence {
                    claim_lock: me.claim_lock.clone(),
                    run_id: me.run_id,
                };
                match board.heartbeat(&me.task, &fence, None, 900, SystemClock.now()) {
                    Ok(board::Outcome::Done(_)) => {
                        beats.fetch_add(1, Ordering::SeqCst);
                    }
                    other => failures.lock().unwrap().push(format!("{other:?}")),
                }
                std::thread::yield_now();
            }
        })
        .unwrap()
    };

    // Each job holds its turn open until the worker has heartbeated twice meanwhile.
    let hold: Arc<dyn Fn() + Send + Sync> = {
        let beats = beats.clone();
        Arc::new(move || {
            let start = beats.load(Ordering::SeqCst);
            let deadline = Instant::now() + Duration::from_secs(20);
            while beats.load(Ordering::SeqCst) < start + 2 && Instant::now() < deadline {
                std::thread::yield_now();
            }
        })
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let agents = Arc::new(Fake {
        behaviour: Behaviour::Succeed,
        seen: seen.clone(),
        during_run: Some(hold),
    });
    let home = tempfile::tempdir().unwrap();
    let jobs = [job(home.path(), "a"), job(home.path(), "b")];
    let runners: Vec<_> = jobs
        .into_iter()
        .map(|j| {
            let agents = agents.clone();
            identity::spawn("cron-test-job", move || {
                let outcome = cron::run_job(&j, agents.as_ref(), &ManualClock::new(5));
                (
                    outcome.success,
                    identity::is_dispatcher_owned_worker_context(),
                )
            })
            .unwrap()
        })
        .collect();
    let results: Vec<(bool, bool)> = runners.into_iter().map(|h| h.join().unwrap()).collect();
    stop.store(true, Ordering::SeqCst);
    heartbeat.join().unwrap();

    assert_eq!(
        results,
        vec![(true, true), (true, true)],
        "both jobs succeeded and left their threads owned"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    for s in seen.iter() {
        assert_eq!(
            (s.owned_at_build, s.owned_in_run),
            (Some(false), Some(false))
        );
        assert_eq!(s.env_in_run, before);
    }
    assert!(
        failures.lock().unwrap().is_empty(),
        "{:?}",
        failures.lock().unwrap()
    );
    // Each job held its run open until two beats landed after it started; the two jobs may
    // overlap, so together they prove at least two (not four) beats while a job ran.
    assert!(
        beats.load(Ordering::SeqCst) >= 2,
        "the worker heartbeated while the jobs ran"
    );
    assert_eq!(
        kanban_env(),
        before,
        "worker identity survived concurrent cron jobs"
    );
    assert_eq!(gates::owned_identity().map(|w| w.task), Some(worker.task));
}
