// target: runtime/src/agent/corpus_fixture.rs
// rule: drift
// bypass (own): the owner's launch builder used by some other function to start a child
pub fn spawn_helper() -> std::io::Result<()> {
    #[allow(clippy::disallowed_methods)]
    let _child = crate::identity::grant::owner_command("tool").spawn()?;
    Ok(())
}
