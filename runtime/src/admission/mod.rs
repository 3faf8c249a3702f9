//! Owner admission (README "Owner admission"): with `[dispatch] mode = "owner"` the dispatcher
//! starts `kanban submit` instead of `kanban worker`; the submitter asks the profile's long-lived
//! **owner** (`kanban owner serve`) to admit the claimed run over a Unix socket, and the owner
//! runs it in a **managed worker** (`kanban worker --managed …`, started through
//! `dispatch::default_spawn`, the one grant of worker identity).
//!
//! * [`protocol`]: the wire (JSON-RPC 2.0, one object per line), the error codes with their
//!   `data.reason`, the closed and typed `kanban.run` parameter set, the request and session ids.
//! * [`server`]: the owner daemon: one per (home, profile) proved by a file lock, peers admitted by
//!   their socket credentials (same uid) **and** the ticket file, `state.db`, the turn executor,
//!   restart reconciliation.
//! * [`client`]: the socket client the submitter and `kanban owner status|resolve` use, and the
//!   submitter itself.
//!
//! All SQL is in `board::admission` (state.db is opened by the board's own SQLite layer).

pub mod client;
pub mod protocol;
pub mod server;

use std::path::{Path, PathBuf};

/// The folder of one profile's owner: `<root>/owner/<profile>/`, mode `0700`. It holds the socket
/// (`owner.sock`), the ticket (`ticket`, `0600`), `state.db` and the owner lock (`owner.lock`).
pub fn owner_dir(root: &Path, profile: &str) -> PathBuf {
    root.join("owner").join(profile)
}

/// The owner's socket.
pub fn socket_path(root: &Path, profile: &str) -> PathBuf {
    owner_dir(root, profile).join("owner.sock")
}

/// The ticket file a peer must present.
pub fn ticket_path(root: &Path, profile: &str) -> PathBuf {
    owner_dir(root, profile).join("ticket")
}

/// The owner's `state.db`.
pub fn state_path(root: &Path, profile: &str) -> PathBuf {
    owner_dir(root, profile).join("state.db")
}

/// The file whose `flock` proves the one owner of (home, profile).
pub fn lock_path(root: &Path, profile: &str) -> PathBuf {
    owner_dir(root, profile).join("owner.lock")
}
