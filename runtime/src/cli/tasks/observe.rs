//! The operator's terminal views of a whole board: `kanban stats`, `kanban assignees`,
//! `kanban runs`, `kanban diagnostics`, `kanban watch` and `kanban events ID --follow`. They only read; the live ones
//! wait on the board's change watch and print what was appended since their cursor.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use serde::Serialize;

use crate::board::diagnostics::{Severity, TaskDiagnostics, Thresholds};
use crate::board::{Board, RunFilter, StoredEvent};
use crate::cli::explain;
use crate::cli::session::{now, open_read, print_out, root};
use crate::cli::{CmdResult, Exit, Globals};
use crate::config::Config;

/// How long a live view sleeps between looks when no change notice arrives.
const POLL: Duration = Duration::from_millis(500);
/// Events read per look.
const PAGE: usize = 500;

/// `kanban stats`: tasks by status and by assignee, and the oldest ready task's age.
pub(in crate::cli) fn print_stats(globals: &Globals) -> CmdResult {
    let o = open_read(globals)?;
    let stats = o.board.board_stats(now())?;
    print_out(globals.json, &stats, || {
        let mut out = vec![format!("board {}", o.loc.slug)];
        let by_status: Vec<String> = stats
            .by_status
            .iter()
            .map(|(status, n)| format!("{status}={n}"))
            .collect();
        out.push(format!("by status: {}", none_if_empty(&by_status)));
        for (assignee, counts) in &stats.by_assignee {
            let counts: Vec<String> = counts.iter().map(|(s, n)| format!("{s}={n}")).collect();
            out.push(format!("  @{assignee}: {}", counts.join(" ")));
        }
        out.push(match stats.oldest_ready_age_seconds {
            Some(age) => format!("oldest ready: {age} s"),
            None => "oldest ready: none".to_owned(),
        });
        out.join("\n")
    })
}

fn none_if_empty(items: &[String]) -> String {
    if items.is_empty() {
        "(no tasks)".to_owned()
    } else {
        items.join(" ")
    }
}

/// One line of `kanban assignees`: the original's `known_assignees` shape.
#[derive(Debug, Serialize)]
struct Assignee {
    name: String,
    /// Whether this home defines the profile (`[profiles.<name>]` in kanban.toml).
    on_disk: bool,
    counts: BTreeMap<String, i64>,
}

/// `kanban assignees`: the home's profiles and every assignee on the board with unfinished
/// work, with their tasks per status.
pub(in crate::cli) fn print_assignees(globals: &Globals) -> CmdResult {
    let config = Config::load(&root(globals)?)?;
    let o = open_read(globals)?;
    let stats = o.board.board_stats(now())?;
    let mut names: BTreeMap<String, Assignee> = BTreeMap::new();
    for name in config.profiles.keys() {
        names.insert(name.clone(), assignee(name, true));
    }
    for (name, counts) in stats.by_assignee {
        let on_disk = names.contains_key(&name);
        // An assignee with no profile and only finished work is history, not a lane to pick
        // (the original's rule); a blank one is no name at all.
        let history = counts.keys().all(|s| s == "done" || s == "archived");
        if name.trim().is_empty() || (!on_disk && history) {
            continue;
        }
        names
            .entry(name.clone())
            .or_insert_with(|| assignee(&name, false))
            .counts = counts;
    }
    let list: Vec<Assignee> = names.into_values().collect();
    print_out(globals.json, &list, || {
        let lines: Vec<String> = list
            .iter()
            .map(|a| {
                let counts: Vec<String> =
                    a.counts.iter().map(|(s, n)| format!("{s}={n}")).collect();
                let profile = if a.on_disk { "" } else { " (no profile)" };
                format!("{}{profile}: {}", a.name, none_if_empty(&counts))
            })
            .collect();
        if lines.is_empty() {
            "no profiles and no assigned tasks".to_owned()
        } else {
            lines.join("\n")
        }
    })
}

fn assignee(name: &str, on_disk: bool) -> Assignee {
    Assignee {
        name: name.to_owned(),
        on_disk,
        counts: BTreeMap::new(),
    }
}

