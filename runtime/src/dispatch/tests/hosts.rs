//! Several hosts on one board (ARCHITECTURE.md §3): a claim whose lock names another host is
//! never judged by its pid nor signalled — that pid here is another process — and it is released
//! only once its claim or its heartbeat expired. Every test gives the foreign worker a pid that is
//! *alive on this host* (or dead here while the other host's worker may well run), and a spy
//! records every pid the tick hands to a process primitive.

use std::cell::RefCell;

use super::*;

/// The pid the other host's worker registered; on this host it belongs to an unrelated process.
const COLLIDING: i64 = 4_242_001;
const FOREIGN_LOCK: &str = "elsewhere.example:1";

/// The fake, recording every pid passed to liveness, fingerprint, signals, exit lookups,
/// leftover kills, group checks and start-time reads.
struct Spy<'a> {
    inner: &'a mut Fake,
    seen: RefCell<Vec<(&'static str, i64)>>,
}

impl Spy<'_> {
    fn saw(&self, what: &'static str, pid: i64) {
        self.seen.borrow_mut().push((what, pid));
    }
}

impl Workers for Spy<'_> {
    fn spawn(&mut self, req: &SpawnRequest) -> Result<i64, SpawnError> {
        self.inner.spawn(req)
    }
    fn reap(&mut self) -> Vec<Reaped> {
        self.inner.reap()
    }
    fn exit_of(&mut self, pid: i64) -> Option<WorkerExit> {
        self.saw("exit_of", pid);
        self.inner.exit_of(pid)
    }
    fn liveness(&self, pid: i64, fp: Option<&str>) -> Liveness {
        self.saw("liveness", pid);
        self.inner.liveness(pid, fp)
    }
    fn fingerprint(&self, pid: i64) -> Option<String> {
        self.saw("fingerprint", pid);
        self.inner.fingerprint(pid)
    }
    fn terminate(&mut self, pid: i64, fp: Option<&str>, wait: KillWait) -> Termination {
        self.saw("terminate", pid);
        self.inner.terminate(pid, fp, wait)
    }
    fn children(&self) -> usize {
        self.inner.children()
    }
    fn kill_leftovers(&mut self, pid: i64) {
        self.saw("kill_leftovers", pid);
        self.inner.kill_leftovers(pid);
    }
    fn group_alive(&self, pid: i64) -> bool {
        self.saw("group_alive", pid);
        self.inner.group_alive(pid)
    }
    fn started_at(&self, pid: i64) -> Option<i64> {
        self.saw("started_at", pid);
        self.inner.started_at(pid)
    }
    fn track(&mut self, worker: Tracked) {
        self.inner.track(worker);
    }
    fn tracked(&self) -> Vec<Tracked> {
        self.inner.tracked()
    }
    fn untrack(&mut self, pid: i64) {
        self.inner.untrack(pid);
    }
}

impl Env {
    /// One tick through the spy; fails the test if any process primitive saw `COLLIDING`.
    fn tick_spied(&mut self) -> TickReport {
        let mut spy = Spy {
            inner: &mut self.fake,
            seen: RefCell::new(Vec::new()),
        };
        let report = tick(&mut self.board, &self.settings, &self.clock, &mut spy).unwrap();
        let touched: Vec<_> = spy
            .seen
            .into_inner()
            .into_iter()
            .filter(|(_, pid)| *pid == COLLIDING)
            .collect();
        assert!(
            touched.is_empty(),
            "another host's worker pid was judged or signalled here: {touched:?}"
        );
        report
    }

    /// Claims `id` as the other host's dispatcher would, at the current time, and (with `pid`)
    /// registers its worker there. Returns the run id.
    fn claim_elsewhere(&self, id: &str, pid: Option<i64>) -> i64 {
        let spec = board::ClaimSpec {
            lock: FOREIGN_LOCK.into(),
            ttl_seconds: self.settings.claim_ttl_seconds,
            origin: crate::board::ClaimOrigin::Dispatcher,
        };
        let run = match self.board.claim(id, &spec, self.clock.now()).unwrap() {
            board::ClaimOutcome::Claimed(c) => c.run_id,
            board::ClaimOutcome::Lost(l) => panic!("claim lost: {l:?}"),
        };
        if let Some(pid) = pid {
            let fp = format!("other-boot|{pid}");
            let reg = self
                .board
                .register_worker(id, run, FOREIGN_LOCK, pid, &fp, self.clock.now())
                .unwrap();
            assert!(reg.is_done());
        }
        run
    }

