//! The board's numeric limits and defaults, shared by its transitions, its errors and
//! `kanban.toml`'s ranges. A leaf: it imports nothing.

/// Default claim TTL: 900 s.
pub const DEFAULT_CLAIM_TTL_SECONDS: i64 = 900;
/// Consecutive failures before the breaker blocks a task (a task's `max_retries` wins).
pub const DEFAULT_FAILURE_LIMIT: i64 = 2;
/// The same block kind this many times in a row sends the task to `triage`.
pub const BLOCK_RECURRENCE_LIMIT: i64 = 2;

/// The longest TTL, runtime or interval, in seconds (365 days): every duration of the board and
/// of `kanban.toml` is checked against it.
pub const MAX_SECONDS: i64 = 31_536_000;
