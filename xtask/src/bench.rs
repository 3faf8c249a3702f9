//! `cargo xtask bench`: builds `kanban` and `kanban-bench` in release mode and runs the benchmark
//! suite (ARCHITECTURE.md §10), which prints a markdown table of figures, each
//! next to a baseline measured in the same run, and writes it to `<target>/bench/latest.md` (for
//! the README) and the same rows with their samples' p50 / p90 to `<target>/bench/latest.json`.
//!
//! Speed and memory are only ever measured here, never asserted by timed tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// Builds and runs the benchmark binary from the workspace at `root`.
/// With `big`, only the million-task board's rows (`kanban-bench --big`), written to
/// `latest-big.md` / `latest-big.json`.
pub fn run(root: &Path, big: bool) -> anyhow::Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "-p",
            "kanban-runtime",
            "--bin",
            "kanban",
            "-p",
            "kanban-tests",
            "--bin",
            "kanban-bench",
        ])
        .current_dir(root)
        .status()
        .context("cannot run `cargo build --release`")?;
    if !status.success() {
        bail!("bench: the release build failed ({status})");
    }
    let target = target_dir(root)?;
    let out_dir = target.join("bench");
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let name = if big { "latest-big" } else { "latest" };
    let out = out_dir.join(format!("{name}.md"));
    let json = out_dir.join(format!("{name}.json"));
    let bench = target.join("release").join("kanban-bench");
    let mut cmd = Command::new(&bench);
    if big {
        cmd.arg("--big");
    } else {
        cmd.arg("--original").arg(original(&out_dir)?);
    }
    let status = cmd
        .arg("--out")
        .arg(&out)
        .arg("--json")
        .arg(&json)
        .current_dir(root)
        .status()
        .with_context(|| format!("cannot run {}", bench.display()))?;
    if !status.success() {
        bail!("bench: {} failed ({status})", bench.display());
    }
    eprintln!(
        "bench: table written to {} and {}",
        out.display(),
        json.display()
    );
    Ok(())
}

/// The original's release whose WAL volume the bench reports beside the board's.
const ORIGINAL: &str = "hermes-agent==0.19.0";

/// The original's package, installed once (pip, without its dependencies: the bench imports
/// only its `hermes_cli.kanban_db`, which needs none) into `<out_dir>/original`; its path.
fn original(out_dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = out_dir.join("original");
    if dir.join("hermes_cli/kanban_db.py").is_file() {
        return Ok(dir);
    }
    eprintln!(
        "bench: installing the original ({ORIGINAL}) into {}",
        dir.display()
    );
    let status = Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--no-deps", "--target"])
        .arg(&dir)
        .arg(ORIGINAL)
        .status()
        .context("cannot run python3 -m pip (the bench's rows against the original need Python 3 with pip)")?;
    if !status.success() || !dir.join("hermes_cli/kanban_db.py").is_file() {
        bail!("bench: installing {ORIGINAL} with pip failed ({status})");
    }
    Ok(dir)
}

/// The target folder `cargo metadata` reports (honouring `build.target-dir` and the
/// `CARGO_*TARGET_DIR` variables).
fn target_dir(root: &Path) -> anyhow::Result<PathBuf> {
    Ok(crate::workspace::Workspace::discover(Some(root))?
        .target_dir()?
        .to_path_buf())
}
