//! `kanban serve`'s write actions over plain HTTP: every action is the CLI's library call,
//! recorded with the actor `web`; a write without the session's CSRF token, from another
//! `Origin`, for a wrong `Host`, in `--read-only` mode, with an oversized body or a bad form
//! value is refused with a clear status and message and changes nothing; what a form wrote is
//! rendered as escaped text.

// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used)]

mod web_support;

use std::net::SocketAddr;

use kanban_tests::Kanban;
use serde_json::Value;
use web_support::{Response, Serve, get, raw};

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

/// A browser session: the `kanban_csrf` cookie the board page handed out and the token its
/// forms carry.
struct Session {
    cookie: String,
    token: String,
}

fn session(addr: SocketAddr) -> Session {
    let page = get(addr, "/", "");
    assert_eq!(page.status, 200, "{}", page.body);
    let set = page.header("Set-Cookie").expect("a CSRF cookie");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_owned();
    let token = cookie.strip_prefix("kanban_csrf=").unwrap().to_owned();
    assert_eq!(token.len(), 64, "{token}");
    assert!(
        page.body
            .contains(&format!("name=\"csrf\" value=\"{token}\"")),
        "the forms carry the session's token"
    );
    // The same session keeps its token.
    let again = get(addr, "/", &format!("Cookie: {cookie}\r\n"));
    assert_eq!(again.header("Set-Cookie"), None);
    Session { cookie, token }
}

/// `POST path` with a url-encoded `body` and the given header lines (each ending in `\r\n`).
fn post_with(addr: SocketAddr, path: &str, headers: &str, body: &str) -> Response {
    raw(
        addr,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len}\r\n\
             Connection: close\r\n\r\n{body}",
            len = body.len()
        ),
    )
}

/// A form post as the page's own form sends it: same Origin, the session's cookie and token.
fn post(addr: SocketAddr, s: &Session, verb: &str, fields: &str) -> Response {
    post_with(
        addr,
        &format!("/act/{verb}?board=default"),
        &format!("Origin: http://{addr}\r\nCookie: {}\r\n", s.cookie),
        &format!("csrf={}&{fields}", s.token),
    )
}

/// The task's events as `kanban show --json` lists them: (kind, payload).
fn events(k: &Kanban, id: &str) -> Vec<(String, Value)> {
    let shown = k.json(&["show", id, "--json"]);
    shown["events"]
        .as_array()
        .unwrap_or_else(|| panic!("no events in {shown}"))
        .iter()
        .map(|e| (e["kind"].as_str().unwrap().to_owned(), e["payload"].clone()))
        .collect()
}

fn event<'a>(events: &'a [(String, Value)], kind: &str) -> &'a Value {
    &events
        .iter()
        .rev()
        .find(|(k, _)| k == kind)
        .unwrap_or_else(|| panic!("no {kind} event in {events:?}"))
        .1
}

