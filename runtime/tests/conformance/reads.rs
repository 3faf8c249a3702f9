use super::*;

pub(crate) fn list_tasks_filters_and_orders_by_priority_then_creation(s: &dyn Store) {
    let (_d, b) = s.board();
    let first = create(&b, "first");
    let second = create(&b, "second");
    let urgent = b
        .create_task(
            &NewTask {
                priority: 3,
                assignee: Some("Coder".into()),
                ..new("urgent")
            },
            T0 + 5,
        )
        .unwrap()
        .id;
    let gone = create(&b, "gone");
    b.archive(&gone, T0).unwrap();
    claim(&b, &second);
    let ids = |f: &TaskFilter| -> Vec<String> {
        b.list_tasks(f).unwrap().into_iter().map(|t| t.id).collect()
    };
    assert_eq!(
        ids(&TaskFilter::default()),
        [urgent.clone(), first.clone(), second.clone()]
    );
    let all = TaskFilter {
        include_archived: true,
        ..TaskFilter::default()
    };
    assert_eq!(ids(&all).len(), 4);
    let archived = TaskFilter {
        statuses: vec![Status::Archived],
        ..TaskFilter::default()
    };
    assert_eq!(ids(&archived), [gone]);
    let ready_or_running = TaskFilter {
        statuses: vec![Status::Ready, Status::Running],
        limit: Some(2),
        ..TaskFilter::default()
    };
    assert_eq!(ids(&ready_or_running), [urgent.clone(), first.clone()]);
    // Pages of the same order: a limit after an offset, and an offset alone.
    let page = TaskFilter {
        limit: Some(2),
        offset: Some(1),
        ..TaskFilter::default()
    };
    assert_eq!(ids(&page), [first.clone(), second.clone()]);
    let rest = TaskFilter {
        offset: Some(2),
        ..TaskFilter::default()
    };
    assert_eq!(ids(&rest), std::slice::from_ref(&second));
    let mine = TaskFilter {
        assignee: Some(" CODER ".into()),
        ..TaskFilter::default()
    };
    assert_eq!(ids(&mine), [urgent]);
    assert!(matches!(
        b.get_task("t_00000000"),
        Err(BoardError::TaskNotFound { .. })
    ));
}

pub(crate) fn events_read_newest_n_oldest_first_and_after_a_cursor(s: &dyn Store) {
    let (_d, b) = s.board();
    let a = create(&b, "a");
    let c = create(&b, "c");
    b.comment(&a, "x", "one", T0).unwrap();
    b.comment(&a, "x", "two", T0).unwrap();
    let all = b.events(&a, None).unwrap();
    assert_eq!(all.len(), 3);
    assert!(all.windows(2).all(|w| w[0].id < w[1].id), "oldest first");
    let newest = b.events(&a, Some(2)).unwrap();
    assert_eq!(
        newest.iter().map(|e| e.id).collect::<Vec<_>>(),
        all[1..].iter().map(|e| e.id).collect::<Vec<_>>()
    );
    let everything = b.events_after(0, 100).unwrap();
    assert_eq!(everything.len(), 4);
    assert_eq!(everything[1].task_id, c);
    let after = b.events_after(everything[1].id, 1).unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].id, everything[2].id);
    assert!(b.events_after(everything[3].id, 10).unwrap().is_empty());
    assert!(b.events("t_00000000", None).unwrap().is_empty());
    assert_eq!(
        all[0].payload.as_ref().unwrap()["status"],
        "ready",
        "payloads read back as JSON"
    );
    assert_eq!(all[1].created_at, T0);
}
