//! Running ticks: [`run_tick`] (one tick under the board's tick lock) and [`run`] (the daemon and
//! `--until-idle` loop).
//!
//! The loop wakes on three things: the board changed (`PRAGMA data_version` — another connection
//! committed: a new task, a completion, a heartbeat — polled every [`POLL`], or [`POLL_BUSY`]
//! while its own workers run), one of its children exited, or the interval passed (lease expiry,
//! cooldowns). Between wakes it sleeps, so an idle dispatcher costs one cheap pragma per poll. It stops on SIGTERM / SIGINT (its
//! workers keep running in their own process groups; the next dispatcher adopts them by pid).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::board::Board;
use crate::clock::Clock;

use super::lock::TickLock;
use super::settings::Settings;
use super::tick::{TickError, TickReport, tick};
use super::workers::Workers;

/// How often an idle loop (no worker of ours running) checks the board between ticks.
pub const POLL: Duration = Duration::from_millis(50);
/// How often the loop checks while workers of ours run (their exits free spawn slots).
pub const POLL_BUSY: Duration = Duration::from_millis(10);

/// One tick under the per-board lock; `skipped_locked` when another dispatcher is ticking.
pub fn run_tick(
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

/// Consecutive failed ticks after which the loop gives up and returns the last error.
pub const MAX_FAILED_TICKS: u32 = 20;

/// Runs ticks until `options.mode` says stop; `on_tick` sees every report (for printing) and
/// `on_error` every failed tick. A failed tick (a busy or briefly unreadable board) does not stop
/// the loop; [`MAX_FAILED_TICKS`] in a row do.
pub fn run(
    board: &mut Board,
    settings: &Settings,
    clock: &dyn Clock,
    workers: &mut dyn Workers,
    options: &LoopOptions,
    on_tick: &mut dyn FnMut(&Board, &TickReport),
    on_error: &mut dyn FnMut(&TickError),
) -> Result<(), TickError> {
    let mut failed = 0;
    loop {
        let report = match run_tick(board, settings, clock, workers) {
            Ok(report) => {
                failed = 0;
                report
            }
            Err(err) => {
                failed += 1;
                if failed >= MAX_FAILED_TICKS {
                    return Err(err);
                }
                on_error(&err);
                if options.stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                std::thread::sleep(options.interval.min(Duration::from_secs(1)));
                continue;
            }
        };
        on_tick(board, &report);
        if options.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if options.mode == Mode::UntilIdle && report.is_idle() && workers.children() == 0 {
            return Ok(());
        }
        // A tick that did something may have more to do right away (e.g. promoted children).
        if report.is_active() && !report.skipped_locked {
            continue;
        }
        let Ok(seen) = board.data_version() else {
            continue;
        };
        let children = workers.children();
        let deadline = Instant::now() + options.interval;
        // Under `--until-idle`, a cooldown or a lease may be what we wait for: tick at least
        // once a second.
        let deadline = match options.mode {
            Mode::UntilIdle => deadline.min(Instant::now() + Duration::from_secs(1)),
            Mode::Daemon => deadline,
        };
        loop {
            std::thread::sleep(if workers.children() > 0 {
                POLL_BUSY
            } else {
                POLL
            });
            if options.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            if Instant::now() >= deadline
                || board.data_version().map_or(true, |v| v != seen)
                || workers.children() != children
                || workers.poll_exited()
            {
                break;
            }
        }
    }
}
