//! Model of a cron job running inside a kanban worker's process while the worker's heartbeat
//! thread keeps the worker's claim alive (ARCHITECTURE.md §4, §5, §6).
//!
//! Real code under loom: the ownership context; `identity::spawn` (both threads are started with
//! it from the worker's owned context, as the worker's heartbeat and a cron pool thread are); the
//! worker heartbeat's loop and stop handshake (`worker::heartbeat::{Shared, run_beats}`); the
//! cron pool (`cron::scheduler::Pool`) and `cron::run_job` with its scope discipline; the
//! identity gate reading the process environment, the `#[kanban_identity_gated]` gates and
//! `identity::command`'s scrub. Stand-ins: the worker's claim on its task lives in SQLite in the
//! product (`board::Board::heartbeat`, a compare-and-swap on task, claim lock and run id), so a
//! beat extends [`TaskClaim`], a row behind a `loom::sync::Mutex`; the heartbeat waits on the
//! real condition variable, and since loom has no timeouts the job's agent makes an interval
//! elapse (`Shared::elapse`) while it runs; the beat closure still asks the loop to stop after
//! [`BEATS`] beats; the job's agent is a probe that records what it can see of the worker.
//!
//! The gate only hands out an identity in a process whose environment is a worker's, and the
//! process environment is never mutated, so the test re-runs itself in a child process started
//! with a worker's `HERMES_KANBAN_*` variables (set on the child's `Command`).
#![cfg(loom)]
// Test code: a panic is how a model reports the interleaving that broke its invariant.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::Ordering;
use std::time::Duration;

use kanban_loom_tests::check;
use kanban_runtime::agent::{Agent, AgentError, Reply, Request, TurnExit};
use kanban_runtime::clock::Clock;
use kanban_runtime::cron::scheduler::Pool;
use kanban_runtime::cron::{self, AgentSource, Job, JobState, Repeat, Schedule};
use kanban_runtime::worker::heartbeat::{Beat, Shared, run_beats};
use kanban_runtime::{gates, identity};
use loom::sync::{Arc, Mutex};

/// The worker identity the child process carries.
const TASK: &str = "t_loomworker";
const RUN_ID: i64 = 7;
const CLAIM_LOCK: &str = "loomhost:4242";
/// Heartbeats the worker's heartbeat thread sends while the cron job runs.
const BEATS: u64 = 2;
const JOB_ID: &str = "0123456789ab";

/// Set (outside loom) when some explored execution sent a beat while the job's scope was open:
/// the model must cover that interleaving, or its "every beat extended the claim" is vacuous.
static BEAT_INSIDE_THE_JOB: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Stand-in for the worker's claim row on the board: `claim_lock`, `current_run_id` and
/// `claim_expires` of a running task.
#[derive(Debug)]
struct TaskClaim {
    row: Mutex<ClaimRow>,
}

#[derive(Debug)]
struct ClaimRow {
    task: &'static str,
    claim_lock: &'static str,
    run_id: i64,
    expires: i64,
    /// Who extended the claim, in order.
    extended_by: Vec<&'static str>,
}

impl TaskClaim {
    fn new() -> Self {
        TaskClaim {
            row: Mutex::new(ClaimRow {
                task: TASK,
                claim_lock: CLAIM_LOCK,
                run_id: RUN_ID,
                expires: 900,
                extended_by: Vec::new(),
            }),
        }
    }

    /// `Board::heartbeat`: extends the claim only when task, claim lock and run id all match.
    fn heartbeat(&self, who: &'static str, id: &identity::WorkerBinding, now: i64) -> bool {
        let mut row = self.row.lock().unwrap();
        let current = id.task == row.task
            && id.claim_lock.as_deref() == Some(row.claim_lock)
            && id.run_id == Some(row.run_id);
        if current {
            row.expires = now + 900;
            row.extended_by.push(who);
        }
        current
    }
}

/// What the cron job's agent could see of the worker, recorded where it looked.
#[derive(Debug, Default)]
struct Seen {
    /// One entry per look: `Some(task)` if any identity-revealing call answered.
    leaks: Vec<String>,
    looks: usize,
}

/// A cron job's agent that looks for the worker's identity everywhere a real agent could (the
/// gate, the gates a tool command would consult, the environment of a child it would start)
/// and tries to heartbeat the worker's claim with whatever it finds.
struct ProbeAgent {
    seen: Arc<Mutex<Seen>>,
    claim: Arc<TaskClaim>,
    /// The worker's heartbeat: time passes while the job runs (`Shared::elapse`).
    heartbeat: Arc<Shared>,
}

