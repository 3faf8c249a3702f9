//! `kanban set-model` (a task's model, provider and reasoning effort) and `kanban profiles` (each
//! profile of kanban.toml with its agent, its limits and the argv it would run).

use serde::Serialize;

use crate::board::ModelOverride;
use crate::cli::escape::line;
use crate::cli::session::{authorize, done, now, open, open_read, print_out, root};
use crate::cli::{CmdResult, Exit, Globals, print_json};
use crate::config::Config;
use crate::dispatch::memory::MemorySource;
use crate::home::steering::{TaskSteering, task_steering};

/// `kanban set-model ID MODEL [--provider P] [--reasoning LEVEL]`.
pub(in crate::cli) fn set_model(id: &str, over: ModelOverride, globals: &Globals) -> CmdResult {
    authorize(id)?;
    let o = open(globals)?;
    let set = done(o.board.set_model(id, &over, now())?)?;
    print_out(globals.json, &set, || {
        format!(
            "{}: model {}  provider {}  reasoning {} (from its next run)",
            set.task_id,
            line(set.model_override.as_deref().unwrap_or("-")),
            line(set.provider_override.as_deref().unwrap_or("-")),
            line(set.reasoning_effort.as_deref().unwrap_or("-")),
        )
    })
}

/// One profile as `kanban profiles` shows it.
#[derive(Debug, Serialize)]
struct ProfileView {
    name: String,
    agent: String,
    /// The argv a `command` profile runs (placeholders filled for `--task`); `null` otherwise.
    argv: Option<Vec<String>>,
    /// Workers of this profile at once on this host (`null`: no per-profile cap).
    max_in_progress: Option<u32>,
    skills_dir: std::path::PathBuf,
    default: bool,
}

/// The home-wide limits `kanban profiles` shows.
#[derive(Debug, Serialize)]
struct Limits {
    max_spawn: u32,
    /// The effective host cap: configured, else derived from memory (`null`: none).
    max_in_progress: Option<u32>,
    max_in_progress_source: &'static str,
    max_in_progress_per_profile: Option<u32>,
    memory_pressure: &'static str,
}

/// `kanban profiles [--task ID]`.
pub(in crate::cli) fn profiles(task: Option<&str>, globals: &Globals) -> CmdResult {
    let root = root(globals)?;
    let config = Config::load(&root)?;
    let task = match task {
        Some(id) => Some(open_read(globals)?.board.get_task(id)?),
        None => None,
    };
    let d = &config.dispatch;
    let memory = MemorySource::with_paths(
        &root,
        d.meminfo_path.as_deref(),
        d.memory_pressure_path.as_deref(),
    )
    .read();
    let limits = Limits {
        max_spawn: d.max_spawn,
        max_in_progress: d.max_in_progress.or(memory.derived_max_in_progress()),
        max_in_progress_source: match (d.max_in_progress, memory.derived_max_in_progress()) {
            (Some(_), _) => "configured",
            (None, Some(_)) => "memory",
            (None, None) => "unlimited",
        },
        max_in_progress_per_profile: d.max_in_progress_per_profile,
        memory_pressure: memory.pressure().as_str(),
    };
    let views: Vec<ProfileView> = config
        .profiles
        .iter()
        .map(|(name, p)| {
            let skills_dir = config.skills_dir(name, &root);
            let steering = task
                .as_ref()
                .map(|t| task_steering(t, &skills_dir, false))
                .unwrap_or_else(TaskSteering::default);
            ProfileView {
                name: name.clone(),
                agent: p.agent.clone(),
                argv: (p.agent == "command").then(|| match &task {
                    Some(_) => steering.expand_argv(&p.command),
                    None => p.command.clone(),
                }),
                max_in_progress: config.profile_cap(name),
                skills_dir,
                default: name.eq_ignore_ascii_case(&d.default_profile),
            }
        })
        .collect();
    if globals.json {
        print_json(&serde_json::json!({ "limits": limits, "profiles": views }))?;
        return Ok(Exit::OK);
    }
    print_limits(&limits);
    for v in &views {
        println!(
            "{}{}  agent {}  max_in_progress {}",
            line(&v.name),
            if v.default { " (default)" } else { "" },
            line(&v.agent),
            v.max_in_progress.map_or("-".to_owned(), |n| n.to_string()),
        );
        if let Some(argv) = &v.argv {
            println!("  argv {}", line(&format!("{argv:?}")));
        }
    }
    Ok(Exit::OK)
}

fn print_limits(l: &Limits) {
    println!(
        "max_spawn {} per board  max_in_progress {} ({})  per profile {}  memory pressure {}",
        l.max_spawn,
        l.max_in_progress.map_or("-".to_owned(), |n| n.to_string()),
        l.max_in_progress_source,
        l.max_in_progress_per_profile
            .map_or("-".to_owned(), |n| n.to_string()),
        l.memory_pressure,
    );
}
