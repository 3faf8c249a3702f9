// expect: use of a disallowed method `kanban_runtime::identity::grant::worker_command`
// bypass (own): the grant boundary's builder used to start some other child
pub fn helper() -> std::io::Result<()> {
    let _child = crate::identity::grant::worker_command("tool").spawn()?;
    Ok(())
}
