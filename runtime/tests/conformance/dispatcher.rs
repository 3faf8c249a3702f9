use super::tamper;
use super::*;

/// A claimed task as the dispatcher's reclaim phases read it back.
fn running(b: &Board, id: &str) -> RunningTask {
    b.running_tasks()
        .unwrap()
        .into_iter()
        .find(|t| t.id == id)
        .unwrap()
}

fn crashed<'a>(lock: &'a str, run_id: i64, failure: Failure<'a>) -> Release<'a> {
    crashed_exit(lock, run_id, failure, 4242, "boom")
}

pub(crate) fn a_spawn_and_the_workers_registration_are_recorded_and_fenced(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    assert!(
        b.record_spawn(&id, run, "host:1", 4242, "boot|1", T0)
            .unwrap()
            .is_done()
    );
    let t = b.get_task(&id).unwrap();
    assert_eq!(
        (t.worker_pid, t.worker_started_at.as_deref()),
        (Some(4242), Some("boot|1"))
    );
    let r = b.run(run).unwrap().unwrap();
    assert_eq!(
        (r.worker_pid, r.worker_started_at.as_deref()),
        (Some(4242), Some("boot|1"))
    );
    assert_eq!(
        last_event(&b, &id),
        Event::Spawned {
            pid: 4242,
            started_at: Some("boot|1".into())
        }
    );
    let reg = b
        .register_worker(&id, run, "host:1", 4242, "boot|1", T0 + 1)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!((reg.task_id.as_str(), reg.run_id), (id.as_str(), run));
    assert_eq!(kinds(&b, &id).last().unwrap(), "worker_registered");
    // Another pid, another claim or another run is refused and changes nothing.
    assert!(matches!(
        b.register_worker(&id, run, "host:1", 99, "boot|2", T0 + 2)
            .unwrap(),
        Outcome::Refused(Refusal::Raced { .. })
    ));
    assert!(matches!(
        b.register_worker(&id, run, "host:9", 4242, "boot|1", T0 + 2)
            .unwrap(),
        Outcome::Refused(Refusal::NotClaimHolder { .. })
    ));
    assert!(matches!(
        b.register_worker(&id, run + 1, "host:1", 4242, "boot|1", T0 + 2)
            .unwrap(),
        Outcome::Refused(Refusal::StaleRun { .. })
    ));
    assert_eq!(b.get_task(&id).unwrap().worker_pid, Some(4242));
    assert_eq!(kinds(&b, &id).last().unwrap(), "worker_registered");
    let rt = running(&b, &id);
    assert_eq!(
        (rt.run_id, rt.claim_lock.as_deref(), rt.worker_pid),
        (Some(run), Some("host:1"), Some(4242))
    );
    assert_eq!(
        (rt.fingerprint.as_deref(), rt.run_started_at),
        (Some("boot|1"), Some(T0))
    );
    assert_eq!(
        (
            b.running_count().unwrap(),
            b.running_on_host("host:").unwrap()
        ),
        (1, 1)
    );
    assert_eq!(b.running_on_host("other:").unwrap(), 0);
    assert_clean(&b);
}

