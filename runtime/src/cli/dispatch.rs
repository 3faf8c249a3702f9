//! `kanban dispatch`, `kanban worker` and `kanban demo`: parse, call `dispatch` / `worker` /
//! `demo`, print one line per spawn, exit, reclaim and completion (or one JSON report per tick).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use super::escape::line;
use super::{CmdResult, Exit, Globals};
use crate::board::lane::Lane;
use crate::board::{self, Board, OpenOptions, Status};
use crate::clock::{Clock, SystemClock};
use crate::config::{self, Config};
use crate::dispatch::{self, LoopOptions, Mode, Processes, Settings, TickReport};

#[derive(Debug, clap::Subcommand)]
pub enum DispatchCommand {
    /// Run the dispatcher: claim ready tasks and spawn workers, reclaim dead or expired ones.
    Dispatch(DispatchArgs),
    /// The worker process the dispatcher spawns (not for interactive use).
    #[command(hide = true)]
    Worker(WorkerArgs),
    /// A self-contained demonstration on a temporary home: a small task graph run to completion.
    Demo(DemoArgs),
}

#[derive(Debug, clap::Args)]
pub struct DispatchArgs {
    /// Run one tick and exit.
    #[arg(long, conflicts_with = "until_idle")]
    pub once: bool,
    /// Run until nothing is ready, running or claimable, then exit.
    #[arg(long)]
    pub until_idle: bool,
    /// Show what one tick would spawn; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Seconds between ticks when the board does not change, 0.01 to 86400 (default:
    /// [dispatch] interval_seconds).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub interval: Option<f64>,
    /// Override [dispatch] max_spawn (0 to 1024; 0 reclaims, sweeps and promotes but spawns nothing)
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_spawn: Option<i64>,
    /// Fault injection for `cargo xtask chaos` and the fault tests: SIGKILL this dispatcher just
    /// before its N-th spawn (after the claim commit).
    #[arg(long, value_name = "N", hide = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub fault_die_before_spawn: Option<u32>,
}

/// `kanban worker` flags: only the owner passes them (its managed worker).
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// Run as the owner's managed worker (README "Owner admission").
    #[arg(long, requires_all = ["submitter_pid", "owner_pid"])]
    pub managed: bool,
    /// The submitter's pid, as the owner saw it at admission.
    #[arg(long, value_name = "PID", requires = "managed")]
    pub submitter_pid: Option<i64>,
    /// The submitter's fingerprint, as the owner saw it at admission.
    #[arg(long, value_name = "FP", requires = "managed")]
    pub submitter_fingerprint: Option<String>,
    /// The owner's pid.
    #[arg(long, value_name = "PID", requires = "managed")]
    pub owner_pid: Option<i64>,
}

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Keep the demo home after the run (default: a temporary directory that is removed).
    #[arg(long)]
    pub keep: bool,
    /// `direct` (the dispatcher starts workers) or `owner` (every run is admitted and run by the
    /// owner of its profile; README "Owner admission").
    #[arg(long, value_parser = ["direct", "owner"], default_value = "direct")]
    pub mode: String,
}

pub fn run(command: DispatchCommand, globals: &Globals) -> CmdResult {
    match command {
        DispatchCommand::Dispatch(args) => dispatch_cmd(&args, globals),
        DispatchCommand::Worker(args) => worker_cmd(&args, globals),
        DispatchCommand::Demo(args) => demo_cmd(&args, globals),
    }
}

/// The root, board and settings `kanban dispatch` runs with.
pub(crate) fn settings_for(globals: &Globals) -> anyhow::Result<(Settings, Config)> {
    let root = crate::home::root_dir(globals.home.as_deref())?;
    let location = crate::home::resolve(&root, globals.board.as_deref())?;
    let config = Config::load(&root)?;
    let mut settings = Settings::new(root.clone(), location.clone(), &config)?;
    // The host-wide cap counts this host's running tasks on every other board of this home,
    // SQLite or PostgreSQL.
    settings.other_boards = crate::home::list_boards(&root)
        .unwrap_or_default()
        .into_iter()
        .filter(|b| !same_board(b, &location))
        .collect();
    Ok((settings, config))
}

