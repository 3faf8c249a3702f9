//! Presets for real agent CLIs (`agent = "claude-code" | "codex" | "gemini" | "opencode" |
//! "aider" | "hermes"`): each knows its CLI's non-interactive invocation, how the prompt is passed, how its
//! structured output reads (parsed line by line into readable log lines as they arrive, the final
//! response, the session id, token usage and cost), how its failures map to the worker's exit
//! classes (rate limit or quota → 75, expired login or bad key → 78, transient → 76) and how a
//! follow-up turn of the same run resumes its session. `command = [...]` replaces the preset's
//! program and fixed arguments; the steering flags (model, provider, reasoning effort), the
//! resume arguments and the prompt are still appended. The table is the README's "Agents".
//!
//! The agent object lives for one worker process, that is one run: a session is resumed only
//! within the run that started it, never across claims.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::Arc;

use serde_json::Value;

use super::{
    Agent, AgentError, AgentSession, OUTPUT_LIMIT, OutputSink, RETRYABLE_EXIT, Reply, Request,
    Steering, TurnExit, Usage, profile_env, tail,
};
use crate::config::ProfileConfig;
use crate::identity;

/// Seconds the original keeps between the agent's own terminal timeout and the runtime cap, so
/// the agent can still hand off (`complete` / `block`) before the cap kills it.
pub(crate) const TERMINAL_TIMEOUT_GRACE_SECONDS: i64 = 30;

/// Which CLI a preset drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Preset {
    ClaudeCode,
    Codex,
    Gemini,
    OpenCode,
    Aider,
    Hermes,
}

