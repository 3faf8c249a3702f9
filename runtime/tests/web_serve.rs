//! `kanban serve` over plain HTTP: the token rule, the Host check, 401, 404 and 421 pages, the
//! security headers, `HEAD` on the event stream, and that serving changes nothing on the board.

// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used)]

mod web_support;

use std::io::Write as _;
use std::process::Stdio;
use std::time::Duration;

use kanban_tests::Kanban;
use web_support::{Serve, get, raw, wait_for};

fn kanban() -> Kanban {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    k.ok(&["init"]);
    k
}

/// The board file and its WAL, byte for byte.
fn board_bytes(k: &Kanban) -> Vec<Vec<u8>> {
    let db = k.default_db();
    let wal = db.with_extension("db-wal");
    [db, wal]
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_default())
        .collect()
}

#[test]
fn non_loopback_listen_without_a_token_refuses_to_start() {
    let k = kanban();
    for listen in ["0.0.0.0:0", "[::]:0"] {
        let mut child = k
            .cmd()
            .args(["serve", "--listen", listen])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let status = wait_for("kanban serve to refuse", Duration::from_secs(60), || {
            child.try_wait().unwrap()
        });
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(status.code(), Some(1), "{listen}: {stderr}");
        assert!(stderr.contains("--token"), "{listen}: {stderr}");
        assert!(out.stdout.is_empty(), "{listen} printed an address");
    }
    // A blank token is no token.
    let run = k.run(&["serve", "--listen", "0.0.0.0:0", "--token", "  "]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("token is empty"), "{}", run.stderr);
    // An unreadable token file is an error, not an open server.
    let missing = k.home().join("no-such-token");
    let run = k.run(&[
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--token-file",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("token file"), "{}", run.stderr);
}

#[test]
fn with_a_token_every_request_must_carry_it_and_a_wrong_one_gets_401() {
    let k = kanban();
    let id = k.create("secret plans", &[]);
    let before = board_bytes(&k);
    let token_file = k.home().join("token");
    std::fs::write(&token_file, "s3cret\n").unwrap();
    let serve = Serve::start_on(
        &k,
        "0.0.0.0:0",
        &["--token-file", token_file.to_str().unwrap()],
    );
    let task = format!("/task/{id}");
    for (path, headers) in [
        ("/", ""),
        ("/", "Authorization: Bearer wrong\r\n"),
        ("/", "Authorization: Bearer s3cre\r\n"),
        ("/", "Cookie: kanban_token=s3cret2\r\n"),
        ("/?token=nope", ""),
        (task.as_str(), ""),
        ("/events", ""),
        ("/health", ""),
        ("/cron", ""),
        ("/assets/app.js", ""),
        ("/no/such/page", ""),
    ] {
        let r = get(serve.addr, path, headers);
        assert_eq!(r.status, 401, "{path} {headers:?}");
        assert!(!r.body.contains("secret plans"), "{path} leaked the board");
        assert_eq!(r.header("WWW-Authenticate").as_deref(), Some("Bearer"));
    }
    let r = get(serve.addr, "/", "Authorization: Bearer s3cret\r\n");
    assert_eq!(r.status, 200);
    assert!(r.body.contains("secret plans"));
    let r = get(serve.addr, "/", "Cookie: a=b; kanban_token=s3cret\r\n");
    assert_eq!(r.status, 200);
    let r = get(serve.addr, "/?token=s3cret", "");
    assert_eq!(r.status, 200);
    let cookie = r.header("Set-Cookie").unwrap();
    assert!(cookie.starts_with("kanban_token=s3cret;"), "{cookie}");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    // Nothing any of it did changed the board.
    assert_eq!(board_bytes(&k), before);
    assert_eq!(k.status(&id), "ready");
}

#[test]
fn bad_paths_unknown_ids_and_unknown_boards_are_404_pages_with_the_csp() {
    let k = kanban();
    let id = k.create("a task", &[]);
    let serve = Serve::start(&k, &[]);
    let ok = get(serve.addr, &format!("/task/{id}"), "");
    assert_eq!(ok.status, 200);
    for path in [
        "/nope",
        "/task/",
        "/task/t_00000000",
        "/task/..%2F..%2Fetc%2Fpasswd",
        &format!("/task/{id}/extra"),
        "/?board=nosuch",
        "/?board=..%2F..",
        &format!("/task/{id}?board=nosuch"),
        "/events?board=nosuch",
        "/assets/missing.js",
    ] {
        let r = get(serve.addr, path, "");
        assert_eq!(r.status, 404, "{path}");
        assert!(r.body.contains("404 Not Found"), "{path}: {}", r.body);
    }
    for r in [ok, get(serve.addr, "/nope", "")] {
        let csp = r.header("Content-Security-Policy").unwrap();
        assert!(csp.contains("default-src 'none'"), "{csp}");
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(
            r.header("X-Content-Type-Options").as_deref(),
            Some("nosniff")
        );
    }
    // Only GET and HEAD: anything that could look like a write is refused.
    let post = raw(
        serve.addr,
        &format!(
            "POST /task/{id} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            addr = serve.addr
        ),
    );
    assert_eq!(post.status, 405);
    let junk = raw(serve.addr, "NONSENSE\r\n\r\n");
    assert_eq!(junk.status, 400);
    // The server survived all of it.
    assert_eq!(get(serve.addr, "/", "").status, 200);
}

#[test]
fn the_event_stream_announces_a_board_change() {
    use std::io::{BufRead, BufReader, Write};
    let k = kanban();
    let id = k.create("watched", &[]);
    let serve = Serve::start(&k, &[]);
    let mut stream = std::net::TcpStream::connect(serve.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "GET /events HTTP/1.1\r\nHost: {}\r\n\r\n",
        serve.addr
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.starts_with(": connected") {
            break;
        }
        lines.push(line);
    }
    assert!(lines[0].starts_with("HTTP/1.1 200"), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("Content-Type: text/event-stream"))
    );
    k.ok(&["complete", &id, "--summary", "done"]);
    let mut line = String::new();
    while !line.starts_with("event: board") {
        line.clear();
        reader.read_line(&mut line).unwrap();
    }
}

#[test]
fn every_board_of_the_home_is_served_unless_one_is_named() {
    let k = kanban();
    k.ok(&["boards", "create", "other"]);
    let other = k.create("on the other board", &["--board", "other"]);
    let home = k.create("on the default board", &[]);
    let serve = Serve::start(&k, &[]);
    let page = get(serve.addr, "/?board=other", "");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("on the other board"));
    assert!(!page.body.contains("on the default board"));
    assert!(
        page.body.contains("href=\"/?board=default\""),
        "no board switcher"
    );
    assert_eq!(
        get(serve.addr, &format!("/task/{other}?board=other"), "").status,
        200
    );
    assert_eq!(
        get(serve.addr, &format!("/task/{other}?board=default"), "").status,
        404
    );
    let health = get(serve.addr, "/health", "");
    assert!(health.body.contains("board default") && health.body.contains("board other"));
    drop(serve);

    let only = Serve::start(&k, &["--board", "other"]);
    assert_eq!(get(only.addr, "/?board=other", "").status, 200);
    assert_eq!(get(only.addr, "/?board=default", "").status, 404);
    assert_eq!(
        get(only.addr, &format!("/task/{home}?board=default"), "").status,
        404
    );
    drop(only);

    let run = k.run(&["serve", "--board", "nosuch", "--listen", "127.0.0.1:0"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("nosuch"), "{}", run.stderr);
    let run = k.run(&["serve", "--board", "../x", "--listen", "127.0.0.1:0"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
}

#[test]
fn a_postgres_board_of_the_home_is_served_and_its_changes_are_announced() {
    use std::io::{BufRead, BufReader, Write};
    let cluster = kanban_pgwire::cluster::TestCluster::shared()
        .expect("a PostgreSQL test server (see the README's Testing section)");
    let db = format!("web_serve_{}", std::process::id());
    cluster.create_database(&db).unwrap();
    let k = kanban();
    k.ok(&["boards", "create", "team", "--url", &cluster.url(&db)]);
    let shared = k.create("on the postgres board", &["--board", "team"]);
    k.create("on the sqlite board", &[]);
    let serve = Serve::start(&k, &[]);
    let page = get(serve.addr, "/?board=team", "");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("on the postgres board"), "{}", page.body);
    assert!(!page.body.contains("on the sqlite board"));
    assert!(
        page.body.contains("href=\"/?board=default\""),
        "no board switcher"
    );
    let task = get(serve.addr, &format!("/task/{shared}?board=team"), "");
    assert_eq!(task.status, 200);
    assert!(task.body.contains("on the postgres board"));
    let health = get(serve.addr, "/health", "");
    assert!(health.body.contains("board default") && health.body.contains("board team"));

    // The board's watcher sees another process's commit.
    let mut stream = std::net::TcpStream::connect(serve.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "GET /events?board=team HTTP/1.1\r\nHost: {}\r\n\r\n",
        serve.addr
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    // Reads until a line starting with `what`; fails after 60 s (keep-alive comments arrive
    // every 15 s, so a stream that announces nothing does not hang the test).
    let mut until = |what: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut line = String::new();
        while !line.starts_with(what) {
            assert!(
                std::time::Instant::now() < deadline,
                "no `{what}` on the event stream"
            );
            line.clear();
            reader.read_line(&mut line).unwrap();
        }
    };
    until(": connected");
    k.ok(&["--board", "team", "complete", &shared, "--summary", "done"]);
    until("event: board");
    // The server ends the watcher's connection (as a restart would): it opens the board again
    // and still announces the next change.
    let mut admin = cluster.connect("postgres").unwrap();
    let ended = admin
        .query(
            &format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}' \
                 AND pid <> pg_backend_pid()"
            ),
            &[],
        )
        .unwrap();
    assert!(!ended.is_empty(), "the watcher had no connection to end");
    k.create("after the cut", &["--board", "team"]);
    until("event: board");
    let page = get(serve.addr, "/?board=team", "");
    assert!(page.body.contains("after the cut"), "{}", page.body);
}

