//! Running ticks: [`run_tick`] (one tick under the board's tick lock) and [`run`] (the daemon and
//! `--until-idle` loop).
//!
//! The loop wakes on three things ([`wait_for_work`]): the board changed (another connection
//! committed: a new task, a completion, a heartbeat — announced by the board's file watch,
//! [`crate::board::Board::watch_changes`], and confirmed by `PRAGMA data_version`, which is also
//! read every [`FALLBACK_POLL`] as a fallback, or every [`POLL`] when no file watch could be set
//! up), one of its children exited (looked at every [`POLL_BUSY`] while they run), or the
//! interval passed (lease expiry, cooldowns). Between wakes it blocks in `poll(2)`, so an idle
//! dispatcher costs one cheap pragma per fallback read. It stops on SIGTERM / SIGINT (its
//! workers keep running in their own process groups; the next dispatcher adopts them by pid).
//!
//! A failed tick (a full disk, a board locked by another writer, a read-only file system) never
//! stops the daemon: it retries with a capped exponential backoff ([`backoff`]: 250 ms doubling
//! to [`MAX_BACKOFF`](crate::proc::backoff::MAX_BACKOFF)) and reports its health once per change — [`Health::Failing`] when ticks
//! start failing (or fail differently), [`Health::Recovered`] when one succeeds again — so a
//! long outage is one line, not one per tick, and the daemon resumes by itself (a PostgreSQL
//! board whose connection ended — a server restart, a network cut — is opened again after the
//! backoff, [`Board::connection_lost`]). Only
//! `--until-idle` (a script waiting for an answer) gives up, after [`MAX_FAILED_TICKS`] in a row.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::board::{Board, ChangeWatch, OpenOptions, Wake};
use crate::clock::Clock;
use crate::proc::backoff::{Streak, backoff};

use super::hooks::Hooks;
use super::settings::Settings;
use super::tick::{TickError, TickReport, tick};
use super::workers::Workers;
use crate::home::lock::TickLock;

/// How often an idle loop (no worker of ours running) reads the board's change counter between
/// ticks when no file watch announces commits.
pub const POLL: Duration = Duration::from_millis(50);
/// How often the loop reads the change counter when a file watch announces commits: a fallback
/// for what the watch cannot see (a writer on another host of a network file system).
pub(crate) const FALLBACK_POLL: Duration = Duration::from_millis(500);
/// How often the loop checks while workers of ours run (their exits free spawn slots).
pub(crate) const POLL_BUSY: Duration = Duration::from_millis(10);

/// One tick under the per-board lock; `skipped_locked` when another dispatcher is ticking.
pub(crate) fn run_tick(
    board: &mut Board,
    settings: &Settings,
    clock: &dyn Clock,
    workers: &mut dyn Workers,
) -> Result<TickReport, TickError> {
    let Some(_lock) = TickLock::try_acquire(&settings.location.db_path)? else {
        return Ok(TickReport {
            skipped_locked: true,
            dry_run: settings.dry_run,
            ..TickReport::default()
        });
    };
    tick(board, settings, clock, workers)
}

/// When the loop stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Until a signal.
    Daemon,
    /// Until a tick finds nothing ready, running or claimable.
    UntilIdle,
}

/// Options of [`run`].
#[derive(Debug, Clone)]
pub struct LoopOptions {
    pub mode: Mode,
    /// Seconds between ticks when nothing wakes the loop earlier.
    pub interval: Duration,
    /// Set by a signal handler (or a test) to stop the loop after the current tick.
    pub stop: Arc<AtomicBool>,
}

/// Consecutive failed ticks after which `--until-idle` gives up and returns the last error (the
/// daemon never does).
pub(crate) const MAX_FAILED_TICKS: u32 = 20;

/// A change in the loop's health, reported once per change.
#[derive(Debug)]
pub enum Health<'a> {
    /// Ticks started failing, or now fail with a different error; the loop retries after `retry_in`.
    Failing {
        error: &'a TickError,
        failed_ticks: u32,
        retry_in: Duration,
    },
    /// A tick succeeded after `failed_ticks` failures in a row.
    Recovered { failed_ticks: u32 },
}

