//! Tick tests on a real SQLite board with an injected clock and a scripted fake for processes:
//! every lease rule of ARCHITECTURE.md §3 without waiting for anything.

use std::collections::{HashMap, HashSet};

use super::*;
use crate::board::{self, Board, Completion, Fence, NewTask, OpenOptions, Outcome, Status};
use crate::clock::{Clock, ManualClock};
use crate::config::{Config, ProfileConfig};
use crate::proc::exit::{self, WorkerExit};
use crate::proc::process::{KillWait, Liveness, Termination};

#[derive(Default)]
struct Fake {
    next: i64,
    alive: HashSet<i64>,
    exits: HashMap<i64, WorkerExit>,
    survive: HashSet<i64>,
    spawned: Vec<SpawnRequest>,
    terminated: Vec<i64>,
    tracked: HashMap<i64, Tracked>,
    /// Start times (epoch seconds) of live processes, when a test sets them.
    started: HashMap<i64, i64>,
}

impl Fake {
    fn pid_of(&self, task: &str) -> i64 {
        let i = self
            .spawned
            .iter()
            .rposition(|r| r.task_id == task)
            .unwrap();
        1000 + i as i64 + 1
    }
    fn exit(&mut self, task: &str, exit: WorkerExit) {
        let pid = self.pid_of(task);
        self.alive.remove(&pid);
        self.exits.insert(pid, exit);
    }
    fn spawns_of(&self, task: &str) -> usize {
        self.spawned.iter().filter(|r| r.task_id == task).count()
    }
}

impl Workers for Fake {
    fn spawn(&mut self, req: &SpawnRequest) -> Result<i64, SpawnError> {
        self.next += 1;
        let pid = 1000 + self.next;
        self.alive.insert(pid);
        self.spawned.push(req.clone());
        Ok(pid)
    }
    fn reap(&mut self) -> Vec<Reaped> {
        Vec::new()
    }
    fn exit_of(&mut self, pid: i64) -> Option<WorkerExit> {
        self.exits.get(&pid).copied()
    }
    fn liveness(&self, pid: i64, _fp: Option<&str>) -> Liveness {
        if self.alive.contains(&pid) {
            Liveness::Alive
        } else {
            Liveness::Dead
        }
    }
    fn fingerprint(&self, pid: i64) -> Option<String> {
        Some(format!("fake|{pid}"))
    }
    fn terminate(&mut self, pid: i64, _fp: Option<&str>, _wait: KillWait) -> Termination {
        self.terminated.push(pid);
        let survived = self.survive.contains(&pid);
        if !survived {
            self.alive.remove(&pid);
            self.exits.insert(pid, WorkerExit::Signaled { signal: 15 });
        }
        Termination {
            prev_pid: Some(pid),
            host_local: true,
            termination_attempted: true,
            terminated: !survived,
            sigkill: true,
            ..Termination::default()
        }
    }
    fn children(&self) -> usize {
        self.alive.len()
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
    fn started_at(&self, pid: i64) -> Option<i64> {
        self.started.get(&pid).copied()
    }
}

struct Env {
    _dir: tempfile::TempDir,
    board: Board,
    settings: Settings,
    clock: ManualClock,
    fake: Fake,
}

const T0: i64 = 1_800_000_000;

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    let location = crate::home::resolve(&root, Some("default")).unwrap();
    let board = Board::open(&location, &OpenOptions::create()).unwrap();
    let mut config = Config::default();
    config.profiles.insert(
        "p".into(),
        ProfileConfig {
            agent: "builtin:complete".into(),
            command: vec![],
            env: Default::default(),
            ..Default::default()
        },
    );
    config.dispatch.default_profile = "p".into();
    let settings = Settings::new(root, location, &config).unwrap();
    Env {
        _dir: dir,
        board,
        settings,
        clock: ManualClock::new(T0),
        fake: Fake::default(),
    }
}