pub(crate) fn a_spawn_recorded_after_the_run_closed_keeps_the_run_and_is_refused(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "fast");
    let run = claim(&b, &id).run_id;
    let done = Completion {
        expected_run_id: Some(run),
        ..Completion::default()
    };
    assert!(b.complete(&id, &done, T0).unwrap().is_done());
    let out = b
        .record_spawns(
            &[SpawnRecord {
                task_id: id.clone(),
                run_id: run,
                claim_lock: "host:1".into(),
                pid: 77,
                fingerprint: "boot|7".into(),
            }],
            T0,
        )
        .unwrap();
    assert!(
        matches!(
            out[0],
            Outcome::Refused(Refusal::WrongStatus {
                status: Status::Done,
                ..
            })
        ),
        "{out:?}"
    );
    assert_eq!(b.get_task(&id).unwrap().worker_pid, None);
    assert_eq!(b.run(run).unwrap().unwrap().worker_pid, Some(77));
    assert_eq!(kinds(&b, &id).last().unwrap(), "spawned");
    // The closed run names its worker: the reaper finds it, and forgets it once gone.
    let lingering = b.lingering_workers(T0, 10).unwrap();
    assert_eq!(lingering.len(), 1);
    assert_eq!(
        (
            lingering[0].run_id,
            lingering[0].pid,
            lingering[0].fingerprint.as_deref()
        ),
        (run, 77, Some("boot|7"))
    );
    assert!(b.lingering_workers(T0 - 1, 10).unwrap().is_empty());
    let ended = b.ended_runs_with_worker(&id, 5).unwrap();
    assert_eq!((ended.len(), ended[0].worker_pid), (1, 77));
    let termination = Termination {
        prev_pid: Some(77),
        host_local: true,
        termination_attempted: true,
        terminated: true,
        ..Termination::default()
    };
    let cleared = b
        .forget_lingering_workers(
            &[(lingering[0].clone(), WorkerGone::Terminated(termination))],
            T0 + 1,
        )
        .unwrap();
    assert_eq!(cleared, [run]);
    assert_eq!(kinds(&b, &id).last().unwrap(), "terminal_worker_reaped");
    assert!(b.lingering_workers(T0 + 100, 10).unwrap().is_empty());
    // A second pass finds nothing to clear and writes nothing.
    assert!(
        b.forget_lingering_workers(&[(lingering[0].clone(), WorkerGone::Quietly)], T0 + 2)
            .unwrap()
            .is_empty()
    );
    assert_eq!(kinds(&b, &id).last().unwrap(), "terminal_worker_reaped");
    assert_clean(&b);
}

pub(crate) fn extend_and_defer_move_the_lease_of_task_and_run_fenced_on_what_was_seen(
    s: &dyn Store,
) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    let seen = running(&b, &id);
    assert!(
        b.extend_claim(&seen, T0 + 2000, T0 + 901)
            .unwrap()
            .is_done()
    );
    let t = b.get_task(&id).unwrap();
    assert_eq!(t.claim_expires, Some(T0 + 2000));
    assert_eq!(b.run(run).unwrap().unwrap().claim_expires, Some(T0 + 2000));
    assert!(matches!(
        last_event(&b, &id),
        Event::ClaimExtended {
            claim_expires_was: Some(e),
            claim_expires_now,
            ..
        } if e == T0 + 900 && claim_expires_now == T0 + 2000
    ));
    // The expiry moved since `seen` was read: a second extension on it loses.
    assert!(matches!(
        b.extend_claim(&seen, T0 + 3000, T0 + 902).unwrap(),
        Outcome::Refused(Refusal::Raced { .. })
    ));
    let seen = running(&b, &id);
    assert!(
        b.defer_reclaim(
            &seen,
            T0 + 2500,
            "still alive",
            Termination::default(),
            T0 + 903
        )
        .unwrap()
        .is_done()
    );
    assert_eq!(b.get_task(&id).unwrap().claim_expires, Some(T0 + 2500));
    assert_eq!(b.run(run).unwrap().unwrap().claim_expires, Some(T0 + 2500));
    assert_eq!(kinds(&b, &id).last().unwrap(), "reclaim_deferred");
    let mut stale = seen.clone();
    stale.claim_lock = Some("host:9".into());
    assert!(matches!(
        b.defer_reclaim(&stale, T0 + 9999, "x", Termination::default(), T0)
            .unwrap(),
        Outcome::Refused(Refusal::NotClaimHolder { .. })
    ));
    assert_eq!(b.get_task(&id).unwrap().claim_expires, Some(T0 + 2500));
    assert_clean(&b);
}

