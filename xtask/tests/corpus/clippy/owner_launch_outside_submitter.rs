// expect: use of a disallowed method `kanban_runtime::identity::grant::owner_command`
// bypass (own): the owner's launch builder (no identity, no marker) used to start some other child
pub fn helper() -> std::io::Result<()> {
    let _child = crate::identity::grant::owner_command("tool").spawn()?;
    Ok(())
}