impl Preset {
    pub fn parse(name: &str) -> Option<Preset> {
        Some(match name {
            "claude-code" => Preset::ClaudeCode,
            "codex" => Preset::Codex,
            "gemini" => Preset::Gemini,
            "opencode" => Preset::OpenCode,
            "aider" => Preset::Aider,
            "hermes" => Preset::Hermes,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Preset::ClaudeCode => "claude-code",
            Preset::Codex => "codex",
            Preset::Gemini => "gemini",
            Preset::OpenCode => "opencode",
            Preset::Aider => "aider",
            Preset::Hermes => "hermes",
        }
    }

    /// The program and fixed arguments (what `command` replaces).
    fn base(self, profile_name: &str) -> Vec<String> {
        let v: &[&str] = match self {
            Preset::ClaudeCode => &[
                "claude",
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--dangerously-skip-permissions",
            ],
            Preset::Codex => &[
                "codex",
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
            ],
            Preset::Gemini => &["gemini", "--output-format", "stream-json", "--yolo"],
            Preset::OpenCode => &["opencode", "run", "--format", "json"],
            Preset::Aider => &["aider", "--yes-always", "--no-pretty", "--no-check-update"],
            Preset::Hermes => {
                let mut argv = vec!["hermes".to_owned()];
                if !profile_name.is_empty() {
                    argv.extend(["-p".to_owned(), profile_name.to_owned()]);
                }
                return argv;
            }
        };
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    /// The task's steering mapped to this CLI's own flags (one place to rewire).
    fn steering_args(self, s: &Steering) -> Vec<String> {
        let mut argv = Vec::new();
        match self {
            Preset::ClaudeCode => {
                if let Some(m) = &s.model {
                    argv.extend(["--model".to_owned(), m.clone()]);
                }
            }
            Preset::Codex => {
                if let Some(m) = &s.model {
                    argv.extend(["--model".to_owned(), m.clone()]);
                }
                if let Some(p) = &s.provider {
                    argv.extend(["-c".to_owned(), format!("model_provider={p}")]);
                }
                if let Some(r) = &s.reasoning_effort {
                    argv.extend(["-c".to_owned(), format!("model_reasoning_effort={r}")]);
                }
            }
            Preset::Gemini => {
                if let Some(m) = &s.model {
                    argv.extend(["--model".to_owned(), m.clone()]);
                }
            }
            Preset::OpenCode => {
                // OpenCode names a model `provider/model`.
                if let Some(m) = &s.model {
                    let model = match &s.provider {
                        Some(p) if !m.contains('/') => format!("{p}/{m}"),
                        _ => m.clone(),
                    };
                    argv.extend(["--model".to_owned(), model]);
                }
            }
            Preset::Aider => {
                if let Some(m) = &s.model {
                    argv.extend(["--model".to_owned(), m.clone()]);
                }
                if let Some(r) = &s.reasoning_effort {
                    argv.extend(["--reasoning-effort".to_owned(), r.clone()]);
                }
            }
            Preset::Hermes => {
                if let Some(m) = &s.model {
                    argv.extend(["--model".to_owned(), m.clone()]);
                }
                if let Some(p) = &s.provider {
                    argv.extend(["--provider".to_owned(), p.clone()]);
                }
                for skill in &s.skills {
                    argv.extend(["--skills".to_owned(), skill.clone()]);
                }
            }
        }
        argv
    }

    /// The whole argv of a turn (`session`: resume it) and whether the prompt goes to stdin.
    fn argv(
        self,
        base: &[String],
        steering: &[String],
        session: Option<&str>,
        prompt: &str,
    ) -> (Vec<String>, bool) {
        let mut argv = base.to_vec();
        argv.extend_from_slice(steering);
        match self {
            Preset::ClaudeCode => {
                if let Some(id) = session {
                    argv.extend(["--resume".to_owned(), id.to_owned()]);
                }
                (argv, true)
            }
            Preset::Codex => {
                if let Some(id) = session {
                    argv.extend(["resume".to_owned(), id.to_owned()]);
                }
                argv.push("-".to_owned());
                (argv, true)
            }
            Preset::Gemini => {
                if let Some(id) = session {
                    argv.extend(["--resume".to_owned(), id.to_owned()]);
                }
                argv.extend(["--prompt".to_owned(), prompt.to_owned()]);
                (argv, false)
            }
            Preset::OpenCode => {
                if let Some(id) = session {
                    argv.extend(["--session".to_owned(), id.to_owned()]);
                }
                argv.push(prompt.to_owned());
                (argv, false)
            }
            Preset::Aider => {
                argv.extend(["--message".to_owned(), prompt.to_owned()]);
                (argv, false)
            }
            Preset::Hermes => {
                argv.extend(["chat".to_owned(), "-q".to_owned(), prompt.to_owned()]);
                (argv, false)
            }
        }
    }

    /// Whether a follow-up turn resumes the session (so it gets only the new instructions).
    fn resumes(self) -> bool {
        matches!(
            self,
            Preset::ClaudeCode | Preset::Codex | Preset::Gemini | Preset::OpenCode
        )
    }

    /// Whether the CLI streams JSON lines (else its output is plain text, logged as is).
    fn structured(self) -> bool {
        matches!(
            self,
            Preset::ClaudeCode | Preset::Codex | Preset::Gemini | Preset::OpenCode
        )
    }

    /// The environment keys of the CLI's own command time limit, with the value for a task
    /// whose runtime cap is `max_runtime` (the original's `max_runtime − 30 s`, at least 1 s).
    fn terminal_timeout(self, max_runtime: Option<i64>) -> Vec<(String, String)> {
        let Some(runtime) = max_runtime.filter(|r| *r > 0) else {
            return Vec::new();
        };
        let seconds = (runtime - TERMINAL_TIMEOUT_GRACE_SECONDS).max(1);
        match self {
            Preset::Hermes => vec![("TERMINAL_TIMEOUT".to_owned(), seconds.to_string())],
            Preset::ClaudeCode => {
                let ms = (seconds * 1000).to_string();
                vec![
                    ("BASH_DEFAULT_TIMEOUT_MS".to_owned(), ms.clone()),
                    ("BASH_MAX_TIMEOUT_MS".to_owned(), ms),
                ]
            }
            Preset::Codex | Preset::Gemini | Preset::OpenCode | Preset::Aider => Vec::new(),
        }
    }
}

/// What a turn's output said so far.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    pub session_id: Option<String>,
    pub usage: Usage,
    /// The agent's last message.
    pub final_text: Option<String>,
    /// An error the CLI reported in its stream.
    pub error: Option<String>,
    /// Whether the stream's terminal event (a result, a finished turn) arrived.
    pub finished: bool,
    /// The text of the current step (OpenCode: the last step's text is the answer).
    step_text: String,
}

/// A log line cut to a readable length.
fn short(text: &str) -> String {
    let one = text.trim().replace('\n', " ⏎ ");
    if one.chars().count() > 400 {
        let cut: String = one.chars().take(400).collect();
        format!("{cut}…")
    } else {
        one
    }
}

fn u(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn s(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

impl Stream {
    /// Reads one line of a structured CLI's stdout; returns the readable lines to log (a line
    /// that is not JSON is logged as it is, marked `unparsed`).
    pub fn read(&mut self, preset: Preset, line: &str) -> Vec<String> {
        let tag = preset.name();
        let line = line.trim_end();
        if line.trim().is_empty() {
            return Vec::new();
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return vec![format!("[{tag}] unparsed: {}", short(line))];
        };
        let out = match preset {
            Preset::ClaudeCode => self.claude(&v),
            Preset::Codex => self.codex(&v),
            Preset::Gemini => self.gemini(&v),
            Preset::OpenCode => self.opencode(&v),
            Preset::Aider | Preset::Hermes => vec![short(line)],
        };
        out.into_iter().map(|l| format!("[{tag}] {l}")).collect()
    }

    fn claude(&mut self, v: &Value) -> Vec<String> {
        if let Some(id) = s(v, "session_id") {
            self.session_id = Some(id);
        }
        let mut out = Vec::new();
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "system" if v.get("subtype").and_then(Value::as_str) == Some("init") => {
                out.push(format!(
                    "session {} (model {})",
                    self.session_id.as_deref().unwrap_or("?"),
                    s(v, "model").unwrap_or_else(|| "?".into())
                ));
            }
            "assistant" | "user" => {
                let items = v
                    .pointer("/message/content")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for item in items {
                    match item.get("type").and_then(Value::as_str).unwrap_or("") {
                        "text" => {
                            let text = s(&item, "text").unwrap_or_default();
                            out.push(format!("assistant: {}", short(&text)));
                            self.final_text = Some(text);
                        }
                        "thinking" => {
                            out.push(format!(
                                "thinking: {}",
                                short(&s(&item, "thinking").unwrap_or_default())
                            ));
                        }
                        "tool_use" => out.push(format!(
                            "tool {}: {}",
                            s(&item, "name").unwrap_or_default(),
                            short(&item.get("input").map(Value::to_string).unwrap_or_default())
                        )),
                        "tool_result" => {
                            let content = match item.get("content") {
                                Some(Value::String(t)) => t.clone(),
                                Some(other) => other.to_string(),
                                None => String::new(),
                            };
                            let err = item.get("is_error").and_then(Value::as_bool) == Some(true);
                            out.push(format!(
                                "tool result{}: {}",
                                if err { " (error)" } else { "" },
                                short(&content)
                            ));
                        }
                        _ => {}
                    }
                }
            }
            "result" => {
                self.finished = true;
                if let Some(usage) = v.get("usage") {
                    self.usage.add(
                        u(usage, "input_tokens"),
                        u(usage, "output_tokens"),
                        u(usage, "cache_read_input_tokens"),
                    );
                }
                if let Some(cost) = v.get("total_cost_usd").and_then(Value::as_f64) {
                    self.usage.add_cost(cost);
                }
                let text = s(v, "result").unwrap_or_default();
                let is_error = v.get("is_error").and_then(Value::as_bool) == Some(true)
                    || v.get("subtype")
                        .and_then(Value::as_str)
                        .is_some_and(|t| t != "success");
                if is_error {
                    let subtype = s(v, "subtype").unwrap_or_default();
                    self.error = Some(if text.is_empty() {
                        subtype
                    } else {
                        text.clone()
                    });
                    out.push(format!(
                        "error: {}",
                        short(self.error.as_deref().unwrap_or(""))
                    ));
                } else {
                    out.push(format!("result: {}", short(&text)));
                    self.final_text = Some(text);
                }
                out.push(self.usage_line());
            }
            _ => {}
        }
        out
    }

    fn codex(&mut self, v: &Value) -> Vec<String> {
        let mut out = Vec::new();
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "thread.started" => {
                self.session_id = s(v, "thread_id");
                out.push(format!(
                    "session {}",
                    self.session_id.as_deref().unwrap_or("?")
                ));
            }
            "item.started" | "item.completed" => {
                let done = v.get("type").and_then(Value::as_str) == Some("item.completed");
                let item = v.get("item").cloned().unwrap_or(Value::Null);
                match item.get("type").and_then(Value::as_str).unwrap_or("") {
                    "agent_message" if done => {
                        let text = s(&item, "text").unwrap_or_default();
                        out.push(format!("assistant: {}", short(&text)));
                        self.final_text = Some(text);
                    }
                    "reasoning" if done => {
                        out.push(format!(
                            "thinking: {}",
                            short(&s(&item, "text").unwrap_or_default())
                        ));
                    }
                    "command_execution" => {
                        let command = s(&item, "command").unwrap_or_default();
                        if done {
                            out.push(format!(
                                "command exited {}: {} → {}",
                                item.get("exit_code")
                                    .map(Value::to_string)
                                    .unwrap_or_default(),
                                short(&command),
                                short(&s(&item, "aggregated_output").unwrap_or_default())
                            ));
                        } else {
                            out.push(format!("command: {}", short(&command)));
                        }
                    }
                    "file_change" if done => {
                        let paths: Vec<String> = item
                            .get("changes")
                            .and_then(Value::as_array)
                            .map(|c| c.iter().filter_map(|c| s(c, "path")).collect())
                            .unwrap_or_default();
                        out.push(format!("files changed: {}", paths.join(", ")));
                    }
                    "error" if done => {
                        out.push(format!(
                            "warning: {}",
                            short(&s(&item, "message").unwrap_or_default())
                        ));
                    }
                    _ => {}
                }
            }
            "turn.completed" => {
                self.finished = true;
                if let Some(usage) = v.get("usage") {
                    self.usage.add(
                        u(usage, "input_tokens"),
                        u(usage, "output_tokens"),
                        u(usage, "cached_input_tokens"),
                    );
                }
                out.push(self.usage_line());
            }
            "turn.failed" => {
                self.finished = true;
                let message = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("turn failed")
                    .to_owned();
                out.push(format!("error: {}", short(&message)));
                self.error = Some(message);
            }
            "error" => {
                let message = s(v, "message").unwrap_or_else(|| "error".into());
                out.push(format!("error: {}", short(&message)));
                self.error = Some(message);
            }
            _ => {}
        }
        out
    }

    fn gemini(&mut self, v: &Value) -> Vec<String> {
        let mut out = Vec::new();
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "init" => {
                self.session_id = s(v, "session_id").or_else(|| s(v, "sessionId"));
                out.push(format!(
                    "session {} (model {})",
                    self.session_id.as_deref().unwrap_or("?"),
                    s(v, "model").unwrap_or_else(|| "?".into())
                ));
            }
            "message" if s(v, "role").as_deref() == Some("assistant") => {
                let text = s(v, "content").unwrap_or_default();
                out.push(format!("assistant: {}", short(&text)));
                let whole = match (
                    self.final_text.take(),
                    v.get("delta").and_then(Value::as_bool),
                ) {
                    (Some(before), Some(true)) => before + &text,
                    _ => text,
                };
                self.final_text = Some(whole);
            }
            "tool_use" => out.push(format!(
                "tool {}: {}",
                s(v, "tool_name").unwrap_or_default(),
                short(
                    &v.get("parameters")
                        .map(Value::to_string)
                        .unwrap_or_default()
                )
            )),
            "tool_result" => out.push(format!(
                "tool result ({}): {}",
                s(v, "status").unwrap_or_default(),
                short(&s(v, "output").unwrap_or_default())
            )),
            "error" => {
                let message = s(v, "message").unwrap_or_else(|| "error".into());
                out.push(format!("error: {}", short(&message)));
                self.error = Some(message);
            }
            "result" => {
                self.finished = true;
                if let Some(stats) = v.get("stats") {
                    self.usage.add(
                        u(stats, "input_tokens"),
                        u(stats, "output_tokens"),
                        u(stats, "cached"),
                    );
                }
                if s(v, "status").is_some_and(|st| st != "success") {
                    let message = v
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .unwrap_or_else(|| "the turn failed".into());
                    out.push(format!("error: {}", short(&message)));
                    self.error = Some(message);
                }
                out.push(self.usage_line());
            }
            _ => {}
        }
        out
    }

