//! Command-line flags of `cargo xtask`, parsed by hand (two flags do not earn a dependency).

use std::path::PathBuf;

pub const USAGE: &str = "\
usage: cargo xtask <task> [--root DIR]

tasks:
  check   cargo fmt --check, cargo clippy -D warnings, drift, lint
  drift   env-key drift guard over dispatch::default_spawn
  lint    syn-based rules over runtime/src
  loom    the loom models (kanban-loom-tests) with --cfg loom, in <target>/loom
  bench   release build + the benchmark suite (kanban-bench); table in <target>/bench/latest.md

options:
  --root DIR     the workspace root to check (default: this workspace)
  -v, --verbose  drift: also list every key found and where
  --tests        check: also run `cargo test --workspace`
  --preemptions N    loom: LOOM_MAX_PREEMPTIONS (default 3)
  --target-dir DIR   loom: where the --cfg loom build goes (default <target>/loom)";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    Check,
    Drift,
    Lint,
    Loom,
    Bench,
    Help,
}

#[derive(Debug)]
pub struct Flags {
    pub task: Task,
    pub root: Option<PathBuf>,
    pub verbose: bool,
    pub tests: bool,
    /// `loom`: the preemption bound, when given.
    pub preemptions: Option<usize>,
    /// `loom`: the target dir of the `--cfg loom` build, when given.
    pub target_dir: Option<PathBuf>,
}

impl Flags {
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Flags, String> {
        let mut task = None;
        let mut root = None;
        let mut verbose = false;
        let mut tests = false;
        let mut preemptions = None;
        let mut target_dir = None;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--root" => match args.next() {
                    Some(dir) => root = Some(PathBuf::from(dir)),
                    None => return Err("--root needs a directory".into()),
                },
                "-h" | "--help" | "help" => task = Some(Task::Help),
                "-v" | "--verbose" => verbose = true,
                "--tests" => tests = true,
                "--preemptions" => match args.next().and_then(|n| n.parse().ok()) {
                    Some(n) => preemptions = Some(n),
                    None => return Err("--preemptions needs a number".into()),
                },
                "--target-dir" => match args.next() {
                    Some(dir) => target_dir = Some(PathBuf::from(dir)),
                    None => return Err("--target-dir needs a directory".into()),
                },
                "loom" if task.is_none() => task = Some(Task::Loom),
                "bench" if task.is_none() => task = Some(Task::Bench),
                "check" | "drift" | "lint" if task.is_none() => {
                    task = Some(match arg.as_str() {
                        "check" => Task::Check,
                        "drift" => Task::Drift,
                        _ => Task::Lint,
                    });
                }
                other => {
                    if let Some(dir) = other.strip_prefix("--root=") {
                        root = Some(PathBuf::from(dir));
                    } else {
                        return Err(format!("unexpected argument `{other}`"));
                    }
                }
            }
        }
        match task {
            Some(task) => Ok(Flags {
                task,
                root,
                verbose,
                tests,
                preemptions,
                target_dir,
            }),
            None => Err("missing task".into()),
        }
    }
}
