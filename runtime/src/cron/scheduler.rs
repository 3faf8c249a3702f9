//! The scheduler: one ticker per home, fire claims with heartbeats, a bounded parallel pool, and
//! the per-run output files.
//!
//! A tick takes `<root>/cron/.tick.lock` without waiting (a second ticker on the same home skips
//! the tick), closes expired claims, reads the due jobs and hands each one to a pool thread; the
//! lock is released once the due jobs are handed over, and the durable fire claims take it from
//! there: the pool thread claims the fire at start (so a job waiting for a slot never holds a
//! lease it cannot heartbeat), heartbeats it from its own thread while the job runs, saves the
//! output and completes the fire fenced on its owner. Two schedulers on one home therefore never
//! run one occurrence twice, and a scheduler that dies mid-run leaves a claim that expires and is
//! recorded as a failed run.
//!
//! Threads are started with `identity::spawn`, so a scheduler started in a non-owned context
//! keeps it on its pool threads; the pool and the heartbeat use the `crate::sync` primitives.
//! Time comes from the injected [`Clock`]; the heartbeat thread waits on a condition variable
//! with a timeout (its period is `claim_ttl / 3`), never in a sleep loop that tests depend on.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::store::{self, ClaimOutcome, CompleteOutcome, FireKind, HeartbeatOutcome, Store};
use super::{AgentSource, CronError, Job, RunOutcome, run_job};
use crate::clock::Clock;
use crate::identity;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::{Arc, Condvar, Mutex};

/// A pool thread running one fire; `done` is set when it has finished.
struct JobHandle {
    done: Arc<AtomicBool>,
    thread: crate::sync::thread::JoinHandle<Result<Option<FireReport>, String>>,
}

/// What [`Scheduler::daemon`] reports.
#[derive(Debug)]
pub enum DaemonEvent {
    /// A fire finished (or could not run: the message says why).
    Fire(Result<FireReport, String>),
    /// Ticks started failing (or now fail differently); the next attempt is in `retry_in`.
    Failing {
        message: String,
        failed_ticks: u32,
        retry_in: Duration,
    },
    /// A tick worked again after `failed_ticks` failures in a row.
    Recovered { failed_ticks: u32 },
}

/// Name of the tick lock file inside `<root>/cron/`.
pub(crate) const TICK_LOCK_FILE: &str = ".tick.lock";

/// Tunables of a scheduler (from `[cron]` in `kanban.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerSettings {
    /// Jobs running at once (at least 1).
    pub max_parallel: usize,
    /// Lease of a fire claim in seconds; heartbeated every third of it.
    pub claim_ttl: i64,
    /// Output files kept per job (0 keeps all).
    pub output_retention: usize,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        Self {
            max_parallel: 4,
            claim_ttl: 600,
            output_retention: 50,
        }
    }
}

impl SchedulerSettings {
    /// The settings of `[cron]`.
    pub fn from_config(cron: &crate::config::CronConfig) -> Self {
        Self {
            max_parallel: cron.max_parallel.max(1) as usize,
            claim_ttl: cron.claim_ttl_seconds.max(3),
            ..Self::default()
        }
    }
}

/// The result of one fire.
#[derive(Debug, Clone, Serialize)]
pub struct FireReport {
    pub job_id: String,
    pub fire_id: i64,
    /// The scheduled occurrence; `None` for a manual run.
    pub occurrence: Option<i64>,
    pub outcome: RunOutcome,
    /// False when the claim was lost before completion and the result was discarded.
    pub recorded: bool,
    pub output_path: Option<PathBuf>,
}

/// What one tick did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TickReport {
    /// True when another ticker held the home's tick lock.
    pub skipped: bool,
    /// Jobs whose expired claims were closed as failed runs.
    pub reaped: Vec<String>,
    /// Fires this tick ran.
    pub fired: Vec<FireReport>,
    /// Fires that failed to run (store errors), as messages.
    pub errors: Vec<String>,
}

