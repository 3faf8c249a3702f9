//! Board maintenance end to end (issue 30 item 7), on SQLite and on PostgreSQL boards
//! (`kanban_pgwire::cluster::TestCluster`): `boards list` with task counts and archived boards,
//! `boards rename`.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test

use kanban_pgwire::cluster::TestCluster;
use kanban_tests::Kanban;

fn kanban() -> Kanban {
    Kanban::new(env!("CARGO_BIN_EXE_kanban"))
}

fn fresh_url(what: &str) -> String {
    let cluster = TestCluster::shared().expect("a PostgreSQL test server");
    let name = cluster.fresh_database(what).expect("create a database");
    cluster.url(&name)
}

/// The two stores a board `slug` can be created in: `boards create SLUG [--url URL]`.
fn create_board(k: &Kanban, slug: &str, postgres: bool) {
    if postgres {
        let url = fresh_url(slug);
        k.ok(&["boards", "create", slug, "--url", &url]);
    } else {
        k.ok(&["boards", "create", slug]);
    }
}

/// `--board SLUG` and `args`.
fn on<'a>(slug: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    [&["--board", slug][..], args].concat()
}

/// The `boards list --json` entry of `slug` (the live one, not an archived folder).
fn listed(k: &Kanban, slug: &str) -> serde_json::Value {
    let all = k.json(&["boards", "list"]);
    all.as_array()
        .unwrap()
        .iter()
        .find(|e| e["slug"] == slug && e["archived_path"].is_null())
        .unwrap_or_else(|| panic!("{slug} not in {all}"))
        .clone()
}

fn counts_and_names(postgres: bool) {
    let k = kanban();
    create_board(&k, "ops-team", postgres);
    let b = ["--board", "ops-team"];
    let a = k.create("a", &b);
    k.create("b", &b);
    let c = k.create("c", &b);
    k.ok(&on(
        "ops-team",
        &["complete", &a, "--summary", "s", "--force"],
    ));
    k.ok(&on("ops-team", &["archive", &c]));
    let e = listed(&k, "ops-team");
    assert_eq!(e["name"], "Ops Team", "{e}");
    assert_eq!(e["counts"]["total"], 3, "{e}");
    assert_eq!(e["counts"]["open"], 1, "{e}");
    assert_eq!(e["counts"]["by_status"]["ready"], 1, "{e}");
    assert_eq!(e["counts"]["by_status"]["done"], 1, "{e}");
    assert_eq!(e["counts"]["by_status"]["archived"], 1, "{e}");
    assert_eq!(e["archived"], false, "{e}");
    assert_eq!(e["store"], if postgres { "postgres" } else { "sqlite" });
    let text = k.ok(&["boards", "list"]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("  ops-team ") && l.ends_with(" \"Ops Team\" 3 tasks, 1 open")),
        "{text}"
    );

    k.ok(&["boards", "rename", "ops-team", "  Operations (EU)  "]);
    let e = listed(&k, "ops-team");
    assert_eq!(e["name"], "Operations (EU)", "{e}");
    // The slug is unchanged: the board is still reached by it.
    assert_eq!(
        k.json(&on("ops-team", &["list"])).as_array().unwrap().len(),
        2
    );
    assert!(
        k.ok(&["boards", "list"])
            .contains(" \"Operations (EU)\" 3 tasks")
    );
}

#[test]
fn boards_list_counts_tasks_and_rename_sets_the_display_name_on_sqlite() {
    counts_and_names(false);
}

#[test]
fn boards_list_counts_tasks_and_rename_sets_the_display_name_on_postgres() {
    counts_and_names(true);
}

#[test]
fn bad_renames_are_refused_and_change_nothing() {
    let k = kanban();
    k.ok(&["boards", "create", "ops"]);
    k.ok(&["boards", "rename", "ops", "Ops"]);
    let meta = k.home().join("kanban/boards/ops/board.json");
    let before = std::fs::read(&meta).unwrap();
    for (args, needle) in [
        (vec!["boards", "rename", "ops", "  "], "cannot be empty"),
        (
            vec!["boards", "rename", "ops", "a\nb"],
            "control characters",
        ),
        (
            vec!["boards", "rename", "ops", &"x".repeat(101)],
            "at most 100",
        ),
        (vec!["boards", "rename", "nope", "X"], "nope"),
        (vec!["boards", "rename", "../x", "X"], "slug"),
    ] {
        let run = k.run(&args);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stdout);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
        assert_eq!(std::fs::read(&meta).unwrap(), before, "{args:?}");
    }
    assert!(!k.home().join("kanban/boards/nope").exists());
}

