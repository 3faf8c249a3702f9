//! The predicate and its propagation (the seed test's `TestDispatcherOwnedPredicate`), the
//! child-process scrub and the fence. Tests that need a worker environment run their body in a
//! re-executed child of this test binary; this process's environment is never touched.

use std::sync::{Arc, Barrier};

use super::testenv::{WORKER_ENV, in_child, kanban_env, test_path};
use super::*;

fn child(name: &str, env: &[(&str, &str)], body: impl FnOnce()) {
    in_child(&test_path(module_path!(), name), env, body);
}

fn worker_env_with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    WORKER_ENV.iter().chain(extra).copied().collect()
}

#[test]
fn default_is_dispatcher_owned() {
    child("default_is_dispatcher_owned", &[], || {
        assert!(is_dispatcher_owned_worker_context());
        assert!(!is_delegated_child());
        assert_eq!(gate(), None, "no identity without HERMES_KANBAN_TASK");
    });
}

#[test]
fn false_inside_non_dispatcher_context_and_restored_after() {
    {
        let _scope = non_dispatcher_owned_context();
        assert!(!is_dispatcher_owned_worker_context());
    }
    assert!(is_dispatcher_owned_worker_context());
}

#[test]
fn token_form_restores() {
    let token = enter_non_dispatcher_owned_context();
    assert!(!is_dispatcher_owned_worker_context());
    exit_non_dispatcher_owned_context(token);
    assert!(is_dispatcher_owned_worker_context());
}

#[test]
fn nesting_restores_outer_value() {
    {
        let _outer = non_dispatcher_owned_context();
        {
            let _inner = non_dispatcher_owned_context();
            assert!(!is_dispatcher_owned_worker_context());
        }
        assert!(!is_dispatcher_owned_worker_context());
    }
    assert!(is_dispatcher_owned_worker_context());
}

#[test]
fn closing_scopes_out_of_order_never_raises_authority_early() {
    let token = enter_non_dispatcher_owned_context();
    let guard = non_dispatcher_owned_context();
    exit_non_dispatcher_owned_context(token);
    assert!(
        !is_dispatcher_owned_worker_context(),
        "the guard is still open: the context must stay lowered"
    );
    drop(guard);
    assert!(is_dispatcher_owned_worker_context());
}

#[test]
fn delegated_child_scope_is_not_owned() {
    {
        let _child = delegated_child_context();
        assert!(!is_dispatcher_owned_worker_context());
        assert!(is_delegated_child());
        assert!(fence::check_board_mutation().is_err());
    }
    assert!(is_dispatcher_owned_worker_context());
    assert!(fence::check_board_mutation().is_ok());
}

#[test]
fn delegated_child_marker_makes_the_process_non_owned_and_fenced() {
    let env = worker_env_with(&[(DELEGATED_CHILD_MARKER, "1")]);
    child(
        "delegated_child_marker_makes_the_process_non_owned_and_fenced",
        &env,
        || {
            assert!(!is_dispatcher_owned_worker_context());
            assert!(is_delegated_child());
            assert_eq!(gate(), None);
            assert_eq!(owned_kanban_task(), None);
            let refused = fence::check_board_mutation().unwrap_err();
            assert!(refused.to_string().contains(DELEGATED_CHILD_MARKER));
        },
    );
}

#[test]
fn panic_inside_the_scope_still_restores() {
    let caught = std::panic::catch_unwind(|| {
        let _scope = non_dispatcher_owned_context();
        panic!("the job failed");
    });
    assert!(caught.is_err());
    assert!(is_dispatcher_owned_worker_context());
}

#[test]
fn gate_reads_the_worker_environment_at_call_time() {
    child(
        "gate_reads_the_worker_environment_at_call_time",
        WORKER_ENV,
        || {
            let id = gate().expect("a worker environment with an owned context");
            assert_eq!(id.task, "t_worker_real_task");
            assert_eq!(id.run_id, Some(42));
            assert_eq!(id.claim_lock.as_deref(), Some("lock-abc"));
            assert_eq!(id.board.as_deref(), Some("team-alpha"));
            assert_eq!(id.workspace, Some(std::path::PathBuf::from("/tmp/ws")));
            assert_eq!(owned_kanban_task().as_deref(), Some("t_worker_real_task"));
            let _scope = non_dispatcher_owned_context();
            assert_eq!(gate(), None);
            assert_eq!(owned_kanban_task(), None);
        },
    );
}

