//! End to end: three hosts share one board. Each `kanban dispatch` runs in its own user, UTS, PID
//! and mount namespace (`unshare --user --map-root-user --uts --pid --fork --mount-proc`), so the
//! host names differ and the pids collide (every dispatcher is pid 1 of its namespace, its
//! workers 2, 3, …). One host is killed with SIGKILL mid-run (its namespace's init, which takes
//! its workers along); the others must finish every task exactly once, take the dead host's tasks
//! over only after their claims expired, and never signal a process of another host.
//!
//! The board is a parameter ([`SharedBoard`]), pointed at by `HERMES_KANBAN_DB` from three
//! separate homes: a SQLite file, or a fresh database of the throwaway PostgreSQL server
//! (`kanban_pgwire::cluster::TestCluster`) reached through its Unix socket. The same scenario
//! runs against both.
//!
//! Each home has its own dispatch (tick) lock file, `<home>/kanban.db.dispatch.lock`: on SQLite
//! the three hosts' ticks still take turns (SQLite's write lock on the one file), on PostgreSQL
//! nothing serialises them but the board's compare-and-swap transitions, which is what makes the
//! PostgreSQL case the real test of "two hosts never run two workers for one task".
//!
//! The user namespace makes this work without root where the kernel allows unprivileged user
//! namespaces; where it does not, the test fails and says why (it never skips silently). Run as
//! root, the namespace's root is the real root without its capabilities over files of unmapped
//! users: the PostgreSQL server's socket folder (owned by `nobody` then) must be searchable by
//! others, which `TestCluster` makes it.

// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
// A failed setup or check step fails the test at once, with the panic message.
#![allow(clippy::unwrap_used)]

mod dispatch_support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dispatch_support::config;
use kanban_pgwire::cluster::TestCluster;
use kanban_runtime::board::{self, Board, NewTask, OpenOptions, Status, TaskFilter};

const HOSTS: [&str; 3] = ["kanban-host-a", "kanban-host-b", "kanban-host-c"];
const TASKS: usize = 300;
/// Claims last 8 s (workers heartbeat every ~2.7 s), so a dead host's tasks come back within
/// seconds while a live worker slowed down by a busy machine (a slow start, a late beat) still
/// keeps its claim: another host would rightly take over a claim that expired.
const TTL: i64 = 8;

/// Where the three dispatchers find the board, and how the test reads it.
struct SharedBoard {
    /// Environment given to every `kanban` process of every host.
    env: Vec<(String, String)>,
    open: Box<dyn Fn() -> Board>,
}

impl SharedBoard {
    /// One SQLite file outside every host's home.
    fn sqlite(dir: &Path) -> SharedBoard {
        let path = dir.join("shared").join("kanban.db");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        drop(Board::open_path(&path, &OpenOptions::create()).unwrap());
        let db = path.clone();
        SharedBoard {
            env: vec![("HERMES_KANBAN_DB".into(), path.display().to_string())],
            open: Box::new(move || Board::open_path(&db, &OpenOptions::default()).unwrap()),
        }
    }

    /// A fresh database of the test server, by its Unix-socket URL (no password: trust on the
    /// socket). The test creates the board schema; the hosts join it. The socket folder is
    /// searchable by every user, so the hosts' user namespaces reach it (the mount namespace
    /// of `--mount-proc` is a copy: the folder is there).
    fn postgres() -> SharedBoard {
        let cluster = TestCluster::shared()
            .expect("a PostgreSQL test server (see the README's Testing section)");
        let name = format!("three_hosts_{}", std::process::id());
        cluster.create_database(&name).unwrap();
        let url = cluster.url(&name);
        drop(Board::open_path(Path::new(&url), &OpenOptions::create()).unwrap());
        let db = url.clone();
        SharedBoard {
            env: vec![("HERMES_KANBAN_DB".into(), url)],
            open: Box::new(move || {
                Board::open_path(Path::new(&db), &OpenOptions::default()).unwrap()
            }),
        }
    }
}

