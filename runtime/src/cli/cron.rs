//! `kanban cron …`: parse, call `crate::cron`, print. `--json` prints machine-readable output on
//! `add`, `list`, `show`, `run`, `pause`, `resume`, `remove` and `tick`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use super::escape::{block, line};
use super::{CmdResult, Exit, Globals, Refused, print_json};
use crate::clock::{Clock, ManualClock, SystemClock};
use crate::config::Config;
use crate::cron::{
    self, ConfigAgents, CronError, DaemonEvent, Job, NewJob, Schedule, Scheduler,
    SchedulerSettings, Store,
};

#[derive(Debug, clap::Subcommand)]
pub enum CronCommand {
    /// Add a job; prints its id.
    Add {
        /// Display name (default: the start of the prompt).
        #[arg(long)]
        name: Option<String>,
        /// `0 9 * * 1-5`, `TZ=Europe/Berlin 0 9 * * *`, `weekdays at 9am`, `every 30m`, `30m`,
        /// `2 h`, `in 10m`, or an ISO-8601 time (README "Schedules").
        #[arg(long)]
        schedule: String,
        /// What the agent is asked (what `builtin:shell` runs).
        #[arg(long)]
        prompt: String,
        /// Profile in kanban.toml whose agent runs the job.
        #[arg(long)]
        profile: String,
        /// Working directory of the agent's processes (an existing directory).
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
        /// Run at most N times (default: forever; a one-shot runs once).
        #[arg(long, value_name = "N")]
        repeat: Option<u32>,
    },
    /// List jobs.
    List,
    /// Show one job (id or name).
    Show { job: String },
    /// Run a job now, in this process; prints its outcome (exit 1 when it failed).
    Run { job: String },
    /// Pause a job.
    Pause {
        job: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Resume a paused job from now.
    Resume { job: String },
    /// Remove a job and its run history.
    Remove { job: String },
    /// Run one scheduler pass: every due job, then exit.
    Tick {
        /// Pretend the time is this epoch second (for tests and dry runs): 0 (1970) to
        /// 253402300799 (the end of 9999), so schedule arithmetic stays in range.
        #[arg(long, hide = true, value_parser = clap::value_parser!(i64).range(0..=253_402_300_799))]
        now: Option<i64>,
    },
    /// Run the scheduler until SIGTERM / SIGINT (running jobs finish first; a second signal exits).
    Daemon {
        /// Seconds between ticks, 0.1 to 86400 (default: `[cron] interval_seconds`).
        #[arg(long, allow_negative_numbers = true)]
        interval: Option<f64>,
    },
}

pub fn run(command: CronCommand, globals: &Globals) -> CmdResult {
    let root = crate::home::root_dir(globals.home.as_deref())?;
    match command {
        CronCommand::Add {
            name,
            schedule,
            prompt,
            profile,
            workdir,
            repeat,
        } => add(
            &root, globals, name, schedule, prompt, profile, workdir, repeat,
        ),
        CronCommand::List => list(&root, globals),
        CronCommand::Show { job } => show(&root, &job, globals),
        CronCommand::Run { job } => run_now(&root, globals, &job),
        CronCommand::Pause { job, reason } => pause(&root, &job, reason.as_deref(), globals),
        CronCommand::Resume { job } => resume(&root, &job, globals),
        CronCommand::Remove { job } => remove(&root, &job, globals),
        CronCommand::Tick { now } => tick(&root, now, globals),
        CronCommand::Daemon { interval } => daemon(&root, interval),
    }
}

/// `kanban cron list`.
fn list(root: &Path, globals: &Globals) -> CmdResult {
    let jobs = Store::open(root)?.list()?;
    if globals.json {
        print_json(&jobs)?;
    } else if jobs.is_empty() {
        println!("no cron jobs (add one with `kanban cron add`)");
    } else {
        for job in &jobs {
            println!("{}", summary_line(job));
        }
    }
    Ok(Exit::OK)
}

/// `kanban cron show JOB`.
fn show(root: &Path, job: &str, globals: &Globals) -> CmdResult {
    let job = Store::open(root)?.resolve(job)?;
    if globals.json {
        print_json(&job)?;
    } else {
        print_job(root, &job);
    }
    Ok(Exit::OK)
}

/// `kanban cron pause JOB`.
fn pause(root: &Path, job: &str, reason: Option<&str>, globals: &Globals) -> CmdResult {
    let mut store = Store::open(root)?;
    let id = store.resolve(job)?.id;
    let job = store.pause(&id, reason, SystemClock.now())?;
    report_job(globals, &job, "paused")
}

/// `kanban cron resume JOB`.
fn resume(root: &Path, job: &str, globals: &Globals) -> CmdResult {
    let mut store = Store::open(root)?;
    let id = store.resolve(job)?.id;
    let job = store.resume(&id, SystemClock.now())?;
    report_job(globals, &job, "resumed")
}

/// `kanban cron remove JOB`: the job, its run history and its output folder.
fn remove(root: &Path, job: &str, globals: &Globals) -> CmdResult {
    let mut store = Store::open(root)?;
    let id = store.resolve(job)?.id;
    store.remove(&id)?;
    let _ = std::fs::remove_dir_all(cron::scheduler::output_dir(root, &id));
    if globals.json {
        print_json(&serde_json::json!({ "id": id, "removed": true }))?;
    } else {
        println!("removed {id}");
    }
    Ok(Exit::OK)
}

/// `kanban cron tick [--now T]`: one scheduler pass (exit 1 when a job could not fire).
fn tick(root: &Path, now: Option<i64>, globals: &Globals) -> CmdResult {
    let clock: Arc<dyn Clock> = match now {
        Some(t) => Arc::new(ManualClock::new(t)),
        None => Arc::new(SystemClock),
    };
    let scheduler = scheduler(root, clock)?;
    let report = scheduler.tick()?;
    if globals.json {
        print_json(&report)?;
    } else if report.skipped {
        println!("another scheduler is ticking this home; skipped");
    } else {
        for id in &report.reaped {
            println!("{id}: expired fire claim closed as failed");
        }
        for fire in &report.fired {
            println!("{}", fire_line(fire));
        }
        for e in &report.errors {
            eprintln!("kanban: {e}");
        }
        if report.fired.is_empty() && report.reaped.is_empty() {
            println!("nothing due");
        }
    }
    Ok(if report.errors.is_empty() {
        Exit::OK
    } else {
        Exit(1)
    })
}

/// `kanban cron daemon [--interval S]`: the scheduler until SIGTERM / SIGINT.
fn daemon(root: &Path, interval: Option<f64>) -> CmdResult {
    let interval = interval
        .map(|s| crate::config::check_float("--interval", s, crate::config::CRON_INTERVAL_SECONDS))
        .transpose()?;
    let config = Config::load(root)?;
    // In range (the flag above, the file when it was loaded): cannot panic below.
    let every = interval.unwrap_or(config.cron.interval_seconds);
    let scheduler = scheduler(root, Arc::new(SystemClock))?;
    println!(
        "cron scheduler {} on {} every {every}s",
        scheduler.owner(),
        root.display()
    );
    // SIGTERM / SIGINT stop the daemon after its running jobs finish (and record their
    // outcome); a second signal exits at once.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register_conditional_shutdown(signal, 130, stop.clone())?;
        signal_hook::flag::register(signal, stop.clone())?;
    }
    scheduler.daemon(Duration::from_secs_f64(every), &stop, daemon_line)?;
    Ok(Exit::OK)
}

