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
//! All SQL is in `crate::admission::state` (state.db is opened by the board's own SQLite layer).

pub mod client;
pub mod protocol;
pub mod server;
pub mod state;

use std::path::{Path, PathBuf};

/// A card's assignee that cannot name an owner: it is not a profile name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the card's profile {name:?} is not a profile name (lower-case letters, digits, `_` and `-`, \
     at most 64, no path separators or `..`): fix the assignee (`kanban assign`)"
)]
pub(crate) struct InvalidProfile {
    pub name: String,
}

/// The profile whose owner runs a card: its assignee (trimmed, lower-case), else `default`.
/// The name becomes a folder (`<root>/owner/<profile>`), so it is checked as a profile name and
/// anything else (`/`, `..`, an empty name) is refused.
pub(crate) fn profile_for(assignee: Option<&str>, default: &str) -> Result<String, InvalidProfile> {
    let profile = assignee
        .map(|a| a.trim().to_lowercase())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| default.trim().to_lowercase());
    crate::home::validate_slug(&profile).map_err(|_| InvalidProfile {
        name: profile.clone(),
    })?;
    Ok(profile)
}

/// The folder of one profile's owner: `<root>/owner/<profile>/`, mode `0700`. It holds the socket
/// (`owner.sock`), the ticket (`ticket`, `0600`), `state.db` and the owner lock (`owner.lock`).
pub(crate) fn owner_dir(root: &Path, profile: &str) -> PathBuf {
    root.join("owner").join(profile)
}

/// The owner's socket.
pub(crate) fn socket_path(root: &Path, profile: &str) -> PathBuf {
    owner_dir(root, profile).join("owner.sock")
}

/// The ticket file a peer must present.
pub(crate) fn ticket_path(root: &Path, profile: &str) -> PathBuf {
    owner_dir(root, profile).join("ticket")
}

/// The owner's `state.db`.
pub(crate) fn state_path(root: &Path, profile: &str) -> PathBuf {
    owner_dir(root, profile).join("state.db")
}

/// The file whose `flock` proves the one owner of (home, profile).
pub(crate) fn lock_path(root: &Path, profile: &str) -> PathBuf {
    owner_dir(root, profile).join("owner.lock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assignee_that_is_no_profile_name_names_no_owner_folder() {
        assert_eq!(profile_for(Some(" Writer "), "default").unwrap(), "writer");
        assert_eq!(profile_for(None, "Default").unwrap(), "default");
        assert_eq!(profile_for(Some("  "), "done").unwrap(), "done");
        for bad in ["../x", "a/b", "..", "x/../../y", "-x", "a b", "é"] {
            let err = profile_for(Some(bad), "default").unwrap_err();
            assert!(
                err.to_string().contains("not a profile name"),
                "{bad}: {err}"
            );
        }
        assert!(profile_for(None, "../up").is_err());
    }
}