impl ProbeAgent {
    /// Looks once; called when the agent is built and when it runs.
    fn look(&self) {
        let mut leaks = Vec::new();
        if identity::is_dispatcher_owned_worker_context() {
            leaks.push("the context is owned".to_owned());
        }
        if let Some(id) = identity::gate() {
            leaks.push(format!("gate() = {}", id.task));
        }
        if let Some(task) = gates::default_task_id(None) {
            leaks.push(format!("default_task_id = {task}"));
        }
        if let Some(target) = gates::auto_heartbeat_target() {
            leaks.push(format!("auto_heartbeat_target = {}", target.task));
            if self.claim.heartbeat("cron-job", &target, 1) {
                leaks.push("the job extended the worker's claim".to_owned());
            }
        }
        if gates::claim_lock_for(TASK).is_some() || gates::run_id_for(TASK).is_some() {
            leaks.push("claim lock or run id of the worker's task".to_owned());
        }
        if gates::check_mutation("t_someone_else").is_err() {
            leaks.push("the worker's ownership applied to the job".to_owned());
        }
        // Judged now, in the job's scope, as a spawn here would be.
        let planned = identity::command("agent-tool")
            .planned_env()
            .unwrap_or_default();
        let scrubbed = planned
            .iter()
            .any(|(k, v)| k == "HERMES_KANBAN_TASK" && v.is_none());
        let marked = planned
            .iter()
            .any(|(k, v)| k == identity::DELEGATED_CHILD_MARKER && v.is_some());
        if !scrubbed || !marked {
            leaks.push("a child command would inherit the worker's identity".to_owned());
        }
        let mut seen = self.seen.lock().unwrap();
        seen.looks += 1;
        seen.leaks.extend(leaks);
    }
}

impl Agent for ProbeAgent {
    fn run(&mut self, _request: &Request<'_>) -> Result<Reply, AgentError> {
        // A heartbeat interval passes while the job runs: the worker's loop may beat now.
        self.heartbeat.elapse();
        self.look();
        Ok(Reply {
            exit: TurnExit::Success,
            final_response: "probed".to_owned(),
            output: String::new(),
        })
    }
}

/// Builds the probe; `run_job` calls it inside the job's non-owned scope.
struct ProbeAgents {
    seen: Arc<Mutex<Seen>>,
    claim: Arc<TaskClaim>,
    heartbeat: Arc<Shared>,
}

impl AgentSource for ProbeAgents {
    fn build(&self, _profile: &str) -> Result<Box<dyn Agent>, AgentError> {
        let agent = ProbeAgent {
            seen: self.seen.clone(),
            claim: self.claim.clone(),
            heartbeat: self.heartbeat.clone(),
        };
        agent.look();
        Ok(Box::new(agent))
    }
}

struct FixedClock;

impl Clock for FixedClock {
    fn now(&self) -> i64 {
        1_000
    }
}

/// A recurring job whose agent is the probe.
fn probe_job() -> Job {
    Job {
        id: JOB_ID.to_owned(),
        name: "loom-probe".to_owned(),
        prompt: "look for the worker".to_owned(),
        schedule: "every 30m".to_owned(),
        schedule_spec: Schedule::Interval { seconds: 1_800 },
        profile: "probe".to_owned(),
        workdir: None,
        enabled: true,
        state: JobState::Scheduled,
        created_at: 0,
        next_run_at: Some(1_000),
        last_run_at: None,
        last_status: None,
        last_error: None,
        repeat: Repeat {
            times: None,
            completed: 0,
        },
        failure_streak: 0,
        paused_at: None,
        paused_reason: None,
        fire_claim: None,
    }
}

