//! `kanban cron …` subcommands.

use super::{CmdResult, Globals};

#[derive(Debug, clap::Subcommand)]
pub enum CronCommand {
    /// (cron commands are being built.)
    Pending,
}

pub fn run(command: CronCommand, _globals: &Globals) -> CmdResult {
    match command {
        CronCommand::Pending => anyhow::bail!("not built yet"),
    }
}