/// A scheduler bound to one home.
pub struct Scheduler {
    root: PathBuf,
    owner: String,
    clock: std::sync::Arc<dyn Clock>,
    agents: std::sync::Arc<dyn AgentSource>,
    settings: SchedulerSettings,
    pool: Pool,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("root", &self.root)
            .field("owner", &self.owner)
            .field("settings", &self.settings)
            .finish()
    }
}

impl Scheduler {
    /// A scheduler for `root` with a fresh owner id (`<host>:<pid>:<nonce>`).
    pub fn new(
        root: &Path,
        clock: std::sync::Arc<dyn Clock>,
        agents: std::sync::Arc<dyn AgentSource>,
        settings: SchedulerSettings,
    ) -> Result<Self, CronError> {
        Ok(Self {
            root: root.to_owned(),
            owner: owner_id()?,
            clock,
            agents,
            settings,
            pool: Pool::new(settings.max_parallel),
        })
    }

    /// This scheduler's claim owner id.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// One pass: run every due job (up to `max_parallel` at once) and wait for them.
    pub fn tick(&self) -> Result<TickReport, CronError> {
        let mut report = TickReport::default();
        let handles = match self.start_due(&mut report, true)? {
            Some(handles) => handles,
            None => {
                report.skipped = true;
                return Ok(report);
            }
        };
        collect(handles, &mut report);
        Ok(report)
    }

