//! `kanban serve`: the live web view (crate `kanban-web`) over this home's boards, and its write
//! actions (none with `--read-only`).
//!
//! This file implements [`kanban_web::Source`] with the board's read API: every board is opened
//! read-only ([`OpenOptions::read_only`]) per page, so a page can change nothing; a write action
//! opens the board for writing and runs the CLI's library call (`cli/web_actions.rs`); each board's
//! change watcher keeps its own read-only connection and reads its change counter
//! ([`Board::data_version`]: SQLite's `PRAGMA data_version`, or a PostgreSQL board's counter of
//! other connections' commits), the signal the dispatcher wakes on; a PostgreSQL watcher whose
//! connection ended opens the board again. Threads start only through [`identity::spawn`].
//! Which boards: every board of the home, SQLite and PostgreSQL (the resolved board first), or
//! only the one given with the global `--board SLUG`.

use std::collections::BTreeMap;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use kanban_web::{
    BoardHealth, BoardMetricsView, BoardView, CardView, CommentView, CronView, EventView,
    HealthView, HistogramView, JobView, MetricsView, RunView, ServeConfig, Server, SourceError,
    TaskLink, TaskView, WorkerView,
};

use super::{CmdResult, Exit, Globals};
use crate::board::{Board, BoardCard, BoardError, OpenOptions, Status, StoredEvent, Task, TaskRef};
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::db::target::BoardLocation;
use crate::home as paths;
use crate::identity;

/// Cards per status, when a page holds only the first of each column.
type ColumnTotals = BTreeMap<String, usize>;

/// The newest bytes of a task log shown on its page.
const LOG_TAIL_BYTES: u64 = 16 * 1024;
/// Events shown on a task page (the newest).
const PAGE_EVENTS: usize = 200;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on. Anything but loopback needs --token or --token-file.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8077")]
    pub listen: SocketAddr,
    /// Token every request must carry (Authorization: Bearer T, cookie kanban_token=T, or ?token=T).
    #[arg(long, value_name = "T", conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the token from this file (surrounding whitespace ignored).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// A host name (or IP address) the Host header may carry besides localhost and the
    /// server's address: the name a DNS entry or a proxy gives it. Repeatable. Requests for any
    /// other host are refused (421), which stops DNS rebinding.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_host: Vec<String>,
    /// Live connections at most (pages being answered and open live pages); more get 503.
    /// Connections still sending their request are counted apart (see docs/web.md).
    #[arg(long, value_name = "N", default_value_t = ServeConfig::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Serve the view only: no forms, and every POST is refused (405).
    #[arg(long)]
    pub read_only: bool,
}

/// Runs the server until it fails.
pub fn run(args: ServeArgs, globals: &Globals) -> CmdResult {
    let root = paths::root_dir(globals.home.as_deref())?;
    let config = Config::load(&root)?;
    let boards = served_boards(&root, globals.board.as_deref())?;
    let token = match (&args.token, &args.token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(path)) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the token file {}", path.display()))?
                .trim()
                .to_owned(),
        ),
        (None, None) => None,
    };
    let slugs: Vec<String> = boards.iter().map(|b| b.slug.clone()).collect();
    let source = Arc::new(HomeSource {
        root,
        boards,
        max_spawn: i64::from(config.dispatch.max_spawn),
        stale_after: config.dispatch.heartbeat_max_stale_seconds,
        clock: Arc::new(SystemClock),
        read_only: args.read_only,
    });
    let server = Server::bind(
        &ServeConfig {
            token,
            allowed_hosts: args.allow_host,
            max_connections: args.max_connections,
            read_only: args.read_only,
            ..ServeConfig::new(args.listen)
        },
        source,
    )?;
    let addr = server.local_addr()?;
    println!(
        "kanban: serving http://{addr}/ (boards: {})",
        slugs.join(", ")
    );
    server.run().context("the web server stopped")?;
    Ok(Exit::OK)
}

/// The boards to serve: `--board SLUG` alone, else every board (the resolved one first).
fn served_boards(root: &Path, flag: Option<&str>) -> anyhow::Result<Vec<BoardLocation>> {
    let current = paths::resolve(root, flag)?;
    if !current.exists() {
        anyhow::bail!(
            "board {} has no database at {}; create it with `kanban init`",
            current.slug,
            current.describe()
        );
    }
    if flag.is_some() || current.pinned {
        return Ok(vec![current]);
    }
    let mut boards = vec![current.clone()];
    for b in paths::list_boards(root)? {
        if b.slug != current.slug && b.exists() {
            boards.push(b);
        }
    }
    Ok(boards)
}