#[test]
fn blank_task_is_no_identity() {
    child(
        "blank_task_is_no_identity",
        &[("HERMES_KANBAN_TASK", "   ")],
        || assert_eq!(gate(), None),
    );
}

#[test]
fn task_id_is_trimmed() {
    child(
        "task_id_is_trimmed",
        &[("HERMES_KANBAN_TASK", " t_1 ")],
        || {
            assert_eq!(owned_kanban_task().as_deref(), Some("t_1"));
        },
    );
}

/// A scope opened on one thread must not leak into a sibling thread (the property a process-wide
/// environment clear cannot provide).
#[test]
fn thread_isolation() {
    child("thread_isolation", WORKER_ENV, || {
        let inside = Arc::new(Barrier::new(2));
        let checked = Arc::new(Barrier::new(2));
        let (job_inside, job_checked) = (Arc::clone(&inside), Arc::clone(&checked));
        let job = spawn("job", move || {
            let _scope = non_dispatcher_owned_context();
            let seen = (is_dispatcher_owned_worker_context(), gate().is_some());
            job_inside.wait();
            job_checked.wait();
            seen
        })
        .unwrap();
        let sibling = spawn("sibling", move || {
            inside.wait();
            let seen = (is_dispatcher_owned_worker_context(), owned_kanban_task());
            checked.wait();
            seen
        })
        .unwrap();
        assert_eq!(
            job.join().unwrap(),
            (false, false),
            "job thread must be marked non-dispatcher"
        );
        assert_eq!(
            sibling.join().unwrap(),
            (true, Some("t_worker_real_task".to_owned())),
            "sibling thread must be unaffected while the job is inside its scope"
        );
    });
}

#[test]
fn context_carrying_spawn_carries_the_lowered_context() {
    child(
        "context_carrying_spawn_carries_the_lowered_context",
        WORKER_ENV,
        || {
            let _scope = non_dispatcher_owned_context();
            let seen = spawn("carried", || {
                let grandchild = spawn("carried-again", || {
                    (is_dispatcher_owned_worker_context(), gate().is_some())
                })
                .unwrap()
                .join()
                .unwrap();
                (
                    (is_dispatcher_owned_worker_context(), gate().is_some()),
                    grandchild,
                )
            })
            .unwrap()
            .join()
            .unwrap();
            assert_eq!(seen, ((false, false), (false, false)));
        },
    );
}

#[test]
fn spawn_from_an_owned_context_stays_owned() {
    let seen = spawn("owned", is_dispatcher_owned_worker_context)
        .unwrap()
        .join()
        .unwrap();
    assert!(seen);
}

#[test]
fn delegated_scope_is_carried_into_spawned_threads() {
    let _child = delegated_child_context();
    let seen = spawn("delegated", || {
        (is_dispatcher_owned_worker_context(), is_delegated_child())
    })
    .unwrap()
    .join()
    .unwrap();
    assert_eq!(seen, (false, true));
}

#[test]
fn captured_context_installs_on_a_pool_thread_and_restores() {
    let captured = {
        let _scope = non_dispatcher_owned_context();
        capture_context()
    };
    assert!(!captured.is_owned());
    assert!(capture_context().is_owned());
    {
        let _installed = captured.install();
        assert!(!is_dispatcher_owned_worker_context());
    }
    assert!(is_dispatcher_owned_worker_context());
}

#[test]
fn installing_an_owned_capture_cannot_raise_a_lowered_thread() {
    let owned = capture_context();
    let _scope = non_dispatcher_owned_context();
    let _installed = owned.install();
    assert!(!is_dispatcher_owned_worker_context());
}

