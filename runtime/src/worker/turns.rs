//! The turn loop: how a worker drives its agent across turns of one run. The direct worker
//! (`kanban worker`) uses it today; a managed worker only has to supply another [`TurnHost`].
//!
//! * **First turn** with the full prompt. Every turn is delimited in the task log
//!   (`[kanban-turn] …` / `[kanban-turn-end] …`), its output streams to the log as it is printed,
//!   and it appends a run-fenced `turn` event (number, kind, exit class, seconds).
//! * **In-place recovery.** A turn whose agent exits [`RETRYABLE_EXIT`] is retried in the same run
//!   with a "same task, do not start over" prompt, at most `budget` times per run, after a backoff
//!   (15 s, 45 s, 90 s by default; the last value repeats). The claim is proved before the wait
//!   and again right before the retry; a lost claim ends the loop as [`LoopEnd::Superseded`]
//!   without another turn. Rate limits (75), terminal errors (78), interrupts (130) and every
//!   other failure are never retried in place: the worker exits with their class.
//! * **Classic mode** (not a goal): a turn that ends successfully with the run still open gets
//!   the stop nudge, at most [`MAX_NUDGES`] times.
//! * **Goal mode.** After every settled turn (exit 0) the run's standing is read, fenced by the
//!   run: done, blocked or review end the loop; a run that is no longer ours ends it as
//!   superseded, writing nothing more. Otherwise the judge (if the profile has one) gives its
//!   verdict: `blocked` blocks the task with the judge's reason; `done` earns one finalize turn, a
//!   second `done` blocks with `blocked_budget`; anything else continues. The turn budget is
//!   checked before each extra turn; when it is spent the task is blocked with `blocked_budget`
//!   (run-fenced). Recovery turns do not count against the goal budget.
//!
//! The exit code is always the last turn's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::agent::{Agent, AgentSession, OutputSink, Reply, Request, TurnExit};
use crate::board::{BoardError, Comment, Event, RunStatus, TurnKind};
use crate::identity;
use crate::proc::exit::code;

use super::prompt::{CONTINUATION_NUDGE, FINALIZE_NUDGE, RECOVERY_NUDGE, STOP_NUDGE};
use super::{MAX_NUDGES, exit_code};

/// Goal turns when neither the task nor its profile says otherwise.
pub(crate) const DEFAULT_GOAL_MAX_TURNS: u32 = 20;
/// The block reason of a goal whose turn budget is spent (or that its judge called done twice
/// while the task stayed open).
pub(crate) const BLOCKED_BUDGET: &str = "blocked_budget";
/// The block reason of a goal its judge called unreachable without saying why.
pub(crate) const BLOCKED_UNACHIEVABLE: &str = "blocked_unachievable";

/// What the loop needs from the worker that runs it: run-fenced reads and writes, the claim
/// proof, the interrupt flag, the clock, the backoff wait and the task log.
pub trait TurnHost {
    /// Where the worker's run stands (see [`RunStatus`]).
    fn run_status(&self) -> Result<RunStatus, BoardError>;
    /// Whether the worker still holds a live claim on its run.
    fn claim_is_live(&self) -> Result<bool, BoardError>;
    /// Blocks the task, fenced by the run; `false` when the run was no longer ours.
    fn block(&self, reason: &str) -> Result<bool, BoardError>;
    /// Appends a `turn` event, fenced by the run; `false` when the run was no longer ours.
    fn record_turn(&self, event: &Event) -> Result<bool, BoardError>;
    /// Whether SIGTERM / SIGINT reached the worker.
    fn interrupted(&self) -> bool;
    /// Epoch seconds (the injected clock).
    fn now(&self) -> i64;
    /// Waits `seconds` before an in-place retry; `Ok(false)` when the wait ended early because
    /// the worker was interrupted or lost its claim.
    fn backoff(&self, seconds: f64) -> Result<bool, BoardError>;
    /// The task log: agent output is streamed to it, the loop's own lines go there too.
    fn sink(&self) -> &Arc<dyn OutputSink>;
    /// The task's comments with an id above `after_id`, oldest first.
    fn comments_after(&self, after_id: i64) -> Result<Vec<Comment>, BoardError>;
    /// Stores the agent's session and usage on the run, fenced by the run; `false` when the
    /// run was no longer ours.
    fn record_agent_session(&self, session: &AgentSession) -> Result<bool, BoardError>;
}

