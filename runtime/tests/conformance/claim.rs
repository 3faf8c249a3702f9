use super::tamper;
use super::*;
use kanban_runtime::board::StorageError;

fn batch(ids: &[&str]) -> Vec<(String, Status)> {
    ids.iter()
        .map(|id| (id.to_string(), Status::Ready))
        .collect()
}

fn claimed_runs(b: &Board, id: &str) -> usize {
    b.runs(id).unwrap().len()
}

pub(crate) fn claim_opens_a_run_and_sets_the_lease(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let c = claim(&b, &id);
    assert_eq!(c.claim_expires, T0 + 900);
    let t = b.get_task(&id).unwrap();
    assert_eq!(t.status, Status::Running);
    assert_eq!(t.current_run_id, Some(c.run_id));
    assert_eq!(t.claim_lock.as_deref(), Some("host:1"));
    assert_eq!(t.last_heartbeat_at, Some(T0));
    assert_eq!(t.started_at, Some(T0));
    let runs = b.runs(&id).unwrap();
    assert_eq!(runs.len(), 1);
    assert!(runs[0].is_open());
    assert_eq!(
        last_event(&b, &id),
        Event::Claimed {
            lock: "host:1".into(),
            expires: T0 + 900,
            run_id: c.run_id,
            source_status: None,
            dispatcher: false,
        }
    );
    assert_clean(&b);
}

pub(crate) fn second_claim_loses_and_changes_nothing(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    claim(&b, &id);
    let before = b.get_task(&id).unwrap();
    let lost = b.claim(&id, &spec("host:2"), T0 + 1).unwrap();
    assert!(matches!(
        lost,
        ClaimOutcome::Lost(Refusal::WrongStatus {
            status: Status::Running,
            ..
        })
    ));
    assert_eq!(b.get_task(&id).unwrap(), before);
    assert_eq!(b.runs(&id).unwrap().len(), 1);
}

pub(crate) fn claim_with_a_reopened_parent_demotes_to_todo(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let c = child_of(&b, "c", &[&p]);
    // Someone forced the child to ready behind the board's back.
    tamper::set_status(&b, &c, "ready");
    let lost = b.claim(&c, &spec("h:1"), T0).unwrap();
    assert!(matches!(
        lost,
        ClaimOutcome::Lost(Refusal::ParentsNotDone { .. })
    ));
    assert_eq!(status(&b, &c), Status::Todo);
    assert_eq!(kinds(&b, &c).last().unwrap(), "claim_rejected");
    assert!(b.runs(&c).unwrap().is_empty());
    assert_clean(&b);
}

pub(crate) fn claim_refuses_a_non_positive_ttl_and_unknown_task(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let neg = ClaimSpec {
        lock: "h:1".into(),
        ttl_seconds: -5,
        origin: kanban_runtime::board::ClaimOrigin::External,
    };
    assert!(matches!(
        b.claim(&id, &neg, T0),
        Err(BoardError::InvalidSeconds { .. })
    ));
    assert_eq!(status(&b, &id), Status::Ready);
    assert!(matches!(
        b.claim("t_00000000", &spec("h:1"), T0),
        Err(BoardError::TaskNotFound { .. })
    ));
}

pub(crate) fn reclaimed_task_claims_again_with_a_fresh_heartbeat(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let first = claim(&b, &id);
    b.heartbeat(&id, &Fence::default(), None, 900, T0 + 50)
        .unwrap();
    b.reclaim(&id, Some("stuck"), T0 + 100).unwrap();
    let second = match b.claim(&id, &spec("h:2"), T0 + 200).unwrap() {
        ClaimOutcome::Claimed(c) => c,
        ClaimOutcome::Lost(r) => panic!("{r}"),
    };
    assert_ne!(first.run_id, second.run_id);
    let t = b.get_task(&id).unwrap();
    assert_eq!(t.last_heartbeat_at, Some(T0 + 200));
    assert_eq!(t.started_at, Some(T0), "started_at keeps the first claim");
    assert_clean(&b);
}

