//! Host-local process facts: is a worker pid alive, is it still the process we spawned, and how to
//! stop it. Linux `/proc` only; every decision here is about processes on *this* host.
//!
//! A worker is identified by its pid **and** a fingerprint `"<boot id>|<process start time>"`
//! (`/proc/sys/kernel/random/boot_id`, field 22 of `/proc/<pid>/stat`). A pid whose fingerprint no
//! longer matches has been recycled by an unrelated process: it is reported dead and is never
//! signalled. A zombie (`State: Z`) is dead. This module never touches the board and never starts a
//! process; it only reads `/proc` and sends signals.

use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use serde::{Deserialize, Serialize};

/// What a stored fingerprint means when nothing could be read at spawn time.
pub(crate) const UNVERIFIED: &str = "unverified";

/// The boot id of this host (changes on every reboot), or `None` when `/proc` is unavailable.
/// Read once per process (a process never outlives its boot): a dispatcher asks it of every
/// running worker's fingerprint at every tick.
pub(crate) fn boot_id() -> Option<String> {
    static BOOT_ID: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    BOOT_ID
        .get_or_init(|| {
            std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        })
        .clone()
}

/// The fields of `/proc/<pid>/stat` after the command name: (state, start time in clock ticks).
pub(crate) fn stat_of(pid: i32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself contain ')' or spaces: cut after the last.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // `rest` starts at field 3 (state); the start time is field 22, i.e. 19 fields further on.
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// When this host booted, in epoch seconds (`btime` of `/proc/stat`).
fn boot_time() -> Option<i64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// When process `pid` started, in epoch seconds (whole seconds; `None` when unreadable). A claim
/// older than its claimer's process was not made by that process: the pid was recycled.
pub fn started_at(pid: i64) -> Option<i64> {
    let pid = i32::try_from(pid).ok().filter(|p| *p > 0)?;
    let (_, ticks) = stat_of(pid)?;
    let hz = rustix::param::clock_ticks_per_second().max(1);
    Some(boot_time()? + i64::try_from(ticks / hz).ok()?)
}

/// The fingerprint of a live process, `"<boot id>|<start time>"`; `None` if it cannot be read.
pub fn fingerprint(pid: i32) -> Option<String> {
    let (state, start) = stat_of(pid)?;
    if state == 'Z' || state == 'X' {
        return None;
    }
    Some(format!("{}|{start}", boot_id()?))
}

/// What we know about a recorded worker pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// Running (not a zombie) and the fingerprint matches (or none was recorded).
    Alive,
    /// No such process, or a zombie.
    Dead,
    /// A live process holds the pid but it is not ours: treat as dead, never signal it.
    Recycled,
    /// Alive, but spawned without a readable fingerprint: alive for safety, never signalled.
    Unverified,
}

impl Liveness {
    /// Whether our worker may still be running (the claim must not be released).
    pub fn may_be_running(self) -> bool {
        matches!(self, Liveness::Alive | Liveness::Unverified)
    }
}

/// Liveness of `pid` given the fingerprint recorded at spawn (`None` = legacy row, trust the pid).
pub fn liveness(pid: i64, recorded: Option<&str>) -> Liveness {
    let Ok(pid) = i32::try_from(pid) else {
        return Liveness::Dead;
    };
    if pid <= 0 {
        return Liveness::Dead;
    }
    let Some((state, start)) = stat_of(pid) else {
        return Liveness::Dead;
    };
    if state == 'Z' || state == 'X' {
        return Liveness::Dead;
    }
    match recorded {
        None => Liveness::Alive,
        Some(UNVERIFIED) => Liveness::Unverified,
        Some(fp) => match boot_id() {
            Some(boot) if fp == format!("{boot}|{start}") => Liveness::Alive,
            _ => Liveness::Recycled,
        },
    }
}

/// What an attempt to stop a worker did (the `termination` payload of reclaim events).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Termination {
    pub prev_pid: Option<i64>,
    pub host_local: bool,
    pub termination_attempted: bool,
    /// The worker is gone (or was never ours to begin with).
    pub terminated: bool,
    pub sigkill: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub signal_refused: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pid_recycled: bool,
}

impl Termination {
    /// Our own worker is still running after we tried: the claim must not be released.
    pub fn survived(&self) -> bool {
        self.host_local && (self.termination_attempted || self.signal_refused) && !self.terminated
    }
}

/// How long [`terminate`] waits after SIGTERM, and after SIGKILL, for the worker to go away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillWait {
    pub after_term: Duration,
    pub after_kill: Duration,
}

impl Default for KillWait {
    fn default() -> Self {
        Self {
            after_term: Duration::from_secs(5),
            after_kill: Duration::from_secs(2),
        }
    }
}

