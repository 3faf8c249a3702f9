use super::tamper;
use super::*;

pub(crate) fn comment_is_stored_with_an_event_and_blank_is_refused(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let cid = b.comment(&id, "alice", "look at x", T0).unwrap();
    let cs = b.comments(&id).unwrap();
    assert_eq!(cs.len(), 1);
    assert_eq!(
        (cs[0].id, cs[0].author.as_str(), cs[0].body.as_str()),
        (cid, "alice", "look at x")
    );
    assert_eq!(
        last_event(&b, &id),
        Event::Commented {
            author: "alice".into(),
            len: 9
        }
    );
    assert!(matches!(
        b.comment(&id, "a", " \n", T0),
        Err(BoardError::BlankComment)
    ));
    assert!(matches!(
        b.comment("t_00000000", "a", "x", T0),
        Err(BoardError::TaskNotFound { .. })
    ));
    assert_eq!(b.comments(&id).unwrap().len(), 1);
}

pub(crate) fn link_demotes_a_ready_child_and_refuses_self_links_and_cycles(s: &dyn Store) {
    let (_d, b) = s.board();
    let a = create(&b, "a");
    let c = create(&b, "c");
    let l = b.link(&a, &c, T0).unwrap().into_result().unwrap();
    assert!(l.changed);
    assert_eq!(l.child_status, Status::Todo);
    assert_eq!(kinds(&b, &c), ["created", "dependency_wait", "linked"]);
    let again = b.link(&a, &c, T0).unwrap().into_result().unwrap();
    assert!(!again.changed);
    assert!(matches!(
        b.link(&a, &a, T0),
        Err(BoardError::SelfLink { .. })
    ));
    let d = child_of(&b, "d", &[&c]);
    let err = b.link(&d, &a, T0).unwrap_err();
    assert!(matches!(err, BoardError::Cycle { .. }), "{err}");
    assert!(err.to_string().contains("cycle"));
    assert_eq!(b.parents(&a).unwrap().len(), 0);
    assert_clean(&b);
}

pub(crate) fn link_refuses_a_running_child(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let c = create(&b, "c");
    claim(&b, &c);
    assert!(matches!(
        b.link(&p, &c, T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus { .. })
    ));
    assert!(b.parents(&c).unwrap().is_empty());
}

pub(crate) fn unlink_frees_a_todo_child_and_refuses_a_missing_edge(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let c = child_of(&b, "c", &[&p]);
    let u = b.unlink(&p, &c, T0).unwrap().into_result().unwrap();
    assert_eq!(u.child_status, Status::Ready);
    assert_eq!(&kinds(&b, &c)[1..], ["unlinked", "promoted"]);
    assert!(matches!(
        b.unlink(&p, &c, T0).unwrap(),
        Outcome::Refused(Refusal::NotLinked { .. })
    ));
}

pub(crate) fn promote_needs_finished_parents(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let c = child_of(&b, "c", &[&p]);
    assert!(matches!(
        b.promote(&c, Some("op"), None, T0).unwrap(),
        Outcome::Refused(Refusal::ParentsNotDone { .. })
    ));
    let t = b
        .create_task(
            &NewTask {
                triage: true,
                ..new("t")
            },
            T0,
        )
        .unwrap()
        .id;
    let m = b
        .promote(&t, Some("op"), Some("looks fine"), T0)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!((m.from, m.to), (Status::Triage, Status::Ready));
    assert!(matches!(last_event(&b, &t), Event::PromotedManual { .. }));
    assert!(matches!(
        b.promote(&t, None, None, T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus { .. })
    ));
}

pub(crate) fn recompute_ready_promotes_only_free_todo_tasks(s: &dyn Store) {
    let (_d, b) = s.board();
    let p = create(&b, "p");
    let c = child_of(&b, "c", &[&p]);
    let blocked = b
        .create_task(
            &NewTask {
                blocked: true,
                ..new("b")
            },
            T0,
        )
        .unwrap()
        .id;
    assert!(b.recompute_ready(T0).unwrap().is_empty());
    tamper::set_status(&b, &p, "done");
    assert_eq!(b.recompute_ready(T0).unwrap(), vec![c.clone()]);
    assert_eq!(status(&b, &c), Status::Ready);
    assert_eq!(status(&b, &blocked), Status::Blocked, "blocked is sticky");
}
