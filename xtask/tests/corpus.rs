//! The regression corpus (`xtask/tests/corpus/`, described in its README): every way around the
//! identity rules that a careless contributor found, each as a fixture that the checks of
//! `cargo xtask check` must reject, naming the rule that catches it.
//!
//! * `syn/*.rs` — caught by `cargo xtask lint` or `cargo xtask drift`. Each fixture goes into a
//!   scratch copy of `runtime/src` of its own (at its `// target:` path, as a new file or, with
//!   `// replace: true`, instead of the file there); the run must fail and name the fixture's file
//!   and its `// rule:`.
//! * `clippy/*.rs` — caught by clippy's `disallowed-methods` / `disallowed-types`
//!   (runtime/clippy.toml). All of them go into ONE scratch copy of the workspace, as modules of
//!   the runtime library, and one `cargo clippy -p kanban-runtime --lib` must report each file
//!   with its `// expect:` message.
//! * `compile_fail/*.rs` — rejected by the compiler itself (the types of `identity`). All go into
//!   one more scratch workspace; one `cargo check` must report each file with its `// expect:`.
//!
//! The two cargo runs build in `<target>/tests/corpus` (dependencies compile once and stay
//! there), never in the normal target dir.

#![allow(clippy::disallowed_methods)] // test code drives cargo and xtask directly

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn corpus(group: &str) -> Vec<(String, String)> {
    let dir = workspace().join("xtask/tests/corpus").join(group);
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            let name = p.file_stem().expect("name").to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("readable"))
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

/// The value of `// <key>: …` in the fixture's header.
fn header<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    let tag = format!("// {key}: ");
    text.lines()
        .take_while(|l| l.starts_with("//"))
        .find_map(|l| l.strip_prefix(&tag))
        .map(str::trim)
}

fn copy_dir(from: &Path, to: &Path, skip: &[&str]) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let name = entry.file_name();
        if skip.iter().any(|s| name == *s) {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target, skip);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn every_syn_fixture_is_rejected_by_lint_or_drift_naming_its_rule() {
    let mut failures = Vec::new();
    for (name, fixture) in corpus("syn") {
        let target = header(&fixture, "target").expect("// target: header");
        let rule = header(&fixture, "rule").expect("// rule: header");
        let dir = tempfile::tempdir().expect("tempdir");
        copy_dir(
            &workspace().join("runtime/src"),
            &dir.path().join("runtime/src"),
            &[],
        );
        let path = dir.path().join(target);
        if header(&fixture, "replace") != Some("true") {
            assert!(!path.exists(), "{name}: {target} exists; use a new file");
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("fixture folder");
        }
        std::fs::write(&path, &fixture).expect("write fixture");
        let root = dir.path().to_str().expect("utf-8 path");
        let mut seen = String::new();
        let mut rejected = false;
        for task in ["lint", "drift"] {
            let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
                .args([task, "--root", root])
                .output()
                .expect("xtask runs");
            let output = text(&out);
            if out.status.code() == Some(1)
                && output.lines().any(|l| {
                    l.starts_with(&format!("{target}:")) && l.contains(&format!(": {rule}: "))
                })
            {
                rejected = true;
            }
            seen.push_str(&output);
        }
        if !rejected {
            failures.push(format!(
                "{name}: expected `{target}:…: {rule}:` and a failing run, got:\n{seen}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A scratch copy of the workspace with `group`'s fixtures as modules `corpus::<name>` of the
/// runtime library; returns it with the fixtures.
fn scratch_workspace(group: &str) -> (tempfile::TempDir, Vec<(String, String)>) {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(&workspace(), dir.path(), &["target", ".git"]);
    let fixtures = corpus(group);
    let module = dir.path().join("runtime/src/corpus");
    std::fs::create_dir_all(&module).expect("corpus dir");
    let mut mod_rs = String::new();
    for (name, text) in &fixtures {
        std::fs::write(module.join(format!("{name}.rs")), text).expect("write fixture");
        mod_rs.push_str(&format!("pub mod {name};\n"));
    }
    std::fs::write(module.join("mod.rs"), mod_rs).expect("write mod.rs");
    let lib = dir.path().join("runtime/src/lib.rs");
    let mut lib_text = std::fs::read_to_string(&lib).expect("lib.rs");
    lib_text.push_str("\n#[allow(dead_code, unused)]\npub mod corpus;\n");
    std::fs::write(&lib, lib_text).expect("write lib.rs");
    (dir, fixtures)
}

fn cargo_in(dir: &Path, args: &[&str]) -> String {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", workspace().join("target/tests/corpus"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("cargo runs");
    text(&out)
}

/// Each fixture file is reported with its `// expect:` message.
fn assert_each_reported(group: &str, fixtures: &[(String, String)], output: &str) {
    let mut missing = Vec::new();
    for (name, text) in fixtures {
        let expect = header(text, "expect").expect("// expect: header");
        let file = format!("runtime/src/corpus/{name}.rs:");
        if !output
            .lines()
            .any(|l| l.starts_with(&file) && l.contains(expect))
        {
            missing.push(format!("{name}: `{file}… {expect}`"));
        }
    }
    assert!(
        missing.is_empty(),
        "{group}: not rejected as expected:\n  {}\n\noutput:\n{output}",
        missing.join("\n  ")
    );
}

#[test]
fn every_clippy_fixture_is_rejected_by_clippy_naming_the_ban() {
    let (dir, fixtures) = scratch_workspace("clippy");
    let output = cargo_in(
        dir.path(),
        &[
            "clippy",
            "--offline",
            "-p",
            "kanban-runtime",
            "--lib",
            "--message-format=short",
        ],
    );
    assert_each_reported("clippy", &fixtures, &output);
}

#[test]
fn every_compile_fail_fixture_is_rejected_by_the_compiler() {
    let (dir, fixtures) = scratch_workspace("compile_fail");
    let output = cargo_in(
        dir.path(),
        &[
            "check",
            "--offline",
            "-p",
            "kanban-runtime",
            "--lib",
            "--message-format=short",
        ],
    );
    assert_each_reported("compile_fail", &fixtures, &output);
}