    /// `opencode run --format json`: one event per line, `{type, timestamp, sessionID, part}`;
    /// a step's text parts make its answer, its `step_finish` carries tokens and cost, and a
    /// `step_finish` whose reason is not `tool-calls` ends the run.
    fn opencode(&mut self, v: &Value) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(id) = s(v, "sessionID")
            && self.session_id.as_deref() != Some(id.as_str())
        {
            out.push(format!("session {id}"));
            self.session_id = Some(id);
        }
        let part = v.get("part").cloned().unwrap_or(Value::Null);
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "step_start" => self.step_text.clear(),
            "text" => {
                let text = s(&part, "text").unwrap_or_default();
                out.push(format!("assistant: {}", short(&text)));
                self.step_text.push_str(&text);
            }
            "reasoning" => out.push(format!(
                "thinking: {}",
                short(&s(&part, "text").unwrap_or_default())
            )),
            "tool_use" => {
                let state = part.get("state").cloned().unwrap_or(Value::Null);
                let tool = s(&part, "tool").unwrap_or_default();
                let input = state.get("input").map(Value::to_string).unwrap_or_default();
                match s(&state, "status").as_deref() {
                    Some("error") => out.push(format!(
                        "tool {tool} failed: {} ({})",
                        short(&input),
                        short(&s(&state, "error").unwrap_or_default())
                    )),
                    _ => out.push(format!(
                        "tool {tool}: {} → {}",
                        short(&input),
                        short(&s(&state, "output").unwrap_or_default())
                    )),
                }
            }
            "step_finish" => {
                if let Some(tokens) = part.get("tokens") {
                    let cache = tokens.get("cache").cloned().unwrap_or(Value::Null);
                    self.usage.add(
                        u(tokens, "input"),
                        u(tokens, "output") + u(tokens, "reasoning"),
                        u(&cache, "read"),
                    );
                }
                if let Some(cost) = part.get("cost").and_then(Value::as_f64) {
                    self.usage.add_cost(cost);
                }
                if s(&part, "reason").as_deref() != Some("tool-calls") {
                    self.finished = true;
                    self.final_text = Some(self.step_text.trim().to_owned());
                    out.push(self.usage_line());
                }
            }
            "error" => {
                let error = v.get("error").cloned().unwrap_or(Value::Null);
                let said = error
                    .pointer("/data/message")
                    .and_then(Value::as_str)
                    .or_else(|| error.get("message").and_then(Value::as_str));
                // The error's name (`ProviderAuthError`, `APIError`) says what kind it is.
                let message = match (s(&error, "name"), said) {
                    (Some(name), Some(said)) => format!("{name}: {said}"),
                    (Some(name), None) => name,
                    (None, Some(said)) => said.to_owned(),
                    (None, None) => "error".to_owned(),
                };
                let status = error
                    .pointer("/data/statusCode")
                    .and_then(Value::as_u64)
                    .map(|c| format!(" (HTTP {c})"))
                    .unwrap_or_default();
                let message = format!("{message}{status}");
                out.push(format!("error: {}", short(&message)));
                self.error = Some(message);
            }
            _ => {}
        }
        out
    }

    fn usage_line(&self) -> String {
        let u = &self.usage;
        let mut line = format!(
            "usage: {} input, {} output, {} cached tokens",
            u.input_tokens, u.output_tokens, u.cache_read_tokens
        );
        if let Some(cost) = u.cost_usd {
            line.push_str(&format!(", ${cost:.4}"));
        }
        line
    }
}

