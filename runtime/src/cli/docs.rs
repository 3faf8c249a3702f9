//! `kanban completions SHELL` and `kanban man [--dir DIR]`: clap_complete's and clap_mangen's
//! output for the clap definitions of the command line ([`clap::CommandFactory`]), so they offer
//! exactly the commands, flags and enumerated values the binary accepts. Hidden commands and
//! flags are left out.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Command;
use clap_complete::Shell;
use clap_mangen::Man;

use super::{CmdResult, Exit};

/// The root page's DESCRIPTION (the binary's `--help` keeps its one-line about).
const DESCRIPTION: &str = "A SQLite task board whose tasks a dispatcher hands to agent worker \
    processes, and a cron scheduler. Exit codes: 0 ok, 1 error, 2 usage, 3 refused. Each \
    subcommand has its own page (kanban-SUBCOMMAND(1), written by `kanban man --dir DIR`); the \
    repository's README describes every command in detail.";

/// Prints the completion script of `shell` for the command line `cmd`.
pub fn completions(cmd: Command, shell: Shell) -> CmdResult {
    let mut cmd = without_hidden_subcommands(cmd);
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "kanban", &mut script);
    print!("{}", String::from_utf8_lossy(&script));
    if shell == Shell::Fish {
        print!("{}", fish_positional_values(&cmd));
    }
    Ok(Exit::OK)
}

/// `cmd` without its hidden subcommands (`kanban submit`, `kanban worker`), which clap_complete
/// would offer (it ignores `hide` on subcommands, clap-rs/clap#1335). clap cannot remove a
/// subcommand, so a level that hides one is assembled again from its name, about, version,
/// arguments, groups and visible subcommands: the parts the completion scripts read.
fn without_hidden_subcommands(cmd: Command) -> Command {
    let cmd = cmd.mut_subcommands(without_hidden_subcommands);
    if !cmd.get_subcommands().any(Command::is_hide_set) {
        return cmd;
    }
    // clap's `Command::default().name(..)`, what its `new` does: a command line, no process.
    let mut level = Command::default()
        .name(cmd.get_name().to_owned())
        .args(cmd.get_arguments().cloned())
        .groups(cmd.get_groups().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if let Some(about) = cmd.get_about() {
        level = level.about(about.clone());
    }
    if let Some(version) = cmd.get_version() {
        level = level.version(version.to_owned());
    }
    level
}

/// clap_complete's fish script completes the values of flags only: these lines add those of
/// positional arguments (`kanban completions SHELL`), under the conditions its script defines
/// (`__fish_kanban_using_subcommand`, for commands one or two levels down, as it does).
fn fish_positional_values(root: &Command) -> String {
    let mut lines = String::new();
    let mut add = |condition: String, cmd: &Command| {
        for arg in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
            let values: Vec<String> = arg
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_owned())
                .collect();
            if !values.is_empty() {
                lines.push_str(&format!(
                    "complete -c kanban -n \"{condition}\" -f -a \"{}\"\n",
                    values.join(" ")
                ));
            }
        }
    };
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        add(format!("__fish_kanban_using_subcommand {name}"), sub);
        for nested in sub.get_subcommands().filter(|s| !s.is_hide_set()) {
            add(
                format!(
                    "__fish_kanban_using_subcommand {name}; and __fish_seen_subcommand_from {}",
                    nested.get_name()
                ),
                nested,
            );
        }
    }
    lines
}

/// Without `dir`, prints the page of `kanban` itself (roff, section 1). With `dir`, writes that
/// page as `DIR/kanban.1` and one page per visible subcommand, nested ones included
/// (`DIR/kanban-create.1`, `DIR/kanban-boards-rm.1`), creating `DIR` when missing, and prints the
/// path of each page written.
pub fn man(cmd: Command, dir: Option<&Path>) -> CmdResult {
    let mut root = cmd.long_about(DESCRIPTION).disable_help_subcommand(true);
    // Building names every subcommand after its path (`kanban-boards-rm`) and propagates the
    // global flags to it.
    root.build();
    let Some(dir) = dir else {
        let mut page = Vec::new();
        Man::new(root)
            .render(&mut page)
            .context("cannot render the man page")?;
        print!("{}", String::from_utf8_lossy(&page));
        return Ok(Exit::OK);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut written = Vec::new();
    write_pages(&root, dir, &mut written)?;
    for path in written {
        println!("{}", path.display());
    }
    Ok(Exit::OK)
}

/// Writes the page of `cmd`, then those of its visible subcommands, recording each path.
fn write_pages(cmd: &Command, dir: &Path, written: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let page = Man::new(cmd.clone());
    let path = dir.join(page.get_filename());
    let mut text = Vec::new();
    page.render(&mut text)
        .with_context(|| format!("cannot render {}", path.display()))?;
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}