pub(crate) fn release_counts_failures_and_the_breaker_blocks_at_the_limit(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    let limit = Failure::Counted {
        limit: 2,
        source: "config",
    };
    let r = b
        .release_claim(&id, &crashed("host:1", run, limit), T0 + 5)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!((r.status, r.failures, r.gave_up), (Status::Ready, 1, false));
    let t = b.get_task(&id).unwrap();
    assert_eq!(
        (t.consecutive_failures, t.last_failure_error.as_deref()),
        (1, Some("worker exited with 2"))
    );
    assert_eq!((t.claim_lock, t.current_run_id), (None, None));
    let closed = b.run(run).unwrap().unwrap();
    assert_eq!(
        (closed.outcome.as_deref(), closed.error.as_deref()),
        (Some("crashed"), Some("worker exited with 2"))
    );
    assert_eq!(
        closed.metadata.as_ref().unwrap()["worker_output"],
        "boom",
        "the run's metadata is the event's payload"
    );
    let facts = b.guard_facts(&id, 0).unwrap();
    let latest = facts.latest_run.unwrap();
    assert_eq!(
        (
            latest.outcome.as_deref(),
            latest.ended_at,
            latest.infrastructure
        ),
        (Some("crashed"), T0 + 5, false)
    );
    assert_eq!(facts.unrequeued_success_at, None);
    // A release on the old run is refused.
    assert!(matches!(
        b.release_claim(&id, &crashed("host:1", run, limit), T0 + 6)
            .unwrap(),
        Outcome::Refused(Refusal::WrongStatus { .. })
    ));
    let again = claim(&b, &id).run_id;
    let r = b
        .release_claim(&id, &crashed("host:1", again, limit), T0 + 7)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(
        (r.status, r.failures, r.gave_up),
        (Status::Blocked, 2, true)
    );
    let k = kinds(&b, &id);
    assert_eq!(&k[k.len() - 2..], ["crashed", "gave_up"]);
    assert!(matches!(
        last_event(&b, &id),
        Event::GaveUp {
            failures: 2,
            effective_limit: 2,
            sticky: None,
            ..
        }
    ));
    assert_eq!(
        b.given_up_tasks()
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect::<Vec<_>>(),
        std::slice::from_ref(&id)
    );
    assert_clean(&b);
}

pub(crate) fn a_trip_blocks_at_once_and_a_not_counted_release_keeps_the_counter(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    let r = b
        .release_claim(&id, &crashed("host:1", run, Failure::NotCounted), T0)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!((r.status, r.failures), (Status::Ready, 0));
    let run = claim(&b, &id).run_id;
    let trip = Failure::Trip {
        limit: 5,
        source: "terminal_provider",
    };
    let r = b
        .release_claim(&id, &crashed("host:1", run, trip), T0 + 1)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(
        (r.status, r.failures, r.gave_up),
        (Status::Blocked, 1, true)
    );
    assert!(matches!(
        last_event(&b, &id),
        Event::GaveUp {
            sticky: Some(true),
            ..
        }
    ));
    assert_clean(&b);
}

