//! Task graphs (issue 29): `decompose` in one transaction (a failed last write leaves nothing),
//! `specify`, `schedule` and the tick's wake, `promote` with force and its dry run, `reassign`
//! with a reclaim, `unblock` with a reason — on every store.

use super::*;

fn all_tasks(b: &Board) -> Vec<Task> {
    b.list_tasks(&TaskFilter {
        include_archived: true,
        ..TaskFilter::default()
    })
    .unwrap()
}

fn child(title: &str, parents: &[usize]) -> NewChild {
    NewChild {
        title: title.to_owned(),
        parents: parents.to_vec(),
        ..NewChild::default()
    }
}

fn triage(b: &Board, title: &str) -> String {
    let t = NewTask {
        triage: true,
        ..new(title)
    };
    b.create_task(&t, T0).unwrap().id
}

pub(crate) fn decompose_is_one_transaction_and_a_failed_last_write_leaves_nothing(s: &dyn Store) {
    let (_d, b) = s.board();
    let root = triage(&b, "root");
    let children = [child("a", &[]), child("b", &[0]), child("c", &[0, 1])];
    let how = Decomposition {
        root_assignee: Some("orch"),
        promote: true,
        author: Some("op"),
    };
    let before = all_tasks(&b);
    let root_events = b.events(&root, None).unwrap();
    // The root's `decomposed` event is the last write before the promotions: every child, link,
    // the root's move and its comment were written when it fails.
    s.fail_event_insert(&b, &root, "decomposed");
    let failed = b.decompose(&root, &children, &how, T0);
    s.heal(&b);
    assert!(
        matches!(failed, Err(BoardError::Storage(StorageError::Sql(_)))),
        "{failed:?}"
    );
    assert_eq!(all_tasks(&b), before, "a partial graph was left");
    assert_eq!(b.events(&root, None).unwrap(), root_events);
    assert!(b.comments(&root).unwrap().is_empty());
    assert!(b.parents(&root).unwrap().is_empty());

    let d = b
        .decompose(&root, &children, &how, T0)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(
        d.child_statuses,
        [Status::Ready, Status::Todo, Status::Todo]
    );
    let c = &d.child_ids;
    let parents_of = |id: &str| -> Vec<String> {
        let mut p: Vec<String> = b.parents(id).unwrap().into_iter().map(|t| t.id).collect();
        p.sort();
        p
    };
    let mut sorted = c.clone();
    sorted.sort();
    assert_eq!(parents_of(&root), sorted);
    assert_eq!(parents_of(&c[1]), [c[0].clone()]);
    let mut c2 = vec![c[0].clone(), c[1].clone()];
    c2.sort();
    assert_eq!(parents_of(&c[2]), c2);
    let r = b.get_task(&root).unwrap();
    assert_eq!(
        (r.status, r.assignee.as_deref()),
        (Status::Todo, Some("orch"))
    );
    assert_eq!(
        last_event(&b, &root),
        Event::Decomposed {
            child_ids: c.clone(),
            root_assignee: Some("orch".into())
        }
    );
    assert!(matches!(
        b.decompose(&root, &[child("again", &[])], &how, T0)
            .unwrap(),
        Outcome::Refused(Refusal::AlreadyDecomposed { .. })
    ));
    assert_clean(&b);
}

pub(crate) fn decompose_refuses_a_bad_graph_or_a_root_out_of_triage(s: &dyn Store) {
    let (_d, b) = s.board();
    let root = triage(&b, "root");
    let ready = create(&b, "ready");
    let how = Decomposition::default();
    for bad in [
        vec![child("a", &[1]), child("b", &[0])],
        vec![child("a", &[3])],
        vec![child(" ", &[])],
        vec![],
    ] {
        let err = b.decompose(&root, &bad, &how, T0).unwrap_err();
        assert!(
            matches!(err, BoardError::InvalidDecomposition { .. }),
            "{err}"
        );
    }
    assert!(matches!(
        b.decompose(&ready, &[child("a", &[])], &how, T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus { .. })
    ));
    assert_eq!(all_tasks(&b).len(), 2);
    assert_eq!(status(&b, &root), Status::Triage);
    // Without promotion every child stays in todo.
    let d = b
        .decompose(&root, &[child("a", &[]), child("b", &[])], &how, T0)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(d.child_statuses, [Status::Todo, Status::Todo]);
    assert_clean(&b);
}

pub(crate) fn specify_moves_triage_on_and_refuses_any_other_status(s: &dyn Store) {
    let (_d, b) = s.board();
    let t = triage(&b, "rough");
    let spec = Specification {
        title: Some("clear".into()),
        body: Some("steps".into()),
        assignee: Some("dev".into()),
        author: Some("ace".into()),
    };
    let done = b.specify(&t, &spec, T0).unwrap().into_result().unwrap();
    assert_eq!(done.status, Status::Ready);
    assert_eq!(done.changed_fields, ["title", "body", "assignee"]);
    assert_eq!(
        kinds(&b, &t),
        ["created", "commented", "specified", "promoted"]
    );
    assert_eq!(b.comments(&t).unwrap()[0].author, "ace");
    assert!(matches!(
        b.specify(&t, &spec, T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus { .. })
    ));
    let u = triage(&b, "other");
    let blank = Specification {
        title: Some("  ".into()),
        ..Specification::default()
    };
    assert!(matches!(
        b.specify(&u, &blank, T0),
        Err(BoardError::BlankTitle)
    ));
    assert_eq!(status(&b, &u), Status::Triage);
    assert_clean(&b);
}