/// How a CLI's failure reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureClass {
    RateLimited,
    Auth,
    Transient,
}

/// Recognises a rate limit or quota, an authentication problem, or a transient error in what a
/// CLI reported (its stream's error, the tail of its stderr). Checked in that order.
pub(crate) fn classify(text: &str) -> Option<FailureClass> {
    let t = text.to_ascii_lowercase();
    const RATE: &[&str] = &[
        "rate limit",
        "rate_limit",
        "ratelimit",
        "usage limit",
        "quota",
        "429",
        "too many requests",
        "resource_exhausted",
        "resource exhausted",
    ];
    const AUTH: &[&str] = &[
        "invalid api key",
        "invalid_api_key",
        "invalid x-api-key",
        "providerautherror",
        "api key not valid",
        "authentication",
        "unauthorized",
        "401",
        "please run /login",
        "not logged in",
        "login required",
        "token has expired",
        "token expired",
        "oauth",
        "credit balance is too low",
        "billing",
        "permission denied: api key",
    ];
    const TRANSIENT: &[&str] = &[
        "overloaded",
        "529",
        "500",
        "502",
        "503",
        "504",
        "internal server error",
        "service unavailable",
        "bad gateway",
        "timed out",
        "timeout",
        "connection reset",
        "econnreset",
        "connection refused",
        "network error",
        "stream disconnected",
        "temporarily unavailable",
    ];
    if RATE.iter().any(|k| t.contains(k)) {
        Some(FailureClass::RateLimited)
    } else if AUTH.iter().any(|k| t.contains(k)) {
        Some(FailureClass::Auth)
    } else if TRANSIENT.iter().any(|k| t.contains(k)) {
        Some(FailureClass::Transient)
    } else {
        None
    }
}

