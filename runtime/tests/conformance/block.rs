use super::tamper;
use super::*;

pub(crate) fn block_closes_the_run_and_parks_the_task(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    let out = b
        .block(
            &id,
            Some(BlockKind::NeedsInput),
            "which db?",
            Some(run),
            T0 + 5,
        )
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(
        (out.status, out.recurrences, out.run_id),
        (Status::Blocked, 1, Some(run))
    );
    let t = b.get_task(&id).unwrap();
    assert_eq!(t.block_kind, Some(BlockKind::NeedsInput));
    assert_eq!((t.claim_lock, t.current_run_id), (None, None));
    assert_eq!(
        b.run(run).unwrap().unwrap().outcome.as_deref(),
        Some("blocked")
    );
    assert_eq!(kinds(&b, &id).last().unwrap(), "blocked");
    assert_clean(&b);
}

pub(crate) fn dependency_block_without_an_open_parent_becomes_needs_input(s: &dyn Store) {
    let (_d, b) = s.board();
    let c = create(&b, "c");
    claim(&b, &c);
    let out = b
        .block(&c, Some(BlockKind::Dependency), "wait", None, T0)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(
        (out.status, out.kind),
        (Status::Blocked, Some(BlockKind::NeedsInput))
    );
    assert!(matches!(
        last_event(&b, &c),
        Event::Blocked {
            requested_kind: Some(BlockKind::Dependency),
            ..
        }
    ));
    assert_clean(&b);
}

pub(crate) fn dependency_block_with_an_open_parent_waits_in_todo(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let c = create(&b, "c");
    let run = claim(&b, &c).run_id;
    // Give the running task an open parent behind the board's back (links refuse running tasks).
    tamper::add_link(&b, &p, &c);
    let out = b
        .block(&c, Some(BlockKind::Dependency), "needs p", Some(run), T0)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(out.status, Status::Todo);
    assert_eq!(kinds(&b, &c).last().unwrap(), "dependency_wait");
    b.complete(&p, &Completion::default(), T0).unwrap();
    assert_eq!(status(&b, &c), Status::Ready, "promoted when p finished");
    assert_clean(&b);
}

pub(crate) fn the_same_block_kind_twice_in_a_row_goes_to_triage(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    claim(&b, &id);
    b.block(&id, Some(BlockKind::Transient), "flaky", None, T0)
        .unwrap();
    b.unblock(&id, T0 + 1).unwrap().into_result().unwrap();
    assert_eq!(status(&b, &id), Status::Ready);
    claim(&b, &id);
    let out = b
        .block(&id, Some(BlockKind::Transient), "flaky again", None, T0 + 2)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!((out.status, out.recurrences), (Status::Triage, 2));
    assert!(matches!(
        last_event(&b, &id),
        Event::BlockLoopDetected {
            recurrences: 2,
            limit: 2,
            ..
        }
    ));
    assert_clean(&b);
}

pub(crate) fn block_refusals_change_nothing(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    assert!(matches!(
        b.block(&id, None, "x", Some(run + 1), T0).unwrap(),
        Outcome::Refused(Refusal::StaleRun { .. })
    ));
    assert!(matches!(
        b.block(&id, None, "  ", None, T0),
        Err(BoardError::BlankReason)
    ));
    assert_eq!(status(&b, &id), Status::Running);
    let todo = child_of(&b, "c", &[&id]);
    assert!(matches!(
        b.block(&todo, None, "x", None, T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus { .. })
    ));
    assert!(matches!(
        b.unblock(&id, T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus { .. })
    ));
    assert_eq!(kinds(&b, &id), ["created", "claimed"]);
}

pub(crate) fn unblock_lands_in_todo_while_a_parent_is_open_and_resets_failures(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let c = b
        .create_task(
            &NewTask {
                blocked: true,
                parents: vec![p.clone()],
                ..new("c")
            },
            T0,
        )
        .unwrap()
        .id;
    tamper::set_failures(&b, &c, 2);
    let moved = b.unblock(&c, T0).unwrap().into_result().unwrap();
    assert_eq!((moved.from, moved.to), (Status::Blocked, Status::Todo));
    assert_eq!(b.get_task(&c).unwrap().consecutive_failures, 0);
    assert_eq!(
        last_event(&b, &c),
        Event::Unblocked {
            status: Some(Status::Todo),
            resume_status: Some(Status::Ready),
            actor: None,
        }
    );
}
