use super::*;
use kanban_runtime::board::admission::MarkerOutcome;

fn admitted(session: &str) -> Event {
    Event::OwnerAdmitted {
        db: "/nonexistent/state.db".into(),
        session_id: session.into(),
        request_id: "r1".into(),
        pid: 321,
        birth: Some("boot|9".into()),
    }
}

pub(crate) fn the_owner_marker_is_appended_once_under_the_current_claim(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    let view = b.claim_view(&id, run).unwrap().unwrap();
    assert!(view.is_current(&id, run, "host:1"));
    assert!(!view.is_current(&id, run, "host:2"));
    assert_eq!(view.marker, None);
    assert_eq!(b.claim_view("t_00000000", run).unwrap(), None);
    assert_eq!(b.owner_turn(&id, run).unwrap(), None);
    let append = |session: &str, lock: &str| {
        b.append_owner_marker(&id, run, lock, &admitted(session), session, T0)
            .unwrap()
    };
    assert_eq!(append("s1", "host:9"), MarkerOutcome::Stale);
    assert_eq!(kinds(&b, &id), ["created", "claimed"]);
    assert_eq!(append("s1", "host:1"), MarkerOutcome::Appended);
    assert_eq!(append("s1", "host:1"), MarkerOutcome::Existing);
    assert_eq!(append("s2", "host:1"), MarkerOutcome::Foreign);
    assert_eq!(
        kinds(&b, &id)
            .iter()
            .filter(|k| *k == "owner_admitted")
            .count(),
        1
    );
    assert_eq!(
        b.claim_view(&id, run).unwrap().unwrap().marker,
        Some(("s1".to_owned(), "r1".to_owned()))
    );
    // The owner's state.db is unreadable here: its turn status is unknown, the marker is not.
    let turn = b.owner_turn(&id, run).unwrap().unwrap();
    assert_eq!(
        (turn.status, turn.owner_pid, turn.owner_birth.as_deref()),
        (None, Some(321), Some("boot|9"))
    );
    assert_clean(&b);
}

pub(crate) fn a_managed_worker_binds_only_to_the_current_claim_and_learns_its_ttl(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    let bound = |lock: &str| Event::WorkerBound {
        pid: 55,
        claim_lock: lock.into(),
        started_at: Some("boot|55".into()),
        submitter_pid: Some(321),
    };
    assert_eq!(
        b.bind_managed_worker(&id, run, "host:2", &bound("host:2"), T0)
            .unwrap(),
        None
    );
    assert_eq!(b.bound_worker(&id, run).unwrap(), None);
    assert_eq!(
        b.bind_managed_worker(&id, run, "host:1", &bound("host:1"), T0 + 1)
            .unwrap(),
        Some(Some(900))
    );
    assert_eq!(b.bound_worker(&id, run).unwrap(), Some(55));
    assert_eq!(b.worker_result_for(&id, run, "host:1").unwrap(), None);
    b.record_worker_result(
        &WorkerResult {
            task_id: &id,
            run_id: Some(run),
            pid: 55,
            claim_lock: Some("host:1"),
            exit_code: 3,
            last_output: Some("out"),
        },
        T0 + 2,
    )
    .unwrap();
    assert_eq!(
        b.worker_result_for(&id, run, "host:1").unwrap(),
        Some((3, Some("out".to_owned())))
    );
    assert_eq!(b.worker_result_for(&id, run, "host:2").unwrap(), None);
    // Once the run is over, nobody binds to it.
    b.reclaim(&id, None, T0 + 3).unwrap();
    assert_eq!(
        b.bind_managed_worker(&id, run, "host:1", &bound("host:1"), T0 + 4)
            .unwrap(),
        None
    );
    assert_clean(&b);
}

