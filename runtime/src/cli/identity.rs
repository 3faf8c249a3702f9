//! `kanban` subcommands of the identity concern.

use super::{CmdResult, Globals};

#[derive(Debug, clap::Subcommand)]
pub enum IdentityCommand {
    /// (identity commands are being built.)
    IdentityPending,
}

pub fn run(command: IdentityCommand, _globals: &Globals) -> CmdResult {
    match command {
        IdentityCommand::IdentityPending => anyhow::bail!("not built yet"),
    }
}
