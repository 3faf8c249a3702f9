//! The tick's view of worker processes, behind one trait so the tick can be driven by real
//! processes ([`Processes`], built on [`default_spawn`](super::default_spawn)), by a no-op spawner
//! for benchmarks ([`NoSpawn`]), or by a scripted fake in tests. Everything that touches a process
//! (spawn, reap, liveness, signals) goes through [`Workers`].

use std::collections::HashMap;
use std::process::Child;
use std::time::{Duration, Instant};

use super::spawn::{SpawnError, SpawnRequest, default_spawn};
use crate::proc::exit::WorkerExit;
use crate::proc::process::{self, KillWait, Liveness, Termination};

/// A child this dispatcher reaped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Reaped {
    pub pid: i64,
    pub task_id: String,
    pub exit: WorkerExit,
}

/// A worker the dispatcher saw running a run, remembered so that it can be stopped once an
/// operator's reclaim or archive ends that run (the task's columns are cleared by then).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracked {
    pub pid: i64,
    pub fingerprint: Option<String>,
    pub task_id: String,
    pub run_id: i64,
}

/// Worker processes as the tick sees them.
pub trait Workers {
    /// Starts the worker for a claimed run; returns its pid.
    fn spawn(&mut self, req: &SpawnRequest) -> Result<i64, SpawnError>;
    /// Collects children that exited since the last call (phase 1 of the tick).
    fn reap(&mut self) -> Vec<Reaped>;
    /// Whether a child exited that [`Workers::reap`] has not returned yet (checked between ticks;
    /// nothing is lost: the next `reap` still returns it).
    fn poll_exited(&mut self) -> bool {
        false
    }
    /// How a child of ours ended, if it has (a child that died since the last reap is collected
    /// now, so its real status is used rather than a guess).
    fn exit_of(&mut self, pid: i64) -> Option<WorkerExit>;
    /// Liveness of a recorded worker.
    fn liveness(&self, pid: i64, fingerprint: Option<&str>) -> Liveness;
    /// The fingerprint of a just-spawned worker (`None` when unreadable).
    fn fingerprint(&self, pid: i64) -> Option<String>;
    /// TERM, wait, KILL (never a recycled pid).
    fn terminate(&mut self, pid: i64, fingerprint: Option<&str>, wait: KillWait) -> Termination;
    /// Children still running.
    fn children(&self) -> usize;
    /// Kills the leftovers (its agent's children) of a worker that is already dead.
    fn kill_leftovers(&mut self, _pid: i64) {}
    /// Whether the process group a worker led still has members (its agent's children).
    fn group_alive(&self, _pid: i64) -> bool {
        false
    }
    /// When a live process started, in epoch seconds (`None` when unknown).
    fn started_at(&self, _pid: i64) -> Option<i64> {
        None
    }
    /// Remembers a worker running a run (replacing what was known of that pid).
    fn track(&mut self, _worker: Tracked) {}
    /// Every remembered worker.
    fn tracked(&self) -> Vec<Tracked> {
        Vec::new()
    }
    /// Forgets a remembered worker.
    fn untrack(&mut self, _pid: i64) {}
}

/// How long a reaped exit status is remembered for the crash sweep.
const EXIT_MEMORY: Duration = Duration::from_secs(600);
const EXIT_MEMORY_MAX: usize = 4096;

/// Real worker processes started with [`default_spawn`]; keeps the `Child` handles to reap them.
#[derive(Debug, Default)]
pub(crate) struct Processes {
    children: HashMap<i64, (String, Child)>,
    exits: HashMap<i64, (WorkerExit, Instant)>,
    pending: Vec<Reaped>,
    tracked: HashMap<i64, Tracked>,
    /// Fault injection for the chaos suite: SIGKILL this process at the n-th spawn, after the
    /// tick's claims were committed and before the worker starts.
    die_before_spawn: Option<u32>,
}

impl Processes {
    pub fn new() -> Self {
        Self::default()
    }

    /// A test-only fault point (`kanban dispatch --fault-die-before-spawn N`, hidden): the
    /// dispatcher kills itself with SIGKILL just before its `n`-th spawn (1 = the first), i.e.
    /// between a claim commit and the spawn, leaving claims whose worker never started.
    pub fn with_fault_die_before_spawn(mut self, n: u32) -> Self {
        self.die_before_spawn = Some(n.max(1));
        self
    }