#[test]
fn a_foreign_host_is_refused_with_421_and_allowed_names_are_served() {
    let k = kanban();
    k.create("private plans", &[]);
    let serve = Serve::start(&k, &["--allow-host", "Kanban.Internal"]);
    let port = serve.addr.port();
    let ask = |path: &str, host: &str| {
        raw(
            serve.addr,
            &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
    };
    // A page on another site whose name was rebound to 127.0.0.1 sends its own name.
    for host in [
        "evil.example.com".to_owned(),
        format!("evil.example.com:{port}"),
        format!("localhost.evil.example.com:{port}"),
        format!("kanban.internal.evil.example.com:{port}"),
        format!("10.1.2.3:{port}"),
    ] {
        for path in ["/", "/health", "/events", "/assets/app.js"] {
            let r = ask(path, &host);
            assert_eq!(r.status, 421, "{path} for {host}");
            assert!(
                !r.body.contains("private plans"),
                "{path} for {host} leaked"
            );
        }
    }
    let r = ask("/", "evil.example.com");
    assert!(r.body.contains("--allow-host"), "{}", r.body);
    for host in [
        format!("127.0.0.1:{port}"),
        "127.0.0.1".to_owned(),
        format!("localhost:{port}"),
        "LOCALHOST".to_owned(),
        format!("kanban.internal:{port}"),
        "KANBAN.internal.".to_owned(),
    ] {
        let r = ask("/", &host);
        assert_eq!(r.status, 200, "{host}");
        assert!(r.body.contains("private plans"), "{host}");
    }
    // No Host at all, or two, is a bad request.
    let r = raw(serve.addr, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 400);
    let r = raw(
        serve.addr,
        &format!(
            "GET / HTTP/1.1\r\nHost: {}\r\nHost: evil.example.com\r\n\r\n",
            serve.addr
        ),
    );
    assert_eq!(r.status, 400);
    drop(serve);

    // Behind a token the Host check applies as well, before the token is looked at.
    let token = Serve::start_on(&k, "0.0.0.0:0", &["--token", "s3cret"]);
    let r = raw(
        token.addr,
        "GET / HTTP/1.1\r\nHost: evil.example.com\r\nAuthorization: Bearer s3cret\r\n\r\n",
    );
    assert_eq!(r.status, 421);
    let r = get(token.addr, "/", "Authorization: Bearer s3cret\r\n");
    assert_eq!(r.status, 200);
    drop(token);

    // A value that is not a host name is refused at start.
    for bad in ["http://kanban.internal", "kanban.internal:8077", "a b", ""] {
        let run = k.run(&["serve", "--listen", "127.0.0.1:0", "--allow-host", bad]);
        assert_eq!(run.code, 1, "{bad:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("--allow-host"),
            "{bad:?}: {}",
            run.stderr
        );
    }
}

#[test]
fn head_on_the_event_stream_sends_its_headers_and_no_body() {
    use std::io::Read;
    let k = kanban();
    let serve = Serve::start(&k, &[]);
    let mut stream = std::net::TcpStream::connect(serve.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "HEAD /events HTTP/1.1\r\nHost: {}\r\n\r\n",
        serve.addr
    )
    .unwrap();
    // Read the head; a byte after it (a stream) fails at once, and the server must close.
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).unwrap();
        bytes.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&bytes);
        if let Some(end) = text.find("\r\n\r\n") {
            assert_eq!(end + 4, bytes.len(), "a body followed the head: {text:?}");
        }
        if n == 0 {
            break;
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("Content-Type: text/event-stream"), "{text}");
    assert!(text.ends_with("\r\n\r\n"), "{text}");
    // GET still streams.
    let mut stream = std::net::TcpStream::connect(serve.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "GET /events HTTP/1.1\r\nHost: {}\r\n\r\n",
        serve.addr
    )
    .unwrap();
    let mut reader = std::io::BufReader::new(stream);
    let mut line = String::new();
    while !line.starts_with(": connected") {
        line.clear();
        assert_ne!(
            std::io::BufRead::read_line(&mut reader, &mut line).unwrap(),
            0
        );
    }
    // HEAD of an unknown board's stream is a 404 head.
    let mut stream = std::net::TcpStream::connect(serve.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "HEAD /events?board=nosuch HTTP/1.1\r\nHost: {}\r\n\r\n",
        serve.addr
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 404"), "{text}");
    assert!(text.ends_with("\r\n\r\n"), "{text}");
}

