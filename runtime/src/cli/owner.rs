//! `kanban owner serve|status|resolve` and `kanban submit` (README "Owner admission").

use std::sync::Arc;

use anyhow::Context as _;
use serde_json::{Value, json};

use super::{CmdResult, Exit, Globals, Refused};
use crate::admission::client::{Client, ClientError};
use crate::admission::server::{self, Fault, ServeOptions};
use crate::board;
use crate::clock::{Clock, SystemClock};
use crate::config::Config;

#[derive(Debug, clap::Subcommand)]
pub enum OwnerCommand {
    /// Run the owner of a profile: admit claimed runs over its socket and run them.
    Serve(ServeArgs),
    /// Show the owner's turns.
    Status(ProfileArg),
    /// Ask the owner to drain (refuse new runs, let running turns end) and exit.
    Stop(ProfileArg),
    /// Decide an `unknown` turn of TASK (the owner restarted while it ran).
    Resolve(ResolveArgs),
}

#[derive(Debug, clap::Args)]
pub struct ProfileArg {
    /// The profile whose owner to ask (default: [dispatch] default_profile; for `resolve`, the
    /// task's own profile).
    #[arg(long, value_name = "P")]
    pub profile: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub profile: ProfileArg,
    /// Exit after this many seconds with no turn running and no request (the submitter starts
    /// its owners with 600); without it the owner runs until `kanban owner stop` or a signal.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub idle_exit: Option<u64>,
    /// Test-only: the connection cap and the seconds a request line may take.
    #[arg(long, hide = true)]
    pub max_connections: Option<usize>,
    #[arg(long, hide = true)]
    pub request_deadline_ms: Option<u64>,
    /// Test-only fault point: SIGKILL the owner right after this commit.
    #[arg(long, value_enum, hide = true)]
    pub fault_after: Option<Fault>,
}

#[derive(Debug, clap::Args)]
pub struct ResolveArgs {
    /// The task whose unknown turn to decide (its profile's owner is asked).
    pub task: String,
    /// What the turn is taken to have been.
    #[arg(long = "as", value_parser = ["interrupted", "failed", "completed"])]
    pub as_: String,
    /// Release the card for a fresh run (an operator reclaim) instead of letting the submitter
    /// exit with the decided outcome.
    #[arg(long)]
    pub requeue: bool,
    #[command(flatten)]
    pub profile: ProfileArg,
}

fn profile_of(arg: &ProfileArg, config: &Config) -> anyhow::Result<String> {
    let profile = arg
        .profile
        .clone()
        .unwrap_or_else(|| config.dispatch.default_profile.clone())
        .trim()
        .to_lowercase();
    crate::home::validate_slug(&profile)
        .map_err(|_| anyhow::anyhow!("invalid profile name {profile:?}"))?;
    Ok(profile)
}

/// `kanban owner serve`.
fn serve(args: ServeArgs, root: std::path::PathBuf, config: Config) -> CmdResult {
    let profile = profile_of(&args.profile, &config)?;
    config.profile(&profile, &root)?;
    let mut limits = server::Limits::for_config(&config);
    if let Some(n) = args.max_connections {
        limits.max_connections = n.max(1);
    }
    if let Some(ms) = args.request_deadline_ms {
        limits.request_deadline = std::time::Duration::from_millis(ms.max(1));
    }
    let stop = crate::worker::interrupt_flag();
    let end = server::serve(ServeOptions {
        root,
        profile,
        config,
        clock: Arc::new(SystemClock),
        fault: args.fault_after,
        stop,
        idle_exit: args.idle_exit.map(std::time::Duration::from_secs),
        limits,
    })?;
    eprintln!("kanban owner: {end}");
    Ok(Exit::OK)
}

/// `kanban owner stop`.
fn stop(arg: &ProfileArg, root: &std::path::Path, config: &Config) -> CmdResult {
    let profile = profile_of(arg, config)?;
    match crate::admission::client::stop_owner(root, &profile) {
        Some(pid) => {
            println!("asked the owner of `{profile}` (pid {pid}) to drain and exit");
            Ok(Exit::OK)
        }
        None => Err(Refused(format!(
            "no owner of `{profile}` answered under {} (nothing to stop)",
            root.display()
        ))
        .into()),
    }
}