impl Env {
    fn create(&self, title: &str, priority: i64, parents: Vec<String>) -> String {
        self.board
            .create_task(
                &NewTask {
                    title: title.into(),
                    priority,
                    parents,
                    ..NewTask::default()
                },
                self.clock.now(),
            )
            .unwrap()
            .id
    }
    fn tick(&mut self) -> TickReport {
        tick(&mut self.board, &self.settings, &self.clock, &mut self.fake).unwrap()
    }
    fn status(&self, id: &str) -> Status {
        self.board.get_task(id).unwrap().status
    }
    fn kinds(&self, id: &str) -> Vec<String> {
        let mut events = self.board.events(id, None).unwrap();
        events.sort_by_key(|e| e.id);
        events.into_iter().map(|e| e.kind).collect()
    }
}

#[test]
fn claims_by_priority_then_creation_within_the_spawn_budget() {
    let mut e = env();
    e.settings.max_spawn = 2;
    let low = e.create("low", 0, vec![]);
    let first = e.create("first high", 5, vec![]);
    let second = e.create("second high", 5, vec![]);
    let r = e.tick();
    let ids: Vec<_> = r.spawned.iter().map(|s| s.task_id.clone()).collect();
    assert_eq!(ids, [first.clone(), second.clone()]);
    assert_eq!(e.status(&low), Status::Ready);
    // Budget is per board concurrency, not per tick: nothing more while two run.
    assert!(e.tick().spawned.is_empty());
    let t = e.board.get_task(&first).unwrap();
    assert_eq!(t.worker_pid, Some(e.fake.pid_of(&first)));
    assert_eq!(
        t.worker_started_at.as_deref(),
        Some(format!("fake|{}", e.fake.pid_of(&first)).as_str())
    );
    assert!(e.kinds(&first).contains(&"spawned".to_owned()));
}

#[test]
fn expired_claim_with_live_heartbeating_worker_is_extended() {
    let mut e = env();
    let id = e.create("slow", 0, vec![]);
    e.tick();
    e.clock.advance(e.settings.claim_ttl_seconds + 1);
    let r = e.tick();
    assert_eq!(r.extended, [id.as_str()]);
    assert_eq!(e.status(&id), Status::Running);
    assert_eq!(e.fake.spawns_of(&id), 1);
    assert!(e.fake.terminated.is_empty());
    let t = e.board.get_task(&id).unwrap();
    assert_eq!(
        t.claim_expires,
        Some(e.clock.now() + e.settings.claim_ttl_seconds)
    );
    assert!(e.kinds(&id).contains(&"claim_extended".to_owned()));
}

#[test]
fn worker_that_survives_termination_defers_the_reclaim_and_is_never_duplicated() {
    let mut e = env();
    let id = e.create("wedged", 0, vec![]);
    e.tick();
    let pid = e.fake.pid_of(&id);
    e.fake.survive.insert(pid);
    // A heartbeat older than the stale limit: the worker is wedged, so it is terminated.
    e.clock.advance(e.settings.heartbeat_max_stale_seconds + 1);
    for _ in 0..3 {
        let r = e.tick();
        assert_eq!(r.deferred, [id.as_str()]);
        assert!(r.spawned.is_empty());
        assert_eq!(e.status(&id), Status::Running);
        e.clock.advance(e.settings.reclaim_defer_seconds + 1);
    }
    assert_eq!(e.fake.spawns_of(&id), 1);
    // Once it can be killed, the claim is released (counted) and a new worker starts.
    e.fake.survive.clear();
    let r = e.tick();
    assert_eq!(r.reclaimed, [id.as_str()]);
    assert_eq!(r.spawned.len(), 1);
    assert_eq!(e.fake.spawns_of(&id), 2);
    let t = e.board.get_task(&id).unwrap();
    assert_eq!(t.consecutive_failures, 1);
    let kinds = e.kinds(&id);
    assert!(kinds.contains(&"reclaim_deferred".to_owned()));
    assert!(kinds.contains(&"reclaimed".to_owned()));
    // The termination report sits at the payload's top level, as the original writes it.
    for event in e.board.events(&id, None).unwrap() {
        if event.kind == "reclaim_deferred" || event.kind == "reclaimed" {
            let p = event.payload.unwrap();
            assert!(p.get("termination").is_none(), "{p}");
            assert_eq!(p["prev_pid"], pid, "{p}");
            assert_eq!(p["host_local"], true, "{p}");
            assert_eq!(p["terminated"], event.kind == "reclaimed", "{p}");
        }
    }
}