/// Invariant: while a cron job runs through `cron::run_job` on a pool thread of a kanban worker's
/// process, and the worker's heartbeat thread extends the worker's claim concurrently, in every
/// interleaving (a) the job never observes or uses the worker's identity: when its agent is
/// built and when it runs, the gate and every gate a tool command consults say "not yours", it
/// cannot extend the worker's claim, and a child it would start loses the identity and carries
/// the delegated-child marker; (b) every beat of the heartbeat gets the worker's identity from
/// the gate and extends the claim (none is refused), and the heartbeat stops when asked (by
/// the worker once the job is joined, or by its own bound); (c) once the job
/// returned, the pool thread is owned again and the gate hands it the identity.
#[test]
fn cron_job_beside_worker_heartbeat_never_sees_the_worker() {
    in_worker_process(
        "cron_job_beside_worker_heartbeat_never_sees_the_worker",
        || {
            check(|| {
                let claim = Arc::new(TaskClaim::new());
                let seen = Arc::new(Mutex::new(Seen::default()));

                // The worker's heartbeat, as `worker::heartbeat::Heartbeat::start` runs it, with a
                // beat on the stand-in claim.
                let shared = Arc::new(Shared::new());
                let (inner, c, s) = (shared.clone(), claim.clone(), seen.clone());
                let heartbeat = identity::spawn("kanban-heartbeat", move || {
                    let mut n = 0;
                    let mut beat = || {
                        let target = gates::auto_heartbeat_target()
                            .expect("the heartbeat thread lost the worker's identity");
                        assert_eq!(target.task, TASK);
                        if s.lock().unwrap().looks == 1 {
                            // Between the probe's two looks: inside the job's non-owned scope.
                            BEAT_INSIDE_THE_JOB.store(true, Ordering::SeqCst);
                        }
                        let extended = c.heartbeat("heartbeat", &target, 10 + n);
                        n += 1;
                        if n == BEATS as i64 {
                            inner.request_stop();
                        }
                        if extended { Beat::Extended } else { Beat::Lost }
                    };
                    run_beats(&inner, Duration::from_secs(300), &mut beat);
                })
                .unwrap();

                // A cron pool thread started in the worker's process (a scheduler or `kanban cron
                // run` inside the worker's shell).
                let agents = ProbeAgents {
                    seen: seen.clone(),
                    claim: claim.clone(),
                    heartbeat: shared.clone(),
                };
                let cron = identity::spawn("cron-pool", move || {
                    assert!(identity::gate().is_some(), "a pool thread starts owned");
                    let pool = Pool::new(1);
                    let slot = pool
                        .acquire(JOB_ID)
                        .expect("the only job gets the free slot");
                    let outcome = cron::run_job(&probe_job(), &agents, &FixedClock);
                    drop(slot);
                    assert!(outcome.success, "{outcome:?}");
                    assert!(
                        identity::is_dispatcher_owned_worker_context(),
                        "the job's scope did not close"
                    );
                    let id =
                        identity::gate().expect("the pool thread lost its identity after the job");
                    assert_eq!(id.task, TASK);
                })
                .unwrap();

                cron.join().unwrap();
                // The worker's turn is over: stop the heartbeat (`Heartbeat::stop`).
                shared.request_stop();
                heartbeat.join().unwrap();

                let seen = seen.lock().unwrap();
                assert_eq!(seen.looks, 2, "the probe looks when built and when run");
                assert!(
                    seen.leaks.is_empty(),
                    "the cron job saw the worker: {:?}",
                    seen.leaks
                );
                // The worker may stop its heartbeat before the loop's own bound: every beat that
                // was sent extended the claim, and none was refused.
                assert!(!shared.lost(), "a heartbeat was refused");
                let beats = shared.beats();
                assert!(beats <= BEATS);
                let row = claim.row.lock().unwrap();
                assert_eq!(row.extended_by, vec!["heartbeat"; beats as usize]);
                if beats > 0 {
                    assert_eq!(row.expires, 10 + beats as i64 - 1 + 900);
                }
                assert!(
                    identity::gate().is_some(),
                    "the worker's main thread lost its identity"
                );
            });
            assert!(
                BEAT_INSIDE_THE_JOB.load(Ordering::SeqCst),
                "no explored execution sent a beat while the cron job ran"
            );
        },
    );
}

/// Runs `model` in a process whose environment is a kanban worker's: here when this process
/// already is one (the gate hands out an identity), otherwise in a child running only `test`
/// from this test binary, with the worker's variables set on the child's `Command`.
fn in_worker_process(test: &str, model: impl FnOnce()) {
    // The context is loom's thread-local: it can only be read inside a loom execution.
    let worker = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let probe = worker.clone();
    loom::model(move || probe.store(identity::gate().is_some(), Ordering::SeqCst));
    if worker.load(Ordering::SeqCst) {
        model();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    // Test code drives a process directly (`identity::command` reads the context, which only
    // exists inside a loom execution).
    let mut child = std::process::Command::new(&exe);
    child
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("HERMES_KANBAN_TASK", TASK)
        .env("HERMES_KANBAN_RUN_ID", RUN_ID.to_string())
        .env("HERMES_KANBAN_CLAIM_LOCK", CLAIM_LOCK)
        .env_remove(identity::DELEGATED_CHILD_MARKER);
    let out = child.output().expect("cannot re-run the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stderr.lines().filter(|l| l.starts_with("loom: ")) {
        eprintln!("{line} (in a worker-environment child)");
    }
    assert!(
        out.status.success(),
        "the model failed in the worker-environment child ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "the child did not run the model:\n{stdout}\n{stderr}"
    );
}