fn removed_and_set(cmd: &ChildCommand) -> (Vec<String>, Vec<(String, String)>) {
    let mut removed = Vec::new();
    let mut set = Vec::new();
    for (k, v) in cmd.planned_env().unwrap() {
        let k = k.to_string_lossy().into_owned();
        match v {
            Some(v) => set.push((k, v.to_string_lossy().into_owned())),
            None => removed.push(k),
        }
    }
    (removed, set)
}

#[test]
fn command_in_a_non_owned_scope_removes_identity_and_sets_the_marker() {
    let _scope = non_dispatcher_owned_context();
    let (removed, set) = removed_and_set(&command("true"));
    for key in KANBAN_ENV_KEYS.iter().chain(BEHAVIOR_ONLY_ENV_KEYS) {
        assert!(removed.iter().any(|k| k == key), "{key} must be removed");
    }
    for key in ["HERMES_PROFILE", "HERMES_SESSION_SOURCE", "HERMES_TENANT"] {
        assert!(removed.iter().any(|k| k == key), "{key} must be removed");
    }
    assert_eq!(
        set,
        vec![(DELEGATED_CHILD_MARKER.to_owned(), "1".to_owned())]
    );
}

#[test]
fn command_in_an_owned_context_is_left_alone() {
    let (removed, set) = removed_and_set(&command("true"));
    assert!(removed.is_empty() && set.is_empty());
}

#[test]
fn a_command_built_while_owned_is_judged_when_it_spawns() {
    let mut early = command("true");
    early.env("AGENT_FLAVOUR", "plain");
    let _scope = non_dispatcher_owned_context();
    let (removed, set) = removed_and_set(&early);
    assert!(removed.iter().any(|k| k == "HERMES_KANBAN_TASK"));
    assert!(set.contains(&(DELEGATED_CHILD_MARKER.to_owned(), "1".to_owned())));
    assert!(set.contains(&("AGENT_FLAVOUR".to_owned(), "plain".to_owned())));
}

#[test]
fn a_child_asked_to_carry_identity_or_to_drop_the_marker_is_refused() {
    for (key, value) in [
        ("HERMES_KANBAN_TASK", Some("t_forged")),
        ("HERMES_KANBAN_SOMETHING_NEW", Some("x")),
        ("HERMES_TENANT", Some("acme")),
        ("HERMES_PROFILE", Some("other")),
        (DELEGATED_CHILD_MARKER, Some("")),
        (DELEGATED_CHILD_MARKER, None),
    ] {
        let mut cmd = command("true");
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
        let err = cmd.status().expect_err(key);
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{key}");
        assert!(err.to_string().contains(key), "{err}");
        assert!(cmd.planned_env().is_err(), "{key}");
    }
    // Removing an identity key is lowering, never granting: allowed.
    let mut cmd = command("true");
    cmd.env_remove("HERMES_KANBAN_TASK")
        .env("HERMES_KANBAN_HOME", "/tmp/k");
    assert!(cmd.planned_env().is_ok());
}

#[test]
fn identity_keys_are_classified_by_rule() {
    for key in KANBAN_ENV_KEYS.iter().chain(BEHAVIOR_ONLY_ENV_KEYS) {
        assert!(is_identity_key(OsStr::new(key)), "{key}");
        assert!(!INHERITABLE_ENV_KEYS.contains(key), "{key} is in two lists");
    }
    assert!(is_identity_key(OsStr::new("HERMES_KANBAN_UNHEARD_OF")));
    assert!(is_identity_key(OsStr::new("HERMES_SESSION_CHAT_ID")));
    for key in INHERITABLE_ENV_KEYS {
        assert!(!is_identity_key(OsStr::new(key)), "{key}");
    }
    assert!(!is_identity_key(OsStr::new("PATH")));
}

#[test]
fn no_setting_maps_to_an_identity_key() {
    use settings::Setting::*;
    for setting in settings::Setting::ALL {
        // Exhaustive on purpose: a new variant does not compile here until it is added to `ALL`.
        match setting {
            Home
            | BusyTimeoutMs
            | ClaimTtlSeconds
            | CrashGraceSeconds
            | RateLimitCooldownSeconds
            | StopNudge => {}
        }
        let key = setting.key();
        assert!(!is_identity_key(OsStr::new(key)), "{setting:?} reads {key}");
        assert!(
            INHERITABLE_ENV_KEYS.contains(&key),
            "{setting:?} ({key}) is not classified inheritable"
        );
    }
}

