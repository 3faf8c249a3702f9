// target: runtime/src/cron/corpus_fixture.rs
// rule: uncarried-job
// bypass: a pool thread started while owned runs closures sent from a cron scope
use std::sync::mpsc;

pub fn owned_pool() -> mpsc::Sender<Box<dyn FnOnce() + Send>> {
    let (tx, rx) = mpsc::channel::<Box<dyn FnOnce() + Send>>();
    let _pool = crate::identity::spawn("pool", move || {
        for job in rx {
            job();
        }
    });
    tx
}