/// What `kanban runs` was asked for.
#[derive(Debug, clap::Args)]
pub struct RunsArgs {
    /// Only the runs of this task (oldest last, as for every task).
    pub task: Option<String>,
    /// Only runs with this outcome (completed, crashed, timed_out, blocked, …; `running` for
    /// runs still open).
    #[arg(long)]
    pub outcome: Option<String>,
    /// Only runs of this profile.
    #[arg(long)]
    pub profile: Option<String>,
    /// Only runs started within this long (90s, 30m, 2h, 1d) or since this Unix time.
    #[arg(long, value_name = "DURATION|UNIX", value_parser = parse_since)]
    pub since: Option<Since>,
    /// At most this many runs, newest first.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

/// `--since`: a span back from now, or a point in time.
#[derive(Debug, Clone, Copy)]
pub enum Since {
    Ago(i64),
    At(i64),
}

impl Since {
    fn start(self, now: i64) -> i64 {
        match self {
            Since::Ago(seconds) => now - seconds,
            Since::At(at) => at,
        }
    }
}

/// `90s`, `30m`, `2h`, `1d` (a span back from now, [`crate::clock::parse_duration`]) or a Unix
/// time in seconds.
fn parse_since(text: &str) -> Result<Since, String> {
    let text = text.trim();
    if let Ok(at) = text.parse::<i64>() {
        return if at >= 0 {
            Ok(Since::At(at))
        } else {
            Err(format!("`{text}`: a Unix time is not negative"))
        };
    }
    crate::clock::parse_duration(text, true)
        .map(Since::Ago)
        .map_err(|e| format!("`{text}` is neither a duration ({e}) nor a Unix time"))
}

/// `kanban runs`: runs across the board, newest first.
pub(in crate::cli) fn print_runs(args: RunsArgs, globals: &Globals) -> CmdResult {
    let o = open_read(globals)?;
    let now = now();
    if let Some(id) = &args.task {
        o.board.get_task(id)?;
    }
    let filter = RunFilter {
        task_id: args.task,
        outcome: args.outcome,
        profile: args.profile,
        since: args.since.map(|s| s.start(now)),
        limit: args.limit,
    };
    let runs = o.board.list_runs(&filter)?;
    print_out(globals.json, &runs, || {
        if runs.is_empty() {
            return "no runs".to_owned();
        }
        let lines: Vec<String> = runs
            .iter()
            .map(|r| {
                let state = r.outcome.as_deref().unwrap_or("running");
                let seconds = r.ended_at.unwrap_or(now) - r.started_at;
                let note = r.summary.as_deref().or(r.error.as_deref()).unwrap_or("");
                format!(
                    "run {} {} @{} {state} {seconds} s {note}",
                    r.id,
                    r.task_id,
                    r.profile.as_deref().unwrap_or("-"),
                )
                .trim_end()
                .to_owned()
            })
            .collect();
        lines.join("\n")
    })
}

/// What `kanban watch` follows.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// Only events of tasks assigned to this profile.
    #[arg(long)]
    pub assignee: Option<String>,
    /// Only events of tasks of this tenant.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Only these event kinds.
    #[arg(long, value_name = "KIND,…", value_delimiter = ',')]
    pub kinds: Vec<String>,
}

/// `kanban watch`: every new event of the board as it is committed, until interrupted (or until
/// its output is closed).
pub(in crate::cli) fn watch_board(args: &WatchArgs, globals: &Globals) -> CmdResult {
    let o = open_read(globals)?;
    let mut watch = o.board.watch_changes();
    let mut cursor = o.board.last_event_id()?;
    loop {
        let events = o.board.events_after(cursor, PAGE)?;
        for event in &events {
            cursor = event.id;
            if wanted(&o.board, args, event)? && !print_event(globals.json, event, true)? {
                return Ok(Exit::OK);
            }
        }
        if events.len() < PAGE {
            watch.wait(&o.board, POLL, POLL)?;
        }
    }
}