/// Identity and location knobs the test's own environment must not leak into a host.
const SCRUB: &[&str] = &[
    "HERMES_KANBAN_TASK",
    "HERMES_KANBAN_RUN_ID",
    "HERMES_KANBAN_CLAIM_LOCK",
    "HERMES_KANBAN_WORKSPACE",
    "HERMES_KANBAN_WORKSPACES_ROOT",
    "HERMES_KANBAN_BOARD",
    "HERMES_KANBAN_DB",
    "HERMES_KANBAN_HOME",
    "HERMES_KANBAN_CLAIM_TTL_SECONDS",
    "HERMES_KANBAN_CRASH_GRACE_SECONDS",
    "HERMES_DELEGATED_CHILD_CONTEXT",
    "HERMES_HOME",
];

/// One host: a home of its own and a dispatcher in fresh namespaces.
struct Host {
    name: &'static str,
    home: PathBuf,
    /// The `unshare` process (outside the namespaces); its only child is the namespace's init,
    /// the dispatcher itself.
    unshare: Child,
    /// Until the test signals it, the dispatcher must keep running.
    signalled: bool,
}

impl Host {
    fn start(name: &'static str, dir: &Path, board: &SharedBoard) -> Host {
        let home = dir.join(name);
        std::fs::create_dir_all(&home).unwrap();
        let cfg = config(&format!(
            "max_spawn = 64\nmax_in_progress = 4\nclaim_ttl_seconds = {TTL}"
        ));
        std::fs::write(home.join("kanban.toml"), cfg).unwrap();
        let out = std::fs::File::create(home.join("dispatch.out")).unwrap();
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--user",
            "--map-root-user",
            "--uts",
            "--pid",
            "--fork",
            "--mount-proc",
            // A test that fails midway leaves no dispatcher behind (unshare's end kills it).
            "--kill-child",
            "--",
            "sh",
            "-c",
            r#"hostname "$1" && exec "$2" --home "$3" dispatch --interval 0.2"#,
            "sh",
            name,
            env!("CARGO_BIN_EXE_kanban"),
        ])
        .arg(&home)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
        for key in SCRUB {
            cmd.env_remove(key);
        }
        cmd.envs(board.env.iter().map(|(k, v)| (k, v)));
        let unshare = cmd.spawn().unwrap_or_else(|e| {
            panic!(
                "cannot start `unshare` ({e}): this test needs util-linux's unshare and either \
                 root or unprivileged user namespaces (kernel.unprivileged_userns_clone=1)"
            )
        });
        Host {
            name,
            home,
            unshare,
            signalled: false,
        }
    }

    /// The namespace's init (the dispatcher), as a pid outside the namespace.
    fn init_pid(&mut self) -> i64 {
        let pid = self.unshare.id();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.unshare.try_wait().unwrap() {
                panic!(
                    "the dispatcher of {} ended before it started ({status}); this test needs \
                     root or unprivileged user namespaces for `unshare --user --map-root-user \
                     --uts --pid --fork --mount-proc`; its output:\n{}",
                    self.name,
                    self.output()
                );
            }
            let children =
                std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
            if let Some(child) = children.split_whitespace().next() {
                return child.parse().unwrap();
            }
            assert!(
                Instant::now() < deadline,
                "{}: no namespace init after 20 s",
                self.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&mut self, signal: &str) {
        let init = self.init_pid();
        self.signalled = true;
        let status = Command::new("kill")
            .args([signal, &init.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal} {init} ({})", self.name);
    }

    /// Waits for `unshare` to end (the namespace is gone with its init).
    fn wait(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.unshare.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "{} did not stop within {limit:?}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(self.home.join("dispatch.out")).unwrap_or_default()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if self.unshare.try_wait().ok().flatten().is_none() {
            let _ = self.unshare.kill();
            let _ = self.unshare.wait();
        }
    }
}

