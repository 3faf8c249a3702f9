use super::tamper;
use super::*;

pub(crate) fn complete_closes_the_run_and_promotes_children(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let other = create(&b, "other parent");
    let c = child_of(&b, "c", &[&p, &other]);
    let solo = child_of(&b, "solo", &[&p]);
    let run = claim(&b, &p).run_id;
    let done = b
        .complete(
            &p,
            &Completion {
                expected_run_id: Some(run),
                summary: Some("did it\nmore".into()),
                result: Some("42".into()),
                force: false,
                ..Default::default()
            },
            T0 + 10,
        )
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(done.run_id, Some(run));
    assert_eq!(done.promoted, vec![solo.clone()]);
    let t = b.get_task(&p).unwrap();
    assert_eq!(t.status, Status::Done);
    assert_eq!(t.result.as_deref(), Some("42"));
    assert_eq!((t.claim_lock, t.current_run_id), (None, None));
    let r = b.run(run).unwrap().unwrap();
    assert_eq!(r.outcome.as_deref(), Some("completed"));
    assert_eq!(r.ended_at, Some(T0 + 10));
    assert_eq!(
        last_event(&b, &p),
        Event::Completed {
            result_len: 2,
            summary: Some("did it".into()),
            verified_cards: None,
            forced: None,
            evidence: None
        }
    );
    assert_eq!(status(&b, &c), Status::Todo, "other parent still open");
    assert_eq!(status(&b, &solo), Status::Ready);
    assert_eq!(kinds(&b, &solo).last().unwrap(), "promoted");
    assert_clean(&b);
}

pub(crate) fn complete_with_a_stale_run_is_refused(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    let out = b
        .complete(
            &id,
            &Completion {
                expected_run_id: Some(run + 7),
                ..Completion::default()
            },
            T0,
        )
        .unwrap();
    assert!(matches!(out, Outcome::Refused(Refusal::StaleRun { .. })));
    assert_eq!(status(&b, &id), Status::Running);
    assert!(b.run(run).unwrap().unwrap().is_open());
}

pub(crate) fn complete_under_a_live_claim_needs_the_run_or_force(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    claim(&b, &id);
    let out = b.complete(&id, &Completion::default(), T0 + 1).unwrap();
    assert!(matches!(out, Outcome::Refused(Refusal::LiveClaim { .. })));
    assert_eq!(status(&b, &id), Status::Running);
    let forced = Completion {
        force: true,
        ..Completion::default()
    };
    assert!(b.complete(&id, &forced, T0 + 2).unwrap().is_done());
    assert_eq!(status(&b, &id), Status::Done);
    assert_clean(&b);
}

pub(crate) fn complete_after_the_claim_expired_needs_no_force(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    claim(&b, &id);
    assert!(
        b.complete(&id, &Completion::default(), T0 + 901)
            .unwrap()
            .is_done()
    );
}

pub(crate) fn complete_refuses_done_tasks_and_unfinished_parents(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let c = child_of(&b, "c", &[&p]);
    tamper::set_status(&b, &c, "blocked");
    assert!(matches!(
        b.complete(&c, &Completion::default(), T0).unwrap(),
        Outcome::Refused(Refusal::ParentsNotDone { .. })
    ));
    assert!(
        b.complete(&p, &Completion::default(), T0)
            .unwrap()
            .is_done()
    );
    assert!(matches!(
        b.complete(&p, &Completion::default(), T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus {
            status: Status::Done,
            ..
        })
    ));
}