/// A goal: what the judge is told, the turn budget and the judge's argv (empty: no judge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Goal {
    pub task_id: String,
    pub text: String,
    pub max_turns: u32,
    pub judge: Vec<String>,
}

/// In-place recovery: retries per run and the wait before each (the last value repeats).
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    pub budget: u32,
    pub backoff_seconds: Vec<f64>,
}

impl Recovery {
    /// The wait before retry `n` (1-based).
    pub fn wait_before(&self, n: u32) -> f64 {
        let i = usize::try_from(n.saturating_sub(1)).unwrap_or(usize::MAX);
        self.backoff_seconds
            .get(i)
            .or(self.backoff_seconds.last())
            .copied()
            .unwrap_or(0.0)
    }
}

/// Everything one run's loop is given.
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    pub prompt: &'a str,
    /// What `builtin:shell` runs (the task body).
    pub script: &'a str,
    pub workdir: Option<&'a std::path::Path>,
    /// `None`: classic mode.
    pub goal: Option<Goal>,
    pub recovery: Recovery,
    /// Whether the stop nudge is on (classic mode).
    pub stop_nudges: bool,
    /// The newest comment id the first prompt already holds: later comments are delivered at
    /// the next turn boundary, each once.
    pub comments_seen: i64,
    /// The author of the worker's own comments (the task's assignee), never delivered back.
    pub own_author: Option<&'a str>,
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopEnd {
    /// Exit with this code (the last turn's class); `last_output` goes into `worker_result`.
    Exit { code: i32, last_output: String },
    /// The run is no longer the worker's: nothing more may be written.
    Superseded,
}

/// What the goal judge said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Continue,
    Done,
    Blocked(String),
}

impl Verdict {
    /// Reads a judge's stdout: its first word is the verdict (`continue`, `done`, `blocked`; a
    /// trailing `:` is ignored, case too); for `blocked` the rest of the output is the reason.
    /// Anything else is `continue`.
    pub fn parse(stdout: &str) -> Verdict {
        let text = stdout.trim();
        let word_end = text.find(char::is_whitespace).unwrap_or(text.len());
        let word = text[..word_end].trim_end_matches(':').to_ascii_lowercase();
        match word.as_str() {
            "done" => Verdict::Done,
            "blocked" => {
                let rest = text[word_end..].trim().trim_start_matches(':').trim();
                Verdict::Blocked(if rest.is_empty() {
                    BLOCKED_UNACHIEVABLE.to_owned()
                } else {
                    rest.to_owned()
                })
            }
            _ => Verdict::Continue,
        }
    }
}

struct Turn {
    reply: Reply,
    /// The final response, or the output when the agent gave none.
    last: String,
}

struct Loop<'a> {
    agent: &'a mut dyn Agent,
    host: &'a dyn TurnHost,
    plan: &'a Plan<'a>,
    /// Turns run so far (every kind).
    turns: u32,
    /// In-place retries used so far.
    recoveries: u32,
    /// The newest comment id the agent has been given (or that was skipped as its own).
    comments_seen: i64,
    /// The host's log, remembering whether it is at the start of a line.
    sink: Arc<LineSink>,
}

/// Wraps the task log so the loop's own lines always start a line, even after agent output that
/// did not end with a newline.
struct LineSink {
    inner: Arc<dyn OutputSink>,
    at_line_start: AtomicBool,
}

impl OutputSink for LineSink {
    fn write(&self, bytes: &[u8]) {
        if let Some(last) = bytes.last() {
            self.inner.write(bytes);
            self.at_line_start.store(*last == b'\n', Ordering::SeqCst);
        }
    }
}

/// A failed `run_turn`: the run was lost, or the board could not be read or written.
enum Stop {
    Superseded,
    Board(BoardError),
}

impl From<BoardError> for Stop {
    fn from(e: BoardError) -> Self {
        Stop::Board(e)
    }
}

