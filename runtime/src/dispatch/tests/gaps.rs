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
