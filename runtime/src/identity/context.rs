//! The per-execution-context ownership state (model: tracing-core's `DefaultGuard`).
//!
//! Each thread keeps two counters: how many non-owned scopes and how many delegated-child scopes
//! are open on it. A context is owned only while both are zero. Counting (rather than saving and
//! restoring a flag) means a scope closed out of order can never raise authority while another
//! lowered scope is still open, and there is no operation that raises it at all.
//! Threads started through [`crate::identity::spawn`] inherit the lowered state of their parent.
//!
//! Fail closed: a thread is owned only if it is the process's main thread or was started by
//! `identity::spawn` from an owned context ([`sanction_current_thread`], called by the spawner
//! only). Any other thread — a library's pool, a raw spawn — is not owned, whatever its counters
//! say, and what it captures for another thread is "not owned" too.

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
    /// Set on a thread started by `identity::spawn` (which then installs the carried state).
    #[allow(clippy::missing_const_for_thread_local)]
    static SANCTIONED: Cell<bool> = Cell::new(false);
}

/// Marks the current thread as started by `identity::spawn`: only the spawner calls it, first
/// thing on the new thread, before it installs the state it carried.
pub(crate) fn sanction_current_thread() {
    SANCTIONED.with(|s| s.set(true));
}

/// True on the process's main thread (its thread id is the process id).
#[cfg(not(loom))]
fn is_main_thread() -> bool {
    rustix::thread::gettid() == rustix::process::getpid() || test_thread_stands_in_for_main()
}

/// Under loom: the model's first thread (loom numbers the bootstrap thread 0).
#[cfg(loom)]
fn is_main_thread() -> bool {
    format!("{:?}", crate::sync::thread::current().id()) == "ThreadId(0)"
}

/// In test builds (`cfg(test)` or the `test-support` feature, which only tests enable), a thread
/// libtest started for a test stands in for a process's main thread: libtest never runs a test on
/// its main thread, and names the thread after the test. So in a test build a *named* thread not
/// started by `identity::spawn` counts as main; an unnamed raw thread (`std::thread::spawn`) is
/// still not owned, which is how the tests check the rule.
#[cfg(not(loom))]
fn test_thread_stands_in_for_main() -> bool {
    #[cfg(any(test, feature = "test-support"))]
    {
        crate::sync::thread::current().name().is_some()
    }
    #[cfg(not(any(test, feature = "test-support")))]
    {
        false
    }
}

/// True when this thread may be owned at all: the main thread, or one `identity::spawn` started.
fn thread_is_sanctioned() -> bool {
    SANCTIONED.with(Cell::get) || is_main_thread()
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
    get(Counter::NonOwned) == 0 && get(Counter::Delegated) == 0 && thread_is_sanctioned()
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

/// Captures the caller's lowered state; a thread that may not be owned at all (see the module
/// docs) captures "not owned".
pub fn capture() -> Carried {
    Carried {
        non_owned: get(Counter::NonOwned) > 0 || !thread_is_sanctioned(),
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

/// A closure submitted to another thread (a pool's queue), carrying the context of the code that
/// submitted it: [`Job::run`] installs that context around the closure on whichever thread runs it.
/// So a job submitted from a cron scope runs non-owned on an owned pool thread, and a job
/// submitted from an owned context still cannot raise a lowered or unsanctioned pool thread.
/// `Box<dyn FnOnce() + Send>` outside `identity/` is the `uncarried-job` lint's finding: use this.
pub struct Job<T = ()> {
    carried: Carried,
    f: Box<dyn FnOnce() -> T + Send>,
}

impl<T> Job<T> {
    /// Captures the caller's context now, with the closure to run later.
    pub fn new(f: impl FnOnce() -> T + Send + 'static) -> Self {
        Job {
            carried: capture(),
            f: Box::new(f),
        }
    }

    /// Runs the closure in the context captured at submission (lowered further if the running
    /// thread is).
    pub fn run(self) -> T {
        let _scope = self.carried.install();
        (self.f)()
    }
}

impl<T> std::fmt::Debug for Job<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("carried", &self.carried)
            .finish_non_exhaustive()
    }
}
