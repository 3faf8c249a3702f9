//! End-to-end test helpers that drive the real `kanban` binary on a temporary home.
//!
//! Where the binary comes from: Cargo builds a package's binaries before that package's own
//! integration tests and exposes their paths as `env!("CARGO_BIN_EXE_<name>")` — but only inside
//! the package that defines the binary. So end-to-end scenarios that need `kanban` live in
//! `runtime/tests/*.rs` (package `kanban-runtime`, which dev-depends on this crate) and hand the
//! path in: `Kanban::new(env!("CARGO_BIN_EXE_kanban"))`. That works on a clean clone with a plain
//! `cargo test --workspace`: no prebuilt binary, no guessing `target/<profile>/` paths.
//!
//! Every child runs with a cleared environment (only `PATH` and `LANG` kept) plus `--home <tmp>`,
//! so a test never sees the identity of a worker it happens to run inside, and never mutates this
//! process's environment. Add variables per command with [`Kanban::cmd`] + `.env(k, v)`.

pub mod lean;
pub mod web_bench;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// A temporary kanban home and the binary to run against it.
pub struct Kanban {
    bin: PathBuf,
    home: tempfile::TempDir,
}

/// What one `kanban` invocation did.
#[derive(Debug, Clone)]
pub struct Run {
    /// Exit code (`-1` when killed by a signal).
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Kanban {
    /// A fresh empty home for the binary at `bin` (pass `env!("CARGO_BIN_EXE_kanban")`).
    pub fn new(bin: impl Into<PathBuf>) -> Kanban {
        let home = tempfile::Builder::new()
            .prefix("kanban-e2e-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary home: {e}"));
        Kanban {
            bin: bin.into(),
            home,
        }
    }

    /// The kanban root passed as `--home`.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// The binary.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// `kanban --home <home>` with a cleared environment; add arguments and variables, then run.
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.env_clear();
        for key in ["PATH", "LANG"] {
            if let Some(v) = std::env::var_os(key) {
                cmd.env(key, v);
            }
        }
        cmd.arg("--home").arg(self.home.path());
        cmd
    }

    /// Runs `kanban <args>` to completion.
    pub fn run(&self, args: &[&str]) -> Run {
        let out = self
            .cmd()
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.display()));
        out.into()
    }

    /// Runs `kanban <args>`, asserts exit 0, returns stdout trimmed.
    pub fn ok(&self, args: &[&str]) -> String {
        let run = self.run(args);
        assert_eq!(
            run.code, 0,
            "kanban {args:?} exited {}\nstdout: {}\nstderr: {}",
            run.code, run.stdout, run.stderr
        );
        run.stdout.trim().to_owned()
    }

    /// Runs `kanban --json <args>`, asserts exit 0, parses stdout.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.ok(&all);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("kanban {all:?}: not JSON ({e}): {out}"))
    }

    /// Creates a task and returns its id.
    pub fn create(&self, title: &str, extra: &[&str]) -> String {
        let mut args = vec!["create", title];
        args.extend_from_slice(extra);
        let v = self.json(&args);
        v["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no id in {v}"))
            .to_owned()
    }

    /// The status of task `id`.
    pub fn status(&self, id: &str) -> String {
        self.json(&["show", id])["task"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Asserts `kanban fsck` is clean.
    pub fn assert_fsck_clean(&self) {
        let run = self.run(&["--json", "fsck"]);
        assert_eq!(run.code, 0, "fsck: {}\n{}", run.stdout, run.stderr);
    }

    /// The default board's database file.
    pub fn default_db(&self) -> PathBuf {
        self.home.path().join("kanban.db")
    }
}

/// A deterministic shuffle of `ids` (xorshift seeded by `seed`), so each claimer of a race test
/// walks its own order and a failing run can be replayed.
pub fn shuffled(ids: &[String], seed: u64) -> Vec<String> {
    let mut out = ids.to_vec();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..out.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.swap(i, (x % (i as u64 + 1)) as usize);
    }
    out
}

/// One claimer: a shell loop that runs `kanban claim ID --claimer wN` per id and prints
/// "<id> <exit code>" per line (a race test reads them back). `bin` is `kanban`, `home` the
/// home whose board the claims race on.
pub fn start_claimer(bin: &Path, home: &Path, n: usize, order: &[String]) -> Child {
    let script = format!(
        "while read id; do \"$KANBAN\" --home \"$KHOME\" claim \"$id\" --claimer w{n} --ttl 900 \
         >/dev/null 2>\"$KHOME/err-w{n}-$id\"; echo \"$id $?\"; done"
    );
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KANBAN", bin)
        .env("KHOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start sh");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(order.join("\n").as_bytes())
        .expect("feed ids");
    stdin.write_all(b"\n").expect("feed ids");
    drop(stdin);
    child
}

/// `git -C dir args…` with a committer identity and no signing (the tests' repositories have no
/// configuration of their own), which must succeed; its stdout, trimmed. A missing git fails
/// the test: the workspace tests never skip.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=kanban",
            "-c",
            "user.email=kanban@example.invalid",
        ])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("git must be installed to run the workspace tests");
    assert!(
        out.status.success(),
        "git -C {} {args:?} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
