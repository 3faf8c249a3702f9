//! `kanban serve` in a real browser: Debian's headless Chromium, driven over WebDriver
//! (`chromedriver`), found or installed by `.ci/chromium` (one process installs, the others wait
//! for it). When neither is possible (no root, no apt-get) each test says SKIPPED and passes —
//! except under `CI=true`, where it fails; docs/web.md says so. The last two tests check that
//! setup itself, with stand-ins for apt-get and the browser.
//!
//! "Without a reload" is checked with a marker: a global set in the page after it loaded must
//! still be there once the page shows the change.

// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used)]

mod web_support;

use std::collections::BTreeMap;
use std::time::Duration;

use kanban_tests::Kanban;
use serde_json::Value;
use web_support::{
    Browser, Serve, browser_binaries, missing_browser, run_chromium_script, wait_for,
};

/// How long a live update may take before the test gives up (a liveness bound for a loaded
/// 2-core machine; the page normally follows within a fraction of a second).
const LIVE_LIMIT: Duration = Duration::from_secs(20);

fn browser() -> Browser {
    let (chromium, driver) = browser_binaries();
    Browser::start(&chromium, &driver)
}

fn kanban() -> Kanban {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    k.ok(&["init"]);
    k
}

const COLUMNS: &str = "var out = {}; \
    document.querySelectorAll('.column').forEach(function (col) { \
      out[col.getAttribute('data-status')] = Array.from(col.querySelectorAll('.card')) \
        .map(function (c) { return c.getAttribute('data-task'); }); }); \
    return out;";

fn columns(b: &Browser) -> BTreeMap<String, Vec<String>> {
    serde_json::from_value(b.eval(COLUMNS)).unwrap()
}

fn mark_and_wait_live(b: &Browser) {
    b.eval("window.__loadMarker = 'kept'; return null;");
    wait_for("the page's event stream", LIVE_LIMIT, || {
        (b.eval("return window.kanbanLive && window.kanbanLive.connected;") == Value::Bool(true))
            .then_some(())
    });
}

fn assert_not_reloaded(b: &Browser) {
    assert_eq!(
        b.eval("return window.__loadMarker;"),
        Value::String("kept".into()),
        "the page was reloaded"
    );
}

#[test]
fn board_columns_hold_the_seeded_cards_and_a_cli_completion_moves_live() {
    let b = browser();
    let k = kanban();
    let ready = k.create(
        "write the parser",
        &["--assignee", "coder", "--priority", "5"],
    );
    let child = k.create("ship it", &["--parent", &ready]);
    let triage = k.create("maybe later", &["--triage"]);
    let done = k.create("already done", &[]);
    k.ok(&["complete", &done, "--summary", "done"]);
    let blocked = k.create("needs a key", &[]);
    k.ok(&["block", &blocked, "--reason", "waiting for the API key"]);
    let archived = k.create("old news", &[]);
    k.ok(&["archive", &archived]);
    let serve = Serve::start(&k, &[]);

    b.goto(&serve.url("/"));
    let cols = columns(&b);
    let expect = |status: &str, ids: &[&str]| {
        assert_eq!(
            cols.get(status)
                .map(|v| v.iter().map(String::as_str).collect::<Vec<_>>()),
            Some(ids.to_vec()),
            "column {status}: {cols:?}"
        );
    };
    expect("triage", &[&triage]);
    expect("todo", &[&child]);
    expect("ready", &[&ready]);
    expect("running", &[]);
    expect("blocked", &[&blocked]);
    expect("done", &[&done]);
    assert!(!cols.contains_key("archived"), "archived shown unasked");
    let reason = b.eval(&format!(
        "return document.querySelector('.card[data-task=\"{blocked}\"] .blocked-reason').textContent;"
    ));
    assert_eq!(reason, Value::String("waiting for the API key".into()));
    let href = b.eval(&format!(
        "return document.querySelector('.card[data-task=\"{ready}\"] a.title').getAttribute('href');"
    ));
    assert_eq!(href, Value::String(format!("/task/{ready}?board=default")));

    mark_and_wait_live(&b);
    k.ok(&["complete", &ready, "--summary", "done"]);
    wait_for("the completed task in the done column", LIVE_LIMIT, || {
        let cols = columns(&b);
        (cols["done"].contains(&ready) && cols["ready"].contains(&child)).then_some(())
    });
    assert_not_reloaded(&b);

    // Archived cards only when asked; the filter narrows by assignee and by text.
    b.goto(&serve.url("/?archived=1"));
    assert_eq!(columns(&b)["archived"], vec![archived.clone()]);
    b.goto(&serve.url("/?assignee=CODER"));
    let shown: Vec<String> = columns(&b).into_values().flatten().collect();
    assert_eq!(shown, vec![ready.clone()]);
    b.goto(&serve.url("/?q=API+key"));
    let shown: Vec<String> = columns(&b).into_values().flatten().collect();
    assert_eq!(shown, vec![blocked.clone()]);

    // The card links to the task page, which shows the task.
    b.goto(&serve.url(&format!("/task/{ready}?board=default")));
    assert_eq!(
        b.eval("return document.querySelector('h1.task-title').textContent;"),
        Value::String("write the parser".into())
    );
    assert_eq!(
        b.eval("return document.getElementById('status').textContent;"),
        Value::String("done".into())
    );
}

