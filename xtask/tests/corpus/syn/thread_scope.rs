// target: runtime/src/cron/corpus_fixture.rs
// rule: raw-thread-spawn
// bypass: `std::thread::scope` starts threads that do not carry the ownership context
pub fn fan_out(jobs: &[String]) {
    std::thread::scope(|s| {
        for job in jobs {
            s.spawn(move || job.len());
        }
    });
}
