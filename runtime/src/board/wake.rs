//! Waking on a board change: [`Board::watch_changes`] gives a [`ChangeWatch`] whose
//! [`ChangeWatch::wait`] returns as soon as another connection (any process: the dispatcher's
//! workers, `kanban` CLI calls, the original Python implementation) commits to the board, so the
//! dispatcher picks a new ready task up without waiting for a poll.
//!
//! docs/board.md ("Waking on another connection's commit") has the details.

use std::ffi::{OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::inotify;
use rustix::io::Errno;

use super::error::Result;
use super::store::Board;

/// The re-checks of `data_version` after a file event that showed no change yet (ms).
const SETTLE_MS: [u64; 7] = [1, 1, 2, 4, 8, 16, 32];

/// On PostgreSQL the change counter is bumped in the commit and the notice sent just after it,
/// so a read can see the new counter a moment before the notice arrives: how long a change
/// found by reading waits for its notice before it is called polled.
const NOTICE_GRACE: Duration = Duration::from_millis(5);

/// Why [`ChangeWatch::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Another connection committed, and the file watch said so.
    Notified,
    /// Another connection committed, found by the fallback read of `data_version`.
    Polled,
    /// Nothing was committed by another connection within the timeout (or a signal
    /// interrupted the wait: the caller checks its stop flag and waits again).
    TimedOut,
}

impl Wake {
    /// Whether the board changed.
    pub fn changed(self) -> bool {
        self != Wake::TimedOut
    }
}

/// Watches one board for commits of other connections; see the module documentation.
#[derive(Debug)]
pub struct ChangeWatch {
    /// `None`: no file watch could be set up; only the fallback poll remains.
    inotify: Option<OwnedFd>,
    /// A PostgreSQL board whose connection `LISTEN`s to the board's change channel (then
    /// `inotify` is `None`).
    listening: bool,
    /// The board file's name and its `-wal` and `-journal` companions.
    names: [OsString; 3],
    /// The `data_version` last reported (or marked) as seen.
    seen: Option<i64>,
    /// Re-checks left after a file event that showed no change yet.
    settle: usize,
    /// When the change counter was last read: a `LISTEN`ing watch reads it only every `poll`
    /// (or after a notice), not on every call (each read is a round trip to the server).
    last_read: Option<Instant>,
}

impl Board {
    /// Starts watching this board for commits of other connections. Never fails: without a file
    /// watch (no inotify, the limit of watches reached) it falls back to polling
    /// ([`ChangeWatch::is_notifying`] says which). The current state counts as seen.
    pub fn watch_changes(&self) -> ChangeWatch {
        if self.is_postgres() {
            return ChangeWatch {
                inotify: None,
                listening: self.conn().listen_changes().is_ok(),
                names: Default::default(),
                seen: self.data_version().ok(),
                settle: 0,
                last_read: Some(Instant::now()),
            };
        }
        let path = self.path();
        let file = path.file_name().map(OsString::from).unwrap_or_default();
        let with = |suffix: &str| {
            let mut name = file.clone();
            name.push(suffix);
            name
        };
        let names = [file.clone(), with("-wal"), with("-journal")];
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => std::path::Path::new("."),
        };
        let inotify = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
            .ok()
            .filter(|fd| {
                let mask = inotify::WatchFlags::MODIFY
                    | inotify::WatchFlags::CLOSE_WRITE
                    | inotify::WatchFlags::CREATE
                    | inotify::WatchFlags::DELETE
                    | inotify::WatchFlags::MOVED_TO;
                inotify::add_watch(fd, folder, mask).is_ok()
            });
        ChangeWatch {
            inotify,
            listening: false,
            names,
            seen: self.data_version().ok(),
            settle: 0,
            last_read: Some(Instant::now()),
        }
    }
}

impl ChangeWatch {
    /// Whether commits are announced by a file watch (else only the fallback poll sees them).
    pub fn is_notifying(&self) -> bool {
        self.inotify.is_some() || self.listening
    }

