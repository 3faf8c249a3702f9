// expect: cannot be shared between threads safely
// bypass: the gate's `WorkerIdentity` kept beyond the call, in a process-wide cache
use std::sync::OnceLock;

use crate::identity::WorkerIdentity;

pub static KEPT: OnceLock<WorkerIdentity> = OnceLock::new();
