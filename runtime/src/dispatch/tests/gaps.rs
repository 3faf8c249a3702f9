//! Tick tests of the behaviours matched with the original: terminal-worker reaping, the review
//! lane, respawn guards and the systemic crash breaker (manual clock, scripted processes).

use super::*;

fn complete_as_worker(e: &Env, id: &str) {
    let run_id = e.board.get_task(id).unwrap().current_run_id;
    let c = Completion {
        expected_run_id: run_id,
        summary: Some("done".into()),
        ..Completion::default()
    };
    assert!(e.board.complete(id, &c, e.clock.now()).unwrap().is_done());
}

#[test]
fn a_worker_lingering_after_its_task_is_done_is_terminated_after_the_grace() {
    let mut e = env();
    let id = e.create("finishes but never exits", 0, vec![]);
    e.tick();
    let pid = e.fake.pid_of(&id);
    complete_as_worker(&e, &id);
    // Within the grace the worker may still be exiting on its own.
    e.clock.advance(tick::TERMINAL_REAP_GRACE_SECONDS - 1);
    assert!(e.tick().reaped_terminal.is_empty());
    assert!(e.fake.terminated.is_empty());
    e.clock.advance(2);
    let r = e.tick();
    assert_eq!(r.reaped_terminal, [id.as_str()]);
    assert_eq!(e.fake.terminated, [pid]);
    let kinds = e.kinds(&id);
    assert_eq!(
        kinds
            .iter()
            .filter(|k| *k == "terminal_worker_reaped")
            .count(),
        1
    );
    let run = &e.board.runs(&id).unwrap()[0];
    assert_eq!(run.worker_pid, None, "the run forgets the pid");
    // Nothing more to do on later ticks.
    e.clock.advance(300);
    assert!(e.tick().reaped_terminal.is_empty());
    assert_eq!(e.fake.terminated, [pid]);
}

#[test]
fn an_exited_worker_of_a_closed_run_is_forgotten_quietly() {
    let mut e = env();
    let id = e.create("exits normally", 0, vec![]);
    e.tick();
    complete_as_worker(&e, &id);
    e.fake.exit(&id, WorkerExit::Exited { code: 0 });
    e.clock.advance(tick::TERMINAL_REAP_GRACE_SECONDS + 1);
    let r = e.tick();
    assert!(r.reaped_terminal.is_empty());
    assert!(e.fake.terminated.is_empty());
    assert!(!e.kinds(&id).contains(&"terminal_worker_reaped".to_owned()));
    assert_eq!(e.board.runs(&id).unwrap()[0].worker_pid, None);
}

#[test]
fn a_lingering_worker_that_survives_termination_is_tried_again() {
    let mut e = env();
    let id = e.create("stubborn", 0, vec![]);
    e.tick();
    let pid = e.fake.pid_of(&id);
    complete_as_worker(&e, &id);
    e.fake.survive.insert(pid);
    e.clock.advance(tick::TERMINAL_REAP_GRACE_SECONDS + 1);
    assert!(e.tick().reaped_terminal.is_empty());
    assert_eq!(e.board.runs(&id).unwrap()[0].worker_pid, Some(pid));
    e.fake.survive.clear();
    assert_eq!(e.tick().reaped_terminal, [id.as_str()]);
    assert_eq!(e.fake.terminated, [pid, pid]);
}

/// Runs a ready task through an implementer and hands it to review; returns nothing (the task
/// is in `review`, assigned to `p`).
fn into_review(e: &mut Env, id: &str) {
    e.tick();
    let run_id = e.board.get_task(id).unwrap().current_run_id;
    let r = e
        .board
        .request_review(id, run_id, None, Some("please look"), e.clock.now())
        .unwrap();
    assert!(r.is_done(), "{r:?}");
    assert_eq!(e.status(id), Status::Review);
}

fn claimed_from_review(e: &Env, id: &str) -> bool {
    e.board
        .events(id, None)
        .unwrap()
        .iter()
        .rev()
        .find(|ev| ev.kind == "claimed")
        .and_then(|ev| ev.payload.clone())
        .is_some_and(|p| p["source_status"] == "review")
}

