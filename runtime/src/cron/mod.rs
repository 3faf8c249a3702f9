//! Cron: the per-home job store, the schedule grammar, the scheduler tick with durable fire
//! claims, and `run_job`, which runs a job's agent outside the dispatcher-owned worker context.

pub mod schedule;

pub use schedule::{Schedule, ScheduleError};