    /// Runs ticks every `interval` until `stop` is set, then waits for the running jobs. Jobs run
    /// in the background pool across ticks; a tick never waits for a running job and starts only
    /// as many jobs as there are free slots. Each finished fire is passed to `on_event`.
    ///
    /// A tick that fails (the job store is unwritable: a full disk, a read-only file system, a
    /// lock held by another writer) never stops the daemon: it retries with the dispatcher's
    /// capped backoff and says so once per change ([`DaemonEvent::Failing`] when ticks start
    /// failing or fail differently, [`DaemonEvent::Recovered`] when one works again).
    pub fn daemon(
        &self,
        interval: Duration,
        stop: &std::sync::atomic::AtomicBool,
        mut on_event: impl FnMut(DaemonEvent),
    ) -> Result<(), CronError> {
        let mut running: Vec<JobHandle> = Vec::new();
        let mut streak = crate::proc::backoff::Streak::default();
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let mut report = TickReport::default();
            let mut pause = interval;
            match self.start_due(&mut report, false) {
                Ok(handles) => {
                    running.extend(handles.into_iter().flatten());
                    if let Some(failed_ticks) = streak.succeeded() {
                        on_event(DaemonEvent::Recovered { failed_ticks });
                    }
                }
                Err(e) => {
                    let message = crate::error_chain(&e);
                    let (failed_ticks, new) = streak.failed(message.clone());
                    pause = crate::proc::backoff::backoff(failed_ticks);
                    if new {
                        on_event(DaemonEvent::Failing {
                            message,
                            failed_ticks,
                            retry_in: pause,
                        });
                    }
                }
            }
            for message in report.errors {
                on_event(DaemonEvent::Fire(Err(message)));
            }
            let (finished, still): (Vec<_>, Vec<_>) = running
                .into_iter()
                .partition(|h| h.done.load(Ordering::SeqCst));
            running = still;
            for handle in finished {
                match join(handle) {
                    Ok(Some(fire)) => on_event(DaemonEvent::Fire(Ok(fire))),
                    Ok(None) => {}
                    Err(message) => on_event(DaemonEvent::Fire(Err(message))),
                }
            }
            let wake = std::time::Instant::now() + pause;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let left = wake.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                std::thread::sleep(left.min(Duration::from_millis(100)));
            }
        }
        for handle in running {
            if let Ok(Some(fire)) = join(handle) {
                on_event(DaemonEvent::Fire(Ok(fire)));
            }
        }
        Ok(())
    }

    /// Takes the tick lock, reaps expired claims and starts a pool thread per due job. `None`
    /// when another ticker holds the lock. With `wait_for_slot` false, stops at a full pool.
    #[allow(clippy::type_complexity)]
    fn start_due(
        &self,
        report: &mut TickReport,
        wait_for_slot: bool,
    ) -> Result<Option<Vec<JobHandle>>, CronError> {
        let Some(lock) = TickLock::try_acquire(&self.root)? else {
            return Ok(None);
        };
        let mut store = Store::open(&self.root)?;
        let now = self.clock.now();
        report.reaped = store.reap_expired_claims(now)?;
        let due = store.due(now)?;
        drop(store);
        let mut handles = Vec::new();
        for job in due {
            let Some(occurrence) = job.next_run_at else {
                continue;
            };
            let slot = if wait_for_slot {
                self.pool.acquire(&job.id)
            } else {
                match self.pool.try_acquire(&job.id) {
                    Acquire::Slot(slot) => Some(slot),
                    Acquire::Full => break,
                    Acquire::InFlight => None,
                }
            };
            let Some(slot) = slot else { continue };
            let runner = self.runner();
            let kind = FireKind::Scheduled { occurrence };
            let job_id = job.id.clone();
            let done = Arc::new(AtomicBool::new(false));
            let finished = done.clone();
            let spawned = identity::spawn("cron-job", move || {
                let _slot = slot;
                let result = runner
                    .fire(&job_id, kind)
                    .map_err(|e| crate::error_chain(&e));
                finished.store(true, Ordering::SeqCst);
                result
            });
            match spawned {
                Ok(thread) => handles.push(JobHandle { done, thread }),
                Err(e) => report
                    .errors
                    .push(format!("job {}: {}", job.id, CronError::Thread(e))),
            }
        }
        drop(lock);
        Ok(Some(handles))
    }

    /// Runs job `reference` (id or name) now, on the calling thread, under a manual fire claim
    /// (the schedule and the repeat count are left alone). Refused while the job is running.
    pub fn run_now(&self, reference: &str) -> Result<FireReport, CronError> {
        let job = Store::open(&self.root)?.resolve(reference)?;
        match self.runner().fire(&job.id, FireKind::Manual)? {
            Some(report) => Ok(report),
            None => Err(CronError::NotDue { id: job.id }),
        }
    }

    /// Runs one scheduled occurrence of `job` on the calling thread, without the tick lock (for
    /// callers that drive the fire claims directly, such as tests of two racing schedulers).
    pub fn fire_scheduled(&self, job: &Job) -> Result<Option<FireReport>, CronError> {
        match job.next_run_at {
            Some(occurrence) => self
                .runner()
                .fire(&job.id, FireKind::Scheduled { occurrence }),
            None => Ok(None),
        }
    }

    fn runner(&self) -> Runner {
        Runner {
            root: self.root.clone(),
            owner: self.owner.clone(),
            clock: self.clock.clone(),
            agents: self.agents.clone(),
            settings: self.settings,
        }
    }
}

fn join(handle: JobHandle) -> Result<Option<FireReport>, String> {
    handle
        .thread
        .join()
        .unwrap_or_else(|_| Err("a cron pool thread panicked".to_owned()))
}

fn collect(handles: Vec<JobHandle>, report: &mut TickReport) {
    for handle in handles {
        match join(handle) {
            Ok(Some(fire)) => report.fired.push(fire),
            Ok(None) => {}
            Err(message) => report.errors.push(message),
        }
    }
}

/// Everything a pool thread needs to run one fire.
struct Runner {
    root: PathBuf,
    owner: String,
    clock: std::sync::Arc<dyn Clock>,
    agents: std::sync::Arc<dyn AgentSource>,
    settings: SchedulerSettings,
}