#[test]
fn a_review_task_is_claimed_from_review_after_the_ready_lane() {
    let mut e = env();
    let id = e.create("reviewed", 0, vec![]);
    into_review(&mut e, &id);
    let r = e.tick();
    assert_eq!(r.spawned.len(), 1);
    assert_eq!(r.spawned[0].lane, Status::Review);
    assert_eq!(e.status(&id), Status::Running);
    assert!(claimed_from_review(&e, &id));
    // The reviewer asks for changes: back to ready for the implementer, failures kept.
    let run_id = e.board.get_task(&id).unwrap().current_run_id;
    let back = e
        .board
        .request_changes(&id, run_id, "needs tests", e.clock.now())
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(back.status, Status::Ready);
    let r = e.tick();
    assert_eq!(r.spawned[0].lane, Status::Ready);
    assert!(!claimed_from_review(&e, &id));
}

#[test]
fn every_reclaim_path_sends_a_reviewer_run_back_to_review() {
    // A crash.
    let mut e = env();
    let id = e.create("crash", 0, vec![]);
    into_review(&mut e, &id);
    e.tick();
    e.fake.exit(&id, WorkerExit::Exited { code: 1 });
    let r = e.tick();
    assert_eq!(r.exited[0].status, Status::Review);
    let crashed = e.board.events(&id, None).unwrap();
    let crashed = crashed.iter().find(|ev| ev.kind == "crashed").unwrap();
    assert_eq!(crashed.payload.as_ref().unwrap()["retry_status"], "review");
    // The review lane picks it up again in the same tick, still as a reviewer's run.
    assert_eq!(r.spawned[0].lane, Status::Review);

    // An expired claim whose worker is gone.
    let mut e = env();
    let id = e.create("expired", 0, vec![]);
    into_review(&mut e, &id);
    e.tick();
    let pid = e.fake.pid_of(&id);
    e.fake.alive.remove(&pid);
    e.settings.crash_grace_seconds = i64::MAX / 2;
    e.clock.advance(e.settings.claim_ttl_seconds + 1);
    e.settings.review_dispatch = false;
    let r = e.tick();
    assert_eq!(r.reclaimed, [id.as_str()]);
    assert_eq!(e.status(&id), Status::Review);

    // An orphan (running without a claim).
    let mut e = env();
    let id = e.create("orphan", 0, vec![]);
    into_review(&mut e, &id);
    e.tick();
    let pid = e.fake.pid_of(&id);
    e.fake.alive.remove(&pid);
    e.board
        .conn()
        .execute("UPDATE tasks SET claim_lock = NULL WHERE id = ?1", [&id])
        .unwrap();
    e.settings.review_dispatch = false;
    let r = e.tick();
    assert_eq!(r.reconciled, [id.as_str()]);
    assert_eq!(e.status(&id), Status::Review);

    // An operator's reclaim.
    let mut e = env();
    let id = e.create("operator", 0, vec![]);
    into_review(&mut e, &id);
    e.tick();
    let r = e
        .board
        .reclaim(&id, Some("stuck"), e.clock.now())
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(r.retry_status, Status::Review);
    assert_eq!(e.status(&id), Status::Review);
}

#[test]
fn a_blocked_reviewer_run_resumes_in_review_after_unblock() {
    let mut e = env();
    let id = e.create("blocked review", 0, vec![]);
    into_review(&mut e, &id);
    e.tick();
    let run_id = e.board.get_task(&id).unwrap().current_run_id;
    e.board
        .block(&id, None, "need the spec", run_id, e.clock.now())
        .unwrap();
    assert_eq!(e.status(&id), Status::Blocked);
    let moved = e
        .board
        .unblock(&id, e.clock.now())
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(moved.to, Status::Review);
}

#[test]
fn dry_run_reports_the_review_lane_and_review_dispatch_can_be_turned_off() {
    let mut e = env();
    let id = e.create("to review", 0, vec![]);
    into_review(&mut e, &id);
    e.settings.dry_run = true;
    let r = e.tick();
    assert_eq!(r.spawned.len(), 1);
    assert_eq!(
        (r.spawned[0].task_id.as_str(), r.spawned[0].lane),
        (id.as_str(), Status::Review)
    );
    assert_eq!(e.status(&id), Status::Review, "a dry run claims nothing");
    e.settings.dry_run = false;
    e.settings.review_dispatch = false;
    assert!(e.tick().spawned.is_empty());
    assert_eq!(e.status(&id), Status::Review);
}