/// The board read API as a [`kanban_web::Source`].
pub struct HomeSource {
    pub root: PathBuf,
    pub boards: Vec<BoardLocation>,
    pub max_spawn: i64,
    /// A running task whose heartbeat is older than this is marked stale (the dispatcher's
    /// `heartbeat_max_stale_seconds`).
    pub stale_after: i64,
    pub clock: Arc<dyn Clock>,
    /// `--read-only`: [`kanban_web::Source::act`] refuses too (the server already does).
    pub read_only: bool,
}

fn failure(err: impl std::fmt::Display) -> SourceError {
    SourceError(err.to_string())
}

fn failure_chain(err: &BoardError) -> SourceError {
    SourceError(crate::error_chain(err))
}

fn link(r: &TaskRef) -> TaskLink {
    TaskLink {
        id: r.id.clone(),
        title: r.title.clone(),
        status: r.status.as_str().to_owned(),
    }
}

impl HomeSource {
    /// The board page's data from the cards `read` returns (with their totals per status when it
    /// read only the first of each column). `read` gets the board's tasks per status (every
    /// status present), counted once per page.
    fn board_view(
        &self,
        slug: &str,
        read: impl FnOnce(
            &Board,
            &BTreeMap<String, i64>,
        ) -> Result<(Vec<BoardCard>, Option<ColumnTotals>), BoardError>,
    ) -> Result<Option<BoardView>, SourceError> {
        let Some(location) = self.location(slug) else {
            return Ok(None);
        };
        let board = self.open(location)?;
        let now = self.clock.now();
        let chain = |e: BoardError| failure_chain(&e);
        let counts: BTreeMap<String, i64> = board
            .status_counts()
            .map_err(chain)?
            .into_iter()
            .map(|(status, n)| (status.as_str().to_owned(), n))
            .collect();
        let oldest_ready_age_seconds = board.oldest_ready_age(now).map_err(chain)?;
        let (cards, column_totals) = read(&board, &counts).map_err(chain)?;
        let diagnostics = card_diagnostics(&board, &cards, now)?;
        let ticks = board.dispatcher_ticks().map_err(|e| failure_chain(&e))?;
        Ok(Some(BoardView {
            dispatcher_running: board
                .records_ticks()
                .then(|| ticks.iter().any(|t| t.running(now))),
            last_tick_at: ticks.first().map(|t| t.last_tick_at),
            oldest_ready_age_seconds,
            slug: slug.to_owned(),
            now,
            statuses: Status::ALL.iter().map(|s| s.as_str().to_owned()).collect(),
            cards: cards
                .iter()
                .map(|c| {
                    let mut card = self.card(c, now);
                    if let Some(found) = diagnostics.get(&c.task.id) {
                        card.diagnostics = found.iter().map(diagnostic_view).collect();
                    }
                    card
                })
                .collect(),
            column_totals,
        }))
    }

    fn location(&self, slug: &str) -> Option<&BoardLocation> {
        self.boards.iter().find(|b| b.slug == slug)
    }

    fn open(&self, location: &BoardLocation) -> Result<Board, SourceError> {
        Board::open(location, &OpenOptions::read_only()).map_err(|e| failure_chain(&e))
    }

    fn is_stale(&self, task: &Task, now: i64) -> bool {
        task.status == Status::Running
            && task
                .last_heartbeat_at
                .or(task.started_at)
                .is_some_and(|hb| now - hb > self.stale_after)
    }

    fn card(&self, c: &BoardCard, now: i64) -> CardView {
        let t = &c.task;
        CardView {
            id: t.id.clone(),
            title: t.title.clone(),
            body: t.body.clone(),
            assignee: t.assignee.clone(),
            status: t.status.as_str().to_owned(),
            priority: t.priority,
            created_at: t.created_at,
            attempts: c.attempts,
            last_heartbeat_at: t.last_heartbeat_at,
            started_at: t.started_at,
            stale: self.is_stale(t, now),
            block_reason: c.block_reason.clone(),
            diagnostics: Vec::new(),
        }
    }
}

