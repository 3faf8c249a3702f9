//! End to end: task workspaces with real git repositories (a bare repository as `origin`), real
//! dispatchers and real workers (README "Working on a repository"). Tests fail, never skip, when
//! git is missing.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary, git and processes

mod dispatch_support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use dispatch_support::{Home, config};
use kanban_runtime::board::{BlockKind, Status};
use kanban_tests::git;

/// A repository with one commit, cloned from a bare `origin` it was pushed to.
struct Repo {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let origin = dir.path().join("origin.git");
        git(
            dir.path(),
            &["init", "-q", "--bare", origin.to_str().unwrap()],
        );
        let path = dir.path().join("repo");
        git(
            dir.path(),
            &["clone", "-q", origin.to_str().unwrap(), "repo"],
        );
        std::fs::write(path.join("README"), "hello\n").unwrap();
        git(&path, &["add", "README"]);
        git(&path, &["commit", "-q", "-m", "init"]);
        git(&path, &["push", "-q", "origin", "HEAD"]);
        Repo { _dir: dir, path }
    }

    fn worktrees(&self) -> String {
        git(&self.path, &["worktree", "list"])
    }
}

/// The `sh` profile of [`config`] runs the task body as a shell script in the workspace.
const GIT_ID: &str =
    "git -c user.name=agent -c user.email=agent@example.invalid -c commit.gpgsign=false";

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn run(home: &Home, args: &[&str]) -> Output {
    home.kanban(args).output().unwrap()
}

fn create(home: &Home, title: &str, body: &str, extra: &[&str]) -> String {
    let mut args = vec!["create", title, "--assignee", "sh", "--body", body];
    args.extend_from_slice(extra);
    ok(&run(home, &args))
}

fn dispatch(home: &Home) -> String {
    ok(&home.dispatch_until_idle(&[], Duration::from_secs(120)))
}

fn payload(home: &Home, id: &str, kind: &str) -> Option<serde_json::Value> {
    home.events(id)
        .into_iter()
        .rev()
        .find(|e| e.kind == kind)
        .map(|e| e.payload.unwrap_or(serde_json::Value::Null))
}

#[test]
fn three_worktree_tasks_in_parallel_the_pushed_one_is_removed_the_unpushed_and_dirty_ones_kept() {
    let repo = Repo::new();
    let home = Home::new(&config("max_spawn = 3"));
    ok(&run(
        &home,
        &[
            "boards",
            "set-default-workdir",
            "default",
            repo.path.to_str().unwrap(),
        ],
    ));
    let pushed = create(
        &home,
        "pushed",
        &format!(
            "echo a > a.txt && {GIT_ID} add a.txt && {GIT_ID} commit -qm a && git push -q origin HEAD"
        ),
        &["--workspace", "worktree"],
    );
    let unpushed = create(
        &home,
        "unpushed",
        &format!("echo b > b.txt && {GIT_ID} add b.txt && {GIT_ID} commit -qm b"),
        &["--workspace", "worktree"],
    );
    let dirty = create(
        &home,
        "dirty",
        "echo c > c.txt",
        &["--workspace", "worktree", "--branch", "feature/c"],
    );
    dispatch(&home);
    let board = home.board();
    let mut paths = Vec::new();
    for id in [&pushed, &unpushed, &dirty] {
        let task = board.get_task(id).unwrap();
        assert_eq!(task.status, Status::Done, "{id}");
        let path = task.workspace_path.clone().unwrap();
        assert_eq!(
            Path::new(&path),
            repo.path.join(".worktrees").join(id),
            "each task has its own worktree"
        );
        paths.push(path);
    }
    assert_eq!(
        board.get_task(&dirty).unwrap().branch_name.as_deref(),
        Some("feature/c")
    );
    // Pushed: gone, its wt/ branch deleted locally and on the remote as pushed.
    assert!(!Path::new(&paths[0]).exists());
    assert_eq!(
        payload(&home, &pushed, "workspace_removed").unwrap()["branch_deleted"],
        format!("wt/{pushed}")
    );
    let branches = git(&repo.path, &["branch", "-a"]);
    assert!(!branches.contains(&format!(" wt/{pushed}\n")), "{branches}");
    assert!(
        branches.contains(&format!("remotes/origin/wt/{pushed}")),
        "{branches}"
    );
    // Unpushed and dirty: kept, with the reason.
    assert!(Path::new(&paths[1]).join("b.txt").exists());
    assert!(Path::new(&paths[2]).join("c.txt").exists());
    assert_eq!(
        payload(&home, &unpushed, "workspace_preserved").unwrap()["reason"],
        "unpushed"
    );
    assert_eq!(
        payload(&home, &dirty, "workspace_preserved").unwrap()["reason"],
        "dirty"
    );
    let list = repo.worktrees();
    assert!(!list.contains(&pushed), "{list}");
    assert!(list.contains(&unpushed) && list.contains(&dirty), "{list}");
    // `show` says why it was kept.
    let shown = ok(&run(&home, &["show", &unpushed]));
    assert!(shown.contains("workspace kept (unpushed"), "{shown}");
    // The main checkout never shows the worktrees as untracked.
    assert_eq!(git(&repo.path, &["status", "--porcelain"]), "");
}

