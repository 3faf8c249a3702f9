//! The workspace engine on real git: repositories in temporary folders, each with a bare
//! repository as its `origin`. Every test needs git and fails (never skips) without it.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives real git
#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;

use kanban_runtime::workspace::{
    self, Cleanup, Kind, Request, ResolveError, Resolved, SpecError, check_default_workdir,
    check_path, cleanup, parse_flag, resolve, validate_branch,
};
use kanban_tests::git;

fn configure(repo: &Path) {
    git(repo, &["config", "user.name", "Test"]);
    git(repo, &["config", "user.email", "test@example.invalid"]);
    git(repo, &["config", "commit.gpgsign", "false"]);
}

fn commit_file(dir: &Path, name: &str, text: &str) -> String {
    std::fs::write(dir.join(name), text).unwrap();
    git(dir, &["add", name]);
    git(dir, &["commit", "-q", "-m", name]);
    git(dir, &["rev-parse", "HEAD"])
}

/// A clone (`main`, on branch `main`, one pushed commit) of a bare `origin`, in a temp dir.
struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    main: PathBuf,
    origin: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let origin = root.join("origin.git");
    git(&root, &["init", "-q", "--bare", "-b", "main", "origin.git"]);
    git(&root, &["clone", "-q", "origin.git", "main"]);
    let main = root.join("main");
    configure(&main);
    git(&main, &["checkout", "-q", "-B", "main"]);
    commit_file(&main, "README", "hello\n");
    git(&main, &["push", "-q", "-u", "origin", "main"]);
    Fixture {
        _tmp: tmp,
        root,
        main,
        origin,
    }
}

/// A worktree request for `id` on the fixture's default workdir.
fn wt<'a>(f: &'a Fixture, id: &'a str) -> Request<'a> {
    Request {
        task_id: id,
        kind: Kind::Worktree,
        path: None,
        branch: None,
        base: None,
        scratch_dir: &f.root,
        default_workdir: Some(&f.main),
    }
}

fn worktree_list(repo: &Path) -> String {
    git(repo, &["worktree", "list", "--porcelain"])
}

fn branches(repo: &Path) -> Vec<String> {
    git(repo, &["branch", "--format=%(refname:short)"])
        .lines()
        .map(str::to_owned)
        .collect()
}

// ---- parse_flag, validate_branch, check_path --------------------------------------------------

#[test]
fn parse_flag_accepts_the_four_forms() {
    assert_eq!(parse_flag("scratch").unwrap(), (Kind::Scratch, None));
    assert_eq!(parse_flag("worktree").unwrap(), (Kind::Worktree, None));
    assert_eq!(
        parse_flag("dir:/srv/work").unwrap(),
        (Kind::Dir, Some(PathBuf::from("/srv/work")))
    );
    assert_eq!(
        parse_flag(" worktree:/srv/repo ").unwrap(),
        (Kind::Worktree, Some(PathBuf::from("/srv/repo")))
    );
    for kind in [Kind::Scratch, Kind::Dir, Kind::Worktree] {
        assert_eq!(Kind::from_column(kind.as_str()), Some(kind));
    }
    assert_eq!(Kind::from_column("Worktree"), None);
}

#[test]
fn parse_flag_refuses_each_bad_value() {
    type Check = fn(&SpecError) -> bool;
    let cases: &[(&str, Check)] = &[
        ("", |e| matches!(e, SpecError::UnknownKind { .. })),
        ("tree", |e| matches!(e, SpecError::UnknownKind { .. })),
        ("dirs:/x", |e| matches!(e, SpecError::UnknownKind { .. })),
        ("dir", |e| matches!(e, SpecError::DirWithoutPath)),
        ("dir:", |e| matches!(e, SpecError::EmptyPath { .. })),
        ("worktree: ", |e| matches!(e, SpecError::EmptyPath { .. })),
        ("dir:rel/path", |e| {
            matches!(e, SpecError::RelativePath { .. })
        }),
        ("worktree:./repo", |e| {
            matches!(e, SpecError::RelativePath { .. })
        }),
        ("dir:~/work", |e| {
            matches!(e, SpecError::RelativePath { .. })
        }),
        ("scratch:/tmp/x", |e| {
            matches!(e, SpecError::ScratchWithPath)
        }),
    ];
    for (value, expected) in cases {
        let err = parse_flag(value).unwrap_err();
        assert!(expected(&err), "{value:?} gave {err:?}");
        assert!(!err.to_string().contains("--"), "no flag names: {err}");
    }
    let relative = parse_flag("dir:work").unwrap_err().to_string();
    assert!(
        relative.contains("dispatcher's working directory"),
        "{relative}"
    );
    assert!(
        parse_flag("dir:~/w")
            .unwrap_err()
            .to_string()
            .contains("`~`")
    );
}

