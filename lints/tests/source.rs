//! What the checks read: test code is removed before any rule sees it, everything else is kept.

use kanban_lints::{Tree, rules};

const SPAWN: &str = "pub fn f() { let _ = std::process::Command::new(\"x\"); }";

fn findings(sources: &[(&str, &str)]) -> Vec<String> {
    let tree = Tree::from_sources(sources.iter().copied()).expect("parses");
    rules::run(&tree).iter().map(|d| d.to_string()).collect()
}

#[test]
fn files_of_cfg_test_modules_are_skipped() {
    let found = findings(&[
        (
            "runtime/src/board/mod.rs",
            "#[cfg(test)]\nmod tests;\nmod store;",
        ),
        ("runtime/src/board/tests.rs", SPAWN),
        (
            "runtime/src/board/store.rs",
            "#[cfg(all(test, unix))]\nmod helpers;",
        ),
        ("runtime/src/board/store/helpers.rs", SPAWN),
        ("runtime/tests/e2e.rs", SPAWN),
    ]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn non_test_cfgs_and_test_named_items_are_still_checked() {
    let found = findings(&[
        (
            "runtime/src/dispatch/mod.rs",
            "#[cfg(not(test))]\npub fn g() { let _ = std::process::Command::new(\"x\"); }\n\
             pub fn tests() { let _ = std::process::Command::new(\"y\"); }\n\
             #[cfg(test)]\nmod t { pub fn h() { let _ = std::process::Command::new(\"z\"); } }",
        ),
        ("runtime/src/dispatch/helpers.rs", SPAWN),
    ]);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].starts_with("runtime/src/dispatch/helpers.rs:1:22: raw-command"));
    assert!(found[1].starts_with("runtime/src/dispatch/mod.rs:2:22: raw-command"));
    assert!(found[2].starts_with("runtime/src/dispatch/mod.rs:3:26: raw-command"));
}

#[test]
fn a_syntax_error_names_its_place() {
    let err = Tree::from_sources([("runtime/src/cron/mod.rs", "fn broken( {")])
        .err()
        .expect("does not parse");
    assert!(
        err.to_string().starts_with("runtime/src/cron/mod.rs:1:"),
        "{err}"
    );
}
