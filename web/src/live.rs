//! Live updates: one watcher thread per board, started when the first browser subscribes and
//! stopped when the last one leaves. Every [`POLL`] it asks the board's [`Watcher`] for its change
//! counter (SQLite's `data_version`, the signal the dispatcher wakes on) and for the log sizes of
//! open runs, and sends each change to every subscriber's channel; the subscriber's connection
//! thread writes it as a server-sent event. Browsers never poll; the database is read by one
//! watcher per board whatever the number of open pages.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::{Source, SourceError, Watcher};

/// How often a board's watcher looks for a change.
pub const POLL: Duration = Duration::from_millis(100);

/// A change a subscriber is told about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Something was committed to the board.
    Board,
    /// The log of this task's open run grew.
    Log(String),
}

type Subscribers = Arc<Mutex<Vec<(u64, Sender<Change>)>>>;

/// The subscribers of every watched board.
#[derive(Default)]
pub struct Hub {
    boards: Mutex<HashMap<String, Subscribers>>,
    next_id: std::sync::atomic::AtomicU64,
}

/// One browser's subscription to a board; [`Hub::leave`] ends it.
#[derive(Debug)]
pub struct Subscription {
    pub id: u64,
    pub slug: String,
    pub changes: Receiver<Change>,
}

impl Hub {
    /// Subscribes to `slug`'s changes, starting its watcher when it has none. `Ok(None)` when the
    /// source does not serve `slug`.
    pub fn subscribe<S: Source>(
        self: &Arc<Self>,
        source: &Arc<S>,
        slug: &str,
    ) -> Result<Option<Subscription>, SourceError> {
        let (tx, rx) = channel();
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let subscription = Subscription {
            id,
            slug: slug.to_owned(),
            changes: rx,
        };
        let mut boards = self.boards.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(subs) = boards.get(slug) {
            subs.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((id, tx));
            return Ok(Some(subscription));
        }
        let Some(mut watcher) = source.watcher(slug)? else {
            return Ok(None);
        };
        // The starting point is read before the subscriber is told it is connected, so a change
        // committed after that is never missed.
        let start = (watcher.version().ok(), watcher.open_logs());
        let subs: Subscribers = Arc::new(Mutex::new(vec![(id, tx)]));
        boards.insert(slug.to_owned(), Arc::clone(&subs));
        drop(boards);
        let hub = Arc::clone(self);
        let owned_slug = slug.to_owned();
        let started = source.spawn(&format!("kanban-web-watch-{slug}"), move || {
            hub.watch(&owned_slug, watcher, start, &subs)
        });
        if let Err(err) = started {
            self.boards
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(slug);
            return Err(SourceError(format!(
                "cannot start the watcher of board {slug}: {err}"
            )));
        }
        Ok(Some(subscription))
    }

    /// Ends a subscription (its connection closed); the board's watcher stops at its next poll
    /// when this was the last one.
    pub fn leave(&self, subscription: Subscription) {
        let boards = self.boards.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(subs) = boards.get(&subscription.slug) {
            subs.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|(id, _)| *id != subscription.id);
        }
    }

    /// How many boards have a running watcher.
    pub fn watched_boards(&self) -> usize {
        self.boards
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The watcher loop of one board; returns when nobody listens any more.
    fn watch(
        &self,
        slug: &str,
        mut watcher: Box<dyn Watcher>,
        start: (Option<i64>, Vec<(String, u64)>),
        subs: &Subscribers,
    ) {
        let mut version = start.0;
        let mut logs: HashMap<String, u64> = start.1.into_iter().collect();
        loop {
            std::thread::sleep(POLL);
            let mut changes = Vec::new();
            let now = watcher.version().ok();
            if now.is_some() && now != version {
                version = now;
                changes.push(Change::Board);
            }
            let fresh: HashMap<String, u64> = watcher.open_logs().into_iter().collect();
            for (task, size) in &fresh {
                if logs.get(task).is_some_and(|old| old != size) {
                    changes.push(Change::Log(task.clone()));
                }
            }
            logs = fresh;
            if !self.broadcast(slug, subs, &changes) {
                return;
            }
        }
    }

    /// Sends `changes` to every live subscriber ; false, with
    /// the board forgotten, when no subscriber is left.
    fn broadcast(&self, slug: &str, subs: &Subscribers, changes: &[Change]) -> bool {
        {
            let mut list = subs.lock().unwrap_or_else(PoisonError::into_inner);
            for change in changes {
                list.retain(|(_, tx)| tx.send(change.clone()).is_ok());
            }
            if !list.is_empty() {
                return true;
            }
        }
        // Lock order: the board map, then the board's list (as `subscribe` does).
        let mut boards = self.boards.lock().unwrap_or_else(PoisonError::into_inner);
        let list = subs.lock().unwrap_or_else(PoisonError::into_inner);
        if list.is_empty() {
            boards.remove(slug);
            false
        } else {
            true
        }
    }
}