/// Sends `signal` to the worker's process group (the worker leads its own group, so its agent's
/// children go with it), falling back to the single process.
fn signal_group(pid: Pid, signal: Signal) -> bool {
    match rustix::process::kill_process_group(pid, signal) {
        Ok(()) => true,
        Err(_) => rustix::process::kill_process(pid, signal).is_ok(),
    }
}

/// Polls until `pid` is no longer our live worker, or `wait` passes; `reap` is called between polls
/// so that a child of this process does not linger as a zombie.
fn wait_gone(pid: i64, fp: Option<&str>, wait: Duration, reap: &mut dyn FnMut()) -> bool {
    let deadline = Instant::now() + wait;
    loop {
        reap();
        if !liveness(pid, fp).may_be_running() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Stops a host-local worker: SIGTERM to its group, wait, SIGKILL, wait. Never signals a recycled
/// pid or one without a verifiable fingerprint. `reap` lets the caller collect its own children.
pub(crate) fn terminate(
    pid: i64,
    fp: Option<&str>,
    wait: KillWait,
    reap: &mut dyn FnMut(),
) -> Termination {
    let mut report = Termination {
        prev_pid: Some(pid),
        host_local: true,
        ..Termination::default()
    };
    match liveness(pid, fp) {
        Liveness::Dead => {
            report.terminated = true;
            return report;
        }
        Liveness::Recycled => {
            report.terminated = true;
            report.pid_recycled = true;
            return report;
        }
        Liveness::Unverified => {
            report.signal_refused = true;
            return report;
        }
        Liveness::Alive => {}
    }
    let Some(raw) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        report.terminated = true;
        return report;
    };
    report.termination_attempted = true;
    if !signal_group(raw, Signal::TERM) {
        report.terminated = !liveness(pid, fp).may_be_running();
        return report;
    }
    if wait_gone(pid, fp, wait.after_term, reap) {
        report.terminated = true;
        return report;
    }
    // Re-check the fingerprint right before the hard kill: never SIGKILL a recycled pid.
    if liveness(pid, fp) == Liveness::Alive {
        report.sigkill = signal_group(raw, Signal::KILL);
    }
    report.terminated = wait_gone(pid, fp, wait.after_kill, reap);
    report
}

/// Kills what is left of a dead worker's process group (its agent's children, which lead no group
/// of their own). Only when no process `pid` exists (or it is a zombie): Linux never hands out a
/// pid that is still a process group's id, so group `pid` can then only hold the old worker's
/// descendants. Returns whether a signal was delivered.
pub(crate) fn kill_leftover_group(pid: i64) -> bool {
    if liveness(pid, None) != Liveness::Dead {
        return false;
    }
    let Some(raw) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    rustix::process::kill_process_group(raw, Signal::KILL).is_ok()
}

/// Whether process group `pid` still has a running member. Used after the group's leader is gone:
/// Linux never hands out a pid that is still a group's id, so a group `pid` without a process
/// `pid` can only hold the old worker's descendants. Zombies do not count: an orphaned worker
/// whose new parent does not reap it (pid 1 of a container may not) stays a zombie in its group
/// forever, and it runs nothing.
pub(crate) fn group_exists(pid: i64) -> bool {
    let Some(raw) = i32::try_from(pid)
        .ok()
        .filter(|p| *p > 0)
        .and_then(Pid::from_raw)
    else {
        return false;
    };
    let signalled = match rustix::process::test_kill_process_group(raw) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    };
    // The signal test counts zombies; confirm with a live (not zombie) member in /proc.
    signalled && group_has_live_member(raw.as_raw_nonzero().get())
}

/// Whether any process in `/proc` belongs to group `pgid` and is not a zombie.
fn group_has_live_member(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        // Without /proc, trust the signal test.
        return true;
    };
    entries.flatten().any(|entry| {
        entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
            .and_then(group_and_state)
            .is_some_and(|(group, state)| group == pgid && state != 'Z' && state != 'X')
    })
}

/// The process group and state of `pid` (fields 5 and 3 of `/proc/<pid>/stat`).
fn group_and_state(pid: i32) -> Option<(i32, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let group = fields.next()?.parse().ok()?;
    Some((group, state))
}

/// The pid in a claim lock `"<hostname>:<pid>"` when the lock was written on this host.
pub fn claimer_pid(lock: &str, host_prefix: &str) -> Option<i64> {
    lock.strip_prefix(host_prefix)?
        .parse::<i64>()
        .ok()
        .filter(|p| *p > 0)
}

/// `"<hostname>:<pid>"` of this process: the claim lock a dispatcher writes and the prefix that
/// makes a claim host-local.
pub(crate) fn claimer_id() -> String {
    format!(
        "{}{}",
        host_prefix(),
        rustix::process::getpid().as_raw_nonzero()
    )
}

