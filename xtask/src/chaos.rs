//! `cargo xtask chaos [--tasks N] [--kills N] [--seed S]`: the fault run, on real processes.
//!
//! It builds `kanban`, makes a temporary home (on a small tmpfs when run as root, so that the disk
//! can be filled), creates the tasks — half up front, the rest while the faults happen, each with
//! an idempotency key and counted only once `kanban create` acknowledged it — and runs **two
//! dispatchers on one board**. Then, at random moments drawn from `--seed`, it injects faults
//! until `--kills` processes were killed:
//!
//! * SIGKILL of a dispatcher (a new one replaces it at once, so two always compete);
//! * SIGKILL of a worker, and of an agent (a process in a worker's process group);
//! * a dispatcher that SIGKILLs itself between its claim commit and the spawn (the hidden
//!   `kanban dispatch --fault-die-before-spawn 1`);
//! * a board locked by another writer (`BEGIN IMMEDIATE` held past the busy timeout);
//! * an operator's `kanban reclaim` of a running task (its worker must stop before a successor);
//! * a full disk (a ballast file fills the tmpfs for a moment; skipped with a message when not
//!   root or when no tmpfs can be mounted).
//!
//! Beside the dispatchers runs an **external claimer**, as a user's own worker would: it takes a
//! ready task with `kanban claim`, heartbeats it with the claim's identity for a moment and
//! completes it. Its claims must never be stolen: a dispatcher that released one (as "never
//! spawned", say) and spawned a worker for it is a duplicate, and so is a refused completion.
//!
//! After the faults it acts as an operator once: tasks the systemic crash breaker blocked (several
//! workers dying with one error in one tick — what a full disk does) are unblocked, and counted.
//!
//! Throughout, it samples the live `kanban worker` processes of the home and records any task that
//! has two *active* workers at once (a worker is active when its run row carries its pid). At the
//! end it waits for every acknowledged task to be done, stops the dispatchers and checks: every
//! task present (`lost`), done (`stuck`) and completed exactly once, never two active workers
//! (`duplicates`), `kanban fsck` clean and `PRAGMA integrity_check` = ok. It prints ONE summary
//! line and exits non-zero when an invariant fails (the home is then kept for inspection).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::chaos_store::{Cell, Param, Store};

/// What `cargo xtask chaos` runs with.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub tasks: u32,
    pub kills: u32,
    pub seed: u64,
    /// The board lives in a PostgreSQL database of a throwaway server (`--postgres`) instead of
    /// the home's SQLite file.
    pub postgres: bool,
    /// Owner admission (`[dispatch] mode = "owner"`, `--owner`): the faults also kill owners
    /// and submitters, and the managed workers are the workers.
    pub owner: bool,
}

/// The short run (`.ci/run`): a few dozen tasks, a dozen kills.
pub const DEFAULT_TASKS: u32 = 24;
pub const DEFAULT_KILLS: u32 = 12;

/// How long the run may take to finish every task once the faults stop.
const RECOVERY_LIMIT: Duration = Duration::from_secs(240);
/// How long the fault phase may last at most (a guard against a run that cannot progress).
const FAULT_PHASE_LIMIT: Duration = Duration::from_secs(1800);
/// The busy timeout every `kanban` process of the run uses (the lock fault holds longer).
const BUSY_TIMEOUT_MS: u64 = 1000;
/// Size of the tmpfs the home lives on when run as root.
const TMPFS_SIZE: &str = "96m";

/// Identity and location knobs that must not leak from the caller's environment into the run.
const SCRUB: &[&str] = &[
    "HERMES_KANBAN_TASK",
    "HERMES_KANBAN_RUN_ID",
    "HERMES_KANBAN_CLAIM_LOCK",
    "HERMES_KANBAN_WORKSPACE",
    "HERMES_KANBAN_WORKSPACES_ROOT",
    "HERMES_KANBAN_BOARD",
    "HERMES_KANBAN_DB",
    "HERMES_KANBAN_HOME",
    "HERMES_KANBAN_BRANCH",
    "HERMES_KANBAN_GOAL_MODE",
    "HERMES_KANBAN_GOAL_MAX_TURNS",
    "HERMES_KANBAN_CLAIM_TTL_SECONDS",
    "HERMES_KANBAN_CRASH_GRACE_SECONDS",
    "HERMES_KANBAN_RATE_LIMIT_COOLDOWN_SECONDS",
    "HERMES_DELEGATED_CHILD_CONTEXT",
    "HERMES_HOME",
];