#[test]
fn exit_75_requeues_without_a_failure_and_respawns_only_after_the_cooldown() {
    let mut e = env();
    let id = e.create("quota", 0, vec![]);
    e.tick();
    e.fake.exit(&id, WorkerExit::Exited { code: 75 });
    let r = e.tick();
    assert_eq!(r.exited.len(), 1);
    assert_eq!(r.exited[0].class, exit::ExitClass::RateLimited);
    assert!(r.spawned.is_empty(), "respawned inside the cooldown");
    let t = e.board.get_task(&id).unwrap();
    assert_eq!((t.status, t.consecutive_failures), (Status::Ready, 0));
    assert!(!r.is_idle(), "a task in cooldown is pending work");
    e.clock.advance(e.settings.rate_limit_cooldown_seconds - 1);
    assert!(e.tick().spawned.is_empty());
    e.clock.advance(2);
    assert_eq!(e.tick().spawned.len(), 1);
    assert!(e.kinds(&id).contains(&"rate_limited".to_owned()));
}

#[test]
fn exit_78_blocks_and_stays_blocked() {
    let mut e = env();
    let id = e.create("bad key", 0, vec![]);
    e.tick();
    e.fake.exit(&id, WorkerExit::Exited { code: 78 });
    let r = e.tick();
    assert_eq!(r.gave_up, [id.as_str()]);
    for _ in 0..3 {
        e.clock.advance(3600);
        assert!(e.tick().spawned.is_empty());
        assert_eq!(e.status(&id), Status::Blocked);
    }
    let kinds = e.kinds(&id);
    assert!(kinds.contains(&"crashed".to_owned()) && kinds.contains(&"gave_up".to_owned()));
}

#[test]
fn exit_0_without_complete_is_a_protocol_violation_not_counted_until_the_budget() {
    let mut e = env();
    let id = e.create("lazy", 0, vec![]);
    e.tick();
    for round in 1..=super::settings::PROTOCOL_VIOLATION_LIMIT {
        e.fake.exit(&id, WorkerExit::Exited { code: 0 });
        let r = e.tick();
        assert_eq!(r.exited[0].class, exit::ExitClass::ProtocolViolation);
        let t = e.board.get_task(&id).unwrap();
        if round < super::settings::PROTOCOL_VIOLATION_LIMIT {
            assert_eq!(r.spawned.len(), 1, "round {round}: requeued and respawned");
            assert_eq!(t.consecutive_failures, 0);
        } else {
            assert_eq!(t.status, Status::Blocked);
            assert_eq!(r.gave_up, [id.as_str()]);
        }
    }
    assert!(e.kinds(&id).contains(&"protocol_violation".to_owned()));
    // Booked as the original books it: run outcome `crashed`, the marker in its metadata.
    let runs = e.board.runs(&id).unwrap();
    assert_eq!(
        runs.len() as i64,
        super::settings::PROTOCOL_VIOLATION_LIMIT,
        "{runs:?}"
    );
    for run in &runs {
        assert_eq!(
            (run.status.as_str(), run.outcome.as_deref()),
            ("crashed", Some("crashed"))
        );
        let meta = run.metadata.as_ref().unwrap();
        assert_eq!(meta["protocol_violation"], true, "{meta}");
    }
}

#[test]
fn crashes_count_and_the_breaker_gives_up_at_the_limit() {
    let mut e = env();
    let id = e.create("crashy", 0, vec![]);
    e.tick();
    e.fake.exit(&id, WorkerExit::Signaled { signal: 9 });
    let r = e.tick();
    assert_eq!(r.exited[0].class, exit::ExitClass::Crashed);
    assert_eq!(e.board.get_task(&id).unwrap().consecutive_failures, 1);
    assert_eq!(r.spawned.len(), 1, "a crash is retried at once");
    e.fake.exit(&id, WorkerExit::Exited { code: 1 });
    let r = e.tick();
    assert_eq!(r.gave_up, [id.as_str()]);
    let t = e.board.get_task(&id).unwrap();
    assert_eq!((t.status, t.consecutive_failures), (Status::Blocked, 2));
}