pub(crate) fn only_the_bound_worker_settles_its_run_and_proves_its_live_claim(s: &dyn Store) {
    use kanban_runtime::board::admission::BoundResult;
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    let bound = |pid: i64| Event::WorkerBound {
        pid,
        claim_lock: "host:1".into(),
        started_at: Some(format!("boot|{pid}")),
        submitter_pid: Some(321),
    };
    let result = |pid: i64, code: i32| WorkerResult {
        task_id: &id,
        run_id: Some(run),
        pid,
        claim_lock: Some("host:1"),
        exit_code: code,
        last_output: None,
    };
    // Nobody bound yet: nobody settles the run.
    assert_eq!(
        b.record_bound_worker_result(&result(55, 0), T0).unwrap(),
        BoundResult::NotBound { bound_pid: None }
    );
    assert!(!b.bound_claim_is_live(&id, run, "host:1", 55, T0).unwrap());
    b.bind_managed_worker(&id, run, "host:1", &bound(55), T0 + 1)
        .unwrap();
    assert!(
        b.bound_claim_is_live(&id, run, "host:1", 55, T0 + 1)
            .unwrap()
    );
    // Another process, another lock, an expired lease: no live claim.
    assert!(
        !b.bound_claim_is_live(&id, run, "host:1", 56, T0 + 1)
            .unwrap()
    );
    assert!(
        !b.bound_claim_is_live(&id, run, "host:2", 55, T0 + 1)
            .unwrap()
    );
    assert!(
        !b.bound_claim_is_live(&id, run, "host:1", 55, T0 + 901)
            .unwrap()
    );
    // A writer that is not the bound worker appends nothing; a result another path appended
    // from it is not read.
    assert_eq!(
        b.record_bound_worker_result(&result(56, 0), T0 + 2)
            .unwrap(),
        BoundResult::NotBound {
            bound_pid: Some(55)
        }
    );
    assert!(!kinds(&b, &id).iter().any(|k| k == "worker_result"));
    b.record_worker_result(&result(56, 0), T0 + 2).unwrap();
    assert_eq!(b.worker_result_for(&id, run, "host:1").unwrap(), None);
    assert_eq!(
        b.record_bound_worker_result(&result(55, 3), T0 + 3)
            .unwrap(),
        BoundResult::Recorded
    );
    assert_eq!(
        b.worker_result_for(&id, run, "host:1").unwrap(),
        Some((3, None))
    );
    // A later bind by another worker takes the run over: the first one's proof fails.
    b.bind_managed_worker(&id, run, "host:1", &bound(57), T0 + 4)
        .unwrap();
    assert!(
        !b.bound_claim_is_live(&id, run, "host:1", 55, T0 + 4)
            .unwrap()
    );
    assert_eq!(b.worker_result_for(&id, run, "host:1").unwrap(), None);
    assert_clean(&b);
}

/// The turn's status as an owner's `state.db` at `path` records it (one admitted turn).
fn write_state(path: &std::path::Path, task: &str, run: i64, started: bool) {
    use kanban_runtime::admission::state::{LostTurn, NewAdmission, StateDb};
    let state = StateDb::open(path).unwrap();
    let lost = LostTurn {
        status: "interrupted",
        exit_code: Some(130),
        output: None,
    };
    let (epoch, _) = state.begin_epoch(T0, &lost).unwrap();
    state
        .admit(
            &NewAdmission {
                principal_id: "p",
                session_id: "s1",
                request_id: "r1",
                receipt_json: "{}",
                payload_json: "{}",
                task_id: task,
                run_id: run,
                admission_id: "a1",
            },
            epoch,
            T0,
        )
        .unwrap();
    if started {
        assert!(state.mark_started("a1", epoch, T0, true).unwrap());
    }
}

pub(crate) fn an_owner_turn_is_read_from_the_state_file_the_marker_names_now(s: &dyn Store) {
    let (_d, b) = s.board();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    let marker = Event::OwnerAdmitted {
        db: path.display().to_string(),
        session_id: "s1".into(),
        request_id: "r1".into(),
        pid: 321,
        birth: None,
    };
    b.append_owner_marker(&id, run, "host:1", &marker, "s1", T0)
        .unwrap();
    let status = || {
        b.owner_turns(&[(id.as_str(), run)]).unwrap()[0]
            .clone()
            .unwrap()
            .status
    };
    // No file yet: unknown.
    assert_eq!(status(), None);
    write_state(&path, &id, run, false);
    assert_eq!(status().as_deref(), Some("queued"));
    // The board keeps the file open between reads: a later commit to it is seen.
    write_state(&path, &id, run, true);
    assert_eq!(status().as_deref(), Some("started"));
    // Another file at the same path (an owner's folder recreated) is read, not the one open.
    std::fs::remove_file(&path).unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.path().join(format!("state.db{suffix}")));
    }
    write_state(&path, &id, run, false);
    assert_eq!(status().as_deref(), Some("queued"));
    assert_eq!(
        b.owner_turn(&id, run).unwrap().unwrap().status.as_deref(),
        Some("queued")
    );
    // Gone: unknown again.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(status(), None);
    assert_clean(&b);
}
