//! The dispatcher: one tick at a time per board, reclaim phases, spawn budget, failure accounting,
//! pid liveness with a fingerprint, and `default_spawn`, the only place that grants identity.