#[test]
fn a_worktree_agent_runs_in_its_worktree_with_its_branch_in_the_environment_and_the_prompt() {
    let repo = Repo::new();
    let seen = tempfile::tempdir().unwrap();
    let out = seen.path().display().to_string();
    let script = format!(
        "cat > '{out}/prompt'; pwd > '{out}/pwd'; printf '%s|%s' \"$HERMES_KANBAN_WORKSPACE\" \
         \"$HERMES_KANBAN_BRANCH\" > '{out}/env'; git rev-parse --abbrev-ref HEAD > '{out}/head'"
    );
    let text = format!(
        "{}\n[profiles.probe]\nagent = \"command\"\ncommand = [\"sh\", \"-c\", \"{}\"]\n",
        config(""),
        script.replace('\\', "\\\\").replace('"', "\\\"")
    );
    let home = Home::new(&text);
    ok(&run(
        &home,
        &[
            "boards",
            "set-default-workdir",
            "default",
            repo.path.to_str().unwrap(),
        ],
    ));
    let id = ok(&run(
        &home,
        &[
            "create",
            "probe",
            "--assignee",
            "probe",
            "--workspace",
            "worktree",
        ],
    ));
    dispatch(&home);
    let worktree = repo.path.join(".worktrees").join(&id);
    let worktree = worktree.canonicalize().unwrap();
    let read = |name: &str| std::fs::read_to_string(seen.path().join(name)).unwrap();
    assert_eq!(Path::new(read("pwd").trim()), worktree);
    assert_eq!(read("env"), format!("{}|wt/{id}", worktree.display()));
    assert_eq!(read("head").trim(), format!("wt/{id}"));
    assert!(
        read("prompt").contains(&format!(
            "Workspace: worktree @ {} (branch wt/{id})",
            worktree.display()
        )),
        "{}",
        read("prompt")
    );
    let resolved = payload(&home, &id, "workspace_resolved").unwrap();
    assert_eq!(resolved["workspace_kind"], "worktree");
    assert_eq!(resolved["branch_name"], format!("wt/{id}"));
}

#[test]
fn a_retry_reuses_the_same_worktree_and_a_task_that_ran_keeps_its_workspace() {
    let repo = Repo::new();
    let home = Home::new(&config(""));
    ok(&run(
        &home,
        &[
            "boards",
            "set-default-workdir",
            "default",
            repo.path.to_str().unwrap(),
        ],
    ));
    // Fails on its first run (leaving a file), completes on its second.
    let id = create(
        &home,
        "retry",
        "if [ -e first ]; then echo second > second; else echo first > first; exit 1; fi",
        &["--workspace", "worktree", "--max-retries", "3"],
    );
    dispatch(&home);
    let task = home.board().get_task(&id).unwrap();
    assert_eq!(task.status, Status::Done, "{:?}", home.run_outcomes(&id));
    assert_eq!(home.run_outcomes(&id).len(), 2);
    let path = PathBuf::from(task.workspace_path.unwrap());
    assert!(path.join("first").exists() && path.join("second").exists());
    // Recorded once: the second run found it so.
    let resolved = home
        .events(&id)
        .into_iter()
        .filter(|e| e.kind == "workspace_resolved")
        .count();
    assert_eq!(resolved, 1);
    let edit = run(&home, &["edit", &id, "--workspace", "scratch"]);
    assert!(!edit.status.success());
    assert!(
        String::from_utf8_lossy(&edit.stderr).contains("has already run"),
        "{}",
        String::from_utf8_lossy(&edit.stderr)
    );
}

