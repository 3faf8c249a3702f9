//! `cargo xtask check|drift|lint|loom|bench|chaos`: the project's static checks (model: rust-analyzer's xtask).
//!
//! Each task is one small function returning `anyhow::Result<()>`; a task that finds problems
//! prints them as `path:line:col: rule: message — how to fix` and fails, so the process exits
//! non-zero. The analysis itself lives in the `kanban-lints` library (so `cargo test` runs it
//! too); this binary only parses flags, runs cargo for fmt and clippy, prints and sets the exit
//! code. It never edits the sources.

mod bench;
mod chaos;
mod chaos_store;
mod check;
mod flags;
mod links;
mod loom;
mod workspace;

use std::time::Instant;

use anyhow::{Context, bail};
use kanban_lints::Diagnostic;

use crate::workspace::Workspace;

fn main() {
    // Print the chain of causes only: a failed check is not a crash, no backtrace.
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    // A usage error prints clap's message and exits 2; `--help` prints the help and exits 0.
    let flags = flags::Flags::parse(std::env::args_os()).unwrap_or_else(|e| e.exit());
    let ws = Workspace::discover(flags.root.as_deref())?;
    let root = ws.root.clone();
    match flags.task {
        flags::Task::Check => check::run(&ws, flags.tests),
        // What `.ci/run` runs and the README's test command: the static checks, every test, a
        // short fault run, and the loom models at the default preemption bound (their build
        // takes about two minutes on two cores, their run a few seconds).
        flags::Task::Ci => check::run(&ws, true)
            .and_then(|()| {
                // The short fault run on each store, in direct mode and in owner mode.
                [(false, false), (true, false), (false, true), (true, true)]
                    .into_iter()
                    .try_for_each(|(postgres, owner)| {
                        chaos::run(
                            &root,
                            chaos::Options {
                                tasks: chaos::DEFAULT_TASKS,
                                kills: chaos::DEFAULT_KILLS,
                                seed: 1,
                                postgres,
                                owner,
                            },
                        )
                    })
            })
            .and_then(|()| {
                loom::run(
                    &ws,
                    loom::DEFAULT_PREEMPTIONS,
                    flags.target_dir.as_deref(),
                    false,
                )
            }),
        flags::Task::Drift if flags.verbose => drift_verbose(&ws),
        flags::Task::Drift => drift(&ws),
        flags::Task::Lint => lint(&ws),
        flags::Task::Bench => bench::run(&root, flags.big),
        flags::Task::Chaos => chaos::run(
            &root,
            chaos::Options {
                tasks: flags.chaos.tasks,
                kills: flags.chaos.kills,
                seed: flags.chaos.seed,
                postgres: flags.chaos.postgres,
                owner: flags.chaos.owner,
            },
        ),
        flags::Task::Loom => loom::run(
            &ws,
            flags.preemptions,
            flags.target_dir.as_deref(),
            flags.no_run,
        ),
    }
}

/// `cargo xtask drift`: the env-key drift guard over `dispatch::default_spawn`.
pub fn drift(ws: &Workspace) -> anyhow::Result<()> {
    let started = Instant::now();
    let tree = ws.tree().context("drift guard")?;
    let diags = kanban_lints::drift::check(&tree);
    report("drift", &diags, started)
}

/// `cargo xtask drift -v`: the guard, listing every key it found first.
fn drift_verbose(ws: &Workspace) -> anyhow::Result<()> {
    let started = Instant::now();
    let tree = ws.tree().context("drift guard")?;
    let mut found = kanban_lints::drift::analyze(&tree);
    found.injections.sort_by_key(|i| {
        let start = i.span.start();
        (i.path.clone(), start.line, start.column)
    });
    for i in &found.injections {
        let start = i.span.start();
        let via = match &i.via {
            Some((name, path, line)) => format!(" via `{name}` ({path}:{line})"),
            None => String::new(),
        };
        println!(
            "{}:{}:{}: {:?} {} in `{}`{via}",
            i.path,
            start.line,
            start.column + 1,
            i.kind,
            i.key,
            i.in_fn
        );
    }
    let mut diags = found.diagnostics;
    diags.sort();
    report("drift", &diags, started)
}

/// `cargo xtask lint`: the syn-based rules and the module graph (no import cycle, the storage
/// crates only in their modules) over the checked workspace members.
pub fn lint(ws: &Workspace) -> anyhow::Result<()> {
    let started = Instant::now();
    let diags = ws.lint().context("lint")?;
    let result = report("lint", &diags, started);
    if let Some(summary) = kanban_lints::graph::summary(&diags) {
        eprintln!("{summary}");
    }
    result
}

/// Prints `diags`; fails when one of them is an error.
fn report(task: &str, diags: &[Diagnostic], started: Instant) -> anyhow::Result<()> {
    for d in diags {
        println!("{d}");
    }
    let errors = diags.iter().filter(|d| d.is_error()).count();
    let warnings = diags.len() - errors;
    let elapsed = started.elapsed().as_millis();
    if errors > 0 {
        bail!("{task}: {errors} error(s), {warnings} warning(s) ({elapsed} ms)");
    }
    eprintln!("{task}: ok, {warnings} warning(s) ({elapsed} ms)");
    Ok(())
}
