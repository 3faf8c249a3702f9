//! Models of the per-execution-context ownership state (`kanban_runtime::identity::context`,
//! ARCHITECTURE.md §4): scopes lower only the thread that opens them, `identity::spawn` carries a lowered
//! state for the whole life of the new thread, and closing scopes in any order never raises
//! authority while one is still open.
//!
//! Everything here is the runtime's real code: under `--cfg loom` the context's `thread_local!`
//! and `identity::spawn`'s threads come from loom through `kanban_runtime::sync`. The atomics the
//! models add are only there to give loom a scheduling point between every step of a scope, so a
//! sibling's check is explored on both sides of each boundary.
#![cfg(loom)]
// Test code: a panic is how a model reports the interleaving that broke its invariant.
#![allow(clippy::unwrap_used)]

use kanban_loom_tests::check;
use kanban_runtime::identity::{
    self, capture_context, delegated_child_context, enter_non_dispatcher_owned_context,
    exit_non_dispatcher_owned_context, is_delegated_child, is_dispatcher_owned_worker_context,
    non_dispatcher_owned_context,
};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::thread;

/// The models assume a plain process: with the delegated-child marker in the environment no
/// context is ever owned and every "owned" assertion below would be about the environment.
fn assert_plain_process() {
    assert!(
        !identity::process_is_delegated_child(),
        "run the loom models outside a delegated child (unset HERMES_DELEGATED_CHILD_CONTEXT)"
    );
}

/// Invariant: a scope lowers only the thread that opened it. While one thread is inside a
/// non-owned scope and its sibling inside a delegated-child scope, each sees itself lowered the
/// whole time and the other's scope never shows through: before, during and after either scope,
/// in every interleaving, a thread outside its own scope is owned, and the main thread (which
/// opens nothing) is owned throughout.
#[test]
fn sibling_scopes_never_lower_each_other() {
    check(|| {
        assert_plain_process();
        // Bumped by each thread at each scope boundary: a scheduling point per step.
        let steps = Arc::new(AtomicUsize::new(0));

        let s = steps.clone();
        let non_owned = identity::spawn("non-owned-sibling", move || {
            assert!(is_dispatcher_owned_worker_context());
            let scope = non_dispatcher_owned_context();
            s.fetch_add(1, SeqCst);
            assert!(!is_dispatcher_owned_worker_context());
            assert!(
                !is_delegated_child(),
                "the sibling's delegated scope showed through"
            );
            s.fetch_add(1, SeqCst);
            assert!(!is_dispatcher_owned_worker_context());
            drop(scope);
            s.fetch_add(1, SeqCst);
            assert!(is_dispatcher_owned_worker_context());
            assert!(!is_delegated_child());
        });

        let s = steps.clone();
        let delegated = identity::spawn("delegated-sibling", move || {
            assert!(is_dispatcher_owned_worker_context());
            let scope = delegated_child_context();
            s.fetch_add(1, SeqCst);
            assert!(!is_dispatcher_owned_worker_context());
            assert!(is_delegated_child());
            s.fetch_add(1, SeqCst);
            assert!(is_delegated_child());
            drop(scope);
            s.fetch_add(1, SeqCst);
            assert!(is_dispatcher_owned_worker_context());
            assert!(!is_delegated_child());
        });

        // The main thread opens nothing: owned whatever the siblings are doing.
        steps.load(SeqCst);
        assert!(is_dispatcher_owned_worker_context());
        assert!(!is_delegated_child());
        non_owned.unwrap().join().unwrap();
        delegated.unwrap().join().unwrap();
        assert!(is_dispatcher_owned_worker_context());
        assert_eq!(steps.load(SeqCst), 6);
    });
}

/// Invariant: a thread started with `identity::spawn` from a lowered scope is lowered for its
/// whole life — also after the parent's scope closed (the parent races to close it right after
/// the spawn), after the child opens and closes scopes of its own, and in a grandchild it
/// spawns — and the parent is owned again as soon as its own scope closes.
#[test]
fn spawn_from_lowered_scope_is_lowered_for_life() {
    check(|| {
        assert_plain_process();
        let parent_closed = Arc::new(AtomicUsize::new(0));

        let scope = non_dispatcher_owned_context();
        let delegated = delegated_child_context();
        let closed = parent_closed.clone();
        let child = identity::spawn("lowered-child", move || {
            assert!(!is_dispatcher_owned_worker_context());
            assert!(is_delegated_child());
            closed.load(SeqCst);
            {
                let _own = non_dispatcher_owned_context();
                assert!(!is_dispatcher_owned_worker_context());
            }
            // The child's own scope closed, the parent's may have: still lowered.
            assert!(!is_dispatcher_owned_worker_context());
            assert!(is_delegated_child());
            let grandchild = identity::spawn("lowered-grandchild", || {
                assert!(!is_dispatcher_owned_worker_context());
                assert!(is_delegated_child());
            })
            .unwrap();
            closed.load(SeqCst);
            assert!(!is_dispatcher_owned_worker_context());
            grandchild.join().unwrap();
            assert!(!is_dispatcher_owned_worker_context());
        })
        .unwrap();
        drop(delegated);
        drop(scope);
        parent_closed.store(1, SeqCst);
        assert!(is_dispatcher_owned_worker_context());
        assert!(!is_delegated_child());
        child.join().unwrap();
        assert!(is_dispatcher_owned_worker_context());
    });
}