impl Loop<'_> {
    fn log(&self, line: &str) {
        let start = if self.sink.at_line_start.load(Ordering::SeqCst) {
            ""
        } else {
            "\n"
        };
        self.sink.write(format!("{start}{line}\n").as_bytes());
    }

    /// One turn: delimiters, streamed output, the `turn` event.
    fn one(&mut self, kind: TurnKind, text: &str) -> Result<Turn, BoardError> {
        self.turns += 1;
        let n = self.turns;
        self.log(&format!("[kanban-turn] turn={n} kind={}", kind.as_str()));
        let started = self.host.now();
        let request = Request {
            prompt: text,
            script: self.plan.script,
            workdir: self.plan.workdir,
            goal: self.plan.goal.is_some(),
        };
        let sink: Arc<dyn OutputSink> = self.sink.clone();
        let reply = match self.agent.run_streaming(&request, &sink) {
            Ok(reply) => reply,
            Err(err) => {
                let message = format!("agent failed: {}", crate::error_chain(&err));
                self.log(&format!("kanban worker: {message}"));
                // E.g. a built-in agent's own completion was refused because the run had
                // already closed: the run is over, which is not this worker's failure.
                let over = self.host.run_status()? != RunStatus::Running;
                Reply {
                    exit: if over {
                        TurnExit::Success
                    } else {
                        TurnExit::Failed(1)
                    },
                    final_response: String::new(),
                    output: message,
                }
            }
        };
        let seconds = (self.host.now() - started).max(0);
        let exit = if self.host.interrupted() && reply.exit != TurnExit::Success {
            TurnExit::Interrupted
        } else {
            reply.exit
        };
        self.log(&format!(
            "[kanban-turn-end] turn={n} exit={} code={} seconds={seconds}",
            exit.class(),
            exit.code()
        ));
        let event = Event::Turn {
            turn: n,
            kind,
            exit: exit.class().to_owned(),
            exit_code: exit.code(),
            seconds,
        };
        if !self.host.record_turn(&event)? {
            self.log("kanban worker: the run is no longer this worker's; turn not recorded");
        }
        if let Some(session) = self.agent.session() {
            let session = session.clone();
            self.host.record_agent_session(&session)?;
        }
        let last = if reply.final_response.is_empty() {
            reply.output.clone()
        } else {
            reply.final_response.clone()
        };
        Ok(Turn {
            reply: Reply { exit, ..reply },
            last,
        })
    }

    /// A turn and its in-place retries.
    fn run_turn(&mut self, kind: TurnKind, text: &str) -> Result<Turn, Stop> {
        let mut turn = self.one(kind, text)?;
        while turn.reply.exit.is_retryable() && !self.host.interrupted() {
            let budget = self.plan.recovery.budget;
            if self.recoveries >= budget {
                self.log(&format!(
                    "kanban worker: the turn failed retryably and the recovery budget ({budget}) is spent"
                ));
                break;
            }
            if !self.host.claim_is_live()? {
                self.log("kanban worker: claim lost before an in-place retry; stopping");
                return Err(Stop::Superseded);
            }
            let n = self.recoveries + 1;
            let wait = self.plan.recovery.wait_before(n);
            self.log(&format!(
                "kanban worker: the turn failed retryably; retry {n}/{budget} in place after {wait} s"
            ));
            if !self.host.backoff(wait)? {
                if self.host.interrupted() {
                    break;
                }
                self.log("kanban worker: claim lost during the backoff; stopping");
                return Err(Stop::Superseded);
            }
            if !self.host.claim_is_live()? {
                self.log("kanban worker: claim lost after the backoff; stopping");
                return Err(Stop::Superseded);
            }
            self.recoveries = n;
            let retry = self.follow_up(RECOVERY_NUDGE)?;
            turn = self.one(TurnKind::Recovery, &retry)?;
        }
        Ok(turn)
    }

    /// The prompt of a turn after the first: the nudge, then the task prompt again unless the
    /// agent resumes its own conversation (which already holds it), then the comments added
    /// since the last turn began (each once per run, with a `comment_delivered` event).
    fn follow_up(&mut self, nudge: &str) -> Result<String, BoardError> {
        let mut text = if self.agent.resumes_session() {
            nudge.to_owned()
        } else {
            format!("{nudge}\n\n{}", self.plan.prompt)
        };
        let comments = self.host.comments_after(self.comments_seen)?;
        let Some(newest) = comments.iter().map(|c| c.id).max() else {
            return Ok(text);
        };
        self.comments_seen = newest;
        let fresh: Vec<&Comment> = comments
            .iter()
            .filter(|c| !c.body.trim().is_empty())
            .filter(|c| Some(c.author.trim()) != self.plan.own_author.map(str::trim))
            .collect();
        if fresh.is_empty() {
            return Ok(text);
        }
        let pairs: Vec<(String, String)> = fresh
            .iter()
            .map(|c| (c.author.clone(), c.body.clone()))
            .collect();
        text.push_str("\n\n");
        text.push_str(&super::prompt::delivered_comments(&pairs));
        let event = Event::CommentDelivered {
            turn: self.turns + 1,
            comment_ids: fresh.iter().map(|c| c.id).collect(),
        };
        if self.host.record_turn(&event)? {
            self.log(&format!(
                "kanban worker: {} new comment(s) delivered to the agent",
                fresh.len()
            ));
        }
        Ok(text)
    }

    /// The worker's exit for a turn, or `None` when it settled (exit 0) and work may go on.
    fn unsettled(&self, turn: &Turn) -> Option<LoopEnd> {
        if self.host.interrupted() {
            return Some(LoopEnd::Exit {
                code: code::INTERRUPTED,
                last_output: turn.last.clone(),
            });
        }
        let rc = exit_code(turn.reply.exit);
        (rc != code::OK).then(|| LoopEnd::Exit {
            code: rc,
            last_output: turn.last.clone(),
        })
    }

    fn classic(&mut self) -> Result<LoopEnd, Stop> {
        let mut turn = self.run_turn(TurnKind::First, self.plan.prompt)?;
        let mut nudges = 0;
        loop {
            if let Some(end) = self.unsettled(&turn) {
                return Ok(end);
            }
            let ok = LoopEnd::Exit {
                code: code::OK,
                last_output: turn.last.clone(),
            };
            if self.host.run_status()? != RunStatus::Running {
                return Ok(ok);
            }
            if nudges >= MAX_NUDGES || !self.plan.stop_nudges {
                self.log(&format!(
                    "kanban worker: the agent ended without `kanban complete` or `kanban block` ({nudges} nudges)"
                ));
                return Ok(ok);
            }
            nudges += 1;
            self.log(&format!("kanban worker: stop nudge {nudges}/{MAX_NUDGES}"));
            let text = self.follow_up(STOP_NUDGE)?;
            turn = self.run_turn(TurnKind::Continuation, &text)?;
        }
    }

    fn goal(&mut self, goal: &Goal) -> Result<LoopEnd, Stop> {
        let mut turn = self.run_turn(TurnKind::First, self.plan.prompt)?;
        let mut goal_turns = 1;
        let mut said_done = false;
        loop {
            if let Some(end) = self.unsettled(&turn) {
                return Ok(end);
            }
            let end = |last: &str| LoopEnd::Exit {
                code: code::OK,
                last_output: last.to_owned(),
            };
            match self.host.run_status()? {
                RunStatus::Running => {}
                RunStatus::Superseded => {
                    self.log("kanban worker: the run is no longer this worker's; stopping");
                    return Err(Stop::Superseded);
                }
                status => {
                    self.log(&format!("kanban worker: goal ended: {status:?}"));
                    return Ok(end(&turn.last));
                }
            }
            let verdict = if goal.judge.is_empty() {
                Verdict::Continue
            } else {
                self.judge(goal, &turn.last)
            };
            let kind = match verdict {
                Verdict::Blocked(reason) => {
                    self.log(&format!("kanban worker: the judge says blocked: {reason}"));
                    return self.block(&reason, &turn.last);
                }
                Verdict::Done if said_done => {
                    self.log("kanban worker: the judge says done again but the task is still open");
                    return self.block(BLOCKED_BUDGET, &turn.last);
                }
                Verdict::Done => {
                    said_done = true;
                    TurnKind::Finalize
                }
                Verdict::Continue => TurnKind::Continuation,
            };
            if goal_turns >= goal.max_turns {
                self.log(&format!(
                    "kanban worker: goal turn budget ({}) spent with the task still open",
                    goal.max_turns
                ));
                return self.block(BLOCKED_BUDGET, &turn.last);
            }
            let nudge = if kind == TurnKind::Finalize {
                FINALIZE_NUDGE
            } else {
                CONTINUATION_NUDGE
            };
            let text = self.follow_up(nudge)?;
            turn = self.run_turn(kind, &text)?;
            goal_turns += 1;
        }
    }

    /// Blocks the task (run-fenced); the exit is the last turn's (0).
    fn block(&self, reason: &str, last: &str) -> Result<LoopEnd, Stop> {
        if self.host.block(reason)? {
            self.log(&format!("kanban worker: task blocked: {reason}"));
            Ok(LoopEnd::Exit {
                code: code::OK,
                last_output: last.to_owned(),
            })
        } else {
            self.log("kanban worker: the run is no longer this worker's; not blocking");
            Err(Stop::Superseded)
        }
    }

    /// Runs the judge; a judge that cannot run or fails counts as `continue`.
    fn judge(&self, goal: &Goal, last: &str) -> Verdict {
        match run_judge(&goal.judge, goal, last, self.plan.workdir) {
            Ok(stdout) => {
                let verdict = Verdict::parse(&stdout);
                self.log(&format!("kanban worker: judge verdict: {verdict:?}"));
                verdict
            }
            Err(message) => {
                self.log(&format!(
                    "kanban worker: the judge failed ({message}); continuing"
                ));
                Verdict::Continue
            }
        }
    }
}

