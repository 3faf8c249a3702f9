//! `cargo xtask check`: everything CI checks statically, in order, reporting every failure
//! rather than stopping at the first.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

use crate::workspace::Workspace;

/// One step of the check.
type Step = fn(&Workspace) -> anyhow::Result<()>;

/// Runs fmt, clippy, drift, lint (the syn rules and the module graph) and the link check over
/// the workspace `ws`, then, if
/// `tests`, prepares what the tests need and runs them.
pub fn run(ws: &Workspace, tests: bool) -> anyhow::Result<()> {
    let mut steps: Vec<(&str, Step)> = vec![
        ("fmt", |ws| fmt(&ws.root)),
        ("clippy", |ws| clippy(&ws.root)),
        ("drift", crate::drift),
        ("lint", crate::lint),
        ("links", |ws| crate::links::check(&ws.root)),
    ];
    if tests {
        steps.push(("test prerequisites", |ws| prerequisites(&ws.root)));
        steps.push(("test", |ws| test(&ws.root)));
    }
    let mut failed = Vec::new();
    for (name, step) in steps {
        eprintln!("== xtask check: {name}");
        if let Err(e) = step(ws) {
            eprintln!("{name}: FAILED: {e:#}");
            failed.push(name);
        }
    }
    if !failed.is_empty() {
        bail!("check failed: {}", failed.join(", "));
    }
    eprintln!("check: ok");
    Ok(())
}

/// `cargo fmt --all --check`.
fn fmt(root: &Path) -> anyhow::Result<()> {
    cargo(root, &["fmt", "--all", "--check"]).context("formatting differs — run `cargo fmt --all`")
}

/// `cargo clippy --workspace --all-targets -- -D warnings`.
fn clippy(root: &Path) -> anyhow::Result<()> {
    cargo(
        root,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )
    .context("clippy found warnings — fix them (the messages above say how)")
}

/// Installs what the tests need, once, before they run (rather than each test binary racing to
/// install it): the headless Chromium of the browser tests (`.ci/chromium`), the bash, zsh, fish
/// and `man` of the completion and man page tests (`.ci/shells`) and the PostgreSQL server of the
/// PostgreSQL tests (a throwaway cluster started and stopped, which installs the server when it
/// is missing). Each fails saying what to install when it cannot; the tests would then fail
/// (PostgreSQL) or, outside `CI=true`, skip (the browser, the shells).
fn prerequisites(root: &Path) -> anyhow::Result<()> {
    let script = root.join(".ci/chromium");
    let chromium = Command::new("bash")
        .arg(&script)
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("cannot run {}", script.display()))?;
    let mut missing = Vec::new();
    if !chromium.success() {
        missing.push(format!(
            "{} found no headless Chromium and could not install it (the messages above say \
             why); the browser tests need it",
            script.display()
        ));
    }
    let script = root.join(".ci/shells");
    let shells = Command::new("bash")
        .arg(&script)
        .status()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !shells.success() {
        missing.push(format!(
            "{} found no bash, zsh, fish or man and could not install them (the messages above \
             say why); the completion and man page tests need them",
            script.display()
        ));
    }
    if let Err(e) = kanban_pgwire::cluster::TestCluster::start() {
        missing.push(format!(
            "the PostgreSQL tests' server cannot be started (see the README's Testing \
             section): {:#}",
            anyhow::Error::new(e)
        ));
    }
    if !missing.is_empty() {
        bail!("{}", missing.join("; "));
    }
    Ok(())
}

/// `cargo test --workspace`.
fn test(root: &Path) -> anyhow::Result<()> {
    cargo(root, &["test", "--workspace"]).context("tests failed (see above)")
}

fn cargo(root: &Path, args: &[&str]) -> anyhow::Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args(args)
        .current_dir(root)
        .status()
        .with_context(|| format!("cannot run `cargo {}`", args.join(" ")))?;
    if !status.success() {
        bail!("`cargo {}` exited with {status}", args.join(" "));
    }
    Ok(())
}