/// The turn's exit class from the CLI's exit status and what its output said: a reported
/// failure is classified (75 / 78 / 76), a successful exit whose structured stream never
/// reached its terminal event (malformed or cut short) is retried in place (76).
pub(crate) fn turn_exit(
    preset: Preset,
    status: std::process::ExitStatus,
    stream: &Stream,
    stderr: &str,
) -> TurnExit {
    let exit = TurnExit::from_status(status);
    if matches!(
        exit,
        TurnExit::Interrupted | TurnExit::RateLimited | TurnExit::TerminalProvider
    ) {
        // The CLI's own 75 / 78 (and a signal) keep their meaning.
        return exit;
    }
    let failed = exit != TurnExit::Success || stream.error.is_some();
    if !failed {
        if preset.structured() && !stream.finished {
            return TurnExit::Failed(RETRYABLE_EXIT);
        }
        return TurnExit::Success;
    }
    let said = format!(
        "{}\n{}",
        stream.error.as_deref().unwrap_or(""),
        tail(stderr, 4096)
    );
    match classify(&said) {
        Some(FailureClass::RateLimited) => TurnExit::RateLimited,
        Some(FailureClass::Auth) => TurnExit::TerminalProvider,
        Some(FailureClass::Transient) => TurnExit::Failed(RETRYABLE_EXIT),
        None if exit == TurnExit::Success => TurnExit::Failed(1),
        None => exit,
    }
}

