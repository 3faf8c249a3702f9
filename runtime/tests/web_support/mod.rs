//! Shared helpers of the web view's end-to-end tests: a running `kanban serve` on a temporary
//! home, a raw HTTP/1.1 GET, and a tiny WebDriver client that drives Debian's headless Chromium
//! through `chromedriver` (found, or installed, by `.ci/chromium`). Waiting is polling an
//! observable condition with a deadline, never a sleep used as synchronisation.

#![allow(dead_code)]
// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
// Test helpers: a failed setup step should fail the test at once, with the panic message.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kanban_tests::Kanban;
use serde_json::{Value, json};

/// A running `kanban serve`; killed on drop.
pub struct Serve {
    child: Child,
    pub addr: SocketAddr,
}

impl Serve {
    /// Starts `kanban serve --listen 127.0.0.1:0 <extra>` and reads the address it prints.
    pub fn start(kanban: &Kanban, extra: &[&str]) -> Serve {
        Serve::start_on(kanban, "127.0.0.1:0", extra)
    }

    /// Starts `kanban serve --listen <listen> <extra>`; the address is made connectable
    /// (`0.0.0.0` becomes `127.0.0.1`).
    pub fn start_on(kanban: &Kanban, listen: &str, extra: &[&str]) -> Serve {
        let mut cmd = kanban.cmd();
        cmd.arg("serve")
            .args(["--listen", listen])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("kanban serve printed no address: {line:?}"))
            .replace("0.0.0.0", "127.0.0.1")
            .parse()
            .unwrap();
        Serve { child, addr }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response: status, head (lowercased header names) and body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Response {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    }
}

/// Sends `request` (a full HTTP/1.1 message) to `addr` and reads the answer to its end.
pub fn raw(addr: SocketAddr, request: &str) -> Response {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    // Read the head, then exactly Content-Length bytes when given (a peer may keep the
    // connection open), else to the end.
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = stream.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&buf[..n]);
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
            let length = head.lines().find_map(|l| {
                l.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            });
            if length.is_some_and(|len| bytes.len() >= end + 4 + len) {
                break;
            }
        }
    }
    parse_response(&bytes)
}

fn parse_response(bytes: &[u8]) -> Response {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text.as_str(), ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {head:?}"));
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Response {
        status,
        head: head.to_owned(),
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// `GET path` with extra header lines (each ending in `\r\n`).
pub fn get(addr: SocketAddr, path: &str, headers: &str) -> Response {
    raw(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n"),
    )
}

/// Polls `probe` until it returns `Some`, or panics with `what` after `limit`.
pub fn wait_for<T>(what: &str, limit: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The script that finds or installs the browser.
pub fn chromium_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/chromium")
}

/// Runs `.ci/chromium` through `bash` (the caller may set the child's environment first): the
/// chromium and chromedriver paths it prints, or why it found none (its last line on stderr,
/// which is also passed on to the test's output).
pub fn run_chromium_script(bash: &mut Command) -> Result<(PathBuf, PathBuf), String> {
    let out = bash
        .arg(chromium_script())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprint!("{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    match (out.status.success(), lines.next(), lines.next()) {
        (true, Some(chromium), Some(driver)) => Ok((chromium.into(), driver.into())),
        _ => Err(stderr
            .lines()
            .last()
            .unwrap_or("no reason given")
            .to_owned()),
    }
}

/// What a browser test does when there is no browser: it fails, saying why (a run that tested
/// nothing must not pass). `cargo xtask ci` installs the browser before any test runs.
pub fn missing_browser(reason: &str) -> ! {
    panic!(
        "there is no headless Chromium: {reason} (run .ci/chromium as root, or the README's test \
         command `cargo xtask ci`, which installs it before the tests)"
    )
}

/// Chromium and chromedriver from `.ci/chromium` (which installs them when missing and it can),
/// or, when they cannot be had on this machine, [`missing_browser`]'s failure.
pub fn browser_binaries() -> (PathBuf, PathBuf) {
    match run_chromium_script(&mut Command::new("bash")) {
        Ok(found) => found,
        Err(reason) => missing_browser(&reason),
    }
}

/// A headless Chromium driven over WebDriver; the browser and its driver are stopped on drop.
pub struct Browser {
    driver: Child,
    addr: SocketAddr,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and one headless Chromium session with a fresh profile.
    pub fn start(chromium: &Path, chromedriver: &Path) -> Browser {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        use std::os::unix::process::CommandExt as _;
        // Its own process group: dropping the browser kills the driver and every Chromium
        // process it started, even when the session never came up.
        let driver = Command::new(chromedriver)
            .process_group(0)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let profile = tempfile::tempdir().unwrap();
        let mut browser = Browser {
            driver,
            addr,
            session: String::new(),
            _profile: profile,
        };
        wait_for("chromedriver to listen", Duration::from_secs(60), || {
            TcpStream::connect(addr).ok()
        });
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            format!("--user-data-dir={}", browser._profile.path().display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": chromium.display().to_string(),
            "args": args,
        }}}});
        let answer = browser.call("POST", "/session", Some(&caps));
        browser.session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {answer}"))
            .to_owned();
        browser
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let body = body.map(Value::to_string).unwrap_or_default();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {len}\r\nConnection: close\r\n\r\n{body}",
            addr = self.addr,
            len = body.len()
        );
        let response = raw(self.addr, &request);
        serde_json::from_str(&response.body).unwrap_or_else(|e| {
            panic!(
                "WebDriver answered {}: {e}: {}",
                response.status, response.body
            )
        })
    }

    /// Opens `url` (waits for its load event).
    pub fn goto(&self, url: &str) {
        let answer = self.call(
            "POST",
            &format!("/session/{}/url", self.session),
            Some(&json!({ "url": url })),
        );
        assert!(answer["value"].is_null(), "navigation failed: {answer}");
    }

    /// Types `keys` into the element `css` selects, as a keyboard would (`\u{E007}` is Enter):
    /// WebDriver focuses the element first. A live page may swap its content between the
    /// lookup and the typing (a stale element): the element is then looked up again.
    pub fn type_into(&self, css: &str, keys: &str) {
        for _ in 0..50 {
            match self.try_type_into(css, keys) {
                Ok(()) => return,
                Err(answer) if answer.contains("stale element") => continue,
                Err(answer) => panic!("typing into {css} failed: {answer}"),
            }
        }
        panic!("{css} kept going stale");
    }

    fn try_type_into(&self, css: &str, keys: &str) -> Result<(), String> {
        let found = self.call(
            "POST",
            &format!("/session/{}/element", self.session),
            Some(&json!({ "using": "css selector", "value": css })),
        );
        let element = found["value"]
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_owned();
        let answer = self.call(
            "POST",
            &format!("/session/{}/element/{element}/value", self.session),
            Some(&json!({ "text": keys })),
        );
        if answer["value"].is_null() {
            Ok(())
        } else {
            Err(answer.to_string())
        }
    }

    /// Runs `script` (a function body; `return` its result) in the page.
    pub fn eval(&self, script: &str) -> Value {
        let answer = self.call(
            "POST",
            &format!("/session/{}/execute/sync", self.session),
            Some(&json!({ "script": script, "args": [] })),
        );
        if answer["value"].get("error").is_some() {
            panic!("script failed: {answer}");
        }
        answer["value"].clone()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.call("DELETE", &format!("/session/{}", self.session), None)
            }));
        }
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