    /// The other host's worker heartbeats now.
    fn beat_elsewhere(&self, id: &str, run: i64) {
        let fence = Fence {
            claim_lock: Some(FOREIGN_LOCK.into()),
            run_id: Some(run),
        };
        let beat = self
            .board
            .heartbeat(
                id,
                &fence,
                None,
                self.settings.claim_ttl_seconds,
                self.clock.now(),
            )
            .unwrap();
        assert!(beat.is_done());
    }

    fn expires(&self, id: &str) -> i64 {
        self.board.get_task(id).unwrap().claim_expires.unwrap()
    }

    /// The task is still the other host's: running under its lock, with its run.
    fn still_elsewhere(&self, id: &str, run: i64) {
        let t = self.board.get_task(id).unwrap();
        assert_eq!(t.status, Status::Running, "{id}");
        assert_eq!(t.claim_lock.as_deref(), Some(FOREIGN_LOCK), "{id}");
        assert_eq!(t.current_run_id, Some(run), "{id}");
    }

    fn payload_of(&self, id: &str, kind: &str) -> serde_json::Value {
        self.board
            .events(id, None)
            .unwrap()
            .into_iter()
            .find(|e| e.kind == kind)
            .unwrap_or_else(|| panic!("no `{kind}` event on {id}: {:?}", self.kinds(id)))
            .payload
            .unwrap()
    }
}

/// The reclaim of a foreign claim attempted nothing on this host.
fn assert_untouched(payload: &serde_json::Value) {
    assert_eq!(payload["host_local"], false, "{payload}");
    assert_eq!(payload["termination_attempted"], false, "{payload}");
    assert_eq!(payload["sigkill"], false, "{payload}");
}

#[test]
fn a_foreign_claim_with_a_colliding_live_pid_is_reclaimed_only_after_its_claim_expired() {
    let mut e = env();
    e.fake.alive.insert(COLLIDING);
    let id = e.create("claimed elsewhere", 0, vec![]);
    let run = e.claim_elsewhere(&id, Some(COLLIDING));
    // The other host heartbeats for a while: its claim keeps moving.
    for _ in 0..3 {
        e.clock.advance(e.settings.claim_ttl_seconds / 2);
        e.beat_elsewhere(&id, run);
        e.tick_spied();
        e.still_elsewhere(&id, run);
    }
    // Then it goes silent. Up to and including the expiry second the claim stands.
    let expires = e.expires(&id);
    e.clock.set(expires);
    let r = e.tick_spied();
    assert!(r.reclaimed.is_empty() && r.extended.is_empty(), "{r:?}");
    e.still_elsewhere(&id, run);
    // One second later it is released (no signal, nothing looked up) and started here.
    e.clock.set(expires + 1);
    let r = e.tick_spied();
    assert_eq!(r.reclaimed, [id.as_str()]);
    assert_eq!(e.fake.spawns_of(&id), 1);
    let p = e.payload_of(&id, "reclaimed");
    assert_untouched(&p);
    assert_eq!(p["stale_lock"], FOREIGN_LOCK, "{p}");
    assert_eq!(p["worker_pid"], COLLIDING, "{p}");
    assert!(p["now"].as_i64().unwrap() > p["claim_expires"].as_i64().unwrap());
    assert!(e.fake.terminated.is_empty());
    assert!(e.fake.alive.contains(&COLLIDING));
}

