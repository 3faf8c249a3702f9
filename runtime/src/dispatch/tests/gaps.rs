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