impl Runner {
    /// Claim, heartbeat, run, save, complete. `Ok(None)` when the claim was not granted because
    /// the occurrence is no longer due; an error when another runner holds the job.
    fn fire(&self, job_id: &str, kind: FireKind) -> Result<Option<FireReport>, CronError> {
        let ttl = self.settings.claim_ttl;
        let mut store = Store::open(&self.root)?;
        let claimed = match store.claim_fire(job_id, kind, &self.owner, self.clock.now(), ttl)? {
            ClaimOutcome::Claimed(c) => *c,
            ClaimOutcome::NotDue => return Ok(None),
            ClaimOutcome::Gone => {
                return match kind {
                    FireKind::Manual => Err(CronError::NotFound {
                        reference: job_id.to_owned(),
                    }),
                    FireKind::Scheduled { .. } => Ok(None),
                };
            }
            ClaimOutcome::Busy { owner } => {
                return match kind {
                    FireKind::Manual => Err(CronError::AlreadyRunning {
                        id: job_id.to_owned(),
                        owner,
                    }),
                    FireKind::Scheduled { .. } => Ok(None),
                };
            }
        };
        let heartbeat = Heartbeat::start(&self.root, job_id, &self.owner, self.clock.clone(), ttl)?;
        let job = with_default_workdir(&self.root, &claimed.job);
        let outcome = run_job(&job, self.agents.as_ref(), self.clock.as_ref());
        let lost = heartbeat.finish();
        let now = self.clock.now();
        let output_path = if lost {
            None
        } else {
            save_output(
                &self.root,
                job_id,
                claimed.fire_id,
                now,
                &outcome.output,
                self.settings.output_retention,
            )
            .ok()
        };
        let recorded = store.complete_fire(
            job_id,
            &self.owner,
            claimed.fire_id,
            &outcome,
            output_path.as_deref(),
            now,
        )? == CompleteOutcome::Recorded;
        Ok(Some(FireReport {
            job_id: job_id.to_owned(),
            fire_id: claimed.fire_id,
            occurrence: match kind {
                FireKind::Scheduled { occurrence } => Some(occurrence),
                FireKind::Manual => None,
            },
            outcome,
            recorded,
            output_path,
        }))
    }
}

/// `<host>:<pid>:<nonce>`: unique per scheduler instance.
pub(crate) fn owner_id() -> Result<String, CronError> {
    let uname = rustix::system::uname();
    let host = uname.nodename().to_string_lossy().into_owned();
    let pid = rustix::process::getpid().as_raw_nonzero();
    Ok(format!("{host}:{pid}:{}", store::random_hex(4)?))
}

/// The home's tick lock, held while alive.
struct TickLock {
    _file: File,
}

impl TickLock {
    fn try_acquire(root: &Path) -> Result<Option<Self>, CronError> {
        let dir = store::cron_dir(root);
        store::create_private_dir(&dir)?;
        let path = dir.join(TICK_LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| CronError::Io {
                path: path.clone(),
                source,
            })?;
        match crate::proc::lock::try_exclusive(&file) {
            Ok(true) => Ok(Some(Self { _file: file })),
            Ok(false) => Ok(None),
            Err(source) => Err(CronError::Io { path, source }),
        }
    }
}