#[test]
fn a_dir_workspace_runs_the_agent_there_and_is_never_removed() {
    let home = Home::new(&config(""));
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("made/here");
    let id = create(
        &home,
        "dir",
        "pwd > where",
        &["--workspace", &format!("dir:{}", target.display())],
    );
    dispatch(&home);
    let task = home.board().get_task(&id).unwrap();
    assert_eq!(task.status, Status::Done);
    assert_eq!(task.workspace_kind, "dir");
    let where_ = std::fs::read_to_string(target.join("where")).unwrap();
    assert_eq!(
        Path::new(where_.trim()),
        target.canonicalize().unwrap(),
        "the agent ran in the directory"
    );
    assert!(payload(&home, &id, "workspace_removed").is_none());
    let gc = ok(&run(&home, &["gc"]));
    assert!(gc.contains("a dir: workspace is never removed"), "{gc}");
    assert!(target.join("where").exists());
}

#[test]
fn scratch_is_removed_a_symlinked_scratch_folder_is_never_followed_and_leftovers_are_listed() {
    let home = Home::new(&config(""));
    let big = create(&home, "big", "head -c 2048 /dev/zero > leftover", &[]);
    let small = create(&home, "small", "echo hi > note", &[]);
    dispatch(&home);
    for id in [&big, &small] {
        let task = home.board().get_task(id).unwrap();
        assert_eq!(task.status, Status::Done);
        assert!(!Path::new(&task.workspace_path.unwrap()).exists(), "{id}");
    }
    let discarded = payload(&home, &big, "workspace_discarded_content").unwrap();
    assert_eq!(discarded["total_bytes"], 2048);
    assert_eq!(discarded["sample"][0]["file"], "leftover");
    assert!(payload(&home, &small, "workspace_discarded_content").is_none());

    // The agent swaps its scratch folder for a symlink to a folder of the user's before it
    // completes: the cleanup removes the link, never what it points at.
    let precious = tempfile::tempdir().unwrap();
    std::fs::write(precious.path().join("keep.txt"), "mine").unwrap();
    let swap = create(
        &home,
        "swap",
        &format!(
            "d=\"$PWD\"; cd / && rm -rf \"$d\" && ln -s '{}' \"$d\"",
            precious.path().display()
        ),
        &[],
    );
    dispatch(&home);
    let task = home.board().get_task(&swap).unwrap();
    assert_eq!(task.status, Status::Done, "{:?}", home.run_outcomes(&swap));
    let scratch = PathBuf::from(task.workspace_path.unwrap());
    assert!(
        std::fs::symlink_metadata(&scratch).is_err(),
        "the link itself is gone"
    );
    assert_eq!(
        std::fs::read_to_string(precious.path().join("keep.txt")).unwrap(),
        "mine",
        "the target is untouched"
    );
}

#[test]
fn a_worktree_task_on_a_board_without_a_default_workdir_is_blocked_needs_input_naming_the_command()
{
    let home = Home::new(&config(""));
    let id = create(&home, "no repo", "true", &["--workspace", "worktree"]);
    dispatch(&home);
    let task = home.board().get_task(&id).unwrap();
    assert_eq!(task.status, Status::Blocked);
    assert_eq!(task.block_kind, Some(BlockKind::NeedsInput));
    assert_eq!(task.consecutive_failures, 0, "not a counted failure");
    let error = task.last_failure_error.unwrap();
    assert!(
        error.contains("kanban boards set-default-workdir default"),
        "{error}"
    );
    // Blocked once, not retried in a loop.
    assert_eq!(home.run_outcomes(&id), ["spawn_failed"]);
}