#[test]
fn a_superseded_run_can_neither_heartbeat_nor_complete() {
    let mut e = env();
    let id = e.create("handover", 0, vec![]);
    e.tick();
    let old_run = e.board.get_task(&id).unwrap().current_run_id.unwrap();
    let old_lock = e.board.get_task(&id).unwrap().claim_lock;
    e.fake.exit(&id, WorkerExit::Signaled { signal: 9 });
    e.tick();
    let new_run = e.board.get_task(&id).unwrap().current_run_id.unwrap();
    assert_ne!(old_run, new_run);
    let fence = Fence {
        claim_lock: old_lock,
        run_id: Some(old_run),
    };
    let hb = e
        .board
        .heartbeat(&id, &fence, None, 900, e.clock.now())
        .unwrap();
    assert!(matches!(hb, Outcome::Refused(_)));
    let done = e
        .board
        .complete(
            &id,
            &Completion {
                expected_run_id: Some(old_run),
                summary: Some("stale".into()),
                ..Completion::default()
            },
            e.clock.now(),
        )
        .unwrap();
    assert!(matches!(done, Outcome::Refused(_)));
    assert_eq!(e.status(&id), Status::Running);
}

#[test]
fn an_unreaped_dead_worker_waits_for_the_grace_then_uses_the_log_trailer() {
    let mut e = env();
    e.settings.crash_grace_seconds = 30;
    let id = e.create("adopted", 0, vec![]);
    e.tick();
    let pid = e.fake.pid_of(&id);
    e.fake.alive.remove(&pid); // dead, but not reaped by us
    let log = crate::home::log_path(&e.settings.root, "default", &id);
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(&log, "working\n[kanban-worker-exit] rc=75\n").unwrap();
    assert!(e.tick().exited.is_empty(), "released inside the grace");
    e.clock.advance(31);
    let r = e.tick();
    assert_eq!(r.exited[0].exit, WorkerExit::Exited { code: 75 });
    assert_eq!(r.exited[0].class, exit::ExitClass::RateLimited);
}

/// A log where an older kanban wrote it (`kanban/logs/default/<id>.log`) is read as well.
#[test]
fn the_trailer_is_read_from_a_log_in_the_older_place_too() {
    let mut e = env();
    let id = e.create("older", 0, vec![]);
    e.tick();
    let pid = e.fake.pid_of(&id);
    e.fake.alive.remove(&pid);
    let new = crate::home::log_path(&e.settings.root, "default", &id);
    assert_eq!(new, e.settings.root.join(format!("kanban/logs/{id}.log")));
    let old = e
        .settings
        .root
        .join(format!("kanban/logs/default/{id}.log"));
    std::fs::create_dir_all(old.parent().unwrap()).unwrap();
    std::fs::write(&old, "working\n[kanban-worker-exit] rc=75\n").unwrap();
    e.clock.advance(e.settings.crash_grace_seconds + 1);
    let r = e.tick();
    assert_eq!(r.exited[0].exit, WorkerExit::Exited { code: 75 });
    assert_eq!(r.exited[0].class, exit::ExitClass::RateLimited);
}

#[test]
fn runtime_cap_times_out_and_counts() {
    let mut e = env();
    let id = e
        .board
        .create_task(
            &NewTask {
                title: "capped".into(),
                max_runtime_seconds: Some(60),
                ..NewTask::default()
            },
            T0,
        )
        .unwrap()
        .id;
    e.tick();
    e.clock.advance(61);
    let r = e.tick();
    assert_eq!(r.timed_out, [id.as_str()]);
    assert_eq!(e.board.get_task(&id).unwrap().consecutive_failures, 1);
    assert!(e.kinds(&id).contains(&"timed_out".to_owned()));
}

#[test]
fn a_dependency_chain_is_claimed_only_after_its_parent_is_done() {
    let mut e = env();
    let a = e.create("a", 0, vec![]);
    let b = e.create("b", 9, vec![a.clone()]);
    let r = e.tick();
    assert_eq!(r.spawned.len(), 1);
    assert_eq!(r.spawned[0].task_id, a);
    assert_eq!(e.status(&b), Status::Todo);
    let run = e.board.get_task(&a).unwrap().current_run_id;
    e.board
        .complete(
            &a,
            &Completion {
                expected_run_id: run,
                summary: Some("ok".into()),
                ..Completion::default()
            },
            e.clock.now(),
        )
        .unwrap();
    let r = e.tick();
    assert_eq!(r.spawned.len(), 1);
    assert_eq!(r.spawned[0].task_id, b);
}

