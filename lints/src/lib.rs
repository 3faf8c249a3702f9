//! `kanban-lints`: syn-based checks over the sources of `kanban-runtime` and the other checked
//! workspace members ([`scope`]) that the compiler and clippy cannot express.
//!
//! * [`rules`]: one rule per file — identity keys read outside `identity`, ungated identity
//!   consumers, cached gated verdicts, threads and subprocesses started outside the sanctioned
//!   helpers, global mutable state outside `identity/` and `sync/`;
//! * [`drift`]: the env-key drift guard over `dispatch::default_spawn`;
//! * [`graph`]: the module graph — no import cycle between files or top-level modules, the
//!   storage crates named only where [`scope::MODULE_GRAPHS`] allows.
//!
//! The library only reads and reports ([`Diagnostic`]s); `xtask` decides exit codes and prints.
//! It never edits a source file and never runs cargo.

pub mod diag;
pub mod drift;
pub mod expand;
pub mod graph;
pub mod resolve;
pub mod rules;
pub mod scope;
pub mod source;

pub use diag::{Diagnostic, Severity};
pub use source::{LoadError, Tree};

/// Every lint finding in `runtime/src` under `root` (a scratch copy of the runtime's sources):
/// the rules and the module graph.
pub fn lint_root(root: &std::path::Path) -> Result<Vec<Diagnostic>, LoadError> {
    Ok(lint_tree(&Tree::load(root)?))
}

/// Every lint finding in the checked members of the workspace at `root` ([`scope`]): the rules
/// and the module graph.
pub fn lint_workspace(
    root: &std::path::Path,
    members: &[scope::Member],
) -> Result<Vec<Diagnostic>, LoadError> {
    Ok(lint_tree(&Tree::load_workspace(root, members)?))
}

/// The rules' and the module graph's findings over `tree`, sorted by place.
pub fn lint_tree(tree: &Tree) -> Vec<Diagnostic> {
    let mut diags = rules::run(tree);
    diags.extend(graph::check(tree, scope::MODULE_GRAPHS));
    diags.sort();
    diags
}

/// The drift guard's findings over the checked members of the workspace at `root`.
pub fn drift_workspace(
    root: &std::path::Path,
    members: &[scope::Member],
) -> Result<Vec<Diagnostic>, LoadError> {
    Ok(drift::check(&Tree::load_workspace(root, members)?))
}

/// The drift guard's findings for the tree under `root` (the workspace root).
pub fn drift_root(root: &std::path::Path) -> Result<Vec<Diagnostic>, LoadError> {
    Ok(drift::check(&Tree::load(root)?))
}