/// What the cron daemon prints of one event.
fn daemon_line(event: DaemonEvent) {
    match event {
        DaemonEvent::Fire(Ok(fire)) => println!("{}", fire_line(&fire)),
        DaemonEvent::Fire(Err(e)) => eprintln!("kanban: {e}"),
        DaemonEvent::Failing {
            message,
            failed_ticks,
            retry_in,
        } => eprintln!(
            "kanban cron daemon: tick failing ({failed_ticks} in a row): {message}; \
             retrying in {:.2}s (backoff up to {}s); it resumes by itself",
            retry_in.as_secs_f64(),
            crate::proc::backoff::MAX_BACKOFF.as_secs()
        ),
        DaemonEvent::Recovered { failed_ticks } => eprintln!(
            "kanban cron daemon: recovered: ticks succeed again after {failed_ticks} \
             failed tick(s)"
        ),
    }
}

#[allow(clippy::too_many_arguments)]
fn add(
    root: &Path,
    globals: &Globals,
    name: Option<String>,
    schedule: String,
    prompt: String,
    profile: String,
    workdir: Option<PathBuf>,
    repeat: Option<u32>,
) -> CmdResult {
    let config = Config::load(root)?;
    config.profile(&profile, root)?;
    let now = SystemClock.now();
    let zone = cron::schedule::zone(config.cron.timezone.as_deref())?;
    let spec = Schedule::parse(&schedule, now, zone)?;
    let workdir = match workdir {
        None => None,
        Some(dir) => {
            let canonical = dir.canonicalize().map_err(|e| CronError::InvalidWorkdir {
                path: dir.clone(),
                reason: format!("{e}; give an existing directory"),
            })?;
            if !canonical.is_dir() {
                return Err(CronError::InvalidWorkdir {
                    path: dir,
                    reason: "is not a directory".to_owned(),
                }
                .into());
            }
            Some(canonical)
        }
    };
    let job = Store::open(root)?.add(
        NewJob {
            name,
            prompt,
            schedule,
            schedule_spec: spec,
            profile,
            workdir,
            repeat,
        },
        now,
    )?;
    if globals.json {
        print_json(&serde_json::json!({ "id": job.id }))?;
    } else {
        println!("{}", job.id);
    }
    Ok(Exit::OK)
}

