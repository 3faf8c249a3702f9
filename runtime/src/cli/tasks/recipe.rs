//! `kanban recipe validate|show|run|export` and `kanban swarm`: task graphs from a recipe file
//! ([`crate::recipe`] owns the format) or from the built-in swarm shape (parallel workers → a
//! verifier → a synthesizer), created in one transaction ([`crate::board::Board::create_graph`]).

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::board::{GraphTask, NewTask};
use crate::cli::escape::line;
use crate::cli::session::{fence, now, open, open_read, print_out};
use crate::cli::{CmdResult, Exit, Globals};
use crate::gates;
use crate::recipe::{self, Recipe};

/// `kanban recipe …`.
#[derive(Debug, clap::Subcommand)]
pub enum RecipeCommand {
    /// Check a recipe file (`-`: standard input): its keys, parents, variables and graph.
    Validate { file: PathBuf },
    /// Print the tasks a recipe would create with these values; creates nothing.
    Show {
        file: PathBuf,
        /// A variable's value (repeatable).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        sets: Vec<String>,
    },
    /// Create a recipe's tasks and links in one transaction; prints each key and its new id.
    Run {
        file: PathBuf,
        /// A variable's value (repeatable).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        sets: Vec<String>,
    },
    /// Print the graph a task belongs to as a recipe (or write it to --out FILE).
    Export {
        id: String,
        /// Write the recipe to this file instead of standard output (refused if it exists).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// The recipe's name (default: `graph-of-<id>`).
        #[arg(long)]
        name: Option<String>,
    },
}

/// `kanban swarm GOAL`.
#[derive(Debug, clap::Args)]
pub struct SwarmArgs {
    /// What the swarm is for; every card carries it.
    pub goal: String,
    /// A worker: `PROFILE:TITLE` (repeatable, one card each), or one PROFILE with --workers N.
    #[arg(long = "worker", value_name = "PROFILE[:TITLE]", required = true)]
    pub workers: Vec<String>,
    /// How many cards the one --worker PROFILE gets.
    #[arg(long = "workers", value_name = "N")]
    pub count: Option<usize>,
    /// The profile that checks every worker's handoff (runs once they are all done).
    #[arg(long, value_name = "PROFILE")]
    pub verifier: String,
    /// The profile that writes the final deliverable (runs once the verifier is done).
    #[arg(long, value_name = "PROFILE")]
    pub synthesizer: String,
}

pub(in crate::cli) fn run(command: RecipeCommand, globals: &Globals) -> CmdResult {
    match command {
        RecipeCommand::Validate { file } => validate(&file, globals),
        RecipeCommand::Show { file, sets } => show(&file, &sets, globals),
        RecipeCommand::Run { file, sets } => instantiate(&file, &sets, globals),
        RecipeCommand::Export { id, out, name } => export(&id, out.as_deref(), name, globals),
    }
}

fn read_recipe(file: &Path) -> anyhow::Result<Recipe> {
    let text = if file == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| {
            anyhow::Error::new(e).context("cannot read the recipe from standard input")
        })?;
        text
    } else {
        std::fs::read_to_string(file).map_err(|e| {
            anyhow::Error::new(e).context(format!("cannot read the recipe {}", file.display()))
        })?
    };
    Ok(Recipe::parse(&text)?)
}

#[derive(Serialize)]
struct Valid<'a> {
    ok: bool,
    name: &'a str,
    tasks: usize,
    vars: Vec<&'a str>,
}

fn validate(file: &Path, globals: &Globals) -> CmdResult {
    let recipe = read_recipe(file)?;
    let valid = Valid {
        ok: true,
        name: &recipe.name,
        tasks: recipe.tasks.len(),
        vars: recipe.vars.keys().map(String::as_str).collect(),
    };
    print_out(globals.json, &valid, || {
        format!(
            "recipe {} is valid: {} task(s), variables: {}",
            line(valid.name),
            valid.tasks,
            if valid.vars.is_empty() {
                "none".to_owned()
            } else {
                valid.vars.join(", ")
            }
        )
    })
}

/// One task as `show` prints it.
#[derive(Serialize)]
struct Planned {
    key: String,
    title: String,
    assignee: Option<String>,
    parents: Vec<String>,
    workspace: Option<String>,
}

fn show(file: &Path, sets: &[String], globals: &Globals) -> CmdResult {
    let recipe = read_recipe(file)?;
    let rendered = recipe.render(&recipe::parse_sets(sets)?, None)?;
    let planned: Vec<Planned> = rendered
        .iter()
        .map(|(key, g)| Planned {
            key: key.clone(),
            title: g.new.title.clone(),
            assignee: g.new.assignee.clone(),
            parents: g.parents.iter().map(|&p| rendered[p].0.clone()).collect(),
            workspace: g.new.workspace.kind.map(|k| k.as_str().to_owned()),
        })
        .collect();
    print_out(globals.json, &planned, || {
        let lines: Vec<String> = planned
            .iter()
            .map(|p| {
                let after = if p.parents.is_empty() {
                    String::new()
                } else {
                    format!(" after {}", p.parents.join(", "))
                };
                format!(
                    "{}: {} (@{}){after}",
                    p.key,
                    line(&p.title),
                    line(p.assignee.as_deref().unwrap_or("-"))
                )
            })
            .collect();
        lines.join("\n")
    })
}

/// The created tasks, by key, in the recipe's order.
#[derive(Serialize)]
struct Instantiated {
    ids: Vec<(String, String)>,
}

