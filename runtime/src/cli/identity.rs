//! `kanban identity [--json]`: what the current process believes about its worker identity, and
//! every gate's verdict. Parses and prints only; the report is [`crate::gates::report`].

use super::{CmdResult, Exit, Globals, print_json};
use crate::identity;

#[derive(Debug, clap::Subcommand)]
pub enum IdentityCommand {
    /// Print whether this context is a dispatcher-owned worker, its task and run, whether it is a
    /// delegated child, and every identity gate's verdict. With the global `--json`:
    /// {"owned", "task", "run_id", "delegated_child", "gates": {…}}.
    Identity,
}

pub fn run(command: IdentityCommand, globals: &Globals) -> CmdResult {
    match command {
        IdentityCommand::Identity => {
            let report = crate::gates::report();
            if globals.json {
                print_json(&report)?;
            } else {
                print!("{}", render(&report));
            }
            Ok(Exit::OK)
        }
    }
}

fn render(report: &identity::IdentityReport) -> String {
    let mut out = String::new();
    let or_none = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
    out.push_str(&format!("owned context:   {}\n", yes_no(report.owned)));
    out.push_str(&format!(
        "task:            {}\n",
        or_none(report.task.clone())
    ));
    out.push_str(&format!(
        "run id:          {}\n",
        or_none(report.run_id.map(|r| r.to_string()))
    ));
    out.push_str(&format!(
        "delegated child: {}\n",
        yes_no(report.delegated_child)
    ));
    out.push_str("gates:\n");
    for (name, value) in &report.gates {
        let shown = match value {
            serde_json::Value::Bool(b) => yes_no(*b).to_owned(),
            serde_json::Value::Null => "-".to_owned(),
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push_str(&format!("  {name:<27} {shown}\n"));
    }
    out
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