/// Sleeps `total`, waking early (returning `true`) when `stop` is set.
fn sleep_unless_stopped(total: Duration, stop: &AtomicBool) -> bool {
    let deadline = Instant::now() + total;
    loop {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(left.min(POLL));
    }
}

/// Runs ticks until `options.mode` says stop; `on_tick` sees every report (for printing) and
/// `on_health` every change of health (see the module doc). A failed tick never stops the
/// daemon; under `--until-idle`, [`MAX_FAILED_TICKS`] in a row do. The loop records its ticks
/// on the board (`board::ticks`) and, when it ends, that it stopped.
pub fn run(
    board: &mut Board,
    settings: &Settings,
    clock: &dyn Clock,
    workers: &mut dyn Workers,
    options: &LoopOptions,
    on_tick: &mut dyn FnMut(&Board, &TickReport),
    on_health: &mut dyn FnMut(Health<'_>),
) -> Result<(), TickError> {
    let dispatcher = crate::proc::process::claimer_id();
    let result = run_loop(
        board,
        settings,
        clock,
        workers,
        options,
        on_tick,
        on_health,
        &dispatcher,
    );
    // Best effort: a board that cannot be written keeps the last tick, which goes stale.
    if board.records_ticks() {
        let _ = board.record_stop(&dispatcher, clock.now());
    }
    result
}

#[allow(clippy::too_many_arguments)]
fn run_loop(
    board: &mut Board,
    settings: &Settings,
    clock: &dyn Clock,
    workers: &mut dyn Workers,
    options: &LoopOptions,
    on_tick: &mut dyn FnMut(&Board, &TickReport),
    on_health: &mut dyn FnMut(Health<'_>),
    dispatcher: &str,
) -> Result<(), TickError> {
    let mut streak = Streak::default();
    let mut watch = board.watch_changes();
    let mut hooks = Hooks::new(settings.hooks.clone(), board.last_event_id().unwrap_or(0));
    let mut auto_decompose = super::decompose::AutoDecompose::new(settings);
    let interval_seconds = i64::try_from(options.interval.as_secs()).unwrap_or(i64::MAX);
    let mut recorded_at: Option<i64> = None;
    // A board of the original adopted in place has no table for them (`Board::records_ticks`).
    let records = board.records_ticks();
    loop {
        // What other connections committed before this tick is seen by it; a commit during the
        // tick wakes the wait after it at once.
        let _ = watch.mark_seen(board);
        let report = match run_tick(board, settings, clock, workers) {
            Ok(mut report) => {
                report.hooks_failed = hooks
                    .pump(board)
                    .into_iter()
                    .filter(|h| h.failure.is_some())
                    .collect();
                if let Some(auto) = auto_decompose.as_mut()
                    && !settings.dry_run
                {
                    report.auto_decomposed = auto.pump(board);
                }
                if let Some(failed_ticks) = streak.succeeded() {
                    on_health(Health::Recovered { failed_ticks });
                }
                // The board's record that this dispatcher runs (board::ticks), at most once per
                // RECORD_EVERY; best effort: a board that refuses it still gets its ticks.
                let now = clock.now();
                if records
                    && recorded_at.is_none_or(|at| now - at >= crate::board::ticks::RECORD_EVERY)
                    && board.record_tick(dispatcher, interval_seconds, now).is_ok()
                {
                    recorded_at = Some(now);
                }
                report
            }
            Err(err) => {
                let (failed, new) = streak.failed(crate::error_chain(&err));
                if options.mode == Mode::UntilIdle && failed >= MAX_FAILED_TICKS {
                    return Err(err);
                }
                // A script waiting on `--until-idle` gets its answer within ~20 s.
                let retry_in = match options.mode {
                    Mode::Daemon => backoff(failed),
                    Mode::UntilIdle => backoff(failed).min(Duration::from_secs(1)),
                };
                if new {
                    on_health(Health::Failing {
                        error: &err,
                        failed_ticks: failed,
                        retry_in,
                    });
                }
                // Our own children still exit while the board is unwritable: collect them so
                // they do not linger as zombies (their exits are remembered for the crash sweep).
                workers.poll_exited();
                if sleep_unless_stopped(retry_in, &options.stop) {
                    return Ok(());
                }
                // A PostgreSQL board whose connection ended (a server restart, a network cut)
                // is opened again; until that works the next tick fails the same way.
                if board.connection_lost()
                    && let Ok(fresh) = Board::open(&settings.location, &OpenOptions::default())
                {
                    *board = fresh;
                    watch = board.watch_changes();
                }
                continue;
            }
        };
        on_tick(board, &report);
        if options.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        // `--until-idle` ends once every event it saw has started its hook (a backlog waits for
        // a free hook slot; hooks still running are left to finish on their own).
        if options.mode == Mode::UntilIdle
            && report.is_idle()
            && workers.children() == 0
            && !hooks.backlogged()
            && !auto_decompose
                .as_ref()
                .is_some_and(|a| !settings.dry_run && a.busy(board))
        {
            return Ok(());
        }
        // A tick that did something may have more to do right away (e.g. promoted children).
        if report.is_active() && !report.skipped_locked {
            continue;
        }
        let deadline = Instant::now() + options.interval;
        // A scheduled task due before the interval ends is woken at its time, not an interval
        // later (an unreadable board leaves it to the next tick, which reports the error).
        let deadline = match board.next_due() {
            Ok(Some(at)) if at > clock.now() => {
                let secs = u64::try_from(at - clock.now()).unwrap_or(0);
                deadline.min(Instant::now() + Duration::from_secs(secs))
            }
            _ => deadline,
        };
        // Under `--until-idle`, a cooldown or a lease may be what we wait for: tick at least
        // once a second.
        let deadline = match options.mode {
            Mode::UntilIdle => deadline.min(Instant::now() + Duration::from_secs(1)),
            Mode::Daemon => deadline,
        };
        if wait_for_work(
            board,
            &mut watch,
            workers,
            deadline,
            &options.stop,
            FALLBACK_POLL,
        ) == Woke::Stopped
        {
            return Ok(());
        }
    }
}

/// Why the loop's wait between two ticks ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// Another connection committed to the board (how the watch learnt it: notified or polled).
    Board(Wake),
    /// One of our workers exited.
    Worker,
    /// The interval passed.
    Interval,
    /// The stop flag was set.
    Stopped,
}

/// Waits between two ticks until the board changes (see [`ChangeWatch`]: a file watch wakes
/// the loop on another process's commit; `data_version` is read every `fallback_poll` all the
/// same, or every [`POLL`] when no file watch could be set up), one of our workers exits
/// (checked every [`POLL_BUSY`] while any runs), `deadline` passes or `stop` is set.
pub fn wait_for_work(
    board: &Board,
    watch: &mut ChangeWatch,
    workers: &mut dyn Workers,
    deadline: Instant,
    stop: &AtomicBool,
    fallback_poll: Duration,
) -> Woke {
    let children = workers.children();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Woke::Stopped;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Woke::Interval;
        }
        let poll = if watch.is_notifying() {
            fallback_poll
        } else {
            POLL
        };
        let slice = if workers.children() > 0 {
            POLL_BUSY.min(poll)
        } else {
            poll
        };
        match watch.wait(board, left.min(slice), poll) {
            Ok(wake) if wake.changed() => return Woke::Board(wake),
            Ok(_) => {}
            // Unreadable: tick, and let the tick report the error.
            Err(_) => return Woke::Board(Wake::Polled),
        }
        if workers.children() != children || workers.poll_exited() {
            return Woke::Worker;
        }
    }
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Outer(&'static str, #[source] std::io::Error);

    #[test]
    fn an_error_chain_is_one_line_without_repeats() {
        let full = || std::io::Error::other("No space left on device");
        assert_eq!(
            crate::error_chain(&Outer("tick failed", full())),
            "tick failed: No space left on device"
        );
        // A message that already embeds its cause does not repeat it.
        assert_eq!(
            crate::error_chain(&Outer("tick failed: No space left on device", full())),
            "tick failed: No space left on device"
        );
    }
}
