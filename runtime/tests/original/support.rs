//! What the original's fixtures give its tests, for the real `kanban` binary: a temporary home
//! with a `kanban.toml` (crash grace 0, as the original's `HERMES_KANBAN_CRASH_GRACE_SECONDS=0`
//! fixtures), the board file for staging a state with SQL as the original's tests do with
//! `conn.execute`, and the few process helpers a liveness test needs (a live worker stand-in, a
//! pid that cannot exist). Never a sleep for time to pass: a lease or a run start is moved into
//! the past with SQL instead.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kanban_tests::{Kanban, Run};
use serde_json::Value;

/// A pid above any `pid_max` (2^22): no process has it, so kanban finds it dead.
pub const DEAD_PID: i64 = 1 << 30;

/// Profiles every home defines: `done` completes its task, `sh` runs the task body, `capture`
/// writes the prompt it was given to `<home>/prompts/<task id>.txt` (outside its workspace,
/// which is removed once the task is done) and completes.
const PROFILES: &str = "\n[profiles.done]\nagent = \"builtin:complete\"\n\n\
     [profiles.sh]\nagent = \"builtin:shell\"\n\n\
     [profiles.capture]\nagent = \"command\"\n\
     command = [\"sh\", \"-c\", \"mkdir -p \\\"$HERMES_HOME/prompts\\\" && \
     cat > \\\"$HERMES_HOME/prompts/$HERMES_KANBAN_TASK.txt\\\" && kanban complete --summary captured\"]\n";

/// The `capture` profile's agent finds the home through `HERMES_HOME` (a dispatcher started
/// with `--home` alone gives its agents no way to find it: README "Not built yet").
fn capture_env(home: &std::path::Path) -> String {
    format!(
        "env = {{ HERMES_HOME = {:?} }}\n",
        home.display().to_string()
    )
}

pub struct Home {
    pub k: Kanban,
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The host part of this host's claim locks (the UTS node name).
pub fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned()
}

impl Home {
    /// A home whose `[dispatch]` has crash grace 0, a short kill wait, and `extra` lines.
    pub fn with(extra: &str) -> Home {
        let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
        let config = format!(
            "[dispatch]\ncrash_grace_seconds = 0\nkill_wait_seconds = 0.2\n\
             interval_seconds = 0.05\n{extra}\n{PROFILES}{}",
            capture_env(k.home())
        );
        std::fs::write(k.home().join("kanban.toml"), config).unwrap();
        k.ok(&["init"]);
        Home { k }
    }

    pub fn new() -> Home {
        Home::with("")
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.k.run(args)
    }

    pub fn ok(&self, args: &[&str]) -> String {
        self.k.ok(args)
    }

    pub fn json(&self, args: &[&str]) -> Value {
        self.k.json(args)
    }

    /// `kanban create TITLE EXTRA…`, the new id.
    pub fn create(&self, title: &str, extra: &[&str]) -> String {
        self.k.create(title, extra)
    }

    /// `show --json`'s `task`.
    pub fn task(&self, id: &str) -> Value {
        self.json(&["show", id])["task"].clone()
    }

