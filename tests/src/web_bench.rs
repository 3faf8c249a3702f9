//! The web view's figures for `cargo xtask bench` (run by `kanban-bench`): the board page of a
//! 10 000-task board served by the release `kanban serve`, next to a static asset of the same
//! server as the baseline, and the CPU that 50 idle live connections cost the server.

// Benchmark code drives the real binary.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kanban_runtime::board::{self, Board, Completion, NewTask, OpenOptions};

/// What [`measure`] found.
#[derive(Debug, Clone)]
pub struct WebFigures {
    /// Median and p90 of 20 `GET /` of the 10 000-task board (ms), and the page's size (bytes).
    pub board_page_ms: f64,
    pub board_page_p90_ms: f64,
    pub board_page_bytes: usize,
    /// Median and p90 of 20 `GET /assets/app.css` from the same server (ms), each request
    /// right after a board page request (interleaved).
    pub asset_ms: f64,
    pub asset_p90_ms: f64,
    /// CPU of the server over 5 s with 50 idle event streams open (% of one core).
    pub idle_streams_cpu_percent: f64,
}

/// A `kanban serve` process, killed when dropped.
pub struct KillOnDrop(Child);

impl KillOnDrop {
    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Median and p90 (nearest rank) of a non-empty set of samples.
fn p50_p90(mut v: Vec<f64>) -> anyhow::Result<(f64, f64)> {
    anyhow::ensure!(!v.is_empty(), "no sample was taken");
    v.sort_by(f64::total_cmp);
    let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Ok((rank(0.5), rank(0.9)))
}

fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

fn get(addr: SocketAddr, path: &str) -> anyhow::Result<(u16, usize)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or(0, |(_, b)| b.len());
    Ok((status, body))
}

/// Starts the release `bin serve` on `home` (loopback, a free port); the server and its address.
pub fn serve(bin: &Path, home: &Path) -> anyhow::Result<(KillOnDrop, SocketAddr)> {
    let mut child = Command::new(bin)
        .arg("--home")
        .arg(home)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let server = KillOnDrop(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let addr: SocketAddr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .ok_or_else(|| anyhow::anyhow!("kanban serve printed no address: {line:?}"))?
        .parse()?;
    Ok((server, addr))
}

/// One `GET path` (ms, body bytes); anything but 200 is an error.
pub fn timed(addr: SocketAddr, path: &str) -> anyhow::Result<(f64, usize)> {
    let start = Instant::now();
    let (status, body) = get(addr, path)?;
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    anyhow::ensure!(status == 200, "GET {path} answered {status}");
    Ok((ms, body))
}

/// Seeds `<dir>/web` with a 10 000-task board (9 000 done, 1 000 ready), runs `bin serve` on it
/// and measures.
pub fn measure(bin: &Path, dir: &Path) -> anyhow::Result<WebFigures> {
    let home = dir.join("web");
    let board = Board::open(
        &kanban_runtime::home::resolve(&home, Some("default"))?,
        &OpenOptions::create(),
    )?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    let created = board.create_tasks(
        &(0..10_000)
            .map(|i| NewTask {
                title: format!("web bench task {i}"),
                body: Some(format!("body of task {i}")),
                assignee: Some(format!("agent{}", i % 7)),
                ..NewTask::default()
            })
            .collect::<Vec<_>>(),
        now,
    )?;
    let done: Vec<String> = created
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % 10 != 0)
        .map(|(_, c)| c.id)
        .collect();
    for outcome in board.complete_many(&done, &Completion::default(), now)? {
        anyhow::ensure!(
            matches!(outcome, board::Outcome::Done(_)),
            "a web bench task was not completed: {outcome:?}"
        );
    }
    drop(board);

    let (server, addr) = serve(bin, &home)?;

    let _ = get(addr, "/")?; // warm the page cache
    let mut pages = Vec::new();
    let mut assets = Vec::new();
    let mut board_page_bytes = 0;
    for _ in 0..20 {
        let (ms, bytes) = timed(addr, "/")?;
        pages.push(ms);
        board_page_bytes = bytes;
        assets.push(timed(addr, "/assets/app.css")?.0);
    }
    let (board_page_ms, board_page_p90_ms) = p50_p90(pages)?;
    let (asset_ms, asset_p90_ms) = p50_p90(assets)?;

    let mut streams = Vec::new();
    for _ in 0..50 {
        let mut stream = TcpStream::connect(addr)?;
        stream.write_all(format!("GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())?;
        let mut reader = BufReader::new(stream);
        loop {
            let mut l = String::new();
            anyhow::ensure!(reader.read_line(&mut l)? > 0, "event stream closed");
            if l.starts_with(": connected") {
                break;
            }
        }
        streams.push(reader);
    }
    let pid = server.0.id();
    std::thread::sleep(Duration::from_millis(500));
    // A failed read (the server exited) is an error, never a 0 % figure.
    let read = || {
        cpu_ticks(pid).ok_or_else(|| {
            anyhow::anyhow!("cannot read /proc/{pid}/stat of `kanban serve` (did it exit?)")
        })
    };
    let cpu0 = read()?;
    let window = Duration::from_secs(5);
    std::thread::sleep(window);
    let cpu1 = read()?;
    let idle_streams_cpu_percent =
        cpu1.saturating_sub(cpu0) as f64 / 100.0 / window.as_secs_f64() * 100.0;
    drop(streams);
    Ok(WebFigures {
        board_page_ms,
        board_page_p90_ms,
        board_page_bytes,
        asset_ms,
        asset_p90_ms,
        idle_streams_cpu_percent,
    })
}
