//! Unit tests of the transitions: each one applied, each refusal (nothing changed), and the
//! events written with them. Time is a plain integer moved by hand.

use super::*;

const T0: i64 = 1_700_000_000;

fn board() -> (tempfile::TempDir, Board) {
    let dir = tempfile::tempdir().unwrap();
    let board = Board::open_path(&dir.path().join("kanban.db"), &OpenOptions::create()).unwrap();
    (dir, board)
}

fn new(title: &str) -> NewTask {
    NewTask {
        title: title.to_owned(),
        ..NewTask::default()
    }
}

fn create(b: &Board, title: &str) -> String {
    b.create_task(&new(title), T0).unwrap().id
}

fn child_of(b: &Board, title: &str, parents: &[&str]) -> String {
    let t = NewTask {
        parents: parents.iter().map(|p| p.to_string()).collect(),
        ..new(title)
    };
    b.create_task(&t, T0).unwrap().id
}

fn spec(lock: &str) -> ClaimSpec {
    ClaimSpec {
        lock: lock.to_owned(),
        ttl_seconds: 900,
    }
}

fn claim(b: &Board, id: &str) -> Claimed {
    match b.claim(id, &spec("host:1"), T0).unwrap() {
        ClaimOutcome::Claimed(c) => c,
        ClaimOutcome::Lost(r) => panic!("lost: {r}"),
    }
}

