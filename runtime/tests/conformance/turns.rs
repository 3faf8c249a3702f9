use super::*;

fn claimed(s: &dyn Store, title: &str) -> (Guard, Board, String, i64) {
    let (d, b) = s.board();
    let id = create(&b, title);
    let run = claim(&b, &id).run_id;
    (d, b, id, run)
}

fn turn(n: u32) -> Event {
    Event::Turn {
        turn: n,
        kind: TurnKind::First,
        exit: "ok".into(),
        exit_code: 0,
        seconds: 1,
    }
}

pub(crate) fn an_open_run_is_running_for_its_claim_only_and_live_until_it_expires(s: &dyn Store) {
    let (_d, b, id, run) = claimed(s, "t");
    assert_eq!(
        b.turn_run_status(&id, run, "host:1").unwrap(),
        RunStatus::Running
    );
    assert_eq!(
        b.turn_run_status(&id, run, "host:2").unwrap(),
        RunStatus::Superseded
    );
    assert_eq!(
        b.turn_run_status(&id, run + 1, "host:1").unwrap(),
        RunStatus::Superseded
    );
    assert_eq!(
        b.turn_run_status("t_none", run, "host:1").unwrap(),
        RunStatus::Superseded
    );
    assert!(b.claim_is_live(&id, run, "host:1", T0 + 900).unwrap());
    assert!(!b.claim_is_live(&id, run, "host:1", T0 + 901).unwrap());
    assert!(!b.claim_is_live(&id, run, "host:2", T0).unwrap());
}

pub(crate) fn a_run_the_worker_closed_reads_as_its_outcome_and_still_takes_its_turn_event(
    s: &dyn Store,
) {
    let (_d, b, id, run) = claimed(s, "t");
    let done = Completion {
        expected_run_id: Some(run),
        ..Completion::default()
    };
    assert!(b.complete(&id, &done, T0).unwrap().is_done());
    assert_eq!(
        b.turn_run_status(&id, run, "host:1").unwrap(),
        RunStatus::Done
    );
    assert!(!b.claim_is_live(&id, run, "host:1", T0).unwrap());
    assert!(
        b.record_turn(&id, run, "host:1", &turn(1), T0)
            .unwrap()
            .is_done()
    );
    let last = b.events(&id, Some(1)).unwrap().remove(0);
    assert_eq!((last.kind.as_str(), last.run_id), ("turn", Some(run)));
    assert_eq!(last.decode().unwrap(), turn(1));

    let (_d, b, id, run) = claimed(s, "u");
    assert!(
        b.block(&id, None, "stuck", Some(run), T0)
            .unwrap()
            .is_done()
    );
    assert_eq!(
        b.turn_run_status(&id, run, "host:1").unwrap(),
        RunStatus::Blocked
    );
}

pub(crate) fn a_reclaimed_run_is_superseded_and_its_turn_event_is_refused(s: &dyn Store) {
    let (_d, b, id, run) = claimed(s, "t");
    assert!(b.reclaim(&id, Some("operator"), T0).unwrap().is_done());
    assert_eq!(
        b.turn_run_status(&id, run, "host:1").unwrap(),
        RunStatus::Superseded
    );
    let before = b.events(&id, None).unwrap().len();
    let refused = b.record_turn(&id, run, "host:1", &turn(2), T0).unwrap();
    assert!(
        matches!(refused, Outcome::Refused(Refusal::StaleRun { .. })),
        "{refused:?}"
    );
    assert_eq!(b.events(&id, None).unwrap().len(), before);
}
