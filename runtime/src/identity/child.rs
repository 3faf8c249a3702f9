//! The sanctioned builder of child processes: [`ChildCommand`], made by [`super::command`].
//!
//! It is not a `std::process::Command` and cannot become one. It records what the caller asks for
//! (program, arguments, working directory, stdio, extra variables) and decides what the child
//! inherits only **when it spawns**, from the ownership context current at that moment:
//!
//! * owned context: the child inherits the process environment (the worker's own tools act as the
//!   worker);
//! * any other context: every identity-bearing key of the process environment is removed by rule
//!   ([`super::is_identity_key`]: every `HERMES_KANBAN_*` key that is not explicitly safe to
//!   inherit, plus `HERMES_PROFILE`, `HERMES_SESSION_SOURCE`, `HERMES_TENANT`) and the
//!   delegated-child marker is set.
//!
//! So a command built at start-up and spawned later from a cron job is scrubbed: what counts is
//! the context it starts in, not the one it was built in.
//! There is no way to copy the parent's environment wholesale (`env_clear`, `envs(vars())`) or to
//! clear the marker: a variable set with [`ChildCommand::env`] that is identity-bearing or the
//! marker, or a removal of the marker, makes the spawn fail with [`std::io::ErrorKind::InvalidInput`]
//! before any process starts. Only `dispatch::default_spawn` grants identity (through
//! [`super::grant`]).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use super::{DELEGATED_CHILD_MARKER, is_identity_key};

/// How often [`ChildCommand::output_within`] looks whether its child ended.
const OUTPUT_POLL: Duration = Duration::from_millis(10);

/// A child process to start; see the module docs. Made by [`super::command`].
#[derive(Debug)]
pub struct ChildCommand {
    program: OsString,
    args: Vec<OsString>,
    /// Variables set (`Some`) or removed (`None`) by the caller, in order.
    env: Vec<(OsString, Option<OsString>)>,
    cwd: Option<PathBuf>,
    stdin: Option<Stdio>,
    stdout: Option<Stdio>,
    stderr: Option<Stdio>,
    process_group: Option<i32>,
}

impl ChildCommand {
    pub(super) fn new(program: &OsStr) -> Self {
        ChildCommand {
            program: program.to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            stdin: None,
            stdout: None,
            stderr: None,
            process_group: None,
        }
    }

