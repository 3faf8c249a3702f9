//! The lints and the drift guard over the real workspace, so `cargo test --workspace` alone
//! catches a regression (STYLE: run the checks from a `#[test]` as well).

use std::path::{Path, PathBuf};

use kanban_lints::Diagnostic;

fn workspace_root() -> PathBuf {
    let lints = Path::new(env!("CARGO_MANIFEST_DIR"));
    lints.parent().unwrap_or(lints).to_path_buf()
}

fn errors(diags: &[Diagnostic]) -> String {
    diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| format!("\n  {d}"))
        .collect()
}

#[test]
fn runtime_sources_pass_every_lint() {
    let diags = kanban_lints::lint_root(&workspace_root()).expect("runtime sources load");
    let errors = errors(&diags);
    assert!(errors.is_empty(), "cargo xtask lint finds:{errors}");
}

#[test]
fn every_env_key_default_spawn_injects_is_classified() {
    let diags = kanban_lints::drift_root(&workspace_root()).expect("runtime sources load");
    let errors = errors(&diags);
    assert!(errors.is_empty(), "cargo xtask drift finds:{errors}");
}
