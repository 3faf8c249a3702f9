//! The dispatcher: one tick at a time per board, reclaim phases, spawn budget, failure accounting,
//! and `default_spawn`, the only place that grants identity. The process facts it decides on (exit
//! codes and the log trailer, pid liveness with a fingerprint, TERM/KILL) are `proc`'s, shared
//! with the worker.
//!
//! * [`tick()`] — one tick as a library function over a board, [`Settings`], an injected clock and a
//!   [`Workers`] implementation (real processes, a no-op spawner, or a test fake).
//! * [`daemon`] — the tick lock wrapper and the wake-on-change loop (`kanban dispatch`).
//! * [`decompose`] — `[dispatch] auto_decompose`: triage cards decomposed by an agent as the
//!   dispatcher runs.
//! * [`guard`] — the respawn guard: cooldowns, credential problems, recent success, open PRs.
//! * [`spawn`] — [`default_spawn`]: the worker `Command` and the identity it is granted.
//! * [`lock`] — the per-board non-blocking tick lock.
//! * [`policy`] — the board's `pre_claim` policy, asked before every claim and promotion.
//!
//! It never writes SQL (the dispatcher-side transitions are in `board::dispatcher`) and never reads
//! `HERMES_KANBAN_*` itself (knobs come through `identity::settings`).
//!
//! Design decisions where the issue is silent:
//! * A task whose profile (assignee, else `[dispatch] default_profile`) is not defined in
//!   `kanban.toml` is not claimed: it stays `ready` and is reported as `skipped_nonspawnable`.
//!   There is no implicit agent for an undefined `default` profile — a board should never see a
//!   task "completed" by an agent nobody configured.
//! * The crash grace applies only to workers we did not reap ourselves: a reaped exit status is
//!   conclusive at once; a worker adopted from another dispatcher gets the grace so its trailer is
//!   on disk before the log is read.
//! * Protocol violations (rc 0 without complete/block) requeue without counting; after
//!   [`settings::PROTOCOL_VIOLATION_LIMIT`] in a row (or the task's `max_retries`) the task is
//!   blocked with `gave_up`.
//! * Runtime-cap and stale-heartbeat terminations that fail defer like TTL expiry does.

pub mod daemon;
pub mod decompose;
pub mod demo;
pub mod guard;
pub mod hooks;
pub mod memory;
pub mod policy;
pub mod settings;
pub mod spawn;
pub mod tick;
pub mod workers;
mod workspace;

pub use daemon::Mode;
pub(crate) use daemon::{Health, LoopOptions, run_tick};
pub use settings::Settings;
pub(crate) use settings::SettingsError;
#[cfg(test)]
use spawn::SpawnError;
pub use spawn::default_spawn;
pub(crate) use spawn::{SpawnRequest, SpawnRole};
pub(crate) use tick::TickReport;
pub use tick::tick;
pub(crate) use workers::Processes;
pub use workers::{NoSpawn, Workers};
#[cfg(test)]
use workers::{Reaped, Tracked};

#[cfg(test)]
mod tests;