#[test]
fn validate_branch_accepts_ordinary_names() {
    for name in [
        "main",
        "wt/t_1a2b",
        "feature/x-y_z",
        "release-1.2",
        "a@b",
        "ü/ß",
    ] {
        validate_branch(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn validate_branch_refuses_what_git_refuses() {
    for name in [
        "",
        "has space",
        "tab\there",
        "nl\n",
        "del\u{7f}",
        "-leading",
        "@",
        "HEAD",
        "a..b",
        "a@{1}",
        "a~1",
        "a^",
        "a:b",
        "a?",
        "a*",
        "a[b",
        "a\\b",
        "trailing/",
        "trailing.",
        "x.lock",
        "a/b.lock/c",
        ".hidden",
        "a/.b",
        "a//b",
        "/abs",
    ] {
        let err = validate_branch(name).unwrap_err();
        assert!(
            matches!(err, SpecError::InvalidBranch { .. }),
            "{name:?}: {err:?}"
        );
    }
    // Our rules agree with git's own (`@` alone git reads as HEAD; we refuse it outright).
    let tmp = tempfile::tempdir().unwrap();
    for name in [
        "main", "wt/t1", "a..b", "a@{1}", "x.lock", ".hidden", "a//b", "-x", "a b", "a~",
    ] {
        let git_ok = Command::new("git")
            .current_dir(tmp.path())
            .args(["check-ref-format", "--branch", name])
            .output()
            .expect("git must be installed")
            .status
            .success();
        assert_eq!(validate_branch(name).is_ok(), git_ok, "{name:?}");
    }
}

#[test]
fn check_path_refuses_a_file_and_accepts_a_folder_or_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    for kind in [Kind::Dir, Kind::Worktree] {
        let err = check_path(kind, &file).unwrap_err();
        assert!(matches!(err, SpecError::NotADirectory { .. }), "{err:?}");
        check_path(kind, tmp.path()).unwrap();
        check_path(kind, &tmp.path().join("not-yet")).unwrap();
        let err = check_path(kind, Path::new("rel")).unwrap_err();
        assert!(matches!(err, SpecError::RelativePath { .. }), "{err:?}");
    }
    assert!(
        !tmp.path().join("not-yet").exists(),
        "check_path creates nothing"
    );
}

#[test]
fn a_default_workdir_must_be_an_absolute_folder_in_a_repository() {
    let f = fixture();
    let sub = f.main.join("sub");
    std::fs::create_dir(&sub).unwrap();
    assert_eq!(check_default_workdir(&sub).unwrap(), sub);
    let plain = f.root.join("plain");
    std::fs::create_dir(&plain).unwrap();
    let err = check_default_workdir(&plain).unwrap_err();
    assert!(matches!(err, ResolveError::NotARepo { .. }), "{err:?}");
    let err = check_default_workdir(Path::new("main")).unwrap_err();
    assert!(matches!(err, ResolveError::NotAbsolute { .. }), "{err:?}");
    let err = check_default_workdir(&f.main.join("README")).unwrap_err();
    assert!(matches!(err, ResolveError::NotADirectory { .. }), "{err:?}");
    let err = check_default_workdir(&f.root.join("missing")).unwrap_err();
    assert!(matches!(err, ResolveError::Io { .. }), "{err:?}");
}

// ---- resolve: scratch and dir ----------------------------------------------------------------

#[test]
fn scratch_and_dir_workspaces_are_created() {
    let tmp = tempfile::tempdir().unwrap();
    let scratch = tmp.path().join("workspaces/t1");
    let mut req = Request {
        task_id: "t1",
        kind: Kind::Scratch,
        path: None,
        branch: None,
        base: None,
        scratch_dir: &scratch,
        default_workdir: None,
    };
    let r = resolve(&req).unwrap();
    assert_eq!(
        r,
        Resolved {
            path: scratch.clone(),
            branch: None
        }
    );
    assert!(scratch.is_dir());
    assert_eq!(
        resolve(&req).unwrap().path,
        scratch,
        "a retry is the same folder"
    );

    let dir = tmp.path().join("mine/deep");
    req.kind = Kind::Dir;
    req.path = Some(&dir);
    assert_eq!(resolve(&req).unwrap().path, dir);
    assert!(dir.is_dir());
}

#[test]
fn a_dir_workspace_refuses_relative_paths_files_and_no_path() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let rel = PathBuf::from("relative/dir");
    let mut req = Request {
        task_id: "t1",
        kind: Kind::Dir,
        path: Some(&rel),
        branch: None,
        base: None,
        scratch_dir: tmp.path(),
        default_workdir: None,
    };
    let err = resolve(&req).unwrap_err();
    assert!(matches!(err, ResolveError::NotAbsolute { .. }), "{err:?}");
    assert!(!Path::new("relative").exists(), "nothing created");
    req.path = Some(&file);
    let err = resolve(&req).unwrap_err();
    assert!(matches!(err, ResolveError::NotADirectory { .. }), "{err:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    req.path = None;
    let err = resolve(&req).unwrap_err();
    assert!(
        matches!(err, ResolveError::Spec(SpecError::DirWithoutPath)),
        "{err:?}"
    );
}

// ---- resolve: worktrees -----------------------------------------------------------------------

#[test]
fn a_worktree_is_anchored_at_the_repo_on_its_own_branch_from_head() {
    let f = fixture();
    let head = git(&f.main, &["rev-parse", "HEAD"]);
    let r = resolve(&wt(&f, "t1")).unwrap();
    let expected = f.main.join(".worktrees/t1");
    assert_eq!(r.path, expected);
    assert_eq!(r.branch.as_deref(), Some("wt/t1"));
    assert_eq!(workspace::branch_default("t1"), "wt/t1");
    assert_eq!(git(&r.path, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&r.path, &["branch", "--show-current"]), "wt/t1");
    assert!(worktree_list(&f.main).contains(&format!("worktree {}", expected.display())));
    // The main checkout does not see `.worktrees/` as untracked.
    assert_eq!(git(&f.main, &["status", "--porcelain"]), "");
    let exclude = std::fs::read_to_string(f.main.join(".git/info/exclude")).unwrap();
    assert_eq!(exclude.matches("/.worktrees/").count(), 1);
    // A default workdir below the root anchors at the root too.
    let sub = f.main.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let mut req = wt(&f, "t2");
    req.default_workdir = Some(&sub);
    assert_eq!(resolve(&req).unwrap().path, f.main.join(".worktrees/t2"));
    let exclude = std::fs::read_to_string(f.main.join(".git/info/exclude")).unwrap();
    assert_eq!(exclude.matches("/.worktrees/").count(), 1, "added once");
}

#[test]
fn a_new_branch_starts_at_the_given_base() {
    let f = fixture();
    let first = git(&f.main, &["rev-parse", "HEAD"]);
    git(&f.main, &["checkout", "-q", "-b", "other"]);
    let other = commit_file(&f.main, "other.txt", "other\n");
    git(&f.main, &["checkout", "-q", "main"]);
    assert_ne!(first, other);
    let mut req = wt(&f, "t1");
    req.base = Some("other");
    let r = resolve(&req).unwrap();
    assert_eq!(git(&r.path, &["rev-parse", "HEAD"]), other);
    assert_eq!(r.branch.as_deref(), Some("wt/t1"));

    let mut req = wt(&f, "t2");
    req.base = Some("no-such-ref");
    let err = resolve(&req).unwrap_err();
    assert!(matches!(err, ResolveError::UnknownBase { .. }), "{err:?}");
    assert!(!f.main.join(".worktrees/t2").exists());
    req.base = Some("--upload-pack=x");
    let err = resolve(&req).unwrap_err();
    assert!(
        matches!(err, ResolveError::Spec(SpecError::InvalidBase { .. })),
        "{err:?}"
    );
}

#[test]
fn a_retry_reuses_the_same_worktree() {
    let f = fixture();
    let first = resolve(&wt(&f, "t1")).unwrap();
    std::fs::write(first.path.join("work.txt"), "in progress").unwrap();
    let again = resolve(&wt(&f, "t1")).unwrap();
    assert_eq!(again, first);
    let mut req = wt(&f, "t1");
    req.path = Some(&first.path);
    req.branch = first.branch.as_deref();
    req.default_workdir = None;
    assert_eq!(resolve(&req).unwrap(), first);
    assert_eq!(
        std::fs::read_to_string(first.path.join("work.txt")).unwrap(),
        "in progress"
    );
    assert_eq!(worktree_list(&f.main).matches("worktree ").count(), 2);
}

#[test]
fn a_retry_after_the_worktree_folder_vanished_adds_it_again_on_its_branch() {
    let f = fixture();
    let first = resolve(&wt(&f, "t1")).unwrap();
    let tip = commit_file(&first.path, "kept.txt", "on the branch\n");
    std::fs::remove_dir_all(&first.path).unwrap();
    let mut req = wt(&f, "t1");
    req.path = Some(&first.path);
    req.branch = first.branch.as_deref();
    assert_eq!(resolve(&req).unwrap(), first);
    assert_eq!(git(&first.path, &["rev-parse", "HEAD"]), tip);
    assert!(first.path.join("kept.txt").exists());
}

#[test]
fn an_existing_branch_is_reused() {
    let f = fixture();
    git(&f.main, &["checkout", "-q", "-b", "feature/x"]);
    let tip = commit_file(&f.main, "x.txt", "x\n");
    git(&f.main, &["checkout", "-q", "main"]);
    let mut req = wt(&f, "t1");
    req.branch = Some("feature/x");
    let r = resolve(&req).unwrap();
    assert_eq!(r.branch.as_deref(), Some("feature/x"));
    assert_eq!(git(&r.path, &["rev-parse", "HEAD"]), tip);
    assert_eq!(git(&r.path, &["branch", "--show-current"]), "feature/x");
}

#[test]
fn another_tasks_worktree_is_never_shared() {
    let f = fixture();
    let parent = resolve(&wt(&f, "t1")).unwrap();
    // A decomposed child inherits the parent's path verbatim.
    let mut child = wt(&f, "t2");
    child.path = Some(&parent.path);
    let r = resolve(&child).unwrap();
    assert_eq!(r.path, f.main.join(".worktrees/t2"));
    assert_eq!(r.branch.as_deref(), Some("wt/t2"));
    assert_eq!(git(&parent.path, &["branch", "--show-current"]), "wt/t1");
    assert_eq!(git(&r.path, &["branch", "--show-current"]), "wt/t2");
}

#[test]
fn a_worktree_path_at_a_repo_root_anchors_and_a_concrete_path_is_used() {
    let f = fixture();
    let mut req = wt(&f, "t1");
    req.default_workdir = None;
    req.path = Some(&f.main);
    assert_eq!(resolve(&req).unwrap().path, f.main.join(".worktrees/t1"));
    let concrete = f.main.join("trees/t2");
    let mut req = wt(&f, "t2");
    req.default_workdir = None;
    req.path = Some(&concrete);
    let r = resolve(&req).unwrap();
    assert_eq!(r.path, concrete);
    assert_eq!(git(&concrete, &["branch", "--show-current"]), "wt/t2");
}

#[test]
fn a_branch_checked_out_by_the_main_checkout_is_refused() {
    let f = fixture();
    let mut req = wt(&f, "t1");
    req.branch = Some("main");
    let err = resolve(&req).unwrap_err();
    match &err {
        ResolveError::BranchCheckedOut { branch, at } => {
            assert_eq!(branch, "main");
            assert_eq!(at, &f.main);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("already checked out"));
    assert!(!f.main.join(".worktrees").exists(), "nothing created");
    let exclude = std::fs::read_to_string(f.main.join(".git/info/exclude")).unwrap_or_default();
    assert!(
        !exclude.contains(".worktrees"),
        "the repository is unchanged"
    );
    assert_eq!(worktree_list(&f.main).matches("worktree ").count(), 1);
}

#[test]
fn a_repository_without_commits_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().canonicalize().unwrap().join("empty");
    git(tmp.path(), &["init", "-q", "empty"]);
    let req = Request {
        task_id: "t1",
        kind: Kind::Worktree,
        path: None,
        branch: None,
        base: None,
        scratch_dir: tmp.path(),
        default_workdir: Some(&repo),
    };
    let err = resolve(&req).unwrap_err();
    assert!(matches!(err, ResolveError::NoCommits { .. }), "{err:?}");
    assert!(err.to_string().contains("no commits"));
}

#[test]
fn a_folder_outside_any_repository_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let mut req = Request {
        task_id: "t1",
        kind: Kind::Worktree,
        path: None,
        branch: None,
        base: None,
        scratch_dir: tmp.path(),
        default_workdir: Some(&plain),
    };
    let err = resolve(&req).unwrap_err();
    assert!(matches!(err, ResolveError::NotARepo { .. }), "{err:?}");
    let target = plain.join("wt");
    req.default_workdir = None;
    req.path = Some(&target);
    let err = resolve(&req).unwrap_err();
    assert!(matches!(err, ResolveError::NotARepo { .. }), "{err:?}");
    assert!(!target.exists());
}

#[test]
fn a_board_without_a_default_workdir_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let req = Request {
        task_id: "t_9",
        kind: Kind::Worktree,
        path: None,
        branch: None,
        base: None,
        scratch_dir: tmp.path(),
        default_workdir: None,
    };
    let err = resolve(&req).unwrap_err();
    assert!(
        matches!(err, ResolveError::NoDefaultWorkdir { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("no default workdir"), "{err}");
    assert!(err.to_string().contains("t_9"), "{err}");
}

#[test]
fn a_bad_branch_is_refused_before_git_runs() {
    let f = fixture();
    let mut req = wt(&f, "t1");
    req.branch = Some("bad..name");
    let err = resolve(&req).unwrap_err();
    assert!(
        matches!(err, ResolveError::Spec(SpecError::InvalidBranch { .. })),
        "{err:?}"
    );
    assert!(!f.main.join(".worktrees").exists());
}

// ---- cleanup: worktrees -----------------------------------------------------------------------

fn removed(report: &workspace::CleanupReport) -> (PathBuf, Option<String>) {
    match &report.outcome {
        Cleanup::Removed {
            path,
            branch_deleted,
            ..
        } => (path.clone(), branch_deleted.clone()),
        other => panic!("expected Removed, got {other:?}"),
    }
}

fn preserved_reason(report: &workspace::CleanupReport) -> &'static str {
    match &report.outcome {
        Cleanup::Preserved { reason, .. } => reason,
        other => panic!("expected Preserved, got {other:?}"),
    }
}

#[test]
fn a_clean_pushed_worktree_is_removed_with_its_wt_branch() {
    let f = fixture();
    let r = resolve(&wt(&f, "t1")).unwrap();
    commit_file(&r.path, "done.txt", "done\n");
    git(&r.path, &["push", "-q", "origin", "wt/t1"]);
    let report = cleanup(Kind::Worktree, &r.path, r.branch.as_deref(), &[], false);
    let (path, deleted) = removed(&report);
    assert_eq!(path, r.path);
    assert_eq!(deleted.as_deref(), Some("wt/t1"));
    assert!(!r.path.exists());
    assert!(!worktree_list(&f.main).contains(".worktrees/t1"));
    assert!(!branches(&f.main).contains(&"wt/t1".to_owned()));
    // The work is on the remote.
    git(&f.origin, &["rev-parse", "--verify", "refs/heads/wt/t1"]);
    assert!(report.discarded.is_none());
}

#[test]
fn an_untouched_worktree_at_a_pushed_head_is_removed() {
    let f = fixture();
    let r = resolve(&wt(&f, "t1")).unwrap();
    let report = cleanup(Kind::Worktree, &r.path, None, &[], false);
    assert_eq!(removed(&report).1.as_deref(), Some("wt/t1"));
    assert!(!r.path.exists());
}

#[test]
fn an_unpushed_worktree_is_kept() {
    let f = fixture();
    let r = resolve(&wt(&f, "t1")).unwrap();
    commit_file(&r.path, "local.txt", "local\n");
    let report = cleanup(Kind::Worktree, &r.path, r.branch.as_deref(), &[], false);
    assert_eq!(preserved_reason(&report), "unpushed");
    assert!(r.path.join("local.txt").exists());
    assert!(branches(&f.main).contains(&"wt/t1".to_owned()));
    assert!(worktree_list(&f.main).contains(".worktrees/t1"));
}

#[test]
fn a_worktree_in_a_repository_without_remotes_counts_as_unpushed() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    git(&root, &["init", "-q", "-b", "main", "solo"]);
    let solo = root.join("solo");
    configure(&solo);
    commit_file(&solo, "README", "x\n");
    let req = Request {
        task_id: "t1",
        kind: Kind::Worktree,
        path: None,
        branch: None,
        base: None,
        scratch_dir: &root,
        default_workdir: Some(&solo),
    };
    let r = resolve(&req).unwrap();
    let report = cleanup(Kind::Worktree, &r.path, r.branch.as_deref(), &[], false);
    assert_eq!(preserved_reason(&report), "unpushed");
    assert!(r.path.is_dir());
}

