//! `kanban demo`: a self-contained run on a fresh home. It writes a `kanban.toml` with built-in
//! profiles and short timings, creates a small dependency graph in which one task fails once and
//! one is rate-limited once, and hands back everything the CLI needs to run the dispatcher until
//! idle and print a summary. Nothing here depends on anything outside the home it is given.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::board::{self, Board, BoardError, NewTask, OpenOptions};
use crate::config::CONFIG_FILE;

/// The demo's `kanban.toml`: built-in agents only, timings short enough to finish in seconds.
pub(crate) const DEMO_CONFIG: &str = r#"# Written by `kanban demo`.
[dispatch]
max_spawn = 3
claim_ttl_seconds = 60
crash_grace_seconds = 0
rate_limit_cooldown_seconds = 1
kill_wait_seconds = 1.0
interval_seconds = 0.5
default_profile = "writer"

[profiles.writer]
agent = "builtin:complete"

[profiles.shell]
agent = "builtin:shell"
"#;

/// Errors setting the demo up.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot prepare the demo home {path}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} already has a board with tasks; give `kanban demo` an empty --home")]
    NotEmpty { path: PathBuf },
    #[error(transparent)]
    Board(#[from] BoardError),
    #[error(transparent)]
    Home(#[from] crate::home::HomeError),
}

/// One task of the demo graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DemoTask {
    pub id: String,
    pub title: String,
    pub what: &'static str,
}

/// One row of the summary table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SummaryRow {
    pub id: String,
    pub title: String,
    pub status: String,
    pub runs: usize,
    /// Outcomes of the task's runs, oldest first.
    pub outcomes: Vec<String>,
}

/// The demo's `kanban.toml` in owner mode (`kanban demo --mode owner`): the same, with
/// `[dispatch] mode = "owner"`, so every run goes through the owner of its profile.
pub(crate) fn demo_config(owner: bool) -> String {
    if owner {
        DEMO_CONFIG.replacen("[dispatch]\n", "[dispatch]\nmode = \"owner\"\n", 1)
    } else {
        DEMO_CONFIG.to_owned()
    }
}

/// The profiles of the demo graph (one owner each in owner mode).
pub(crate) const DEMO_PROFILES: [&str; 2] = ["shell", "writer"];

/// Writes the config and creates the task graph in the default board of `home`.
pub fn setup(home: &Path, now: i64) -> Result<Vec<DemoTask>, DemoError> {
    setup_with(home, now, false)
}

/// [`setup`], in owner mode when `owner`.
pub(crate) fn setup_with(home: &Path, now: i64, owner: bool) -> Result<Vec<DemoTask>, DemoError> {
    let io = |source| DemoError::Io {
        path: home.to_owned(),
        source,
    };
    std::fs::create_dir_all(home).map_err(io)?;
    std::fs::write(home.join(CONFIG_FILE), demo_config(owner)).map_err(io)?;
    let location = crate::home::resolve(home, Some(crate::home::DEFAULT_BOARD))?;
    let board = Board::open(&location, &OpenOptions::create())?;
    if !board.list_tasks(&board::TaskFilter::default())?.is_empty() {
        return Err(DemoError::NotEmpty {
            path: home.to_owned(),
        });
    }
    let mut tasks = Vec::new();
    let mut add = |title: &str,
                   body: Option<&str>,
                   assignee: &str,
                   parents: Vec<String>,
                   what: &'static str|
     -> Result<String, DemoError> {
        let created = board.create_task(
            &NewTask {
                title: title.to_owned(),
                body: body.map(str::to_owned),
                assignee: Some(assignee.to_owned()),
                parents,
                created_by: Some("kanban demo".to_owned()),
                ..NewTask::default()
            },
            now,
        )?;
        tasks.push(DemoTask {
            id: created.id.clone(),
            title: title.to_owned(),
            what,
        });
        Ok(created.id)
    };
    let fetch = add(
        "Fetch the input data",
        Some("echo 'fetched 42 rows'"),
        "shell",
        vec![],
        "shell script, succeeds",
    )?;
    let build = add(
        "Build the model",
        Some(
            "if [ -e .tried ]; then echo 'model built'; else touch .tried; \
             echo 'transient build failure' >&2; exit 1; fi",
        ),
        "shell",
        vec![],
        "fails once (exit 1, counted), then succeeds",
    )?;
    let api = add(
        "Query the rate-limited API",
        Some(
            "if [ -e .limited ]; then echo 'api answered'; else touch .limited; \
             echo 'HTTP 429' >&2; exit 75; fi",
        ),
        "shell",
        vec![],
        "rate-limited once (exit 75, not counted), respawned after the cooldown",
    )?;
    let report = add(
        "Write the report",
        None,
        "writer",
        vec![fetch, build, api],
        "waits for the three above, builtin:complete",
    )?;
    add(
        "Publish the report",
        None,
        "writer",
        vec![report],
        "waits for the report",
    )?;
    // The work the users run kanban for: a change on its own branch, in its own worktree of a
    // repository (a throwaway one here, with a bare `origin`), pushed, and so cleaned up.
    if demo_repository(home)? {
        let repo = home.join(DEMO_REPO);
        crate::home::meta::set_default_workdir(home, crate::home::DEFAULT_BOARD, &repo)?;
        let created = board.create_task(
            &NewTask {
                title: "Fix the README on a branch".to_owned(),
                body: Some(format!(
                    "echo 'Fixed by kanban.' >> README && {GIT} add README && \
                     {GIT} commit -qm 'README: fixed' && git push -q origin HEAD && \
                     echo \"pushed $(git rev-parse --abbrev-ref HEAD)\""
                )),
                assignee: Some("shell".to_owned()),
                created_by: Some("kanban demo".to_owned()),
                workspace: board::WorkspaceSpec {
                    kind: Some(crate::workspace::Kind::Worktree),
                    ..board::WorkspaceSpec::default()
                },
                ..NewTask::default()
            },
            now,
        )?;
        tasks.push(DemoTask {
            id: created.id,
            title: "Fix the README on a branch".to_owned(),
            what: "a git worktree on branch wt/<id>; commits, pushes, and the worktree is removed",
        });
    }
    Ok(tasks)
}