pub(crate) fn schedule_parks_a_task_and_the_wake_moves_it_at_its_time(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "parent");
    let free = create(&b, "free");
    let gated = child_of(&b, "gated", &[&p]);
    let running = create(&b, "running");
    let c = claim(&b, &running);
    b.schedule(&free, Some(T0 + 100), Some("later"), T0)
        .unwrap()
        .into_result()
        .unwrap();
    b.schedule(&gated, Some(T0 + 50), None, T0)
        .unwrap()
        .into_result()
        .unwrap();
    let parked = b
        .schedule(&running, Some(T0 + 100), None, T0)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(parked.run_id, Some(c.run_id));
    assert_eq!(
        b.runs(&running).unwrap()[0].outcome.as_deref(),
        Some("scheduled")
    );
    assert!(b.get_task(&running).unwrap().claim_lock.is_none());
    assert_eq!(
        last_event(&b, &free),
        Event::Scheduled {
            reason: Some("later".into()),
            at: Some(T0 + 100),
            actor: None,
        }
    );
    assert_eq!(b.next_due().unwrap(), Some(T0 + 50));
    assert!(b.wake_due(T0 + 49).unwrap().is_empty());
    assert_eq!(b.wake_due(T0 + 50).unwrap(), std::slice::from_ref(&gated));
    assert_eq!(status(&b, &gated), Status::Todo);
    let mut woken = b.wake_due(T0 + 100).unwrap();
    woken.sort();
    let mut expected = vec![free.clone(), running.clone()];
    expected.sort();
    assert_eq!(woken, expected);
    assert_eq!(status(&b, &free), Status::Ready);
    assert!(matches!(
        b.schedule(&p, Some(T0), None, T0).map(|o| o.is_done()),
        Ok(true)
    ));
    b.complete(&free, &Completion::default(), T0 + 101).ok();
    assert_clean(&b);
}

pub(crate) fn promote_force_passes_open_parents_and_a_dry_run_writes_nothing(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let c = child_of(&b, "c", &[&p]);
    let events = b.events(&c, None).unwrap();
    assert!(matches!(
        b.promote_dry_run(&c, false).unwrap(),
        Outcome::Refused(Refusal::ParentsNotDone { .. })
    ));
    let dry = b.promote_dry_run(&c, true).unwrap().into_result().unwrap();
    assert_eq!((dry.from, dry.to), (Status::Todo, Status::Ready));
    assert_eq!(b.events(&c, None).unwrap(), events);
    assert_eq!(status(&b, &c), Status::Todo);
    let forced = Promotion {
        actor: Some("op"),
        reason: None,
        force: true,
    };
    b.promote_with(&c, &forced, T0)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(status(&b, &c), Status::Ready);
    assert!(matches!(
        last_event(&b, &c),
        Event::PromotedManual { ref open_parents, .. } if open_parents == std::slice::from_ref(&p)
    ));
    // The forced promotion holds: fsck accepts it, the claim and the completion honour it.
    assert_clean(&b);
    let run = claim(&b, &c);
    let done = Completion {
        summary: Some("ran ahead of its parent".into()),
        expected_run_id: Some(run.run_id),
        ..Completion::default()
    };
    b.complete(&c, &done, T0 + 1)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(status(&b, &c), Status::Done);
    // A later link decides the gate again: a new child of the open parent waits.
    let d = child_of(&b, "d", &[&p]);
    assert!(matches!(
        b.promote(&d, None, None, T0).unwrap(),
        Outcome::Refused(Refusal::ParentsNotDone { .. })
    ));
    assert_clean(&b);
}

pub(crate) fn reassign_with_a_reclaim_is_one_step_and_unblock_leaves_its_reason(s: &dyn Store) {
    let (_d, b) = s.board();
    let t = b
        .create_task(
            &NewTask {
                assignee: Some("old".into()),
                ..new("t")
            },
            T0,
        )
        .unwrap()
        .id;
    claim(&b, &t);
    assert!(matches!(
        b.reassign(&t, "new", false, None, T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus { .. })
    ));
    let r = b
        .reassign(&t, "new", true, Some("model broken"), T0)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(
        (r.from.as_deref(), r.to.as_deref()),
        (Some("old"), Some("new"))
    );
    assert!(r.reclaimed.is_some());
    let task = b.get_task(&t).unwrap();
    assert_eq!(
        (task.status, task.assignee.as_deref()),
        (Status::Ready, Some("new"))
    );
    let k = kinds(&b, &t);
    assert_eq!(&k[k.len() - 2..], ["reclaimed", "assigned"]);

    let blocked = b
        .create_task(
            &NewTask {
                blocked: true,
                ..new("blocked")
            },
            T0,
        )
        .unwrap()
        .id;
    b.unblock_with_reason(&blocked, Some("fixed"), T0)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(b.comments(&blocked).unwrap()[0].body, "Unblocked: fixed");
    assert_clean(&b);
}
