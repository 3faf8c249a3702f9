//! The dispatchers' recorded ticks (issue 30 item 2): each dispatcher loop writes its last tick
//! time into the board itself (table `kanban_dispatchers`, one row per dispatcher keyed by its
//! claim lock `"<host>:<pid>"`), so every reader of the board — on any host, SQLite or
//! PostgreSQL — can tell whether one is running: the web view's health, `/metrics`, and
//! `kanban create`'s warning. The loop records at most once per [`RECORD_EVERY`] (a write wakes
//! every other watcher of the board), so a row is at most that plus its loop's interval old
//! while its dispatcher runs ([`DispatcherTick::running`]).

use serde::Serialize;

use super::error::Result;
use super::store::Board;
use crate::db::{self, params};

/// How often a dispatcher loop records its tick at most (seconds).
pub const RECORD_EVERY: i64 = 30;

/// Rows older than this are deleted when a dispatcher records (a dispatcher long gone).
const FORGET_AFTER: i64 = 7 * 86_400;

/// One dispatcher's last recorded tick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DispatcherTick {
    /// Its claim lock, `"<host>:<pid>"`.
    pub dispatcher: String,
    pub last_tick_at: i64,
    /// Its loop's interval: the longest it waits between two ticks when nothing wakes it;
    /// [`STOPPED`] once its loop ended (its last tick stays recorded).
    pub interval_seconds: i64,
}

/// The `interval_seconds` of a dispatcher whose loop ended.
pub const STOPPED: i64 = -1;

impl DispatcherTick {
    /// True while the row is fresh enough that its dispatcher is running at `now`: within twice
    /// the longer of [`RECORD_EVERY`] and its interval (a tick may be slow, a record may be late).
    pub fn running(&self, now: i64) -> bool {
        self.interval_seconds != STOPPED
            && now - self.last_tick_at <= 2 * self.interval_seconds.max(RECORD_EVERY)
    }
}

impl Board {
    /// Records `dispatcher`'s tick at `now` (one write transaction; rows older than a week are
    /// deleted in it).
    pub fn record_tick(&self, dispatcher: &str, interval_seconds: i64, now: i64) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO kanban_dispatchers (dispatcher, last_tick_at, interval_seconds) \
                 VALUES (?1, ?2, ?3) ON CONFLICT (dispatcher) DO UPDATE SET \
                 last_tick_at = excluded.last_tick_at, interval_seconds = excluded.interval_seconds",
                params![dispatcher, now, interval_seconds],
            )?;
            tx.execute(
                "DELETE FROM kanban_dispatchers WHERE last_tick_at < ?1",
                params![now - FORGET_AFTER],
            )?;
            Ok(())
        })
    }

    /// Records that `dispatcher`'s loop ended at `now` (its row is kept as its last tick).
    pub fn record_stop(&self, dispatcher: &str, now: i64) -> Result<()> {
        self.record_tick(dispatcher, STOPPED, now)
    }

    /// Whether the board has the table of recorded ticks: every board kanban created; not a
    /// board of the original adopted in place, whose schema stays its own (no tick is recorded
    /// there, and no one can tell from it whether a dispatcher runs).
    pub fn records_ticks(&self) -> bool {
        self.conn()
            .prepare_cached("SELECT COUNT(*) FROM kanban_dispatchers WHERE 0 = 1")
            .is_ok()
    }

    /// Every recorded dispatcher, the newest tick first (none on a board that does not record
    /// them, [`Board::records_ticks`]).
    pub fn dispatcher_ticks(&self) -> Result<Vec<DispatcherTick>> {
        if !self.records_ticks() {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn().prepare_cached(
            "SELECT dispatcher, last_tick_at, interval_seconds FROM kanban_dispatchers \
             ORDER BY last_tick_at DESC, dispatcher",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(DispatcherTick {
                dispatcher: r.get(0)?,
                last_tick_at: r.get(1)?,
                interval_seconds: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<db::Result<_>>()?)
    }

    /// The newest recorded tick of any dispatcher, if one was ever recorded.
    pub fn last_tick(&self) -> Result<Option<DispatcherTick>> {
        Ok(self.dispatcher_ticks()?.into_iter().next())
    }
}
