//! `kanban logs ID [--follow] [--run N]`: print one run's part of a task's worker log (the
//! current run, else the latest), and with `--follow` keep printing what the worker appends until
//! the run ends. The reading is [`crate::worker::logs::RunLog`]; this file only decides which run
//! and when to stop.

use std::io::Write;
use std::time::{Duration, Instant};

use super::{CmdResult, Exit, Globals, print_json};
use crate::home::{self as paths};
use crate::worker::logs::RunLog;

/// How often `--follow` looks for new output and for the end of the run.
const POLL: Duration = Duration::from_millis(200);
/// How long `--follow` keeps reading after the run ended, for the worker's last lines.
const AFTER_END: Duration = Duration::from_secs(2);

#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    /// Task id.
    pub id: String,
    /// Keep printing what the worker writes until the run ends.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Which run (default: the current run, else the latest).
    #[arg(long, value_name = "N")]
    pub run: Option<i64>,
}

pub fn run(mut args: LogsArgs, globals: &Globals) -> CmdResult {
    super::session::resolve_id(&mut args.id, globals)?;
    if args.follow && globals.json {
        anyhow::bail!("kanban logs: --json prints a finished log at once; drop --follow or --json");
    }
    let root = paths::root_dir(globals.home.as_deref())?;
    let opened = super::session::open(globals)?;
    let board = &opened.board;
    let task = board.get_task(&args.id)?;
    let runs = board.runs(&task.id)?;
    let run_id = match args.run {
        Some(n) => {
            if !runs.iter().any(|r| r.id == n) {
                anyhow::bail!(
                    "task {} has no run {n} (its runs: {})",
                    task.id,
                    if runs.is_empty() {
                        "none yet".to_owned()
                    } else {
                        runs.iter()
                            .map(|r| r.id.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                );
            }
            n
        }
        None => match task.current_run_id.or_else(|| runs.last().map(|r| r.id)) {
            Some(n) => n,
            None => anyhow::bail!("task {} has not run yet: it has no log", task.id),
        },
    };
    let slug = paths::resolve(&root, globals.board.as_deref())?.slug;
    let path = paths::find_log(&root, &slug, &task.id);
    let mut log = RunLog::new(&path, run_id);
    if globals.json {
        let mut text = log.poll()?.text;
        text.push_str(&log.flush());
        print_json(&serde_json::json!({
            "task_id": task.id,
            "run_id": run_id,
            "log": path,
            "found": log.found(),
            "text": text,
        }))?;
        return Ok(Exit::OK);
    }
    let mut out = std::io::stdout();
    let mut ended_at: Option<Instant> = None;
    loop {
        let chunk = log.poll()?;
        out.write_all(chunk.text.as_bytes())?;
        out.flush()?;
        if log.finished() || !args.follow {
            break;
        }
        let ended = board.run(run_id)?.is_none_or(|r| r.ended_at.is_some());
        match (ended, ended_at) {
            (false, _) => ended_at = None,
            (true, None) => ended_at = Some(Instant::now()),
            (true, Some(at)) if !chunk.grew && at.elapsed() >= AFTER_END => break,
            (true, Some(_)) => {}
        }
        std::thread::sleep(POLL);
    }
    if log.found() {
        out.write_all(log.flush().as_bytes())?;
    } else {
        eprintln!(
            "kanban logs: no output of run {run_id} in {}",
            path.display()
        );
    }
    Ok(Exit::OK)
}