const CONFIG: &str = "\
[dispatch]
max_spawn = 4
failure_limit = 1000
claim_ttl_seconds = 20
crash_grace_seconds = 1
rate_limit_cooldown_seconds = 1
kill_wait_seconds = 0.5
interval_seconds = 0.5
default_profile = \"work\"

[profiles.work]
agent = \"builtin:shell\"
";

/// splitmix64: a small, well-mixed generator; the whole run follows from `--seed`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo, hi))
    }
}

#[derive(Debug, Default)]
struct Counts {
    dispatcher_kills: u32,
    worker_kills: u32,
    agent_kills: u32,
    before_spawn_kills: u32,
    locks: u32,
    full_disks: u32,
    reclaims: u32,
    /// Tasks the systemic crash breaker blocked that the run unblocked as an operator would.
    systemic_unblocks: u32,
    /// Tasks the external claimer claimed and completed itself.
    external_completions: u32,
    /// Owner mode: owners (`kanban owner serve`) and submitters (`kanban submit`) killed.
    owner_kills: u32,
    submitter_kills: u32,
}

impl Counts {
    fn kills(&self) -> u32 {
        self.dispatcher_kills
            + self.worker_kills
            + self.agent_kills
            + self.before_spawn_kills
            + self.owner_kills
            + self.submitter_kills
    }
    fn faults(&self) -> u32 {
        self.locks + self.full_disks + self.reclaims
    }
}

/// The external claimer's claim in progress: `kanban claim`'s answer and how many more
/// heartbeats it gives before completing.
#[derive(Debug, Clone)]
struct ExternalClaim {
    task: String,
    run: i64,
    lock: String,
    beats_left: u64,
}

/// A `kanban worker` process of this run.
#[derive(Debug, Clone)]
struct WorkerProc {
    pid: i32,
    task: String,
    run: i64,
}

struct Run {
    bin: PathBuf,
    dir: PathBuf,
    home: PathBuf,
    db: PathBuf,
    rng: Rng,
    counts: Counts,
    dispatchers: Vec<Child>,
    faulty: Vec<Child>,
    next_log: u32,
    /// Acknowledged tasks (id by creation index).
    acked: BTreeMap<u32, String>,
    /// Faults attempted so far.
    attempts: usize,
    /// Tasks seen with two active workers at once.
    duplicates: BTreeSet<String>,
    /// The external claimer's claim in progress.
    external: Option<ExternalClaim>,
    /// The PostgreSQL board's URL (`--postgres`); `None` for the home's SQLite file.
    pg_url: Option<String>,
    /// Owner admission (`--owner`).
    owner: bool,
    tmpfs: bool,
}