pub(crate) fn heartbeat_extends_the_claim_and_stamps_task_and_run(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let c = claim(&b, &id);
    let fence = Fence {
        claim_lock: Some("host:1".into()),
        run_id: Some(c.run_id),
    };
    let hb = b
        .heartbeat(&id, &fence, Some("halfway"), 600, T0 + 100)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(hb.claim_expires, T0 + 700);
    let t = b.get_task(&id).unwrap();
    assert_eq!(
        (t.claim_expires, t.last_heartbeat_at),
        (Some(T0 + 700), Some(T0 + 100))
    );
    let run = b.run(c.run_id).unwrap().unwrap();
    assert_eq!(
        (run.claim_expires, run.last_heartbeat_at),
        (Some(T0 + 700), Some(T0 + 100))
    );
    assert_eq!(
        last_event(&b, &id),
        Event::Heartbeat {
            note: Some("halfway".into())
        }
    );
}

pub(crate) fn heartbeat_with_a_stale_run_or_foreign_lock_is_refused(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let c = claim(&b, &id);
    let before = b.get_task(&id).unwrap();
    let stale = Fence {
        claim_lock: None,
        run_id: Some(c.run_id + 1),
    };
    assert!(matches!(
        b.heartbeat(&id, &stale, None, 900, T0 + 1).unwrap(),
        Outcome::Refused(Refusal::StaleRun { .. })
    ));
    let foreign = Fence {
        claim_lock: Some("other:9".into()),
        run_id: None,
    };
    assert!(matches!(
        b.heartbeat(&id, &foreign, None, 900, T0 + 1).unwrap(),
        Outcome::Refused(Refusal::NotClaimHolder { .. })
    ));
    assert_eq!(b.get_task(&id).unwrap(), before);
    assert_eq!(kinds(&b, &id), ["created", "claimed"]);
    let ready = create(&b, "r");
    assert!(matches!(
        b.heartbeat(&ready, &Fence::default(), None, 900, T0)
            .unwrap(),
        Outcome::Refused(Refusal::WrongStatus { .. })
    ));
}

pub(crate) fn claim_batch_claims_each_task_once_with_its_own_run_and_event(s: &dyn Store) {
    let (_d, b) = s.board();
    let ids: Vec<String> = (0..3).map(|i| create(&b, &format!("t{i}"))).collect();
    // The first task twice: the second pick loses its compare-and-swap.
    let picks = batch(&[&ids[0], &ids[1], &ids[0], &ids[2]]);
    let out = b.claim_batch(&picks, &spec("host:1"), T0).unwrap();
    assert_eq!(out.len(), 4);
    let mut runs = Vec::new();
    for (i, o) in out.iter().enumerate() {
        match o {
            Ok(ClaimOutcome::Claimed(c)) => {
                assert_ne!(i, 2, "the repeated pick must lose");
                runs.push(c.run_id);
            }
            Ok(ClaimOutcome::Lost(Refusal::WrongStatus {
                task_id, status, ..
            })) => {
                assert_eq!(i, 2);
                assert_eq!(task_id, &ids[0]);
                assert_eq!(*status, Status::Running);
            }
            other => panic!("pick {i}: {other:?}"),
        }
    }
    runs.dedup();
    assert_eq!(runs.len(), 3, "one run per claimed task");
    for (id, run) in ids.iter().zip([runs[0], runs[1], runs[2]]) {
        let t = b.get_task(id).unwrap();
        assert_eq!(t.status, Status::Running);
        assert_eq!(t.current_run_id, Some(run));
        assert_eq!(t.claim_lock.as_deref(), Some("host:1"));
        assert_eq!(claimed_runs(&b, id), 1);
        let claimed = kinds(&b, id).iter().filter(|k| *k == "claimed").count();
        assert_eq!(claimed, 1, "one claimed event for {id}");
        assert_eq!(
            b.events(id, Some(1)).unwrap()[0].run_id,
            Some(run),
            "the event names the run"
        );
    }
    assert_clean(&b);
}

