//! The board's domain: its model, typed events and outcomes, and every task transition as a
//! compare-and-swap with its events in the same write transaction (one group a file: `create`,
//! `claim`, `heartbeat`, `complete`, `block`, `review`, `operator`, `links`, `graph` (decompose,
//! specify), `schedule`; the dispatcher's in
//! `dispatcher` / `dispatcher_reads`), the owner's markers ([`admission`]), reads ([`query`],
//! [`views`], [`turns`]), [`fsck`], [`Board`] and its one write helper ([`store`]); what only one
//! engine has is [`engine`]. docs/board.md has the transitions' design decisions.
//!
//! It never reads worker identity, `kanban.toml` or the clock (every transition takes `now`),
//! never signals or inspects a process, and never names a command-line flag in a decision; its
//! statements go through [`crate::db`].

pub mod acceptance;
pub mod activity;
pub mod admission;
pub mod attachments;
mod block;
mod claim;
mod complete;
mod create;
pub mod diagnostics;
mod dispatcher;
mod dispatcher_reads;
mod edit;
pub mod engine;
mod error;
pub mod events;
pub mod fsck;
mod graph;
mod heartbeat;
mod input;
pub mod lane;
mod limits;
mod links;
pub mod model;
mod operator;
pub mod outcome;
mod owner_states;
pub mod policy;
pub mod purge;
pub mod query;
pub mod redact;
mod review;
pub(crate) mod rows;
mod schedule;
pub mod slug;
pub mod stats;
pub mod steering;
pub mod store;
pub mod ticks;
pub mod turns;
pub mod views;
mod wake;
pub mod workspaces;

#[cfg(feature = "test-support")]
pub(crate) use create::is_taken_task_id;
pub use dispatcher::{
    ABANDONED_OUTCOME, AbandonReason, Abandonment, Failure, Release, SpawnRecord, WorkerGone,
};
pub use dispatcher::{Released, WorkerResult, WorkspaceRecord};
pub use dispatcher_reads::Candidate;
pub use dispatcher_reads::RunningTask;
pub use dispatcher_reads::{GuardFacts, LatestRun, Workload};
pub use edit::{Edit, Edited, ID_PREFIX_MIN};
pub use error::{BoardError, Result, StorageError};
pub use events::{Event, StoredEvent, Termination};
pub use fsck::Violation;
pub use graph::{Decomposition, GraphTask, NewChild, Specification, check_children};
pub use input::{ClaimOrigin, ClaimSpec, Completion, Fence, NewTask, WorkspaceSpec};
pub(crate) use input::{check_seconds, default_claim_lock};
pub use limits::{
    BLOCK_RECURRENCE_LIMIT, DEFAULT_CLAIM_TTL_SECONDS, DEFAULT_FAILURE_LIMIT, MAX_SECONDS,
};
pub use model::{BlockKind, Comment, Run, Status, Task, TaskRef, TurnKind};
pub use operator::Promotion;
pub use outcome::{
    ArchivedTask, AssignedTask, BackFromReview, BlockedTask, ClaimOutcome, Claimed, Completed,
    Created, Decomposed, Heartbeated, Invalidated, LinkChange, Moved, Outcome, Reassigned,
    ReclaimedTask, Refusal, Reopened, ReviewRequested, ScheduledTask, Specified,
};
pub use query::{RecentWork, TaskFilter};
pub use stats::{BoardMetrics, BoardStats, Histogram, RunFilter};
pub use steering::{ModelOverride, ModelSet};
pub use store::{Board, Durability, OpenOptions};
pub use ticks::DispatcherTick;
pub use turns::RunStatus;
pub use views::BoardCard;
pub use wake::{ChangeWatch, Wake};
pub use workspaces::FinishedWorkspace;

#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
