//! The dispatcher: one tick at a time per board, reclaim phases, spawn budget, failure accounting,
//! pid liveness with a fingerprint, and `default_spawn`, the only place that grants identity.

pub mod exit;
pub mod lock;
pub mod process;
pub mod spawn;

pub use spawn::{SpawnError, SpawnRequest, default_spawn};