    fn collect(
        children: &mut HashMap<i64, (String, Child)>,
        exits: &mut HashMap<i64, (WorkerExit, Instant)>,
        done: &mut Vec<Reaped>,
    ) {
        children.retain(|pid, (task, child)| match child.try_wait() {
            Ok(Some(status)) => {
                let exit = WorkerExit::from_status(status);
                exits.insert(*pid, (exit, Instant::now()));
                done.push(Reaped {
                    pid: *pid,
                    task_id: task.clone(),
                    exit,
                });
                false
            }
            Ok(None) => true,
            // Not our child any more (cannot happen for a handle we own): forget it.
            Err(_) => false,
        });
        if exits.len() > EXIT_MEMORY_MAX {
            exits.retain(|_, (_, at)| at.elapsed() < EXIT_MEMORY);
        }
    }
}

impl Workers for Processes {
    fn spawn(&mut self, req: &SpawnRequest) -> Result<i64, SpawnError> {
        if let Some(n) = self.die_before_spawn.as_mut() {
            *n -= 1;
            if *n == 0 {
                let _ = rustix::process::kill_process(
                    rustix::process::getpid(),
                    rustix::process::Signal::KILL,
                );
            }
        }
        let child = default_spawn(req)?;
        let pid = i64::from(child.id());
        // A recycled pid may still have an old exit remembered: forget it.
        self.exits.remove(&pid);
        self.children.insert(pid, (req.task_id.clone(), child));
        Ok(pid)
    }

    fn reap(&mut self) -> Vec<Reaped> {
        let now = Instant::now();
        self.exits
            .retain(|_, (_, at)| now.duration_since(*at) < EXIT_MEMORY);
        Self::collect(&mut self.children, &mut self.exits, &mut self.pending);
        std::mem::take(&mut self.pending)
    }

    fn poll_exited(&mut self) -> bool {
        Self::collect(&mut self.children, &mut self.exits, &mut self.pending);
        !self.pending.is_empty()
    }

    fn exit_of(&mut self, pid: i64) -> Option<WorkerExit> {
        if !self.exits.contains_key(&pid) && self.children.contains_key(&pid) {
            Self::collect(&mut self.children, &mut self.exits, &mut self.pending);
        }
        self.exits.get(&pid).map(|(exit, _)| *exit)
    }

    fn liveness(&self, pid: i64, fingerprint: Option<&str>) -> Liveness {
        process::liveness(pid, fingerprint)
    }

    fn fingerprint(&self, pid: i64) -> Option<String> {
        i32::try_from(pid).ok().and_then(process::fingerprint)
    }

    fn terminate(&mut self, pid: i64, fingerprint: Option<&str>, wait: KillWait) -> Termination {
        let children = &mut self.children;
        let exits = &mut self.exits;
        let pending = &mut self.pending;
        process::terminate(pid, fingerprint, wait, &mut || {
            Self::collect(children, exits, pending);
        })
    }

    fn children(&self) -> usize {
        self.children.len()
    }

    fn kill_leftovers(&mut self, pid: i64) {
        process::kill_leftover_group(pid);
    }

    fn group_alive(&self, pid: i64) -> bool {
        process::group_exists(pid)
    }

    fn started_at(&self, pid: i64) -> Option<i64> {
        process::started_at(pid)
    }

    fn track(&mut self, worker: Tracked) {
        self.tracked.insert(worker.pid, worker);
    }

    fn tracked(&self) -> Vec<Tracked> {
        let mut all: Vec<Tracked> = self.tracked.values().cloned().collect();
        all.sort_by_key(|t| t.pid);
        all
    }

    fn untrack(&mut self, pid: i64) {
        self.tracked.remove(&pid);
    }
}

/// A spawner that starts nothing: each "worker" is a fake pid that stays alive until the task
/// leaves `running`. For benchmarks of the tick itself.
#[derive(Debug)]
pub struct NoSpawn {
    next: i64,
}

impl Default for NoSpawn {
    fn default() -> Self {
        // Far above any real pid so that a liveness probe can never confuse the two.
        Self { next: 1 << 40 }
    }
}

impl Workers for NoSpawn {
    fn spawn(&mut self, _req: &SpawnRequest) -> Result<i64, SpawnError> {
        self.next += 1;
        Ok(self.next)
    }
    fn reap(&mut self) -> Vec<Reaped> {
        Vec::new()
    }
    fn exit_of(&mut self, _pid: i64) -> Option<WorkerExit> {
        None
    }
    fn liveness(&self, pid: i64, _fingerprint: Option<&str>) -> Liveness {
        if pid > 1 << 40 && pid <= self.next {
            Liveness::Alive
        } else {
            Liveness::Dead
        }
    }
    fn fingerprint(&self, pid: i64) -> Option<String> {
        Some(format!("nospawn|{pid}"))
    }
    fn terminate(&mut self, pid: i64, _fingerprint: Option<&str>, _wait: KillWait) -> Termination {
        Termination {
            prev_pid: Some(pid),
            host_local: true,
            termination_attempted: true,
            terminated: true,
            ..Termination::default()
        }
    }
    fn children(&self) -> usize {
        0
    }
}