/// Runs the fault suite from the workspace at `root`.
pub fn run(root: &Path, options: Options) -> anyhow::Result<()> {
    if options.tasks == 0 {
        bail!("chaos: --tasks must be at least 1");
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "kanban-runtime",
            "--bin",
            "kanban",
        ])
        .current_dir(root)
        .status()
        .context("cannot run `cargo build`")?;
    if !status.success() {
        bail!("chaos: building kanban failed ({status})");
    }
    let target = crate::workspace::Workspace::discover(Some(root))?
        .target_dir()?
        .to_path_buf();
    let built = target.join("debug").join("kanban");
    // The figures leave the build out.
    let started = Instant::now();
    let dir = target
        .join("chaos")
        .join(format!("seed-{}-{}", options.seed, std::process::id()));
    let home = dir.join("home");
    std::fs::create_dir_all(&home).with_context(|| format!("cannot create {}", home.display()))?;
    // A copy, so that a rebuild during a long run does not pull the binary from under it.
    let bin = dir.join("kanban");
    std::fs::copy(&built, &bin)
        .with_context(|| format!("cannot copy {} to {}", built.display(), bin.display()))?;
    let tmpfs = mount_tmpfs(&home);
    // `--postgres`: a throwaway server for the run (stopped when it is dropped, after the run).
    let cluster = if options.postgres {
        Some(kanban_pgwire::cluster::TestCluster::start().context("chaos: a PostgreSQL server")?)
    } else {
        None
    };
    let pg_url = match &cluster {
        Some(c) => Some(c.url(&c.fresh_database("chaos").context("chaos: a database")?)),
        None => None,
    };
    let mut run = Run {
        bin,
        db: home.join("kanban.db"),
        dir: dir.clone(),
        home,
        rng: Rng(options.seed),
        counts: Counts::default(),
        dispatchers: Vec::new(),
        faulty: Vec::new(),
        next_log: 0,
        acked: BTreeMap::new(),
        attempts: 0,
        duplicates: BTreeSet::new(),
        external: None,
        pg_url,
        owner: options.owner,
        tmpfs,
    };
    let result = run.go(options, started);
    run.stop_all();
    let failed = !matches!(&result, Ok(summary) if summary.ok);
    if run.tmpfs {
        if failed {
            // The home lives on the tmpfs: keep a copy of the board and logs for inspection.
            let _ = Command::new("cp")
                .arg("-a")
                .arg(&run.home)
                .arg(dir.join("home-copy"))
                .status();
        }
        let _ = Command::new("umount").arg(&run.home).status();
    }
    match result {
        Ok(summary) => {
            println!("{}", summary.line);
            if summary.ok {
                let _ = std::fs::remove_dir_all(&dir);
                Ok(())
            } else {
                bail!(
                    "chaos: an invariant failed ({}); the run is kept in {}",
                    summary.failures.join("; "),
                    dir.display()
                )
            }
        }
        Err(e) => Err(e.context(format!("chaos run kept in {}", dir.display()))),
    }
}