/// Invariant: carrying is not "always lower" — a thread started with `identity::spawn` from an
/// owned context stays owned for its whole life while its parent opens and closes non-owned
/// scopes concurrently, and installing a capture taken in an owned context never raises a
/// lowered thread.
#[test]
fn spawn_from_owned_context_stays_owned_while_parent_lowers() {
    check(|| {
        assert_plain_process();
        let parent_lowered = Arc::new(AtomicUsize::new(0));

        let owned_capture = capture_context();
        assert!(owned_capture.is_owned());
        let lowered = parent_lowered.clone();
        let child = identity::spawn("owned-child", move || {
            assert!(is_dispatcher_owned_worker_context());
            lowered.load(SeqCst);
            assert!(is_dispatcher_owned_worker_context());
            let _scope = non_dispatcher_owned_context();
            let _installed = owned_capture.install();
            assert!(
                !is_dispatcher_owned_worker_context(),
                "installing an owned capture raised a lowered thread"
            );
        })
        .unwrap();
        let scope = non_dispatcher_owned_context();
        parent_lowered.store(1, SeqCst);
        assert!(!is_dispatcher_owned_worker_context());
        drop(scope);
        parent_lowered.store(2, SeqCst);
        assert!(is_dispatcher_owned_worker_context());
        child.join().unwrap();
    });
}

/// One lowered scope of each kind the API offers, so a model can close them in any order.
enum Scope {
    Guard(identity::NonOwnedGuard),
    Token(identity::NonOwnedToken),
    Delegated(identity::DelegatedChildGuard),
    Installed(identity::InstalledContext),
}

impl Scope {
    fn close(self) {
        match self {
            Scope::Guard(g) => drop(g),
            Scope::Token(t) => exit_non_dispatcher_owned_context(t),
            Scope::Delegated(g) => drop(g),
            Scope::Installed(i) => drop(i),
        }
    }
}

/// Every order in which four scopes can be closed.
fn close_orders() -> Vec<[usize; 4]> {
    let mut orders = Vec::new();
    for a in 0..4 {
        for b in 0..4 {
            for c in 0..4 {
                let d = 6 - a - b - c;
                if a != b && a != c && b != c && d < 4 && d != a && d != b && d != c {
                    orders.push([a, b, c, d]);
                }
            }
        }
    }
    orders
}

/// Opens a guard, a token, a delegated-child guard and an installed lowered capture (in that
/// order) and closes them in `order`: after every close but the last the thread is still lowered;
/// after the last it is owned. `tick` is a scheduling point between closes.
fn open_and_close(order: [usize; 4], lowered: identity::CapturedContext, tick: &AtomicUsize) {
    let mut scopes: Vec<Option<Scope>> = vec![
        Some(Scope::Guard(non_dispatcher_owned_context())),
        Some(Scope::Token(enter_non_dispatcher_owned_context())),
        Some(Scope::Delegated(delegated_child_context())),
        Some(Scope::Installed(lowered.install())),
    ];
    for (n, &i) in order.iter().enumerate() {
        let scope = scopes[i].take().unwrap();
        scope.close();
        if n + 1 < order.len() {
            assert!(
                !is_dispatcher_owned_worker_context(),
                "closing scopes in the order {order:?} raised authority after {} close(s)",
                n + 1
            );
        }
    }
    tick.fetch_add(1, SeqCst);
    assert!(is_dispatcher_owned_worker_context());
    assert!(!is_delegated_child());
}

/// Invariant: closing nested scopes out of order never raises authority while any scope is
/// still open. Two threads each open four lowered scopes (guard, token, delegated-child guard,
/// installed capture) and close them in all 24 orders — one walks the orders forwards, the other
/// backwards, concurrently — and each is owned again exactly when its last scope closes.
#[test]
fn out_of_order_scope_exits_never_raise_authority() {
    assert_eq!(close_orders().len(), 24);
    check(|| {
        assert_plain_process();
        let lowered = {
            let _scope = non_dispatcher_owned_context();
            capture_context()
        };
        assert!(!lowered.is_owned());
        let tick = Arc::new(AtomicUsize::new(0));

        let (t, forwards) = (tick.clone(), close_orders());
        let a = identity::spawn("closer-a", move || {
            for order in forwards {
                open_and_close(order, lowered, &t);
            }
        });
        let (t, mut backwards) = (tick.clone(), close_orders());
        backwards.reverse();
        let b = identity::spawn("closer-b", move || {
            for order in backwards {
                open_and_close(order, lowered, &t);
            }
        });
        a.unwrap().join().unwrap();
        b.unwrap().join().unwrap();
        assert_eq!(tick.load(SeqCst), 48);
        assert!(is_dispatcher_owned_worker_context());
    });
}

/// Invariant (fail closed): a thread not started through `identity::spawn` — a library's pool, a
/// raw spawn — is never owned, even while its parent is; what it captures carries "not owned",
/// so a thread it starts through `identity::spawn` is not owned either. The main thread stays
/// owned throughout.
#[test]
fn raw_thread_is_never_owned() {
    check(|| {
        assert_plain_process();
        let raw = thread::spawn(|| {
            assert!(!is_dispatcher_owned_worker_context());
            assert!(!identity::capture_context().is_owned());
            let child = identity::spawn("from-raw", is_dispatcher_owned_worker_context).unwrap();
            assert!(!child.join().unwrap());
        });
        assert!(is_dispatcher_owned_worker_context());
        raw.join().unwrap();
        assert!(is_dispatcher_owned_worker_context());
    });
}