#[test]
fn child_started_in_a_non_owned_scope_sees_no_identity() {
    child(
        "child_started_in_a_non_owned_scope_sees_no_identity",
        &worker_env_with(&[
            ("HERMES_PROFILE", "coder"),
            ("HERMES_SESSION_SOURCE", "kanban"),
            ("HERMES_TENANT", "acme"),
            ("HERMES_KANBAN_SOMETHING_NEW", "x"),
        ]),
        || {
            let preview = child_env_preview();
            assert_eq!(
                preview.get("HERMES_KANBAN_TASK").map(String::as_str),
                Some("t_worker_real_task"),
                "the worker's own children inherit its identity"
            );
            let _scope = non_dispatcher_owned_context();
            let preview = child_env_preview();
            assert_eq!(
                preview.into_iter().collect::<Vec<_>>(),
                vec![(DELEGATED_CHILD_MARKER.to_owned(), "1".to_owned())]
            );
            let out = command("env").output().unwrap();
            let printed = String::from_utf8_lossy(&out.stdout);
            assert!(!printed.contains("HERMES_KANBAN_"), "{printed}");
            for key in [
                "HERMES_PROFILE=",
                "HERMES_SESSION_SOURCE=",
                "HERMES_TENANT=",
            ] {
                assert!(!printed.contains(key), "{key} leaked:\n{printed}");
            }
            assert!(printed.contains(&format!("{DELEGATED_CHILD_MARKER}=1")));
        },
    );
}

#[test]
fn scopes_never_touch_the_process_environment() {
    child(
        "scopes_never_touch_the_process_environment",
        WORKER_ENV,
        || {
            let before = kanban_env();
            assert_eq!(before.len(), WORKER_ENV.len());
            let during = {
                let _scope = non_dispatcher_owned_context();
                let _child = delegated_child_context();
                let _ = command("true");
                kanban_env()
            };
            assert_eq!(during, before);
            assert_eq!(kanban_env(), before);
        },
    );
}

#[test]
fn a_thread_not_started_by_identity_spawn_is_not_owned() {
    // An unnamed raw thread stands for a library's pool or a careless spawn: fail closed.
    #[allow(clippy::disallowed_methods)] // the test starts the raw thread the rule is about
    let raw = std::thread::spawn(|| {
        let owned = is_dispatcher_owned_worker_context();
        // What it hands on through the sanctioned spawner is not owned either.
        let child = spawn("from-raw", is_dispatcher_owned_worker_context)
            .unwrap()
            .join()
            .unwrap();
        (owned, child, capture_context().is_owned())
    });
    assert_eq!(raw.join().unwrap(), (false, false, false));
    // A sibling started through identity::spawn from an owned context is owned.
    let sibling = spawn("sibling", is_dispatcher_owned_worker_context).unwrap();
    assert!(sibling.join().unwrap());
}

#[test]
fn a_pool_job_runs_in_the_context_captured_at_submission() {
    let (tx, rx) = std::sync::mpsc::channel::<Job<bool>>();
    let (back, results) = std::sync::mpsc::channel::<bool>();
    // The pool thread is started while owned.
    let pool = spawn("pool", move || {
        for job in rx {
            back.send(job.run()).unwrap();
        }
        is_dispatcher_owned_worker_context()
    })
    .unwrap();
    {
        let _cron = non_dispatcher_owned_context();
        tx.send(Job::new(is_dispatcher_owned_worker_context))
            .unwrap();
    }
    tx.send(Job::new(is_dispatcher_owned_worker_context))
        .unwrap();
    drop(tx);
    assert!(
        !results.recv().unwrap(),
        "a job sent from a cron scope ran owned"
    );
    assert!(
        results.recv().unwrap(),
        "a job sent from an owned context ran lowered"
    );
    assert!(pool.join().unwrap(), "the pool thread itself stays owned");
}
