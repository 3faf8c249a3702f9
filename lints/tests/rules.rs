//! Every lint rule against its fixtures: `fixtures/<rule>/fail/*.rs` must give exactly the
//! findings their `//~ <rule>: <text>` markers expect (rule name, line, and a column pointing at
//! `<text>`); `fixtures/<rule>/pass/*.rs` must give none.

use std::path::{Path, PathBuf};

use kanban_lints::{Diagnostic, Tree, rules};

const DEFAULT_PATH: &str = "runtime/src/dispatch/fixture.rs";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn rs_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    files
}

/// Runs `rule` over the fixture at `file`; returns its text and the findings.
fn run(rule: &str, file: &Path) -> (String, Vec<Diagnostic>) {
    let text = std::fs::read_to_string(file).expect("fixture readable");
    let path = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("// path: "))
        .unwrap_or(DEFAULT_PATH)
        .trim()
        .to_owned();
    let tree = Tree::from_sources([(path, text.as_str())])
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let diags = rules::run_named(&tree, rule).unwrap_or_else(|| panic!("no rule named {rule}"));
    (text, diags)
}

/// `(line, text)` for every `//~ rule: text` marker.
fn markers(rule: &str, text: &str) -> Vec<(usize, String)> {
    let tag = format!("//~ {rule}: ");
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            l.find(&tag)
                .map(|at| (i + 1, l[at + tag.len()..].to_owned()))
        })
        .collect()
}

fn show(diags: &[Diagnostic]) -> String {
    diags.iter().map(|d| format!("\n  {d}")).collect()
}

fn check_fail(rule: &str, file: &Path) {
    let (text, diags) = run(rule, file);
    let expected = markers(rule, &text);
    assert!(
        !expected.is_empty(),
        "{}: a failing fixture needs `//~ {rule}: …` markers",
        file.display()
    );
    let lines: Vec<&str> = text.lines().collect();
    let mut unmatched = expected.clone();
    for d in &diags {
        assert_eq!(d.rule, rule, "{}: wrong rule in {d}", file.display());
        assert!(d.is_error(), "{}: {d} should be an error", file.display());
        let line = lines.get(d.line - 1).copied().unwrap_or_default();
        let at: String = line.chars().skip(d.col - 1).collect();
        let pos = unmatched
            .iter()
            .position(|(l, snippet)| *l == d.line && at.starts_with(snippet.as_str()));
        match pos {
            Some(i) => {
                unmatched.remove(i);
            }
            None => panic!(
                "{}: unexpected finding (column text `{at}`):  {d}\nall findings:{}",
                file.display(),
                show(&diags)
            ),
        }
    }
    assert!(
        unmatched.is_empty(),
        "{}: expected findings not reported: {unmatched:?}\nall findings:{}",
        file.display(),
        show(&diags)
    );
}

fn check_rule(rule: &str) {
    let dir = fixtures().join(rule);
    let fails = rs_files(&dir.join("fail"));
    let passes = rs_files(&dir.join("pass"));
    assert!(!fails.is_empty(), "{rule}: no failing fixtures");
    assert!(!passes.is_empty(), "{rule}: no passing fixtures");
    for file in &fails {
        check_fail(rule, file);
    }
    for file in &passes {
        let (_, diags) = run(rule, file);
        assert!(
            diags.is_empty(),
            "{}: a passing fixture has findings:{}",
            file.display(),
            show(&diags)
        );
    }
}

#[test]
fn every_rule_has_fixtures_that_fail_and_pass() {
    for rule in rules::all() {
        let dir = fixtures().join(rule.name());
        assert!(
            dir.join("fail").is_dir(),
            "{}: missing fixtures/…/fail",
            rule.name()
        );
        assert!(
            dir.join("pass").is_dir(),
            "{}: missing fixtures/…/pass",
            rule.name()
        );
    }
}

#[test]
fn identity_key_read_fixtures() {
    check_rule("identity-key-read");
}

#[test]
fn ungated_identity_fixtures() {
    check_rule("ungated-identity");
}

#[test]
fn cached_gated_verdict_fixtures() {
    check_rule("cached-gated-verdict");
}

#[test]
fn raw_thread_spawn_fixtures() {
    check_rule("raw-thread-spawn");
}

#[test]
fn raw_command_fixtures() {
    check_rule("raw-command");
}

#[test]
fn uncarried_job_fixtures() {
    check_rule("uncarried-job");
}

#[test]
fn global_mutable_state_fixtures() {
    check_rule("global-mutable-state");
}

#[test]
fn unheld_guard_fixtures() {
    check_rule("unheld-guard");
}

#[test]
fn diagnostics_read_path_line_col_rule_message_fix() {
    let tree = Tree::from_sources([(
        "runtime/src/dispatch/mod.rs",
        "fn f() { let _ = std::process::Command::new(\"x\"); }",
    )])
    .expect("parses");
    let diags = rules::run(&tree);
    assert_eq!(diags.len(), 1, "{}", show(&diags));
    let line = diags[0].to_string();
    assert!(
        line.starts_with("runtime/src/dispatch/mod.rs:1:18: raw-command: "),
        "{line}"
    );
    assert!(
        line.contains(" — build child processes with `identity::command"),
        "{line}"
    );
}