/// Runs the judge command outside the worker's identity: one JSON object `{"task_id", "goal",
/// "last_response"}` on its stdin, its stdout returned. A start failure or a non-zero exit is an error message.
fn run_judge(
    argv: &[String],
    goal: &Goal,
    last: &str,
    workdir: Option<&std::path::Path>,
) -> Result<String, String> {
    use std::io::{Read, Write};
    use std::process::Stdio;

    let input = serde_json::json!({
        "task_id": goal.task_id,
        "goal": goal.text,
        "last_response": last,
    })
    .to_string();
    // The judge only judges: it runs outside the worker's identity (a scrubbed environment with
    // the delegated-child marker), so it cannot complete, block or otherwise act on the task.
    let _not_the_worker = identity::non_dispatcher_owned_context();
    let mut cmd = identity::command(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(dir) = workdir {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().map_err(|e| format!("cannot start it: {e}"))?;
    let stdin = child.stdin.take();
    let feeder = identity::spawn("judge-stdin", move || {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(input.as_bytes());
        }
    })
    .map_err(|e| format!("cannot feed it: {e}"))?;
    let mut out = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    let _ = feeder.join();
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("it exited with {status}"));
    }
    Ok(out)
}

/// Drives `agent` through one run's turns (see the module doc).
pub fn drive(
    agent: &mut dyn Agent,
    host: &dyn TurnHost,
    plan: &Plan<'_>,
) -> Result<LoopEnd, BoardError> {
    let mut state = Loop {
        agent,
        host,
        plan,
        turns: 0,
        recoveries: 0,
        comments_seen: plan.comments_seen,
        sink: Arc::new(LineSink {
            inner: host.sink().clone(),
            at_line_start: AtomicBool::new(true),
        }),
    };
    let result = match &plan.goal {
        Some(goal) => state.goal(goal),
        None => state.classic(),
    };
    match result {
        Ok(end) => Ok(end),
        Err(Stop::Superseded) => Ok(LoopEnd::Superseded),
        Err(Stop::Board(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use crate::agent::RETRYABLE_EXIT;
    use std::cell::RefCell;
    use std::sync::Mutex;

    use super::*;
    use crate::agent::AgentError;

    /// An agent that replays scripted exits and records the prompts it got.
    struct Scripted {
        exits: Vec<TurnExit>,
        prompts: Arc<Mutex<Vec<String>>>,
    }

    impl Agent for Scripted {
        fn run(&mut self, request: &Request<'_>) -> Result<Reply, AgentError> {
            let mut prompts = self.prompts.lock().unwrap();
            prompts.push(request.prompt.to_owned());
            let exit = self
                .exits
                .get(prompts.len() - 1)
                .copied()
                .unwrap_or(TurnExit::Success);
            Ok(Reply {
                exit,
                final_response: format!("reply {}", prompts.len()),
                output: String::new(),
            })
        }
    }

    #[derive(Default)]
    struct Collect(Mutex<Vec<u8>>);
    impl OutputSink for Collect {
        fn write(&self, bytes: &[u8]) {
            self.0.lock().unwrap().extend_from_slice(bytes);
        }
    }

    /// An agent that prints without a final newline.
    struct Unterminated;
    impl Agent for Unterminated {
        fn run(&mut self, _request: &Request<'_>) -> Result<Reply, AgentError> {
            unreachable!("the loop streams")
        }
        fn run_streaming(
            &mut self,
            _request: &Request<'_>,
            sink: &Arc<dyn OutputSink>,
        ) -> Result<Reply, AgentError> {
            sink.write(b"no newline");
            Ok(Reply {
                exit: TurnExit::Failed(2),
                final_response: String::new(),
                output: String::new(),
            })
        }
    }

    #[test]
    fn turn_delimiters_always_start_a_line() {
        let collect = Arc::new(Collect::default());
        let mut host = Fake::new(&[], &[]);
        host.sink = collect.clone();
        drive(&mut Unterminated, &host, &plan(None, 0)).unwrap();
        let log = String::from_utf8(collect.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            log,
            "[kanban-turn] turn=1 kind=first\nno newline\n\
             [kanban-turn-end] turn=1 exit=failed code=2 seconds=0\n"
        );
    }

    /// A board in memory: the run's status after each status read, the writes it saw.
    struct Fake {
        statuses: RefCell<Vec<RunStatus>>,
        live: RefCell<Vec<bool>>,
        blocks: RefCell<Vec<String>>,
        turns: RefCell<Vec<Event>>,
        waits: RefCell<Vec<f64>>,
        comments: RefCell<Vec<Comment>>,
        sink: Arc<dyn OutputSink>,
    }

    impl Fake {
        fn new(statuses: &[RunStatus], live: &[bool]) -> Fake {
            Fake {
                statuses: RefCell::new(statuses.iter().rev().copied().collect()),
                live: RefCell::new(live.iter().rev().copied().collect()),
                blocks: RefCell::default(),
                turns: RefCell::default(),
                waits: RefCell::default(),
                comments: RefCell::default(),
                sink: Arc::new(Collect::default()),
            }
        }
        fn kinds(&self) -> Vec<TurnKind> {
            self.turns
                .borrow()
                .iter()
                .filter_map(|e| match e {
                    Event::Turn { kind, .. } => Some(*kind),
                    _ => None,
                })
                .collect()
        }
    }

    impl TurnHost for Fake {
        fn run_status(&self) -> Result<RunStatus, BoardError> {
            Ok(self
                .statuses
                .borrow_mut()
                .pop()
                .unwrap_or(RunStatus::Running))
        }
        fn claim_is_live(&self) -> Result<bool, BoardError> {
            Ok(self.live.borrow_mut().pop().unwrap_or(true))
        }
        fn block(&self, reason: &str) -> Result<bool, BoardError> {
            self.blocks.borrow_mut().push(reason.to_owned());
            Ok(true)
        }
        fn record_turn(&self, event: &Event) -> Result<bool, BoardError> {
            self.turns.borrow_mut().push(event.clone());
            Ok(true)
        }
        fn interrupted(&self) -> bool {
            false
        }
        fn now(&self) -> i64 {
            1_000
        }
        fn backoff(&self, seconds: f64) -> Result<bool, BoardError> {
            self.waits.borrow_mut().push(seconds);
            Ok(true)
        }
        fn sink(&self) -> &Arc<dyn OutputSink> {
            &self.sink
        }
        fn comments_after(&self, after_id: i64) -> Result<Vec<Comment>, BoardError> {
            Ok(self
                .comments
                .borrow()
                .iter()
                .filter(|c| c.id > after_id)
                .cloned()
                .collect())
        }
        fn record_agent_session(&self, _session: &AgentSession) -> Result<bool, BoardError> {
            Ok(true)
        }
    }

    fn plan(goal: Option<u32>, budget: u32) -> Plan<'static> {
        Plan {
            prompt: "PROMPT",
            script: "",
            workdir: None,
            goal: goal.map(|max_turns| Goal {
                task_id: "t_1".into(),
                text: "goal".into(),
                max_turns,
                judge: Vec::new(),
            }),
            recovery: Recovery {
                budget,
                backoff_seconds: vec![15.0, 45.0, 90.0],
            },
            stop_nudges: true,
            comments_seen: 0,
            own_author: Some("bot"),
        }
    }

    fn agent(exits: &[TurnExit]) -> (Scripted, Arc<Mutex<Vec<String>>>) {
        let prompts = Arc::new(Mutex::new(Vec::new()));
        (
            Scripted {
                exits: exits.to_vec(),
                prompts: prompts.clone(),
            },
            prompts,
        )
    }

    const RETRY: TurnExit = TurnExit::Failed(RETRYABLE_EXIT);

    #[test]
    fn verdicts_parse_leniently_and_default_to_continue() {
        assert_eq!(Verdict::parse(" DONE\n"), Verdict::Done);
        assert_eq!(Verdict::parse("continue"), Verdict::Continue);
        assert_eq!(Verdict::parse("wait"), Verdict::Continue);
        assert_eq!(Verdict::parse(""), Verdict::Continue);
        assert_eq!(
            Verdict::parse("blocked: no access\n"),
            Verdict::Blocked("no access".into())
        );
        assert_eq!(
            Verdict::parse("blocked"),
            Verdict::Blocked(BLOCKED_UNACHIEVABLE.into())
        );
    }

    #[test]
    fn backoff_follows_the_list_and_repeats_its_last_value() {
        let r = plan(None, 3).recovery;
        assert_eq!(
            [1, 2, 3, 4].map(|n| r.wait_before(n)),
            [15.0, 45.0, 90.0, 90.0]
        );
    }

    #[test]
    fn a_goal_continues_until_done_and_exits_with_the_last_turn() {
        let (mut a, prompts) = agent(&[]);
        let host = Fake::new(
            &[RunStatus::Running, RunStatus::Running, RunStatus::Done],
            &[],
        );
        let end = drive(&mut a, &host, &plan(Some(20), 3)).unwrap();
        assert!(matches!(end, LoopEnd::Exit { code: 0, .. }), "{end:?}");
        assert_eq!(
            host.kinds(),
            [
                TurnKind::First,
                TurnKind::Continuation,
                TurnKind::Continuation
            ]
        );
        assert!(prompts.lock().unwrap()[1].starts_with(CONTINUATION_NUDGE));
        assert!(host.blocks.borrow().is_empty());
    }

    #[test]
    fn a_spent_goal_budget_blocks_before_the_extra_turn() {
        let (mut a, _) = agent(&[]);
        let host = Fake::new(&[], &[]);
        drive(&mut a, &host, &plan(Some(3), 3)).unwrap();
        assert_eq!(host.turns.borrow().len(), 3);
        assert_eq!(*host.blocks.borrow(), [BLOCKED_BUDGET]);
    }

    #[test]
    fn a_superseded_goal_run_ends_without_writing() {
        let (mut a, _) = agent(&[]);
        let host = Fake::new(&[RunStatus::Superseded], &[]);
        assert_eq!(
            drive(&mut a, &host, &plan(Some(5), 3)).unwrap(),
            LoopEnd::Superseded
        );
        assert_eq!(host.turns.borrow().len(), 1);
        assert!(host.blocks.borrow().is_empty());
    }

    #[test]
    fn a_failed_goal_turn_ends_the_loop_with_its_class() {
        let (mut a, _) = agent(&[TurnExit::Success, TurnExit::RateLimited]);
        let host = Fake::new(&[], &[]);
        let end = drive(&mut a, &host, &plan(Some(5), 3)).unwrap();
        assert!(matches!(end, LoopEnd::Exit { code: 75, .. }), "{end:?}");
        assert_eq!(host.turns.borrow().len(), 2);
    }

    #[test]
    fn retryable_turns_are_retried_with_backoff_within_the_budget() {
        let (mut a, prompts) = agent(&[RETRY, RETRY, RETRY, RETRY]);
        let host = Fake::new(&[], &[]);
        let end = drive(&mut a, &host, &plan(None, 3)).unwrap();
        assert!(matches!(end, LoopEnd::Exit { code: 1, .. }), "{end:?}");
        assert_eq!(*host.waits.borrow(), [15.0, 45.0, 90.0]);
        assert_eq!(
            host.kinds(),
            [
                TurnKind::First,
                TurnKind::Recovery,
                TurnKind::Recovery,
                TurnKind::Recovery
            ]
        );
        assert!(prompts.lock().unwrap()[1].starts_with(RECOVERY_NUDGE));
    }

    #[test]
    fn a_zero_budget_never_retries() {
        let (mut a, _) = agent(&[RETRY]);
        let host = Fake::new(&[], &[]);
        let end = drive(&mut a, &host, &plan(None, 0)).unwrap();
        assert!(matches!(end, LoopEnd::Exit { code: 1, .. }), "{end:?}");
        assert_eq!(host.turns.borrow().len(), 1);
    }

    #[test]
    fn the_claim_is_proved_before_and_after_the_backoff() {
        for live in [[false, true], [true, false]] {
            let (mut a, _) = agent(&[RETRY]);
            let host = Fake::new(&[], &live);
            let end = drive(&mut a, &host, &plan(None, 3)).unwrap();
            assert_eq!(end, LoopEnd::Superseded);
            assert_eq!(host.turns.borrow().len(), 1, "{live:?}");
            assert_eq!(host.waits.borrow().len(), usize::from(live[0]));
        }
    }

    #[test]
    fn terminal_interrupt_and_plain_failures_are_not_retried() {
        for (exit, code) in [
            (TurnExit::RateLimited, 75),
            (TurnExit::Failed(75), 75),
            (TurnExit::TerminalProvider, 78),
            (TurnExit::Interrupted, 130),
            (TurnExit::Failed(2), 1),
        ] {
            let (mut a, _) = agent(&[exit]);
            let host = Fake::new(&[], &[]);
            let end = drive(&mut a, &host, &plan(Some(5), 3)).unwrap();
            assert!(
                matches!(end, LoopEnd::Exit { code: c, .. } if c == code),
                "{exit:?}"
            );
            assert_eq!(host.turns.borrow().len(), 1);
            assert!(host.waits.borrow().is_empty());
        }
    }

    #[test]
    fn classic_mode_nudges_twice_then_stops() {
        let (mut a, prompts) = agent(&[]);
        let host = Fake::new(&[], &[]);
        let end = drive(&mut a, &host, &plan(None, 3)).unwrap();
        assert!(matches!(end, LoopEnd::Exit { code: 0, .. }));
        assert_eq!(host.turns.borrow().len(), 1 + MAX_NUDGES);
        assert!(prompts.lock().unwrap()[2].starts_with(STOP_NUDGE));
    }

    fn comment(id: i64, author: &str, body: &str) -> Comment {
        Comment {
            id,
            task_id: "t_1".into(),
            author: author.into(),
            body: body.into(),
            created_at: 0,
        }
    }

    #[test]
    fn a_comment_reaches_the_next_turn_once_and_the_agents_own_never() {
        let (mut a, prompts) = agent(&[]);
        let host = Fake::new(
            &[RunStatus::Running, RunStatus::Running, RunStatus::Done],
            &[],
        );
        host.comments.borrow_mut().extend([
            comment(1, "op", "old, in the first prompt"),
            comment(2, "op", "use the staging db"),
            comment(3, "bot", "my own note"),
        ]);
        let mut p = plan(Some(20), 3);
        p.comments_seen = 1;
        drive(&mut a, &host, &p).unwrap();
        let prompts = prompts.lock().unwrap();
        assert!(!prompts[0].contains("staging"));
        assert!(prompts[1].contains("New note on your kanban task from the operator (delivered mid-run):\n- op: use the staging db"), "{}", prompts[1]);
        assert!(!prompts[1].contains("my own note") && !prompts[1].contains("old, in"));
        assert!(!prompts[2].contains("staging"), "{}", prompts[2]);
        let delivered: Vec<_> = host
            .turns
            .borrow()
            .iter()
            .filter_map(|e| match e {
                Event::CommentDelivered { turn, comment_ids } => Some((*turn, comment_ids.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(delivered, [(2, vec![2])]);
    }
}
