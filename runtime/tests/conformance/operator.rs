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

pub(crate) fn reopen_sends_a_done_task_back_and_invalidates_its_descendants(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let running = child_of(&b, "running child", &[&p]);
    let done = child_of(&b, "done child", &[&p]);
    let grandchild = child_of(&b, "grandchild", &[&done]);
    let unrelated = create(&b, "unrelated");
    assert!(
        b.complete(&p, &Completion::default(), T0)
            .unwrap()
            .is_done()
    );
    let run = claim(&b, &running).run_id;
    assert!(
        b.complete(&done, &Completion::default(), T0)
            .unwrap()
            .is_done()
    );
    assert_eq!(status(&b, &grandchild), Status::Ready);
    let r = b
        .reopen(&p, Some(" wrong answer "), T0 + 10)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(r.status, Status::Ready);
    let mut invalidated: Vec<(String, Status, Option<i64>)> = r
        .invalidated
        .iter()
        .map(|i| (i.task_id.clone(), i.prior_status, i.run_id))
        .collect();
    invalidated.sort();
    let mut expected = vec![
        (running.clone(), Status::Running, Some(run)),
        (done.clone(), Status::Done, None),
        (grandchild.clone(), Status::Ready, None),
    ];
    expected.sort();
    assert_eq!(invalidated, expected);
    assert_eq!(
        last_event(&b, &p),
        Event::Status {
            status: Status::Ready,
            reason: "reopened: wrong answer".into(),
            parent: None,
            previous_status: Some(Status::Done),
            resume_status: None,
            actor: None,
        }
    );
    for id in [&running, &done, &grandchild] {
        let t = b.get_task(id).unwrap();
        assert_eq!(t.status, Status::Todo, "{id}");
        assert_eq!((t.claim_lock, t.current_run_id), (None, None));
        let k = kinds(&b, id);
        assert_eq!(
            &k[k.len() - 3..],
            ["descendant_invalidated", "status", "commented"],
            "{id}"
        );
        assert_eq!(b.comments(id).unwrap().len(), 1, "a comment on {id}");
    }
    let closed = b.run(run).unwrap().unwrap();
    assert_eq!(closed.outcome.as_deref(), Some("reclaimed"));
    assert_eq!(closed.ended_at, Some(T0 + 10));
    assert_eq!(status(&b, &unrelated), Status::Ready);
    assert!(matches!(
        b.reopen(&p, None, T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus {
            status: Status::Ready,
            ..
        })
    ));
    assert_clean(&b);
}

pub(crate) fn reopen_lands_in_todo_under_an_unfinished_parent(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let c = child_of(&b, "c", &[&p]);
    // Done while its parent is open: only an operator's force does that.
    tamper::set_status(&b, &c, "done");
    let r = b.reopen(&c, None, T0).unwrap().into_result().unwrap();
    assert_eq!((r.status, r.invalidated.len()), (Status::Todo, 0));
    assert!(matches!(
        last_event(&b, &c),
        Event::Status {
            status: Status::Todo,
            ..
        }
    ));
    assert_clean(&b);
}

pub(crate) fn edit_changes_only_what_it_names_with_one_event(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "old");
    let e = b
        .edit(
            &id,
            &Edit {
                title: Some("  new  ".into()),
                priority: Some(0),
                max_retries: Some(4),
                ..Edit::default()
            },
            T0,
        )
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(e.fields, ["title", "max_retries"], "priority was already 0");
    let t = b.get_task(&id).unwrap();
    assert_eq!(
        (t.title.as_str(), t.priority, t.max_retries),
        ("new", 0, Some(4))
    );
    assert_eq!(
        last_event(&b, &id),
        Event::Edited {
            fields: vec!["title".into(), "max_retries".into()],
            result_len: None,
            summary: None,
        }
    );
    // An edit that changes nothing writes nothing.
    let same = b
        .edit(
            &id,
            &Edit {
                title: Some("new".into()),
                ..Edit::default()
            },
            T0,
        )
        .unwrap()
        .into_result()
        .unwrap();
    assert!(same.fields.is_empty());
    assert_eq!(kinds(&b, &id), ["created", "edited"]);
}

pub(crate) fn edit_refusals_change_nothing(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    assert!(matches!(
        b.edit(&id, &Edit::default(), T0),
        Err(BoardError::NothingToEdit)
    ));
    let blank = Edit {
        title: Some(" ".into()),
        ..Edit::default()
    };
    assert!(matches!(
        b.edit(&id, &blank, T0),
        Err(BoardError::BlankTitle)
    ));
    let retries = Edit {
        max_retries: Some(0),
        ..Edit::default()
    };
    assert!(matches!(
        b.edit(&id, &retries, T0),
        Err(BoardError::InvalidMaxRetries { value: 0 })
    ));
    let body = Edit {
        body: Some("b".into()),
        ..Edit::default()
    };
    assert!(matches!(
        b.edit("t_00000000", &body, T0),
        Err(BoardError::TaskNotFound { .. })
    ));
    b.archive(&id, T0).unwrap();
    assert!(matches!(
        b.edit(&id, &body, T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus {
            status: Status::Archived,
            ..
        })
    ));
    assert_eq!(b.get_task(&id).unwrap().body, None);
    assert_eq!(kinds(&b, &id).last().unwrap(), "archived");
}

pub(crate) fn a_unique_id_prefix_resolves_and_others_are_refused(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    assert_eq!(b.resolve_task_id(&id).unwrap(), id);
    assert_eq!(b.resolve_task_id(&id[..6]).unwrap(), id);
    assert_eq!(b.resolve_task_id(&id[2..7]).unwrap(), id, "without `t_`");
    assert!(matches!(
        b.resolve_task_id(&id[..4]),
        Err(BoardError::IdPrefixTooShort { .. })
    ));
    assert!(matches!(
        b.resolve_task_id("t_%%%%"),
        Err(BoardError::TaskNotFound { .. })
    ));
    let other = if id.starts_with("t_0") { "t_1" } else { "t_0" };
    assert!(matches!(
        b.resolve_task_id(&format!("{other}000")),
        Err(BoardError::TaskNotFound { .. })
    ));
}