#[test]
fn a_repository_without_commits_and_a_branch_a_person_has_checked_out_block_the_task() {
    let empty = tempfile::tempdir().unwrap();
    git(empty.path(), &["init", "-q"]);
    let repo = Repo::new();
    let main_branch = git(&repo.path, &["rev-parse", "--abbrev-ref", "HEAD"]);
    let home = Home::new(&config(""));
    let no_commits = create(
        &home,
        "no commits",
        "true",
        &[
            "--workspace",
            &format!("worktree:{}", empty.path().display()),
        ],
    );
    let taken = create(
        &home,
        "taken",
        "true",
        &[
            "--workspace",
            &format!("worktree:{}", repo.path.display()),
            "--branch",
            &main_branch,
        ],
    );
    dispatch(&home);
    for (id, needle) in [(&no_commits, "no commits"), (&taken, "checked out")] {
        let task = home.board().get_task(id).unwrap();
        assert_eq!(task.status, Status::Blocked, "{id}");
        assert_eq!(task.block_kind, Some(BlockKind::NeedsInput));
        let error = task.last_failure_error.unwrap();
        assert!(error.contains(needle), "{error}");
    }
    assert_eq!(repo.worktrees().lines().count(), 1, "nothing was added");
}

#[test]
fn kanban_gc_dry_run_changes_nothing_and_gc_removes_exactly_what_it_said() {
    let repo = Repo::new();
    let home = Home::new(&config(""));
    ok(&run(
        &home,
        &[
            "boards",
            "set-default-workdir",
            "default",
            repo.path.to_str().unwrap(),
        ],
    ));
    let unpushed = create(
        &home,
        "unpushed",
        &format!("{GIT_ID} commit -q --allow-empty -m work"),
        &["--workspace", "worktree"],
    );
    dispatch(&home);
    let path = PathBuf::from(
        home.board()
            .get_task(&unpushed)
            .unwrap()
            .workspace_path
            .unwrap(),
    );
    assert!(path.exists());
    // Still unpushed: both runs keep it, and the preserved event is written once.
    let dry = ok(&run(&home, &["gc", "--dry-run"]));
    assert!(dry.contains("kept the workspace"), "{dry}");
    ok(&run(&home, &["gc"]));
    let preserved = home
        .events(&unpushed)
        .into_iter()
        .filter(|e| e.kind == "workspace_preserved")
        .count();
    assert_eq!(preserved, 1);
    // Pushed now: the dry run says it would go and leaves it; gc removes it.
    git(&path, &["push", "-q", "origin", "HEAD"]);
    let events_before = home.events(&unpushed).len();
    let dry = ok(&run(&home, &["gc", "--dry-run"]));
    assert!(
        dry.contains(&format!("would remove the workspace of {unpushed}")),
        "{dry}"
    );
    assert!(path.exists());
    assert_eq!(home.events(&unpushed).len(), events_before);
    let done = ok(&run(&home, &["gc"]));
    assert!(
        done.contains(&format!("removed the workspace of {unpushed}")),
        "{done}"
    );
    assert!(!path.exists());
    assert!(!repo.worktrees().contains(&unpushed));
}

#[test]
fn a_parent_workspace_waits_for_its_open_child() {
    let home = Home::new(&config(""));
    let parent = create(&home, "parent", "echo handoff > out", &[]);
    let child = ok(&run(
        &home,
        &[
            "create",
            "child",
            "--assignee",
            "sh",
            "--parent",
            &parent,
            "--body",
            "true",
            "--blocked",
        ],
    ));
    dispatch(&home);
    let task = home.board().get_task(&parent).unwrap();
    assert_eq!(task.status, Status::Done);
    let path = PathBuf::from(task.workspace_path.unwrap());
    assert!(path.join("out").exists(), "kept while the child is open");
    ok(&run(&home, &["archive", &child]));
    assert!(!path.exists(), "removed once the child finished");
}

