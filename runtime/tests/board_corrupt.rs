//! A board file whose pages are damaged (valid SQLite header, garbage after it): every command
//! fails with a clear error, `kanban fsck` names the damage, and the file is left byte-identical.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary

use std::path::Path;
use std::process::{Command, Output};

fn kanban(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kanban"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("HERMES_KANBAN_DB")
        .env_remove("HERMES_KANBAN_BOARD")
        .env_remove("HERMES_KANBAN_TASK")
        .env_remove("HERMES_DELEGATED_CHILD_CONTEXT")
        .output()
        .expect("run kanban")
}

#[test]
fn damaged_pages_are_reported_and_nothing_is_written() {
    let home = tempfile::tempdir().unwrap();
    let body = "x".repeat(3000);
    for i in 0..20 {
        let out = kanban(
            home.path(),
            &["create", &format!("task {i}"), "--body", &body],
        );
        assert!(out.status.success(), "{out:?}");
    }
    let db = home.path().join("kanban.db");
    let mut bytes = std::fs::read(&db).unwrap();
    // Keep the header page (so it still looks like SQLite); overwrite every page after it.
    for (i, b) in bytes.iter_mut().enumerate().skip(4096) {
        *b = (i % 251) as u8;
    }
    std::fs::write(&db, &bytes).unwrap();

    let fsck = kanban(home.path(), &["fsck"]);
    assert_eq!(fsck.status.code(), Some(1), "{fsck:?}");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
    assert!(
        text.contains("corrupt_database") || text.contains("damaged"),
        "{text}"
    );

    let create = kanban(home.path(), &["create", "one more"]);
    assert_eq!(create.status.code(), Some(1), "{create:?}");
    let stderr = String::from_utf8_lossy(&create.stderr);
    assert!(stderr.contains("damaged"), "{stderr}");

    let list = kanban(home.path(), &["list"]);
    assert_eq!(list.status.code(), Some(1), "{list:?}");

    assert_eq!(
        std::fs::read(&db).unwrap(),
        bytes,
        "the damaged file must be left as it was"
    );
}