#[test]
fn a_foreign_worker_whose_pid_is_dead_here_is_not_a_crash_and_trips_no_breaker() {
    let mut e = env();
    // More foreign claims than the systemic breaker's threshold, all with a pid that no process
    // holds here: none is a dead worker of ours.
    let ids: Vec<String> = (0..=tick::SYSTEMIC_CRASH_THRESHOLD)
        .map(|i| e.create(&format!("elsewhere {i}"), 0, vec![]))
        .collect();
    let runs: Vec<i64> = ids
        .iter()
        .map(|id| e.claim_elsewhere(id, Some(COLLIDING)))
        .collect();
    e.clock.advance(e.settings.crash_grace_seconds + 1);
    for _ in 0..3 {
        let r = e.tick_spied();
        assert!(r.exited.is_empty() && r.systemic.is_empty(), "{r:?}");
        assert!(r.reconciled.is_empty() && r.abandoned.is_empty(), "{r:?}");
        e.clock.advance(e.settings.crash_grace_seconds + 1);
    }
    for (id, run) in ids.iter().zip(&runs) {
        e.still_elsewhere(id, *run);
        assert!(!e.kinds(id).iter().any(|k| k == "crashed"));
    }
    e.clock.set(e.expires(&ids[0]) + 1);
    let r = e.tick_spied();
    assert_eq!(r.reclaimed.len(), ids.len());
    assert!(r.systemic.is_empty() && r.gave_up.is_empty());
}

#[test]
fn a_foreign_worker_past_its_runtime_cap_is_left_to_its_own_host() {
    let mut e = env();
    e.fake.alive.insert(COLLIDING);
    let id = e
        .board
        .create_task(
            &NewTask {
                title: "long elsewhere".into(),
                max_runtime_seconds: Some(10),
                ..NewTask::default()
            },
            e.clock.now(),
        )
        .unwrap()
        .id;
    let run = e.claim_elsewhere(&id, Some(COLLIDING));
    e.clock.advance(60);
    e.beat_elsewhere(&id, run);
    let r = e.tick_spied();
    assert!(r.timed_out.is_empty() && r.deferred.is_empty(), "{r:?}");
    e.still_elsewhere(&id, run);
    e.clock.set(e.expires(&id) + 1);
    let r = e.tick_spied();
    assert_eq!(r.reclaimed, [id.as_str()]);
    assert!(!e.kinds(&id).iter().any(|k| k == "timed_out"));
    assert!(e.fake.terminated.is_empty());
}

#[test]
fn a_foreign_worker_with_a_stale_heartbeat_is_released_only_once_the_heartbeat_is_stale() {
    let mut e = env();
    e.fake.alive.insert(COLLIDING);
    e.settings.stale_timeout_seconds = 60;
    e.settings.heartbeat_max_stale_seconds = 120;
    // A TTL longer than the stale limit, so that the heartbeat rule decides.
    e.settings.claim_ttl_seconds = 10_000;
    let id = e.create("silent elsewhere", 0, vec![]);
    let run = e.claim_elsewhere(&id, Some(COLLIDING));
    e.clock.advance(100);
    e.beat_elsewhere(&id, run);
    let beat = e.clock.now();
    e.clock.set(beat + 119);
    let r = e.tick_spied();
    assert!(r.stale.is_empty(), "{r:?}");
    e.still_elsewhere(&id, run);
    e.clock.set(beat + 120);
    let r = e.tick_spied();
    assert_eq!(r.stale, [id.as_str()]);
    let p = e.payload_of(&id, "stale");
    assert_untouched(&p);
    assert!(e.fake.terminated.is_empty());
}

#[test]
fn a_foreign_orphan_waits_for_its_heartbeat_whatever_its_pid_is_here() {
    for alive_here in [true, false] {
        let mut e = env();
        if alive_here {
            e.fake.alive.insert(COLLIDING);
        }
        let id = e.create("orphan elsewhere", 0, vec![]);
        let run = e.claim_elsewhere(&id, Some(COLLIDING));
        e.beat_elsewhere(&id, run);
        // A running task without an expiry (a writer that lost it), and, in the second
        // variant, without its lock on the task row: the run's lock still names the host.
        e.board
            .conn()
            .execute("UPDATE tasks SET claim_expires = NULL WHERE id = ?1", [&id])
            .unwrap();
        let beat = e.clock.now();
        e.clock.set(beat + e.settings.heartbeat_max_stale_seconds);
        let r = e.tick_spied();
        assert!(r.reconciled.is_empty(), "alive here: {alive_here}: {r:?}");
        e.board
            .conn()
            .execute("UPDATE tasks SET claim_lock = NULL WHERE id = ?1", [&id])
            .unwrap();
        let r = e.tick_spied();
        assert!(r.reconciled.is_empty(), "alive here: {alive_here}: {r:?}");
        assert_eq!(e.status(&id), Status::Running);
        e.clock
            .set(beat + e.settings.heartbeat_max_stale_seconds + 1);
        let r = e.tick_spied();
        assert_eq!(r.reconciled, [id.as_str()], "alive here: {alive_here}");
        assert!(e.fake.terminated.is_empty());
    }
}

