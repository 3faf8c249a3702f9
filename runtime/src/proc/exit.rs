//! How a worker ends and says so: the exit codes of `kanban worker` ([`code`]), the trailer
//! `[kanban-worker-exit] rc=<n>` it prints last into its task log ([`EXIT_TRAILER`]), and how the
//! dispatcher learns the end — from the status of a child it reaped itself, or (a worker another
//! dispatcher spawned, or one spawned before a restart) from that trailer.
//!
//! Classification (ARCHITECTURE.md §3): 0 while the task is still running = protocol violation; 75 = rate
//! limited (requeue, no failure, cooldown); 78 = terminal provider (block, sticky); anything else,
//! a signal, or no evidence at all = crash (counted). This module only reads; it never writes.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The worker exit trailer prefix; the worker prints `"\n[kanban-worker-exit] rc=<n>"`.
pub(crate) const EXIT_TRAILER: &str = "[kanban-worker-exit] rc=";

/// Exit codes of `kanban worker`.
pub mod code {
    /// The task was completed or blocked by the worker (or the claim was gone before it started).
    pub const OK: i32 = 0;
    /// The agent failed: crash accounting.
    pub const FAILED: i32 = 1;
    /// EX_TEMPFAIL: provider rate limit, requeue without a failure after a cooldown.
    pub const RATE_LIMITED: i32 = 75;
    /// EX_CONFIG: terminal provider error, sticky block.
    pub const TERMINAL: i32 = 78;
    /// Interrupted by SIGTERM / SIGINT.
    pub const INTERRUPTED: i32 = 130;
}

/// How the worker process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "exit_kind")]
pub enum WorkerExit {
    Exited {
        code: i32,
    },
    Signaled {
        signal: i32,
    },
    /// Dead, but neither a reaped status nor a trailer says how.
    Unknown,
}

impl WorkerExit {
    /// From the status of a reaped child.
    pub fn from_status(status: std::process::ExitStatus) -> Self {
        if let Some(code) = status.code() {
            WorkerExit::Exited { code }
        } else if let Some(signal) = status.signal() {
            WorkerExit::Signaled { signal }
        } else {
            WorkerExit::Unknown
        }
    }

    pub fn exit_code(self) -> Option<i32> {
        match self {
            WorkerExit::Exited { code } => Some(code),
            _ => None,
        }
    }

    /// A short human description ("exited with code 3", "killed by signal 9").
    pub fn describe(self) -> String {
        match self {
            WorkerExit::Exited { code } => format!("exited with code {code}"),
            WorkerExit::Signaled { signal } => format!("killed by signal {signal}"),
            WorkerExit::Unknown => "is not alive (exit status unknown)".to_owned(),
        }
    }
}

/// What the dispatcher does with a dead worker whose task is still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitClass {
    /// rc 0 without complete/block: requeue; counted only when it keeps happening.
    ProtocolViolation,
    /// rc 75: requeue without a failure; respawn after the cooldown.
    RateLimited,
    /// rc 78: block at once, sticky.
    TerminalProvider,
    /// Anything else: requeue and count a failure.
    Crashed,
}

/// Classifies an exit (ARCHITECTURE.md §3).
pub fn classify(exit: WorkerExit) -> ExitClass {
    match exit {
        WorkerExit::Exited { code: code::OK } => ExitClass::ProtocolViolation,
        WorkerExit::Exited {
            code: code::RATE_LIMITED,
        } => ExitClass::RateLimited,
        WorkerExit::Exited {
            code: code::TERMINAL,
        } => ExitClass::TerminalProvider,
        _ => ExitClass::Crashed,
    }
}

/// Bytes of the log tail searched for the trailer and kept as `worker_output`.
const TAIL_BYTES: u64 = 4000;

/// The last `TAIL_BYTES` of a log file, lossily decoded; empty when it cannot be read.
pub fn log_tail(path: &Path) -> String {
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if file
        .seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))
        .is_err()
    {
        return String::new();
    }
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The exit code of the last trailer in `text`, if any.
pub(crate) fn parse_trailer(text: &str) -> Option<i32> {
    let at = text.rfind(EXIT_TRAILER)?;
    let digits: String = text[at + EXIT_TRAILER.len()..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().ok()
}

/// The worker's last printed output (trailer stripped), at most `max` chars, for crash reports.
pub fn last_output(text: &str, max: usize) -> String {
    let body = match text.rfind(EXIT_TRAILER) {
        Some(at) => &text[..at],
        None => text,
    };
    let body = body.trim_end();
    let count = body.chars().count();
    body.chars().skip(count.saturating_sub(max)).collect()
}

/// The exit of a dead worker: the reaped status if we have one, else the log trailer.
pub fn resolve(reaped: Option<WorkerExit>, log: &Path) -> WorkerExit {
    if let Some(exit) = reaped {
        return exit;
    }
    match parse_trailer(&log_tail(log)) {
        Some(code) => WorkerExit::Exited { code },
        None => WorkerExit::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_map_to_their_classes() {
        assert_eq!(
            classify(WorkerExit::Exited { code: 0 }),
            ExitClass::ProtocolViolation
        );
        assert_eq!(
            classify(WorkerExit::Exited { code: 75 }),
            ExitClass::RateLimited
        );
        assert_eq!(
            classify(WorkerExit::Exited { code: 78 }),
            ExitClass::TerminalProvider
        );
        assert_eq!(classify(WorkerExit::Exited { code: 1 }), ExitClass::Crashed);
        assert_eq!(
            classify(WorkerExit::Exited { code: 130 }),
            ExitClass::Crashed
        );
        assert_eq!(
            classify(WorkerExit::Signaled { signal: 9 }),
            ExitClass::Crashed
        );
        assert_eq!(classify(WorkerExit::Unknown), ExitClass::Crashed);
    }

    #[test]
    fn the_last_trailer_wins() {
        let text = "work\n[kanban-worker-exit] rc=75\nmore\n[kanban-worker-exit] rc=0\n";
        assert_eq!(parse_trailer(text), Some(0));
        assert_eq!(parse_trailer("no trailer here"), None);
        assert_eq!(parse_trailer("[kanban-worker-exit] rc="), None);
    }

    #[test]
    fn resolve_prefers_the_reaped_status_then_the_trailer() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("t.log");
        std::fs::write(&log, "hello\n[kanban-worker-exit] rc=78\n").unwrap();
        assert_eq!(resolve(None, &log), WorkerExit::Exited { code: 78 });
        let reaped = WorkerExit::Signaled { signal: 9 };
        assert_eq!(resolve(Some(reaped), &log), reaped);
        assert_eq!(
            resolve(None, &dir.path().join("missing.log")),
            WorkerExit::Unknown
        );
    }

    #[test]
    fn long_logs_are_searched_at_the_tail_only() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("t.log");
        let mut text = "[kanban-worker-exit] rc=3\n".to_owned();
        text.push_str(&"x".repeat(10_000));
        std::fs::write(&log, &text).unwrap();
        assert_eq!(resolve(None, &log), WorkerExit::Unknown);
    }

    #[test]
    fn last_output_strips_the_trailer_and_bounds_the_size() {
        let text = format!("{}tail end\n\n[kanban-worker-exit] rc=1\n", "a".repeat(50));
        assert_eq!(last_output(&text, 8), "tail end");
        assert_eq!(last_output("short", 100), "short");
    }
}