/// A preset agent: one CLI, one session per run.
#[derive(Debug, Clone)]
pub(crate) struct PresetAgent {
    preset: Preset,
    base: Vec<String>,
    steering: Vec<String>,
    /// The CLI's time limit for a task with a runtime cap.
    env: Vec<(String, String)>,
    /// The profile's own `env`, applied after `env` (so it wins).
    own_env: super::ProfileEnv,
    session: AgentSession,
}

impl PresetAgent {
    pub fn new(preset: Preset, profile: &ProfileConfig, steering: &Steering) -> Self {
        let base = if profile.command.first().is_some_and(|p| !p.is_empty()) {
            profile.command.clone()
        } else {
            preset.base(&steering.profile)
        };
        let mut env = preset.terminal_timeout(steering.max_runtime_seconds);
        // The profile's own env wins over the computed timeout.
        env.retain(|(k, _)| !profile.env.contains_key(k));
        Self {
            preset,
            base,
            steering: preset.steering_args(steering),
            env,
            own_env: profile_env(profile),
            session: AgentSession {
                agent: preset.name().to_owned(),
                ..Default::default()
            },
        }
    }

    fn turn(
        &mut self,
        request: &Request<'_>,
        sink: Option<&Arc<dyn OutputSink>>,
    ) -> Result<Reply, AgentError> {
        let resume = if self.preset.resumes() {
            self.session.session_id.clone()
        } else {
            None
        };
        let (argv, stdin_prompt) = self.preset.argv(
            &self.base,
            &self.steering,
            resume.as_deref(),
            request.prompt,
        );
        if let Some(sink) = sink {
            let shown = match &resume {
                Some(id) => format!("[{}] resuming session {id}\n", self.preset.name()),
                None => format!("[{}] starting {}\n", self.preset.name(), argv[0]),
            };
            sink.write(shown.as_bytes());
        }
        let mut cmd = identity::command(&argv[0]);
        cmd.args(&argv[1..])
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .envs(&self.own_env.0)
            .stdin(if stdin_prompt {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(dir) = request.workdir {
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn().map_err(AgentError::Start)?;
        let prompt = request.prompt.to_owned();
        let stdin = child.stdin.take();
        let feeder = identity::spawn("agent-stdin", move || {
            if let Some(mut stdin) = stdin {
                let _ = stdin.write_all(prompt.as_bytes());
            }
        })
        .map_err(AgentError::Io)?;
        let stderr = child.stderr.take();
        let err_sink = sink.cloned();
        let err_reader = identity::spawn("agent-stderr", move || match stderr {
            Some(s) => super::command::drain(s, err_sink.as_ref()).unwrap_or_default(),
            None => Vec::new(),
        })
        .map_err(AgentError::Io)?;
        let mut stream = Stream::default();
        let mut raw = String::new();
        if let Some(out) = child.stdout.take() {
            let mut reader = BufReader::new(out);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    // Stop reading; the child is still reaped below.
                    Err(_) => break,
                }
                let text = String::from_utf8_lossy(&line);
                raw.push_str(&text);
                if raw.len() > 2 * OUTPUT_LIMIT {
                    raw = tail(&raw, OUTPUT_LIMIT).to_owned();
                }
                let shown = if self.preset.structured() {
                    stream.read(self.preset, &text)
                } else {
                    vec![text.trim_end_matches('\n').to_owned()]
                };
                if let Some(sink) = sink {
                    for l in shown {
                        sink.write(format!("{l}\n").as_bytes());
                    }
                }
            }
        }
        let err = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
        let _ = feeder.join();
        let status = child.wait().map_err(AgentError::Io)?;
        let exit = turn_exit(self.preset, status, &stream, &err);
        if let Some(id) = stream.session_id.clone() {
            self.session.session_id = Some(id);
        }
        self.session.usage.merge(&stream.usage);
        self.session.turns += 1;
        let final_response = match (&stream.final_text, self.preset.structured()) {
            (Some(text), _) => text.clone(),
            (None, true) => stream.error.clone().unwrap_or_default(),
            (None, false) => raw.trim_end().to_owned(),
        };
        let mut output = raw;
        if !err.is_empty() {
            output.push_str("\n[stderr]\n");
            output.push_str(&err);
        }
        Ok(Reply {
            exit,
            final_response: tail(&final_response, OUTPUT_LIMIT).to_owned(),
            output: tail(&output, OUTPUT_LIMIT).to_owned(),
        })
    }
}

impl Agent for PresetAgent {
    fn run(&mut self, request: &Request<'_>) -> Result<Reply, AgentError> {
        self.turn(request, None)
    }

