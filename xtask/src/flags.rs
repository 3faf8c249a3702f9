//! Command-line flags of `cargo xtask`, parsed by hand (two flags do not earn a dependency).

use std::path::PathBuf;

pub const USAGE: &str = "\
usage: cargo xtask <task> [--root DIR]

tasks:
  check   cargo fmt --check, cargo clippy -D warnings, drift, lint, links (the relative
          links of README.md, ARCHITECTURE.md and docs/ name existing files and headings)
  ci      check + cargo test --workspace + short chaos runs on SQLite and PostgreSQL, direct and owner mode + the loom models run
          with --cfg loom: the README's test command, what .ci/run runs
  drift   env-key drift guard over dispatch::default_spawn
  lint    syn-based rules over runtime/src
  loom    the loom models (kanban-loom-tests) with --cfg loom, in <target>/loom
  bench   release build + the benchmark suite (kanban-bench); table in <target>/bench/latest.md
  chaos   the fault run on real processes (kills, two dispatchers, locked board, full disk)

options:
  --root DIR     the workspace root to check (default: the workspace of the current directory)
  -v, --verbose  drift: also list every key found and where
  --tests        check: also run `cargo test --workspace`
  --preemptions N    loom: LOOM_MAX_PREEMPTIONS (default 3)
  --target-dir DIR   loom: where the --cfg loom build goes (default <target>/loom)
  --tasks N          chaos: tasks to run (default 24)
  --kills N          chaos: processes to SIGKILL (default 12)
  --seed S           chaos: the seed every random choice follows (default 1)
  --postgres         chaos: the board in a PostgreSQL database (a throwaway server) instead of SQLite
  --owner            chaos: owner admission ([dispatch] mode = \"owner\"); owners and submitters are killed too";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    Check,
    Ci,
    Drift,
    Lint,
    Loom,
    Bench,
    Chaos,
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
    /// `loom`: build the models only.
    pub no_run: bool,
    /// `chaos`: `--tasks`, `--kills`, `--seed`, when given.
    pub chaos: ChaosFlags,
}

/// The flags of `cargo xtask chaos`.
#[derive(Debug, Default, Clone, Copy)]
pub struct ChaosFlags {
    pub tasks: Option<u32>,
    pub kills: Option<u32>,
    pub seed: Option<u64>,
    /// `--postgres`: the board in a PostgreSQL database of a throwaway server.
    pub postgres: bool,
    /// `--owner`: owner admission, with owners and submitters among the processes killed.
    pub owner: bool,
}

fn number<T: std::str::FromStr>(flag: &str, value: Option<String>) -> Result<T, String> {
    value
        .as_deref()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{flag} needs a whole number, got {value:?}"))
}

impl Flags {
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Flags, String> {
        let mut task = None;
        let mut root = None;
        let mut verbose = false;
        let mut tests = false;
        let mut preemptions = None;
        let mut target_dir = None;
        let mut no_run = false;
        let mut chaos = ChaosFlags::default();
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
                "--no-run" => no_run = true,
                "--preemptions" => match args.next().and_then(|n| n.parse().ok()) {
                    Some(n) => preemptions = Some(n),
                    None => return Err("--preemptions needs a number".into()),
                },
                "--target-dir" => match args.next() {
                    Some(dir) => target_dir = Some(PathBuf::from(dir)),
                    None => return Err("--target-dir needs a directory".into()),
                },
                "--tasks" => chaos.tasks = Some(number("--tasks", args.next())?),
                "--kills" => chaos.kills = Some(number("--kills", args.next())?),
                "--seed" => chaos.seed = Some(number("--seed", args.next())?),
                "--postgres" => chaos.postgres = true,
                "--owner" => chaos.owner = true,
                "chaos" if task.is_none() => task = Some(Task::Chaos),
                "loom" if task.is_none() => task = Some(Task::Loom),
                "ci" if task.is_none() => task = Some(Task::Ci),
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
                no_run,
                chaos,
            }),
            None => Err("missing task".into()),
        }
    }
}