fn kinds(b: &Board, id: &str) -> Vec<String> {
    b.events(id, None)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

fn last_event(b: &Board, id: &str) -> Event {
    b.events(id, Some(1)).unwrap()[0].decode().unwrap()
}

fn status(b: &Board, id: &str) -> Status {
    b.get_task(id).unwrap().status
}

fn assert_clean(b: &Board) {
    let v = b.fsck().unwrap();
    assert!(v.is_empty(), "fsck: {v:?}");
}

// ---------------------------------------------------------------- create

#[test]
fn create_without_parents_is_ready_with_a_created_event() {
    let (_d, b) = board();
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

#[test]
fn create_with_an_unfinished_parent_starts_todo_and_waits() {
    let (_d, b) = board();
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

#[test]
fn create_triage_and_blocked_initial_states() {
    let (_d, b) = board();
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

#[test]
fn create_with_the_same_idempotency_key_returns_the_first_task() {
    let (_d, b) = board();
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

#[test]
fn create_refuses_blank_title_unknown_parent_and_bad_runtime() {
    let (_d, b) = board();
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

// ---------------------------------------------------------------- claim

#[test]
fn create_tasks_is_all_or_nothing_and_complete_many_reports_each_outcome() {
    let (_d, b) = board();
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

#[test]
fn claim_opens_a_run_and_sets_the_lease() {
    let (_d, b) = board();
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
            source_status: None
        }
    );
    assert_clean(&b);
}

#[test]
fn second_claim_loses_and_changes_nothing() {
    let (_d, b) = board();
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

#[test]
fn claim_with_a_reopened_parent_demotes_to_todo() {
    let (_d, b) = board();
    let p = create(&b, "p");
    let c = child_of(&b, "c", &[&p]);
    // Someone forced the child to ready behind the board's back.
    b.conn()
        .execute("UPDATE tasks SET status = 'ready' WHERE id = ?1", [&c])
        .unwrap();
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

#[test]
fn claim_refuses_a_non_positive_ttl_and_unknown_task() {
    let (_d, b) = board();
    let id = create(&b, "t");
    let neg = ClaimSpec {
        lock: "h:1".into(),
        ttl_seconds: -5,
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

#[test]
fn reclaimed_task_claims_again_with_a_fresh_heartbeat() {
    let (_d, b) = board();
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

// ---------------------------------------------------------------- heartbeat

#[test]
fn heartbeat_extends_the_claim_and_stamps_task_and_run() {
    let (_d, b) = board();
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

#[test]
fn heartbeat_with_a_stale_run_or_foreign_lock_is_refused() {
    let (_d, b) = board();
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

// ---------------------------------------------------------------- complete

#[test]
fn complete_closes_the_run_and_promotes_children() {
    let (_d, b) = board();
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
            forced: None
        }
    );
    assert_eq!(status(&b, &c), Status::Todo, "other parent still open");
    assert_eq!(status(&b, &solo), Status::Ready);
    assert_eq!(kinds(&b, &solo).last().unwrap(), "promoted");
    assert_clean(&b);
}

#[test]
fn complete_with_a_stale_run_is_refused() {
    let (_d, b) = board();
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

#[test]
fn complete_under_a_live_claim_needs_the_run_or_force() {
    let (_d, b) = board();
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

#[test]
fn complete_after_the_claim_expired_needs_no_force() {
    let (_d, b) = board();
    let id = create(&b, "t");
    claim(&b, &id);
    assert!(
        b.complete(&id, &Completion::default(), T0 + 901)
            .unwrap()
            .is_done()
    );
}

#[test]
fn complete_refuses_done_tasks_and_unfinished_parents() {
    let (_d, b) = board();
    let p = create(&b, "p");
    let c = child_of(&b, "c", &[&p]);
    b.conn()
        .execute("UPDATE tasks SET status = 'blocked' WHERE id = ?1", [&c])
        .unwrap();
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

// ---------------------------------------------------------------- block / unblock

#[test]
fn block_closes_the_run_and_parks_the_task() {
    let (_d, b) = board();
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

#[test]
fn dependency_block_without_an_open_parent_becomes_needs_input() {
    let (_d, b) = board();
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

#[test]
fn dependency_block_with_an_open_parent_waits_in_todo() {
    let (_d, b) = board();
    let p = create(&b, "p");
    let c = create(&b, "c");
    let run = claim(&b, &c).run_id;
    // Give the running task an open parent behind the board's back (links refuse running tasks).
    b.conn()
        .execute(
            "INSERT INTO task_links (parent_id, child_id) VALUES (?1, ?2)",
            [&p, &c],
        )
        .unwrap();
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

#[test]
fn the_same_block_kind_twice_in_a_row_goes_to_triage() {
    let (_d, b) = board();
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

#[test]
fn block_refusals_change_nothing() {
    let (_d, b) = board();
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

#[test]
fn unblock_lands_in_todo_while_a_parent_is_open_and_resets_failures() {
    let (_d, b) = board();
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
    b.conn()
        .execute(
            "UPDATE tasks SET consecutive_failures = 2 WHERE id = ?1",
            [&c],
        )
        .unwrap();
    let moved = b.unblock(&c, T0).unwrap().into_result().unwrap();
    assert_eq!((moved.from, moved.to), (Status::Blocked, Status::Todo));
    assert_eq!(b.get_task(&c).unwrap().consecutive_failures, 0);
    assert_eq!(
        last_event(&b, &c),
        Event::Unblocked {
            status: Some(Status::Todo),
            resume_status: Some(Status::Ready)
        }
    );
}

// ---------------------------------------------------------------- archive / reclaim / assign

#[test]
fn archive_closes_the_run_and_frees_children() {
    let (_d, b) = board();
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

#[test]
fn operator_reclaim_returns_the_task_to_ready() {
    let (_d, b) = board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    b.conn()
        .execute(
            "UPDATE tasks SET consecutive_failures = 1, worker_pid = 4242 WHERE id = ?1",
            [&id],
        )
        .unwrap();
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

#[test]
fn assign_records_from_and_is_refused_while_running() {
    let (_d, b) = board();
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

// ---------------------------------------------------------------- comment / link / promote

#[test]
fn comment_is_stored_with_an_event_and_blank_is_refused() {
    let (_d, b) = board();
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

#[test]
fn link_demotes_a_ready_child_and_refuses_self_links_and_cycles() {
    let (_d, b) = board();
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

#[test]
fn link_refuses_a_running_child() {
    let (_d, b) = board();
    let p = create(&b, "p");
    let c = create(&b, "c");
    claim(&b, &c);
    assert!(matches!(
        b.link(&p, &c, T0).unwrap(),
        Outcome::Refused(Refusal::WrongStatus { .. })
    ));
    assert!(b.parents(&c).unwrap().is_empty());
}

#[test]
fn unlink_frees_a_todo_child_and_refuses_a_missing_edge() {
    let (_d, b) = board();
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

#[test]
fn promote_needs_finished_parents() {
    let (_d, b) = board();
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

#[test]
fn recompute_ready_promotes_only_free_todo_tasks() {
    let (_d, b) = board();
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
    b.conn()
        .execute("UPDATE tasks SET status = 'done' WHERE id = ?1", [&p])
        .unwrap();
    assert_eq!(b.recompute_ready(T0).unwrap(), vec![c.clone()]);
    assert_eq!(status(&b, &c), Status::Ready);
    assert_eq!(status(&b, &blocked), Status::Blocked, "blocked is sticky");
}

// ---------------------------------------------------------------- fsck

#[test]
fn fsck_names_each_violation() {
    let (_d, b) = board();
    let a = create(&b, "a");
    let c = child_of(&b, "c", &[&a]);
    let r = create(&b, "r");
    claim(&b, &r);
    let conn = b.conn();
    conn.execute("UPDATE tasks SET status = 'ready' WHERE id = ?1", [&c])
        .unwrap();
    conn.execute(
        "INSERT INTO task_links (parent_id, child_id) VALUES (?1, ?2)",
        [&c, &a],
    )
    .unwrap();
    conn.execute("UPDATE tasks SET claim_lock = NULL WHERE id = ?1", [&r])
        .unwrap();
    conn.execute("UPDATE task_runs SET ended_at = 1", [])
        .unwrap();
    conn.execute(
        "INSERT INTO task_events (task_id, kind, created_at) VALUES ('t_gone', 'x', 0)",
        [],
    )
    .unwrap();
    conn.execute("UPDATE tasks SET status = 'bogus' WHERE id = ?1", [&a])
        .unwrap();
    let rules: Vec<&str> = b.fsck().unwrap().iter().map(|v| v.rule).collect();
    for rule in [
        "invalid_status",
        "running_without_claim",
        "running_without_open_run",
        "dangling_current_run",
        "orphan_event",
        "ready_with_unfinished_parent",
        "link_cycle",
    ] {
        assert!(rules.contains(&rule), "{rule} missing from {rules:?}");
    }
}

#[test]
fn claim_ttl_prefers_the_explicit_value_then_the_config() {
    let mut config = crate::config::Config::default();
    assert_eq!(
        tasks::claim_ttl_seconds(Some(30), &config).unwrap(),
        30,
        "explicit wins"
    );
    assert!(matches!(
        tasks::claim_ttl_seconds(Some(0), &config),
        Err(BoardError::InvalidSeconds { .. })
    ));
    // The environment is not touched by unit tests; the e2e tests cover the variable.
    config.dispatch.claim_ttl_seconds = 77;
    assert_eq!(tasks::claim_ttl_seconds(None, &config).unwrap(), 77);
    config.dispatch.claim_ttl_seconds = -1;
    let err = tasks::claim_ttl_seconds(None, &config).unwrap_err();
    assert!(err.to_string().contains("claim_ttl_seconds"), "{err}");
    assert_eq!(
        crate::config::Config::default().dispatch.claim_ttl_seconds,
        DEFAULT_CLAIM_TTL_SECONDS
    );
}

#[test]
fn default_claim_lock_is_host_and_pid() {
    let lock = default_claim_lock();
    let (host, pid) = lock.rsplit_once(':').unwrap();
    assert!(!host.is_empty());
    assert_eq!(pid, std::process::id().to_string());
}

// ---------------------------------------------------------------- claim_batch

fn batch(ids: &[&str]) -> Vec<(String, Status)> {
    ids.iter()
        .map(|id| (id.to_string(), Status::Ready))
        .collect()
}

fn claimed_runs(b: &Board, id: &str) -> usize {
    b.runs(id).unwrap().len()
}

#[test]
fn claim_batch_claims_each_task_once_with_its_own_run_and_event() {
    let (_d, b) = board();
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

#[test]
fn claim_batch_a_lost_compare_and_swap_does_not_abort_the_others() {
    let (_d, b) = board();
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

#[test]
fn claim_batch_a_failed_claim_is_rolled_back_alone_and_the_others_commit() {
    let (_d, b) = board();
    let first = create(&b, "first");
    let doomed = create(&b, "doomed");
    let last = create(&b, "last");
    // Fail `doomed`'s claim at its last step (the `claimed` event), after its run row and task
    // update were written: the savepoint must undo both.
    b.conn()
        .execute_batch(&format!(
            "CREATE TEMP TRIGGER fail_one BEFORE INSERT ON task_events \
             WHEN NEW.task_id = '{doomed}' AND NEW.kind = 'claimed' \
             BEGIN SELECT RAISE(ABORT, 'injected failure'); END;"
        ))
        .unwrap();
    let picks = batch(&[&first, &doomed, "t_nosuchtask", &last]);
    let out = b.claim_batch(&picks, &spec("host:1"), T0).unwrap();
    assert!(
        matches!(&out[0], Ok(ClaimOutcome::Claimed(_))),
        "{:?}",
        out[0]
    );
    assert!(matches!(&out[1], Err(BoardError::Sql(_))), "{:?}", out[1]);
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
    b.conn().execute_batch("DROP TRIGGER fail_one").unwrap();
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

#[test]
fn claim_batch_with_a_bad_ttl_is_refused_and_changes_nothing() {
    let (_d, b) = board();
    let id = create(&b, "t");
    let bad = ClaimSpec {
        lock: "host:1".to_owned(),
        ttl_seconds: 0,
    };
    let err = b.claim_batch(&batch(&[&id]), &bad, T0).unwrap_err();
    assert!(matches!(err, BoardError::InvalidSeconds { .. }), "{err:?}");
    assert_eq!(status(&b, &id), Status::Ready);
    assert_eq!(claimed_runs(&b, &id), 0);
    assert!(b.claim_batch(&[], &spec("host:1"), T0).unwrap().is_empty());
}

// ---------------------------------------------------------------- statement cache

#[test]
fn completions_reuse_their_cached_statements_without_re_preparing() {
    let (_d, b) = board();
    for i in 0..5 {
        let id = create(&b, &format!("t{i}"));
        let c = claim(&b, &id);
        let done = Completion {
            expected_run_id: Some(c.run_id),
            summary: Some("ok".into()),
            ..Default::default()
        };
        assert!(b.complete(&id, &done, T0).unwrap().is_done());
    }
    // The parent and child reads of `create` / `complete`: SQLite re-planned these joins on
    // every new binding until the query planner stability guarantee was switched on.
    for sql in [
        "SELECT p.id FROM task_links l JOIN tasks p ON p.id = l.parent_id \
         WHERE l.child_id = ?1 AND p.status NOT IN ('done', 'archived') ORDER BY p.id",
        "SELECT c.id FROM task_links l JOIN tasks c ON c.id = l.child_id \
             WHERE l.parent_id = ?1 AND c.status = 'todo' ORDER BY c.id",
    ] {
        // The SQL layer prepares through rusqlite's cache: the same statement, seen from below.
        let stmt = b.conn().as_sqlite().unwrap().prepare_cached(sql).unwrap();
        assert!(
            stmt.get_status(rusqlite::StatementStatus::VmStep) > 0,
            "not the statement the transitions cached (its SQL changed?): {sql}"
        );
        assert_eq!(
            stmt.get_status(rusqlite::StatementStatus::RePrepare),
            0,
            "re-prepared: {sql}"
        );
    }
}