#[test]
fn an_undefined_profile_is_never_claimed_and_an_idle_board_says_so() {
    let mut e = env();
    let id = e
        .board
        .create_task(
            &NewTask {
                title: "nobody".into(),
                assignee: Some("ghost".into()),
                ..NewTask::default()
            },
            T0,
        )
        .unwrap()
        .id;
    let r = e.tick();
    assert!(r.spawned.is_empty());
    assert_eq!(r.skipped_nonspawnable, [(id.clone(), "ghost".to_owned())]);
    assert_eq!(e.status(&id), Status::Ready);
    assert!(r.is_idle());
    // Noted on the board once, not on every tick.
    assert_eq!(r.noted_nonspawnable.len(), 1);
    assert!(e.tick().noted_nonspawnable.is_empty());
    let notes = e
        .kinds(&id)
        .iter()
        .filter(|k| *k == "skipped_nonspawnable")
        .count();
    assert_eq!(notes, 1);
}

#[test]
fn dry_run_claims_nothing() {
    let mut e = env();
    e.settings.dry_run = true;
    let id = e.create("x", 0, vec![]);
    let r = e.tick();
    assert_eq!(r.spawned.len(), 1);
    assert_eq!(r.spawned[0].pid, None);
    assert_eq!(e.status(&id), Status::Ready);
    assert!(e.fake.spawned.is_empty());
}

#[test]
fn max_in_progress_caps_spawns_across_the_boards_of_this_host() {
    let mut e = env();
    e.settings.max_spawn = 8;
    // Another board of the same root with one running task claimed on this host.
    let other = crate::home::resolve(&e.settings.root, Some("other")).unwrap();
    let other_board = Board::open(&other, &OpenOptions::create()).unwrap();
    let busy = other_board
        .create_task(
            &NewTask {
                title: "elsewhere".into(),
                ..NewTask::default()
            },
            T0,
        )
        .unwrap()
        .id;
    let spec = board::ClaimSpec {
        lock: e.settings.claim_lock.clone(),
        ttl_seconds: 900,
        origin: crate::board::ClaimOrigin::Dispatcher,
    };
    assert!(matches!(
        other_board.claim(&busy, &spec, T0).unwrap(),
        board::ClaimOutcome::Claimed(_)
    ));
    e.settings.other_boards = vec![other.clone()];
    e.settings.max_in_progress = Some(3);
    for i in 0..5 {
        e.create(&format!("t{i}"), 0, vec![]);
    }
    let r = e.tick();
    assert_eq!(r.budget, 2);
    assert_eq!(r.spawned.len(), 2);
    assert!(
        e.tick().spawned.is_empty(),
        "the host cap holds on the next tick"
    );
}

#[test]
fn a_postgres_neighbour_that_never_answers_cannot_stall_the_tick() {
    // The host-wide cap opens the home's other boards each tick. A PostgreSQL neighbour on a
    // server that accepts the connection and never answers fails within the connect timeout
    // (here the URL's 1 s; without one, 10 s) and is skipped: the tick goes on.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let mut e = env();
    e.settings.max_spawn = 8;
    let url = format!("postgres://kb@127.0.0.1:{port}/board?connect_timeout=1");
    let target =
        crate::db::target::PgTarget::parse(&url, crate::db::target::UrlSource::Argument("--url"))
            .unwrap();
    e.settings.other_boards = vec![crate::db::target::BoardLocation {
        slug: "remote".into(),
        db_path: e.settings.root.join("kanban/boards/remote/kanban.db"),
        pinned: false,
        store: crate::db::target::Store::Postgres(target),
    }];
    e.settings.max_in_progress = Some(3);
    for i in 0..5 {
        e.create(&format!("t{i}"), 0, vec![]);
    }
    let r = e.tick();
    assert_eq!(r.budget, 3);
    assert_eq!(r.spawned.len(), 3);
    drop(silent);
}

/// A claim made on this host by a dispatcher that died before it spawned anything.
fn claim_by_dead_dispatcher(e: &Env, id: &str, pid: i64) -> String {
    let lock = format!("{}{pid}", e.settings.host_prefix);
    let spec = board::ClaimSpec {
        lock: lock.clone(),
        ttl_seconds: e.settings.claim_ttl_seconds,
        origin: crate::board::ClaimOrigin::Dispatcher,
    };
    assert!(matches!(
        e.board.claim(id, &spec, e.clock.now()).unwrap(),
        board::ClaimOutcome::Claimed(_)
    ));
    lock
}