/// `kanban owner resolve`: asks the owner of the task's own profile (`--profile` overrides).
fn resolve(
    args: ResolveArgs,
    globals: &Globals,
    root: &std::path::Path,
    config: &Config,
) -> CmdResult {
    // A unique id prefix names the task, as everywhere else.
    let location = crate::home::resolve(root, globals.board.as_deref())?;
    let b = board::Board::open(&location, &board::OpenOptions::read_only())?;
    let task_id = b.resolve_task_id(&args.task)?;
    let profile = match args.profile.profile {
        Some(_) => profile_of(&args.profile, config)?,
        None => crate::admission::profile_for(
            b.get_task(&task_id)?.assignee.as_deref(),
            &config.dispatch.default_profile,
        )?,
    };
    drop(b);
    let params = json!({"task_id": task_id, "as": args.as_, "requeue": args.requeue});
    let row = match Client::open(root, &profile, true) {
        Ok(mut client) => match client.call("owner.resolve", params) {
            Ok(v) => v,
            Err(ClientError::Refused { code, reason }) => {
                return Err(Refused(format!("the owner refused: {code} ({reason})")).into());
            }
            Err(e) => return Err(e.into()),
        },
        // No owner answers: decide in its state.db directly, under its lock.
        Err(e) if e.is_transport() || matches!(e, ClientError::Ticket { .. }) => {
            let row = server::resolve_offline(
                root,
                &profile,
                &task_id,
                &args.as_,
                args.requeue,
                SystemClock.now(),
            )
            .with_context(|| format!("the owner of `{profile}` does not answer"))?
            .ok_or_else(|| {
                Refused(format!(
                    "the `{profile}` owner's state.db has no unknown turn of task {task_id}"
                ))
            })?;
            server::receipt(&row)
        }
        Err(e) => return Err(e.into()),
    };
    let mut line = format!(
        "turn of task {} run {} resolved as {}",
        super::escape::line(row["task_id"].as_str().unwrap_or("")),
        row["run_id"],
        args.as_
    );
    if args.requeue {
        let b = board::Board::open(&location, &board::OpenOptions::default())?;
        let task = row["task_id"].as_str().unwrap_or_default();
        match b.reclaim(task, Some("owner resolve --requeue"), SystemClock.now())? {
            board::Outcome::Done(r) => {
                line.push_str(&format!("; card released, now {}", r.retry_status));
            }
            board::Outcome::Refused(r) => {
                line.push_str(&format!("; card not released: {r}"));
            }
        }
    }
    if globals.json {
        super::print_json(&row)?;
    } else {
        println!("{line}");
    }
    Ok(Exit::OK)
}

pub fn run(command: OwnerCommand, globals: &Globals) -> CmdResult {
    let root = crate::home::root_dir(globals.home.as_deref())?;
    let config = Config::load(&root)?;
    match command {
        OwnerCommand::Serve(args) => serve(args, root, config),
        OwnerCommand::Stop(arg) => stop(&arg, &root, &config),
        OwnerCommand::Status(arg) => {
            let profile = profile_of(&arg, &config)?;
            let status = call(&root, &profile, false, "owner.status", json!({}))?;
            if globals.json {
                super::print_json(&status)?;
            } else {
                println!(
                    "owner of `{profile}`: pid {} epoch {}{}",
                    status["pid"],
                    status["epoch"],
                    if status["draining"] == json!(true) {
                        " (draining)"
                    } else {
                        ""
                    }
                );
                for t in status["turns"].as_array().into_iter().flatten() {
                    println!(
                        "{:<12} task {} run {} exit {}",
                        t["status"].as_str().unwrap_or(""),
                        super::escape::line(t["task_id"].as_str().unwrap_or("")),
                        t["run_id"],
                        t["exit_code"]
                    );
                }
            }
            Ok(Exit::OK)
        }
        OwnerCommand::Resolve(args) => resolve(args, globals, &root, &config),
    }
}

fn call(
    root: &std::path::Path,
    profile: &str,
    operator: bool,
    method: &str,
    params: Value,
) -> anyhow::Result<Value> {
    let mut client = Client::open(root, profile, operator).with_context(|| {
        format!("is the owner of `{profile}` running? (`kanban owner serve --profile {profile}`)")
    })?;
    match client.call(method, params) {
        Ok(v) => Ok(v),
        Err(ClientError::Refused { code, reason }) => {
            Err(Refused(format!("the owner refused: {code} ({reason})")).into())
        }
        Err(e) => Err(e.into()),
    }
}

/// `kanban submit`: the submitter the dispatcher starts in owner mode.
pub fn submit(globals: &Globals) -> CmdResult {
    let root = crate::home::root_dir(globals.home.as_deref())?;
    let mut stdout = std::io::stdout();
    match crate::admission::client::submit(&root, Arc::new(SystemClock), &mut stdout) {
        None => Ok(Exit::OK),
        Some(rc) => {
            eprintln!("{}", crate::worker::trailer(rc));
            Ok(Exit(u8::try_from(rc).unwrap_or(1)))
        }
    }
}