#[test]
fn a_foreign_claim_without_a_worker_is_not_abandoned_by_its_claimer_s_pid() {
    let mut e = env();
    e.settings.crash_grace_seconds = 30;
    let id = e.create("unstarted elsewhere", 0, vec![]);
    // The claimer's pid (the `:1` of the lock) and a colliding one are both dead here.
    let run = e.claim_elsewhere(&id, None);
    e.clock.advance(60);
    let r = e.tick_spied();
    assert!(r.abandoned.is_empty(), "{r:?}");
    e.still_elsewhere(&id, run);
    e.clock.set(e.expires(&id) + 1);
    let r = e.tick_spied();
    assert_eq!(r.reclaimed, [id.as_str()]);
    assert!(!e.kinds(&id).iter().any(|k| k == "claim_abandoned"));
}

#[test]
fn an_ended_foreign_run_s_worker_is_never_stopped_here() {
    let mut e = env();
    e.fake.alive.insert(COLLIDING);
    // Reclaimed by an operator while its worker still runs on the other host: the successor
    // starts here without waiting for (or stopping) a process that is not on this host.
    let reclaimed = e.create("reclaimed by hand", 0, vec![]);
    e.claim_elsewhere(&reclaimed, Some(COLLIDING));
    assert!(
        e.board
            .reclaim(&reclaimed, Some("operator"), e.clock.now())
            .unwrap()
            .is_done()
    );
    let r = e.tick_spied();
    assert!(r.held_back.is_empty() && r.superseded.is_empty(), "{r:?}");
    assert_eq!(e.fake.spawns_of(&reclaimed), 1);
    // Completed elsewhere long ago, its worker still lingering there: not reaped from here.
    let finished = e.create("completed elsewhere", 0, vec![]);
    let run = e.claim_elsewhere(&finished, Some(COLLIDING));
    let done = e
        .board
        .complete(
            &finished,
            &Completion {
                expected_run_id: Some(run),
                summary: Some("ok".into()),
                ..Completion::default()
            },
            e.clock.now(),
        )
        .unwrap();
    assert!(done.is_done());
    e.clock.advance(tick::TERMINAL_REAP_GRACE_SECONDS + 1);
    let r = e.tick_spied();
    assert!(r.reaped_terminal.is_empty(), "{r:?}");
    assert!(e.fake.terminated.is_empty());
    // The run still names its worker: only its own host may clear it.
    let runs = e.board.runs(&finished).unwrap();
    assert_eq!(runs[0].worker_pid, Some(COLLIDING));
}

#[test]
fn in_owner_mode_a_run_another_host_s_owner_admitted_is_never_taken_over() {
    let mut e = env();
    e.settings.owner_mode = true;
    e.fake.alive.insert(COLLIDING);
    let admitted = e.create("admitted elsewhere", 0, vec![]);
    let plain = e.create("not admitted", 0, vec![]);
    let run = e.claim_elsewhere(&admitted, Some(COLLIDING));
    e.claim_elsewhere(&plain, Some(COLLIDING));
    // The other host's owner admitted the run: its state file and its pid live over there.
    let marker = board::Event::OwnerAdmitted {
        db: "/nonexistent/elsewhere/state.db".into(),
        session_id: "s1".into(),
        request_id: "r1".into(),
        pid: COLLIDING,
        birth: Some("other-boot|1".into()),
    };
    e.board
        .append_owner_marker(&admitted, run, FOREIGN_LOCK, &marker, "s1", e.clock.now())
        .unwrap();
    e.clock.set(e.expires(&admitted) + 1);
    let r = e.tick_spied();
    // Whether that turn started is unknowable here: never a second attempt from this host.
    assert_eq!(r.reclaimed, [plain.as_str()], "{r:?}");
    e.still_elsewhere(&admitted, run);
    e.clock.advance(e.settings.claim_ttl_seconds * 10);
    let r = e.tick_spied();
    assert!(!r.reclaimed.contains(&admitted), "{r:?}");
    e.still_elsewhere(&admitted, run);
    assert!(!e.kinds(&admitted).iter().any(|k| k == "reclaimed"));
}