#[test]
fn one_slot_is_kept_for_the_review_lane_when_the_budget_is_tight() {
    let mut e = env();
    let reviewed = e.create("reviewed", 0, vec![]);
    into_review(&mut e, &reviewed);
    let _ready: Vec<String> = (0..3)
        .map(|i| e.create(&format!("r{i}"), 9, vec![]))
        .collect();
    e.settings.max_spawn = 2;
    let r = e.tick();
    let lanes: Vec<Status> = r.spawned.iter().map(|s| s.lane).collect();
    assert_eq!(lanes, [Status::Ready, Status::Review]);
}

/// The fake, except that spawning the listed tasks fails with the given error once each.
struct FailingSpawn<'a> {
    inner: &'a mut Fake,
    fail: HashMap<String, fn() -> SpawnError>,
}

impl Workers for FailingSpawn<'_> {
    fn spawn(&mut self, req: &SpawnRequest) -> Result<i64, SpawnError> {
        match self.fail.remove(&req.task_id) {
            Some(make) => Err(make()),
            None => self.inner.spawn(req),
        }
    }
    fn reap(&mut self) -> Vec<Reaped> {
        self.inner.reap()
    }
    fn exit_of(&mut self, pid: i64) -> Option<WorkerExit> {
        self.inner.exit_of(pid)
    }
    fn liveness(&self, pid: i64, fp: Option<&str>) -> Liveness {
        self.inner.liveness(pid, fp)
    }
    fn fingerprint(&self, pid: i64) -> Option<String> {
        self.inner.fingerprint(pid)
    }
    fn terminate(&mut self, pid: i64, fp: Option<&str>, wait: KillWait) -> Termination {
        self.inner.terminate(pid, fp, wait)
    }
    fn children(&self) -> usize {
        self.inner.children()
    }
}

impl Env {
    fn tick_failing(&mut self, id: &str, make: fn() -> SpawnError) -> TickReport {
        let mut w = FailingSpawn {
            inner: &mut self.fake,
            fail: HashMap::from([(id.to_owned(), make)]),
        };
        tick(&mut self.board, &self.settings, &self.clock, &mut w).unwrap()
    }

