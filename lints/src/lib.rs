//! `kanban-lints`: syn-based checks over the sources of `kanban-runtime` that the compiler and
//! clippy cannot express.
//!
//! * [`rules`]: one rule per file — identity keys read outside `identity`, ungated identity
//!   consumers, cached gated verdicts, threads and subprocesses started outside the sanctioned
//!   helpers;
//! * [`drift`]: the env-key drift guard over `dispatch::default_spawn`.
//!
//! The library only reads and reports ([`Diagnostic`]s); `xtask` decides exit codes and prints.
//! It never edits a source file and never runs cargo.

pub mod diag;
pub mod drift;
pub mod expand;
pub mod resolve;
pub mod rules;
pub mod source;

pub use diag::{Diagnostic, Severity};
pub use source::{LoadError, Tree};

/// Every lint finding in the tree under `root` (the workspace root).
pub fn lint_root(root: &std::path::Path) -> Result<Vec<Diagnostic>, LoadError> {
    Ok(rules::run(&Tree::load(root)?))
}

/// The drift guard's findings for the tree under `root` (the workspace root).
pub fn drift_root(root: &std::path::Path) -> Result<Vec<Diagnostic>, LoadError> {
    Ok(drift::check(&Tree::load(root)?))
}
