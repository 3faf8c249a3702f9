// expect: use of a disallowed method `std::thread::scope`
// bypass: `std::thread::scope` threads start owned, whatever the caller's context
pub fn fan_out(n: usize) -> usize {
    std::thread::scope(|s| s.spawn(move || n + 1).join().unwrap_or(0))
}