/// The path of the page the browser shows.
fn path(b: &Browser) -> String {
    b.eval("return window.location.pathname;")
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_task_is_created_promoted_commented_and_reclaimed_from_the_page_with_the_keyboard() {
    const ENTER: &str = "\u{E007}";
    let b = browser();
    let k = kanban();
    let serve = Serve::start(&k, &[]);
    b.goto(&serve.url("/"));
    // Create: open the form, type a title (as text: markup stays text) and press Enter.
    b.eval("document.querySelector('details.new-task').open = true; return null;");
    b.type_into("form.create input[name=title]", "<b>made</b> on the web");
    b.type_into("form.create input[name=triage]", " ");
    b.type_into("form.create input[name=title]", ENTER);
    let id = wait_for("the new task's page", LIVE_LIMIT, || {
        path(&b).strip_prefix("/task/").map(str::to_owned)
    });
    assert_eq!(
        b.eval("return document.querySelector('h1.task-title').textContent;"),
        Value::String("<b>made</b> on the web".into())
    );
    assert_eq!(k.status(&id), "triage");

    // Promote: the button, pressed with Enter.
    b.type_into("form.promote button", ENTER);
    wait_for("the promotion", LIVE_LIMIT, || {
        (k.status(&id) == "ready").then_some(())
    });

    // Comment, with a payload that must stay text.
    let payload = "<img src=x onerror=\"window.__xss = 1\"> looks good";
    b.type_into("form.comment textarea", payload);
    b.type_into("form.comment button", ENTER);
    wait_for("the comment on the page", LIVE_LIMIT, || {
        b.eval("var c = document.querySelector('.comment pre'); return c ? c.textContent : '';")
            .as_str()
            .is_some_and(|t| t == payload)
            .then_some(())
    });
    assert_eq!(
        b.eval("return window.__xss === undefined;"),
        Value::Bool(true)
    );

    // Claimed elsewhere: the page follows live and offers the reclaim.
    mark_and_wait_live(&b);
    k.ok(&["claim", &id, "--claimer", "w1", "--ttl", "900"]);
    wait_for("the reclaim form", LIVE_LIMIT, || {
        (b.eval("return document.querySelector('form.reclaim') !== null;") == Value::Bool(true))
            .then_some(())
    });
    assert_not_reloaded(&b);
    b.type_into("form.reclaim input[name=reason]", "stuck");
    b.type_into("form.reclaim button", ENTER);
    wait_for("the reclaim", LIVE_LIMIT, || {
        (k.status(&id) == "ready").then_some(())
    });

    // Every step is on the board with the web actor.
    let shown = k.json(&["show", &id, "--json"]);
    assert_eq!(shown["task"]["created_by"], "web", "{shown}");
    assert_eq!(shown["comments"][0]["author"], "web");
    assert_eq!(shown["comments"][0]["body"], payload);
    let actor_of = |kind: &str| -> Value {
        shown["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == kind)
            .map(|e| e["payload"]["actor"].clone())
            .unwrap_or_else(|| panic!("no {kind} event: {shown}"))
    };
    assert_eq!(actor_of("promoted_manual"), "web");
    assert_eq!(actor_of("reclaimed"), "web");
    let commented = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "commented")
        .unwrap();
    assert_eq!(commented["payload"]["author"], "web");
}

#[test]
fn task_page_follows_the_log_of_a_running_agent() {
    let b = browser();
    let k = kanban();
    std::fs::write(
        k.home().join("kanban.toml"),
        "[dispatch]\ninterval_seconds = 0.1\n\n[profiles.sh]\nagent = \"builtin:shell\"\n",
    )
    .unwrap();
    let go = k.home().join("GO");
    let release = k.home().join("RELEASE");
    // builtin:shell captures the body's stdout for the summary; the body writes its progress
    // line to the worker's stdout, which is the task log.
    let body = format!(
        "while [ ! -e '{go}' ]; do sleep 0.05; done; echo visible-line-4711 >> /proc/$PPID/fd/1; \
         while [ ! -e '{release}' ]; do sleep 0.05; done; echo finished",
        go = go.display(),
        release = release.display()
    );
    let id = k.create("tail me", &["--assignee", "sh", "--body", &body]);
    let serve = Serve::start(&k, &[]);
    let mut dispatcher = k.cmd().args(["dispatch", "--until-idle"]).spawn().unwrap();
    wait_for("the task to run", LIVE_LIMIT * 3, || {
        (k.status(&id) == "running").then_some(())
    });

    b.goto(&serve.url(&format!("/task/{id}")));
    mark_and_wait_live(&b);
    let log_text = "var l = document.getElementById('log'); return l ? l.textContent : '';";
    assert!(
        !b.eval(log_text)
            .as_str()
            .unwrap()
            .contains("visible-line-4711")
    );
    std::fs::write(&go, "").unwrap();
    wait_for("the agent's line on the task page", LIVE_LIMIT, || {
        b.eval(log_text)
            .as_str()
            .unwrap()
            .contains("visible-line-4711")
            .then_some(())
    });
    assert_eq!(
        k.status(&id),
        "running",
        "the line must show while the run is open"
    );
    assert_not_reloaded(&b);
    let runs = b.eval("return document.querySelector('table.runs tbody').textContent;");
    assert!(runs.as_str().unwrap().contains("(open)"), "{runs}");

    std::fs::write(&release, "").unwrap();
    let status = wait_for("the dispatcher to finish", LIVE_LIMIT * 3, || {
        dispatcher.try_wait().unwrap()
    });
    assert!(status.success());
    assert_eq!(k.status(&id), "done");
    wait_for("the page to show the run closed", LIVE_LIMIT, || {
        (b.eval("return document.getElementById('status').textContent;")
            == Value::String("done".into()))
        .then_some(())
    });
    let runs = b.eval("return document.querySelector('table.runs tbody').textContent;");
    assert!(runs.as_str().unwrap().contains("exit 0"), "{runs}");
    assert_not_reloaded(&b);
}

#[test]
fn board_values_render_as_text_and_run_no_script() {
    let b = browser();
    let k = kanban();
    let script = "<script>window.__xss = 1</script>";
    let attr = "\"onload=\"window.__xss=2\" x=\"";
    let textarea = "</textarea><img src=x onerror=\"window.__xss=3\">";
    let title = format!("{script} {textarea}");
    let body = format!("{attr}\n{textarea}\n{script}");
    let comment = format!("{textarea} {script}");
    let first = k.create(&title, &["--assignee", attr, "--body", &body]);
    k.ok(&["comment", &first, "--body", &comment]);
    let second = k.create(attr, &["--assignee", script]);
    let stored: Value = k.json(&["show", &first]);
    let stored_assignee = stored["task"]["assignee"]
        .as_str()
        .or_else(|| stored["assignee"].as_str())
        .unwrap()
        .to_owned();
    let serve = Serve::start(&k, &[]);

    let pages = [
        serve.url("/"),
        serve.url(&format!("/task/{first}")),
        serve.url(&format!("/task/{second}")),
    ];
    for url in &pages {
        b.goto(url);
        assert_eq!(
            b.eval("return typeof window.__xss;"),
            Value::String("undefined".into()),
            "{url} ran a payload"
        );
        assert_eq!(
            b.eval("return document.images.length;"),
            Value::from(0),
            "{url}"
        );
        assert_eq!(
            b.eval("return document.scripts.length;"),
            Value::from(1),
            "{url}"
        );
    }

    b.goto(&pages[0]);
    let text = |selector: &str| {
        b.eval(&format!(
            "return document.querySelector('{selector}').textContent;"
        ))
    };
    assert_eq!(
        text(&format!(".card[data-task=\"{first}\"] a.title")),
        Value::String(title.clone())
    );
    assert_eq!(
        text(&format!(".card[data-task=\"{first}\"] .assignee")),
        Value::String(format!("@{stored_assignee}"))
    );
    assert_eq!(
        text(&format!(".card[data-task=\"{second}\"] a.title")),
        Value::String(attr.into())
    );

    b.goto(&pages[1]);
    assert_eq!(text("h1.task-title"), Value::String(title));
    assert_eq!(text("pre.body"), Value::String(body));
    assert_eq!(text(".comment pre"), Value::String(comment));
    assert_eq!(
        b.eval("return document.title;"),
        Value::String(format!(
            "{} · kanban",
            stored["task"]["title"]
                .as_str()
                .or_else(|| stored["title"].as_str())
                .unwrap()
        ))
    );
}

/// A folder to use as the whole `PATH` of `.ci/chromium`, holding `flock`, an `id` that says
/// root, and — when `apt` — a stand-in `apt-get` that behaves as the real one does under
/// contention: it holds dpkg's lock while it "installs" (a second, as a real install holds it
/// for minutes), and a second apt-get meanwhile fails with "Could not get lock". The install
/// writes stand-in `chromium` and `chromedriver` into the folder and logs each call.
fn fake_system(apt: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let script = |name: &str, text: &str| {
        use std::os::unix::fs::PermissionsExt as _;
        let path = bin.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    std::os::unix::fs::symlink("/usr/bin/flock", bin.join("flock")).unwrap();
    script("id", "#!/bin/sh\necho 0\n");
    if apt {
        script(
            "apt-get",
            r#"#!/bin/bash
bin=$(/usr/bin/dirname "$0")
if ! /bin/mkdir "$bin/../dpkg-lock" 2>/dev/null; then
  echo "E: Could not get lock /var/lib/dpkg/lock-frontend" >&2
  exit 100
fi
echo "$*" >> "$bin/../apt-calls"
/bin/sleep 1
for tool in chromium chromedriver; do
  printf '#!/bin/sh\n' > "$bin/$tool.new" && /bin/chmod +x "$bin/$tool.new" && /bin/mv "$bin/$tool.new" "$bin/$tool"
done
/bin/rmdir "$bin/../dpkg-lock"
"#,
        );
    }
    dir
}

/// `bash .ci/chromium` on `fake`'s system: its folder as `PATH`, its own lock folder.
fn on_fake_system(fake: &tempfile::TempDir) -> std::process::Command {
    let mut bash = std::process::Command::new("/bin/bash");
    bash.env("PATH", fake.path().join("bin"))
        .env("TMPDIR", fake.path());
    bash
}

#[test]
fn the_chromium_setup_installs_once_when_tests_race_for_it() {
    let fake = fake_system(true);
    let racers: Vec<_> = (0..4)
        .map(|_| {
            let mut bash = on_fake_system(&fake);
            std::thread::spawn(move || run_chromium_script(&mut bash))
        })
        .collect();
    let bin = fake.path().join("bin");
    for racer in racers {
        let found = racer.join().unwrap();
        assert_eq!(
            found,
            Ok((bin.join("chromium"), bin.join("chromedriver"))),
            "a racer found no browser"
        );
    }
    let calls = std::fs::read_to_string(fake.path().join("apt-calls")).unwrap();
    assert_eq!(
        calls.lines().count(),
        1,
        "apt-get ran more than once: {calls}"
    );
    assert!(
        calls.contains("install -y chromium chromium-driver"),
        "{calls}"
    );
    // Installed: the next run finds it without apt-get.
    assert!(run_chromium_script(&mut on_fake_system(&fake)).is_ok());
    let calls = std::fs::read_to_string(fake.path().join("apt-calls")).unwrap();
    assert_eq!(calls.lines().count(), 1, "{calls}");
}

#[test]
fn a_missing_browser_fails_the_test_instead_of_skipping() {
    let fake = fake_system(false);
    let reason = run_chromium_script(&mut on_fake_system(&fake)).unwrap_err();
    assert!(reason.contains("no apt-get"), "{reason}");
    let failed = std::panic::catch_unwind(|| missing_browser(&reason));
    let message = failed.unwrap_err();
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("no headless Chromium"), "{message}");
    assert!(message.contains("no apt-get"), "{message}");
}
