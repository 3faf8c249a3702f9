//! The README's "Your first agent" and "Running as a service", checked: the agent script exactly
//! as printed, run by the real dispatcher, completes its task; the shipped systemd units pass
//! `systemd-analyze verify` (where it is installed and can run).

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary and systemd-analyze

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use kanban_tests::{Kanban, Run};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The first fenced block of `lang` after the heading `heading` in the README.
fn readme_block(heading: &str, lang: &str) -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = &readme[readme
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("README has no `{heading}`"))..];
    let fence = format!("```{lang}\n");
    let start = section
        .find(&fence)
        .unwrap_or_else(|| panic!("no ```{lang} block under {heading}"))
        + fence.len();
    let len = section[start..].find("```").unwrap();
    section[start..start + len].to_owned()
}

/// The first line under `heading` in the README that starts with `prefix`, its `# comment` cut.
fn readme_line(heading: &str, prefix: &str) -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = &readme[readme
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("README has no `{heading}`"))..];
    let line = section
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line under {heading}"));
    line.split(" # ").next().unwrap().trim().to_owned()
}

/// Words of a shell line with double-quoted words (all the README's lines use).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    assert!(!quoted, "unbalanced quotes in {line}");
    if any {
        words.push(word);
    }
    words
}

#[test]
fn the_readme_first_agent_completes_its_task() {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    let script = readme_block("## Your first agent", "sh");
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    assert!(
        script.lines().count() <= 12,
        "a short script: {}",
        script.lines().count()
    );
    let agent = k.home().join("my-agent");
    std::fs::write(&agent, &script).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = readme_block("## Your first agent", "toml");
    assert!(config.contains("/usr/local/bin/my-agent"), "{config}");
    std::fs::write(
        k.home().join("kanban.toml"),
        config.replace("/usr/local/bin/my-agent", agent.to_str().unwrap()),
    )
    .unwrap();

    // The README's `create` line, with its `$HOME/hello` in this test's home.
    let create = readme_line("## Your first agent", "kanban create ");
    let hello = k.home().join("hello");
    let args: Vec<String> = shell_words(&create.replace("$HOME/hello", hello.to_str().unwrap()));
    assert_eq!(&args[..2], ["kanban", "create"], "{create}");
    let args: Vec<&str> = args[2..].iter().map(String::as_str).collect();
    let id = k.create(args[0], &args[1..]);
    // The script calls `kanban` by name: put this build's binary first on PATH.
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_kanban")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out: Run = k
        .cmd()
        .args(["dispatch", "--until-idle", "--interval", "0.05"])
        .env("PATH", path)
        // As a user's shell would have it (the children cannot see `--home`).
        .env("HERMES_KANBAN_HOME", k.home())
        .output()
        .unwrap()
        .into();
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let shown = k.json(&["show", &id]);
    assert_eq!(shown["task"]["status"], "done", "{shown}");
    let runs = shown["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "completed at the first attempt: {shown}");
    let summary = runs[0]["summary"].as_str().unwrap_or_default();
    assert!(summary.starts_with("wrote notes.txt ("), "{shown}");
    let notes = hello.join("notes.txt");
    let written = std::fs::read_to_string(&notes).unwrap();
    assert!(
        written.contains("Say hello") && written.contains("Greet the operator"),
        "the prompt came on stdin: {written}"
    );
    let log = k.ok(&["logs", &id]);
    assert!(
        log.contains(&format!("working on {id} in ")),
        "the task id came in the environment: {log}"
    );
}

#[test]
fn the_systemd_units_verify() {
    let dir = repo().join("contrib").join("systemd");
    let scratch = tempfile::tempdir().unwrap();
    let mut units = Vec::new();
    for name in ["kanban-dispatch.service", "kanban-cron.service"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(
            text.contains("ExecStart=%h/.cargo/bin/kanban "),
            "{name}: {text}"
        );
        assert!(text.contains("WantedBy=default.target"), "{name}");
        // `verify` checks the program exists: point it at this build.
        let local = scratch.path().join(name);
        std::fs::write(
            &local,
            text.replace("%h/.cargo/bin/kanban", env!("CARGO_BIN_EXE_kanban")),
        )
        .unwrap();
        units.push(local);
    }
    let Ok(out) = Command::new("systemd-analyze")
        .arg("verify")
        .args(&units)
        .output()
    else {
        eprintln!("systemd-analyze is not installed: the units are not verified");
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("Failed to initialize manager") {
        eprintln!("systemd-analyze cannot run here ({stderr}): the units are not verified");
        return;
    }
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr, "", "systemd-analyze warns about a unit");
}
