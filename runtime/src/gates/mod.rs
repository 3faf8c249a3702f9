//! Every consumer of worker identity, each one a `#[kanban_identity_gated]` function: outside a
//! dispatcher-owned worker context it returns its fallback, so a cron job or a delegated child
//! never sees, heartbeats, completes or blocks the worker's task.