    /// Forgets that the connection `LISTEN`s, leaving only the fallback poll (for the test of
    /// that poll on PostgreSQL, `crate::test_support::stop_listening`).
    #[cfg(feature = "test-support")]
    pub(crate) fn stop_listening(&mut self) {
        self.listening = false;
    }

    /// Takes the board's current state as seen: the next [`ChangeWatch::wait`] reports only
    /// commits after this one (call it after acting on the board).
    pub fn mark_seen(&mut self, board: &Board) -> Result<()> {
        self.seen = Some(board.data_version()?);
        self.last_read = Some(Instant::now());
        Ok(())
    }

    /// Waits up to `timeout` for a commit of another connection since the last mark (or the
    /// last change reported), reading `data_version` at least every `poll`. Returns at once
    /// when such a commit happened meanwhile. The change it reports is then marked as seen.
    pub fn wait(&mut self, board: &Board, timeout: Duration, poll: Duration) -> Result<Wake> {
        let deadline = Instant::now() + timeout;
        // What the watch announced before this call counts as notified too.
        let mut notified = matches!(self.block(board, Duration::ZERO), Blocked::Event);
        if notified {
            self.settle = SETTLE_MS.len();
        }
        loop {
            // A `LISTEN`ing watch is told of every commit that gives a dispatcher work (the
            // board's locked writes notify); what it is not told of (a claim, a heartbeat, a
            // worker's registration) it finds by reading the counter every `poll`, not on each
            // of the caller's short waits, so a busy dispatcher does not query the server
            // every few milliseconds.
            let skip = match self.seen {
                Some(seen) if self.listening && !notified => self
                    .last_read
                    .is_some_and(|at| at.elapsed() < poll)
                    .then_some(seen),
                _ => None,
            };
            let version = match skip {
                Some(seen) => seen,
                None => {
                    self.last_read = Some(Instant::now());
                    board.data_version()?
                }
            };
            match self.seen {
                Some(seen) if seen == version => {}
                Some(_) => {
                    self.seen = Some(version);
                    self.settle = 0;
                    if !notified && self.listening {
                        notified = matches!(self.block(board, NOTICE_GRACE), Blocked::Event);
                    }
                    return Ok(if notified {
                        Wake::Notified
                    } else {
                        Wake::Polled
                    });
                }
                // The first read of a watch whose creation could not read the board.
                None => self.seen = Some(version),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Wake::TimedOut);
            }
            let slice = if self.settle > 0 {
                let step = SETTLE_MS[SETTLE_MS.len() - self.settle];
                self.settle -= 1;
                Duration::from_millis(step)
            } else {
                // Settled without a visible change: whatever the next read finds, the watch did
                // not announce it.
                notified = false;
                poll
            };
            match self.block(board, slice.min(left)) {
                Blocked::Event => {
                    notified = true;
                    self.settle = SETTLE_MS.len();
                }
                Blocked::Quiet => {}
                Blocked::Interrupted => return Ok(Wake::TimedOut),
            }
        }
    }

    /// Blocks up to `timeout` on the file watch or the board's `LISTEN` (sleeps without
    /// either); drains its events.
    fn block(&mut self, board: &Board, timeout: Duration) -> Blocked {
        if self.listening {
            return match board.conn().wait_change(timeout) {
                Ok(true) => Blocked::Event,
                Ok(false) => Blocked::Quiet,
                Err(_) => {
                    // A broken connection: the next read of `data_version` reports it.
                    self.listening = false;
                    Blocked::Quiet
                }
            };
        }
        let Some(fd) = &self.inotify else {
            std::thread::sleep(timeout);
            return Blocked::Quiet;
        };
        let ts = Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: timeout.subsec_nanos().into(),
        };
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(0) => return Blocked::Quiet,
            Ok(_) => {}
            Err(Errno::INTR) => return Blocked::Interrupted,
            Err(_) => {
                // A broken watch: drop it and keep the fallback poll.
                self.inotify = None;
                return Blocked::Quiet;
            }
        }
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(fd, &mut buf);
        let mut relevant = false;
        let mut broken = false;
        loop {
            match reader.next() {
                Ok(event) => {
                    let overflow = event.events().contains(inotify::ReadFlags::QUEUE_OVERFLOW);
                    let ours = event.file_name().is_some_and(|name| {
                        let name = OsStr::from_bytes(name.to_bytes());
                        self.names.iter().any(|n| n.as_os_str() == name)
                    });
                    relevant |= overflow || ours;
                }
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => return Blocked::Interrupted,
                Err(_) => {
                    broken = true;
                    break;
                }
            }
        }
        if broken {
            // A broken watch: drop it and keep the fallback poll.
            self.inotify = None;
        }
        if relevant {
            Blocked::Event
        } else {
            Blocked::Quiet
        }
    }
}

