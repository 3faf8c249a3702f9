// expect: use of a disallowed method `std::thread::Builder::spawn`
// bypass (own): a raw named thread started by a helper that takes the closure
fn start<F: FnOnce() + Send + 'static>(f: F) {
    let _ = std::thread::Builder::new().name("quiet".into()).spawn(f);
}

pub fn background() {
    start(|| {});
}