/// Saves a run's output document as `<root>/cron/output/<job>/<YYYY-MM-DD_HH-MM-SS>-<fire>.md`
/// (written to a temporary file, then renamed; mode 0600) and keeps the newest `retention`.
pub(crate) fn save_output(
    root: &Path,
    job_id: &str,
    fire_id: i64,
    now: i64,
    doc: &str,
    retention: usize,
) -> Result<PathBuf, CronError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    if job_id.is_empty() || !job_id.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(CronError::Corrupt {
            id: job_id.to_owned(),
            message: "a job id must be a single safe path component".to_owned(),
        });
    }
    let dir = output_dir(root, job_id);
    store::create_private_dir(&dir)?;
    let stamp = jiff::Timestamp::from_second(now)
        .map(|t| t.strftime("%Y-%m-%d_%H-%M-%S").to_string())
        .unwrap_or_else(|_| now.to_string());
    let path = dir.join(format!("{stamp}-{fire_id}.md"));
    let tmp = dir.join(format!(".{stamp}-{fire_id}.md.tmp"));
    let io = |p: &Path| {
        let p = p.to_owned();
        move |source| CronError::Io { path: p, source }
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io(&tmp))?;
    file.write_all(doc.as_bytes()).map_err(io(&tmp))?;
    file.sync_all().map_err(io(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    if retention > 0 {
        prune_outputs(&dir, retention);
    }
    Ok(path)
}

/// `<root>/cron/work/<job>`: where a job given no `--workdir` runs (never the directory the
/// scheduler or `kanban cron run` was started from).
pub(crate) fn work_dir(root: &Path, job_id: &str) -> PathBuf {
    store::cron_dir(root).join("work").join(job_id)
}

/// `job` with its workdir, the job's own [`work_dir`] (created) when it names none. A folder
/// that cannot be created is still named: the run then fails saying the workdir is unusable.
fn with_default_workdir(root: &Path, job: &Job) -> Job {
    let mut job = job.clone();
    if job.workdir.is_none() {
        let dir = work_dir(root, &job.id);
        let _ = std::fs::create_dir_all(&dir);
        job.workdir = Some(dir);
    }
    job
}

/// `<root>/cron/output/<job>`.
pub(crate) fn output_dir(root: &Path, job_id: &str) -> PathBuf {
    store::cron_dir(root).join("output").join(job_id)
}

fn prune_outputs(dir: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    let excess = files.len().saturating_sub(keep);
    for old in &files[..excess] {
        let _ = std::fs::remove_file(old);
    }
}

/// A bounded set of run slots; a job holds at most one slot per process (its in-flight guard).
/// Built on the `crate::sync` primitives so a loom model can check it.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    state: Mutex<PoolState>,
    changed: Condvar,
    limit: usize,
}

#[derive(Default)]
struct PoolState {
    running: usize,
    in_flight: BTreeSet<String>,
}

/// Result of [`Pool::try_acquire`].
pub enum Acquire {
    /// A slot, released when dropped.
    Slot(Slot),
    /// Every slot is taken.
    Full,
    /// The job already runs in this process.
    InFlight,
}

impl Pool {
    pub fn new(limit: usize) -> Self {
        Self {
            inner: Arc::new(PoolInner {
                state: Mutex::new(PoolState::default()),
                changed: Condvar::new(),
                limit: limit.max(1),
            }),
        }
    }

    fn lock(&self) -> crate::sync::MutexGuard<'_, PoolState> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for `job` if one is free and the job is not already running here.
    pub fn try_acquire(&self, job: &str) -> Acquire {
        let mut state = self.lock();
        if state.in_flight.contains(job) {
            return Acquire::InFlight;
        }
        if state.running >= self.inner.limit {
            return Acquire::Full;
        }
        state.running += 1;
        state.in_flight.insert(job.to_owned());
        Acquire::Slot(Slot {
            pool: self.clone(),
            job: job.to_owned(),
        })
    }

