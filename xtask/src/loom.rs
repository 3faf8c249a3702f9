//! `cargo xtask loom`: runs the loom models of `kanban-loom-tests` (ARCHITECTURE.md §9).
//!
//! It runs `cargo test -p kanban-loom-tests --release --no-fail-fast -- --nocapture` with `--cfg loom` added to
//! `RUSTFLAGS`, `LOOM_MAX_PREEMPTIONS` set (the bound keeps the whole suite within a few
//! minutes on two cores) and a target dir of its own (`<target>/loom`, `<target>` as `cargo metadata` reports it), because a `--cfg loom`
//! build recompiles every dependency and would otherwise evict the normal build's artifacts.
//! Failures pass through: cargo's output streams unchanged and the task fails with it. It also
//! fails when no model ran at all — a build that lost the `--cfg loom` flag compiles the models
//! away, and an empty pass must not look like a green one.
//!
//! It never edits sources and never touches the normal target dir.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};

use crate::workspace::Workspace;

/// Preemption bound when `--preemptions` is not given.
pub const DEFAULT_PREEMPTIONS: usize = 3;

/// Runs the models of `ws` with `preemptions` as loom's preemption bound, building in
/// `target_dir` (default: `loom` under the target folder `cargo metadata` reports).
/// With `no_run`, only builds the models (`cargo test --no-run`; `cargo xtask loom --no-run`),
/// so a model that no longer compiles against the runtime fails fast; `cargo xtask ci` builds
/// and runs them.
pub fn run(
    ws: &Workspace,
    preemptions: usize,
    target_dir: Option<&Path>,
    no_run: bool,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let root = ws.root.as_path();
    let target = match target_dir {
        Some(dir) => dir.to_path_buf(),
        None => ws.target_dir()?.join("loom"),
    };
    let mut rustflags = std::env::var("RUSTFLAGS").unwrap_or_default();
    if !rustflags.contains("--cfg loom") && !rustflags.contains("--cfg=loom") {
        rustflags = format!("{rustflags} --cfg loom").trim().to_owned();
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!(
        "loom: RUSTFLAGS=\"{rustflags}\" LOOM_MAX_PREEMPTIONS={preemptions} CARGO_TARGET_DIR={} \
         cargo test -p kanban-loom-tests --release --no-fail-fast",
        target.display()
    );
    let mut args = vec![
        "test",
        "-p",
        "kanban-loom-tests",
        "--release",
        // Every model runs, and every failing one is reported, not only the first.
        "--no-fail-fast",
    ];
    if no_run {
        args.push("--no-run");
    } else {
        args.extend(["--", "--nocapture"]);
    }
    let mut child = Command::new(&cargo)
        .args(&args)
        .current_dir(root)
        .env("RUSTFLAGS", &rustflags)
        // Would take precedence over RUSTFLAGS and drop `--cfg loom`.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("CARGO_TARGET_DIR", &target)
        .env("LOOM_MAX_PREEMPTIONS", preemptions.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run `cargo test -p kanban-loom-tests`")?;
    let mut passed = 0usize;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line = line.context("reading cargo's output")?;
            println!("{line}");
            passed += passed_in(&line);
        }
    }
    let status = child.wait().context("waiting for cargo")?;
    let elapsed = started.elapsed().as_secs_f64();
    if !status.success() {
        bail!(
            "loom: a model failed or did not build ({status}, {elapsed:.0} s) — its doc comment \
             states the invariant; rerun it alone with `LOOM_LOG=1 LOOM_LOCATION=1` to see the \
             failing interleaving"
        );
    }
    if no_run {
        eprintln!("loom: ok, models built with --cfg loom, not run ({elapsed:.0} s)");
        return Ok(());
    }
    if passed == 0 {
        bail!(
            "loom: no model ran — the models are compiled only with `--cfg loom`; check that \
             nothing overrides RUSTFLAGS"
        );
    }
    eprintln!(
        "loom: ok, {passed} model(s) passed, preemption bound {preemptions} ({elapsed:.0} s)"
    );
    Ok(())
}

/// The `N` of a libtest summary line `test result: ok. N passed; …`, else 0.
fn passed_in(line: &str) -> usize {
    line.strip_prefix("test result: ")
        .and_then(|rest| rest.split_once(". "))
        .and_then(|(_, counts)| counts.split_once(" passed"))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::passed_in;

    #[test]
    fn passed_counts_are_read_from_libtest_summaries() {
        assert_eq!(
            passed_in("test result: ok. 4 passed; 0 failed; 0 ignored; 0 measured"),
            4
        );
        assert_eq!(
            passed_in("test result: FAILED. 2 passed; 1 failed; 0 ignored"),
            2
        );
        assert_eq!(passed_in("running 4 tests"), 0);
        assert_eq!(passed_in("test foo ... ok"), 0);
    }
}