#[test]
fn a_claim_never_spawned_by_a_dead_dispatcher_is_released_after_the_grace_without_a_failure() {
    let mut e = env();
    e.settings.crash_grace_seconds = 30;
    let id = e.create("orphaned claim", 0, vec![]);
    claim_by_dead_dispatcher(&e, &id, 4_000_001);
    // Within the grace the claim is left alone (the worker may still be registering).
    let r = e.tick();
    assert!(r.abandoned.is_empty() && r.spawned.is_empty());
    assert_eq!(e.status(&id), Status::Running);
    e.clock.advance(30);
    let r = e.tick();
    assert_eq!(r.abandoned, [id.as_str()]);
    // Released and respawned in the same tick, long before the claim TTL.
    assert_eq!(e.fake.spawns_of(&id), 1);
    let t = e.board.get_task(&id).unwrap();
    assert_eq!(t.consecutive_failures, 0);
    assert_eq!(t.status, Status::Running);
    let kinds = e.kinds(&id);
    let abandoned = kinds.iter().position(|k| k == "claim_abandoned").unwrap();
    let spawned = kinds.iter().position(|k| k == "spawned").unwrap();
    assert!(abandoned < spawned, "{kinds:?}");
    assert!(!kinds.contains(&"reclaimed".to_owned()));
}

#[test]
fn an_unstarted_claim_is_kept_while_its_dispatcher_lives_or_is_on_another_host() {
    let mut e = env();
    e.settings.crash_grace_seconds = 30;
    let alive = e.create("claimer alive", 0, vec![]);
    let remote = e.create("claimer elsewhere", 0, vec![]);
    claim_by_dead_dispatcher(&e, &alive, 4_000_002);
    e.fake.alive.insert(4_000_002);
    let spec = board::ClaimSpec {
        lock: "some-other-host:4000003".into(),
        ttl_seconds: e.settings.claim_ttl_seconds,
        origin: crate::board::ClaimOrigin::Dispatcher,
    };
    e.board.claim(&remote, &spec, e.clock.now()).unwrap();
    e.clock.advance(60);
    let r = e.tick();
    assert!(r.abandoned.is_empty(), "{r:?}");
    assert_eq!(e.status(&alive), Status::Running);
    assert_eq!(e.status(&remote), Status::Running);
    // Once the claimer is gone the claim goes, without waiting for the TTL.
    e.fake.alive.remove(&4_000_002);
    let r = e.tick();
    assert_eq!(r.abandoned, [alive.as_str()]);
}

#[test]
fn a_worker_that_registered_keeps_a_claim_whose_dispatcher_died() {
    let mut e = env();
    e.settings.crash_grace_seconds = 30;
    let id = e.create("registered", 0, vec![]);
    let lock = claim_by_dead_dispatcher(&e, &id, 4_000_004);
    let run = e.board.get_task(&id).unwrap().current_run_id.unwrap();
    e.fake.alive.insert(4_000_005);
    let reg = e
        .board
        .register_worker(&id, run, &lock, 4_000_005, "fake|4000005", e.clock.now())
        .unwrap();
    assert!(reg.is_done());
    e.clock.advance(60);
    let r = e.tick();
    assert!(r.abandoned.is_empty());
    assert_eq!(e.status(&id), Status::Running);
    // The fenced release refuses too, whatever a stale snapshot says.
    let mut stale = e
        .board
        .running_tasks()
        .unwrap()
        .into_iter()
        .find(|t| t.id == id)
        .unwrap();
    stale.worker_pid = None;
    let why = board::Abandonment {
        reason: board::AbandonReason::ClaimerGone,
        claimer_pid: Some(4_000_004),
        grace_seconds: 30,
    };
    assert!(matches!(
        e.board
            .release_unstarted_claim(&stale, &why, e.clock.now())
            .unwrap(),
        Outcome::Refused(_)
    ));
}

