//! The grant boundary: the one way to start a process that is *given* a worker identity.
//!
//! [`worker_command`] is called by `dispatch::default_spawn` and nothing else: clippy's
//! `disallowed-methods` (runtime/clippy.toml) bans it everywhere else in the runtime, and the
//! drift guard reads the keys `default_spawn` then sets on it. It returns a
//! `std::process::Command` (the only one that leaves this module) that starts from the process
//! environment **without** any identity-bearing key ([`super::is_identity_key`]) and without the
//! delegated-child marker, whatever the current context: a worker receives exactly the identity
//! the dispatcher grants it, never one it inherited, and a dispatcher running in a fenced context
//! still starts an owned worker.

use std::ffi::OsStr;

/// A command for a worker process, scrubbed of every inherited identity key and of the marker;
/// the caller (`default_spawn`) sets the granted identity. See the module docs.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)] // the grant boundary
pub fn worker_command(program: impl AsRef<OsStr>) -> std::process::Command {
    let mut cmd = std::process::Command::new(program);
    for key in super::process_identity_keys() {
        cmd.env_remove(key);
    }
    cmd.env_remove(super::DELEGATED_CHILD_MARKER);
    cmd
}

/// A command for the profile's **owner** daemon (`kanban owner serve`), started by a submitter
/// that itself carries a granted identity. The owner acts for no task: it is given no identity
/// (every identity-bearing key of the process environment is removed, whatever the current
/// context) and no delegated-child marker (it is a principal in its own right, whose managed
/// workers `dispatch::default_spawn` grants their identity). Called only by the submitter's
/// `start_owner` (clippy's `disallowed-methods` bans it elsewhere; the drift guard checks that
/// no identity key is set on it).
#[allow(clippy::disallowed_methods, clippy::disallowed_types)] // the owner's launch boundary
pub fn owner_command(program: impl AsRef<OsStr>) -> std::process::Command {
    let mut cmd = std::process::Command::new(program);
    for key in super::process_identity_keys() {
        cmd.env_remove(key);
    }
    cmd.env_remove(super::DELEGATED_CHILD_MARKER);
    cmd
}
