use super::*;

pub(crate) fn create_without_parents_is_ready_with_a_created_event(s: &dyn Store) {
    let (_d, b) = s.board();
    let c = b
        .create_task(
            &NewTask {
                assignee: Some(" Coder ".into()),
                priority: 5,
                ..new("  write it  ")
            },
            T0,
        )
        .unwrap();
    assert!(!c.existing);
    assert!(c.id.starts_with("t_") && c.id.len() == 10, "{}", c.id);
    let t = b.get_task(&c.id).unwrap();
    assert_eq!(
        (t.title.as_str(), t.status, t.priority),
        ("write it", Status::Ready, 5)
    );
    assert_eq!(t.assignee.as_deref(), Some("coder"));
    assert_eq!(t.current_run_id, None);
    assert_eq!(kinds(&b, &c.id), ["created"]);
    assert_clean(&b);
}

pub(crate) fn create_with_an_unfinished_parent_starts_todo_and_waits(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "parent");
    let c = child_of(&b, "child", &[&p]);
    assert_eq!(status(&b, &c), Status::Todo);
    // As the original: the `created` event says todo and names the parents; no
    // `dependency_wait` on create.
    assert_eq!(kinds(&b, &c), ["created"]);
    let created = &b.events(&c, None).unwrap()[0];
    let payload = created.payload.as_ref().unwrap();
    assert_eq!(payload["status"], "todo");
    assert_eq!(payload["parents"], serde_json::json!([p]));
    for key in [
        "tenant",
        "workspace_kind",
        "workspace_path",
        "branch_name",
        "project_id",
        "skills",
        "goal_mode",
        "model_override",
        "provider_override",
    ] {
        assert!(
            payload.get(key).is_some(),
            "the original's key {key}: {payload}"
        );
    }
    assert_eq!(b.parents(&c).unwrap()[0].id, p);
    assert_eq!(b.children(&p).unwrap()[0].id, c);
    assert_clean(&b);
}

pub(crate) fn create_triage_and_blocked_initial_states(s: &dyn Store) {
    let (_d, b) = s.board();
    let t = b
        .create_task(
            &NewTask {
                triage: true,
                ..new("t")
            },
            T0,
        )
        .unwrap();
    assert_eq!(t.status, Status::Triage);
    let bl = b
        .create_task(
            &NewTask {
                blocked: true,
                ..new("b")
            },
            T0,
        )
        .unwrap();
    assert_eq!(bl.status, Status::Blocked);
    assert_eq!(kinds(&b, &bl.id), ["created", "blocked"]);
    let both = b.create_task(
        &NewTask {
            triage: true,
            blocked: true,
            ..new("x")
        },
        T0,
    );
    assert!(matches!(both, Err(BoardError::ConflictingInitialStatus)));
}

pub(crate) fn create_with_the_same_idempotency_key_returns_the_first_task(s: &dyn Store) {
    let (_d, b) = s.board();
    let t = NewTask {
        idempotency_key: Some("k1".into()),
        ..new("once")
    };
    let first = b.create_task(&t, T0).unwrap();
    let again = b.create_task(&t, T0 + 1).unwrap();
    assert_eq!(again.id, first.id);
    assert!(again.existing);
    assert_eq!(b.list_tasks(&TaskFilter::default()).unwrap().len(), 1);
}

pub(crate) fn create_refuses_blank_title_unknown_parent_and_bad_runtime(s: &dyn Store) {
    let (_d, b) = s.board();
    assert!(matches!(
        b.create_task(&new("   "), T0),
        Err(BoardError::BlankTitle)
    ));
    let orphan = NewTask {
        parents: vec!["t_deadbeef".into()],
        ..new("x")
    };
    let err = b.create_task(&orphan, T0).unwrap_err();
    assert!(err.to_string().contains("t_deadbeef"), "{err}");
    let bad = NewTask {
        max_runtime_seconds: Some(0),
        ..new("x")
    };
    assert!(matches!(
        b.create_task(&bad, T0),
        Err(BoardError::InvalidSeconds { .. })
    ));
    assert!(b.list_tasks(&TaskFilter::default()).unwrap().is_empty());
}

pub(crate) fn create_tasks_is_all_or_nothing_and_complete_many_reports_each_outcome(s: &dyn Store) {
    let (_d, b) = s.board();
    let err = b
        .create_tasks(&[new("first"), new("  "), new("third")], T0)
        .unwrap_err();
    assert!(matches!(err, BoardError::BlankTitle), "{err}");
    assert!(b.list_tasks(&TaskFilter::default()).unwrap().is_empty());
    let made = b.create_tasks(&[new("a"), new("b")], T0).unwrap();
    let ids: Vec<String> = made.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.iter().all(|id| status(&b, id) == Status::Ready));
    b.archive(&ids[1], T0).unwrap();
    let outcomes = b
        .complete_many(&ids, &Completion::default(), T0 + 1)
        .unwrap();
    assert!(matches!(outcomes[0], Outcome::Done(_)), "{outcomes:?}");
    assert!(matches!(outcomes[1], Outcome::Refused(_)), "{outcomes:?}");
    assert_eq!(status(&b, &ids[0]), Status::Done);
    assert_eq!(status(&b, &ids[1]), Status::Archived);
    let err = b
        .complete_many(&["t_deadbeef".to_owned()], &Completion::default(), T0)
        .unwrap_err();
    assert!(err.to_string().contains("t_deadbeef"), "{err}");
    assert_clean(&b);
}
