use super::*;

/// A task `coder` implemented, claimed by `host:1` and handed to review for `reviewer`.
fn in_review(b: &Board) -> (String, i64) {
    let id = b
        .create_task(
            &NewTask {
                assignee: Some("coder".into()),
                ..new("t")
            },
            T0,
        )
        .unwrap()
        .id;
    let run = claim(b, &id).run_id;
    let r = b
        .request_review(&id, Some(run), Some("Reviewer"), Some("done\nmore"), T0 + 1)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(r.run_id, Some(run));
    (id, run)
}

fn claim_review(b: &Board, id: &str, now: i64) -> Claimed {
    match b.claim_review(id, &spec("host:2"), now).unwrap() {
        ClaimOutcome::Claimed(c) => c,
        ClaimOutcome::Lost(r) => panic!("lost: {r}"),
    }
}

pub(crate) fn request_review_closes_the_run_and_hands_the_task_to_the_reviewer(s: &dyn Store) {
    let (_d, b) = s.board();
    let (id, run) = in_review(&b);
    let t = b.get_task(&id).unwrap();
    assert_eq!(t.status, Status::Review);
    assert_eq!(t.assignee.as_deref(), Some("reviewer"));
    assert_eq!((t.claim_lock, t.current_run_id), (None, None));
    let r = b.run(run).unwrap().unwrap();
    assert_eq!(
        (r.outcome.as_deref(), r.ended_at),
        (Some("review_requested"), Some(T0 + 1))
    );
    assert_eq!(r.summary.as_deref(), Some("done\nmore"));
    let last = b.events(&id, Some(1)).unwrap().remove(0);
    assert_eq!(last.run_id, Some(run), "the event names the closed run");
    assert_eq!(
        last.decode().unwrap(),
        Event::ReviewRequested {
            summary: Some("done".into()),
            implementer: Some("coder".into()),
            reviewer: Some("reviewer".into()),
        }
    );
    // The review lane offers it, unclaimed.
    let lane = b.lane_candidates(Status::Review, 0, 10).unwrap();
    assert_eq!(lane.len(), 1);
    assert_eq!(
        (lane[0].id.as_str(), lane[0].lane),
        (id.as_str(), Status::Review)
    );
    assert!(b.lane_candidates(Status::Ready, 0, 10).unwrap().is_empty());
    assert_clean(&b);
}

pub(crate) fn request_review_of_an_unclaimed_task_records_a_zero_length_run(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let r = b
        .request_review(&id, None, None, None, T0 + 5)
        .unwrap()
        .into_result()
        .unwrap();
    let run = b.run(r.run_id.unwrap()).unwrap().unwrap();
    assert_eq!(
        (run.started_at, run.ended_at, run.outcome.as_deref()),
        (T0 + 5, Some(T0 + 5), Some("review_requested"))
    );
    assert_eq!((r.implementer, r.reviewer), (None, None));
    assert_eq!(status(&b, &id), Status::Review);
    assert_clean(&b);
}

pub(crate) fn request_review_refusals_change_nothing(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    let before = b.get_task(&id).unwrap();
    assert!(matches!(
        b.request_review(&id, Some(run + 1), None, None, T0)
            .unwrap(),
        Outcome::Refused(Refusal::StaleRun { .. })
    ));
    assert!(matches!(
        b.request_review(&id, None, None, None, T0 + 1).unwrap(),
        Outcome::Refused(Refusal::LiveClaim { .. })
    ));
    assert!(matches!(
        b.request_review(&id, Some(run), Some("  "), None, T0),
        Err(BoardError::BlankAssignee)
    ));
    assert_eq!(b.get_task(&id).unwrap(), before);
    assert_eq!(kinds(&b, &id), ["created", "claimed"]);
    let todo = child_of(&b, "child", &[&id]);
    assert!(matches!(
        b.request_review(&todo, None, None, None, T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus {
            status: Status::Todo,
            ..
        })
    ));
    assert!(b.runs(&todo).unwrap().is_empty());
}

pub(crate) fn a_reviewer_claims_from_review_and_requests_changes(s: &dyn Store) {
    let (_d, b) = s.board();
    let (id, _) = in_review(&b);
    // An implementer's claim does not take a review task.
    assert!(matches!(
        b.claim(&id, &spec("host:3"), T0 + 2).unwrap(),
        ClaimOutcome::Lost(Refusal::WrongStatus {
            status: Status::Review,
            ..
        })
    ));
    let c = claim_review(&b, &id, T0 + 2);
    assert_eq!(
        last_event(&b, &id),
        Event::Claimed {
            lock: "host:2".into(),
            expires: T0 + 2 + 900,
            run_id: c.run_id,
            source_status: Some(Status::Review),
            dispatcher: false,
        }
    );
    assert_eq!(status(&b, &id), Status::Running);
    assert!(matches!(
        b.request_changes(&id, Some(c.run_id), "  ", T0 + 3),
        Err(BoardError::BlankReason)
    ));
    assert!(matches!(
        b.request_changes(&id, Some(c.run_id + 1), "fix it", T0 + 3)
            .unwrap(),
        Outcome::Refused(Refusal::StaleRun { .. })
    ));
    let back = b
        .request_changes(&id, Some(c.run_id), " fix the tests ", T0 + 3)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(
        (back.status, back.assignee.as_deref(), back.run_id),
        (Status::Ready, Some("coder"), Some(c.run_id))
    );
    assert_eq!(
        b.run(c.run_id).unwrap().unwrap().outcome.as_deref(),
        Some("changes_requested")
    );
    assert_eq!(
        last_event(&b, &id),
        Event::ChangesRequested {
            reason: "fix the tests".into(),
            implementer: Some("coder".into()),
            reviewer: Some("reviewer".into()),
            status: Status::Ready,
        }
    );
    let t = b.get_task(&id).unwrap();
    assert_eq!(
        (t.status, t.assignee.as_deref()),
        (Status::Ready, Some("coder"))
    );
    assert_eq!((t.claim_lock, t.current_run_id), (None, None));
    assert_clean(&b);
}

