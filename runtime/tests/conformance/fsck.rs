use super::tamper;
use super::*;

pub(crate) fn fsck_names_each_violation(s: &dyn Store) {
    let (_d, b) = s.board();
    let a = create(&b, "a");
    let c = child_of(&b, "c", &[&a]);
    let r = create(&b, "r");
    claim(&b, &r);
    tamper::set_status(&b, &c, "ready");
    tamper::add_link(&b, &c, &a);
    tamper::clear_claim_lock(&b, &r);
    tamper::end_every_run(&b);
    tamper::insert_event(&b, "t_gone", "x");
    tamper::set_status(&b, &a, "bogus");
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

pub(crate) fn a_claim_without_any_worker_is_reported_after_a_minute_and_not_before(s: &dyn Store) {
    use kanban_runtime::board::fsck::UNSTARTED_CLAIM_SECONDS;
    let (_d, b) = s.board();
    let never = create(&b, "never spawned");
    let spawned = create(&b, "spawned");
    let spec = spec("host:1");
    b.claim(&never, &spec, T0).unwrap();
    let ClaimOutcome::Claimed(c) = b.claim(&spawned, &spec, T0).unwrap() else {
        panic!("claim lost")
    };
    b.record_spawn(&spawned, c.run_id, "host:1", 42, "boot|1", T0)
        .unwrap();
    assert!(b.fsck().unwrap().is_empty());
    assert!(
        b.fsck_at(T0 + UNSTARTED_CLAIM_SECONDS - 1)
            .unwrap()
            .is_empty()
    );
    let v = b.fsck_at(T0 + UNSTARTED_CLAIM_SECONDS).unwrap();
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].rule, "claim_never_started");
    assert_eq!(v[0].task_id.as_deref(), Some(never.as_str()));
    assert!(v[0].message.contains("host:1"), "{}", v[0].message);
}

pub(crate) fn fsck_names_the_claim_run_and_orphan_rules_by_task(s: &dyn Store) {
    let (_d, b) = s.board();
    let claimed_ready = create(&b, "claimed but ready");
    let lost_pointer = create(&b, "lost its current run");
    let borrower = create(&b, "points at another task's run");
    let two_runs = create(&b, "two open runs");
    let linked = create(&b, "linked to nothing");
    for id in [&lost_pointer, &two_runs] {
        claim(&b, id);
    }
    tamper::set_claim_lock(&b, &claimed_ready, "host:7");
    tamper::borrow_current_run(&b, &borrower, &two_runs);
    tamper::borrow_current_run(&b, &lost_pointer, &claimed_ready);
    tamper::insert_open_run(&b, &two_runs);
    tamper::insert_open_run(&b, "t_norun");
    tamper::insert_comment(&b, "t_nocomment");
    tamper::add_link(&b, &linked, "t_nochild");
    let found: Vec<(&str, String)> = b
        .fsck()
        .unwrap()
        .into_iter()
        .map(|v| (v.rule, v.task_id.unwrap_or_default()))
        .collect();
    for (rule, id) in [
        ("claim_without_running", claimed_ready.as_str()),
        ("open_run_mismatch", lost_pointer.as_str()),
        ("dangling_current_run", borrower.as_str()),
        ("open_run_mismatch", two_runs.as_str()),
        ("orphan_run", "t_norun"),
        ("orphan_comment", "t_nocomment"),
        ("orphan_link", "t_nochild"),
    ] {
        assert!(
            found.contains(&(rule, id.to_owned())),
            "{rule} for {id} missing from {found:?}"
        );
    }
    assert!(
        !found.iter().any(|(_, id)| id == &linked),
        "the existing end of a dangling link is fine: {found:?}"
    );
}
