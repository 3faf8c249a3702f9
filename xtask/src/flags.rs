//! Command-line flags of `cargo xtask`, on clap (derive), as the `kanban` binary's are.
//!
//! `--root` is accepted before or after the task; every other flag belongs to the task it
//! configures. A usage error exits 2 with clap's message and usage line, `--help` exits 0.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "The project's static checks, loom models, benchmarks and fault runs",
    disable_version_flag = true
)]
struct Cli {
    /// The workspace root to check (default: the workspace of the current directory)
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<PathBuf>,
    #[command(subcommand)]
    task: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The static checks: cargo fmt --check, cargo clippy -D warnings, drift, lint, links (the
    /// relative links of README.md, ARCHITECTURE.md and docs/ name existing files and headings)
    Check {
        /// Also run `cargo test --workspace`
        #[arg(long)]
        tests: bool,
    },
    /// What .ci/run runs (the README's test command): check + cargo test --workspace + short
    /// chaos runs on SQLite and PostgreSQL, direct and owner mode + the loom models (--cfg loom)
    Ci {
        /// Where the loom models' --cfg loom build goes (default <target>/loom)
        #[arg(long, value_name = "DIR")]
        target_dir: Option<PathBuf>,
    },
    /// The env-key drift guard over dispatch::default_spawn
    Drift {
        /// Also list every key found and where
        #[arg(short, long)]
        verbose: bool,
    },
    /// The syn-based rules over the checked workspace members (lints/src/scope.rs)
    Lint,
    /// The loom models (kanban-loom-tests) with --cfg loom, in <target>/loom
    Loom {
        /// LOOM_MAX_PREEMPTIONS
        #[arg(long, value_name = "N", default_value_t = crate::loom::DEFAULT_PREEMPTIONS)]
        preemptions: usize,
        /// Where the --cfg loom build goes (default <target>/loom)
        #[arg(long, value_name = "DIR")]
        target_dir: Option<PathBuf>,
        /// Build the models only
        #[arg(long)]
        no_run: bool,
    },
    /// Release build + the benchmark suite (kanban-bench); table in <target>/bench/latest.md
    Bench {
        /// Only the million-task board's rows (table in <target>/bench/latest-big.md)
        #[arg(long)]
        big: bool,
    },
    /// The fault run on real processes (kills, two dispatchers, locked board, full disk)
    Chaos {
        /// Tasks to run
        #[arg(long, value_name = "N", default_value_t = crate::chaos::DEFAULT_TASKS)]
        tasks: u32,
        /// Processes to SIGKILL
        #[arg(long, value_name = "N", default_value_t = crate::chaos::DEFAULT_KILLS)]
        kills: u32,
        /// The seed every random choice follows
        #[arg(long, value_name = "S", default_value_t = 1)]
        seed: u64,
        /// The board in a PostgreSQL database (a throwaway server) instead of SQLite
        #[arg(long)]
        postgres: bool,
        /// Owner admission ([dispatch] mode = "owner"); owners and submitters are killed too
        #[arg(long)]
        owner: bool,
    },
}

/// The task to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    Check,
    Ci,
    Drift,
    Lint,
    Loom,
    Bench,
    Chaos,
}

#[derive(Debug)]
pub struct Flags {
    pub task: Task,
    pub root: Option<PathBuf>,
    /// `drift -v`.
    pub verbose: bool,
    /// `check --tests`.
    pub tests: bool,
    /// `loom`: the preemption bound.
    pub preemptions: usize,
    /// `loom`, `ci`: the target dir of the `--cfg loom` build, when given.
    pub target_dir: Option<PathBuf>,
    /// `loom`: build the models only.
    pub no_run: bool,
    /// `chaos`: its flags.
    pub chaos: ChaosFlags,
    /// `bench --big`.
    pub big: bool,
}

/// The flags of `cargo xtask chaos`.
#[derive(Debug, Clone, Copy)]
pub struct ChaosFlags {
    pub tasks: u32,
    pub kills: u32,
    pub seed: u64,
    /// `--postgres`: the board in a PostgreSQL database of a throwaway server.
    pub postgres: bool,
    /// `--owner`: owner admission, with owners and submitters among the processes killed.
    pub owner: bool,
}

impl Default for ChaosFlags {
    fn default() -> Self {
        ChaosFlags {
            tasks: crate::chaos::DEFAULT_TASKS,
            kills: crate::chaos::DEFAULT_KILLS,
            seed: 1,
            postgres: false,
            owner: false,
        }
    }
}