#[test]
fn a_dirty_worktree_is_kept() {
    let f = fixture();
    let r = resolve(&wt(&f, "t1")).unwrap();
    std::fs::write(r.path.join("untracked.txt"), "wip").unwrap();
    let report = cleanup(Kind::Worktree, &r.path, r.branch.as_deref(), &[], false);
    assert_eq!(preserved_reason(&report), "dirty");
    assert!(r.path.join("untracked.txt").exists());
    assert!(branches(&f.main).contains(&"wt/t1".to_owned()));
}

#[test]
fn a_custom_branch_is_not_deleted() {
    let f = fixture();
    let mut req = wt(&f, "t1");
    req.branch = Some("feature/y");
    let r = resolve(&req).unwrap();
    commit_file(&r.path, "y.txt", "y\n");
    git(&r.path, &["push", "-q", "origin", "feature/y"]);
    let report = cleanup(Kind::Worktree, &r.path, Some("feature/y"), &[], false);
    assert_eq!(removed(&report).1, None);
    assert!(!r.path.exists());
    assert!(branches(&f.main).contains(&"feature/y".to_owned()));
}

#[test]
fn the_main_checkout_is_never_removed() {
    let f = fixture();
    let report = cleanup(Kind::Worktree, &f.main, Some("main"), &[], false);
    assert_eq!(preserved_reason(&report), "main_checkout");
    assert!(f.main.join("README").exists());
    // A folder inside the main checkout is not a worktree root either.
    let sub = f.main.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let report = cleanup(Kind::Worktree, &sub, None, &[], false);
    assert_eq!(preserved_reason(&report), "not_a_linked_worktree");
    assert!(sub.is_dir());
    // A plain folder is not one, and a missing one is Missing.
    let plain = f.root.join("plain");
    std::fs::create_dir(&plain).unwrap();
    let report = cleanup(Kind::Worktree, &plain, None, &[], false);
    assert_eq!(preserved_reason(&report), "not_a_linked_worktree");
    let report = cleanup(Kind::Worktree, &f.root.join("gone"), None, &[], false);
    assert_eq!(report.outcome, Cleanup::Missing);
}