/// The demo repository, inside the demo home, and its bare `origin` beside it.
pub(crate) const DEMO_REPO: &str = "demo-repo";

/// git with an identity and no signing, for the demo's commits.
const GIT: &str =
    "git -c user.name=kanban-demo -c user.email=demo@kanban.invalid -c commit.gpgsign=false";

/// Makes the demo's repository (one commit, pushed to a bare `origin`); `false` when git is not
/// installed (the demo then runs without its worktree task).
fn demo_repository(home: &Path) -> Result<bool, DemoError> {
    let repo = home.join(DEMO_REPO);
    let origin = home.join("demo-origin.git");
    let io = |source| DemoError::Io {
        path: repo.clone(),
        source,
    };
    std::fs::create_dir_all(&repo).map_err(io)?;
    std::fs::write(repo.join("README"), "A demo repository.\n").map_err(io)?;
    let steps: [(&Path, &[&str]); 6] = [
        (home, &["init", "-q", "--bare", "demo-origin.git"]),
        (&repo, &["init", "-q"]),
        (&repo, &["add", "README"]),
        (
            &repo,
            &[
                "-c",
                "user.name=kanban-demo",
                "-c",
                "user.email=demo@kanban.invalid",
                "-c",
                "commit.gpgsign=false",
                "commit",
                "-qm",
                "init",
            ],
        ),
        (
            &repo,
            &["remote", "add", "origin", &origin.to_string_lossy()],
        ),
        (&repo, &["push", "-q", "origin", "HEAD"]),
    ];
    for (dir, args) in steps {
        let out = match crate::identity::command("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
        {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io(e)),
        };
        if !out.status.success() {
            return Err(io(std::io::Error::other(format!(
                "git {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))));
        }
    }
    Ok(true)
}

/// The summary table: every task with its status and the outcomes of its runs.
pub fn summary(board: &Board) -> Result<Vec<SummaryRow>, BoardError> {
    let mut rows = Vec::new();
    for task in board.list_tasks(&board::TaskFilter::default())? {
        let runs = board.runs(&task.id)?;
        rows.push(SummaryRow {
            outcomes: runs
                .iter()
                .map(|r| r.outcome.clone().unwrap_or_else(|| r.status.clone()))
                .collect(),
            runs: runs.len(),
            status: task.status.as_str().to_owned(),
            title: task.title,
            id: task.id,
        });
    }
    Ok(rows)
}

/// A fresh directory under the system temp dir for a demo home.
pub(crate) fn temp_home(now: i64) -> PathBuf {
    std::env::temp_dir().join(format!("kanban-demo-{}-{now}", std::process::id()))
}