    fn guarded_events(&self, id: &str) -> Vec<String> {
        self.board
            .events(id, None)
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == "respawn_guarded")
            .map(|e| e.payload.unwrap()["reason"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// Ticks three times: each tick holds exactly `held` back with `reason` while `bystander` (a
/// plain ready task) is spawned on the first; the board gets one `respawn_guarded` event.
fn assert_held(e: &mut Env, held: &str, bystander: &str, reason: &str) {
    for round in 0..3 {
        let r = e.tick();
        let guarded: Vec<(String, &str)> = r
            .respawn_guarded
            .iter()
            .map(|g| (g.task_id.clone(), g.guard.reason()))
            .collect();
        assert_eq!(guarded, [(held.to_owned(), reason)], "round {round}");
        let spawned: Vec<&str> = r.spawned.iter().map(|s| s.task_id.as_str()).collect();
        if round == 0 {
            assert_eq!(spawned, [bystander]);
        } else {
            assert!(spawned.is_empty());
        }
    }
    assert_eq!(e.status(held), Status::Ready);
    assert_eq!(e.guarded_events(held), [reason]);
}

fn spawns_now(e: &mut Env, id: &str) {
    let r = e.tick();
    assert!(r.respawn_guarded.is_empty(), "{:?}", r.respawn_guarded);
    assert_eq!(
        r.spawned
            .iter()
            .map(|s| s.task_id.as_str())
            .collect::<Vec<_>>(),
        [id]
    );
}

#[test]
fn rate_limit_cooldown_guard_holds_one_task_until_the_cooldown_ends() {
    let mut e = env();
    let id = e.create("quota", 0, vec![]);
    e.tick();
    e.fake.exit(&id, WorkerExit::Exited { code: 75 });
    let r = e.tick();
    assert_eq!(r.exited[0].class, exit::ExitClass::RateLimited);
    let bystander = e.create("bystander", 0, vec![]);
    assert_held(&mut e, &id, &bystander, "rate_limit_cooldown");
    e.clock.advance(e.settings.rate_limit_cooldown_seconds);
    spawns_now(&mut e, &id);
}

#[test]
fn infrastructure_cooldown_guard_holds_after_a_host_spawn_failure_without_counting_it() {
    let mut e = env();
    let id = e.create("no executable", 0, vec![]);
    let r = e.tick_failing(&id, || {
        SpawnError::Executable(std::io::Error::from(std::io::ErrorKind::NotFound))
    });
    assert_eq!(r.spawn_failed.len(), 1);
    assert_eq!(e.board.get_task(&id).unwrap().consecutive_failures, 0);
    let bystander = e.create("bystander", 0, vec![]);
    assert_held(&mut e, &id, &bystander, "infrastructure_cooldown");
    e.clock.advance(e.settings.rate_limit_cooldown_seconds);
    spawns_now(&mut e, &id);
}

#[test]
fn blocker_auth_guard_holds_until_the_task_is_reassigned() {
    let mut e = env();
    e.settings.profiles.insert("q".into());
    let id = e.create("needs credentials", 0, vec![]);
    let r = e.tick_failing(&id, || SpawnError::Workspace {
        path: "/ws".into(),
        source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
    });
    assert_eq!(r.spawn_failed.len(), 1);
    let t = e.board.get_task(&id).unwrap();
    assert!(guard::reads_like_quota_or_auth(
        t.last_failure_error.as_deref().unwrap()
    ));
    let bystander = e.create("bystander", 0, vec![]);
    assert_held(&mut e, &id, &bystander, "blocker_auth");
    // Another profile does help (reassignment clears the error).
    e.board.assign(&id, Some("q"), e.clock.now()).unwrap();
    spawns_now(&mut e, &id);
}

#[test]
fn recent_success_guard_holds_a_task_that_completed_within_the_hour() {
    let mut e = env();
    let id = e.create("just done", 0, vec![]);
    e.tick();
    complete_as_worker(&e, &id);
    // Hand-edited back to ready (or by another implementation sharing the board), no requeue.
    e.board
        .conn()
        .execute("UPDATE tasks SET status = 'ready' WHERE id = ?1", [&id])
        .unwrap();
    let bystander = e.create("bystander", 0, vec![]);
    assert_held(&mut e, &id, &bystander, "recent_success");
    e.clock.advance(guard::RECENT_SUCCESS_SECONDS);
    spawns_now(&mut e, &id);
}

#[test]
fn active_pr_guard_holds_a_task_with_an_open_pull_request_until_a_hand_off() {
    let mut e = env();
    e.settings.profiles.insert("q".into());
    let id = e.create("has a PR", 0, vec![]);
    e.board.assign(&id, Some("p"), e.clock.now()).unwrap();
    e.board
        .comment(
            &id,
            "p",
            "opened https://github.com/acme/widgets/pull/12",
            e.clock.now(),
        )
        .unwrap();
    e.clock.advance(1);
    let bystander = e.create("bystander", 0, vec![]);
    assert_held(&mut e, &id, &bystander, "active_pr");
    e.clock.advance(1);
    e.board.assign(&id, Some("q"), e.clock.now()).unwrap();
    spawns_now(&mut e, &id);
}

#[test]
fn a_guarded_task_does_not_keep_until_idle_waiting_unless_it_cools_down() {
    let mut e = env();
    let id = e.create("has a PR", 0, vec![]);
    e.board
        .comment(&id, "p", "https://github.com/a/b/pull/1", e.clock.now())
        .unwrap();
    let r = e.tick();
    assert_eq!(r.respawn_guarded.len(), 1);
    assert!(r.is_idle(), "an open PR needs a person, not a wait");
}

#[test]
fn four_workers_failing_identically_in_one_tick_are_all_blocked_as_systemic() {
    let mut e = env();
    e.settings.max_spawn = 8;
    let ids: Vec<String> = (0..4)
        .map(|i| e.create(&format!("w{i}"), 0, vec![]))
        .collect();
    let other = e.create("fails differently", 0, vec![]);
    assert_eq!(e.tick().spawned.len(), 5);
    for id in &ids {
        e.fake.exit(id, WorkerExit::Exited { code: 1 });
    }
    e.fake.exit(&other, WorkerExit::Signaled { signal: 9 });
    let r = e.tick();
    let mut systemic = r.systemic.clone();
    systemic.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(systemic, expected);
    assert!(
        r.spawned.iter().all(|s| s.task_id == other),
        "{:?}",
        r.spawned
    );
    for id in &ids {
        let t = e.board.get_task(id).unwrap();
        assert_eq!(t.status, Status::Blocked, "{id}");
        let gave_up: Vec<_> = e
            .board
            .events(id, None)
            .unwrap()
            .into_iter()
            .filter(|ev| ev.kind == "gave_up")
            .collect();
        assert_eq!(gave_up.len(), 1, "{id}");
        let p = gave_up[0].payload.clone().unwrap();
        assert_eq!(p["systemic_workers"], 4);
        assert_eq!(p["sticky"], true);
        assert_eq!(p["limit_source"], "systemic");
        assert_eq!(p["error_fingerprint"], "pid n exited with code 1");
    }
    // Sticky: later ticks leave them blocked.
    e.clock.advance(3600);
    e.tick();
    assert!(ids.iter().all(|id| e.status(id) == Status::Blocked));
    // The different failure was counted normally and retried.
    assert_eq!(e.board.get_task(&other).unwrap().consecutive_failures, 1);
}

#[test]
fn two_identical_failures_are_not_systemic() {
    let mut e = env();
    let ids: Vec<String> = (0..2)
        .map(|i| e.create(&format!("w{i}"), 0, vec![]))
        .collect();
    e.tick();
    for id in &ids {
        e.fake.exit(id, WorkerExit::Exited { code: 1 });
    }
    let r = e.tick();
    assert!(r.systemic.is_empty());
    assert!(r.gave_up.is_empty());
    assert!(
        ids.iter().all(|id| e.status(id) == Status::Running),
        "retried"
    );
}

#[test]
fn the_error_fingerprint_masks_pids_and_timestamps_and_keeps_80_characters() {
    use tick::error_fingerprint as fp;
    assert_eq!(
        fp("pid 4242 exited with code 1"),
        "pid n exited with code 1"
    );
    assert_eq!(
        fp("Worker PID 7 died at 1800000123: boom"),
        "worker pid n died at <ts>: boom"
    );
    assert_eq!(fp("pid 1 x"), fp("pid 123456 x"));
    assert_ne!(fp("exit 12"), fp("exit 13"));
    // The worker's log chrome and task ids do not split one failure into many.
    assert_eq!(
        fp(
            "pid 9806 exited with code 1: [kanban-run] run=1 task=t_e78a61f6 pid=9806\n\
            kanban worker: task t_e78a61f6 run 1\ncannot reach the model server"
        ),
        fp(
            "pid 12 exited with code 1: [kanban-run] run=7 task=t_00ab12cd pid=12\n\
            kanban worker: task t_00ab12cd run 7\ncannot reach the model server"
        ),
    );
    assert_eq!(fp("lost t_0badf00d"), "lost t_<id>");
    let long = format!("pid 9 {}", "x".repeat(200));
    assert_eq!(fp(&long).chars().count(), 80);
}

#[test]
fn reopening_an_ancestor_stops_the_worker_of_a_running_descendant() {
    let mut e = env();
    let parent = e.create("parent", 0, vec![]);
    let child = e.create("child", 0, vec![parent.clone()]);
    e.tick();
    complete_as_worker(&e, &parent);
    e.tick();
    assert_eq!(e.status(&child), Status::Running);
    let pid = e.fake.pid_of(&child);
    let reopened = e
        .board
        .reopen(&parent, None, e.clock.now())
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(reopened.invalidated[0].worker_pid, Some(pid));
    assert_eq!(e.status(&child), Status::Todo);
    e.tick();
    assert!(e.fake.terminated.contains(&pid), "{:?}", e.fake.terminated);
    assert!(!e.fake.alive.contains(&pid));
    assert_eq!(e.status(&child), Status::Todo);
}