#[test]
fn a_worktree_dry_run_changes_nothing() {
    let f = fixture();
    let r = resolve(&wt(&f, "t1")).unwrap();
    let before = worktree_list(&f.main);
    let report = cleanup(Kind::Worktree, &r.path, r.branch.as_deref(), &[], true);
    assert_eq!(removed(&report).1.as_deref(), Some("wt/t1"));
    assert!(r.path.is_dir());
    assert_eq!(worktree_list(&f.main), before);
    assert!(branches(&f.main).contains(&"wt/t1".to_owned()));
    // And then the real run does what the dry run said.
    let real = cleanup(Kind::Worktree, &r.path, r.branch.as_deref(), &[], false);
    assert_eq!(real, report);
    assert!(!r.path.exists());
}

// ---- cleanup: scratch and dir -----------------------------------------------------------------

struct Scratch {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
}

fn scratch_root() -> Scratch {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("board/workspaces");
    std::fs::create_dir_all(&root).unwrap();
    Scratch {
        _tmp: tmp,
        base,
        root,
    }
}

#[test]
fn a_scratch_folder_inside_the_root_is_removed() {
    let s = scratch_root();
    let ws = s.root.join("t1");
    std::fs::create_dir_all(ws.join("a/b")).unwrap();
    std::fs::write(ws.join("a/b/small.txt"), vec![b'x'; 100]).unwrap();
    let report = cleanup(
        Kind::Scratch,
        &ws,
        None,
        std::slice::from_ref(&s.root),
        false,
    );
    assert_eq!(removed(&report).0, ws);
    assert!(!ws.exists());
    assert!(s.root.is_dir(), "the root itself stays");
    assert_eq!(report.discarded, None, "100 bytes are below the threshold");
    let again = cleanup(
        Kind::Scratch,
        &ws,
        None,
        std::slice::from_ref(&s.root),
        false,
    );
    assert_eq!(again.outcome, Cleanup::Missing);
}

