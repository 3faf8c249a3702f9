//! loom models of the identity context, the cron pool and the heartbeat interleavings.
//! Built and run with `RUSTFLAGS="--cfg loom" cargo test -p kanban-loom-tests --release`.
