// expect: cannot be sent between threads safely
// bypass (own): the gate's `WorkerIdentity` moved into a thread that outlives the gated call
pub fn leak() {
    if let Some(id) = crate::identity::gate() {
        let _ = crate::identity::spawn("leak", move || id.task.len());
    }
}