/// Eight worktree tasks, two dispatchers at once: every task done, in its own worktree on its
/// own branch, with what its own agent wrote.
fn race(home: &Home, repo: &Repo) {
    ok(&run(
        home,
        &[
            "boards",
            "set-default-workdir",
            "default",
            repo.path.to_str().unwrap(),
        ],
    ));
    let ids: Vec<String> = (0..8)
        .map(|i| {
            create(
                home,
                &format!("race {i}"),
                &format!("echo {i} > mine.txt"),
                &["--workspace", "worktree"],
            )
        })
        .collect();
    let spawn = || {
        home.kanban(&["dispatch", "--until-idle"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    ok(&dispatch_support::wait_output(a, Duration::from_secs(180)));
    ok(&dispatch_support::wait_output(b, Duration::from_secs(180)));
    let board = home.board();
    let mut paths = std::collections::BTreeSet::new();
    let mut branches = std::collections::BTreeSet::new();
    for (i, id) in ids.iter().enumerate() {
        let task = board.get_task(id).unwrap();
        assert_eq!(
            task.status,
            Status::Done,
            "{id}: {:?}",
            home.run_outcomes(id)
        );
        assert_eq!(board.runs(id).unwrap().len(), 1, "{id}");
        let path = task.workspace_path.unwrap();
        assert_eq!(
            std::fs::read_to_string(Path::new(&path).join("mine.txt")).unwrap(),
            format!("{i}\n")
        );
        assert!(paths.insert(path), "one path per task");
        assert!(
            branches.insert(task.branch_name.unwrap()),
            "one branch per task"
        );
    }
}

#[test]
fn two_dispatchers_racing_on_worktree_tasks_never_give_two_tasks_one_path_or_branch() {
    race(&Home::new(&config("max_spawn = 4")), &Repo::new());
}

#[test]
fn two_dispatchers_racing_on_worktree_tasks_of_a_postgres_board_never_share_a_path_or_branch() {
    let cluster = kanban_pgwire::cluster::TestCluster::shared().expect("a PostgreSQL test server");
    let url = cluster.url(&cluster.fresh_database("worktrees").expect("a database"));
    let home = Home::new(&format!(
        "{}\n[boards.default]\nurl = \"{url}\"\n",
        config("max_spawn = 4")
    ));
    race(&home, &Repo::new());
}

/// Runs a command that must be refused: exit 1, `needle` in its message.
fn refused(home: &Home, args: &[&str], needle: &str) {
    let out = run(home, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(stderr.contains(needle), "{args:?}: {stderr}");
}

#[test]
fn bad_workspace_input_is_refused_with_a_clear_error_and_creates_nothing() {
    let home = Home::new(&config(""));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let missing = dir.path().join("not-yet");
    let file_dir = format!("dir:{}", file.display());
    let file_worktree = format!("worktree:{}", file.display());
    let cases: &[(&[&str], &str)] = &[
        (&["--workspace", "dir:relative/path"], "is relative"),
        (&["--workspace", "dir:"], "empty path"),
        (&["--workspace", "dir"], "needs a path"),
        (&["--workspace", "scratch:/tmp/x"], "takes no path"),
        (&["--workspace", "elsewhere"], "unknown workspace"),
        (&["--workspace", &file_dir], "not a directory"),
        (&["--workspace", &file_worktree], "not a directory"),
        (
            &["--workspace", "worktree", "--branch", "two words"],
            "invalid branch name",
        ),
        (
            &["--workspace", "worktree", "--branch", "a/../b"],
            "invalid branch name",
        ),
        (
            &["--workspace", "worktree", "--branch=-rf"],
            "invalid branch name",
        ),
        (&["--workspace", "worktree", "--base=--all"], "invalid base"),
        (&["--branch", "feature"], "only for a worktree workspace"),
        (
            &[
                "--workspace",
                &format!("dir:{}", missing.display()),
                "--branch",
                "x",
            ],
            "only for a worktree",
        ),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["create", "bad"];
        args.extend_from_slice(extra);
        refused(&home, &args, needle);
    }
    assert!(!missing.exists(), "nothing was created");
    let list = ok(&run(&home, &["--json", "list"]));
    assert_eq!(list, "[]", "no task was created");

    // A default workdir outside any repository, relative, or not there.
    let outside = tempfile::tempdir().unwrap();
    refused(
        &home,
        &[
            "boards",
            "set-default-workdir",
            "default",
            outside.path().to_str().unwrap(),
        ],
        "not inside a git repository",
    );
    refused(
        &home,
        &["boards", "set-default-workdir", "default", "rel"],
        "absolute",
    );
    refused(
        &home,
        &[
            "boards",
            "create",
            "proj",
            "--default-workdir",
            outside.path().to_str().unwrap(),
        ],
        "not inside a git repository",
    );
    assert!(
        !home.root.join("kanban/boards/proj").exists(),
        "no board was made"
    );
    assert!(!home.root.join("kanban/boards/default/board.json").exists());
    refused(
        &home,
        &[
            "boards",
            "set-default-workdir",
            "nope",
            outside.path().to_str().unwrap(),
        ],
        "does not exist",
    );

    // An edit's workspace is checked the same way and changes nothing.
    let id = ok(&run(&home, &["create", "fine"]));
    refused(
        &home,
        &["edit", &id, "--workspace", "dir:rel"],
        "is relative",
    );
    let task = home.board().get_task(&id).unwrap();
    assert_eq!(
        (task.workspace_kind.as_str(), task.workspace_path),
        ("scratch", None)
    );
}

#[test]
fn without_git_a_default_workdir_is_refused_naming_git() {
    let repo = Repo::new();
    let home = Home::new(&config(""));
    let empty = tempfile::tempdir().unwrap();
    let out = home
        .kanban(&[
            "boards",
            "set-default-workdir",
            "default",
            repo.path.to_str().unwrap(),
        ])
        .env("PATH", empty.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("git is not installed"), "{stderr}");
    assert!(!home.root.join("kanban/boards/default/board.json").exists());
}

#[test]
fn an_edit_before_the_first_run_moves_a_task_to_a_worktree_and_boards_list_shows_the_workdir() {
    let repo = Repo::new();
    let home = Home::new(&config(""));
    let made = ok(&run(
        &home,
        &[
            "boards",
            "create",
            "proj",
            "--default-workdir",
            repo.path.to_str().unwrap(),
        ],
    ));
    assert!(made.contains("default workdir of proj"), "{made}");
    let listed = ok(&run(&home, &["--json", "boards", "list"]));
    let boards: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let proj = boards
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["slug"] == "proj")
        .unwrap();
    assert_eq!(
        Path::new(proj["default_workdir"].as_str().unwrap()),
        repo.path.canonicalize().unwrap()
    );
    let id = ok(&run(
        &home,
        &[
            "--board",
            "proj",
            "create",
            "later",
            "--assignee",
            "sh",
            "--body",
            "echo hi > hi",
        ],
    ));
    ok(&run(
        &home,
        &[
            "--board",
            "proj",
            "edit",
            &id,
            "--workspace",
            "worktree",
            "--branch",
            "topic/x",
        ],
    ));
    let shown: serde_json::Value = serde_json::from_str(&ok(&run(
        &home,
        &["--board", "proj", "--json", "show", &id],
    )))
    .unwrap();
    assert_eq!(shown["task"]["workspace_kind"], "worktree");
    assert_eq!(shown["task"]["branch_name"], "topic/x");
    assert_eq!(
        payload_on(&home, "proj", &id, "edited").unwrap()["fields"],
        serde_json::json!(["workspace_kind", "branch_name"])
    );
    ok(&home
        .kanban(&["--board", "proj", "dispatch", "--until-idle"])
        .output()
        .unwrap());
    let worktree = repo.path.join(".worktrees").join(&id);
    assert!(worktree.join("hi").exists(), "kept: hi is untracked");
    assert_eq!(
        git(&worktree, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "topic/x"
    );
}

fn payload_on(home: &Home, slug: &str, id: &str, kind: &str) -> Option<serde_json::Value> {
    let location = kanban_runtime::home::resolve(&home.root, Some(slug)).unwrap();
    let board = kanban_runtime::board::Board::open(
        &location,
        &kanban_runtime::board::OpenOptions::default(),
    )
    .unwrap();
    let mut events = board.events(id, None).unwrap();
    events.sort_by_key(|e| e.id);
    events
        .into_iter()
        .rev()
        .find(|e| e.kind == kind)
        .map(|e| e.payload.unwrap_or(serde_json::Value::Null))
}
