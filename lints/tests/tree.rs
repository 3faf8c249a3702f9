//! The lints and the drift guard over the real workspace, so `cargo test --workspace` alone
//! catches a regression (STYLE: run the checks from a `#[test]` as well). The members come from
//! `cargo metadata`, as `cargo xtask lint` gets them.

use std::path::{Path, PathBuf};

use kanban_lints::Diagnostic;
use kanban_lints::scope::{self, Member};

fn workspace_root() -> PathBuf {
    let lints = Path::new(env!("CARGO_MANIFEST_DIR"));
    lints.parent().unwrap_or(lints).to_path_buf()
}

fn members() -> Vec<Member> {
    let metadata = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .manifest_path(workspace_root().join("Cargo.toml"))
        .exec()
        .expect("cargo metadata");
    metadata
        .workspace_packages()
        .into_iter()
        .map(|p| Member {
            name: p.name.to_string(),
            src_paths: p
                .targets
                .iter()
                .filter(|t| t.is_lib() || t.is_bin() || t.is_proc_macro())
                .map(|t| t.src_path.clone().into_std_path_buf())
                .collect(),
        })
        .collect()
}

fn errors(diags: &[Diagnostic]) -> String {
    diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| format!("\n  {d}"))
        .collect()
}

#[test]
fn workspace_sources_pass_every_lint() {
    let diags = kanban_lints::lint_workspace(&workspace_root(), &members())
        .expect("workspace sources load");
    let errors = errors(&diags);
    assert!(errors.is_empty(), "cargo xtask lint finds:{errors}");
}

#[test]
fn every_env_key_default_spawn_injects_is_classified() {
    let diags = kanban_lints::drift_workspace(&workspace_root(), &members())
        .expect("workspace sources load");
    let errors = errors(&diags);
    assert!(errors.is_empty(), "cargo xtask drift finds:{errors}");
}

#[test]
fn the_checks_read_web_and_pgwire_and_skip_only_the_named_crates() {
    let root = workspace_root();
    let members = members();
    let dirs = scope::checked_dirs(&root, &members).expect("checked dirs");
    for want in ["runtime/src", "web/src", "pgwire/src"] {
        assert!(dirs.iter().any(|d| d == want), "{want} not read: {dirs:?}");
    }
    for (name, _) in scope::UNCHECKED {
        assert!(
            members.iter().any(|m| m.name == *name),
            "lints/src/scope.rs leaves out `{name}`, which is not a workspace member: remove the \
             stale entry"
        );
    }
    for member in &members {
        let skipped = scope::UNCHECKED.iter().any(|(n, _)| *n == member.name);
        let read = member.src_paths.iter().any(|p| {
            let rel = p.strip_prefix(&root).expect("under the root");
            dirs.iter().any(|d| rel.starts_with(d))
        });
        assert_eq!(
            read, !skipped,
            "{}: read {read}, listed as unchecked {skipped}",
            member.name
        );
    }
}

#[test]
fn every_exemption_is_still_needed() {
    let tree = kanban_lints::Tree::load_workspace(&workspace_root(), &members())
        .expect("workspace sources load");
    let unexempt = kanban_lints::rules::run_ignoring_exemptions(&tree);
    for (prefix, rule, _) in scope::EXEMPT {
        assert!(
            unexempt
                .iter()
                .any(|d| d.rule == *rule && d.path.starts_with(prefix)),
            "lints/src/scope.rs exempts {prefix} from {rule}, which finds nothing there: remove \
             the stale entry"
        );
    }
}

#[test]
fn every_allowed_static_exists() {
    use kanban_lints::rules::global_mutable_state::ALLOWED;
    for (path, name, _) in ALLOWED {
        let text = std::fs::read_to_string(workspace_root().join(path))
            .unwrap_or_else(|e| panic!("{path}: {e} (stale allow-list entry)"));
        assert!(
            text.contains(&format!("static {name}:")),
            "{path} has no `static {name}`: remove the stale allow-list entry"
        );
    }
}