#[test]
fn scratch_leftovers_above_one_kib_are_listed() {
    let s = scratch_root();
    let ws = s.root.join("t1");
    std::fs::create_dir_all(ws.join("out")).unwrap();
    std::fs::write(ws.join("out/big.bin"), vec![0u8; 2048]).unwrap();
    std::fs::write(ws.join("note.txt"), vec![b'n'; 10]).unwrap();
    let report = cleanup(
        Kind::Scratch,
        &ws,
        None,
        std::slice::from_ref(&s.root),
        false,
    );
    removed(&report);
    let d = report.discarded.expect("2 KiB is listed");
    assert_eq!(d.path, ws);
    assert_eq!(d.total_bytes, 2058);
    assert_eq!(d.file_count, 2);
    assert_eq!(
        d.sample,
        vec![
            ("out/big.bin".to_owned(), 2048),
            ("note.txt".to_owned(), 10)
        ]
    );
}

#[test]
fn a_scratch_path_outside_every_root_is_kept() {
    let s = scratch_root();
    let elsewhere = s.base.join("project");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("src.rs"), "fn main() {}").unwrap();
    let roots = [s.root.clone()];
    for path in [
        elsewhere.clone(),
        s.root.clone(),                               // the root itself
        s.root.join("..").join("..").join("project"), // `..` out of the root
    ] {
        let report = cleanup(Kind::Scratch, &path, None, &roots, false);
        assert_eq!(
            report.outcome,
            Cleanup::Kept {
                path: path.clone(),
                reason: "outside_managed_root"
            }
        );
    }
    assert!(elsewhere.join("src.rs").exists());
    assert!(s.root.is_dir());
    let report = cleanup(Kind::Scratch, Path::new("rel/t1"), None, &roots, false);
    assert!(matches!(report.outcome, Cleanup::Kept { .. }));
}