#[test]
fn the_task_page_says_where_its_agent_works() {
    let k = kanban();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("a <dir>");
    let spec = format!("dir:{}", target.display());
    let id = k.create("in a dir", &["--workspace", &spec]);
    let serve = Serve::start(&k, &[]);
    let page = get(serve.addr, &format!("/task/{id}"), "");
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains("<p class=\"workspace\">workspace dir @ ")
            && page.body.contains("a &lt;dir&gt;"),
        "{}",
        page.body
    );
}

#[test]
fn the_board_page_shows_the_first_cards_of_each_column_and_counts_the_rest() {
    let k = kanban();
    // 230 ready tasks (one column over the 200 shown) and 3 done, one of them assigned.
    let board = kanban_runtime::board::Board::open_path(
        &k.default_db(),
        &kanban_runtime::board::OpenOptions::default(),
    )
    .unwrap();
    let tasks: Vec<kanban_runtime::board::NewTask> = (0..230)
        .map(|i| kanban_runtime::board::NewTask {
            title: format!("ready {i}"),
            ..Default::default()
        })
        .collect();
    board.create_tasks(&tasks, 1_000).unwrap();
    drop(board);
    let done: Vec<String> = (0..3)
        .map(|i| k.create(&format!("finished {i}"), &["--assignee", "rev"]))
        .collect();
    for id in &done {
        k.ok(&["complete", id, "--summary", "ok"]);
    }
    let serve = Serve::start(&k, &[]);
    let page = get(serve.addr, "/", "");
    assert_eq!(page.status, 200);
    let column = |html: &str, status: &str| -> String {
        let start = html
            .find(&format!("data-status=\"{status}\""))
            .unwrap_or_else(|| panic!("no {status} column"));
        let end = html[start..].find("</section>").unwrap() + start;
        html[start..end].to_owned()
    };
    let ready = column(&page.body, "ready");
    assert!(
        ready.contains("<span class=\"count\">230</span>"),
        "{ready:.300}"
    );
    assert_eq!(ready.matches("<article").count(), 200);
    assert!(ready.contains("30 more; narrow with the filter"));
    // The first cards in board order: the oldest first.
    assert!(ready.contains(">ready 0<"), "{ready:.600}");
    let done_column = column(&page.body, "done");
    assert!(done_column.contains("<span class=\"count\">3</span>"));
    assert_eq!(done_column.matches("<article").count(), 3);
    // A filtered page still filters the whole board.
    let filtered = get(serve.addr, "/?assignee=rev", "");
    assert!(column(&filtered.body, "ready").contains("<span class=\"count\">0</span>"));
    assert!(column(&filtered.body, "done").contains("<span class=\"count\">3</span>"));
}
