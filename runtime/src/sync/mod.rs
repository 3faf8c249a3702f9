//! The std / loom facade. Code that the loom models cover (the ownership context, the cron pool,
//! the heartbeat handle) imports its concurrency primitives from here and never from `std::sync`
//! or `std::thread` directly, so that `RUSTFLAGS="--cfg loom"` swaps in loom's model-checked ones.

#[cfg(loom)]
pub use loom::sync::atomic;
#[cfg(loom)]
pub use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(loom)]
pub use loom::thread;
#[cfg(loom)]
pub use loom::thread_local;

#[cfg(not(loom))]
pub use std::sync::atomic;
#[cfg(not(loom))]
pub use std::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub use std::thread;
#[cfg(not(loom))]
pub use std::thread_local;