    fn run_streaming(
        &mut self,
        request: &Request<'_>,
        sink: &Arc<dyn OutputSink>,
    ) -> Result<Reply, AgentError> {
        self.turn(request, Some(sink))
    }

    fn session(&self) -> Option<&AgentSession> {
        Some(&self.session)
    }

    fn resumes_session(&self) -> bool {
        self.preset.resumes() && self.session.session_id.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_the_config_accepts_is_built() {
        for name in crate::config::PRESET_AGENTS {
            assert_eq!(Preset::parse(name).map(Preset::name), Some(*name));
        }
    }

    #[test]
    fn failures_are_classified_rate_limit_first() {
        assert_eq!(
            classify("Claude AI usage limit reached|1767225600"),
            Some(FailureClass::RateLimited)
        );
        assert_eq!(
            classify("OAuth token has expired. Please run /login"),
            Some(FailureClass::Auth)
        );
        assert_eq!(
            classify("API Error: 529 {\"type\":\"overloaded_error\"}"),
            Some(FailureClass::Transient)
        );
        assert_eq!(classify("the tests failed"), None);
    }

    #[test]
    fn the_clis_own_exit_classes_win_over_its_text() {
        use std::os::unix::process::ExitStatusExt;
        let stream = Stream {
            error: Some("request timed out".into()),
            finished: true,
            ..Default::default()
        };
        let status = |code: i32| std::process::ExitStatus::from_raw(code << 8);
        assert_eq!(
            turn_exit(Preset::Hermes, status(75), &stream, ""),
            TurnExit::RateLimited
        );
        assert_eq!(
            turn_exit(Preset::Hermes, status(78), &stream, ""),
            TurnExit::TerminalProvider
        );
        assert_eq!(
            turn_exit(Preset::Hermes, status(1), &stream, ""),
            TurnExit::Failed(RETRYABLE_EXIT)
        );
        // A successful stream that mentions a status code stays a success.
        let fine = Stream {
            final_text: Some("fixed the 429 handling".into()),
            finished: true,
            ..Default::default()
        };
        assert_eq!(
            turn_exit(Preset::ClaudeCode, status(0), &fine, ""),
            TurnExit::Success
        );
    }

    #[test]
    fn steering_maps_to_each_clis_flags() {
        let s = Steering {
            model: Some("m1".into()),
            provider: Some("p1".into()),
            reasoning_effort: Some("high".into()),
            ..Default::default()
        };
        assert_eq!(Preset::ClaudeCode.steering_args(&s), ["--model", "m1"]);
        assert_eq!(
            Preset::Codex.steering_args(&s),
            [
                "--model",
                "m1",
                "-c",
                "model_provider=p1",
                "-c",
                "model_reasoning_effort=high"
            ]
        );
    }

    #[test]
    fn codex_resumes_with_its_subcommand_and_claude_with_a_flag() {
        let base = Preset::Codex.base("");
        let (argv, stdin) = Preset::Codex.argv(&base, &[], Some("th_1"), "p");
        assert!(stdin);
        assert_eq!(argv[argv.len() - 3..], ["resume", "th_1", "-"]);
        let base = Preset::ClaudeCode.base("");
        let (argv, _) = Preset::ClaudeCode.argv(&base, &[], Some("s1"), "p");
        assert_eq!(argv[argv.len() - 2..], ["--resume", "s1"]);
    }

    #[test]
    fn terminal_timeout_leaves_thirty_seconds() {
        assert_eq!(
            Preset::Hermes.terminal_timeout(Some(600)),
            [("TERMINAL_TIMEOUT".to_owned(), "570".to_owned())]
        );
        assert_eq!(
            Preset::Hermes.terminal_timeout(Some(10)),
            [("TERMINAL_TIMEOUT".to_owned(), "1".to_owned())]
        );
        assert!(Preset::Hermes.terminal_timeout(None).is_empty());
        assert!(Preset::Codex.terminal_timeout(Some(600)).is_empty());
    }
}
