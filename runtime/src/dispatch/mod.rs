//! The dispatcher: one tick at a time per board, reclaim phases, spawn budget, failure accounting,
//! pid liveness with a fingerprint, and `default_spawn`, the only place that grants identity.
//!
//! * [`tick()`] — one tick as a library function over a board, [`Settings`], an injected clock and a
//!   [`Workers`] implementation (real processes, a no-op spawner, or a test fake).
//! * [`daemon`] — the tick lock wrapper and the wake-on-change loop (`kanban dispatch`).
//! * [`process`] — host-local liveness (`/proc`, boot id + start time fingerprint) and TERM/KILL.
//! * [`exit`] — worker exit classification from the reaped status or the log trailer.
//! * [`guard`] — the respawn guard: cooldowns, credential problems, recent success, open PRs.
//! * [`spawn`] — [`default_spawn`]: the worker `Command` and the identity it is granted.
//! * [`lock`] — the per-board non-blocking tick lock.
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
pub mod demo;
pub mod exit;
pub mod guard;
pub mod lock;
pub mod process;
pub mod settings;
pub mod spawn;
pub mod tick;
pub mod workers;

pub use daemon::{Health, LoopOptions, Mode, run_tick};
pub use settings::{Settings, SettingsError};
pub use spawn::{SpawnError, SpawnRequest, SpawnRole, default_spawn};
pub use tick::{DeadWorker, SpawnedWorker, TickError, TickReport, tick};
pub use workers::{NoSpawn, Processes, Reaped, Tracked, Workers};

#[cfg(test)]
mod tests;