/// `"<hostname>:"`: claims whose lock starts with it belong to this host.
pub fn host_prefix() -> String {
    let uname = rustix::system::uname();
    let host = uname.nodename().to_string_lossy();
    let host = if host.is_empty() {
        "unknown".into()
    } else {
        host
    };
    format!("{host}:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_with_its_fingerprint() {
        let pid = i64::from(std::process::id());
        let fp = fingerprint(pid as i32).unwrap();
        assert!(fp.contains('|'), "{fp}");
        assert_eq!(liveness(pid, Some(&fp)), Liveness::Alive);
        assert_eq!(liveness(pid, None), Liveness::Alive);
        assert_eq!(liveness(pid, Some(UNVERIFIED)), Liveness::Unverified);
    }

    #[test]
    fn a_different_fingerprint_means_recycled_and_is_never_signalled() {
        let pid = i64::from(std::process::id());
        assert_eq!(liveness(pid, Some("other-boot|1")), Liveness::Recycled);
        let report = terminate(pid, Some("other-boot|1"), KillWait::default(), &mut || {});
        assert!(report.pid_recycled && report.terminated && !report.termination_attempted);
        // We are still here: nothing was signalled.
    }

    #[test]
    fn our_own_start_is_in_the_past_and_after_boot() {
        let me = i64::from(std::process::id());
        let started = started_at(me).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!(started <= now + 1, "{started} > {now}");
        assert!(started >= boot_time().unwrap());
        assert_eq!(started_at(0), None);
        assert_eq!(started_at(i64::MAX), None);
    }

    #[test]
    fn nonexistent_and_nonpositive_pids_are_dead() {
        assert_eq!(liveness(0, None), Liveness::Dead);
        assert_eq!(liveness(-5, None), Liveness::Dead);
        assert_eq!(liveness(i64::from(i32::MAX), None), Liveness::Dead);
        assert_eq!(liveness(i64::MAX, None), Liveness::Dead);
    }

    #[test]
    fn a_child_ignoring_sigterm_is_killed_after_the_wait() {
        use std::os::unix::process::CommandExt as _;
        #[allow(clippy::disallowed_methods, clippy::disallowed_types)]
        // test code drives a real process
        let mut child = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM; echo ready; exec sleep 30"])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        // Wait until the trap is installed (the shell printed `ready`).
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let pid = i64::from(child.id());
        let fp = fingerprint(child.id() as i32).unwrap();
        assert_eq!(liveness(pid, Some(&fp)), Liveness::Alive);
        let wait = KillWait {
            after_term: Duration::from_millis(300),
            after_kill: Duration::from_secs(5),
        };
        let mut reap = || {
            let _ = child.try_wait();
        };
        let report = terminate(pid, Some(&fp), wait, &mut reap);
        assert!(
            report.termination_attempted && report.sigkill && report.terminated,
            "{report:?}"
        );
        assert!(!report.survived());
        assert!(!liveness(pid, Some(&fp)).may_be_running());
    }

    #[test]
    fn claimer_id_is_host_colon_pid() {
        let id = claimer_id();
        assert!(id.starts_with(&host_prefix()));
        assert!(id.ends_with(&format!(":{}", std::process::id())));
        assert_eq!(
            claimer_pid(&id, &host_prefix()),
            Some(i64::from(std::process::id()))
        );
        assert_eq!(claimer_pid(&id, "elsewhere:"), None);
        assert_eq!(claimer_pid("h:abc", "h:"), None);
        assert_eq!(claimer_pid("h:0", "h:"), None);
    }

    #[test]
    fn a_group_exists_while_its_leader_runs() {
        use std::os::unix::process::CommandExt as _;
        #[allow(clippy::disallowed_methods, clippy::disallowed_types)]
        // test code drives a real process
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = i64::from(child.id());
        assert!(group_exists(pid));
        child.kill().unwrap();
        // Killed but not reaped yet: a zombie, which runs nothing, so the group counts as gone.
        while liveness(pid, None) != Liveness::Dead {
            std::thread::yield_now();
        }
        assert!(!group_exists(pid));
        child.wait().unwrap();
        assert!(!group_exists(pid));
        assert!(!group_exists(-3));
    }

    #[test]
    fn survived_needs_an_attempt_and_a_live_worker() {
        let mut t = Termination {
            host_local: true,
            termination_attempted: true,
            ..Termination::default()
        };
        assert!(t.survived());
        t.terminated = true;
        assert!(!t.survived());
        let refused = Termination {
            host_local: true,
            signal_refused: true,
            ..Termination::default()
        };
        assert!(refused.survived());
    }
}