pub(crate) fn an_orphaned_running_task_is_reconciled_and_an_unstarted_claim_abandoned(
    s: &dyn Store,
) {
    let (_d, b) = s.board();
    let orphan = create(&b, "orphan");
    let run = claim(&b, &orphan).run_id;
    tamper::clear_claim_lock(&b, &orphan);
    let seen = running(&b, &orphan);
    assert!(b.reconcile_orphan(&seen, T0 + 1).unwrap().is_done());
    assert_eq!(status(&b, &orphan), Status::Ready);
    assert_eq!(
        b.run(run).unwrap().unwrap().outcome.as_deref(),
        Some("reclaimed")
    );
    assert_eq!(kinds(&b, &orphan).last().unwrap(), "reconciled");
    assert!(matches!(
        b.reconcile_orphan(&seen, T0 + 2).unwrap(),
        Outcome::Refused(Refusal::Raced { .. })
    ));

    let dispatched = ClaimSpec {
        origin: ClaimOrigin::Dispatcher,
        ..spec("host:1")
    };
    let why = Abandonment {
        reason: AbandonReason::ClaimerGone,
        claimer_pid: Some(1),
        grace_seconds: 60,
    };
    // A claim made outside a dispatcher (`kanban claim`) is never released as abandoned, with
    // or without a heartbeat: its worker is not the dispatcher's to watch.
    let external = create(&b, "external");
    claim(&b, &external);
    let seen = running(&b, &external);
    assert!(matches!(
        b.release_unstarted_claim(&seen, &why, T0 + 61).unwrap(),
        Outcome::Refused(Refusal::NotAbandoned { .. })
    ));
    assert_eq!(status(&b, &external), Status::Running);
    // A dispatcher's claim that heartbeats has a live worker, registered or not.
    let beating = create(&b, "beating");
    let run = claim_with(&b, &beating, &dispatched).run_id;
    let fence = Fence {
        claim_lock: Some("host:1".into()),
        run_id: Some(run),
    };
    assert!(
        b.heartbeat(&beating, &fence, None, 900, T0)
            .unwrap()
            .is_done()
    );
    let seen = running(&b, &beating);
    assert!(matches!(
        b.release_unstarted_claim(&seen, &why, T0 + 61).unwrap(),
        Outcome::Refused(Refusal::NotAbandoned { .. })
    ));
    assert_eq!(status(&b, &beating), Status::Running);

    let unstarted = create(&b, "unstarted");
    let run = claim_with(&b, &unstarted, &dispatched).run_id;
    let seen = running(&b, &unstarted);
    assert!(
        b.release_unstarted_claim(&seen, &why, T0 + 61)
            .unwrap()
            .is_done()
    );
    let t = b.get_task(&unstarted).unwrap();
    assert_eq!((t.status, t.consecutive_failures), (Status::Ready, 0));
    let closed = b.run(run).unwrap().unwrap();
    assert_eq!(closed.outcome.as_deref(), Some(ABANDONED_OUTCOME));
    assert!(closed.error.unwrap().contains("host:1"));
    assert!(matches!(
        last_event(&b, &unstarted),
        Event::ClaimAbandoned {
            grace_seconds: 60,
            claimed_at: Some(T0),
            ..
        }
    ));
    // A worker that registered in between keeps its claim.
    let registered = create(&b, "registered");
    let run = claim_with(&b, &registered, &dispatched).run_id;
    let seen = running(&b, &registered);
    assert!(
        b.register_worker(&registered, run, "host:1", 5, "boot|5", T0)
            .unwrap()
            .is_done()
    );
    assert!(matches!(
        b.release_unstarted_claim(&seen, &why, T0 + 61).unwrap(),
        Outcome::Refused(_)
    ));
    assert_eq!(status(&b, &registered), Status::Running);
    assert_clean(&b);
}

pub(crate) fn worker_results_and_superseded_workers_are_events_only(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    let run = claim(&b, &id).run_id;
    let before = b.get_task(&id).unwrap();
    b.record_worker_result(
        &WorkerResult {
            task_id: &id,
            run_id: Some(run),
            pid: 11,
            claim_lock: Some("host:1"),
            exit_code: 0,
            last_output: Some("bye"),
        },
        T0 + 1,
    )
    .unwrap();
    let last = b.events(&id, Some(1)).unwrap().remove(0);
    assert_eq!(
        (last.kind.as_str(), last.run_id),
        ("worker_result", Some(run))
    );
    assert_eq!(
        last.decode().unwrap(),
        Event::WorkerResult {
            pid: 11,
            claim_lock: Some("host:1".into()),
            exit_code: 0,
            last_output: Some("bye".into()),
        }
    );
    b.reclaim(&id, None, T0 + 2).unwrap();
    let state = b.run_state(&id, run).unwrap().unwrap();
    assert_eq!(
        (state.ended, state.outcome.as_deref(), state.current_run_id),
        (true, Some("reclaimed"), None)
    );
    assert_eq!(b.run_state(&id, run + 100).unwrap(), None);
    b.record_superseded_worker(
        &id,
        run,
        &Event::WorkerSuperseded {
            pid: 11,
            outcome: state.outcome.clone(),
            current_run_id: None,
            termination: Termination::default(),
        },
        T0 + 3,
    )
    .unwrap();
    assert_eq!(kinds(&b, &id).last().unwrap(), "worker_superseded");
    assert_eq!(b.get_task(&id).unwrap().title, before.title);
    assert_clean(&b);
}

