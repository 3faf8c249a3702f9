//! The gates that consume the ownership context (the seed test's `TestKanbanGatesRespectContext`),
//! each run in a re-executed child of this test binary with the worker environment.

use super::*;
use crate::identity::testenv::{WORKER_ENV, in_child, kanban_env, test_path};
use crate::identity::{delegated_child_context, non_dispatcher_owned_context};

fn worker(name: &str, body: impl FnOnce()) {
    in_child(&test_path(module_path!(), name), WORKER_ENV, body);
}

#[test]
fn task_tools_hidden_from_cron_agent() {
    worker("task_tools_hidden_from_cron_agent", || {
        assert!(kanban_mode_enabled());
        let _scope = non_dispatcher_owned_context();
        assert!(!kanban_mode_enabled());
    });
}

#[test]
fn complete_does_not_default_to_worker_task() {
    worker("complete_does_not_default_to_worker_task", || {
        assert_eq!(default_task_id(None).as_deref(), Some("t_worker_real_task"));
        let _scope = non_dispatcher_owned_context();
        assert_eq!(default_task_id(None), None);
    });
}

#[test]
fn explicit_task_id_still_honoured() {
    worker("explicit_task_id_still_honoured", || {
        assert_eq!(
            default_task_id(Some("t_explicit")).as_deref(),
            Some("t_explicit")
        );
        let _scope = non_dispatcher_owned_context();
        assert_eq!(
            default_task_id(Some("t_explicit")).as_deref(),
            Some("t_explicit")
        );
    });
}

#[test]
fn explicit_task_id_honoured_outside_any_worker() {
    assert_eq!(
        default_task_id(Some("t_explicit")).as_deref(),
        Some("t_explicit")
    );
    assert_eq!(default_task_id(None), None);
}

#[test]
fn skill_environment_gate() {
    worker("skill_environment_gate", || {
        assert!(detect_environment("kanban"));
        let _scope = non_dispatcher_owned_context();
        assert!(!detect_environment("kanban"));
    });
}

/// `kanban` must not be memoized: the verdict flips back after the scope with no cache clearing.
#[test]
fn kanban_env_verdict_is_not_memoized() {
    worker("kanban_env_verdict_is_not_memoized", || {
        assert!(detect_environment("kanban"));
        {
            let _scope = non_dispatcher_owned_context();
            assert!(!detect_environment("kanban"));
        }
        assert!(detect_environment("kanban"));
    });
}

#[test]
fn machine_environments_do_not_depend_on_the_context() {
    let outside = (detect_environment("docker"), detect_environment("s6"));
    let _scope = non_dispatcher_owned_context();
    assert_eq!(
        (detect_environment("docker"), detect_environment("s6")),
        outside
    );
    assert!(!detect_environment("no-such-environment"));
}

#[test]
fn toolset_force_add_suppressed() {
    worker("toolset_force_add_suppressed", || {
        assert!(is_dispatcher_owned_worker());
        let _scope = non_dispatcher_owned_context();
        assert!(!is_dispatcher_owned_worker());
    });
}

#[test]
fn guidance_nudge_heartbeat_and_comments_only_for_the_owned_worker() {
    worker(
        "guidance_nudge_heartbeat_and_comments_only_for_the_owned_worker",
        || {
            assert!(worker_guidance().contains("t_worker_real_task"));
            assert!(stop_nudge_enabled());
            let target = auto_heartbeat_target().expect("the owned worker heartbeats");
            assert_eq!(
                (
                    target.task.as_str(),
                    target.run_id,
                    target.claim_lock.as_deref()
                ),
                ("t_worker_real_task", Some(42), Some("lock-abc"))
            );
            assert_eq!(
                comment_injection_task().as_deref(),
                Some("t_worker_real_task")
            );
            let _scope = non_dispatcher_owned_context();
            assert_eq!(worker_guidance(), "");
            assert!(!stop_nudge_enabled());
            assert_eq!(auto_heartbeat_target(), None);
            assert_eq!(comment_injection_task(), None);
        },
    );
}