#[test]
fn boards_marked_or_moved_aside_by_the_original_are_listed_as_archived() {
    let k = kanban();
    k.ok(&["boards", "create", "old"]);
    k.ok(&["boards", "create", "gone"]);
    k.create("t", &["--board", "gone"]);
    let boards = k.home().join("kanban/boards");
    // The original's dashboard marks a board archived in its board.json …
    std::fs::write(boards.join("old/board.json"), "{\"archived\": true}").unwrap();
    // … and its `boards rm` moves the folder to `_archived/<slug>-<epoch>`.
    std::fs::create_dir_all(boards.join("_archived")).unwrap();
    std::fs::rename(
        boards.join("gone"),
        boards.join("_archived/gone-1700000000"),
    )
    .unwrap();
    let e = listed(&k, "old");
    assert_eq!(e["archived"], true, "{e}");
    let all = k.json(&["boards", "list"]);
    let gone = all
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["slug"] == "gone")
        .unwrap_or_else(|| panic!("{all}"));
    assert_eq!(gone["archived"], true, "{gone}");
    assert_eq!(gone["archived_at"], 1_700_000_000, "{gone}");
    assert_eq!(gone["counts"]["total"], 1, "{gone}");
    assert!(
        gone["archived_path"]
            .as_str()
            .unwrap()
            .ends_with("gone-1700000000")
    );
    let text = k.ok(&["boards", "list"]);
    assert!(
        text.contains("old \"Old\" 0 tasks, 0 open (archived)"),
        "{text}"
    );
    assert!(
        text.contains("gone \"Gone\" 1 tasks, 1 open (archived at "),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// boards export / boards import

/// A board `slug` with every kind of row: tasks in many statuses, links, comments, runs
/// (closed and open), events, attachments (two files on one task, one on another) and a log.
fn populate(k: &Kanban, slug: &str) -> Vec<String> {
    let a = k.create(
        "parent",
        &on(
            slug,
            &["--assignee", "bot", "--priority", "3", "--body", "b"],
        ),
    );
    let b = k.create("child", &on(slug, &["--parent", &a]));
    let c = k.create("triage", &on(slug, &["--triage"]));
    let d = k.create("blocked", &on(slug, &["--blocked"]));
    let e = k.create("archived", &on(slug, &[]));
    let f = k.create("reclaimed", &on(slug, &["--max-runtime", "60"]));
    k.ok(&on(slug, &["claim", &a]));
    k.ok(&on(
        slug,
        &["complete", &a, "--summary", "s", "--result", "r", "--force"],
    ));
    k.ok(&on(
        slug,
        &["comment", &b, "--body", "a comment\nwith two lines"],
    ));
    let spec = k.home().join("spec.md");
    std::fs::write(&spec, "# spec\n").unwrap();
    let bin = k.home().join("data.bin");
    std::fs::write(&bin, [0u8, 1, 2, 255, 254]).unwrap();
    k.ok(&on(
        slug,
        &["attach", &b, spec.to_str().unwrap(), bin.to_str().unwrap()],
    ));
    k.ok(&on(slug, &["attach", &d, spec.to_str().unwrap()]));
    k.ok(&on(slug, &["archive", &e]));
    k.ok(&on(slug, &["claim", &f]));
    k.ok(&on(slug, &["reclaim", &f, "--reason", "moved"]));
    vec![a, b, c, d, e, f]
}

/// What a board looks like from outside: its tasks (`list --all --json`), each task's
/// `show --json` and `events --json`, and each attachment's row and bytes (the stored path,
/// which names the board's folder, left out).
fn board_view(k: &Kanban, slug: &str, ids: &[String]) -> serde_json::Value {
    let mut tasks = k.json(&on(slug, &["list", "--all"]));
    let mut per_task = serde_json::Map::new();
    for id in ids {
        let show = k.json(&on(slug, &["show", id]));
        let events = k.json(&on(slug, &["events", id]));
        let mut attachments = k.json(&on(slug, &["attachments", id]));
        for a in attachments.as_array_mut().unwrap() {
            let path = a["stored_path"].as_str().unwrap().to_owned();
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            a["bytes"] = serde_json::json!(bytes);
            a.as_object_mut().unwrap().remove("stored_path");
        }
        per_task.insert(
            id.clone(),
            serde_json::json!({"show": strip_paths(show), "events": events, "attachments": attachments}),
        );
    }
    for t in tasks.as_array_mut().unwrap() {
        t.as_object_mut().unwrap().remove("board");
    }
    serde_json::json!({"tasks": tasks, "per_task": per_task})
}

/// `show --json` without what names the home (the attachments' stored paths).
fn strip_paths(mut show: serde_json::Value) -> serde_json::Value {
    if let Some(list) = show["attachments"].as_array_mut() {
        for a in list {
            a.as_object_mut().unwrap().remove("stored_path");
        }
    }
    show
}

fn round_trip(from_pg: bool, to_pg: bool) {
    let src = kanban();
    create_board(&src, "ops", from_pg);
    src.ok(&["boards", "rename", "ops", "Operations"]);
    let ids = populate(&src, "ops");
    let log = src
        .home()
        .join("kanban/logs/ops")
        .join(format!("{}.log", ids[0]));
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(&log, "worker said hello\n").unwrap();
    let before = board_view(&src, "ops", &ids);
    let archive = src.home().join("ops.tar.gz");
    let out = src.json(&[
        "boards",
        "export",
        "ops",
        archive.to_str().unwrap(),
        "--with-logs",
    ]);
    assert_eq!(out["attachments"], 3, "{out}");
    assert_eq!(out["logs"], 1, "{out}");
    // Exporting reads only: the source board is unchanged.
    assert_eq!(board_view(&src, "ops", &ids), before);

    // Into another home, in the other store (or the same), under a new slug.
    let dst = kanban();
    let mut args = vec![
        "boards",
        "import",
        archive.to_str().unwrap(),
        "--as",
        "copy",
    ];
    let url;
    if to_pg {
        url = fresh_url("import");
        args.extend(["--url", url.as_str()]);
    }
    let made = dst.json(&args);
    assert_eq!(
        made["store"],
        if to_pg { "postgres" } else { "sqlite" },
        "{made}"
    );
    assert_eq!(made["from_slug"], "ops", "{made}");
    assert_eq!(made["rows"]["tasks"], 6, "{made}");
    let after = board_view(&dst, "copy", &ids);
    assert_eq!(
        after, before,
        "the imported board differs from the exported one"
    );
    // The files are the new board's own.
    for a in dst
        .json(&on("copy", &["attachments", &ids[1]]))
        .as_array()
        .unwrap()
    {
        let path = a["stored_path"].as_str().unwrap();
        assert!(
            path.starts_with(dst.home().join("kanban/attachments/copy").to_str().unwrap()),
            "{path}"
        );
    }
    let copied_log = dst
        .home()
        .join("kanban/logs/copy")
        .join(format!("{}.log", ids[0]));
    assert_eq!(
        std::fs::read_to_string(&copied_log).unwrap(),
        "worker said hello\n"
    );
    let listed = listed(&dst, "copy");
    assert_eq!(listed["name"], "Operations", "{listed}");
    dst.assert_fsck_clean();
    // The imported board works: a new task gets an id and a run gets a fresh run id.
    let g = dst.create("after import", &on("copy", &[]));
    dst.ok(&on("copy", &["claim", &g]));
    dst.ok(&on("copy", &["complete", &g, "--summary", "ok", "--force"]));
    let runs = dst.json(&on("copy", &["show", &g]))["runs"].clone();
    let old_runs: Vec<i64> = ids
        .iter()
        .flat_map(|id| {
            before["per_task"][id]["show"]["runs"]
                .as_array()
                .unwrap()
                .clone()
        })
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    let new_run = runs[0]["id"].as_i64().unwrap();
    assert!(
        old_runs.iter().all(|r| *r < new_run),
        "{old_runs:?} {new_run}"
    );
}

#[test]
fn export_import_round_trip_sqlite_to_postgres_compares_equal() {
    round_trip(false, true);
}

#[test]
fn export_import_round_trip_postgres_to_sqlite_compares_equal() {
    round_trip(true, false);
}

#[test]
fn export_import_round_trip_sqlite_to_sqlite_compares_equal() {
    round_trip(false, false);
}

/// Every file under `dir` with its bytes (SQLite's `-shm` index left out).
fn files_of(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    fn walk(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, Vec<u8>)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if !p.to_string_lossy().ends_with("-shm") {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

/// A `.tar.gz` of `entries` (name, bytes) written without the `tar` crate's path checks, so
/// an archive can hold what kanban must refuse.
fn raw_archive(path: &std::path::Path, entries: &[(&str, &[u8], tar::EntryType)]) {
    let file = std::fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (name, bytes, kind) in entries {
        let mut h = tar::Header::new_old();
        let field = &mut h.as_old_mut().name;
        field[..name.len()].copy_from_slice(name.as_bytes());
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(*kind);
        if *kind == tar::EntryType::Symlink {
            h.set_link_name("/etc/passwd").unwrap();
        }
        h.set_cksum();
        tar.append(&h, *bytes).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
}

#[test]
fn import_refuses_bad_archives_and_taken_slugs_and_changes_nothing() {
    let k = kanban();
    k.ok(&["boards", "create", "ops"]);
    let ids = populate(&k, "ops");
    let good = k.home().join("good.tar.gz");
    k.ok(&["boards", "export", "ops", good.to_str().unwrap()]);
    let bytes = std::fs::read(&good).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, data: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, data).unwrap();
        p
    };
    let manifest = |version: u64| {
        format!("{{\"format\": \"kanban-board-export\", \"version\": {version}}}").into_bytes()
    };
    let traversal = dir.path().join("traversal.tar.gz");
    raw_archive(&traversal, &[("../../evil", b"x", tar::EntryType::Regular)]);
    let absolute = dir.path().join("absolute.tar.gz");
    raw_archive(&absolute, &[("/tmp/evil", b"x", tar::EntryType::Regular)]);
    let nested = dir.path().join("nested.tar.gz");
    raw_archive(
        &nested,
        &[(
            "attachments/t_1/../../../evil",
            b"x",
            tar::EntryType::Regular,
        )],
    );
    let link = dir.path().join("link.tar.gz");
    raw_archive(
        &link,
        &[("attachments/t_1/x", b"", tar::EntryType::Symlink)],
    );
    let future = dir.path().join("future.tar.gz");
    raw_archive(
        &future,
        &[("manifest.json", &manifest(2), tar::EntryType::Regular)],
    );
    let other = dir.path().join("other.tar.gz");
    raw_archive(
        &other,
        &[(
            "manifest.json",
            b"{\"format\": \"zip\", \"version\": 1}",
            tar::EntryType::Regular,
        )],
    );
    let no_db = dir.path().join("nodb.tar.gz");
    raw_archive(
        &no_db,
        &[("manifest.json", &manifest(1), tar::EntryType::Regular)],
    );
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![good.display().to_string()], "already exists"),
        (
            vec![
                file("half.tar.gz", &bytes[..bytes.len() / 2])
                    .display()
                    .to_string(),
                "--as".into(),
                "x1".into(),
            ],
            "corrupt or truncated",
        ),
        (
            vec![
                file("trailer.tar.gz", &bytes[..bytes.len() - 4])
                    .display()
                    .to_string(),
                "--as".into(),
                "x2".into(),
            ],
            "corrupt or truncated",
        ),
        (
            vec![
                file("junk.tar.gz", b"not an archive at all")
                    .display()
                    .to_string(),
            ],
            "corrupt or truncated",
        ),
        (vec![traversal.display().to_string()], "`..`"),
        (vec![absolute.display().to_string()], "absolute path"),
        (vec![nested.display().to_string()], "`..`"),
        (vec![link.display().to_string()], "not a regular file"),
        (vec![future.display().to_string()], "version 2"),
        (vec![other.display().to_string()], "format `zip`"),
        (
            vec![no_db.display().to_string()],
            "not a valid board archive",
        ),
        (
            vec![good.display().to_string(), "--as".into(), "default".into()],
            "default board",
        ),
        (
            vec![good.display().to_string(), "--as".into(), "Bad/Slug".into()],
            "slug",
        ),
        (
            vec!["/nonexistent/x.tar.gz".into(), "--as".into(), "x3".into()],
            "x.tar.gz",
        ),
    ];
    let before = files_of(k.home());
    for (args, needle) in cases {
        let mut all = vec!["boards", "import"];
        all.extend(args.iter().map(String::as_str));
        let run = k.run(&all);
        assert_eq!(run.code, 1, "{all:?}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(needle), "{all:?}: {}", run.stderr);
        assert_eq!(files_of(k.home()), before, "{all:?} changed the home");
    }
    assert!(!std::path::Path::new("/tmp/evil").exists());
    // The source board still reads as before.
    assert_eq!(
        k.json(&on("ops", &["list", "--all"]))
            .as_array()
            .unwrap()
            .len(),
        ids.len()
    );
}

#[test]
fn import_into_a_postgres_database_that_is_not_empty_is_refused_and_changes_nothing() {
    let k = kanban();
    k.ok(&["boards", "create", "ops"]);
    populate(&k, "ops");
    let archive = k.home().join("ops.tar.gz");
    k.ok(&["boards", "export", "ops", archive.to_str().unwrap()]);
    let url = fresh_url("taken");
    k.ok(&["boards", "create", "other", "--url", &url]);
    k.create("there", &on("other", &[]));
    let before = files_of(k.home());
    let run = k.run(&[
        "boards",
        "import",
        archive.to_str().unwrap(),
        "--as",
        "copy",
        "--url",
        &url,
    ]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("not empty"), "{}", run.stderr);
    assert_eq!(files_of(k.home()), before);
    assert_eq!(k.json(&on("other", &["list"])).as_array().unwrap().len(), 1);
}

#[test]
fn export_refuses_an_existing_file_and_a_missing_board() {
    let k = kanban();
    k.ok(&["boards", "create", "ops"]);
    let taken = k.home().join("taken.tar.gz");
    std::fs::write(&taken, "mine").unwrap();
    let run = k.run(&["boards", "export", "ops", taken.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("already exists"), "{}", run.stderr);
    assert_eq!(std::fs::read(&taken).unwrap(), b"mine");
    let run = k.run(&[
        "boards",
        "export",
        "nope",
        k.home().join("n.tar.gz").to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("nope"), "{}", run.stderr);
    assert!(!k.home().join("n.tar.gz").exists());
    // No staging folder is left behind.
    let left: Vec<_> = std::fs::read_dir(k.home())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".kanban-export")
        })
        .collect();
    assert!(left.is_empty());
}