impl Flags {
    /// Parses `args` (the program name first, as `std::env::args_os` gives them); a usage error
    /// or a request for help is clap's error, which prints itself and exits (`Error::exit`).
    pub fn parse<I, T>(args: I) -> Result<Flags, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let cli = Cli::try_parse_from(args)?;
        let mut flags = Flags {
            task: Task::Lint,
            root: cli.root,
            verbose: false,
            tests: false,
            preemptions: crate::loom::DEFAULT_PREEMPTIONS,
            target_dir: None,
            no_run: false,
            chaos: ChaosFlags::default(),
            big: false,
        };
        flags.task = match cli.task {
            Command::Check { tests } => {
                flags.tests = tests;
                Task::Check
            }
            Command::Ci { target_dir } => {
                flags.target_dir = target_dir;
                Task::Ci
            }
            Command::Drift { verbose } => {
                flags.verbose = verbose;
                Task::Drift
            }
            Command::Lint => Task::Lint,
            Command::Loom {
                preemptions,
                target_dir,
                no_run,
            } => {
                flags.preemptions = preemptions;
                flags.target_dir = target_dir;
                flags.no_run = no_run;
                Task::Loom
            }
            Command::Bench { big } => {
                flags.big = big;
                Task::Bench
            }
            Command::Chaos {
                tasks,
                kills,
                seed,
                postgres,
                owner,
            } => {
                flags.chaos = ChaosFlags {
                    tasks,
                    kills,
                    seed,
                    postgres,
                    owner,
                };
                Task::Chaos
            }
        };
        Ok(flags)
    }
}

#[cfg(test)]
mod tests {
    use super::{Flags, Task};

    fn parse(args: &[&str]) -> Result<Flags, clap::Error> {
        Flags::parse(std::iter::once("xtask").chain(args.iter().copied()))
    }

    #[test]
    fn every_task_and_its_flags_parse() {
        let f = parse(&["check", "--tests"]).expect("check");
        assert_eq!((f.task, f.tests), (Task::Check, true));
        let f = parse(&["drift", "-v"]).expect("drift");
        assert_eq!((f.task, f.verbose), (Task::Drift, true));
        let f = parse(&["drift", "--verbose"]).expect("drift");
        assert!(f.verbose);
        assert_eq!(parse(&["lint"]).expect("lint").task, Task::Lint);
        assert_eq!(parse(&["bench"]).expect("bench").task, Task::Bench);
        let f = parse(&[
            "loom",
            "--preemptions",
            "4",
            "--target-dir",
            "/t",
            "--no-run",
        ])
        .expect("loom");
        assert_eq!((f.task, f.preemptions, f.no_run), (Task::Loom, 4, true));
        assert_eq!(f.target_dir.as_deref(), Some(std::path::Path::new("/t")));
        let f = parse(&["ci", "--target-dir", "/t"]).expect("ci");
        assert_eq!(f.task, Task::Ci);
        assert_eq!(f.target_dir.as_deref(), Some(std::path::Path::new("/t")));
        let f = parse(&[
            "chaos",
            "--tasks",
            "1500",
            "--kills",
            "700",
            "--seed",
            "7",
            "--postgres",
            "--owner",
        ])
        .expect("chaos");
        assert_eq!(f.task, Task::Chaos);
        let c = f.chaos;
        assert_eq!(
            (c.tasks, c.kills, c.seed, c.postgres, c.owner),
            (1500, 700, 7, true, true)
        );
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let f = parse(&["loom"]).expect("loom");
        assert_eq!(f.preemptions, crate::loom::DEFAULT_PREEMPTIONS);
        assert!(!f.no_run && f.target_dir.is_none());
        let c = parse(&["chaos"]).expect("chaos").chaos;
        assert_eq!(
            (c.tasks, c.kills, c.seed, c.postgres, c.owner),
            (
                crate::chaos::DEFAULT_TASKS,
                crate::chaos::DEFAULT_KILLS,
                1,
                false,
                false
            )
        );
    }

    #[test]
    fn root_goes_before_or_after_the_task() {
        for args in [
            &["--root", "/w", "lint"][..],
            &["lint", "--root", "/w"],
            &["lint", "--root=/w"],
        ] {
            let f = parse(args).expect("parses");
            assert_eq!(
                f.root.as_deref(),
                Some(std::path::Path::new("/w")),
                "{args:?}"
            );
        }
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        use clap::error::ErrorKind;
        for (args, kind) in [
            (&["frobnicate"][..], ErrorKind::InvalidSubcommand),
            (&["chaos", "--tasks", "many"], ErrorKind::ValueValidation),
            (&["loom", "--preemptions"], ErrorKind::InvalidValue),
            (&["lint", "--tests"], ErrorKind::UnknownArgument),
            (&[], ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand),
        ] {
            let err = parse(args).expect_err("a usage error");
            assert_eq!(err.kind(), kind, "{args:?}: {err}");
        }
        assert_eq!(
            parse(&["--help"]).expect_err("help").kind(),
            ErrorKind::DisplayHelp
        );
    }
}
