//! Attachments and artifacts end to end (issue 27, item 4), on a SQLite and on a PostgreSQL
//! board: `kanban attach` (the 25 MiB cap, safe stored names, content type), `attachments
//! --json`, `attach-rm`, the attachments in a real worker's prompt, and `complete --artifact`
//! (and a path the summary names) copied out of a scratch workspace before its cleanup.

// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used)]

mod dispatch_support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use dispatch_support::{Home, config};
use kanban_runtime::board::attachments::KANBAN_ATTACHMENT_MAX_BYTES;

fn run(home: &Home, args: &[&str]) -> Output {
    home.kanban(args).output().unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn attachments(home: &Home, id: &str) -> Vec<serde_json::Value> {
    let out = ok(&run(home, &["--json", "attachments", id]));
    serde_json::from_str::<serde_json::Value>(&out)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn dir_of(home: &Home, id: &str) -> PathBuf {
    kanban_runtime::home::attachments_dir(&home.root, "default", id)
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A board on the throwaway PostgreSQL server, with the same profiles.
fn postgres_home(name: &str, extra: &str) -> Home {
    let cluster = kanban_pgwire::cluster::TestCluster::shared().expect("a PostgreSQL test server");
    let url = cluster.url(&cluster.fresh_database(name).expect("a database"));
    Home::new(&format!(
        "{}{extra}\n[boards.default]\nurl = \"{url}\"\n",
        config("")
    ))
}

fn too_large_is_refused_and_nothing_is_stored(home: &Home) {
    let id = ok(&run(home, &["create", "big"]));
    let src = tempfile::tempdir().unwrap();
    let big = src.path().join("big.bin");
    // Sparse: 25 MiB + 1 byte on no disk.
    std::fs::File::create(&big)
        .unwrap()
        .set_len(KANBAN_ATTACHMENT_MAX_BYTES + 1)
        .unwrap();
    let small = src.path().join("small.txt");
    std::fs::write(&small, "fits").unwrap();
    let out = run(
        home,
        &[
            "attach",
            &id,
            small.to_str().unwrap(),
            big.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("over the attachment limit"), "{stderr}");
    assert!(stderr.contains("26214401 bytes"), "{stderr}");
    // Neither file: the refusal comes before the first is stored.
    assert!(attachments(home, &id).is_empty());
    assert!(files_in(&dir_of(home, &id)).is_empty());
    assert!(!home.kinds(&id).contains(&"attached".to_owned()));
}

#[test]
fn a_file_over_25_mib_is_refused_and_nothing_is_stored() {
    too_large_is_refused_and_nothing_is_stored(&Home::new(&config("")));
}

#[test]
fn a_file_over_25_mib_is_refused_and_nothing_is_stored_on_postgres() {
    too_large_is_refused_and_nothing_is_stored(&postgres_home("att_big", ""));
}

fn names_are_stored_safely_and_listed_in_the_originals_shape(home: &Home) {
    let id = ok(&run(home, &["create", "names"]));
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("notes.md");
    std::fs::write(&file, "# notes\n").unwrap();
    let file = file.to_str().unwrap();
    for _ in 0..2 {
        ok(&run(
            home,
            &[
                "attach",
                &id,
                file,
                "--name",
                "../../evil.md",
                "--author",
                "ops",
            ],
        ));
    }
    // Only a name with nothing usable left is refused.
    let out = run(home, &["attach", &id, file, "--name", "../.."]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid attachment filename"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let dir = std::fs::canonicalize(dir_of(home, &id)).unwrap();
    assert_eq!(files_in(&dir), ["evil (1).md", "evil.md"]);
    assert!(!home.root.join("kanban").join("evil.md").exists());
    assert!(!home.root.join("evil.md").exists());

    let list = attachments(home, &id);
    assert_eq!(list.len(), 2);
    let first = list[0].as_object().unwrap();
    let mut keys: Vec<&str> = first.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "content_type",
            "created_at",
            "filename",
            "id",
            "size",
            "stored_path",
            "uploaded_by"
        ]
    );
    assert_eq!(first["filename"], "evil.md");
    assert_eq!(first["content_type"], "text/markdown");
    assert_eq!(first["size"], 8);
    assert_eq!(first["uploaded_by"], "ops");
    assert_eq!(
        first["stored_path"],
        dir.join("evil.md").display().to_string()
    );
    assert_eq!(list[1]["filename"], "evil (1).md");
    let attached: Vec<_> = home
        .events(&id)
        .into_iter()
        .filter(|e| e.kind == "attached")
        .collect();
    assert_eq!(
        attached[0].payload,
        Some(serde_json::json!({"filename": "evil.md", "size": 8, "by": "ops"}))
    );

    // attach-rm: the row, the file and an event; an unknown name is an error.
    ok(&run(home, &["attach-rm", &id, "evil.md"]));
    assert_eq!(files_in(&dir), ["evil (1).md"]);
    let left = attachments(home, &id);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["filename"], "evil (1).md");
    let removed = home
        .events(&id)
        .into_iter()
        .rfind(|e| e.kind == "attachment_removed")
        .unwrap();
    assert_eq!(
        removed.payload,
        Some(serde_json::json!({"filename": "evil.md"}))
    );
    let out = run(home, &["attach-rm", &id, "evil.md"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no attachment named"));
    // By id too (the original's `attach-rm` takes the attachment id).
    let left_id = left[0]["id"].as_i64().unwrap().to_string();
    ok(&run(home, &["attach-rm", &id, &left_id]));
    assert!(attachments(home, &id).is_empty());
    assert!(files_in(&dir).is_empty());
    home.board().fsck().unwrap();
}

#[test]
fn names_are_stored_safely_listed_in_the_originals_shape_and_removed() {
    names_are_stored_safely_and_listed_in_the_originals_shape(&Home::new(&config("")));
}

#[test]
fn names_are_stored_safely_listed_in_the_originals_shape_and_removed_on_postgres() {
    names_are_stored_safely_and_listed_in_the_originals_shape(&postgres_home("att_names", ""));
}

/// A profile whose agent saves its prompt (stdin) in the workspace, writes a report and a note,
/// and completes naming the report with `--artifact` and the note in its summary.
fn agent_profile() -> String {
    let kanban = env!("CARGO_BIN_EXE_kanban");
    format!(
        "\n[profiles.cat]\nagent = \"command\"\ncommand = [\"sh\", \"-c\", \
         \"cat > prompt.md && echo report > out.md && echo note > note.txt && \
         '{kanban}' complete --summary \\\"done; see $PWD/note.txt.\\\" \
         --artifact out.md --artifact prompt.md\"]\n"
    )
}

fn artifacts_survive_the_scratch_cleanup(home: &Home) {
    let id = ok(&run(home, &["create", "report", "--assignee", "cat"]));
    let src = tempfile::tempdir().unwrap();
    let spec = src.path().join("spec.pdf");
    std::fs::write(&spec, b"%PDF-1.4").unwrap();
    ok(&run(home, &["attach", &id, spec.to_str().unwrap()]));

    ok(&home.dispatch_until_idle(&[], Duration::from_secs(120)));
    assert_eq!(
        home.board().get_task(&id).unwrap().status.to_string(),
        "done"
    );
    let workspace = home.board().get_task(&id).unwrap().workspace_path.unwrap();
    assert!(
        !Path::new(&workspace).exists(),
        "the scratch workspace {workspace} was cleaned up"
    );

    let list = attachments(home, &id);
    let names: Vec<&str> = list
        .iter()
        .map(|a| a["filename"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["spec.pdf", "out.md", "prompt.md", "note.txt"]);
    let dir = std::fs::canonicalize(dir_of(home, &id)).unwrap();
    for a in &list[1..] {
        assert_eq!(a["uploaded_by"], "kanban_complete");
        let path = PathBuf::from(a["stored_path"].as_str().unwrap());
        assert_eq!(path.parent(), Some(dir.as_path()), "{path:?}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("out.md")).unwrap(),
        "report\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("note.txt")).unwrap(),
        "note\n"
    );
    // The worker's prompt listed the attachment by its absolute path.
    let prompt = std::fs::read_to_string(dir.join("prompt.md")).unwrap();
    let line = format!(
        "- `spec.pdf`, application/pdf, 1 KB → `{}`",
        dir.join("spec.pdf").display()
    );
    assert!(prompt.contains("## Attachments\n"), "{prompt}");
    assert!(prompt.contains(&line), "{prompt}");
    home.board().fsck().unwrap();
}

#[test]
fn a_real_worker_sees_the_attachments_and_its_artifacts_survive_the_scratch_cleanup() {
    let home = Home::new(&format!("{}{}", config(""), agent_profile()));
    artifacts_survive_the_scratch_cleanup(&home);
}

#[test]
fn a_real_worker_sees_the_attachments_and_its_artifacts_survive_the_scratch_cleanup_on_postgres() {
    artifacts_survive_the_scratch_cleanup(&postgres_home("att_artifacts", &agent_profile()));
}

/// The brief's shell body: `echo report > out.md && kanban complete --summary done --artifact
/// out.md` in the `sh` profile.
#[test]
fn a_shell_worker_s_artifact_survives_the_scratch_cleanup() {
    let home = Home::new(&config(""));
    let kanban = env!("CARGO_BIN_EXE_kanban");
    let body =
        format!("echo report > out.md && '{kanban}' complete --summary done --artifact out.md");
    let id = ok(&run(
        &home,
        &["create", "sh", "--assignee", "sh", "--body", &body],
    ));
    ok(&home.dispatch_until_idle(&[], Duration::from_secs(120)));
    let list = attachments(&home, &id);
    assert_eq!(list.len(), 1, "{list:?}");
    let path = PathBuf::from(list[0]["stored_path"].as_str().unwrap());
    // In this home's attachments folder (the worker's `kanban` gets no `--home`).
    let dir = std::fs::canonicalize(dir_of(&home, &id)).unwrap();
    assert_eq!(path, dir.join("out.md"));
    assert_eq!(std::fs::read_to_string(path).unwrap(), "report\n");
}

/// A refused artifact (missing, a folder, a relative path out of the workspace) refuses the
/// completion and stores nothing.
#[test]
fn a_bad_artifact_refuses_the_completion_and_stores_nothing() {
    let home = Home::new(&config(""));
    let kanban = env!("CARGO_BIN_EXE_kanban");
    let body = format!(
        "mkdir sub && echo x > ok.md && echo x > ../escape.md && \
         ! '{kanban}' complete --summary a --artifact ok.md --artifact missing.md && \
         ! '{kanban}' complete --summary b --artifact ok.md --artifact sub && \
         ! '{kanban}' complete --summary c --artifact ok.md --artifact ../escape.md && \
         '{kanban}' block --reason refused"
    );
    let id = ok(&run(
        &home,
        &["create", "bad", "--assignee", "sh", "--body", &body],
    ));
    ok(&home.dispatch_until_idle(&[], Duration::from_secs(120)));
    let task = home.board().get_task(&id).unwrap();
    assert_eq!(task.status.to_string(), "blocked", "{:?}", home.kinds(&id));
    assert!(attachments(&home, &id).is_empty());
    assert!(files_in(&dir_of(&home, &id)).is_empty());
}
