//! `cargo xtask check|drift|lint`: the project's static checks.

fn main() -> anyhow::Result<()> {
    anyhow::bail!("xtask: no tasks built yet")
}