    /// Adds an argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for arg in args {
            self.arg(arg);
        }
        self
    }

    /// Sets a variable for the child. An identity-bearing key or the marker makes the spawn fail.
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    /// Sets several variables (as [`ChildCommand::env`] each).
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self.env(k, v);
        }
        self
    }

    /// Removes a variable from the child's environment. Removing the marker makes the spawn fail.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Self {
        self.env.push((key.as_ref().to_owned(), None));
        self
    }

    /// The child's working directory.
    pub fn current_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cwd = Some(dir.into());
        self
    }

    pub fn stdin(&mut self, cfg: impl Into<Stdio>) -> &mut Self {
        self.stdin = Some(cfg.into());
        self
    }

    pub fn stdout(&mut self, cfg: impl Into<Stdio>) -> &mut Self {
        self.stdout = Some(cfg.into());
        self
    }

    pub fn stderr(&mut self, cfg: impl Into<Stdio>) -> &mut Self {
        self.stderr = Some(cfg.into());
        self
    }

    /// Starts the child in process group `pgroup` (0: a new group led by the child).
    pub fn process_group(&mut self, pgroup: i32) -> &mut Self {
        self.process_group = Some(pgroup);
        self
    }

    /// The program to run.
    pub fn get_program(&self) -> &OsStr {
        &self.program
    }

    /// What the child's environment would differ from this process's by if it spawned **now**:
    /// `(key, Some(value))` set, `(key, None)` removed, sorted by key. Fails as
    /// [`ChildCommand::spawn`] would (an identity key or the marker asked for by the caller).
    pub fn planned_env(&self) -> std::io::Result<Vec<(OsString, Option<OsString>)>> {
        let mut plan: std::collections::BTreeMap<OsString, Option<OsString>> =
            std::collections::BTreeMap::new();
        for (key, value) in &self.env {
            refuse(key, value.is_some())?;
            plan.insert(key.clone(), value.clone());
        }
        if !super::is_dispatcher_owned_worker_context() {
            for key in super::process_identity_keys() {
                plan.insert(key, None);
            }
            plan.insert(DELEGATED_CHILD_MARKER.into(), Some("1".into()));
        }
        Ok(plan.into_iter().collect())
    }

    /// Starts the child, judging its environment in the current context (see the module docs).
    pub fn spawn(&mut self) -> std::io::Result<Child> {
        let mut cmd = self.build()?;
        spawn_unless_busy(&mut cmd)
    }

    /// Starts the child, waits for it and collects its output (stdout and stderr piped unless set).
    pub fn output(&mut self) -> std::io::Result<Output> {
        self.build()?.output()
    }

    /// Starts the child and waits for it.
    pub fn status(&mut self) -> std::io::Result<ExitStatus> {
        self.build()?.status()
    }

    /// Runs the child to its end within `timeout`, `input` on its standard input, its standard
    /// output and error captured. Input and output go through anonymous memory files, so neither
    /// side ever blocks on a full pipe. A child still running at `timeout` is killed, its
    /// process group too when it leads one ([`ChildCommand::process_group`] `0`), and the
    /// result is an error of kind [`std::io::ErrorKind::TimedOut`].
    pub fn output_within(&mut self, input: &[u8], timeout: Duration) -> std::io::Result<Output> {
        use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
        let memory = |name: &str| -> std::io::Result<File> {
            let fd = rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)?;
            Ok(File::from(fd))
        };
        let mut stdin = memory("kanban-child-in")?;
        stdin.write_all(input)?;
        stdin.seek(SeekFrom::Start(0))?;
        let (mut out, mut err) = (memory("kanban-child-out")?, memory("kanban-child-err")?);
        self.stdin(stdin)
            .stdout(out.try_clone()?)
            .stderr(err.try_clone()?);
        let leads_group = self.process_group == Some(0);
        let mut child = self.spawn()?;
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if Instant::now() >= deadline {
                if leads_group && let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32)
                {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                }
                let _ = child.kill();
                let _ = child.wait();
                return Err(std::io::ErrorKind::TimedOut.into());
            }
            std::thread::sleep(OUTPUT_POLL);
        };
        let read = |file: &mut File| -> std::io::Result<Vec<u8>> {
            let mut bytes = Vec::new();
            file.seek(SeekFrom::Start(0))?;
            file.read_to_end(&mut bytes)?;
            Ok(bytes)
        };
        Ok(Output {
            status,
            stdout: read(&mut out)?,
            stderr: read(&mut err)?,
        })
    }

    /// The `std::process::Command` this spawn runs: built, used and dropped inside this module.
    #[allow(clippy::disallowed_methods, clippy::disallowed_types)] // the sanctioned builder
    fn build(&mut self) -> std::io::Result<std::process::Command> {
        use std::os::unix::process::CommandExt as _;
        let plan = self.planned_env()?;
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args);
        for (key, value) in plan {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        if let Some(s) = self.stdin.take() {
            cmd.stdin(s);
        }
        if let Some(s) = self.stdout.take() {
            cmd.stdout(s);
        }
        if let Some(s) = self.stderr.take() {
            cmd.stderr(s);
        }
        if let Some(group) = self.process_group {
            cmd.process_group(group);
        }
        Ok(cmd)
    }
}

/// How often, and how long apart, a start refused because the program is open for writing is
/// tried again ([`spawn_unless_busy`]).
const BUSY_TRIES: u32 = 20;
const BUSY_PAUSE: Duration = Duration::from_millis(5);

/// Starts `cmd`, trying again for up to 100 ms while the kernel refuses it with `ETXTBSY` (the
/// program's file is open for writing). A script written just before it is run can still be
/// open in another thread's child between its `fork` and its `exec`, which closes the
/// inherited copy a moment later; any other failure is returned at once.
#[allow(clippy::disallowed_types)] // the command `build` made, started by the sanctioned builder
fn spawn_unless_busy(cmd: &mut std::process::Command) -> std::io::Result<Child> {
    let mut tries = 1;
    loop {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < BUSY_TRIES => {
                tries += 1;
                std::thread::sleep(BUSY_PAUSE);
            }
            other => return other,
        }
    }
}

/// Refuses a caller's attempt to set an identity key or to set or remove the marker.
fn refuse(key: &OsStr, set: bool) -> std::io::Result<()> {
    let name = key.to_string_lossy();
    let why = if key == DELEGATED_CHILD_MARKER {
        format!(
            "`{name}` is the delegated-child marker: only the ownership context decides whether a \
             child carries it"
        )
    } else if set && is_identity_key(key) {
        format!(
            "`{name}` is an identity-bearing key: only `dispatch::default_spawn` grants worker \
             identity to a child"
        )
    } else {
        return Ok(());
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("refused to start a child process: {why}; nothing was started"),
    ))
}