/// A diagnostic as the web view shows it: the suggested command first.
fn diagnostic_view(d: &crate::board::diagnostics::Diagnostic) -> kanban_web::DiagnosticView {
    let mut actions: Vec<&crate::board::diagnostics::Action> = d.actions.iter().collect();
    actions.sort_by_key(|a| !a.suggested);
    kanban_web::DiagnosticView {
        kind: d.kind.to_owned(),
        severity: d.severity.as_str().to_owned(),
        title: d.title.clone(),
        detail: d.detail.clone(),
        commands: actions.iter().map(|a| a.command.clone()).collect(),
    }
}

/// The diagnostics of the cards a board page can show (the first [`kanban_web::page::COLUMN_LIMIT`]
/// of each column but the archived one), read in one batch.
fn card_diagnostics(
    board: &Board,
    cards: &[BoardCard],
    now: i64,
) -> Result<
    std::collections::HashMap<String, Vec<crate::board::diagnostics::Diagnostic>>,
    SourceError,
> {
    let mut per_status: std::collections::HashMap<Status, usize> = std::collections::HashMap::new();
    let shown: Vec<&Task> = cards
        .iter()
        .map(|c| &c.task)
        .filter(|t| t.status != Status::Archived)
        .filter(|t| {
            let n = per_status.entry(t.status).or_insert(0);
            *n += 1;
            *n <= kanban_web::page::COLUMN_LIMIT
        })
        .collect();
    board
        .diagnostics_of(
            &shown,
            now,
            &crate::board::diagnostics::Thresholds::default(),
        )
        .map_err(|e| failure_chain(&e))
}

/// How each run's worker ended, from the task's events: the exit code of its `worker_result`,
/// or the kind of the event that closed it.
fn exit_classes(events: &[StoredEvent]) -> std::collections::HashMap<i64, String> {
    let mut classes = std::collections::HashMap::new();
    for e in events {
        let Some(run) = e.run_id else { continue };
        let class = match e.kind.as_str() {
            "worker_result" => e
                .payload
                .as_ref()
                .and_then(|p| p.get("exit_code"))
                .and_then(serde_json::Value::as_i64)
                .map(|code| match code {
                    0 => "exit 0".to_owned(),
                    75 => "exit 75 (rate limited)".to_owned(),
                    78 => "exit 78 (terminal)".to_owned(),
                    130 => "exit 130 (interrupted)".to_owned(),
                    other => format!("exit {other}"),
                }),
            "crashed" | "timed_out" | "protocol_violation" | "rate_limited" | "spawn_failed" => {
                Some(e.kind.replace('_', " "))
            }
            _ => None,
        };
        if let Some(class) = class {
            classes.entry(run).or_insert(class);
        }
    }
    classes
}

/// The last `LOG_TAIL_BYTES` of `path` (from a line start when it was cut), if it exists.
fn log_tail(path: &Path) -> Option<String> {
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let start = len.saturating_sub(LOG_TAIL_BYTES);
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Some(if start > 0 {
        text.split_once('\n')
            .map_or(text.clone(), |(_, rest)| rest.to_owned())
    } else {
        text
    })
}

impl kanban_web::Source for HomeSource {
    fn boards(&self) -> Vec<String> {
        self.boards.iter().map(|b| b.slug.clone()).collect()
    }

    fn board(&self, slug: &str, include_archived: bool) -> Result<Option<BoardView>, SourceError> {
        self.board_view(slug, |board, _| {
            Ok((board.board_cards(include_archived)?, None))
        })
    }

    fn board_page(
        &self,
        slug: &str,
        include_archived: bool,
        per_column: usize,
    ) -> Result<Option<BoardView>, SourceError> {
        self.board_view(slug, |board, counts| {
            let statuses: Vec<Status> = Status::ALL
                .into_iter()
                .filter(|s| include_archived || *s != Status::Archived)
                .filter(|s| counts.contains_key(s.as_str()))
                .collect();
            let cards = board.first_cards(&statuses, per_column)?;
            let totals = counts
                .iter()
                .map(|(status, n)| (status.clone(), usize::try_from(*n).unwrap_or(0)))
                .collect();
            Ok((cards, Some(totals)))
        })
    }