#[test]
fn an_operator_reclaim_stops_the_old_worker_before_the_successor_starts() {
    let mut e = env();
    let id = e.create("reclaimed by hand", 0, vec![]);
    e.tick();
    let old = e.fake.pid_of(&id);
    assert!(
        e.board
            .reclaim(&id, Some("operator"), e.clock.now())
            .unwrap()
            .is_done()
    );
    let r = e.tick();
    assert_eq!(r.superseded, [id.as_str()]);
    assert_eq!(e.fake.terminated, [old]);
    assert_eq!(e.fake.spawns_of(&id), 2);
    let kinds = e.kinds(&id);
    let stopped = kinds.iter().position(|k| k == "worker_superseded").unwrap();
    let respawned = kinds.iter().rposition(|k| k == "spawned").unwrap();
    assert!(stopped < respawned, "{kinds:?}");
    // The successor's worker is tracked; the old one is forgotten.
    assert!(!e.fake.tracked.contains_key(&old));
}

#[test]
fn a_successor_waits_while_the_old_worker_survives_termination() {
    let mut e = env();
    let id = e.create("stubborn", 0, vec![]);
    e.tick();
    let old = e.fake.pid_of(&id);
    e.fake.survive.insert(old);
    e.board.reclaim(&id, None, e.clock.now()).unwrap();
    for _ in 0..3 {
        let r = e.tick();
        assert_eq!(r.held_back, [id.as_str()]);
        assert!(r.spawned.is_empty());
        assert_eq!(e.status(&id), Status::Ready);
        assert!(!r.is_idle());
    }
    e.fake.survive.remove(&old);
    let r = e.tick();
    assert!(r.held_back.is_empty());
    assert_eq!(e.fake.spawns_of(&id), 2);
}

#[test]
fn an_archived_task_s_worker_is_stopped() {
    let mut e = env();
    let id = e.create("archived while running", 0, vec![]);
    e.tick();
    let old = e.fake.pid_of(&id);
    assert!(e.board.archive(&id, e.clock.now()).unwrap().is_done());
    let r = e.tick();
    assert_eq!(r.superseded, [id.as_str()]);
    assert_eq!(e.fake.terminated, [old]);
    assert_eq!(e.status(&id), Status::Archived);
    // Stopped once: the next tick has nothing left to do.
    assert!(e.tick().superseded.is_empty());
    assert_eq!(e.fake.terminated, [old]);
}

#[test]
fn a_restarted_dispatcher_finds_the_old_worker_through_the_run_row() {
    let mut e = env();
    let id = e.create("adopted", 0, vec![]);
    e.tick();
    let old = e.fake.pid_of(&id);
    // A new dispatcher process remembers nothing; the reclaim cleared the task's columns.
    e.fake.tracked.clear();
    e.board.reclaim(&id, None, e.clock.now()).unwrap();
    assert_eq!(e.board.get_task(&id).unwrap().worker_pid, None);
    let r = e.tick();
    assert_eq!(e.fake.terminated, [old]);
    assert_eq!(r.superseded, [id.as_str()]);
    assert_eq!(e.fake.spawns_of(&id), 2);
}

#[test]
fn a_completed_run_s_worker_is_left_to_exit_by_itself() {
    let mut e = env();
    let id = e.create("finishing", 0, vec![]);
    e.tick();
    let run = e.board.get_task(&id).unwrap().current_run_id;
    e.board
        .complete(
            &id,
            &Completion {
                expected_run_id: run,
                summary: Some("ok".into()),
                ..Completion::default()
            },
            e.clock.now(),
        )
        .unwrap();
    let r = e.tick();
    assert!(r.superseded.is_empty());
    assert!(e.fake.terminated.is_empty());
    assert!(e.fake.tracked.is_empty());
}

/// Behaviours of the original the dispatcher now matches (review lane, respawn guards, crash
/// breaker, terminal-worker reaping), on the same fake.
mod gaps;

/// Claims of other hosts: never judged by pid nor signalled, released only on expiry.
mod hosts;

