//! `kanban` subcommands of the board concern.

use super::{CmdResult, Globals};

#[derive(Debug, clap::Subcommand)]
pub enum BoardCommand {
    /// (board commands are being built.)
    BoardPending,
}

pub fn run(command: BoardCommand, _globals: &Globals) -> CmdResult {
    match command {
        BoardCommand::BoardPending => anyhow::bail!("not built yet"),
    }
}