    fn task(&self, slug: &str, id: &str) -> Result<Option<TaskView>, SourceError> {
        let Some(location) = self.location(slug) else {
            return Ok(None);
        };
        let board = self.open(location)?;
        let card = match board.task_card(id) {
            Ok(c) => c,
            Err(BoardError::TaskNotFound { .. }) => return Ok(None),
            Err(e) => return Err(failure_chain(&e)),
        };
        let task = card.task.clone();
        let now = self.clock.now();
        let chain = |e: BoardError| failure_chain(&e);
        let runs = board.runs(id).map_err(chain)?;
        let events = board.events(id, None).map_err(chain)?;
        let classes = exit_classes(&events);
        let mut card = self.card(&card, now);
        card.diagnostics = board
            .task_diagnostics(id, now, &crate::board::diagnostics::Thresholds::default())
            .map_err(chain)?
            .iter()
            .map(diagnostic_view)
            .collect();
        let log = paths::find_log(&self.root, slug, id);
        let first_shown = events.len().saturating_sub(PAGE_EVENTS);
        let workspace_kept = board
            .last_workspace_note(id)
            .map_err(chain)?
            .and_then(|note| match note.decode() {
                Ok(crate::board::events::Event::WorkspacePreserved { reason, detail, .. }) => {
                    Some(if detail.is_empty() {
                        reason
                    } else {
                        format!("{reason}: {detail}")
                    })
                }
                _ => None,
            });
        Ok(Some(TaskView {
            workspace: crate::cli::tasks::workspace::describe_workspace(&task),
            workspace_kept,
            slug: slug.to_owned(),
            now,
            result: task.result.clone(),
            parents: board.parents(id).map_err(chain)?.iter().map(link).collect(),
            children: board
                .children(id)
                .map_err(chain)?
                .iter()
                .map(link)
                .collect(),
            run_open: runs.iter().any(|r| r.is_open()),
            runs: runs
                .iter()
                .map(|r| RunView {
                    id: r.id,
                    profile: r.profile.clone(),
                    status: r.status.clone(),
                    outcome: r.outcome.clone(),
                    exit_class: classes.get(&r.id).cloned(),
                    started_at: r.started_at,
                    ended_at: r.ended_at,
                    summary: r.summary.clone(),
                    error: r.error.clone(),
                })
                .collect(),
            comments: board
                .comments(id)
                .map_err(chain)?
                .into_iter()
                .map(|c| CommentView {
                    author: c.author,
                    body: c.body,
                    created_at: c.created_at,
                })
                .collect(),
            events: events[first_shown..]
                .iter()
                .map(|e| EventView {
                    id: e.id,
                    run_id: e.run_id,
                    kind: e.kind.clone(),
                    payload: e.payload.as_ref().map(ToString::to_string),
                    created_at: e.created_at,
                })
                .collect(),
            log_tail: log_tail(&log),
            card,
        }))
    }

    fn cron(&self) -> Result<CronView, SourceError> {
        let now = self.clock.now();
        let store_file =
            crate::cron::store::cron_dir(&self.root).join(crate::cron::store::STORE_FILE);
        if !store_file.is_file() {
            // No job was ever added; opening the store would create it.
            return Ok(CronView {
                now,
                jobs: Vec::new(),
            });
        }
        let store = crate::cron::Store::open(&self.root).map_err(failure)?;
        let jobs = store.list().map_err(failure)?;
        Ok(CronView {
            now,
            jobs: jobs
                .into_iter()
                .map(|j| JobView {
                    state: serde_json::to_value(j.state)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    id: j.id,
                    name: j.name,
                    schedule: j.schedule,
                    profile: j.profile,
                    next_run_at: j.next_run_at,
                    last_run_at: j.last_run_at,
                    last_status: j.last_status,
                    last_error: j.last_error,
                })
                .collect(),
        })
    }

    fn metrics(&self) -> Result<MetricsView, SourceError> {
        let now = self.clock.now();
        let mut boards = Vec::new();
        for location in &self.boards {
            let board = self.open(location)?;
            let m = board
                .board_metrics(now)
                .map_err(|e: BoardError| failure_chain(&e))?;
            let ticks = board
                .dispatcher_ticks()
                .map_err(|e: BoardError| failure_chain(&e))?;
            boards.push(BoardMetricsView {
                last_tick_age_seconds: ticks.first().map(|t| (now - t.last_tick_at).max(0)),
                dispatchers_running: ticks.iter().filter(|t| t.running(now)).count() as i64,
                diagnostics: diagnostics_by_rule(&board, now)?,
                slug: location.slug.clone(),
                tasks_by_status: m.tasks_by_status,
                runs_by_outcome: m.runs_by_outcome,
                workers_by_profile: m.workers_by_profile,
                run_duration: histogram(&m.run_duration),
                claim_to_spawn: histogram(&m.claim_to_spawn),
                oldest_ready_age_seconds: m.oldest_ready_age_seconds,
            });
        }
        Ok(MetricsView {
            boards,
            owner_turns: owner_turns(&self.root)?,
        })
    }