pub(crate) fn notes_are_written_once_until_something_else_happens(s: &dyn Store) {
    let (_d, b) = s.board();
    let id = create(&b, "t");
    assert!(b.note_nonspawnable(&id, "ghost", T0).unwrap());
    assert!(!b.note_nonspawnable(&id, "ghost", T0 + 1).unwrap());
    assert!(b.note_nonspawnable(&id, "other", T0 + 1).unwrap());
    assert!(b.note_respawn_guarded(&id, "cooldown", T0 + 2).unwrap());
    assert!(!b.note_respawn_guarded(&id, "cooldown", T0 + 3).unwrap());
    b.comment(&id, "op", "hello", T0 + 4).unwrap();
    assert!(b.note_respawn_guarded(&id, "cooldown", T0 + 5).unwrap());
    assert_eq!(
        kinds(&b, &id),
        [
            "created",
            "skipped_nonspawnable",
            "skipped_nonspawnable",
            "respawn_guarded",
            "commented",
            "respawn_guarded"
        ]
    );
}

pub(crate) fn lanes_workload_and_counts_read_the_board_as_the_dispatcher_needs(s: &dyn Store) {
    let (_d, b) = s.board();
    let low = create(&b, "low");
    let high = b
        .create_task(
            &NewTask {
                priority: 9,
                assignee: Some("coder".into()),
                max_retries: Some(3),
                ..new("high")
            },
            T0,
        )
        .unwrap()
        .id;
    let limited = create(&b, "rate limited");
    let run = claim(&b, &limited).run_id;
    let release = Release {
        claim_lock: Some("host:1"),
        run_id: Some(run),
        outcome: "rate_limited",
        event: Event::RateLimited {
            pid: None,
            claimer: None,
            exit_code: Some(75),
            retry_status: Status::Ready,
        },
        failure: Failure::NotCounted,
        error: "429".into(),
    };
    b.release_claim(&limited, &release, T0 + 10).unwrap();
    let busy = create(&b, "busy");
    claim(&b, &busy);
    let lane: Vec<String> = b
        .lane_candidates(Status::Ready, T0, 10)
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(lane, [high.clone(), low.clone(), limited.clone()]);
    let first = &b.lane_candidates(Status::Ready, T0, 1).unwrap()[0];
    assert_eq!(
        (
            first.id.as_str(),
            first.assignee.as_deref(),
            first.has_history
        ),
        (high.as_str(), Some("coder"), false)
    );
    let third = &b.lane_candidates(Status::Ready, T0, 3).unwrap()[2];
    assert!(third.has_history, "a closed run");
    assert_eq!(third.last_failure_error.as_deref(), Some("429"));
    assert_eq!(
        b.workload(T0 + 20, 60).unwrap(),
        Workload {
            running: 1,
            ready: 3,
            cooling_down: 1
        }
    );
    assert_eq!(b.workload(T0 + 100, 60).unwrap().cooling_down, 0);
    let mut by_assignee = b.ready_by_assignee().unwrap();
    by_assignee.sort();
    assert_eq!(by_assignee, [(None, 2), (Some("coder".to_owned()), 1)]);
    assert_eq!(b.task_failure_limit(&high).unwrap(), Some(3));
    assert_eq!(b.task_failure_limit(&low).unwrap(), None);
    assert_eq!(b.task_failure_limit("t_00000000").unwrap(), None);
    assert_eq!(b.protocol_violation_streak(&limited).unwrap(), 0);
    let mut counts = b.status_counts().unwrap();
    counts.sort();
    assert_eq!(counts, [(Status::Ready, 3), (Status::Running, 1)]);
    assert_clean(&b);
}
