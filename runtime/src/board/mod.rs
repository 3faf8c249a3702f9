//! The SQLite board store: schema and migrations, the write-transaction helper, board paths and
//! slugs, and every task transition as a compare-and-swap with a typed outcome. All SQL of the
//! board lives here, so a second backend never touches `dispatch/` or `worker/`.
//!
//! It never reads worker identity, never signals or inspects processes, and never reads the clock:
//! every transition takes `now` (epoch seconds) from the caller. Environment knobs (busy timeout,
//! board location) come through [`crate::identity::settings`].
//!
//! Layout: [`paths`] (root, slugs, resolution), [`store`] (open, pragmas, [`Board::write`]),
//! [`schema`] (migrations), [`model`] (rows), [`events`] (typed events), [`tasks`] (transitions),
//! [`outcome`] (their typed results), [`query`] (reads), [`views`] (whole-board reads for the web view), [`fsck`] (invariant checks),
//! [`turns`] (the run-fenced reads and `turn` events of a worker's turn loop), `wake`
//! ([`Board::watch_changes`]: waking on another connection's commit), [`sql`] (the SQL layer every
//! statement runs through: connection, statements, rows, classified errors, dialect).

pub mod admission;
mod edit;
pub mod engine;
mod error;
pub mod events;
pub mod fsck;
pub mod lane;
mod lifecycle;
mod limits;
pub mod model;
pub mod outcome;
pub mod query;
pub mod slug;
pub mod store;
pub mod tasks;
pub mod turns;
pub mod views;
mod wake;

pub use edit::{Edit, Edited, ID_PREFIX_MIN};
pub use error::{BoardError, Result, StorageError};
pub use events::{Event, StoredEvent, Termination};
pub use fsck::Violation;
pub use lifecycle::*;
pub use model::{BlockKind, Comment, Run, Status, Task, TaskRef, TurnKind};
pub use outcome::*;
pub use query::TaskFilter;
pub use store::{Board, Durability, OpenOptions};
pub use tasks::{
    BLOCK_RECURRENCE_LIMIT, ClaimOrigin, ClaimSpec, Completion, DEFAULT_CLAIM_TTL_SECONDS,
    DEFAULT_FAILURE_LIMIT, Fence, MAX_SECONDS, NewTask, check_seconds, default_claim_lock,
};
pub use turns::RunStatus;
pub use views::BoardCard;
pub use wake::{ChangeWatch, Wake};

#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