#[test]
fn stop_nudge_can_be_turned_off() {
    let env: Vec<_> = WORKER_ENV
        .iter()
        .copied()
        .chain([("HERMES_KANBAN_STOP_NUDGE", "0")])
        .collect();
    in_child(
        &test_path(module_path!(), "stop_nudge_can_be_turned_off"),
        &env,
        || {
            assert!(kanban_mode_enabled());
            assert!(!stop_nudge_enabled());
        },
    );
}

#[test]
fn run_id_and_claim_lock_resolve_only_for_the_owned_task() {
    worker(
        "run_id_and_claim_lock_resolve_only_for_the_owned_task",
        || {
            assert_eq!(owned_run_id(), Some(42));
            assert_eq!(run_id_for("t_worker_real_task"), Some(42));
            assert_eq!(run_id_for("t_other"), None);
            assert_eq!(owned_claim_lock().as_deref(), Some("lock-abc"));
            assert!(owned_identity().is_some());
            let _scope = non_dispatcher_owned_context();
            assert_eq!(owned_run_id(), None);
            assert_eq!(run_id_for("t_worker_real_task"), None);
            assert_eq!(owned_claim_lock(), None);
            assert_eq!(owned_identity(), None);
        },
    );
}

#[test]
fn owned_worker_may_mutate_only_its_task() {
    worker("owned_worker_may_mutate_only_its_task", || {
        assert!(check_mutation("t_worker_real_task").is_ok());
        let refused = check_mutation("t_other").unwrap_err();
        assert_eq!(refused.owned, "t_worker_real_task");
        assert!(refused.to_string().contains("t_other"));
        assert!(matches!(
            authorize_mutation("t_other"),
            Err(MutationRefused::NotOwner(_))
        ));
        let _scope = non_dispatcher_owned_context();
        assert!(check_mutation("t_other").is_ok());
    });
}

#[test]
fn delegated_child_is_refused_every_mutation() {
    let _child = crate::identity::delegated_child_context();
    assert!(matches!(
        authorize_mutation("t_any"),
        Err(MutationRefused::Fenced(_))
    ));
}

#[test]
fn gates_leave_the_environment_untouched() {
    worker("gates_leave_the_environment_untouched", || {
        let before = kanban_env();
        let during = {
            let _scope = non_dispatcher_owned_context();
            let _ = snapshot();
            kanban_env()
        };
        let _ = snapshot();
        assert_eq!(during, before);
        assert_eq!(kanban_env(), before);
    });
}

#[test]
fn lifecycle_target_defaults_fences_and_refuses() {
    worker("lifecycle_target_defaults_fences_and_refuses", || {
        let own = lifecycle_target(None).unwrap();
        assert_eq!(
            own,
            LifecycleTarget {
                task_id: "t_worker_real_task".into(),
                expected_run_id: Some(42),
                claim_lock: Some("lock-abc".into()),
            }
        );
        assert_eq!(lifecycle_target(Some("t_worker_real_task")).unwrap(), own);
        assert!(matches!(
            lifecycle_target(Some("t_other")),
            Err(LifecycleRefused::NotOwner(_))
        ));
        {
            let _scope = non_dispatcher_owned_context();
            assert!(matches!(
                lifecycle_target(None),
                Err(LifecycleRefused::NoTask)
            ));
            let explicit = lifecycle_target(Some("t_other")).unwrap();
            assert_eq!(
                (explicit.expected_run_id, explicit.claim_lock),
                (None, None)
            );
        }
        let _child = crate::identity::delegated_child_context();
        assert!(matches!(
            lifecycle_target(Some("t_worker_real_task")),
            Err(LifecycleRefused::Fenced(_))
        ));
    });
}

#[test]
fn report_reflects_the_context() {
    worker("report_reflects_the_context", || {
        let owned = report();
        assert!(owned.owned);
        assert_eq!(owned.task.as_deref(), Some("t_worker_real_task"));
        assert_eq!(owned.run_id, Some(42));
        assert!(!owned.delegated_child);
        assert_eq!(owned.gates["kanban_mode_enabled"], true);
        let _scope = delegated_child_context();
        let lowered = report();
        assert!(!lowered.owned);
        assert_eq!(lowered.task, None);
        assert!(lowered.delegated_child);
        assert_eq!(lowered.gates["kanban_mode_enabled"], false);
    });
}