/// Mounts a small tmpfs on `home` when running as root; says why not otherwise.
fn mount_tmpfs(home: &Path) -> bool {
    if !rustix::process::geteuid().is_root() {
        eprintln!("chaos: full-disk fault skipped (not root: cannot mount a small tmpfs)");
        return false;
    }
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={TMPFS_SIZE}"), "tmpfs"])
        .arg(home)
        .output();
    match out {
        Ok(out) if out.status.success() => true,
        Ok(out) => {
            eprintln!(
                "chaos: full-disk fault skipped (cannot mount a tmpfs: {})",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            false
        }
        Err(e) => {
            eprintln!("chaos: full-disk fault skipped (cannot run mount: {e})");
            false
        }
    }
}

struct Summary {
    line: String,
    ok: bool,
    failures: Vec<String>,
}

impl Run {
    fn kanban(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        for key in SCRUB {
            cmd.env_remove(key);
        }
        cmd.env("HERMES_KANBAN_BUSY_TIMEOUT_MS", BUSY_TIMEOUT_MS.to_string())
            .arg("--home")
            .arg(&self.home)
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    fn log_file(&mut self, what: &str) -> anyhow::Result<(File, File)> {
        self.next_log += 1;
        let path = self.dir.join(format!("{what}-{}.log", self.next_log));
        let file =
            File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok((file.try_clone()?, file))
    }

    fn start_dispatcher(&mut self, extra: &[&str]) -> anyhow::Result<Child> {
        let (out, err) = self.log_file("dispatch")?;
        let mut args = vec!["dispatch", "--interval", "0.5"];
        args.extend_from_slice(extra);
        self.kanban(&args)
            .stdout(out)
            .stderr(err)
            .spawn()
            .context("cannot start a dispatcher")
    }

    fn body(&mut self) -> String {
        format!("sleep 0.{:02}; echo ok", self.rng.range(5, 60))
    }

    /// `kanban create` of task `index`; `Ok(false)` when it was not acknowledged (a fault).
    fn create(&mut self, index: u32) -> anyhow::Result<bool> {
        let body = self.body();
        let key = format!("chaos-{index}");
        let title = format!("chaos task {index}");
        let out = self
            .kanban(&[
                "--json",
                "create",
                &title,
                "--body",
                &body,
                "--idempotency-key",
                &key,
            ])
            .output()
            .context("cannot run kanban create")?;
        if !out.status.success() {
            return Ok(false);
        }
        let value: serde_json::Value = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("kanban create printed {:?}", out.stdout))?;
        let Some(id) = value["id"].as_str() else {
            bail!("kanban create printed no id: {value}");
        };
        self.acked.insert(index, id.to_owned());
        Ok(true)
    }

    fn connect(&self) -> anyhow::Result<Store> {
        match &self.pg_url {
            Some(url) => Store::postgres(url),
            None => Store::sqlite(&self.db),
        }
    }

    fn go(&mut self, options: Options, started: Instant) -> anyhow::Result<Summary> {
        let mut config = CONFIG.to_owned();
        if self.owner {
            config = config.replace("[dispatch]\n", "[dispatch]\nmode = \"owner\"\n");
        }
        if let Some(url) = &self.pg_url {
            config.push_str(&format!("\n[boards.default]\nurl = \"{url}\"\n"));
        }
        std::fs::write(self.home.join("kanban.toml"), config)?;
        let init = self.kanban(&["init"]).output()?;
        if !init.status.success() {
            bail!(
                "kanban init failed: {}",
                String::from_utf8_lossy(&init.stderr)
            );
        }
        let upfront = options.tasks.div_ceil(2);
        for i in 0..upfront {
            if !self.create(i)? {
                bail!("kanban create failed before any fault");
            }
        }
        for _ in 0..2 {
            let child = self.start_dispatcher(&[])?;
            self.dispatchers.push(child);
        }
        let conn = self.connect()?;
        let mut next_task = upfront;
        let phase_start = Instant::now();
        let mut last_fault_end = Instant::now();
        while self.counts.kills() < options.kills || next_task < options.tasks {
            if phase_start.elapsed() > FAULT_PHASE_LIMIT {
                bail!("the fault phase did not finish within {FAULT_PHASE_LIMIT:?}");
            }
            std::thread::sleep(self.rng.millis(30, 160));
            self.sample(&conn)?;
            self.external_step(&conn)?;
            self.reap_faulty();
            if next_task < options.tasks {
                for _ in 0..self.rng.range(1, 2) {
                    if next_task < options.tasks && self.create(next_task)? {
                        next_task += 1;
                    }
                }
            }
            if self.counts.kills() >= options.kills {
                continue;
            }
            self.fault(&conn)?;
            last_fault_end = Instant::now();
            self.keep_two_dispatchers()?;
        }
        // Faults are over: a dispatcher still waiting to fault is killed too.
        for mut child in std::mem::take(&mut self.faulty) {
            if kill(child.id() as i32) {
                self.counts.dispatcher_kills += 1;
            }
            let _ = child.wait();
        }
        self.keep_two_dispatchers()?;
        // Recovery: every acknowledged task done.
        let deadline = Instant::now() + RECOVERY_LIMIT;
        let ids: Vec<String> = self.acked.values().cloned().collect();
        let recovered = loop {
            self.sample(&conn)?;
            self.external_step(&conn)?;
            self.keep_two_dispatchers()?;
            self.unblock_systemic(&conn)?;
            let not_done = count_not_done(&conn, &ids)?;
            if not_done == 0 {
                break Some(last_fault_end.elapsed());
            }
            if Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        self.stop_dispatchers();
        self.wait_workers_gone(&conn)?;
        self.check(&conn, options, recovered, started)
    }

    /// One step of the external claimer: claim a ready task (now and then), else heartbeat the
    /// claim it holds, and complete it after its last heartbeat. While it holds a claim, a
    /// `kanban worker` of that task, or a refused heartbeat or completion, is a stolen claim.
    fn external_step(&mut self, conn: &Store) -> anyhow::Result<()> {
        let Some(claim) = self.external.clone() else {
            if self.rng.range(0, 1) != 0 {
                return Ok(());
            }
            let ready: Option<String> = conn
                .value(
                    "SELECT id FROM tasks WHERE status = 'ready' AND claim_lock IS NULL \
                     ORDER BY created_at DESC LIMIT 1",
                    &[],
                )?
                .and_then(|c| c.text());
            let Some(task) = ready else {
                return Ok(());
            };
            let out = self.kanban(&["--json", "claim", &task]).output()?;
            if !out.status.success() {
                // Lost to a dispatcher, or a fault (a locked board, a full disk).
                return Ok(());
            }
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                .with_context(|| format!("kanban claim printed {:?}", out.stdout))?;
            let (Some(run), Some(lock)) = (v["run_id"].as_i64(), v["claim_lock"].as_str()) else {
                bail!("kanban claim printed no run or lock: {v}");
            };
            let beats_left = self.rng.range(8, 30);
            self.external = Some(ExternalClaim {
                task,
                run,
                lock: lock.to_owned(),
                beats_left,
            });
            return Ok(());
        };
        if self.workers()?.iter().any(|w| w.task == claim.task) {
            self.duplicates.insert(claim.task.clone());
        }
        let verb: &[&str] = if claim.beats_left == 0 {
            &["complete", "--summary", "done by the external claimer"]
        } else {
            &["heartbeat"]
        };
        let out = self
            .kanban(verb)
            .env("HERMES_KANBAN_TASK", &claim.task)
            .env("HERMES_KANBAN_RUN_ID", claim.run.to_string())
            .env("HERMES_KANBAN_CLAIM_LOCK", &claim.lock)
            .output()?;
        let still_ours: Option<String> = conn
            .value(
                "SELECT claim_lock FROM tasks WHERE id = ?1 AND current_run_id = ?2",
                &[Param::Text(&claim.task), Param::Int(claim.run)],
            )?
            .and_then(|c| c.text());
        if out.status.success() {
            if claim.beats_left == 0 {
                self.counts.external_completions += 1;
                self.external = None;
            } else if let Some(c) = self.external.as_mut() {
                c.beats_left -= 1;
            }
        } else if still_ours.as_deref() != Some(claim.lock.as_str()) {
            // Refused because the claim is no longer ours: somebody took it.
            let status = task_status(conn, &claim.task)?;
            if status.as_deref() != Some("done") || claim.beats_left > 0 {
                self.duplicates.insert(claim.task.clone());
            }
            self.external = None;
        }
        // Otherwise a fault refused it (a locked board, a full disk): tried again next step.
        Ok(())
    }

    /// What an operator does once the environment is healthy again: `kanban unblock` the tasks
    /// the systemic crash breaker parked (several workers dying alike in one tick — a full disk
    /// does that — blocks their tasks, sticky, until an operator unblocks them).
    fn unblock_systemic(&mut self, conn: &Store) -> anyhow::Result<()> {
        let sql = format!(
            "SELECT t.id FROM tasks t WHERE t.status = 'blocked' AND EXISTS \
             (SELECT 1 FROM task_events e WHERE e.task_id = t.id AND e.kind = 'gave_up' \
              AND {} = 'systemic') ORDER BY t.id",
            conn.json_field("e.payload", "limit_source")?
        );
        let ids: Vec<String> = conn
            .rows(&sql, &[])?
            .into_iter()
            .filter_map(|row| row.first().and_then(Cell::text))
            .collect();
        for id in ids {
            if self.kanban(&["unblock", &id]).output()?.status.success() {
                self.counts.systemic_unblocks += 1;
            }
        }
        Ok(())
    }

    /// One fault (kills count towards `--kills`): the first ones go through every kind once, so
    /// that even the short run covers each; then at random.
    fn fault(&mut self, conn: &Store) -> anyhow::Result<()> {
        /// A roll in each kind's range below: lock, full disk, between claim and spawn, worker,
        /// agent, operator reclaim, dispatcher.
        const EACH_KIND_ONCE: [u64; 7] = [72, 82, 60, 0, 35, 90, 95];
        /// Owner mode: an owner and a submitter too (in the agents' range).
        const EACH_KIND_ONCE_OWNER: [u64; 8] = [72, 82, 60, 0, 35, 48, 90, 95];
        let workers = self.workers()?;
        let once: &[u64] = if self.owner {
            &EACH_KIND_ONCE_OWNER
        } else {
            &EACH_KIND_ONCE
        };
        let roll = match once.get(self.attempts) {
            Some(roll) => *roll,
            None => self.rng.range(0, 99),
        };
        self.attempts += 1;
        match roll {
            0..=34 if !workers.is_empty() => {
                let w = &workers[self.rng.range(0, workers.len() as u64 - 1) as usize];
                if kill(w.pid) {
                    self.counts.worker_kills += 1;
                }
            }
            35..=47 if self.owner => {
                let owners = self.processes(&["owner", "serve"])?;
                if !owners.is_empty() {
                    let pid = owners[self.rng.range(0, owners.len() as u64 - 1) as usize];
                    if kill(pid) {
                        self.counts.owner_kills += 1;
                    }
                }
            }
            48..=59 if self.owner => {
                let submitters = self.processes(&["submit"])?;
                if !submitters.is_empty() {
                    let pid = submitters[self.rng.range(0, submitters.len() as u64 - 1) as usize];
                    if kill(pid) {
                        self.counts.submitter_kills += 1;
                    }
                }
            }
            35..=59 if !workers.is_empty() => {
                let agents = agents_of(&workers);
                if !agents.is_empty() {
                    let pid = agents[self.rng.range(0, agents.len() as u64 - 1) as usize];
                    if kill(pid) {
                        self.counts.agent_kills += 1;
                    }
                }
            }
            60..=71 if self.faulty.is_empty() => {
                let child = self.start_dispatcher(&["--fault-die-before-spawn", "1"])?;
                self.faulty.push(child);
            }
            72..=81 => {
                let hold = self.rng.millis(300, 2 * BUSY_TIMEOUT_MS);
                self.connect()?.hold_lock(hold)?;
                self.counts.locks += 1;
            }
            82..=89 if self.tmpfs => {
                self.fill_disk()?;
                self.counts.full_disks += 1;
            }
            90..=94 if !workers.is_empty() => {
                // An operator takes a running task back: its worker must be stopped before a
                // successor starts.
                let w = &workers[self.rng.range(0, workers.len() as u64 - 1) as usize];
                let task = w.task.clone();
                let out = self.kanban(&["reclaim", &task]).output()?;
                if out.status.success() {
                    self.counts.reclaims += 1;
                }
            }
            _ => {
                // A dispatcher; a fresh one takes its place right away.
                if !self.dispatchers.is_empty() {
                    let i = self.rng.range(0, self.dispatchers.len() as u64 - 1) as usize;
                    let mut child = self.dispatchers.remove(i);
                    if kill(child.id() as i32) {
                        self.counts.dispatcher_kills += 1;
                    }
                    let _ = child.wait();
                }
            }
        }
        self.sample(conn)?;
        Ok(())
    }

    /// Fills the tmpfs with a ballast file, holds it a moment, frees it.
    fn fill_disk(&mut self) -> anyhow::Result<()> {
        let path = self.home.join("ballast");
        let mut file = File::create(&path)?;
        let chunk = vec![0u8; 1 << 20];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.flush();
        std::thread::sleep(self.rng.millis(200, 1500));
        drop(file);
        std::fs::remove_file(&path).context("cannot remove the ballast file")?;
        Ok(())
    }

    /// Counts faulted dispatchers that died at their fault point.
    fn reap_faulty(&mut self) {
        let mut alive = Vec::new();
        for mut child in std::mem::take(&mut self.faulty) {
            match child.try_wait() {
                Ok(Some(status)) => {
                    if status.signal() == Some(9) {
                        self.counts.before_spawn_kills += 1;
                    }
                }
                Ok(None) => alive.push(child),
                Err(_) => {}
            }
        }
        self.faulty = alive;
    }

    /// Replaces dispatchers that exited (two always run).
    fn keep_two_dispatchers(&mut self) -> anyhow::Result<()> {
        self.dispatchers
            .retain_mut(|c| matches!(c.try_wait(), Ok(None)));
        while self.dispatchers.len() < 2 {
            let child = self.start_dispatcher(&[])?;
            self.dispatchers.push(child);
        }
        Ok(())
    }

    fn stop_dispatchers(&mut self) {
        for child in &self.dispatchers {
            if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
        }
        for mut child in std::mem::take(&mut self.dispatchers) {
            let deadline = Instant::now() + Duration::from_secs(15);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills every process of the run that is still there (used on any exit path).
    fn stop_all(&mut self) {
        for mut child in std::mem::take(&mut self.faulty) {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stop_dispatchers();
        // Owners outlive the dispatchers by design, and a waiting submitter starts its owner
        // again: the run ends its submitters, then its owners, until none is left.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let mut left = Vec::new();
            for words in [&["submit"][..], &["owner", "serve"][..]] {
                left.extend(self.processes(words).unwrap_or_default());
            }
            if left.is_empty() {
                break;
            }
            for pid in left {
                kill_group(pid);
                kill(pid);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Ok(workers) = self.workers() {
            for w in workers {
                kill_group(w.pid);
            }
        }
    }

    /// Waits for the workers of the run to exit (all tasks are done by now), then kills any left.
    fn wait_workers_gone(&mut self, conn: &Store) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            self.sample(conn)?;
            let workers = self.workers()?;
            if workers.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                for w in workers {
                    kill_group(w.pid);
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The live processes of this run's home (their arguments name it) whose arguments contain
    /// every word of `words` (`["owner", "serve"]`, `["submit"]`, `["worker"]`), by pid.
    fn processes(&self, words: &[&str]) -> anyhow::Result<Vec<i32>> {
        let home = self.home.to_string_lossy().into_owned();
        let mut out = Vec::new();
        for entry in std::fs::read_dir("/proc")?.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if args.contains(&home)
                && words.iter().all(|w| args.iter().any(|a| a == w))
                && alive(pid)
            {
                out.push(pid);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// The live `kanban worker` processes of this run's home, with their task and run.
    fn workers(&self) -> anyhow::Result<Vec<WorkerProc>> {
        let mut out = Vec::new();
        for pid in self.processes(&["worker"])? {
            let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
                continue;
            };
            let mut task = None;
            let mut run = None;
            for var in environ.split(|b| *b == 0) {
                let var = String::from_utf8_lossy(var);
                if let Some(v) = var.strip_prefix("HERMES_KANBAN_TASK=") {
                    task = Some(v.to_owned());
                } else if let Some(v) = var.strip_prefix("HERMES_KANBAN_RUN_ID=") {
                    run = v.parse().ok();
                }
            }
            if let (Some(task), Some(run)) = (task, run) {
                out.push(WorkerProc { pid, task, run });
            }
        }
        out.sort_by_key(|w| w.pid);
        Ok(out)
    }

    /// Records every task with two active workers (their run rows carry their pids) right now.
    fn sample(&mut self, conn: &Store) -> anyhow::Result<()> {
        let workers = self.workers()?;
        let mut active: BTreeMap<String, u32> = BTreeMap::new();
        for w in &workers {
            let pid: Option<i64> = conn
                .value(
                    "SELECT worker_pid FROM task_runs WHERE id = ?1 AND task_id = ?2",
                    &[Param::Int(w.run), Param::Text(&w.task)],
                )?
                .and_then(|c| c.int());
            // Still alive after the reads? (A process that exited meanwhile is not a duplicate.)
            if pid == Some(i64::from(w.pid)) && alive(w.pid) {
                *active.entry(w.task.clone()).or_default() += 1;
            }
        }
        for (task, n) in active {
            if n > 1 {
                self.duplicates.insert(task);
            }
        }
        Ok(())
    }

    fn check(
        &mut self,
        conn: &Store,
        options: Options,
        recovered: Option<Duration>,
        started: Instant,
    ) -> anyhow::Result<Summary> {
        let mut failures = Vec::new();
        let ids: Vec<String> = self.acked.values().cloned().collect();
        let mut lost = 0u32;
        let mut stuck = 0u32;
        let mut twice = 0u32;
        for id in &ids {
            let status = task_status(conn, id)?;
            match status.as_deref() {
                None => lost += 1,
                Some("done") => {}
                Some(_) => stuck += 1,
            }
            let completed = conn
                .value(
                    "SELECT COUNT(*) FROM task_events WHERE task_id = ?1 AND kind = 'completed'",
                    &[Param::Text(id)],
                )?
                .and_then(|c| c.int())
                .unwrap_or(0);
            if completed > 1 {
                twice += 1;
            }
        }
        // Every task index was acknowledged exactly once (idempotency keys): none missing.
        if self.acked.len() as u32 != options.tasks {
            lost += options.tasks - self.acked.len() as u32;
        }
        let duplicates = self.duplicates.len() as u32 + twice;
        if lost > 0 {
            failures.push(format!("{lost} task(s) lost"));
        }
        if stuck > 0 {
            failures.push(format!("{stuck} task(s) not done"));
        }
        if duplicates > 0 {
            failures.push(format!(
                "duplicates: two active workers for {:?}, {twice} task(s) completed twice",
                self.duplicates
            ));
        }
        let fsck = self.kanban(&["fsck"]).output()?;
        let fsck_ok = fsck.status.success();
        if !fsck_ok {
            failures.push(format!(
                "kanban fsck: {}",
                String::from_utf8_lossy(&fsck.stderr).trim()
            ));
        }
        let integrity = conn.integrity()?;
        if integrity != "ok" && !conn.is_postgres() {
            failures.push(format!("PRAGMA integrity_check: {integrity}"));
        }
        let c = &self.counts;
        let recover = match recovered {
            Some(d) => format!("{:.2} s", d.as_secs_f64()),
            None => {
                failures.push(format!("not recovered within {RECOVERY_LIMIT:?}"));
                "never".to_owned()
            }
        };
        let full_disk = if self.tmpfs {
            c.full_disks.to_string()
        } else {
            "skipped".to_owned()
        };
        let line = format!(
            "chaos: store = {}, mode = {}, seed = {}, tasks = {}, kills = {} (dispatchers {}, workers {}, agents {}, \
             owners {}, submitters {}, between claim and spawn {}), faults = {} (locked board {}, full disk {full_disk}, \
             operator reclaims {}), \
             dispatchers = 2, external completions = {}, systemic unblocks = {}, lost = {lost}, duplicates = {duplicates}, stuck = {stuck}, \
             fsck = {}, integrity = {integrity}, recover = {recover}, elapsed = {:.1} s",
            if conn.is_postgres() {
                "postgres"
            } else {
                "sqlite"
            },
            if self.owner { "owner" } else { "direct" },
            options.seed,
            ids.len(),
            c.kills(),
            c.dispatcher_kills,
            c.worker_kills,
            c.agent_kills,
            c.owner_kills,
            c.submitter_kills,
            c.before_spawn_kills,
            c.faults(),
            c.locks,
            c.reclaims,
            c.external_completions,
            c.systemic_unblocks,
            if fsck_ok { "clean" } else { "VIOLATIONS" },
            started.elapsed().as_secs_f64()
        );
        Ok(Summary {
            line,
            ok: failures.is_empty(),
            failures,
        })
    }
}

/// The task's status; `None` when there is no such task.
fn task_status(conn: &Store, id: &str) -> anyhow::Result<Option<String>> {
    Ok(conn
        .value("SELECT status FROM tasks WHERE id = ?1", &[Param::Text(id)])?
        .and_then(|c| c.text()))
}

fn count_not_done(conn: &Store, ids: &[String]) -> anyhow::Result<usize> {
    let mut n = 0;
    for id in ids {
        if task_status(conn, id)?.as_deref() != Some("done") {
            n += 1;
        }
    }
    Ok(n)
}

/// The processes in the workers' process groups other than the workers themselves (agents).
fn agents_of(workers: &[WorkerProc]) -> Vec<i32> {
    let groups: BTreeSet<i32> = workers.iter().map(|w| w.pid).collect();
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if groups.contains(&pid) {
            continue;
        }
        if let Some((state, pgrp)) = state_and_group(pid)
            && state != 'Z'
            && groups.contains(&pgrp)
        {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

/// State and process group of `pid` from `/proc/<pid>/stat`.
fn state_and_group(pid: i32) -> Option<(char, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

fn alive(pid: i32) -> bool {
    state_and_group(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// SIGKILL to one process; whether it was delivered.
fn kill(pid: i32) -> bool {
    rustix::process::Pid::from_raw(pid).is_some_and(|pid| {
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok()
    })
}

/// SIGKILL to a whole process group.
fn kill_group(pid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_a_function_of_the_seed() {
        let a: Vec<u64> = (0..5)
            .map({
                let mut r = Rng(7);
                move |_| r.next()
            })
            .collect();
        let b: Vec<u64> = (0..5)
            .map({
                let mut r = Rng(7);
                move |_| r.next()
            })
            .collect();
        assert_eq!(a, b);
        let mut r = Rng(8);
        assert_ne!(a[0], r.next());
        for _ in 0..1000 {
            let x = r.range(3, 9);
            assert!((3..=9).contains(&x));
        }
    }

    #[test]
    fn kills_and_faults_are_counted_apart() {
        let c = Counts {
            dispatcher_kills: 1,
            worker_kills: 2,
            agent_kills: 3,
            before_spawn_kills: 4,
            locks: 5,
            full_disks: 6,
            reclaims: 7,
            systemic_unblocks: 8,
            external_completions: 9,
            owner_kills: 10,
            submitter_kills: 11,
        };
        assert_eq!(c.kills(), 31);
        assert_eq!(c.faults(), 18);
    }
}
