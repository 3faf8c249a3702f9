//! loom models of the ownership context, the cron fire claim and the cron-job-beside-heartbeat
//! interleavings (ARCHITECTURE.md §4, §6, §9).
//!
//! Built and run with `RUSTFLAGS="--cfg loom" cargo test -p kanban-loom-tests --release`, or
//! `cargo xtask loom`, which does exactly that in its own target dir with a preemption bound.
//! Under `--cfg loom` the runtime's `crate::sync` facade is loom's, so `identity::spawn`,
//! the thread-local ownership context and every `crate::sync` primitive of the runtime are
//! model-checked for real; what cannot run under loom (SQLite, processes, the wall clock) is
//! replaced in a model by a small stand-in built on `loom::sync`, and the model's doc comment
//! says so.
//!
//! Each model is a `#[test]` in `tests/` named after its scenario, with a doc comment stating the
//! invariant it checks. Without `--cfg loom` this package builds to nothing and has no tests: a
//! model only means something when loom explores its interleavings.
//!
//! This package owns no product code and must never be a dependency of one.

/// Preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set (`cargo xtask loom` uses the
/// same): the whole suite runs in seconds with it, and the races the models look for need at
/// most two preemptions (a thread switched out on each side of a scope or claim boundary).
pub const DEFAULT_PREEMPTIONS: usize = 3;

/// Runs `model` under loom with a bounded number of preemptions: `LOOM_MAX_PREEMPTIONS` when
/// set (as `cargo xtask loom` does), [`DEFAULT_PREEMPTIONS`] otherwise. Every other knob keeps
/// loom's environment defaults (`LOOM_MAX_BRANCHES`, `LOOM_LOG`, `LOOM_CHECKPOINT_FILE`, …).
/// Prints one line on stderr naming the model (the test thread's name) and how many executions
/// loom explored, so a model that silently stopped exploring shows up as a tiny count.
#[cfg(loom)]
pub fn check<F>(model: F)
where
    F: Fn() + Sync + Send + 'static,
{
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(DEFAULT_PREEMPTIONS);
    }
    let executions = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&executions);
    let started = std::time::Instant::now();
    builder.check(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        model();
    });
    let name = std::thread::current().name().unwrap_or("model").to_owned();
    eprintln!(
        "loom: {name}: {} executions explored, preemption bound {:?}, {:.1?}",
        executions.load(Ordering::Relaxed),
        builder.preemption_bound,
        started.elapsed()
    );
}
