//! Lifecycle hooks (`[hooks]` of kanban.toml): after each tick the dispatcher reads the board's
//! events committed since its cursor and starts the hook each one fires, with the event as JSON
//! on its standard input, outside any identity ([`identity::command`]), in its own process group.
//! Hooks never hold up the board: nothing waits for them, at most `max_running` run at once (an
//! event waits its turn, the cursor stays on it), one running past `timeout_seconds` is killed,
//! and a hook that fails is only reported. Each event a dispatcher sees fires its hook once;
//! events committed while no dispatcher runs fire nothing.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::board::{Board, StoredEvent};
use crate::config::HooksConfig;
use crate::identity;

/// Events read per look.
const PAGE: usize = 256;

/// A hook that failed (exited non-zero, was killed at its timeout, or could not start), for
/// the dispatcher's report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HookEnded {
    pub hook: &'static str,
    pub task_id: String,
    pub event_id: i64,
    /// `None`: it exited 0.
    pub failure: Option<String>,
}

struct Running {
    hook: &'static str,
    task_id: String,
    event_id: i64,
    child: Child,
    stderr: File,
    started: Instant,
}

/// The hooks of one dispatcher: its config, its cursor into the board's events, what runs.
pub struct Hooks {
    config: HooksConfig,
    cursor: i64,
    running: Vec<Running>,
    /// The last pump stopped with events left because `max_running` hooks were running.
    backlogged: bool,
}

impl Hooks {
    /// Hooks that fire for events after `cursor` (the board's newest event when the dispatcher
    /// starts).
    pub fn new(config: HooksConfig, cursor: i64) -> Hooks {
        Hooks {
            config,
            cursor,
            running: Vec::new(),
            backlogged: false,
        }
    }

    /// Whether any hook is configured.
    pub fn any(&self) -> bool {
        [
            "claimed",
            "completed",
            "blocked",
            "gave_up",
            "crashed",
            "review_requested",
        ]
        .iter()
        .any(|k| self.config.for_kind(k).is_some())
    }

    /// Reaps finished hooks, kills the overdue, and starts the hooks of new events while there is
    /// room; returns every hook that ended (failures have `failure`). Never waits for a hook.
    pub fn pump(&mut self, board: &Board) -> Vec<HookEnded> {
        let mut ended = self.reap();
        self.backlogged = false;
        if !self.any() {
            return ended;
        }
        loop {
            let Ok(events) = board.events_after(self.cursor, PAGE) else {
                break;
            };
            if events.is_empty() {
                break;
            }
            let mut full = false;
            for event in &events {
                if self.running.len() >= self.config.max_running
                    && self.config.for_kind(&event.kind).is_some()
                {
                    full = true;
                    break;
                }
                self.cursor = event.id;
                ended.extend(self.fire(event));
            }
            if full {
                self.backlogged = true;
                break;
            }
            if events.len() < PAGE {
                break;
            }
        }
        ended
    }

    /// Whether events wait for a free hook slot (`--until-idle` does not end while they do).
    pub fn backlogged(&self) -> bool {
        self.backlogged
    }

    /// Starts the hook `event` fires, if any; a hook that cannot start is reported as ended.
    fn fire(&mut self, event: &StoredEvent) -> Option<HookEnded> {
        let (hook, argv) = self.config.for_kind(&event.kind)?;
        let argv = argv.to_vec();
        match start(&argv, event) {
            Ok((child, stderr)) => {
                self.running.push(Running {
                    hook,
                    task_id: event.task_id.clone(),
                    event_id: event.id,
                    child,
                    stderr,
                    started: Instant::now(),
                });
                None
            }
            Err(e) => Some(HookEnded {
                hook,
                task_id: event.task_id.clone(),
                event_id: event.id,
                failure: Some(format!("could not start {}: {e}", argv[0])),
            }),
        }
    }

    fn reap(&mut self) -> Vec<HookEnded> {
        let timeout = Duration::from_secs_f64(self.config.timeout_seconds);
        let mut ended = Vec::new();
        let mut still = Vec::with_capacity(self.running.len());
        for mut run in self.running.drain(..) {
            let failure = match run.child.try_wait() {
                Ok(Some(status)) if status.success() => None,
                Ok(Some(status)) => Some(format!("{status}{}", stderr_tail(&mut run.stderr))),
                Ok(None) if run.started.elapsed() >= timeout => {
                    // The whole group: a hook's own children go with it (the group's id is the
                    // hook's pid, which cannot be reused while it is unreaped).
                    if let Some(group) = i32::try_from(run.child.id())
                        .ok()
                        .and_then(rustix::process::Pid::from_raw)
                    {
                        let _ = rustix::process::kill_process_group(
                            group,
                            rustix::process::Signal::KILL,
                        );
                    }
                    let _ = run.child.kill();
                    let _ = run.child.wait();
                    Some(format!("killed after {} s", self.config.timeout_seconds))
                }
                Ok(None) => {
                    still.push(run);
                    continue;
                }
                Err(e) => Some(format!("cannot wait for it: {e}")),
            };
            ended.push(HookEnded {
                hook: run.hook,
                task_id: run.task_id,
                event_id: run.event_id,
                failure,
            });
        }
        self.running = still;
        ended
    }

    /// Hooks still running.
    pub fn running(&self) -> usize {
        self.running.len()
    }
}

/// Starts `argv` with the event as JSON on its standard input (a memory file, so a large event
/// never blocks on a pipe) and its standard error kept for the report.
fn start(argv: &[String], event: &StoredEvent) -> std::io::Result<(Child, File)> {
    let memory = |name: &str| -> std::io::Result<File> {
        let fd = rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)?;
        Ok(File::from(fd))
    };
    let mut input = memory("kanban-hook-event")?;
    serde_json::to_writer(&mut input, event)?;
    input.write_all(b"\n")?;
    input.rewind()?;
    let stderr = memory("kanban-hook-stderr")?;
    let mut cmd = identity::command(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::from(input))
        .stdout(Stdio::null())
        .stderr(stderr.try_clone()?)
        .process_group(0);
    Ok((cmd.spawn()?, stderr))
}

/// `: <the last line the hook wrote on its standard error>`, or nothing.
fn stderr_tail(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.rewind();
    let _ = file.take(64 * 1024).read_to_string(&mut text);
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(": {}", l.trim()))
        .unwrap_or_default()
}