#[test]
fn a_root_that_is_a_symlink_to_a_broad_folder_does_not_claim_its_target() {
    let s = scratch_root();
    let broad = s.base.join("home");
    let project = broad.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("keep.txt"), "user data").unwrap();
    let link_root = s.base.join("linked-workspaces");
    std::os::unix::fs::symlink(&broad, &link_root).unwrap();
    // Spelled by its real path, the project resolves under the root but is not inside it as spelled.
    let report = cleanup(
        Kind::Scratch,
        &project,
        None,
        std::slice::from_ref(&link_root),
        false,
    );
    assert!(matches!(
        report.outcome,
        Cleanup::Kept {
            reason: "outside_managed_root",
            ..
        }
    ));
    assert!(project.join("keep.txt").exists());
    // Spelled through the root, a task folder there is managed.
    let task = link_root.join("t1");
    std::fs::create_dir(&task).unwrap();
    let report = cleanup(
        Kind::Scratch,
        &task,
        None,
        std::slice::from_ref(&link_root),
        false,
    );
    removed(&report);
    assert!(!broad.join("t1").exists());
    assert!(project.join("keep.txt").exists());
}

#[test]
fn a_scratch_folder_swapped_for_a_symlink_never_touches_the_target() {
    let s = scratch_root();
    let home = s.base.join("home");
    std::fs::create_dir_all(home.join("docs")).unwrap();
    std::fs::write(home.join("docs/precious.txt"), vec![b'p'; 4096]).unwrap();
    let ws = s.root.join("t1");
    std::os::unix::fs::symlink(&home, &ws).unwrap();
    let roots = [s.root.clone()];
    let dry = cleanup(Kind::Scratch, &ws, None, &roots, true);
    assert_eq!(dry.discarded, None, "a symlink is never walked");
    assert!(
        std::fs::symlink_metadata(&ws).is_ok(),
        "dry run leaves the link"
    );
    let report = cleanup(Kind::Scratch, &ws, None, &roots, false);
    assert_eq!(report, dry);
    removed(&report);
    assert!(
        std::fs::symlink_metadata(&ws).is_err(),
        "the link itself is gone"
    );
    assert_eq!(
        std::fs::read(home.join("docs/precious.txt")).unwrap(),
        vec![b'p'; 4096]
    );
    // A symlink inside the folder is removed as a link, its target untouched.
    let ws2 = s.root.join("t2");
    std::fs::create_dir(&ws2).unwrap();
    std::os::unix::fs::symlink(&home, ws2.join("home-link")).unwrap();
    let report = cleanup(Kind::Scratch, &ws2, None, &roots, false);
    removed(&report);
    assert_eq!(report.discarded, None, "the link's target is not counted");
    assert!(!ws2.exists());
    assert!(home.join("docs/precious.txt").exists());
}

#[test]
fn a_scratch_dry_run_changes_nothing() {
    let s = scratch_root();
    let ws = s.root.join("t1");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("big"), vec![0u8; 2048]).unwrap();
    let dry = cleanup(
        Kind::Scratch,
        &ws,
        None,
        std::slice::from_ref(&s.root),
        true,
    );
    removed(&dry);
    assert_eq!(dry.discarded.as_ref().map(|d| d.total_bytes), Some(2048));
    assert_eq!(std::fs::read(ws.join("big")).unwrap().len(), 2048);
    let real = cleanup(
        Kind::Scratch,
        &ws,
        None,
        std::slice::from_ref(&s.root),
        false,
    );
    assert_eq!(real, dry);
    assert!(!ws.exists());
}

#[test]
fn a_dir_workspace_is_never_removed() {
    let s = scratch_root();
    let ws = s.root.join("t1");
    std::fs::create_dir(&ws).unwrap();
    let report = cleanup(Kind::Dir, &ws, None, std::slice::from_ref(&s.root), false);
    assert_eq!(
        report.outcome,
        Cleanup::Kept {
            path: ws.clone(),
            reason: "dir"
        }
    );
    assert!(ws.is_dir());
}