fn now() -> i64 {
    dispatch_support::now()
}

fn host_of(lock: &str) -> &str {
    lock.rsplit_once(':').map_or(lock, |(host, _)| host)
}

fn all_tasks(board: &Board) -> Vec<board::Task> {
    board
        .list_tasks(&TaskFilter {
            statuses: vec![],
            assignee: None,
            include_archived: true,
            limit: None,
            offset: None,
        })
        .unwrap()
}

fn count(board: &Board, status: Status) -> usize {
    all_tasks(board)
        .iter()
        .filter(|t| t.status == status)
        .count()
}

/// Polls `cond` every 50 ms until it holds, failing after `limit`, or as soon as a dispatcher
/// the test did not signal has ended, with the hosts' output.
fn wait_until(what: &str, limit: Duration, hosts: &mut [Host], mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        let ended = hosts
            .iter_mut()
            .filter(|h| !h.signalled)
            .find_map(|h| h.unshare.try_wait().unwrap().map(|_| h.name));
        if Instant::now() >= deadline || ended.is_some() {
            let what = match ended {
                Some(name) => format!("{what} (the dispatcher of {name} ended)"),
                None => what.to_owned(),
            };
            let outputs: Vec<String> = hosts
                .iter()
                .map(|h| format!("--- {} ---\n{}", h.name, h.output()))
                .collect();
            panic!("timed out waiting for {what}\n{}", outputs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn three_hosts_share_one_sqlite_board_and_survive_the_death_of_one() {
    let dir = tempfile::tempdir().unwrap();
    let board = SharedBoard::sqlite(dir.path());
    three_hosts(dir.path(), &board);
}

#[test]
fn three_hosts_share_one_postgres_board_and_survive_the_death_of_one() {
    let dir = tempfile::tempdir().unwrap();
    let board = SharedBoard::postgres();
    three_hosts(dir.path(), &board);
}

/// The scenario, for any shared board.
fn three_hosts(dir: &Path, shared: &SharedBoard) {
    let runs_log = dir.join("agent-runs.log");
    let signals_log = dir.join("agent-signals.log");
    let board = (shared.open)();
    let mut ids = Vec::with_capacity(TASKS);
    for i in 0..TASKS {
        // A short real process that names its host; one that receives SIGTERM says so.
        let body = format!(
            "h=$(cat /proc/sys/kernel/hostname); \
             trap 'echo \"TERM $h {i}\" >> {sig}; exit 143' TERM; \
             echo \"$h {i}\" >> {runs}; sleep 0.1 & wait $!",
            sig = signals_log.display(),
            runs = runs_log.display(),
        );
        let task = NewTask {
            title: format!("task {i}"),
            assignee: Some("sh".into()),
            body: Some(body),
            ..NewTask::default()
        };
        ids.push(board.create_task(&task, now()).unwrap().id);
    }

    let start = Instant::now();
    let mut hosts: Vec<Host> = HOSTS
        .iter()
        .map(|name| Host::start(name, dir, shared))
        .collect();
    for host in &mut hosts {
        host.init_pid();
    }

    // Mid-run: a third of the work done and the victim holding live, registered workers.
    let victim = HOSTS[0];
    let victim_prefix = format!("{victim}:");
    wait_until(
        "a third of the tasks done with workers running on the first host",
        Duration::from_secs(60),
        &mut hosts,
        || {
            let tasks = all_tasks(&board);
            let done = tasks.iter().filter(|t| t.status == Status::Done).count();
            let victim_running = tasks.iter().any(|t| {
                t.status == Status::Running
                    && t.worker_pid.is_some()
                    && t.claim_lock
                        .as_deref()
                        .is_some_and(|l| l.starts_with(&victim_prefix))
            });
            done >= TASKS / 3 && victim_running
        },
    );
    hosts[0].signal("-KILL");
    let killed_at = now();
    let kill_time = start.elapsed();
    hosts[0].wait(Duration::from_secs(20));
    // What the victim held when it died (its claims now wait for their expiry).
    let orphaned: BTreeMap<String, i64> = all_tasks(&board)
        .into_iter()
        .filter(|t| t.status == Status::Running)
        .filter(|t| {
            t.claim_lock
                .as_deref()
                .is_some_and(|l| l.starts_with(&victim_prefix))
        })
        .map(|t| (t.id, t.claim_expires.unwrap()))
        .collect();
    assert!(
        !orphaned.is_empty(),
        "the victim held no claim when it died"
    );

    wait_until(
        "every task done by the two surviving hosts",
        Duration::from_secs(120),
        &mut hosts,
        || count(&board, Status::Done) == TASKS,
    );
    let done_time = start.elapsed();
    for host in &mut hosts[1..] {
        host.signal("-TERM");
    }
    for host in &mut hosts[1..] {
        host.wait(Duration::from_secs(20));
    }

    // Every task done exactly once: one completed run each, by a host that was alive.
    let mut completed_by: BTreeMap<&str, usize> = BTreeMap::new();
    let mut pids_by_host: HashMap<String, BTreeSet<i64>> = HashMap::new();
    for id in &ids {
        let runs = board.runs(id).unwrap();
        let completed: Vec<_> = runs
            .iter()
            .filter(|r| r.outcome.as_deref() == Some("completed"))
            .collect();
        assert_eq!(completed.len(), 1, "{id}: {runs:?}");
        let host = host_of(completed[0].claim_lock.as_deref().unwrap());
        let host = HOSTS.iter().find(|h| **h == host).unwrap();
        *completed_by.entry(host).or_default() += 1;
        for r in &runs {
            if let (Some(lock), Some(pid)) = (r.claim_lock.as_deref(), r.worker_pid) {
                pids_by_host
                    .entry(host_of(lock).to_owned())
                    .or_default()
                    .insert(pid);
            }
        }
        // Runs never overlap: each run was closed, and every event of it committed, before the
        // next run's `claimed` event. (Not by timestamps: a claim is stamped with its tick's
        // start, which on a loaded host can be a second before another host's reclaim of the
        // previous run, though the claim committed after it.)
        let events = board.events(id, None).unwrap();
        for pair in runs.windows(2) {
            assert!(pair[0].ended_at.is_some(), "{id}: a run left open {runs:?}");
            let last_of_previous = events
                .iter()
                .filter(|e| e.run_id == Some(pair[0].id))
                .map(|e| e.id)
                .max();
            let claimed_next = events
                .iter()
                .find(|e| e.run_id == Some(pair[1].id) && e.kind == "claimed")
                .map(|e| e.id);
            assert!(
                claimed_next.is_some() && last_of_previous < claimed_next,
                "{id}: overlapping runs {runs:?}, events {events:?}"
            );
        }
    }
    // The scenario did what it claims: all three hosts worked, and their pids collided.
    for host in HOSTS {
        assert!(
            pids_by_host.get(host).is_some_and(|p| !p.is_empty()),
            "{host} ran nothing: {completed_by:?}"
        );
    }
    let shared_pids = pids_by_host[HOSTS[1]]
        .intersection(&pids_by_host[HOSTS[2]])
        .count();
    assert!(shared_pids > 0, "no pid collision between the live hosts");

    // The dead host's tasks were taken over only after their claims expired, by a live host
    // that attempted no signal; nothing else was ever reclaimed, stopped or reaped.
    let mut taken_over = 0;
    let mut taken_over_ids = BTreeSet::new();
    let mut after_heartbeat = 0;
    for id in &ids {
        for event in board.events(id, None).unwrap() {
            let p = event.payload.clone().unwrap_or_default();
            match event.kind.as_str() {
                "reclaimed" => {
                    let lock = p["stale_lock"].as_str().unwrap();
                    assert_eq!(host_of(lock), victim, "{id}: {p}");
                    assert_eq!(p["host_local"], false, "{id}: {p}");
                    assert_eq!(p["termination_attempted"], false, "{id}: {p}");
                    assert_eq!(p["sigkill"], false, "{id}: {p}");
                    let expires = p["claim_expires"].as_i64().unwrap();
                    assert!(
                        event.created_at > expires,
                        "{id}: reclaimed at {} <= {expires}",
                        event.created_at
                    );
                    assert!(p["now"].as_i64().unwrap() > expires, "{id}: {p}");
                    // A heartbeat extends the claim to its time + TTL: the last one had expired.
                    if let Some(beat) = p["last_heartbeat_at"].as_i64() {
                        assert!(expires >= beat + TTL, "{id}: {p}");
                        assert!(event.created_at > beat + TTL, "{id}: {p}");
                        after_heartbeat += 1;
                    }
                    // The expiry it waited for is the last one the dead host's worker wrote.
                    if let Some(recorded) = orphaned.get(id) {
                        assert!(expires >= *recorded, "{id}: {p}");
                    }
                    assert!(expires >= killed_at - TTL, "{id}: {p}");
                    taken_over += 1;
                    taken_over_ids.insert(id.clone());
                }
                "reclaim_deferred"
                | "worker_superseded"
                | "terminal_worker_reaped"
                | "timed_out"
                | "stale"
                | "crashed"
                | "claim_abandoned"
                | "reconciled" => {
                    panic!("{id}: unexpected `{}` {p}", event.kind)
                }
                _ => {}
            }
        }
    }
    // An orphaned claim no live host took over was completed by the dead host itself: its
    // worker had sent the completion before the kill and the server committed it after (a
    // PostgreSQL backend finishes the statement it already received from a client that died).
    // Such a run ended no later than the kill, by the victim; anything else is a lost takeover.
    let mut landed_in_flight = 0;
    for id in orphaned.keys().filter(|id| !taken_over_ids.contains(*id)) {
        let runs = board.runs(id).unwrap();
        let completed = runs
            .iter()
            .find(|r| r.outcome.as_deref() == Some("completed"))
            .unwrap();
        let by = host_of(completed.claim_lock.as_deref().unwrap());
        assert!(
            by == victim && completed.ended_at.unwrap() <= killed_at,
            "{id}: orphaned at the kill, never taken over, completed by {by}: {runs:?}"
        );
        landed_in_flight += 1;
    }
    assert!(taken_over > 0, "no claim of the dead host was taken over");

    // No agent ever received SIGTERM: no dispatcher signalled a worker, least of all one of
    // another host.
    let signals = std::fs::read_to_string(&signals_log).unwrap_or_default();
    assert!(signals.is_empty(), "agents were signalled:\n{signals}");
    let started = std::fs::read_to_string(&runs_log).unwrap();
    for host in HOSTS {
        assert!(started.lines().any(|l| l.starts_with(&format!("{host} "))));
    }

    // The board is consistent.
    let mut fsck = Command::new(env!("CARGO_BIN_EXE_kanban"));
    for key in SCRUB {
        fsck.env_remove(key);
    }
    let fsck = fsck
        .arg("--home")
        .arg(&hosts[1].home)
        .arg("fsck")
        .envs(shared.env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert!(
        fsck.status.success(),
        "fsck: {}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
    eprintln!(
        "three hosts: {TASKS} tasks, completed per host {completed_by:?}, {} claims orphaned by \
         the kill, {taken_over} taken over after expiry ({after_heartbeat} after a heartbeat), \
         {landed_in_flight} completed in flight by the dead host, {shared_pids} pids used on both live hosts; killed at {kill_time:.1?}, all done at \
         {done_time:.1?}",
        orphaned.len()
    );
}