/// Whether two locations name one board: one SQLite file, or one PostgreSQL database.
fn same_board(a: &crate::db::target::BoardLocation, b: &crate::db::target::BoardLocation) -> bool {
    match (a.postgres(), b.postgres()) {
        (None, None) => a.db_path == b.db_path,
        (Some(x), Some(y)) => x.redacted_eq(y),
        _ => false,
    }
}

/// The settings of `kanban dispatch` (the flags over the configuration) and its interval, in
/// seconds; every flag is checked before anything is read or opened, and every profile's agent
/// program is checked before a task is claimed for it.
fn dispatch_settings(args: &DispatchArgs, globals: &Globals) -> anyhow::Result<(Settings, f64)> {
    // Flags are checked before anything is read or opened.
    let max_spawn = args
        .max_spawn
        .map(|n| {
            let (min, max) = config::MAX_SPAWN;
            config::check_int("--max-spawn", n, (i64::from(min), i64::from(max)), "")
        })
        .transpose()?;
    let flag_interval = args
        .interval
        .map(|s| config::check_float("--interval", s, config::DISPATCH_INTERVAL_SECONDS))
        .transpose()?;
    let (mut settings, config) = settings_for(globals)?;
    // A profile whose agent program cannot start is a configuration error seen now, before a
    // task is claimed for it (workers get this process's PATH, its own directory first).
    let own_dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(std::path::Path::to_path_buf));
    let inherited = crate::identity::settings::path().unwrap_or_default();
    let search = std::env::join_paths(own_dir.into_iter().chain(std::env::split_paths(&inherited)))
        .unwrap_or(inherited);
    dispatch::settings::check_programs(&config, &settings.root, Some(search.as_os_str()))?;
    settings.dry_run = args.dry_run;
    if let Some(n) = max_spawn.and_then(|n| u32::try_from(n).ok()) {
        settings.max_spawn = n;
    }
    if args.until_idle && settings.max_spawn == 0 {
        anyhow::bail!(
            "`--until-idle` with max_spawn 0 would wait for ever: a tick that spawns nothing never \
             drains the board; use `--once` (or the daemon) for a reclaim-only dispatcher, or set \
             max_spawn to 1 or more"
        );
    }
    // Both in range (the flag above, the file when it was loaded): the conversion cannot panic.
    let interval = flag_interval.unwrap_or(config.dispatch.interval_seconds);
    Ok((settings, interval))
}

fn dispatch_cmd(args: &DispatchArgs, globals: &Globals) -> CmdResult {
    let (settings, interval) = dispatch_settings(args, globals)?;
    let mut board = Board::open(&settings.location, &OpenOptions::create())
        .with_context(|| format!("opening board `{}`", settings.location.slug))?;
    let clock = SystemClock;
    let mut workers = match args.fault_die_before_spawn {
        Some(n) => Processes::new().with_fault_die_before_spawn(n),
        None => Processes::new(),
    };
    let json = globals.json;
    let mut lines = Lines::default();
    // `--until-idle` on a terminal keeps one progress line at the bottom, redrawn in place.
    let progress = args.until_idle && !json && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut print = |board: &Board, report: &TickReport| {
        if progress {
            print!("\r\x1b[K");
        }
        lines.print(board, report, json);
        if progress {
            print!("{}", progress_line(board, report));
            let _ = std::io::Write::flush(&mut std::io::stdout());
        }
    };

    if args.once || args.dry_run {
        let report = dispatch::run_tick(&mut board, &settings, &clock, &mut workers)?;
        if json {
            // A one-shot tick always answers, an empty report too.
            crate::cli::print_json(&report)?;
        } else {
            print(&board, &report);
        }
        return Ok(Exit::OK);
    }
    let stop = crate::worker::interrupt_flag();
    let options = LoopOptions {
        mode: if args.until_idle {
            Mode::UntilIdle
        } else {
            Mode::Daemon
        },
        interval: Duration::from_secs_f64(interval),
        stop,
    };
    if !json {
        eprintln!(
            "kanban dispatch: board `{}` ({}), max_spawn {}, lock {}",
            settings.location.slug,
            settings.location.describe(),
            settings.max_spawn,
            settings.claim_lock
        );
    }
    let mut on_health =
        |health: dispatch::Health<'_>| eprintln!("kanban dispatch: {}", health_line(&health));
    dispatch::daemon::run(
        &mut board,
        &settings,
        &clock,
        &mut workers,
        &options,
        &mut print,
        &mut on_health,
    )?;
    if progress {
        println!();
    }
    eprintln!(
        "kanban dispatch: {}",
        stop_line(&board, &settings.host_prefix)?
    );
    Ok(Exit::OK)
}