fn scheduler(root: &Path, clock: Arc<dyn Clock>) -> anyhow::Result<Scheduler> {
    let config = Config::load(root)?;
    let settings = SchedulerSettings::from_config(&config.cron);
    let agents = Arc::new(ConfigAgents::new(config, root));
    Ok(Scheduler::new(root, clock, agents, settings)?)
}

fn run_now(root: &Path, globals: &Globals, reference: &str) -> CmdResult {
    let scheduler = scheduler(root, Arc::new(SystemClock))?;
    let fire = match scheduler.run_now(reference) {
        Ok(fire) => fire,
        Err(e @ (CronError::AlreadyRunning { .. } | CronError::NotDue { .. })) => {
            return Err(Refused(e.to_string()).into());
        }
        Err(e) => return Err(e).context("cannot run the job"),
    };
    let outcome = &fire.outcome;
    if globals.json {
        print_json(outcome)?;
    } else {
        if !outcome.final_response.is_empty() {
            println!("{}", outcome.final_response);
        }
        if let Some(e) = &outcome.error {
            eprintln!("kanban: job {} failed: {e}", fire.job_id);
        }
        if let Some(p) = &fire.output_path {
            eprintln!("output saved to {}", p.display());
        }
    }
    Ok(if outcome.success { Exit::OK } else { Exit(1) })
}

fn report_job(globals: &Globals, job: &Job, verb: &str) -> CmdResult {
    if globals.json {
        print_json(job)?;
    } else {
        println!("{verb} {}", summary_line(job));
    }
    Ok(Exit::OK)
}

fn when(t: Option<i64>) -> String {
    t.map_or_else(|| "-".to_owned(), cron::iso)
}

fn summary_line(job: &Job) -> String {
    format!(
        "{}  {:<10} next {}  last {} {}  {}  [{}] {}",
        job.id,
        format!("{:?}", job.state).to_lowercase(),
        when(job.next_run_at),
        when(job.last_run_at),
        job.last_status.as_deref().unwrap_or("-"),
        line(&job.schedule),
        line(&job.profile),
        line(&job.name)
    )
}

fn print_job(root: &Path, job: &Job) {
    println!("id:             {}", job.id);
    println!("name:           {}", line(&job.name));
    println!(
        "schedule:       {} ({})",
        job.schedule,
        job.schedule_spec.describe()
    );
    println!("profile:        {}", line(&job.profile));
    match &job.workdir {
        Some(w) => println!("workdir:        {}", w.display()),
        None => println!(
            "workdir:        {} (its own folder)",
            cron::scheduler::work_dir(root, &job.id).display()
        ),
    }
    println!(
        "state:          {:?}{}",
        job.state,
        if job.enabled { "" } else { " (disabled)" }
    );
    println!("next run:       {}", when(job.next_run_at));
    println!("last run:       {}", when(job.last_run_at));
    println!(
        "last status:    {}",
        job.last_status.as_deref().unwrap_or("-")
    );
    if let Some(e) = &job.last_error {
        println!("last error:     {}", line(e));
    }
    let times = job
        .repeat
        .times
        .map_or("forever".to_owned(), |t| t.to_string());
    println!("repeat:         {} of {times}", job.repeat.completed);
    println!("failure streak: {}", job.failure_streak);
    if let Some(c) = &job.fire_claim {
        println!(
            "running:        by {} (lease until {})",
            c.owner,
            cron::iso(c.expires_at)
        );
    }
    println!("prompt:\n  {}", block(&job.prompt));
}

fn fire_line(fire: &cron::FireReport) -> String {
    let status = if fire.outcome.success { "ok" } else { "error" };
    let mut line = format!("{}: fire {} {status}", fire.job_id, fire.fire_id);
    if let Some(e) = &fire.outcome.error {
        line.push_str(&format!(" ({})", super::escape::line(e)));
    }
    if !fire.recorded {
        line.push_str(" [claim lost; result discarded]");
    }
    line
}
