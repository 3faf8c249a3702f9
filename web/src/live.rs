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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
    use std::time::Instant;

    use super::*;
    use crate::{BoardView, CronView, HealthView, TaskView};

    #[derive(Default)]
    struct Fake {
        version: Arc<AtomicI64>,
        log: Arc<AtomicU64>,
        watchers: AtomicUsize,
    }

    struct FakeWatcher {
        version: Arc<AtomicI64>,
        log: Arc<AtomicU64>,
    }

    impl Watcher for FakeWatcher {
        fn version(&mut self) -> Result<i64, SourceError> {
            Ok(self.version.load(Ordering::SeqCst))
        }
        fn open_logs(&mut self) -> Vec<(String, u64)> {
            vec![("t_1".to_owned(), self.log.load(Ordering::SeqCst))]
        }
    }

    impl Source for Fake {
        fn boards(&self) -> Vec<String> {
            vec!["b".to_owned()]
        }
        fn board(&self, _: &str, _: bool) -> Result<Option<BoardView>, SourceError> {
            Ok(None)
        }
        fn task(&self, _: &str, _: &str) -> Result<Option<TaskView>, SourceError> {
            Ok(None)
        }
        fn cron(&self) -> Result<CronView, SourceError> {
            Ok(CronView::default())
        }
        fn health(&self) -> Result<HealthView, SourceError> {
            Ok(HealthView::default())
        }
        fn metrics(&self) -> Result<crate::MetricsView, SourceError> {
            Ok(crate::MetricsView::default())
        }
        fn watcher(&self, slug: &str) -> Result<Option<Box<dyn Watcher>>, SourceError> {
            if slug != "b" {
                return Ok(None);
            }
            self.watchers.fetch_add(1, Ordering::SeqCst);
            Ok(Some(Box::new(FakeWatcher {
                version: Arc::clone(&self.version),
                log: Arc::clone(&self.log),
            })))
        }
        fn act(&self, _: &str, _: &crate::Action) -> Result<crate::ActionDone, crate::ActionError> {
            Err(crate::ActionError::Refused("read-only fake".to_owned()))
        }
        #[allow(
            clippy::disallowed_methods,
            reason = "test code: a plain thread stands in for the runtime's `identity::spawn`"
        )]
        fn spawn<F>(&self, name: &str, job: F) -> std::io::Result<()>
        where
            F: FnOnce() + Send + 'static,
        {
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(job)
                .map(drop)
        }
    }

    const LIMIT: Duration = Duration::from_secs(30);

    #[test]
    fn one_watcher_per_board_fans_changes_out_and_stops_after_the_last_subscriber() {
        let source = Arc::new(Fake::default());
        let hub = Arc::new(Hub::default());
        assert!(hub.subscribe(&source, "nope").expect("subscribe").is_none());
        let first = hub.subscribe(&source, "b").expect("ok").expect("served");
        let second = hub.subscribe(&source, "b").expect("ok").expect("served");
        assert_eq!(source.watchers.load(Ordering::SeqCst), 1);
        assert_eq!(hub.watched_boards(), 1);

        source.version.fetch_add(1, Ordering::SeqCst);
        for sub in [&first, &second] {
            assert_eq!(sub.changes.recv_timeout(LIMIT), Ok(Change::Board));
        }
        source.log.fetch_add(10, Ordering::SeqCst);
        for sub in [&first, &second] {
            assert_eq!(
                sub.changes.recv_timeout(LIMIT),
                Ok(Change::Log("t_1".to_owned()))
            );
        }

        hub.leave(first);
        source.version.fetch_add(1, Ordering::SeqCst);
        assert_eq!(second.changes.recv_timeout(LIMIT), Ok(Change::Board));
        hub.leave(second);
        let deadline = Instant::now() + LIMIT;
        while hub.watched_boards() != 0 {
            assert!(Instant::now() < deadline, "the watcher did not stop");
            std::thread::sleep(POLL);
        }
        // A new subscriber starts a new watcher.
        let third = hub.subscribe(&source, "b").expect("ok").expect("served");
        assert_eq!(source.watchers.load(Ordering::SeqCst), 2);
        hub.leave(third);
    }

    #[test]
    fn a_change_committed_right_after_subscribing_is_delivered() {
        let source = Arc::new(Fake::default());
        let hub = Arc::new(Hub::default());
        let sub = hub.subscribe(&source, "b").expect("ok").expect("served");
        // No wait at all between subscribing and the change.
        source.version.fetch_add(1, Ordering::SeqCst);
        assert_eq!(sub.changes.recv_timeout(LIMIT), Ok(Change::Board));
        hub.leave(sub);
    }
}