/// `ready N · running N · done N · blocked N` (done and blocked counted on the board).
fn progress_line(board: &Board, report: &TickReport) -> String {
    let counts = board.status_counts().ok();
    let count = |status: Status| match &counts {
        Some(c) => c
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(0, |(_, n)| *n)
            .to_string(),
        None => "?".to_owned(),
    };
    format!(
        "ready {} · running {} · done {} · blocked {}",
        report.workload.ready,
        report.workload.running,
        count(Status::Done),
        count(Status::Blocked)
    )
}

/// The one line the dispatcher prints when it stops: the workers of this host (claim lock
/// `host_prefix…`) it leaves running (their tasks stay claimed; a dispatcher started again finds
/// them on the board). Another host's workers are not this dispatcher's to report.
fn stop_line(board: &Board, host_prefix: &str) -> anyhow::Result<String> {
    let left: Vec<String> = board
        .running_tasks()?
        .into_iter()
        .filter(|t| {
            t.claim_lock
                .as_deref()
                .is_some_and(|l| l.starts_with(host_prefix))
        })
        .filter_map(|t| t.worker_pid.map(|pid| format!("{} (pid {pid})", t.id)))
        .collect();
    Ok(if left.is_empty() {
        "stopped; no worker left running".to_owned()
    } else {
        format!(
            "stopped; {} worker(s) left running: {}",
            left.len(),
            left.join(", ")
        )
    })
}

/// One line per change of the daemon's health.
pub(crate) fn health_line(health: &dispatch::Health<'_>) -> String {
    match health {
        dispatch::Health::Failing {
            error,
            failed_ticks,
            retry_in,
        } => format!(
            "tick failing ({failed_ticks} in a row): {}; retrying in {:.2}s (backoff up to \
             {}s); it resumes by itself once the board works again",
            line(&crate::error_chain(*error)),
            retry_in.as_secs_f64(),
            crate::proc::backoff::MAX_BACKOFF.as_secs()
        ),
        dispatch::Health::Recovered { failed_ticks } => {
            format!("recovered: ticks succeed again after {failed_ticks} failed tick(s)")
        }
    }
}

/// Turns tick reports into lines. Remembers the tasks it saw spawned so that a completion is
/// printed when the board shows it (before the spawns it made possible), not when the worker
/// process is reaped a moment later.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    in_flight: std::collections::BTreeSet<String>,
    /// The last "waiting" line printed, so a wait is said once, not at every tick.
    waiting: Option<String>,
}