    pub fn status(&self, id: &str) -> String {
        self.task(id)["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The task's runs, oldest first.
    pub fn runs(&self, id: &str) -> Vec<Value> {
        self.json(&["show", id])["runs"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub fn outcomes(&self, id: &str) -> Vec<String> {
        self.runs(id)
            .iter()
            .map(|r| r["outcome"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    /// Every event of the task, oldest first.
    pub fn events(&self, id: &str) -> Vec<Value> {
        self.json(&["events", id])
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub fn kinds(&self, id: &str) -> Vec<String> {
        self.events(id)
            .iter()
            .map(|e| e["kind"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    /// The newest event of `kind`.
    pub fn event(&self, id: &str, kind: &str) -> Value {
        self.events(id)
            .into_iter()
            .rev()
            .find(|e| e["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} event on {id}: {:?}", self.kinds(id)))
    }

    /// Runs SQL on the default board, as the original's tests stage a state with `conn.execute`.
    pub fn sql(&self, sql: &str) {
        let conn = rusqlite::Connection::open(self.k.default_db()).unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        conn.execute_batch(sql).unwrap();
    }

    /// One integer of a query on the default board.
    pub fn count(&self, sql: &str) -> i64 {
        let conn = rusqlite::Connection::open(self.k.default_db()).unwrap();
        conn.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    /// `kanban dispatch --once`, asserting it exits 0.
    pub fn tick(&self) -> String {
        self.ok(&["dispatch", "--once"])
    }

    /// `kanban --json dispatch --once`: the tick report.
    pub fn tick_report(&self) -> Value {
        self.json(&["dispatch", "--once"])
    }

    /// Claims `id` under the lock `<this host>:<who>` (the original's `claimer=f"{host}:…"`): a
    /// claim of this host whose claimer is not a pid, so no dispatcher takes it for abandoned.
    /// Returns the run id.
    pub fn claim_as(&self, id: &str, who: &str) -> i64 {
        let lock = format!("{}:{who}", host());
        self.json(&["claim", id, "--claimer", &lock])["run_id"]
            .as_i64()
            .unwrap()
    }

    /// The original's `_set_worker_pid`: the task's and its current run's worker pid.
    pub fn set_worker_pid(&self, id: &str, pid: i64) {
        self.sql(&format!(
            "UPDATE tasks SET worker_pid = {pid} WHERE id = '{id}';
             UPDATE task_runs SET worker_pid = {pid}
              WHERE id = (SELECT current_run_id FROM tasks WHERE id = '{id}');"
        ));
    }

    /// Moves the current run's start (and the task's) `secs` into the past.
    pub fn age_run(&self, id: &str, secs: i64) {
        let at = now() - secs;
        self.sql(&format!(
            "UPDATE tasks SET started_at = {at} WHERE id = '{id}';
             UPDATE task_runs SET started_at = {at}
              WHERE id = (SELECT current_run_id FROM tasks WHERE id = '{id}');"
        ));
    }

    /// Moves the claim's expiry `secs` into the past (task and run).
    pub fn expire_claim(&self, id: &str, secs: i64) {
        let at = now() - secs;
        self.sql(&format!(
            "UPDATE tasks SET claim_expires = {at} WHERE id = '{id}';
             UPDATE task_runs SET claim_expires = {at}
              WHERE id = (SELECT current_run_id FROM tasks WHERE id = '{id}');"
        ));
    }

    /// The original's `_record_worker_exit(pid, status)` for a worker this dispatcher did not
    /// reap: the exit trailer at the end of the task's log, where kanban reads it.
    pub fn record_exit(&self, id: &str, rc: i32) {
        use std::io::Write;
        let dir = self.k.home().join("kanban").join("logs");
        std::fs::create_dir_all(&dir).unwrap();
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(format!("{id}.log")))
            .unwrap();
        writeln!(log, "[kanban-worker-exit] rc={rc}").unwrap();
    }

    /// The task's scratch workspace.
    pub fn workspace(&self, id: &str) -> PathBuf {
        self.k.home().join("kanban").join("workspaces").join(id)
    }

    /// Makes the next spawn of `id` fail (the original's `spawn_fn` that raises): a file where
    /// its workspace folder must be created.
    pub fn break_spawn(&self, id: &str) {
        let ws = self.workspace(id);
        std::fs::create_dir_all(ws.parent().unwrap()).unwrap();
        std::fs::write(ws, "not a folder").unwrap();
    }

    pub fn mend_spawn(&self, id: &str) {
        std::fs::remove_file(self.workspace(id)).unwrap();
    }

    /// The prompt the `capture` profile's agent was given for `id` (kept in the home: the
    /// scratch workspace is removed when the task completes).
    pub fn prompt(&self, id: &str) -> String {
        std::fs::read_to_string(self.k.home().join("prompts").join(format!("{id}.txt")))
            .unwrap_or_else(|e| panic!("no prompt captured for {id}: {e}"))
    }

    /// `kanban dispatch --until-idle` with a deadline.
    pub fn until_idle(&self) -> Run {
        let child = self
            .k
            .cmd()
            .args(["dispatch", "--until-idle"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait(child, Duration::from_secs(60)).into()
    }

    /// Polls `cond` every 20 ms until it holds, failing after `limit`.
    pub fn wait_for(&self, what: &str, limit: Duration, cond: impl Fn(&Home) -> bool) {
        let deadline = Instant::now() + limit;
        while !cond(self) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Waits for a child's output, killing it and failing after `limit`.
pub fn wait(mut child: Child, limit: Duration) -> std::process::Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "timed out after {limit:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A live process standing in for a worker (`sleep`, leading its own process group, so
/// terminating "the worker's group" touches nothing else); killed and reaped on drop.
pub struct Sleeper(pub Child);

impl Sleeper {
    pub fn start() -> Sleeper {
        use std::os::unix::process::CommandExt;
        let child = Command::new("sleep")
            .arg("600")
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Sleeper(child)
    }

    pub fn pid(&self) -> i64 {
        i64::from(self.0.id())
    }

    /// Whether it has exited (reaps it when it has).
    pub fn exited(&mut self) -> bool {
        self.0.try_wait().unwrap().is_some()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits up to `limit` for `child` to exit, then kills it.
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A `kanban dispatch` daemon, stopped with SIGTERM and waited for on drop.
pub struct Daemon(pub Child);

impl Home {
    /// Starts `kanban dispatch --interval 0.05` (output discarded).
    pub fn daemon(&self) -> Daemon {
        let child = self
            .k
            .cmd()
            .args(["dispatch", "--interval", "0.05"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Daemon(child)
    }
}

impl Daemon {
    /// SIGTERM, then the exit status (killed after 10 s).
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        wait_exit(&mut self.0, Duration::from_secs(10))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            self.stop();
        }
    }
}

/// Whether `pid` is a live (not zombie) process.
pub fn alive(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|s| s != "Z" && s != "X")
    })
}

impl Home {
    /// `kanban ARGS…` with the variables `env` added (a worker's identity, a board selection),
    /// as the original's tests `monkeypatch.setenv` before a call.
    pub fn run_env(&self, env: &[(&str, &str)], args: &[&str]) -> Run {
        let mut cmd = self.k.cmd();
        for (key, value) in env {
            cmd.env(key, value);
        }
        cmd.args(args).output().unwrap().into()
    }

    /// Stages the original's "running claim outside the dispatcher" with SQL: the task running
    /// under `lock` with worker pid `pid` and a claim an hour ahead, and its open run.
    pub fn stage_running(&self, id: &str, lock: &str, pid: i64) {
        let (at, expires) = (now(), now() + 3600);
        self.sql(&format!(
            "INSERT INTO task_runs (task_id, status, claim_lock, claim_expires, worker_pid, started_at)
              VALUES ('{id}', 'running', '{lock}', {expires}, {pid}, {at});
             UPDATE tasks SET status = 'running', claim_lock = '{lock}', claim_expires = {expires},
              worker_pid = {pid}, started_at = {at}, current_run_id = last_insert_rowid()
              WHERE id = '{id}';"
        ));
    }
}