fn instantiate(file: &Path, sets: &[String], globals: &Globals) -> CmdResult {
    fence()?;
    let recipe = read_recipe(file)?;
    let author = gates::default_task_id(None);
    let rendered = recipe.render(&recipe::parse_sets(sets)?, author.as_deref())?;
    let o = open(globals)?;
    let tasks: Vec<GraphTask> = rendered.iter().map(|(_, g)| g.clone()).collect();
    let ids = o.board.create_graph(&tasks, now())?;
    let made = Instantiated {
        ids: rendered.into_iter().map(|(k, _)| k).zip(ids).collect(),
    };
    if globals.json {
        let map: serde_json::Map<String, serde_json::Value> = made
            .ids
            .iter()
            .map(|(k, id)| (k.clone(), serde_json::Value::String(id.clone())))
            .collect();
        crate::cli::print_json(&map)?;
        return Ok(Exit::OK);
    }
    print_out(false, &made, || {
        let lines: Vec<String> = made.ids.iter().map(|(k, id)| format!("{k} {id}")).collect();
        lines.join("\n")
    })
}

fn export(id: &str, out: Option<&Path>, name: Option<String>, globals: &Globals) -> CmdResult {
    let o = open_read(globals)?;
    let name = name.unwrap_or_else(|| format!("graph-of-{id}"));
    let text = recipe::export(&o.board, id, &name)?.to_toml()?;
    match out {
        None => print!("{text}"),
        Some(path) => {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .map_err(|e| {
                    anyhow::Error::new(e).context(format!("cannot write {}", path.display()))
                })?;
            std::io::Write::write_all(&mut file, text.as_bytes())?;
            println!("wrote {}", path.display());
        }
    }
    Ok(Exit::OK)
}

/// The ids `swarm` created.
#[derive(Serialize)]
struct Swarm {
    worker_ids: Vec<String>,
    verifier_id: String,
    synthesizer_id: String,
}

/// `kanban swarm GOAL --worker …`: the original's swarm shape without its root card.
pub(in crate::cli) fn swarm(args: SwarmArgs, globals: &Globals) -> CmdResult {
    fence()?;
    let goal = args.goal.trim();
    if goal.is_empty() {
        anyhow::bail!("a swarm needs a goal");
    }
    let workers = swarm_workers(&args.workers, args.count, goal)?;
    let author = gates::default_task_id(None).unwrap_or_else(|| "swarm-orchestrator".to_owned());
    let protocol = format!(
        "\n\n## Swarm protocol\n- Read the handoffs of the cards before yours (`kanban show`).\n\
         - Put machine-readable facts in your completion's --metadata.\n- Goal: {goal}\n"
    );
    let card = |title: String, body: String, assignee: &str| NewTask {
        title,
        body: Some(body + &protocol),
        assignee: Some(assignee.to_owned()),
        created_by: Some(author.clone()),
        ..NewTask::default()
    };
    let n = workers.len();
    let mut graph: Vec<GraphTask> = workers
        .into_iter()
        .map(|(profile, title)| GraphTask {
            new: card(title.clone(), title, &profile),
            parents: vec![],
        })
        .collect();
    graph.push(GraphTask {
        new: card(
            "Verify swarm outputs".to_owned(),
            "Review every worker's handoff. Complete with --metadata '{\"gate\": \"pass\"}' when \
             the evidence is sufficient; otherwise block naming exactly what is missing."
                .to_owned(),
            &args.verifier,
        ),
        parents: (0..n).collect(),
    });
    graph.push(GraphTask {
        new: card(
            "Synthesize swarm outputs".to_owned(),
            "Synthesize the verified worker outputs into the final deliverable.".to_owned(),
            &args.synthesizer,
        ),
        parents: vec![n],
    });
    let o = open(globals)?;
    let mut ids = o.board.create_graph(&graph, now())?;
    let synthesizer_id = ids.pop().unwrap_or_default();
    let verifier_id = ids.pop().unwrap_or_default();
    let made = Swarm {
        worker_ids: ids,
        verifier_id,
        synthesizer_id,
    };
    print_out(globals.json, &made, || {
        format!(
            "swarm: {} worker(s) {} → verifier {} → synthesizer {}",
            made.worker_ids.len(),
            made.worker_ids.join(" "),
            made.verifier_id,
            made.synthesizer_id
        )
    })
}

/// `(profile, title)` of each worker card: `PROFILE:TITLE` values, or one `PROFILE` times N.
fn swarm_workers(
    values: &[String],
    count: Option<usize>,
    goal: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    let first_line = goal.lines().next().unwrap_or(goal);
    match count {
        Some(n) => {
            let [profile] = values else {
                anyhow::bail!("--workers N takes exactly one --worker PROFILE");
            };
            if n == 0 || n > 64 {
                anyhow::bail!("--workers takes 1 to 64, not {n}");
            }
            if profile.contains(':') || profile.trim().is_empty() {
                anyhow::bail!("with --workers N, --worker names a profile only, not `{profile}`");
            }
            Ok((1..=n)
                .map(|i| {
                    (
                        profile.trim().to_owned(),
                        format!("{first_line} (worker {i} of {n})"),
                    )
                })
                .collect())
        }
        None => values
            .iter()
            .map(|value| match value.split_once(':') {
                Some((profile, title))
                    if !profile.trim().is_empty() && !title.trim().is_empty() =>
                {
                    Ok((profile.trim().to_owned(), title.trim().to_owned()))
                }
                _ => Err(anyhow::anyhow!(
                    "--worker `{value}`: expected PROFILE:TITLE (or PROFILE with --workers N)"
                )),
            })
            .collect(),
    }
}