/// `text` url-encoded as a form field (every byte but letters and digits as `%XX`).
fn enc(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[test]
fn each_action_is_the_cli_transition_recorded_with_the_web_actor() {
    let k = kanban();
    let serve = Serve::start(&k, &[]);
    let s = session(serve.addr);

    let r = post(
        serve.addr,
        &s,
        "create",
        "title=from+the+web&assignee=coder&priority=3&triage=1&body=line+one",
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let location = r.header("Location").unwrap();
    let id = location
        .strip_prefix("/task/")
        .and_then(|l| l.split('?').next())
        .unwrap()
        .to_owned();
    let task = k.json(&["show", &id, "--json"]);
    assert_eq!(task["task"]["title"], "from the web", "{task}");
    assert_eq!(task["task"]["status"], "triage");
    assert_eq!(task["task"]["created_by"], "web");
    assert_eq!(task["task"]["priority"], 3);

    assert_eq!(
        post(serve.addr, &s, "promote", &format!("id={id}")).status,
        303
    );
    assert_eq!(k.status(&id), "ready");
    assert_eq!(event(&events(&k, &id), "promoted_manual")["actor"], "web");

    let r = post(
        serve.addr,
        &s,
        "block",
        &format!("id={id}&reason=needs+a+key"),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(k.status(&id), "blocked");
    assert_eq!(event(&events(&k, &id), "blocked")["actor"], "web");

    let r = post(serve.addr, &s, "unblock", &format!("id={id}&reason=got+it"));
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(k.status(&id), "ready");
    assert_eq!(event(&events(&k, &id), "unblocked")["actor"], "web");

    let r = post(
        serve.addr,
        &s,
        "schedule",
        &format!("id={id}&when=2h&reason=later"),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(k.status(&id), "scheduled");
    assert_eq!(event(&events(&k, &id), "scheduled")["actor"], "web");
    assert_eq!(
        post(serve.addr, &s, "unblock", &format!("id={id}")).status,
        303
    );

    k.ok(&["claim", &id, "--claimer", "w1", "--ttl", "900"]);
    assert_eq!(k.status(&id), "running");
    let r = post(serve.addr, &s, "reclaim", &format!("id={id}&reason=stuck"));
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(k.status(&id), "ready");
    let reclaimed = events(&k, &id);
    assert_eq!(event(&reclaimed, "reclaimed")["actor"], "web");
    assert_eq!(event(&reclaimed, "reclaimed")["reason"], "stuck");

    let r = post(
        serve.addr,
        &s,
        "reassign",
        &format!("id={id}&profile=reviewer"),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let assigned = events(&k, &id);
    assert_eq!(event(&assigned, "assigned")["assignee"], "reviewer");
    assert_eq!(event(&assigned, "assigned")["source"], "web");

    let r = post(
        serve.addr,
        &s,
        "comment",
        &format!("id={id}&body={}", enc("<script>alert(1)</script> & more")),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let shown = k.json(&["show", &id, "--json"]);
    // The unblock's reason is the first comment, by web too.
    assert_eq!(shown["comments"][0]["author"], "web", "{shown}");
    assert_eq!(shown["comments"][0]["body"], "Unblocked: got it");
    let comment = &shown["comments"][1];
    assert_eq!(comment["author"], "web", "{shown}");
    assert_eq!(comment["body"], "<script>alert(1)</script> & more");
    let page = get(serve.addr, &format!("/task/{id}"), "");
    assert!(
        page.body
            .contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; more")
    );
    assert!(!page.body.contains("<script>alert(1)"));

    // Done, then reopened from the web.
    k.ok(&["complete", &id, "--summary", "done by hand"]);
    let r = post(
        serve.addr,
        &s,
        "reopen",
        &format!("id={id}&reason=not+quite"),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(k.status(&id), "ready");
    let reopened = events(&k, &id);
    assert_eq!(event(&reopened, "status")["actor"], "web");
    assert_eq!(event(&reopened, "status")["reason"], "reopened: not quite");

    let r = post(serve.addr, &s, "archive", &format!("id={id}"));
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(k.status(&id), "archived");
    assert_eq!(event(&events(&k, &id), "archived")["actor"], "web");

    // A triage card decomposed from the form's children JSON.
    let root = k.create("split me", &["--triage"]);
    let children = enc(r#"[{"title": "first"}, {"title": "second", "parents": [0]}]"#);
    let r = post(
        serve.addr,
        &s,
        "decompose",
        &format!("id={root}&children={children}&root_assignee=lead"),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let d = event(&events(&k, &root), "decomposed").clone();
    let kids = d["child_ids"].as_array().unwrap();
    assert_eq!(kids.len(), 2, "{d}");
    let first = k.json(&["show", kids[0].as_str().unwrap(), "--json"]);
    assert_eq!(first["task"]["created_by"], "web");
    assert_eq!(first["task"]["status"], "ready");

    // An attachment uploaded as multipart.
    let boundary = "XyZzy";
    let body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{token}\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"id\"\r\n\r\n{root}\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.txt\"\r\n\
         Content-Type: text/plain\r\n\r\nhello\nattachment\r\n--{boundary}--\r\n",
        token = s.token
    );
    let r = raw(
        serve.addr,
        &format!(
            "POST /act/attach?board=default HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\n\
             Cookie: {cookie}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n\
             Content-Length: {len}\r\nConnection: close\r\n\r\n{body}",
            addr = serve.addr,
            cookie = s.cookie,
            len = body.len()
        ),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let listed = k.json(&["attachments", &root, "--json"]);
    assert_eq!(listed[0]["filename"], "notes.txt", "{listed}");
    assert_eq!(listed[0]["size"], 16);
    assert_eq!(event(&events(&k, &root), "attached")["by"], "web");
    k.assert_fsck_clean();
}

#[test]
fn forged_and_malformed_writes_are_refused_and_change_nothing() {
    let k = kanban();
    let id = k.create("guarded", &["--triage"]);
    let serve = Serve::start(&k, &[]);
    let s = session(serve.addr);
    let addr = serve.addr;
    let before = board_bytes(&k);
    let promote = "/act/promote?board=default".to_owned();
    let same_origin = format!("Origin: http://{addr}\r\n");
    let with_cookie = format!("{same_origin}Cookie: {}\r\n", s.cookie);
    let good = format!("csrf={}&id={id}", s.token);
    let big = format!("{good}&pad={}", "x".repeat(300 * 1024));
    // (what, request, status, a word of the message)
    let cases: Vec<(&str, Response, u16, &str)> = vec![
        (
            "no CSRF field",
            post_with(addr, &promote, &with_cookie, &format!("id={id}")),
            403,
            "CSRF",
        ),
        (
            "a wrong CSRF token",
            post_with(
                addr,
                &promote,
                &with_cookie,
                &format!("csrf={}&id={id}", "0".repeat(64)),
            ),
            403,
            "CSRF",
        ),
        (
            "the token without its cookie",
            post_with(addr, &promote, &same_origin, &good),
            403,
            "CSRF",
        ),
        (
            "a cookie the server never handed out",
            post_with(
                addr,
                &promote,
                &format!("{same_origin}Cookie: kanban_csrf={}\r\n", "a".repeat(64)),
                &format!("csrf={}&id={id}", "a".repeat(64)),
            ),
            403,
            "CSRF",
        ),
        (
            "another Origin",
            post_with(
                addr,
                &promote,
                &format!(
                    "Origin: http://evil.example.com\r\nCookie: {}\r\n",
                    s.cookie
                ),
                &good,
            ),
            403,
            "Origin",
        ),
        (
            "no Origin",
            post_with(addr, &promote, &format!("Cookie: {}\r\n", s.cookie), &good),
            403,
            "Origin",
        ),
        (
            "a wrong Host",
            raw(
                addr,
                &format!(
                    "POST {promote} HTTP/1.1\r\nHost: evil.example.com\r\nOrigin: http://evil.example.com\r\n\
                     Cookie: {}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{good}",
                    s.cookie,
                    good.len()
                ),
            ),
            421,
            "does not answer for host",
        ),
        (
            "an oversized body",
            post_with(addr, &promote, &with_cookie, &big),
            413,
            "larger than",
        ),
        (
            "a bad priority",
            post_with(
                addr,
                "/act/create?board=default",
                &with_cookie,
                &format!("csrf={}&title=x&priority=high", s.token),
            ),
            400,
            "priority",
        ),
        (
            "a blank title",
            post_with(
                addr,
                "/act/create?board=default",
                &with_cookie,
                &format!("csrf={}&title=+++", s.token),
            ),
            400,
            "title",
        ),
        (
            "children that are not JSON",
            post_with(
                addr,
                "/act/decompose?board=default",
                &with_cookie,
                &format!("csrf={}&id={id}&children=%5Bnope", s.token),
            ),
            400,
            "JSON",
        ),
        (
            "an unknown action",
            post_with(addr, "/act/explode?board=default", &with_cookie, &good),
            404,
            "no action",
        ),
        (
            "an unknown board",
            post_with(addr, "/act/promote?board=nosuch", &with_cookie, &good),
            404,
            "nosuch",
        ),
        (
            "an unknown task",
            post_with(
                addr,
                &promote,
                &with_cookie,
                &format!("csrf={}&id=t_00000000", s.token),
            ),
            404,
            "t_00000000",
        ),
        (
            "a transition the status refuses",
            post_with(addr, "/act/reclaim?board=default", &with_cookie, &good),
            409,
            "running or claimed",
        ),
        (
            "a body that is not a form",
            raw(
                addr,
                &format!(
                    "POST {promote} HTTP/1.1\r\nHost: {addr}\r\n{with_cookie}\
                     Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
                ),
            ),
            415,
            "form",
        ),
        (
            "no Content-Length",
            raw(
                addr,
                &format!(
                    "POST {promote} HTTP/1.1\r\nHost: {addr}\r\n{with_cookie}\
                     Content-Type: application/x-www-form-urlencoded\r\nConnection: close\r\n\r\n"
                ),
            ),
            411,
            "Content-Length",
        ),
        (
            "a POST to a page",
            post_with(addr, &format!("/task/{id}"), &with_cookie, &good),
            405,
            "/act/",
        ),
    ];
    for (what, r, status, word) in &cases {
        assert_eq!(r.status, *status, "{what}: {}", r.body);
        assert!(r.body.contains(word), "{what}: {}", r.body);
    }
    assert_eq!(k.status(&id), "triage");
    assert_eq!(board_bytes(&k), before, "a refused write changed the board");
    // The same session's well-formed write goes through.
    let r = post_with(addr, &promote, &with_cookie, &good);
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(k.status(&id), "ready");
}

#[test]
fn with_a_token_a_write_needs_it_as_well_as_the_csrf_token() {
    let k = kanban();
    let id = k.create("tokened", &["--triage"]);
    let serve = Serve::start(&k, &["--token", "s3cret"]);
    let addr = serve.addr;
    let page = get(addr, "/", "Authorization: Bearer s3cret\r\n");
    let cookie = page
        .header("Set-Cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let token = cookie.strip_prefix("kanban_csrf=").unwrap().to_owned();
    let body = format!("csrf={token}&id={id}");
    let r = post_with(
        addr,
        "/act/promote?board=default",
        &format!("Origin: http://{addr}\r\nCookie: {cookie}\r\n"),
        &body,
    );
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(k.status(&id), "triage");
    let r = post_with(
        addr,
        "/act/promote?board=default",
        &format!("Origin: http://{addr}\r\nCookie: {cookie}; kanban_token=s3cret\r\n"),
        &body,
    );
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(k.status(&id), "ready");
}

#[test]
fn read_only_mode_serves_no_forms_and_refuses_every_post() {
    let k = kanban();
    let id = k.create("look only", &["--triage"]);
    let serve = Serve::start(&k, &["--read-only"]);
    let addr = serve.addr;
    let before = board_bytes(&k);
    for path in ["/".to_owned(), format!("/task/{id}")] {
        let page = get(addr, &path, "");
        assert_eq!(page.status, 200);
        assert!(page.body.contains("look only"));
        assert!(!page.body.contains("<form class=\"act"), "{path} has forms");
        assert!(!page.body.contains("name=\"csrf\""), "{path}");
        assert_eq!(page.header("Set-Cookie"), None, "{path}");
    }
    let r = post_with(
        addr,
        "/act/promote?board=default",
        &format!("Origin: http://{addr}\r\nCookie: kanban_csrf=x\r\n"),
        &format!("csrf=x&id={id}"),
    );
    assert_eq!(r.status, 405, "{}", r.body);
    assert!(r.body.contains("read-only"), "{}", r.body);
    assert_eq!(r.header("Allow").as_deref(), Some("GET, HEAD"));
    assert_eq!(k.status(&id), "triage");
    assert_eq!(board_bytes(&k), before);
}

#[test]
fn a_postgresql_board_is_written_from_the_web_the_same_way() {
    let cluster = kanban_pgwire::cluster::TestCluster::shared().unwrap();
    let url = cluster.url(&cluster.fresh_database("web_actions").unwrap());
    let k = kanban();
    k.ok(&["boards", "create", "pgb", "--url", &url]);
    let serve = Serve::start(&k, &["--board", "pgb"]);
    let addr = serve.addr;
    let page = get(addr, "/?board=pgb", "");
    let cookie = page
        .header("Set-Cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let token = cookie.strip_prefix("kanban_csrf=").unwrap().to_owned();
    let headers = format!("Origin: http://{addr}\r\nCookie: {cookie}\r\n");
    let r = post_with(
        addr,
        "/act/create?board=pgb",
        &headers,
        &format!("csrf={token}&title=on+postgres&triage=1"),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let id = r
        .header("Location")
        .unwrap()
        .strip_prefix("/task/")
        .and_then(|l| l.split('?').next())
        .unwrap()
        .to_owned();
    for (verb, fields) in [("promote", ""), ("comment", "&body=from+the+web")] {
        let r = post_with(
            addr,
            &format!("/act/{verb}?board=pgb"),
            &headers,
            &format!("csrf={token}&id={id}{fields}"),
        );
        assert_eq!(r.status, 303, "{verb}: {}", r.body);
    }
    let shown = k.json(&["--board", "pgb", "show", &id, "--json"]);
    assert_eq!(shown["task"]["status"], "ready", "{shown}");
    assert_eq!(shown["task"]["created_by"], "web");
    assert_eq!(shown["comments"][0]["author"], "web");
    let promoted = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "promoted_manual")
        .unwrap();
    assert_eq!(promoted["payload"]["actor"], "web");
    // A forged write changes nothing there either.
    let r = post_with(
        addr,
        "/act/archive?board=pgb",
        &format!("Origin: http://evil.example.com\r\nCookie: {cookie}\r\n"),
        &format!("csrf={token}&id={id}"),
    );
    assert_eq!(r.status, 403);
    assert_eq!(
        k.json(&["--board", "pgb", "show", &id, "--json"])["task"]["status"],
        "ready"
    );
}