pub(crate) fn request_changes_needs_a_reviewers_run(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    assert!(matches!(
        b.request_changes(&id, Some(run), "no", T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus {
            status: Status::Running,
            ..
        })
    ));
    assert_eq!(kinds(&b, &id), ["created", "claimed"]);
    assert!(b.run(run).unwrap().unwrap().is_open());
}

pub(crate) fn a_released_reviewer_run_goes_back_to_review(s: &dyn Store) {
    let (_d, b) = s.board();
    let (id, _) = in_review(&b);
    let c = claim_review(&b, &id, T0 + 2);
    let release = Release {
        claim_lock: Some("host:2"),
        run_id: Some(c.run_id),
        outcome: "crashed",
        event: Event::Crashed {
            pid: Some(7),
            claimer: Some("host:2".into()),
            exit_kind: Some("exit".into()),
            exit_code: Some(1),
            terminal_provider: None,
            worker_output: None,
            retry_status: Status::Ready,
        },
        failure: Failure::Counted {
            limit: 3,
            source: "config",
        },
        error: "exit 1".into(),
    };
    let r = b
        .release_claim(&id, &release, T0 + 3)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(
        (r.status, r.failures, r.gave_up),
        (Status::Review, 1, false)
    );
    assert!(matches!(
        last_event(&b, &id),
        Event::Crashed {
            retry_status: Status::Review,
            ..
        }
    ));
    assert_eq!(
        b.get_task(&id).unwrap().assignee.as_deref(),
        Some("reviewer")
    );
    assert_clean(&b);
}

pub(crate) fn review_reopen_takes_an_unclaimed_review_task_back_to_its_implementer(s: &dyn Store) {
    let (_d, b) = s.board();
    let (id, _) = in_review(&b);
    let back = b.review_reopen(&id, T0 + 2).unwrap().into_result().unwrap();
    assert_eq!(
        (back.status, back.assignee.as_deref(), back.run_id),
        (Status::Ready, Some("coder"), None)
    );
    assert_eq!(
        last_event(&b, &id),
        Event::ReviewReopened {
            status: Some(Status::Ready),
            implementer: Some("coder".into()),
        }
    );
    assert!(matches!(
        b.review_reopen(&id, T0 + 3).unwrap(),
        Outcome::Refused(Refusal::WrongStatus {
            status: Status::Ready,
            ..
        })
    ));
    // Claimed by its reviewer, it is not the operator's to take back.
    let (id2, _) = in_review(&b);
    claim_review(&b, &id2, T0 + 2);
    assert!(matches!(
        b.review_reopen(&id2, T0 + 3).unwrap(),
        Outcome::Refused(Refusal::WrongStatus {
            status: Status::Running,
            ..
        })
    ));
    assert_clean(&b);
}

pub(crate) fn a_batch_claims_a_review_task_for_its_reviewer_lane(s: &dyn Store) {
    let (_d, b) = s.board();
    let (id, _) = in_review(&b);
    let ready = create(&b, "ready");
    let picks = [
        (id.clone(), Status::Review),
        (ready.clone(), Status::Ready),
        // The implementer's lane cannot take a review task.
        (id.clone(), Status::Ready),
    ];
    let out = b.claim_batch(&picks, &spec("host:2"), T0 + 2).unwrap();
    let run = match &out[0] {
        Ok(ClaimOutcome::Claimed(c)) => c.run_id,
        other => panic!("{other:?}"),
    };
    assert!(
        matches!(&out[1], Ok(ClaimOutcome::Claimed(_))),
        "{:?}",
        out[1]
    );
    assert!(
        matches!(
            &out[2],
            Ok(ClaimOutcome::Lost(Refusal::WrongStatus {
                status: Status::Running,
                ..
            }))
        ),
        "{:?}",
        out[2]
    );
    assert!(matches!(
        last_event(&b, &id),
        Event::Claimed {
            source_status: Some(Status::Review),
            ..
        }
    ));
    assert_eq!(b.get_task(&id).unwrap().current_run_id, Some(run));
    assert!(
        b.request_changes(&id, Some(run), "again", T0 + 3)
            .unwrap()
            .is_done(),
        "a batch-claimed review run is a reviewer's run"
    );
    assert_clean(&b);
}
