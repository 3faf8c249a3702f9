//! Reading one run's part of a task log (`kanban logs`).
//!
//! A task's log is appended to by every worker of the task. Each worker starts its part with the
//! run header ([`super::RUN_HEADER`]: `[kanban-run] run=<id> …`) and ends it with the exit
//! trailer (`[kanban-worker-exit] rc=<n>`), unless it found its run taken over. Between them the
//! agent's output streams in as it is written, each turn between `[kanban-turn] …` and
//! `[kanban-turn-end] …`. [`RunLog`] reads the part of one run, incrementally, so a follower can
//! print lines while the agent still runs.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::proc::exit::EXIT_TRAILER;

use super::RUN_HEADER;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Before the run's header.
    Before,
    /// Inside the run's part.
    Inside,
    /// Past it (the trailer or the next run's header was read).
    Past,
}

/// An incremental reader of run `run_id`'s part of the log at `path`.
#[derive(Debug)]
pub(crate) struct RunLog {
    path: PathBuf,
    header: String,
    offset: u64,
    pending: Vec<u8>,
    place: Place,
}

/// What one [`RunLog::poll`] read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Chunk {
    /// Complete lines of the run's part appended since the last poll.
    pub text: String,
    /// Whether anything at all was appended to the file (of any run).
    pub grew: bool,
}

impl RunLog {
    pub fn new(path: &Path, run_id: i64) -> RunLog {
        RunLog {
            path: path.to_owned(),
            header: format!("{RUN_HEADER}{run_id} "),
            offset: 0,
            pending: Vec::new(),
            place: Place::Before,
        }
    }

    /// Whether the run's header was seen.
    pub fn found(&self) -> bool {
        self.place != Place::Before
    }

    /// Whether the run's part is over: its trailer or the next run's header was read.
    pub fn finished(&self) -> bool {
        self.place == Place::Past
    }

    /// Reads what was appended since the last call. A missing file reads as empty; a file that
    /// shrank (rotated) is read again from its start.
    pub fn poll(&mut self) -> std::io::Result<Chunk> {
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Chunk::default()),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        if len < self.offset {
            self.offset = 0;
            self.pending.clear();
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        self.offset += bytes.len() as u64;
        let grew = !bytes.is_empty();
        self.pending.extend_from_slice(&bytes);
        let mut text = String::new();
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            self.take(&line, &mut text);
        }
        Ok(Chunk { text, grew })
    }

    /// The rest of an unterminated last line (call once the writer is gone).
    pub fn flush(&mut self) -> String {
        let line = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
        let mut text = String::new();
        if !line.is_empty() {
            self.take(&line, &mut text);
        }
        text
    }

    fn take(&mut self, line: &str, out: &mut String) {
        match self.place {
            Place::Before => {
                if line.starts_with(&self.header) {
                    self.place = Place::Inside;
                    out.push_str(line);
                }
            }
            Place::Inside => {
                if line.starts_with(RUN_HEADER) {
                    self.place = Place::Past;
                    return;
                }
                out.push_str(line);
                if line.starts_with(EXIT_TRAILER) {
                    self.place = Place::Past;
                }
            }
            Place::Past => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn a_run_part_is_read_between_its_header_and_its_trailer_incrementally() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.log");
        let mut f = std::fs::File::create(&path).unwrap();
        write!(
            f,
            "{RUN_HEADER}1 task=t pid=1\nold\n{EXIT_TRAILER}1\n{RUN_HEADER}12 task=t pid=2\nfirst\npart"
        )
        .unwrap();
        let mut log = RunLog::new(&path, 1);
        let chunk = log.poll().unwrap();
        assert!(chunk.text.contains("old") && !chunk.text.contains("first"));
        assert!(log.finished());

        let mut log = RunLog::new(&path, 12);
        let chunk = log.poll().unwrap();
        assert_eq!(chunk.text, format!("{RUN_HEADER}12 task=t pid=2\nfirst\n"));
        assert!(log.found() && !log.finished());
        write!(f, "ial\n{RUN_HEADER}13 task=t pid=3\nnext\n").unwrap();
        let chunk = log.poll().unwrap();
        assert_eq!(chunk.text, "partial\n");
        assert!(log.finished());

        let mut missing = RunLog::new(&dir.path().join("none.log"), 1);
        assert_eq!(missing.poll().unwrap(), Chunk::default());
        assert!(!missing.found());
    }
}