// ---------------------------------------------------------------------------------------------
// kanban delete / kanban archive --rm

fn delete_with_relations(postgres: bool) {
    let k = kanban();
    create_board(&k, "ops", postgres);
    let parent = k.create("parent", &on("ops", &[]));
    let child = k.create("child", &on("ops", &["--parent", &parent]));
    let keep = k.create("keep", &on("ops", &[]));
    let spec = k.home().join("spec.md");
    std::fs::write(&spec, "# spec\n").unwrap();
    k.ok(&on("ops", &["attach", &parent, spec.to_str().unwrap()]));
    k.ok(&on("ops", &["comment", &parent, "--body", "note"]));
    k.ok(&on("ops", &["claim", &parent]));
    let stored = k.json(&on("ops", &["attachments", &parent]))[0]["stored_path"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(std::path::Path::new(&stored).is_file());

    // A running task is refused, and nothing changes.
    let before = k.json(&on("ops", &["show", &parent]));
    for verb in [vec!["delete"], vec!["archive", "--rm"]] {
        let mut args = on("ops", &verb);
        args.push(&parent);
        let run = k.run(&args);
        assert_eq!(run.code, 3, "{verb:?}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stderr.contains("reclaim it first"), "{}", run.stderr);
        assert_eq!(k.json(&on("ops", &["show", &parent])), before, "{verb:?}");
    }
    assert!(std::path::Path::new(&stored).is_file());

    k.ok(&on("ops", &["reclaim", &parent]));
    let gone = k.json(&on("ops", &["delete", &parent]));
    assert_eq!(gone["task_id"], parent.as_str(), "{gone}");
    assert_eq!(gone["runs"], 1, "{gone}");
    assert_eq!(gone["comments"], 1, "{gone}");
    assert_eq!(gone["links"], 1, "{gone}");
    assert_eq!(gone["promoted"], serde_json::json!([child]), "{gone}");
    assert_eq!(gone["files_removed"], serde_json::json!([stored]), "{gone}");
    assert!(!std::path::Path::new(&stored).exists());
    let run = k.run(&on("ops", &["show", &parent]));
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stderr.contains("no task"), "{}", run.stderr);
    let child_view = k.json(&on("ops", &["show", &child]));
    assert_eq!(child_view["parents"], serde_json::json!([]), "{child_view}");
    assert_eq!(child_view["task"]["status"], "ready", "{child_view}");
    let left: Vec<String> = k
        .json(&on("ops", &["list", "--all"]))
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(left.len(), 2);
    assert!(left.contains(&child) && left.contains(&keep), "{left:?}");
    // No run or event of the deleted task is left anywhere.
    let runs = k.json(&on("ops", &["runs"]));
    assert!(
        runs.as_array()
            .unwrap()
            .iter()
            .all(|r| r["task_id"] != parent.as_str()),
        "{runs}"
    );
    k.ok(&on("ops", &["fsck"]));

    // archive --rm: archived, then deleted.
    let both = k.json(&on("ops", &["archive", "--rm", &keep]));
    assert_eq!(both["archived"], true, "{both}");
    assert_eq!(both["prev_status"], "archived", "{both}");
    assert_eq!(
        k.json(&on("ops", &["list", "--all"]))
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // An unknown id is an error; several ids run each on its own.
    let run = k.run(&on("ops", &["delete", "t_00000000"]));
    assert_eq!(run.code, 1, "{}", run.stderr);
    let run = k.run(&on("ops", &["delete", &child, "t_00000000"]));
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        k.json(&on("ops", &["list", "--all"]))
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

#[test]
fn delete_removes_a_task_with_its_relations_and_refuses_a_running_one_on_sqlite() {
    delete_with_relations(false);
}

#[test]
fn delete_removes_a_task_with_its_relations_and_refuses_a_running_one_on_postgres() {
    delete_with_relations(true);
}

#[test]
fn archive_rm_keeps_a_task_whose_workspace_is_still_needed() {
    let k = kanban();
    let parent = k.create("parent", &[]);
    let child = k.create("child", &["--parent", &parent]);
    k.ok(&["claim", &parent]);
    k.ok(&["complete", &parent, "--summary", "s", "--force"]);
    // The parent's scratch workspace is on disk, and its open child may still read it: the
    // cleanup defers, so the task stays archived rather than orphan the folder.
    let ws = k.home().join("kanban/workspaces").join(&parent);
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "work").unwrap();
    let run = k.run(&["archive", "--rm", &parent]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("workspace"), "{}", run.stderr);
    assert_eq!(k.status(&parent), "archived");
    assert!(ws.join("notes.txt").is_file());
    // Once the child is finished too, the workspace goes and so does the task.
    k.ok(&["claim", &child]);
    k.ok(&["complete", &child, "--summary", "s", "--force"]);
    let gone = k.json(&["archive", "--rm", &parent]);
    assert_eq!(gone["task_id"], parent.as_str(), "{gone}");
    assert!(!ws.exists());
    assert_eq!(k.run(&["show", &parent]).code, 1);
}

// ---------------------------------------------------------------------------------------------
// kanban repair

/// A default board of five tasks, its WAL folded into the file.
fn small_board(k: &Kanban) -> std::path::PathBuf {
    for i in 0..5 {
        k.create(&format!("t{i}"), &[]);
    }
    let db = k.default_db();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    db
}

fn integrity(db: &std::path::Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn.prepare("PRAGMA integrity_check").unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Overwrites the root page of index `name` with an empty index leaf page: the tables are
/// intact, the index lists none of their rows.
fn empty_index_page(db: &std::path::Path, name: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let root: i64 = conn
        .query_row(
            "SELECT rootpage FROM sqlite_master WHERE name = ?1",
            [name],
            |r| r.get(0),
        )
        .unwrap();
    let size: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap();
    drop(conn);
    let (root, size) = (
        usize::try_from(root).unwrap(),
        usize::try_from(size).unwrap(),
    );
    let mut bytes = std::fs::read(db).unwrap();
    let page = &mut bytes[(root - 1) * size..root * size];
    assert_eq!(page[0], 0x0A, "the index root is a leaf page");
    page.fill(0);
    page[0] = 0x0A;
    page[5..7].copy_from_slice(&u16::try_from(size % 65536).unwrap().to_be_bytes());
    std::fs::write(db, &bytes).unwrap();
}

fn backups(db: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(db.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.to_string_lossy().contains(".corrupt.") && p.to_string_lossy().ends_with(".bak")
        })
        .collect();
    found.sort();
    found
}

#[test]
fn repair_rebuilds_a_damaged_index_and_keeps_the_quarantine_copy() {
    let k = kanban();
    let db = small_board(&k);
    empty_index_page(&db, "idx_tasks_status_order");
    let damaged = integrity(&db);
    assert!(
        damaged
            .iter()
            .any(|m| m.contains("missing from index idx_tasks_status_order")),
        "{damaged:?}"
    );
    let found = std::fs::read(&db).unwrap();

    let out = k.json(&["repair"]);
    assert_eq!(out["status"], "repaired", "{out}");
    assert_eq!(
        out["reindexed"],
        serde_json::json!(["idx_tasks_status_order"]),
        "{out}"
    );
    assert_eq!(integrity(&db), ["ok"]);
    let kept = backups(&db);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(out["backup"], kept[0].to_str().unwrap(), "{out}");
    assert_eq!(
        std::fs::read(&kept[0]).unwrap(),
        found,
        "the backup is the file as found"
    );
    assert_eq!(
        k.json(&["list", "--status", "ready"])
            .as_array()
            .unwrap()
            .len(),
        5
    );
    k.assert_fsck_clean();
    // Now healthy: a second repair changes nothing and makes no second backup.
    let again = k.ok(&["repair"]);
    assert!(again.contains("is healthy"), "{again}");
    assert_eq!(backups(&db), kept);
}

#[test]
fn repair_leaves_a_healthy_board_alone() {
    let k = kanban();
    let db = small_board(&k);
    let before = std::fs::read(&db).unwrap();
    let run = k.run(&["repair"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("is healthy") && run.stdout.contains("nothing was changed"),
        "{}",
        run.stdout
    );
    assert_eq!(std::fs::read(&db).unwrap(), before);
    assert!(backups(&db).is_empty());
}

#[test]
fn repair_refuses_damage_beyond_indexes_and_keeps_the_file_and_its_copy() {
    let k = kanban();
    let db = small_board(&k);
    let mut bytes = std::fs::read(&db).unwrap();
    // The header page kept, every page after it garbage: table pages are damaged too.
    for (i, b) in bytes.iter_mut().enumerate().skip(4096) {
        *b = (i % 251) as u8;
    }
    std::fs::write(&db, &bytes).unwrap();
    let run = k.run(&["repair"]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("beyond its indexes"), "{}", run.stderr);
    assert_eq!(
        std::fs::read(&db).unwrap(),
        bytes,
        "no REINDEX on such a file"
    );
    let kept = backups(&db);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(std::fs::read(&kept[0]).unwrap(), bytes);
}

#[test]
fn repair_refuses_a_postgres_board_and_a_board_a_dispatcher_ticks() {
    let k = kanban();
    create_board(&k, "pg", true);
    let run = k.run(&["--board", "pg", "repair"]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("PostgreSQL") && run.stderr.contains("REINDEX"),
        "{}",
        run.stderr
    );

    let db = small_board(&k);
    empty_index_page(&db, "idx_tasks_status_order");
    let found = std::fs::read(&db).unwrap();
    let held = kanban_runtime::home::lock::TickLock::try_acquire(&db)
        .unwrap()
        .unwrap();
    let run = k.run(&["repair"]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("dispatcher"), "{}", run.stderr);
    assert_eq!(std::fs::read(&db).unwrap(), found);
    assert!(backups(&db).is_empty());
    drop(held);
    assert_eq!(k.json(&["repair"])["status"], "repaired");
}

#[test]
fn import_goes_where_kanban_toml_puts_the_slug() {
    let k = kanban();
    k.ok(&["boards", "create", "ops"]);
    let ids = populate(&k, "ops");
    let before = board_view(&k, "ops", &ids);
    let archive = k.home().join("ops.tar.gz");
    k.ok(&["boards", "export", "ops", archive.to_str().unwrap()]);
    let url = fresh_url("configured");
    std::fs::write(
        k.home().join("kanban.toml"),
        format!("[boards.team]\nurl = \"{url}\"\n"),
    )
    .unwrap();
    let made = k.json(&[
        "boards",
        "import",
        archive.to_str().unwrap(),
        "--as",
        "team",
    ]);
    assert_eq!(made["store"], "postgres", "{made}");
    assert_eq!(board_view(&k, "team", &ids), before);
    // Nothing was recorded beside kanban.toml's entry, and a second import is refused.
    assert!(!k.home().join("kanban/boards/team/postgres.url").exists());
    let files = files_of(k.home());
    let run = k.run(&[
        "boards",
        "import",
        archive.to_str().unwrap(),
        "--as",
        "team",
    ]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("board `team`'s files"),
        "{}",
        run.stderr
    );
    assert_eq!(files_of(k.home()), files);
    assert_eq!(board_view(&k, "team", &ids), before);
}
