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

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use kanban_lints::Diagnostic;

fn main() {
    // Print the chain of causes only: a failed check is not a crash, no backtrace.
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let flags = match flags::Flags::parse(std::env::args().skip(1)) {
        Ok(flags) => flags,
        Err(msg) => {
            eprintln!("{msg}\n\n{}", flags::USAGE);
            std::process::exit(2);
        }
    };
    let root = match &flags.root {
        Some(root) => root.clone(),
        None => project_root()?,
    };
    match flags.task {
        flags::Task::Help => {
            println!("{}", flags::USAGE);
            Ok(())
        }
        flags::Task::Check => check::run(&root, flags.tests),
        // What `.ci/run` runs and the README's test command: the static checks, every test, a
        // short fault run, and the loom models at the default preemption bound (their build
        // takes about two minutes on two cores, their run a few seconds).
        flags::Task::Ci => check::run(&root, true)
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
                    &root,
                    loom::DEFAULT_PREEMPTIONS,
                    flags.target_dir.as_deref(),
                    false,
                )
            }),
        flags::Task::Drift if flags.verbose => drift_verbose(&root),
        flags::Task::Drift => drift(&root),
        flags::Task::Lint => lint(&root),
        flags::Task::Bench => bench::run(&root),
        flags::Task::Chaos => chaos::run(
            &root,
            chaos::Options {
                tasks: flags.chaos.tasks.unwrap_or(chaos::DEFAULT_TASKS),
                kills: flags.chaos.kills.unwrap_or(chaos::DEFAULT_KILLS),
                seed: flags.chaos.seed.unwrap_or(1),
                postgres: flags.chaos.postgres,
                owner: flags.chaos.owner,
            },
        ),
        flags::Task::Loom => loom::run(
            &root,
            flags.preemptions.unwrap_or(loom::DEFAULT_PREEMPTIONS),
            flags.target_dir.as_deref(),
            flags.no_run,
        ),
    }
}

/// The workspace being checked: the nearest folder, from the current directory up, whose
/// `Cargo.toml` declares `[workspace]` — found at run time, never the folder this binary was
/// built in (with a shared target dir that would be another checkout, and a false green).
fn project_root() -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    workspace_root_above(&cwd).with_context(|| {
        format!(
            "{} is not inside a cargo workspace (no Cargo.toml with [workspace] here or above) — \
             run from the workspace or pass --root DIR",
            cwd.display()
        )
    })
}

/// The nearest ancestor of `dir` (itself included) with a `Cargo.toml` declaring `[workspace]`.
fn workspace_root_above(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| {
            std::fs::read_to_string(d.join("Cargo.toml"))
                .is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"))
        })
        .map(Path::to_path_buf)
}

/// `cargo xtask drift`: the env-key drift guard over `dispatch::default_spawn`.
pub fn drift(root: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let diags = kanban_lints::drift_root(root).context("drift guard")?;
    report("drift", &diags, started)
}

/// `cargo xtask drift -v`: the guard, listing every key it found first.
fn drift_verbose(root: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let tree = kanban_lints::Tree::load(root).context("drift guard")?;
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

/// `cargo xtask lint`: the syn-based rules over `runtime/src`.
pub fn lint(root: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let diags = kanban_lints::lint_root(root).context("lint")?;
    report("lint", &diags, started)
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
