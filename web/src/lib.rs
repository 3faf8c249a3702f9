//! `kanban-web`: the live web view of kanban boards that `kanban serve` runs, and the board's
//! write actions from it.
//!
//! The crate depends on std, `subtle`, `percent-encoding` and `rustix` (the kernel's random
//! generator for CSRF tokens). It knows nothing of SQLite or of the runtime: the runtime
//! implements [`Source`] (page data as the plain types of [`view`], the write actions of
//! [`action`], a change watcher per board, and the thread spawner the runtime sanctions), and
//! this crate serves it:
//!
//! * [`http`]: a small HTTP/1.1 server (GET and HEAD read, POST writes; one thread per
//!   connection, a bounded request head and body with a deadline for all of it, connections
//!   still sending it capped apart from live ones, a back-off when accepting runs out of
//!   descriptors), the Host check against DNS rebinding, the token check, the `Origin` and
//!   per-session CSRF checks of a write, and the security headers;
//! * [`action`]: the write actions a form asks for, read and checked whole before the
//!   [`Source`] carries them out;
//! * [`page`]: the HTML pages — board, task, cron, health, 401 and 404 — with every value from a
//!   board escaped by [`page::escape`];
//! * [`metrics`]: `/metrics`, the boards' numbers in the Prometheus text format;
//! * [`live`]: one watcher per board polls the board's change signal (SQLite's `data_version`, the
//!   one the dispatcher wakes on) and the log sizes of open runs every 100 ms, and fans each
//!   change out to the browsers over server-sent events; browsers never poll;
//! * `assets/`: the page's script and stylesheet, compiled into the binary (`include_str!`).
//!
//! The crate itself never touches a board: every write is [`Source::act`], which the runtime
//! implements with the same library calls as the CLI. With [`ServeConfig::read_only`] the pages
//! carry no forms and every `POST` is refused, so nothing can change a board.

pub mod action;
pub mod chart;
mod html;
pub mod http;
pub mod live;
pub mod metrics;
pub mod page;
pub mod view;

use std::io;

pub use action::{Action, ActionDone, ActionError};
pub use http::{ServeConfig, ServeError, Server};
pub use view::*;

/// A failure of the data source (an unreadable board, …), shown as a 500 page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceError(pub String);

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SourceError {}

/// What the server reads. Implemented by the runtime over its board read API.
pub trait Source: Send + Sync + 'static {
    /// The served boards' slugs; the first is the one `/` shows without `?board=`.
    fn boards(&self) -> Vec<String>;
    /// The board page's data; `None` when `slug` is not served.
    fn board(&self, slug: &str, include_archived: bool) -> Result<Option<BoardView>, SourceError>;
    /// The board page's data with at most `per_column` cards of each status, and
    /// [`BoardView::column_totals`] counting them all: what an unfiltered page shows, read without
    /// the rest of the board. By default the whole board ([`Source::board`]).
    fn board_page(
        &self,
        slug: &str,
        include_archived: bool,
        per_column: usize,
    ) -> Result<Option<BoardView>, SourceError> {
        let _ = per_column;
        self.board(slug, include_archived)
    }
    /// One task's page data; `None` when the board or the task is unknown.
    fn task(&self, slug: &str, id: &str) -> Result<Option<TaskView>, SourceError>;
    /// The cron jobs of the home.
    fn cron(&self) -> Result<CronView, SourceError>;
    /// Live workers, budgets and given-up tasks of every served board.
    fn health(&self) -> Result<HealthView, SourceError>;
    /// The numbers `/metrics` exports of every served board.
    fn metrics(&self) -> Result<MetricsView, SourceError>;
    /// Carries out a write action on served board `slug`, recorded with the web's actor.
    fn act(&self, slug: &str, action: &Action) -> Result<ActionDone, ActionError>;
    /// A change watcher of one served board (`None` when `slug` is not served).
    fn watcher(&self, slug: &str) -> Result<Option<Box<dyn Watcher>>, SourceError>;
    /// Starts `job` on a new thread named `name` (the runtime's sanctioned spawner, which carries
    /// the caller's context to the new thread).
    fn spawn<F>(&self, name: &str, job: F) -> io::Result<()>
    where
        F: FnOnce() + Send + 'static;
}

/// Watches one board for changes; owned by that board's single watcher thread.
pub trait Watcher: Send {
    /// The board's change counter: any other connection's commit changes it.
    fn version(&mut self) -> Result<i64, SourceError>;
    /// The tasks with an open run and the current size of their logs (bytes).
    fn open_logs(&mut self) -> Vec<(String, u64)>;
}