#[test]
fn our_own_claim_whose_worker_died_unrecorded_is_released_but_not_while_it_lives() {
    let mut e = env();
    e.settings.crash_grace_seconds = 30;
    let id = e.create("spawn record lost", 0, vec![]);
    // Our claim, as if the spawn record had failed: no pid on the task.
    let lock = e.settings.claim_lock.clone();
    let spec = board::ClaimSpec {
        lock,
        ttl_seconds: e.settings.claim_ttl_seconds,
        origin: crate::board::ClaimOrigin::Dispatcher,
    };
    let board::ClaimOutcome::Claimed(claimed) = e.board.claim(&id, &spec, e.clock.now()).unwrap()
    else {
        panic!("claim lost")
    };
    // The worker we started for that run is alive: it will register itself.
    e.fake.alive.insert(4_000_100);
    e.fake.track(Tracked {
        pid: 4_000_100,
        fingerprint: None,
        task_id: id.clone(),
        run_id: claimed.run_id,
    });
    e.clock.advance(60);
    let r = e.tick();
    assert!(r.abandoned.is_empty(), "{r:?}");
    assert_eq!(e.status(&id), Status::Running);
    // It died without registering: the claim goes at once, uncounted, and the task runs again.
    e.fake.alive.remove(&4_000_100);
    let r = e.tick();
    assert_eq!(r.abandoned, [id.as_str()]);
    assert_eq!(e.fake.spawns_of(&id), 1);
    assert_eq!(e.board.get_task(&id).unwrap().consecutive_failures, 0);
    let payload = e
        .board
        .events(&id, None)
        .unwrap()
        .into_iter()
        .find(|ev| ev.kind == "claim_abandoned")
        .and_then(|ev| ev.payload)
        .unwrap();
    assert_eq!(payload["reason"], "worker_never_registered", "{payload}");
}

#[test]
fn a_claimer_pid_recycled_by_a_younger_process_counts_as_gone() {
    let mut e = env();
    e.settings.crash_grace_seconds = 30;
    let id = e.create("recycled claimer", 0, vec![]);
    claim_by_dead_dispatcher(&e, &id, 4_000_200);
    let claimed_at = e.clock.now();
    // The pid is alive again — but as a process that started 2 s after the claim: still its
    // claimer, within the slack for whole-second clocks.
    e.fake.alive.insert(4_000_200);
    e.fake.started.insert(4_000_200, claimed_at + 2);
    e.clock.advance(60);
    assert!(e.tick().abandoned.is_empty());
    assert_eq!(e.status(&id), Status::Running);
    // Started well after the claim: not the dispatcher that made it.
    e.fake.started.insert(4_000_200, claimed_at + 40);
    let r = e.tick();
    assert_eq!(r.abandoned, [id.as_str()]);
    assert_eq!(e.fake.spawns_of(&id), 1);
}

#[test]
fn a_claim_that_fails_in_the_tick_s_batch_is_reported_and_the_others_spawn() {
    let mut e = env();
    let first = e.create("first", 3, vec![]);
    let doomed = e.create("doomed", 2, vec![]);
    let last = e.create("last", 1, vec![]);
    // Fail only `doomed`'s claim, at its `claimed` event (after its run row was written).
    e.board
        .conn()
        .execute_batch(&format!(
            "CREATE TEMP TRIGGER fail_one BEFORE INSERT ON task_events \
             WHEN NEW.task_id = '{doomed}' AND NEW.kind = 'claimed' \
             BEGIN SELECT RAISE(ABORT, 'injected failure'); END;"
        ))
        .unwrap();
    let r = e.tick();
    let spawned: Vec<_> = r.spawned.iter().map(|s| s.task_id.clone()).collect();
    assert_eq!(spawned, [first.clone(), last.clone()]);
    assert_eq!(r.claim_failed.len(), 1);
    assert_eq!(r.claim_failed[0].0, doomed);
    assert!(r.claim_failed[0].1.contains("injected failure"), "{r:?}");
    assert_eq!(e.status(&doomed), Status::Ready);
    assert!(e.board.runs(&doomed).unwrap().is_empty());
    assert_eq!(e.status(&first), Status::Running);
    assert_eq!(e.status(&last), Status::Running);
    // Once the cause is gone, the next tick claims it.
    e.board
        .conn()
        .execute_batch("DROP TRIGGER fail_one")
        .unwrap();
    let r = e.tick();
    assert_eq!(r.spawned.len(), 1);
    assert_eq!(r.spawned[0].task_id, doomed);
    assert!(r.claim_failed.is_empty());
    assert!(e.board.fsck().unwrap().is_empty());
}