    /// Waits for a free slot; `None` when the job is already running in this process.
    pub fn acquire(&self, job: &str) -> Option<Slot> {
        let mut state = self.lock();
        loop {
            if state.in_flight.contains(job) {
                return None;
            }
            if state.running < self.inner.limit {
                state.running += 1;
                state.in_flight.insert(job.to_owned());
                return Some(Slot {
                    pool: self.clone(),
                    job: job.to_owned(),
                });
            }
            state = self
                .inner
                .changed
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Slots in use.
    pub fn running(&self) -> usize {
        self.lock().running
    }
}

/// A held run slot; released on drop (also when the job's thread panics).
pub struct Slot {
    pool: Pool,
    job: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.pool.lock();
        state.running = state.running.saturating_sub(1);
        state.in_flight.remove(&self.job);
        drop(state);
        self.pool.inner.changed.notify_all();
    }
}

/// The heartbeat of one fire claim, on its own thread.
struct Heartbeat {
    stop: Arc<(Mutex<bool>, Condvar)>,
    lost: Arc<AtomicBool>,
    handle: Option<crate::sync::thread::JoinHandle<()>>,
}

impl Heartbeat {
    fn start(
        root: &Path,
        job_id: &str,
        owner: &str,
        clock: std::sync::Arc<dyn Clock>,
        ttl: i64,
    ) -> Result<Self, CronError> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let lost = Arc::new(AtomicBool::new(false));
        let period = Duration::from_secs(((ttl / 3).max(1)) as u64);
        let (root, job_id, owner) = (root.to_owned(), job_id.to_owned(), owner.to_owned());
        let (stop2, lost2) = (stop.clone(), lost.clone());
        let handle = identity::spawn("cron-heartbeat", move || {
            let mut store: Option<Store> = None;
            let mut last_ok = clock.now();
            loop {
                {
                    let (flag, cv) = &*stop2;
                    let mut guard = flag
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if !*guard {
                        // A spurious wake-up only makes one heartbeat early.
                        guard = cv
                            .wait_timeout(guard, period)
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .0;
                    }
                    if *guard {
                        return;
                    }
                }
                let now = clock.now();
                if store.is_none() {
                    store = Store::open(&root).ok();
                }
                let beat = store
                    .as_mut()
                    .map(|s| s.heartbeat_fire(&job_id, &owner, now, ttl));
                match beat {
                    Some(Ok(HeartbeatOutcome::Extended)) => last_ok = now,
                    Some(Ok(HeartbeatOutcome::Lost)) => {
                        lost2.store(true, Ordering::SeqCst);
                        return;
                    }
                    Some(Err(_)) | None => {
                        if now - last_ok >= ttl {
                            lost2.store(true, Ordering::SeqCst);
                            return;
                        }
                    }
                }
            }
        })
        .map_err(CronError::Thread)?;
        Ok(Self {
            stop,
            lost,
            handle: Some(handle),
        })
    }

    /// Stops the heartbeat; true when the claim was lost while the job ran.
    fn finish(mut self) -> bool {
        self.stop_thread();
        self.lost.load(Ordering::SeqCst)
    }

    fn stop_thread(&mut self) {
        {
            let (flag, cv) = &*self.stop;
            *flag
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
            cv.notify_all();
        }
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_bounds_running_jobs_and_guards_in_flight_ids() {
        let pool = Pool::new(2);
        let a = match pool.try_acquire("a") {
            Acquire::Slot(s) => s,
            _ => panic!("slot expected"),
        };
        assert!(matches!(pool.try_acquire("a"), Acquire::InFlight));
        let _b = pool.acquire("b").unwrap();
        assert!(matches!(pool.try_acquire("c"), Acquire::Full));
        assert_eq!(pool.running(), 2);
        drop(a);
        assert!(matches!(pool.try_acquire("c"), Acquire::Slot(_)));
    }

    #[test]
    fn output_files_are_saved_and_pruned() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            save_output(dir.path(), "abcdef012345", i, 1_000 + i, "doc", 3).unwrap();
        }
        let files = std::fs::read_dir(output_dir(dir.path(), "abcdef012345"))
            .unwrap()
            .count();
        assert_eq!(files, 3);
        assert!(save_output(dir.path(), "../x", 1, 1, "doc", 3).is_err());
    }

    #[test]
    fn an_output_file_is_named_by_its_utc_time_and_fire() {
        let dir = tempfile::tempdir().unwrap();
        let path = save_output(dir.path(), "abcdef012345", 7, 1_764_525_160, "doc", 3).unwrap();
        assert_eq!(
            path.file_name().unwrap().to_str().unwrap(),
            "2025-11-30_17-52-40-7.md"
        );
        assert_eq!(crate::cron::iso(1_764_525_160), "2025-11-30T17:52:40Z");
    }
}