/// Why ready tasks are not being started, if they are not: the spawn budget is full (workers
/// already running at the configured limits), or every ready task is in a rate-limit cooldown.
fn wait_line(report: &TickReport) -> Option<String> {
    let paused = (!report.paused.is_empty() && !report.skipped_locked).then(|| {
        format!(
            "paused: {} (owner turn lost or unknown; they hold no spawn slot): \
             `kanban owner resolve ID --as interrupted|failed|completed` decides",
            report.paused.join(", ")
        )
    });
    let policy = report.policy_invalid.as_ref().map(|why| {
        format!(
            "denied: the board's pre_claim policy is not valid ({}): every claim and promotion \
             is denied until it is fixed (`kanban boards set-policy`)",
            line(why)
        )
    });
    let lines: Vec<String> = [paused, budget_wait_line(report), policy]
        .into_iter()
        .flatten()
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

fn budget_wait_line(report: &TickReport) -> Option<String> {
    let w = report.workload;
    let startable = w.ready - w.cooling_down;
    if report.dry_run || report.skipped_locked {
        return None;
    }
    if startable > 0 {
        use crate::dispatch::memory::Pressure;
        match report.memory_pressure {
            Some(Pressure::Critical) => {
                return Some(format!(
                    "waiting: memory pressure critical; nothing is spawned until it eases ({startable} ready)"
                ));
            }
            Some(Pressure::Elevated) => {
                return Some(format!(
                    "waiting: memory pressure elevated; at most one worker is spawned per tick ({startable} ready)"
                ));
            }
            _ => {}
        }
    }
    if !report.spawned.is_empty() {
        return None;
    }
    if startable > 0
        && report.spawned.is_empty()
        && !report.skipped_per_profile_capped.is_empty()
        && report.budget > 0
    {
        let mut profiles: Vec<&str> = report
            .skipped_per_profile_capped
            .iter()
            .map(|(_, p, _)| p.as_str())
            .collect();
        profiles.sort_unstable();
        profiles.dedup();
        return Some(format!(
            "waiting: per-profile cap reached for {}; a worker of that profile must finish first",
            profiles.join(", ")
        ));
    }
    if startable > 0 && report.budget == 0 {
        return Some(format!(
            "waiting: spawn budget full ({} running, {startable} ready); a worker must finish first",
            w.running
        ));
    }
    if w.ready > 0 && startable == 0 {
        return Some(format!(
            "waiting: {} ready task(s) in a rate-limit cooldown",
            w.cooling_down
        ));
    }
    None
}

impl Lines {
    /// One line per thing that happened (human), or the report as one JSON line (`--json`: active
    /// ticks only, plus every `--once` / `--dry-run` tick).
    pub(crate) fn print(&mut self, board: &Board, report: &TickReport, json: bool) {
        if json {
            let newly_held = report.respawn_guarded.iter().any(|g| g.noted);
            if report.is_active() || report.skipped_locked || report.dry_run || newly_held {
                let _ = crate::cli::print_json(report);
            }
            return;
        }
        for line in self.lines(board, report) {
            println!("{line}");
        }
    }

    /// The human lines of a tick report.
    pub(crate) fn lines(&mut self, board: &Board, report: &TickReport) -> Vec<String> {
        let mut out = Vec::new();
        if report.skipped_locked {
            out.push("skipped: another dispatcher is ticking this board".to_owned());
        }
        let mut finished = Vec::new();
        for id in &self.in_flight {
            match board.get_task(id).map(|t| t.status) {
                Ok(Status::Running) => {}
                Ok(Status::Done) => {
                    out.push(format!("completed  {id}"));
                    finished.push(id.clone());
                }
                Ok(Status::Blocked) => {
                    out.push(format!("blocked    {id}"));
                    finished.push(id.clone());
                }
                // Back to ready (a reclaim line says why), or gone: stop watching it.
                _ => finished.push(id.clone()),
            }
        }
        for id in finished {
            self.in_flight.remove(&id);
        }
        report_lines(report, &mut out);
        let wait = wait_line(report);
        if wait != self.waiting {
            out.extend(wait.clone());
            self.waiting = wait;
        }
        for s in &report.spawned {
            if s.pid.is_some() {
                self.in_flight.insert(s.task_id.clone());
            }
        }
        out
    }
}

/// The lines of one report, except completions (see [`Lines`]).
fn report_lines(report: &TickReport, out: &mut Vec<String>) {
    for h in &report.hooks_failed {
        out.push(format!(
            "hook       {} for {} (event {}) failed: {}",
            h.hook,
            h.task_id,
            h.event_id,
            h.failure.as_deref().unwrap_or("")
        ));
    }
    for d in &report.auto_decomposed {
        match &d.error {
            None => out.push(format!(
                "decomposed {} into {} children (auto_decompose, profile {}): {}",
                d.task_id,
                d.child_ids.len(),
                line(&d.profile),
                d.child_ids.join(", ")
            )),
            Some(e) => out.push(format!(
                "decompose failed {} (auto_decompose, profile {}): {}; it stays in triage \
                 (`kanban decompose {} --with {}` tries again)",
                d.task_id,
                line(&d.profile),
                line(e),
                d.task_id,
                line(&d.profile)
            )),
        }
    }
    for id in &report.woken {
        out.push(format!("woke       {id}: its scheduled time came"));
    }
    for id in &report.promoted {
        out.push(format!("promoted   {id}"));
    }
    for id in &report.auto_assigned_default {
        out.push(format!("assigned   {id}: to the default profile"));
    }
    for id in &report.extended {
        out.push(format!("extended   {id}: worker alive, claim extended"));
    }
    for id in &report.deferred {
        out.push(format!(
            "deferred   {id}: worker survived termination, reclaim deferred"
        ));
    }
    for id in &report.reclaimed {
        out.push(format!("reclaimed  {id}: claim expired"));
    }
    for id in &report.abandoned {
        out.push(format!(
            "released   {id}: claimed but never spawned (its dispatcher is gone); not counted"
        ));
    }
    for id in &report.superseded {
        out.push(format!(
            "stopped    {id}: worker of a run that is no longer current (reclaimed or archived)"
        ));
    }
    for id in &report.held_back {
        out.push(format!(
            "waiting    {id}: the previous run's worker is still alive; not claimed yet"
        ));
    }
    for id in &report.reconciled {
        out.push(format!("reclaimed  {id}: orphaned running task"));
    }
    for id in &report.stale {
        out.push(format!("reclaimed  {id}: heartbeat stale"));
    }
    for id in &report.timed_out {
        out.push(format!("reclaimed  {id}: runtime cap exceeded"));
    }
    exit_lines(report, out);
}

/// The lines of one report's exited workers, systemic failures and failure-breaker blocks.
fn exit_lines(report: &TickReport, out: &mut Vec<String>) {
    for d in &report.exited {
        let class = serde_json::to_value(d.class)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        out.push(format!(
            "reclaimed  {}: worker pid {} {} ({class}) -> {}",
            d.task_id,
            d.pid,
            d.exit.describe(),
            d.status
        ));
    }
    for id in &report.systemic {
        out.push(format!(
            "systemic   {id}: its worker died with the same error as at least two others this tick"
        ));
    }
    for id in &report.gave_up {
        out.push(format!("gave up    {id}: blocked by the failure breaker"));
    }
    // Once per reason (when it is written on the board), or on every dry run.
    for d in report
        .policy_denied
        .iter()
        .filter(|d| d.noted || report.dry_run)
    {
        let phase = match d.phase {
            crate::dispatch::policy::Phase::Claim => "claim",
            crate::dispatch::policy::Phase::Promote => "promotion",
        };
        out.push(format!(
            "denied     {}: pre_claim policy refused its {phase} ({}); back to todo",
            d.task_id,
            line(&d.reason)
        ));
    }
    spawn_lines(report, out);
}

/// The lines of one report's claims and spawns (see [`report_lines`]).
fn spawn_lines(report: &TickReport, out: &mut Vec<String>) {
    for (id, err) in &report.spawn_failed {
        out.push(format!("spawn failed {id}: {}", line(err)));
    }
    for (id, err) in &report.claim_failed {
        out.push(format!("claim failed {id}: {}", line(err)));
    }
    for s in &report.spawned {
        let role = if Lane::of(s.lane) == Lane::Review {
            ", review"
        } else {
            ""
        };
        match s.pid {
            Some(pid) => out.push(format!(
                "spawned    {} ({}{role}) pid {pid} run {}: {}",
                s.task_id,
                line(&s.profile),
                s.run_id,
                line(&s.title)
            )),
            None => out.push(format!(
                "would spawn {} ({}{role}): {}",
                s.task_id,
                line(&s.profile),
                line(&s.title)
            )),
        }
    }
    // Once per guard episode (when it is noted on the board), or on every dry run.
    for g in report
        .respawn_guarded
        .iter()
        .filter(|g| g.noted || report.dry_run)
    {
        out.push(format!(
            "held       {}: respawn guard {}",
            g.task_id,
            g.guard.reason()
        ));
    }
    for (id, profile) in &report.noted_nonspawnable {
        out.push(format!(
            "skipped    {id}: profile `{}` is not defined in kanban.toml",
            line(profile)
        ));
    }
    if report.dry_run {
        for (id, profile) in &report.skipped_nonspawnable {
            out.push(format!(
                "skipped    {id}: profile `{}` is not defined in kanban.toml",
                line(profile)
            ));
        }
    }
}

fn worker_cmd(args: &WorkerArgs, globals: &Globals) -> CmdResult {
    let root: PathBuf = crate::home::root_dir(globals.home.as_deref())?;
    let interrupted = crate::worker::interrupt_flag();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let mut stdout = std::io::stdout();
    let watch = match (args.managed, args.submitter_pid, args.owner_pid) {
        (true, Some(submitter_pid), Some(owner_pid)) => Some(crate::worker::managed::Watch {
            submitter_pid,
            submitter_fingerprint: args.submitter_fingerprint.clone(),
            owner_pid,
        }),
        _ => None,
    };
    let managed = watch.is_some();
    let end = match watch {
        Some(watch) => crate::worker::run_managed(&root, clock, &interrupted, &mut stdout, watch)?,
        None => crate::worker::run(&root, clock, &interrupted, &mut stdout)?,
    };
    match end {
        crate::worker::WorkerEnd::Superseded => Ok(Exit::OK),
        crate::worker::WorkerEnd::Exit(rc) => {
            // The managed worker's verdict is its worker_result: the exit trailer in the task
            // log belongs to the submitter, the process the dispatcher watches.
            if !managed {
                eprintln!("{}", crate::worker::trailer(rc));
            }
            Ok(Exit(u8::try_from(rc).unwrap_or(1)))
        }
    }
}

fn demo_cmd(args: &DemoArgs, globals: &Globals) -> CmdResult {
    let clock = SystemClock;
    let (home, temporary) = match &globals.home {
        // Absolute, as every root: the workers run in their workspaces.
        Some(dir) => (crate::home::absolute(dir)?, false),
        None => (dispatch::demo::temp_home(clock.now()), true),
    };
    let owner_mode = args.mode == "owner";
    let tasks = dispatch::demo::setup_with(&home, clock.now(), owner_mode)?;
    print_demo_intro(&home, &tasks, owner_mode);
    let board = run_demo(&home, &clock)?;
    if owner_mode {
        for profile in dispatch::demo::DEMO_PROFILES {
            if let Some(pid) = crate::admission::client::stop_owner(&home, profile) {
                println!("  stopped the `{profile}` owner (pid {pid})");
            }
        }
    }
    let rows = dispatch::demo::summary(&board)?;
    let violations = board.fsck()?;
    if globals.json {
        crate::cli::print_json(&serde_json::json!({
            "home": home,
            "tasks": rows,
            "fsck": violations.iter().map(ToString::to_string).collect::<Vec<_>>(),
        }))?;
    } else {
        print_demo_summary(&rows, &violations);
        print_demo_workspaces(&board)?;
    }
    let all_done = rows.iter().all(|r| r.status == Status::Done.as_str());
    if temporary && !args.keep {
        let _ = std::fs::remove_dir_all(&home);
    } else if !globals.json {
        println!("the demo home is kept at {}", home.display());
    }
    if all_done && violations.is_empty() {
        Ok(Exit::OK)
    } else {
        Err(anyhow::anyhow!(
            "the demo did not finish cleanly (see the table above)"
        ))
    }
}

/// Where the demo's worktree task worked and what became of its worktree.
fn print_demo_workspaces(board: &Board) -> anyhow::Result<()> {
    for task in board.list_tasks(&crate::board::TaskFilter::default())? {
        if task.workspace_kind != "worktree" {
            continue;
        }
        let note = board.last_workspace_note(&task.id)?;
        let fate = match note.map(|n| n.kind).as_deref() {
            Some("workspace_removed") => "removed (clean, and its commits pushed to origin)",
            Some("workspace_preserved") => "kept (it holds work that is not pushed)",
            _ => "still there",
        };
        println!(
            "{}: branch {} in worktree {}: {fate}",
            task.id,
            task.branch_name.as_deref().unwrap_or("-"),
            task.workspace_path.as_deref().unwrap_or("-"),
        );
    }
    Ok(())
}

/// What the demo set up: its home, its configuration and its tasks.
fn print_demo_intro(home: &std::path::Path, tasks: &[dispatch::demo::DemoTask], owner_mode: bool) {
    println!("kanban demo: home {}", home.display());
    println!("kanban.toml: builtin:shell and builtin:complete profiles, rate-limit cooldown 1 s");
    if owner_mode {
        println!(
            "mode = \"owner\": each run is admitted by its profile's owner (`kanban owner serve`, started on demand) and run by a managed worker"
        );
    }
    println!();
    for t in tasks {
        println!("  {}  {:<28} {}", t.id, t.title, t.what);
    }
    if !home.join(dispatch::demo::DEMO_REPO).join(".git").exists() {
        println!("  (git is not installed: the demo runs without its worktree task)");
    }
    println!();
}

/// Dispatches the demo home's default board until it is idle, printing each tick's lines.
fn run_demo(home: &std::path::Path, clock: &SystemClock) -> anyhow::Result<Board> {
    let location = crate::home::resolve(home, Some(crate::home::DEFAULT_BOARD))?;
    let config = Config::load(home)?;
    let settings = Settings::new(home.to_path_buf(), location.clone(), &config)?;
    let mut board = Board::open(&location, &OpenOptions::default())?;
    let mut workers = Processes::new();
    let options = LoopOptions {
        mode: Mode::UntilIdle,
        interval: Duration::from_secs_f64(config.dispatch.interval_seconds),
        stop: crate::worker::interrupt_flag(),
    };
    let mut lines = Lines::default();
    let mut print = |board: &Board, report: &TickReport| {
        for line in lines.lines(board, report) {
            println!("  {line}");
        }
    };
    let mut on_health =
        |health: dispatch::Health<'_>| eprintln!("  kanban dispatch: {}", health_line(&health));
    dispatch::daemon::run(
        &mut board,
        &settings,
        clock,
        &mut workers,
        &options,
        &mut print,
        &mut on_health,
    )?;
    Ok(board)
}

/// The demo's closing table (one row per task) and what fsck found.
fn print_demo_summary(rows: &[dispatch::demo::SummaryRow], violations: &[board::Violation]) {
    {
        println!();
        println!(
            "{:<12} {:<28} {:<8} {:>4}  outcomes",
            "task", "title", "status", "runs"
        );
        for r in rows {
            println!(
                "{:<12} {:<28} {:<8} {:>4}  {}",
                r.id,
                r.title,
                r.status,
                r.runs,
                r.outcomes.join(", ")
            );
        }
        println!();
        if violations.is_empty() {
            println!("fsck: clean");
        } else {
            println!("fsck: {} violation(s)", violations.len());
            for v in violations {
                println!("  {v}");
            }
        }
    }
}

#[cfg(test)]
mod wait_tests {
    use super::*;
    use crate::board::Workload;

    #[test]
    fn a_wait_is_said_once_and_only_while_ready_work_cannot_start() {
        let full = TickReport {
            budget: 0,
            workload: Workload {
                running: 2,
                ready: 3,
                cooling_down: 0,
            },
            ..TickReport::default()
        };
        assert_eq!(
            wait_line(&full).as_deref(),
            Some("waiting: spawn budget full (2 running, 3 ready); a worker must finish first")
        );
        let cooling = TickReport {
            budget: 4,
            workload: Workload {
                running: 0,
                ready: 2,
                cooling_down: 2,
            },
            ..TickReport::default()
        };
        assert_eq!(
            wait_line(&cooling).as_deref(),
            Some("waiting: 2 ready task(s) in a rate-limit cooldown")
        );
        assert_eq!(wait_line(&TickReport::default()), None, "nothing ready");
        let dry = TickReport {
            dry_run: true,
            ..full.clone()
        };
        assert_eq!(wait_line(&dry), None);
    }
}

#[cfg(test)]
mod stop_line_tests {
    use super::*;

    #[test]
    fn the_stop_line_names_only_this_host_s_workers() {
        let dir = tempfile::tempdir().unwrap();
        let board =
            Board::open_path(&dir.path().join("kanban.db"), &OpenOptions::create()).unwrap();
        let id = board
            .create_task(
                &board::NewTask {
                    title: "elsewhere".into(),
                    ..board::NewTask::default()
                },
                100,
            )
            .unwrap()
            .id;
        let spec = board::ClaimSpec {
            lock: "host-b:1".into(),
            ttl_seconds: 60,
            origin: crate::board::ClaimOrigin::External,
        };
        let run = match board.claim(&id, &spec, 100).unwrap() {
            board::ClaimOutcome::Claimed(c) => c.run_id,
            board::ClaimOutcome::Lost(l) => panic!("{l:?}"),
        };
        let reg = board
            .register_worker(&id, run, "host-b:1", 77, "boot|1", 100)
            .unwrap();
        assert!(reg.is_done());
        assert_eq!(
            stop_line(&board, "host-a:").unwrap(),
            "stopped; no worker left running"
        );
        assert_eq!(
            stop_line(&board, "host-b:").unwrap(),
            format!("stopped; 1 worker(s) left running: {id} (pid 77)")
        );
    }
}