    fn health(&self) -> Result<HealthView, SourceError> {
        let now = self.clock.now();
        let mut boards = Vec::new();
        for location in &self.boards {
            let board = self.open(location)?;
            let chain = |e: BoardError| failure_chain(&e);
            let running = board.running_tasks().map_err(chain)?;
            let workers = running
                .iter()
                .map(|r| WorkerView {
                    task_id: r.id.clone(),
                    pid: r.worker_pid,
                    host: r.claim_lock.as_deref().map(|lock| {
                        lock.rsplit_once(':')
                            .map_or(lock, |(host, _)| host)
                            .to_owned()
                    }),
                    last_heartbeat_at: r.last_heartbeat_at.or(r.run_started_at),
                    stale: r
                        .last_heartbeat_at
                        .or(r.run_started_at)
                        .is_some_and(|hb| now - hb > self.stale_after),
                })
                .collect();
            let last_tick = board.last_tick().map_err(chain)?;
            let metrics = board.board_metrics(now).map_err(chain)?;
            boards.push(BoardHealth {
                slug: location.slug.clone(),
                workers,
                last_tick_at: last_tick.as_ref().map(|t| t.last_tick_at),
                dispatcher_running: board
                    .dispatcher_ticks()
                    .map_err(chain)?
                    .iter()
                    .any(|t| t.running(now)),
                oldest_ready_age_seconds: metrics.oldest_ready_age_seconds,
                workers_by_profile: metrics.workers_by_profile,
                day: activity(&board.activity(now, 24).map_err(chain)?),
                week: activity(&board.activity(now, 7 * 24).map_err(chain)?),
                running: running.len() as i64,
                max_spawn: self.max_spawn,
                given_up: board
                    .given_up_tasks()
                    .map_err(chain)?
                    .iter()
                    .map(link)
                    .collect(),
            });
        }
        Ok(HealthView { now, boards })
    }

    fn watcher(&self, slug: &str) -> Result<Option<Box<dyn kanban_web::Watcher>>, SourceError> {
        let Some(location) = self.location(slug) else {
            return Ok(None);
        };
        let board = self.open(location)?;
        Ok(Some(Box::new(BoardWatcher {
            board,
            location: location.clone(),
            root: self.root.clone(),
            slug: slug.to_owned(),
            seen: None,
            open_runs: Vec::new(),
        })))
    }

    fn act(
        &self,
        slug: &str,
        action: &kanban_web::Action,
    ) -> Result<kanban_web::ActionDone, kanban_web::ActionError> {
        if self.read_only {
            return Err(kanban_web::ActionError::Refused(
                "this server is read-only (kanban serve --read-only)".to_owned(),
            ));
        }
        let Some(location) = self.location(slug) else {
            return Err(kanban_web::ActionError::NotFound(format!(
                "no board {slug} is served"
            )));
        };
        crate::cli::web_actions::apply_web_action(&self.root, location, action, self.clock.now())
    }

    fn spawn<F>(&self, name: &str, job: F) -> std::io::Result<()>
    where
        F: FnOnce() + Send + 'static,
    {
        identity::spawn(name, job).map(drop)
    }
}

/// One board's change watcher: its own read-only connection (`data_version` is per connection).
struct BoardWatcher {
    board: Board,
    location: BoardLocation,
    root: PathBuf,
    slug: String,
    /// The version the list of open runs was read at.
    seen: Option<i64>,
    /// Running tasks and their log files.
    open_runs: Vec<(String, PathBuf)>,
}

impl kanban_web::Watcher for BoardWatcher {
    fn version(&mut self) -> Result<i64, SourceError> {
        // A PostgreSQL connection the server or the network ended: open the board again (the
        // counter lives in the database, so the new connection reads on where the old one
        // stopped).
        if self.board.connection_lost() {
            self.board = Board::open(&self.location, &OpenOptions::read_only())
                .map_err(|e| failure_chain(&e))?;
        }
        self.board.data_version().map_err(|e| failure_chain(&e))
    }