/// Whether `event` passes the filters; assignee and tenant are the task's as it is now (an event
/// of a task since deleted passes neither).
fn wanted(board: &Board, args: &WatchArgs, event: &StoredEvent) -> anyhow::Result<bool> {
    if !args.kinds.is_empty() && !args.kinds.contains(&event.kind) {
        return Ok(false);
    }
    if args.assignee.is_none() && args.tenant.is_none() {
        return Ok(true);
    }
    let Ok(task) = board.get_task(&event.task_id) else {
        return Ok(false);
    };
    let matches = |want: &Option<String>, has: &Option<String>| {
        want.as_ref().is_none_or(|w| has.as_ref() == Some(w))
    };
    Ok(matches(&args.assignee, &task.assignee) && matches(&args.tenant, &task.tenant))
}

/// `kanban events ID --follow`: the task's events so far (the newest `limit`), then each new
/// one as it is committed, until interrupted (or until its output is closed).
pub(in crate::cli) fn follow_events(
    id: &str,
    limit: Option<usize>,
    globals: &Globals,
) -> CmdResult {
    let o = open_read(globals)?;
    o.board.get_task(id)?;
    let mut watch = o.board.watch_changes();
    let mut cursor = 0;
    let mut events = o.board.events(id, limit)?;
    loop {
        for event in &events {
            cursor = event.id;
            if !print_event(globals.json, event, false)? {
                return Ok(Exit::OK);
            }
        }
        watch.wait(&o.board, POLL, POLL)?;
        events = o.board.task_events_after(id, cursor)?;
    }
}

/// Prints one event: a JSON object per line with `--json`, else the line `kanban events` prints
/// (after its task's id with `with_task`). `false` once standard output is closed (the reader
/// went away).
fn print_event(json: bool, event: &StoredEvent, with_task: bool) -> anyhow::Result<bool> {
    let line = explain::event_line(event, now());
    let text = match (json, with_task) {
        (true, _) => serde_json::to_string(event)?,
        (false, true) => format!("{} {line}", event.task_id),
        (false, false) => line,
    };
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// What `kanban diagnostics` was asked for.
#[derive(Debug, clap::Args)]
pub struct DiagnosticsArgs {
    /// Only diagnostics at this severity or worse (warning, error, critical).
    #[arg(long, value_name = "SEVERITY", default_value = "warning")]
    pub severity: Severity,
    /// Only this task.
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
}

/// `kanban diagnostics --json`: the original's shape.
#[derive(Serialize)]
struct DiagnosticsReport {
    diagnostics: Vec<TaskDiagnostics>,
    count: usize,
}

/// `kanban diagnostics`: what is wrong with the board's tasks and the commands that fix it.
pub(in crate::cli) fn print_diagnostics(args: &DiagnosticsArgs, globals: &Globals) -> CmdResult {
    let o = open_read(globals)?;
    let thresholds = Thresholds::default();
    let found = match &args.task {
        Some(id) => {
            let task = o.board.get_task(id)?;
            let mut d = o.board.task_diagnostics(id, now(), &thresholds)?;
            d.retain(|d| d.severity >= args.severity);
            if d.is_empty() {
                vec![]
            } else {
                vec![TaskDiagnostics {
                    task_id: task.id,
                    task_title: task.title,
                    task_status: task.status,
                    task_assignee: task.assignee,
                    diagnostics: d,
                }]
            }
        }
        None => o
            .board
            .board_diagnostics(args.severity, now(), &thresholds)?,
    };
    let report = DiagnosticsReport {
        count: found.iter().map(|t| t.diagnostics.len()).sum(),
        diagnostics: found,
    };
    print_out(globals.json, &report, || {
        if report.diagnostics.is_empty() {
            return "no diagnostics".to_owned();
        }
        let mut out = Vec::new();
        for t in &report.diagnostics {
            out.push(format!(
                "{} {} ({}, @{})",
                t.task_id,
                t.task_title,
                t.task_status,
                t.task_assignee.as_deref().unwrap_or("-")
            ));
            for d in &t.diagnostics {
                out.extend(explain::diagnostic_lines(d));
            }
        }
        out.join("\n")
    })
}
