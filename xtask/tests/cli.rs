//! `cargo xtask` as a user runs it: on a scratch copy of the runtime sources (`--root`), a new
//! identity read in a dispatch file makes `lint` fail with the rule, place and fix; the untouched
//! copy passes.

use std::path::Path;
use std::process::{Command, Output};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

fn scratch_tree() -> tempfile::TempDir {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf();
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(
        &workspace.join("runtime/src"),
        &dir.path().join("runtime/src"),
    );
    dir
}

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("xtask runs")
}

#[test]
fn lint_on_an_untouched_copy_of_the_tree_passes() {
    let dir = scratch_tree();
    let root = dir.path().to_str().expect("utf-8 path");
    let out = xtask(&["lint", "--root", root]);
    assert!(
        out.status.success(),
        "lint failed on an untouched copy:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_task_read_added_to_a_dispatch_file_fails_lint() {
    let dir = scratch_tree();
    let file = dir.path().join("runtime/src/dispatch/mod.rs");
    let mut text = std::fs::read_to_string(&file).expect("dispatch/mod.rs exists");
    let line = text.lines().count() + 2;
    text.push_str(
        "\npub fn sneaky_task() -> Option<String> {\n    std::env::var(\"HERMES_KANBAN_TASK\").ok()\n}\n",
    );
    std::fs::write(&file, text).expect("write");
    let root = dir.path().to_str().expect("utf-8 path");
    let out = xtask(&["lint", "--root", root]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "lint must fail:\n{stdout}");
    let want = format!(
        "runtime/src/dispatch/mod.rs:{}:5: identity-key-read: ",
        line + 1
    );
    assert!(stdout.contains(&want), "expected `{want}` in:\n{stdout}");
    assert!(stdout.contains("HERMES_KANBAN_TASK"), "{stdout}");
}

fn xtask_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("xtask runs")
}

#[test]
fn without_root_it_checks_the_workspace_of_the_current_directory() {
    let dir = scratch_tree();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[workspace]\nmembers = [\"runtime\"]\n",
    )
    .expect("write");
    // A member cargo can describe (`cargo metadata --no-deps` reads no dependency).
    std::fs::write(
        dir.path().join("runtime/Cargo.toml"),
        "[package]\nname = \"kanban-runtime\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    )
    .expect("write");
    let file = dir.path().join("runtime/src/dispatch/mod.rs");
    let mut text = std::fs::read_to_string(&file).expect("dispatch/mod.rs exists");
    text.push_str("\npub fn sneaky() -> Option<String> {\n    std::env::var(\"HERMES_KANBAN_TASK\").ok()\n}\n");
    std::fs::write(&file, text).expect("write");
    // From a subfolder: the workspace is found by walking up, not baked in at build time.
    let out = xtask_in(&dir.path().join("runtime/src"), &["lint"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "lint must fail:\n{stdout}");
    assert!(
        stdout.contains("runtime/src/dispatch/mod.rs:") && stdout.contains("identity-key-read"),
        "{stdout}"
    );
}

#[test]
fn outside_any_workspace_without_root_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = xtask_in(dir.path(), &["lint"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is not inside a cargo workspace") && stderr.contains("--root"),
        "{stderr}"
    );
}

#[test]
fn unknown_task_is_a_usage_error() {
    let out = xtask(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Usage: cargo xtask"), "{stderr}");
    assert!(stderr.contains("frobnicate"), "{stderr}");
}

/// The file of the scratch tree that defines `default_spawn`.
fn spawn_file(root: &Path) -> std::path::PathBuf {
    fn find(dir: &Path) -> Option<std::path::PathBuf> {
        for entry in std::fs::read_dir(dir).ok()? {
            let path = entry.ok()?.path();
            if path.is_dir() {
                if let Some(found) = find(&path) {
                    return Some(found);
                }
            } else if std::fs::read_to_string(&path).is_ok_and(|t| t.contains("fn default_spawn("))
            {
                return Some(path);
            }
        }
        None
    }
    find(&root.join("runtime/src")).expect("default_spawn is defined in runtime/src")
}

#[test]
fn drift_on_an_untouched_copy_of_the_tree_passes() {
    let dir = scratch_tree();
    let out = xtask(&["drift", "--root", dir.path().to_str().expect("utf-8 path")]);
    assert!(
        out.status.success(),
        "drift failed on an untouched copy:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_new_key_injected_in_default_spawn_fails_drift_with_its_place() {
    let dir = scratch_tree();
    let file = spawn_file(dir.path());
    let text = std::fs::read_to_string(&file).expect("readable");
    let at = text.find("fn default_spawn(").expect("signature");
    let open = at + text[at..].find("{\n").expect("body") + 2;
    let line = text[..open].lines().count() + 1;
    let injected =
        "    let _ = crate::identity::command(\"x\").env(\"HERMES_KANBAN_NEW\", \"1\");\n";
    let text = format!("{}{injected}{}", &text[..open], &text[open..]);
    std::fs::write(&file, text).expect("write");
    let out = xtask(&["drift", "--root", dir.path().to_str().expect("utf-8 path")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "drift must fail:\n{stdout}");
    let rel = file
        .strip_prefix(dir.path())
        .expect("under root")
        .to_string_lossy()
        .replace('\\', "/");
    let col = injected.find("\"HERMES_KANBAN_NEW\"").expect("key") + 1;
    let want = format!(
        "{rel}:{line}:{col}: drift: `default_spawn` injects unclassified key `HERMES_KANBAN_NEW`"
    );
    assert!(stdout.contains(&want), "expected `{want}` in:\n{stdout}");
}

#[test]
fn removing_every_injection_fails_drift_as_nothing_found() {
    let dir = scratch_tree();
    let file = spawn_file(dir.path());
    let text = std::fs::read_to_string(&file).expect("readable");
    std::fs::write(&file, text.replace("HERMES_KANBAN_", "HERMES_OTHER_")).expect("write");
    let out = xtask(&["drift", "--root", dir.path().to_str().expect("utf-8 path")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "drift must fail:\n{stdout}");
    assert!(
        stdout.contains("drift: parser drift: nothing found"),
        "expected the nothing-found error in:\n{stdout}"
    );
}

/// `cargo xtask loom` builds under the target folder cargo reports: `CARGO_BUILD_TARGET_DIR`
/// is honoured, not `<root>/target` guessed. (The scratch workspace has no loom crate, so the
/// cargo run after the printed command fails; the command line is what is checked.)
#[test]
fn loom_builds_under_cargo_build_target_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("runtime/src")).expect("mkdir");
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[workspace]\nmembers = [\"runtime\"]\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("runtime/Cargo.toml"),
        "[package]\nname = \"kanban-runtime\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    )
    .expect("write");
    std::fs::write(dir.path().join("runtime/src/lib.rs"), "").expect("write");
    let elsewhere = dir.path().join("elsewhere");
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["loom", "--no-run"])
        .current_dir(dir.path())
        .env_remove("CARGO_TARGET_DIR")
        .env("CARGO_BUILD_TARGET_DIR", &elsewhere)
        .output()
        .expect("xtask runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!("CARGO_TARGET_DIR={}", elsewhere.join("loom").display());
    assert!(stderr.contains(&want), "expected `{want}` in:\n{stderr}");
}
