//! The per-execution-context ownership state (model: tracing-core's `DefaultGuard`).
//!
//! Each thread keeps two counters: how many non-owned scopes and how many delegated-child scopes
//! are open on it. A context is owned only while both are zero. Counting (rather than saving and
//! restoring a flag) means a scope closed out of order can never raise authority while another
//! lowered scope is still open, and there is no operation that raises it at all.
//! Threads started through [`crate::identity::spawn`] inherit the lowered state of their parent.

use std::cell::Cell;
use std::marker::PhantomData;

use crate::sync::thread_local;

// Plain (not `const { … }`) initializers: loom's `thread_local!`, which `crate::sync` swaps in
// under `--cfg loom`, accepts only an expression there.
thread_local! {
    #[allow(clippy::missing_const_for_thread_local)]
    static NON_OWNED: Cell<u32> = Cell::new(0);
    #[allow(clippy::missing_const_for_thread_local)]
    static DELEGATED: Cell<u32> = Cell::new(0);
}

#[derive(Clone, Copy)]
enum Counter {
    NonOwned,
    Delegated,
}

fn get(counter: Counter) -> u32 {
    match counter {
        Counter::NonOwned => NON_OWNED.with(Cell::get),
        Counter::Delegated => DELEGATED.with(Cell::get),
    }
}

/// Makes a type `!Send` and `!Sync`: a scope belongs to the thread that opened it.
type NotSend = PhantomData<*const ()>;

fn bump(counter: Counter, up: bool) {
    let step = |c: &Cell<u32>| {
        let v = c.get();
        c.set(if up {
            v.saturating_add(1)
        } else {
            v.saturating_sub(1)
        });
    };
    match counter {
        Counter::NonOwned => NON_OWNED.with(step),
        Counter::Delegated => DELEGATED.with(step),
    }
}

pub(crate) fn scope_is_owned() -> bool {
    get(Counter::NonOwned) == 0 && get(Counter::Delegated) == 0
}

pub(crate) fn in_delegated_scope() -> bool {
    get(Counter::Delegated) > 0
}

/// While alive, the current thread is not a dispatcher-owned worker context. Restores the
/// previous state on drop; nests.
#[must_use = "the scope ends when the guard is dropped; bind it with `let _scope = …`"]
#[derive(Debug)]
pub struct NonOwnedGuard {
    _not_send: NotSend,
}

impl Drop for NonOwnedGuard {
    fn drop(&mut self) {
        bump(Counter::NonOwned, false);
    }
}

/// Lowers the current execution context to "not dispatcher-owned" until the guard drops.
pub fn non_dispatcher_owned_context() -> NonOwnedGuard {
    bump(Counter::NonOwned, true);
    NonOwnedGuard {
        _not_send: PhantomData,
    }
}

/// Token form of [`non_dispatcher_owned_context`], for callers whose scope is not lexical.
#[must_use = "pass the token to `exit_non_dispatcher_owned_context` to end the scope"]
#[derive(Debug)]
pub struct NonOwnedToken {
    guard: NonOwnedGuard,
}

/// Opens a non-owned scope that lasts until [`exit_non_dispatcher_owned_context`].
pub fn enter_non_dispatcher_owned_context() -> NonOwnedToken {
    NonOwnedToken {
        guard: non_dispatcher_owned_context(),
    }
}

/// Closes the scope opened by [`enter_non_dispatcher_owned_context`].
pub fn exit_non_dispatcher_owned_context(token: NonOwnedToken) {
    drop(token.guard);
}

/// While alive, the current thread acts as a delegated child: not owned, and its child processes
/// carry the delegated-child marker.
#[must_use = "the scope ends when the guard is dropped; bind it with `let _scope = …`"]
#[derive(Debug)]
pub struct DelegatedChildGuard {
    _not_send: NotSend,
}

impl Drop for DelegatedChildGuard {
    fn drop(&mut self) {
        bump(Counter::Delegated, false);
    }
}

/// Lowers the current execution context to "delegated child" until the guard drops.
pub fn delegated_child_context() -> DelegatedChildGuard {
    bump(Counter::Delegated, true);
    DelegatedChildGuard {
        _not_send: PhantomData,
    }
}

/// The lowered state of a thread, captured to be carried into another thread (a pool worker, a
/// heartbeat thread): `Send` and `Copy`. Installing it can only lower the receiving thread's
/// authority, never raise it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carried {
    non_owned: bool,
    delegated: bool,
}

/// Captures the caller's lowered state.
pub fn capture() -> Carried {
    Carried {
        non_owned: get(Counter::NonOwned) > 0,
        delegated: get(Counter::Delegated) > 0,
    }
}

/// Scope that applies a captured state on the thread that installs it, until dropped. `!Send`.
#[must_use = "the carried context applies until the guard is dropped; bind it with `let _scope = …`"]
#[derive(Debug)]
pub struct Installed {
    _non_owned: Option<NonOwnedGuard>,
    _delegated: Option<DelegatedChildGuard>,
}

impl Carried {
    /// True when the captured state is owned (nothing lowered).
    pub fn is_owned(self) -> bool {
        !self.non_owned && !self.delegated
    }

    /// Applies the captured state to the current thread until the returned guard drops.
    pub fn install(self) -> Installed {
        Installed {
            _non_owned: self.non_owned.then(non_dispatcher_owned_context),
            _delegated: self.delegated.then(delegated_child_context),
        }
    }
}
