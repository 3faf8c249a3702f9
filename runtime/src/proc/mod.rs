//! Process facts shared by the dispatcher, the worker, the owner and the cron scheduler, below all
//! of them: how a worker ends and says so, which process a pid is, and how a daemon retries.
//!
//! * [`exit`] — the worker's exit codes, the log trailer `[kanban-worker-exit] rc=<n>`, and the
//!   classification of a reaped status or a trailer ([`exit::WorkerExit`]).
//! * [`process`] — host-local liveness (`/proc`, boot id + start time fingerprint), claim-lock
//!   owner ids, and TERM/KILL of process groups.
//! * [`backoff`] — a failing daemon's capped backoff and its failure streak.
//! * [`lock`] — the one file-lock helper (a non-blocking exclusive `flock`).
//! * [`random`] — the one source of randomness (the kernel's generator) for ids, tickets, nonces
//!   and jitter.
//!
//! It imports nothing of this crate: it never touches a board, reads `kanban.toml` or the
//! environment, grants identity, or spawns a process (that is `dispatch::default_spawn`).

pub mod backoff;
pub mod exit;
pub(crate) mod lock;
pub mod process;
pub(crate) mod random;
