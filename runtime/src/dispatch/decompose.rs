//! `[dispatch] auto_decompose = "PROFILE"`: as the dispatcher runs, the board's `triage` cards
//! are handed to that profile's agent, which answers their children ([`crate::triage`]); the
//! answer is applied by the board's `decompose` (one transaction; an invalid answer changes
//! nothing). At most `auto_decompose_per_tick` cards per pass, one pass at a time, on a thread
//! of its own (an agent's turn takes minutes; the ticks go on meanwhile). A card whose
//! decomposition failed is not tried again by this dispatcher (`kanban decompose ID --with`
//! retries it by hand); the failure is reported.

use std::collections::HashSet;

use serde::Serialize;

use crate::board::{Board, Decomposition, OpenOptions, Outcome, Status, TaskFilter};
use crate::config::Config;
use crate::sync::Arc;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::thread::JoinHandle;

use super::settings::Settings;

/// One card's automatic decomposition, for the dispatcher's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AutoDecomposed {
    pub task_id: String,
    pub profile: String,
    /// The children made (empty when it failed).
    pub child_ids: Vec<String>,
    /// Why it failed, when it did (the card stays in `triage`).
    pub error: Option<String>,
}

/// The auto-decomposition of one dispatcher (see the module doc).
pub struct AutoDecompose {
    profile: String,
    per_pass: usize,
    settings: Settings,
    /// Cards handed to a pass already (whatever came of them).
    tried: HashSet<String>,
    /// The pass on its thread, and whether it has finished (so joining never waits).
    running: Option<(JoinHandle<Vec<AutoDecomposed>>, Arc<AtomicBool>)>,
}

impl AutoDecompose {
    /// `None` when `[dispatch] auto_decompose` is not set.
    pub fn new(settings: &Settings) -> Option<AutoDecompose> {
        let (profile, per_pass) = settings.auto_decompose.clone()?;
        Some(AutoDecompose {
            profile,
            per_pass,
            settings: settings.clone(),
            tried: HashSet::new(),
            running: None,
        })
    }

    fn untried(&self, board: &Board) -> Vec<String> {
        let filter = TaskFilter {
            statuses: vec![Status::Triage],
            ..TaskFilter::default()
        };
        board
            .list_tasks(&filter)
            .map(|tasks| {
                tasks
                    .into_iter()
                    .map(|t| t.id)
                    .filter(|id| !self.tried.contains(id))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// What the finished pass did (if one finished), and a new pass started when none runs and
    /// untried triage cards wait.
    pub fn pump(&mut self, board: &Board) -> Vec<AutoDecomposed> {
        let mut done = Vec::new();
        if self
            .running
            .as_ref()
            .is_some_and(|(_, finished)| finished.load(Ordering::Acquire))
            && let Some((handle, _)) = self.running.take()
        {
            done = handle.join().unwrap_or_else(|_| {
                vec![AutoDecomposed {
                    task_id: String::new(),
                    profile: self.profile.clone(),
                    child_ids: Vec::new(),
                    error: Some("the auto-decomposition pass panicked".to_owned()),
                }]
            });
        }
        if self.running.is_none() {
            let mut cards = self.untried(board);
            cards.truncate(self.per_pass);
            if !cards.is_empty() {
                self.tried.extend(cards.iter().cloned());
                let (profile, settings) = (self.profile.clone(), self.settings.clone());
                let finished = Arc::new(AtomicBool::new(false));
                let flag = Arc::clone(&finished);
                match crate::identity::spawn("kanban-auto-decompose", move || {
                    // Set however the pass ends, a panic included.
                    let _finished = SetOnDrop(flag);
                    pass(&settings, &profile, &cards)
                }) {
                    Ok(handle) => self.running = Some((handle, finished)),
                    Err(e) => done.push(AutoDecomposed {
                        task_id: String::new(),
                        profile: self.profile.clone(),
                        child_ids: Vec::new(),
                        error: Some(format!("cannot start the auto-decomposition: {e}")),
                    }),
                }
            }
        }
        done
    }

    /// A pass runs, or triage cards wait for one (`--until-idle` waits for them).
    pub fn busy(&self, board: &Board) -> bool {
        self.running.is_some() || !self.untried(board).is_empty()
    }
}

/// Sets its flag when dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// One pass over `cards`, on its own connection to the board.
fn pass(settings: &Settings, profile: &str, cards: &[String]) -> Vec<AutoDecomposed> {
    let failed = |id: &str, error: String| AutoDecomposed {
        task_id: id.to_owned(),
        profile: profile.to_owned(),
        child_ids: Vec::new(),
        error: Some(error),
    };
    let setup = Config::load(&settings.root)
        .map_err(|e| crate::error_chain(&e))
        .and_then(|config| {
            Board::open(&settings.location, &OpenOptions::default())
                .map(|board| (config, board))
                .map_err(|e| crate::error_chain(&e))
        });
    let (config, board) = match setup {
        Ok(found) => found,
        Err(e) => return cards.iter().map(|id| failed(id, e.clone())).collect(),
    };
    cards
        .iter()
        .map(
            |id| match decompose_one(&settings.root, &config, &board, profile, id) {
                Ok(child_ids) => AutoDecomposed {
                    task_id: id.clone(),
                    profile: profile.to_owned(),
                    child_ids,
                    error: None,
                },
                Err(e) => failed(id, e),
            },
        )
        .collect()
}

fn decompose_one(
    root: &std::path::Path,
    config: &Config,
    board: &Board,
    profile: &str,
    id: &str,
) -> Result<Vec<String>, String> {
    let task = board.get_task(id).map_err(|e| crate::error_chain(&e))?;
    if task.status != Status::Triage {
        return Err(format!("it is {} now, no longer triage", task.status));
    }
    let prompt = crate::triage::decomposition_prompt(&task, config);
    let answer =
        crate::triage::ask(root, config, profile, &prompt).map_err(|e| crate::error_chain(&e))?;
    let children = crate::triage::children_from_answer(&answer, profile)
        .map_err(|e| crate::error_chain(&e))?;
    let how = Decomposition {
        root_assignee: None,
        promote: true,
        author: Some(profile),
    };
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    match board.decompose(id, &children, &how, now) {
        Ok(Outcome::Done(d)) => Ok(d.child_ids),
        Ok(Outcome::Refused(r)) => Err(r.to_string()),
        Err(e) => Err(crate::error_chain(&e)),
    }
}
