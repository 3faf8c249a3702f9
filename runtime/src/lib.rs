//! `kanban_runtime`: a SQLite task board whose tasks a dispatcher hands to agent worker processes
//! under leases with heartbeats, and a cron scheduler whose jobs may fire inside such a worker.
//!
//! The library does the work; the `kanban` binary (`main.rs`, which calls [`run_cli`]) only parses
//! and prints: the command line itself is a private module of the library.
//! One module per concern, each opening with what it owns and what it must never do:
//!
//! * [`identity`] — the only reader of `HERMES_KANBAN_*`; the ownership context; child env scrub.
//! * [`gates`] — every consumer of worker identity, each `#[kanban_identity_gated]`.
//! * [`acceptance`] — proof of done: completion contracts, evidence, GitHub acceptance via `gh`.
//! * [`workspace`] — a task's workspace: scratch, `dir:` or git worktree; resolve and cleanup.
//! * [`board`] — the SQLite store; every transition is a compare-and-swap with a typed outcome.
//! * [`home`] — the home's board decisions: removing a board, putting one in PostgreSQL.
//! * [`dispatch`] — the tick, reclaim phases, spawn budget, `default_spawn`.
//! * [`worker`] — the spawned worker process.
//! * [`proc`] — exit codes, the log trailer, pid fingerprints and liveness, a daemon's backoff.
//! * [`admission`] — owner mode: the owner daemon, `kanban.run`, the submitter.
//! * [`agent`] — the `Agent` trait and the built-in agents.
//! * [`cleanup`] — what of a finished task's workspace may go; `kanban gc`.
//! * [`cron`] — job store, schedule grammar, scheduler, `run_job`.
//! * [`config`] — `kanban.toml`.
//! * [`sync`] — std / loom facade for the primitives the loom models cover.
//! * [`clock`] — injected time.

// Lets `#[kanban_identity_gated]` expand to `::kanban_runtime::…` paths inside this crate too.
extern crate self as kanban_runtime;

pub mod acceptance;
pub mod admission;
pub mod agent;
pub mod board;
pub mod cleanup;
mod cli;
pub mod clock;
pub mod config;
pub mod cron;
pub mod db;
pub mod dispatch;
pub mod gates;
pub mod home;
pub mod identity;
pub mod proc;
pub mod recipe;
pub mod sync;
/// Not API: crate internals for the runtime's own integration tests (feature `test-support`).
#[cfg(feature = "test-support")]
pub mod test_support;
pub mod triage;
pub mod worker;
pub mod workspace;

/// The `kanban` command line: parses `std::env::args`, runs the command, prints, and returns the
/// process exit code (0 ok, 1 error, 2 usage, 3 refused; the README lists them). The one public
/// entry of the command line; the `kanban` binary is only this call.
pub fn run_cli() -> std::process::ExitCode {
    cli::main()
}

/// `err` followed by each of its causes, joined by `": "`. Error messages never spell out their
/// cause (it is their `source`), so every place that turns an error into text uses this, and the
/// cause appears exactly once. A cause that only repeats its parent (rusqlite's
/// `disk I/O error` over `Error code 4874: disk I/O error`) is left out.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut last = err.to_string();
    let mut text = last.clone();
    let mut cause = err.source();
    while let Some(e) = cause {
        let message = e.to_string();
        if !(message.contains(&last) || last.contains(&message)) {
            text.push_str(": ");
            text.push_str(&message);
        }
        last = message;
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("cannot open the board /b/kanban.db")]
    struct Outer(#[source] rusqlite::Error);

    #[test]
    fn the_chain_names_each_cause_once() {
        let sqlite = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(4874),
            Some("disk I/O error".to_owned()),
        );
        let text = super::error_chain(&Outer(sqlite));
        assert_eq!(text, "cannot open the board /b/kanban.db: disk I/O error");
        let io = std::io::Error::other("no space left");
        let text = super::error_chain(&crate::board::BoardError::Storage(
            crate::board::StorageError::Io {
                action: "create",
                path: "/b".into(),
                source: io,
            },
        ));
        assert_eq!(text, "cannot create /b: no space left");
    }
}