/// What one blocking step saw.
enum Blocked {
    /// An event about the board's files.
    Event,
    /// The timeout passed (or only other files changed).
    Quiet,
    /// A signal arrived.
    Interrupted,
}

#[cfg(test)]
/// Per store: SQLite's file watch and PostgreSQL's LISTEN, each with its own fallback poll. The
/// store-neutral wake-up is in `runtime/tests/conformance/`.
mod tests {
    use super::*;
    use crate::board::{NewTask, OpenOptions};

    const LONG: Duration = Duration::from_secs(120);

    fn two_connections() -> (tempfile::TempDir, Board, Board) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        let watcher = Board::open_path(&path, &OpenOptions::create()).unwrap();
        let writer = Board::open_path(&path, &OpenOptions::default()).unwrap();
        (dir, watcher, writer)
    }

    fn create(board: &Board, title: &str) {
        let new = NewTask {
            title: title.to_owned(),
            ..NewTask::default()
        };
        board.create_task(&new, 1_700_000_000).unwrap();
    }

    #[test]
    fn without_a_file_watch_the_fallback_poll_sees_the_commit() {
        let (_dir, watcher, writer) = two_connections();
        let mut watch = watcher.watch_changes();
        watch.inotify = None;
        assert!(!watch.is_notifying());
        create(&writer, "polled");
        // The poll interval is short, the timeout long: the first fallback read finds it.
        assert_eq!(
            watch
                .wait(&watcher, LONG, Duration::from_millis(1))
                .unwrap(),
            Wake::Polled
        );
        assert_eq!(
            watch.wait(&watcher, Duration::ZERO, LONG).unwrap(),
            Wake::TimedOut
        );
    }

    #[test]
    fn another_connection_s_commit_is_notified_and_a_marked_one_is_not_reported() {
        let (_dir, watcher, writer) = two_connections();
        let mut watch = watcher.watch_changes();
        assert!(watch.is_notifying());
        create(&writer, "first");
        assert_eq!(watch.wait(&watcher, LONG, LONG).unwrap(), Wake::Notified);
        create(&writer, "second");
        watch.mark_seen(&watcher).unwrap();
        // Its file events are still queued, but the change was marked as seen.
        assert_eq!(
            watch.wait(&watcher, Duration::ZERO, LONG).unwrap(),
            Wake::TimedOut
        );
    }

    #[test]
    fn events_of_other_files_in_the_folder_are_not_board_changes() {
        let (dir, watcher, _writer) = two_connections();
        let mut watch = watcher.watch_changes();
        std::fs::write(dir.path().join("kanban.toml"), "# not the board\n").unwrap();
        std::fs::write(dir.path().join("kanban.db-shm-like"), "x").unwrap();
        assert!(matches!(
            watch.block(&watcher, Duration::ZERO),
            Blocked::Quiet
        ));
        let journal = dir.path().join("kanban.db-journal");
        std::fs::write(&journal, "x").unwrap();
        assert!(matches!(
            watch.block(&watcher, Duration::ZERO),
            Blocked::Event
        ));
        std::fs::remove_file(journal).unwrap();
    }
}