    fn open_logs(&mut self) -> Vec<(String, u64)> {
        let version = self.board.data_version().ok();
        if version.is_none() || version != self.seen {
            self.seen = version;
            self.open_runs = self
                .board
                .running_tasks()
                .unwrap_or_default()
                .into_iter()
                .map(|r| {
                    let log = paths::find_log(&self.root, &self.slug, &r.id);
                    (r.id, log)
                })
                .collect();
        }
        self.open_runs
            .iter()
            .map(|(id, log)| {
                let size = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0);
                (id.clone(), size)
            })
            .collect()
    }
}

fn activity(a: &crate::board::activity::Activity) -> kanban_web::ActivityView {
    kanban_web::ActivityView {
        start: a.start,
        completed: a.completed.clone(),
        failed: a.failed.clone(),
        rate_limited: a.rate_limited.clone(),
        waiting: a.waiting.clone(),
        running: a.running.clone(),
        done: a.done.clone(),
    }
}

/// The board's active diagnostics counted per (rule, severity), in rule order.
fn diagnostics_by_rule(board: &Board, now: i64) -> Result<Vec<(String, String, i64)>, SourceError> {
    use crate::board::diagnostics::{Severity, Thresholds};
    let found = board
        .board_diagnostics(Severity::Warning, now, &Thresholds::default())
        .map_err(|e| failure_chain(&e))?;
    let mut counts = std::collections::BTreeMap::<(String, String), i64>::new();
    for task in &found {
        for d in &task.diagnostics {
            *counts
                .entry((d.kind.to_owned(), d.severity.as_str().to_owned()))
                .or_insert(0) += 1;
        }
    }
    Ok(counts.into_iter().map(|((r, s), n)| (r, s, n)).collect())
}

/// Each owner's turns per state, from the `state.db` of every profile under `<root>/owner/`
/// (none when no owner ever ran).
fn owner_turns(root: &Path) -> Result<Vec<(String, String, i64)>, SourceError> {
    let Ok(entries) = std::fs::read_dir(root.join("owner")) else {
        return Ok(Vec::new());
    };
    let mut profiles: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|p| crate::admission::state_path(root, p).is_file())
        .collect();
    profiles.sort();
    let mut out = Vec::new();
    for profile in profiles {
        let state =
            crate::admission::state::StateDb::open(&crate::admission::state_path(root, &profile))
                .map_err(|e| failure_chain(&e))?;
        for (status, n) in state.turns_by_state().map_err(|e| failure_chain(&e))? {
            out.push((profile.clone(), status, n));
        }
    }
    Ok(out)
}

/// A board histogram as the web view takes it: each bucket with its bound.
fn histogram(h: &crate::board::Histogram) -> HistogramView {
    HistogramView {
        buckets: crate::board::stats::DURATION_BUCKETS
            .iter()
            .copied()
            .zip(h.cumulative.iter().copied())
            .collect(),
        count: h.count,
        sum: h.sum,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_classes_prefer_the_worker_result_then_the_closing_event() {
        let event = |run: i64, kind: &str, payload: Option<serde_json::Value>| StoredEvent {
            id: 0,
            task_id: "t_1".into(),
            run_id: Some(run),
            kind: kind.into(),
            payload,
            created_at: 0,
        };
        let classes = exit_classes(&[
            event(
                1,
                "worker_result",
                Some(serde_json::json!({"exit_code": 75})),
            ),
            event(1, "rate_limited", None),
            event(2, "crashed", None),
            event(3, "completed", None),
        ]);
        assert_eq!(
            classes.get(&1).map(String::as_str),
            Some("exit 75 (rate limited)")
        );
        assert_eq!(classes.get(&2).map(String::as_str), Some("crashed"));
        assert_eq!(classes.get(&3), None);
    }

    #[test]
    fn log_tail_keeps_the_newest_bytes_from_a_line_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.log");
        let mut text = String::new();
        for i in 0..5000 {
            text.push_str(&format!("line {i}\n"));
        }
        std::fs::write(&path, &text).expect("write");
        let tail = log_tail(&path).expect("tail");
        assert!(tail.len() as u64 <= LOG_TAIL_BYTES);
        assert!(tail.starts_with("line "));
        assert!(tail.ends_with("line 4999\n"));
        assert_eq!(log_tail(&dir.path().join("missing.log")), None);
    }
}
