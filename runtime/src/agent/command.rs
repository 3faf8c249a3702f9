//! The `command` agent: an external agent CLI. The prompt goes to its stdin, its cwd is the
//! request's workdir, its environment is the profile's `env` on top of what `identity::command`
//! gives a child in the current context (the scrubbed one inside a cron job). Its stdout is the
//! final response; exit 75 / 78 keep their meaning.

use std::io::{Read, Write};
use std::process::{Child, Stdio};
use std::sync::Arc;

use super::{
    Agent, AgentError, OUTPUT_LIMIT, OutputSink, Reply, Request, TurnExit, profile_env, tail,
};
use crate::config::ProfileConfig;
use crate::identity;

/// Runs `command[0] command[1..]` once per turn.
#[derive(Debug, Clone)]
pub(crate) struct CommandAgent {
    argv: Vec<String>,
    env: super::ProfileEnv,
}

impl CommandAgent {
    pub fn new(profile: &ProfileConfig) -> Result<Self, AgentError> {
        if profile.command.first().is_none_or(|p| p.is_empty()) {
            return Err(AgentError::EmptyCommand);
        }
        Ok(Self {
            argv: profile.command.clone(),
            env: profile_env(profile),
        })
    }
}

impl CommandAgent {
    fn turn(
        &mut self,
        request: &Request<'_>,
        sink: Option<&Arc<dyn OutputSink>>,
    ) -> Result<Reply, AgentError> {
        let mut cmd = identity::command(&self.argv[0]);
        cmd.args(&self.argv[1..])
            .envs(&self.env.0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(dir) = request.workdir {
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn().map_err(AgentError::Start)?;
        let prompt = request.prompt.to_owned();
        let stdin = child.stdin.take();
        // Feed stdin from its own thread so a chatty child cannot deadlock us on a full pipe.
        let feeder = identity::spawn("agent-stdin", move || {
            if let Some(mut stdin) = stdin {
                let _ = stdin.write_all(prompt.as_bytes());
            }
        })
        .map_err(AgentError::Io)?;
        let (stdout, stderr, status) = collect(&mut child, sink)?;
        let _ = feeder.join();
        let exit = TurnExit::from_status(status);
        let mut output = stdout.clone();
        if !stderr.is_empty() {
            output.push_str("\n[stderr]\n");
            output.push_str(&stderr);
        }
        Ok(Reply {
            exit,
            final_response: tail(stdout.trim_end(), OUTPUT_LIMIT).to_owned(),
            output: tail(&output, OUTPUT_LIMIT).to_owned(),
        })
    }
}

impl Agent for CommandAgent {
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
}

/// Reads `reader` to its end, handing each chunk to `sink` as it arrives; returns everything read
/// (the caller keeps the tail).
pub(super) fn drain(
    mut reader: impl Read,
    sink: Option<&Arc<dyn OutputSink>>,
) -> std::io::Result<Vec<u8>> {
    let mut all = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(all),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if let Some(sink) = sink {
            sink.write(&buf[..n]);
        }
        all.extend_from_slice(&buf[..n]);
    }
}

/// Reads a child's stdout and stderr to the end (stderr on a helper thread) and reaps it; with a
/// `sink`, both streams reach it as they are written.
pub(super) fn collect(
    child: &mut Child,
    sink: Option<&Arc<dyn OutputSink>>,
) -> Result<(String, String, std::process::ExitStatus), AgentError> {
    let stderr = child.stderr.take();
    let err_sink = sink.cloned();
    let err_reader = identity::spawn("agent-stderr", move || match stderr {
        Some(s) => drain(s, err_sink.as_ref()).unwrap_or_default(),
        None => Vec::new(),
    })
    .map_err(AgentError::Io)?;
    let out = match child.stdout.take() {
        Some(s) => drain(s, sink).map_err(AgentError::Io)?,
        None => Vec::new(),
    };
    let err = err_reader.join().unwrap_or_default();
    let status = child.wait().map_err(AgentError::Io)?;
    Ok((
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
        status,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(argv: &[&str]) -> CommandAgent {
        CommandAgent::new(&ProfileConfig {
            agent: "command".into(),
            command: argv.iter().map(|s| (*s).to_owned()).collect(),
            env: [("AGENT_FLAVOUR".to_owned(), "plain".to_owned())].into(),
            ..Default::default()
        })
        .unwrap()
    }

    fn req<'a>(prompt: &'a str, dir: Option<&'a std::path::Path>) -> Request<'a> {
        Request {
            prompt,
            script: prompt,
            workdir: dir,
            goal: false,
        }
    }

    #[test]
    fn prompt_goes_to_stdin_and_workdir_is_the_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = agent(&["sh", "-c", "cat; echo; pwd; echo $AGENT_FLAVOUR"]);
        let reply = a.run(&req("hello", Some(dir.path()))).unwrap();
        assert_eq!(reply.exit, TurnExit::Success);
        let canonical = dir.path().canonicalize().unwrap();
        assert!(reply.final_response.starts_with("hello\n"), "{reply:?}");
        assert!(
            reply.final_response.contains(canonical.to_str().unwrap()),
            "{reply:?}"
        );
        assert!(reply.final_response.ends_with("plain"), "{reply:?}");
    }

    #[test]
    fn exit_classes_keep_their_meaning() {
        for (code, want) in [
            ("75", TurnExit::RateLimited),
            ("78", TurnExit::TerminalProvider),
            ("3", TurnExit::Failed(3)),
        ] {
            let reply = agent(&["sh", "-c", &format!("exit {code}")])
                .run(&req("", None))
                .unwrap();
            assert_eq!(reply.exit, want);
        }
        let reply = agent(&["sh", "-c", "kill -TERM $$"])
            .run(&req("", None))
            .unwrap();
        assert_eq!(reply.exit, TurnExit::Interrupted);
    }

    #[derive(Default)]
    struct Chunks(std::sync::Mutex<Vec<u8>>);

    impl OutputSink for Chunks {
        fn write(&self, bytes: &[u8]) {
            self.0.lock().unwrap().extend_from_slice(bytes);
        }
    }

    #[test]
    fn streaming_hands_both_streams_to_the_sink() {
        let chunks = Arc::new(Chunks::default());
        let sink: Arc<dyn OutputSink> = chunks.clone();
        let reply = agent(&["sh", "-c", "echo out; echo err >&2"])
            .run_streaming(&req("", None), &sink)
            .unwrap();
        assert_eq!(reply.final_response, "out");
        let seen = String::from_utf8(chunks.0.lock().unwrap().clone()).unwrap();
        assert!(seen.contains("out\n") && seen.contains("err\n"), "{seen:?}");
    }

    #[test]
    fn a_missing_program_is_a_start_error() {
        let err = agent(&["/nonexistent/agent"])
            .run(&req("", None))
            .unwrap_err();
        assert!(matches!(err, AgentError::Start(_)), "{err}");
    }
}
