//! `kanban` subcommands of the dispatch concern.

use super::{CmdResult, Globals};

#[derive(Debug, clap::Subcommand)]
pub enum DispatchCommand {
    /// (dispatch commands are being built.)
    DispatchPending,
}

pub fn run(command: DispatchCommand, _globals: &Globals) -> CmdResult {
    match command {
        DispatchCommand::DispatchPending => anyhow::bail!("not built yet"),
    }
}
