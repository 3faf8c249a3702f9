//! The spawned worker process (`kanban worker`): binds to its claim, heartbeats from its own
//! thread, builds the prompt, runs the profile's agent, records a claim-bound `worker_result`.

pub mod prompt;