pub(crate) fn claim_batch_a_lost_compare_and_swap_does_not_abort_the_others(s: &dyn Store) {
    let (_d, b) = s.board();
    let taken = create(&b, "taken");
    let parent = create(&b, "parent");
    let waiting = child_of(&b, "child", &[&parent]);
    let free = create(&b, "free");
    let review = create(&b, "for review");
    // Someone else claimed `taken` first.
    let other = match b.claim(&taken, &spec("other:2"), T0).unwrap() {
        ClaimOutcome::Claimed(c) => c,
        ClaimOutcome::Lost(r) => panic!("lost: {r}"),
    };
    let mut picks = batch(&[&taken, &waiting, &free]);
    // A ready task picked for the review lane: the review claim's CAS loses.
    picks.push((review.clone(), Status::Review));
    let out = b.claim_batch(&picks, &spec("host:1"), T0).unwrap();
    assert!(matches!(
        &out[0],
        Ok(ClaimOutcome::Lost(Refusal::WrongStatus { .. }))
    ));
    assert!(matches!(
        &out[1],
        Ok(ClaimOutcome::Lost(Refusal::WrongStatus { .. }))
    ));
    assert!(
        matches!(&out[2], Ok(ClaimOutcome::Claimed(_))),
        "{:?}",
        out[2]
    );
    assert!(matches!(
        &out[3],
        Ok(ClaimOutcome::Lost(Refusal::WrongStatus { .. }))
    ));
    // The loser changed nothing; the winner of `taken` keeps its claim.
    let t = b.get_task(&taken).unwrap();
    assert_eq!(t.claim_lock.as_deref(), Some("other:2"));
    assert_eq!(t.current_run_id, Some(other.run_id));
    assert_eq!(claimed_runs(&b, &taken), 1);
    assert_eq!(status(&b, &waiting), Status::Todo);
    assert_eq!(status(&b, &free), Status::Running);
    assert_eq!(status(&b, &review), Status::Ready);
    assert_eq!(claimed_runs(&b, &review), 0);
    assert_clean(&b);
}

pub(crate) fn claim_batch_a_failed_claim_is_rolled_back_alone_and_the_others_commit(s: &dyn Store) {
    let (_d, b) = s.board();
    let first = create(&b, "first");
    let doomed = create(&b, "doomed");
    let last = create(&b, "last");
    // Fail `doomed`'s claim at its last step (the `claimed` event), after its run row and task
    // update were written: the savepoint must undo both.
    s.fail_event_insert(&b, &doomed, "claimed");
    let picks = batch(&[&first, &doomed, "t_nosuchtask", &last]);
    let out = b.claim_batch(&picks, &spec("host:1"), T0).unwrap();
    assert!(
        matches!(&out[0], Ok(ClaimOutcome::Claimed(_))),
        "{:?}",
        out[0]
    );
    assert!(
        matches!(&out[1], Err(BoardError::Storage(StorageError::Sql(_)))),
        "{:?}",
        out[1]
    );
    assert!(
        matches!(&out[2], Err(BoardError::TaskNotFound { .. })),
        "{:?}",
        out[2]
    );
    assert!(
        matches!(&out[3], Ok(ClaimOutcome::Claimed(_))),
        "{:?}",
        out[3]
    );
    s.heal(&b);
    // The failed claim left no trace; the others are committed.
    let d = b.get_task(&doomed).unwrap();
    assert_eq!(d.status, Status::Ready);
    assert_eq!(d.claim_lock, None);
    assert_eq!(d.current_run_id, None);
    assert_eq!(claimed_runs(&b, &doomed), 0);
    assert!(!kinds(&b, &doomed).contains(&"claimed".to_owned()));
    for id in [&first, &last] {
        assert_eq!(status(&b, id), Status::Running);
        assert_eq!(claimed_runs(&b, id), 1);
    }
    // The rolled-back task is claimable afterwards.
    assert!(matches!(
        b.claim_batch(&batch(&[&doomed]), &spec("host:1"), T0)
            .unwrap()[0],
        Ok(ClaimOutcome::Claimed(_))
    ));
    assert_clean(&b);
}

pub(crate) fn claim_batch_with_a_bad_ttl_is_refused_and_changes_nothing(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let bad = ClaimSpec {
        lock: "host:1".to_owned(),
        ttl_seconds: 0,
        origin: kanban_runtime::board::ClaimOrigin::External,
    };
    let err = b.claim_batch(&batch(&[&id]), &bad, T0).unwrap_err();
    assert!(matches!(err, BoardError::InvalidSeconds { .. }), "{err:?}");
    assert_eq!(status(&b, &id), Status::Ready);
    assert_eq!(claimed_runs(&b, &id), 0);
    assert!(b.claim_batch(&[], &spec("host:1"), T0).unwrap().is_empty());
}
