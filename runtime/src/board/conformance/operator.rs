use super::tamper;
use super::*;

pub(crate) fn archive_closes_the_run_and_frees_children(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let c = child_of(&b, "c", &[&p]);
    let run = claim(&b, &p).run_id;
    let a = b.archive(&p, T0 + 3).unwrap().into_result().unwrap();
    assert_eq!(
        (a.prev_status, a.run_id, a.claim_lock.as_deref()),
        (Status::Running, Some(run), Some("host:1"))
    );
    assert_eq!(a.promoted, vec![c.clone()]);
    assert_eq!(
        b.run(run).unwrap().unwrap().outcome.as_deref(),
        Some("reclaimed")
    );
    assert_eq!(status(&b, &c), Status::Ready);
    assert!(matches!(
        b.archive(&p, T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus { .. })
    ));
    assert_clean(&b);
}

pub(crate) fn operator_reclaim_returns_the_task_to_ready(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    tamper::set_failures(&b, &id, 1);
    tamper::set_worker_pid(&b, &id, 4242);
    let r = b
        .reclaim(&id, Some("wedged"), T0 + 9)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(
        (r.retry_status, r.worker_pid, r.run_id),
        (Status::Ready, Some(4242), Some(run))
    );
    let t = b.get_task(&id).unwrap();
    assert_eq!(
        (t.status, t.consecutive_failures, t.claim_lock),
        (Status::Ready, 0, None)
    );
    let run = b.run(run).unwrap().unwrap();
    assert_eq!(run.error.as_deref(), Some("manual_reclaim: wedged"));
    assert!(matches!(
        last_event(&b, &id),
        Event::Reclaimed {
            manual: Some(true),
            ..
        }
    ));
    assert!(matches!(
        b.reclaim(&id, None, T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus { .. })
    ));
    assert_clean(&b);
}

pub(crate) fn assign_records_from_and_is_refused_while_running(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let a = b
        .assign(&id, Some("Coder"), T0)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!((a.from, a.to.as_deref()), (None, Some("coder")));
    assert_eq!(
        last_event(&b, &id),
        Event::Assigned {
            assignee: Some("coder".into()),
            from: None,
            source: None
        }
    );
    claim(&b, &id);
    assert!(matches!(
        b.assign(&id, Some("other"), T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus { .. })
    ));
    assert_eq!(b.get_task(&id).unwrap().assignee.as_deref(), Some("coder"));
    assert!(matches!(
        b.assign(&id, Some(" "), T0),
        Err(BoardError::BlankAssignee)
    ));
}
