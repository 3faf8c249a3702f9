//! The drift guard against its fixtures: each `fixtures/drift/{fail,pass}/<case>/` is a mini
//! tree (`runtime/src/…`); its `expected` file lists one substring per expected error and its
//! `warnings` file one per expected warning (absent = none). Cases without their own
//! `runtime/src/identity/` get `fixtures/drift/identity.rs` as `runtime/src/identity/mod.rs`.

use std::path::{Path, PathBuf};

use kanban_lints::{Diagnostic, Tree, drift};

fn drift_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/drift")
}

fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .expect("under root")
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&path).expect("readable")));
        }
    }
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|t| {
            t.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn run_case(case: &Path) -> Vec<Diagnostic> {
    drift::check(&case_tree(case))
}

fn case_tree(case: &Path) -> Tree {
    let mut sources = Vec::new();
    walk(&case.join("runtime"), case, &mut sources);
    if !sources
        .iter()
        .any(|(p, _)| p.starts_with("runtime/src/identity/"))
    {
        let identity = std::fs::read_to_string(drift_fixtures().join("identity.rs"))
            .expect("identity fixture");
        sources.push(("runtime/src/identity/mod.rs".into(), identity));
    }
    Tree::from_sources(sources).unwrap_or_else(|e| panic!("{}: {e}", case.display()))
}

/// Each expected substring matches a distinct finding, and there are no others.
fn assert_matches(case: &Path, what: &str, found: &[&Diagnostic], expected: &[String]) {
    let shown: String = found.iter().map(|d| format!("\n  {d}")).collect();
    let mut left: Vec<String> = found.iter().map(|d| d.to_string()).collect();
    for want in expected {
        match left.iter().position(|d| d.contains(want.as_str())) {
            Some(i) => {
                left.remove(i);
            }
            None => panic!(
                "{}: expected {what} `{want}` not found; {what}s:{shown}",
                case.display()
            ),
        }
    }
    assert!(
        left.is_empty(),
        "{}: unexpected {what}s: {left:#?}\nall:{shown}",
        case.display()
    );
}

fn cases(kind: &str) -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(drift_fixtures().join(kind))
        .expect("drift fixtures")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no drift/{kind} cases");
    cases
}

/// Checks errors always; warnings when the case has a `warnings` file or `strict_warnings`.
fn check(case: &Path, strict_warnings: bool) {
    let diags = run_case(case);
    let errors: Vec<&Diagnostic> = diags.iter().filter(|d| d.is_error()).collect();
    let warnings: Vec<&Diagnostic> = diags.iter().filter(|d| !d.is_error()).collect();
    assert!(errors.iter().all(|d| d.rule == drift::RULE));
    assert_matches(case, "error", &errors, &lines_of(&case.join("expected")));
    if strict_warnings || case.join("warnings").exists() {
        assert_matches(
            case,
            "warning",
            &warnings,
            &lines_of(&case.join("warnings")),
        );
    }
}

#[test]
fn failing_drift_fixtures_fail_with_their_findings() {
    for case in cases("fail") {
        assert!(
            !lines_of(&case.join("expected")).is_empty(),
            "{}: a failing case needs an `expected` file",
            case.display()
        );
        check(&case, false);
    }
}

#[test]
fn passing_drift_fixtures_pass() {
    for case in cases("pass") {
        assert!(
            lines_of(&case.join("expected")).is_empty(),
            "{}: a passing case expects no errors",
            case.display()
        );
        check(&case, true);
    }
}

#[test]
fn helper_through_const_is_followed_to_the_injection() {
    let report = drift::analyze(&case_tree(&drift_fixtures().join("fail/helper_const")));
    let new = report
        .injections
        .iter()
        .find(|i| i.key == "HERMES_KANBAN_NEW")
        .expect("HERMES_KANBAN_NEW collected");
    assert_eq!(new.in_fn, "apply_identity");
    assert_eq!(new.path, "runtime/src/dispatch/env.rs");
    assert_eq!(
        new.via
            .as_ref()
            .map(|(n, p, l)| (n.as_str(), p.as_str(), *l)),
        Some(("NEW_KEY", "runtime/src/dispatch/keys.rs", 3))
    );
}
