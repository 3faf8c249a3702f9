//! `kanban completions SHELL` and `kanban man [--dir DIR]` (README "Install"), checked in the
//! real programs: the bash, zsh and fish scripts complete a subcommand, a flag and an enumerated
//! value, and `man -l` renders every page without a warning. The programs come from `.ci/shells`,
//! which `cargo xtask ci` runs before the tests; a test without them fails, saying so.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real shells and man

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kanban_tests::Kanban;

fn kanban() -> Kanban {
    Kanban::new(env!("CARGO_BIN_EXE_kanban"))
}

fn found(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Fails the test unless `program` can be run here (a run that tested nothing must not pass).
fn need(program: &str) {
    assert!(
        found(program),
        "there is no {program} on this machine: run .ci/shells as root, or the README's test \
         command `cargo xtask ci`, which installs it before the tests"
    );
}

/// Writes `kanban completions shell` into the test's home; its path.
fn script(k: &Kanban, shell: &str) -> PathBuf {
    let file = k.home().join(format!("kanban.{shell}"));
    std::fs::write(&file, k.ok(&["completions", shell])).unwrap();
    file
}

/// Runs `program` with `args`; its standard output, one entry per line (the part before a tab:
/// fish appends descriptions).
fn lines_of(program: &str, args: &[&str]) -> Vec<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').next().unwrap_or("").to_owned())
        .collect()
}

fn sorted(mut words: Vec<String>) -> Vec<String> {
    words.sort();
    words
}

/// A shell word for `text` (single-quoted).
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// What bash offers for `words` (the last one being completed): the script sourced, its
/// function called as `complete -F` would call it, with COMP_WORDS and COMP_CWORD set.
fn bash_complete(file: &Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| quote(w)).collect();
    let cword = words.len() - 1;
    let previous = if cword > 0 { words[cword - 1] } else { "" };
    let program = format!(
        "source {file}; function=$(complete -p kanban | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p'); \
         [ -n \"$function\" ] || {{ echo 'the script registers no function for kanban' >&2; exit 1; }}; \
         COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE={line}; COMP_POINT=${{#COMP_LINE}}; \
         \"$function\" kanban {current} {previous}; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file = quote(file.to_str().unwrap()),
        words = quoted.join(" "),
        line = quote(&words.join(" ")),
        current = quote(words[cword]),
        previous = quote(previous),
    );
    lines_of("bash", &["--norc", "--noprofile", "-c", &program])
        .into_iter()
        .filter(|w| !w.is_empty())
        .collect()
}

#[test]
fn bash_completes_subcommands_flags_and_values() {
    need("bash");
    let k = kanban();
    let file = script(&k, "bash");
    assert_eq!(bash_complete(&file, &["kanban", "bl"]), ["block"]);
    let boards = bash_complete(&file, &["kanban", "--json", "boards", ""]);
    for word in ["list", "create", "switch", "rm", "migrate", "--board"] {
        assert!(boards.iter().any(|w| w == word), "{word} in {boards:?}");
    }
    assert_eq!(
        bash_complete(&file, &["kanban", "block", "x", "--re"]),
        ["--reason"]
    );
    assert_eq!(
        bash_complete(&file, &["kanban", "block", "x", "--kind", ""]),
        ["dependency", "needs_input", "capability", "transient"]
    );
    assert_eq!(
        bash_complete(&file, &["kanban", "owner", "resolve", "t", "--as", ""]),
        ["interrupted", "failed", "completed"]
    );
    assert_eq!(
        bash_complete(&file, &["kanban", "list", "--status", "r"]),
        ["ready", "running", "review"]
    );
    let shells: Vec<String> = bash_complete(&file, &["kanban", "completions", ""])
        .into_iter()
        .filter(|w| !w.starts_with('-'))
        .collect();
    assert_eq!(shells, ["bash", "elvish", "fish", "powershell", "zsh"]);
    assert!(
        !bash_complete(&file, &["kanban", ""])
            .iter()
            .any(|c| c == "submit" || c == "worker"),
        "hidden commands are not offered"
    );
}

/// Drives an interactive `zsh -f` on a pseudo-terminal (`zsh/zpty`): compinit with the script's
/// folder on `fpath`, then TAB after the words; `compadd` records every match it is given into
/// a file, and the completion system's last hook exits the shell.
const ZSH_HARNESS: &str = r#"
zmodload zsh/zpty || { print -u2 'no zsh/zpty module'; exit 3 }
zpty z zsh -f -i
zpty -w z "PROMPT=''; fpath=(${(q)1} \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z "bindkey '^I' complete-word; zstyle ':completion:*' insert-tab false"
zpty -w z "_harness_out=${(q)2}"
zpty -w z 'compadd() { if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi; local -a __hits; builtin compadd -A __hits "$@"; (( $#__hits )) && print -rl -- $__hits >> $_harness_out; builtin compadd "$@"; }'
zpty -w z '_harness_done() { print -r -- "<done>" >> $_harness_out; exit; }; comppostfuncs=(_harness_done)'
zpty -w z "$3"$'\t'
while zpty -r z; do :; done >/dev/null
"#;

/// What zsh's completion system offers after `line` (the harness above; `timeout` bounds a
/// harness that never sees its exit hook).
fn zsh_complete(k: &Kanban, functions: &Path, line: &str) -> Vec<String> {
    let harness = k.home().join("harness.zsh");
    std::fs::write(&harness, ZSH_HARNESS).unwrap();
    let out = k.home().join("zsh-matches");
    let _ = std::fs::remove_file(&out);
    lines_of(
        "timeout",
        &[
            "120",
            "zsh",
            "-f",
            harness.to_str().unwrap(),
            functions.to_str().unwrap(),
            out.to_str().unwrap(),
            line,
        ],
    );
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let mut matches: Vec<String> = text.lines().map(str::to_owned).collect();
    assert_eq!(
        matches.pop().as_deref(),
        Some("<done>"),
        "the completion of {line:?} did not finish: {text}"
    );
    matches
}

#[test]
fn zsh_completes_subcommands_flags_and_values() {
    need("zsh");
    need("timeout");
    let k = kanban();
    let functions = k.home().join("zfunctions");
    std::fs::create_dir(&functions).unwrap();
    let text = k.ok(&["completions", "zsh"]);
    assert!(text.starts_with("#compdef kanban"), "{text}");
    std::fs::write(functions.join("_kanban"), &text).unwrap();
    let parsed = Command::new("zsh")
        .args(["-n", functions.join("_kanban").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        parsed.status.success(),
        "{}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    assert_eq!(zsh_complete(&k, &functions, "kanban bl"), ["block"]);
    assert_eq!(
        zsh_complete(&k, &functions, "kanban su"),
        Vec::<String>::new(),
        "the hidden `submit` is not offered"
    );
    assert_eq!(
        zsh_complete(&k, &functions, "kanban block x --re"),
        ["--reason"]
    );
    assert_eq!(
        sorted(zsh_complete(&k, &functions, "kanban block x --kind ")),
        ["capability", "dependency", "needs_input", "transient"]
    );
    assert_eq!(
        sorted(zsh_complete(&k, &functions, "kanban owner resolve t --as ")),
        ["completed", "failed", "interrupted"]
    );
}

/// What fish offers for `line` (`complete -C`, the script sourced into a shell without config).
fn fish_complete(file: &Path, line: &str) -> Vec<String> {
    let program = format!(
        "source {}; complete -C {}",
        quote(file.to_str().unwrap()),
        quote(line)
    );
    sorted(lines_of("fish", &["--no-config", "-c", &program]))
}

#[test]
fn fish_completes_subcommands_flags_and_values() {
    need("fish");
    let k = kanban();
    let file = script(&k, "fish");
    assert_eq!(fish_complete(&file, "kanban bl"), ["block"]);
    assert_eq!(
        fish_complete(&file, "kanban wor"),
        Vec::<String>::new(),
        "the hidden `worker` is not offered"
    );
    assert_eq!(fish_complete(&file, "kanban block x --re"), ["--reason"]);
    assert_eq!(
        fish_complete(&file, "kanban block x --kind "),
        ["capability", "dependency", "needs_input", "transient"]
    );
    assert_eq!(
        fish_complete(&file, "kanban list --status r"),
        ["ready", "review", "running"]
    );
    assert_eq!(
        fish_complete(&file, "kanban completions "),
        ["bash", "elvish", "fish", "powershell", "zsh"]
    );
}

#[test]
fn powershell_and_elvish_scripts_register_a_completer() {
    let k = kanban();
    let powershell = k.ok(&["completions", "powershell"]);
    assert!(
        powershell.contains("Register-ArgumentCompleter -Native -CommandName 'kanban'"),
        "{powershell}"
    );
    // (clap_complete's PowerShell script completes commands and flags, not values.)
    assert!(powershell.contains("'--kind'"), "flags: {powershell}");
    let elvish = k.ok(&["completions", "elvish"]);
    assert!(
        elvish.contains("set edit:completion:arg-completer[kanban]"),
        "{elvish}"
    );
    let bad = k.run(&["completions", "tcsh"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("possible values"), "{}", bad.stderr);
}

/// `MANWIDTH=80 man -l page`: the rendered text; fails on any message on stderr.
fn man_renders(page: &Path) -> String {
    let out = Command::new("man")
        .args(["-l", page.to_str().unwrap()])
        .env("MANWIDTH", "80")
        .env("MAN_KEEP_FORMATTING", "")
        .env("MANPAGER", "cat")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", page.display());
    assert_eq!(stderr, "", "man warns about {}", page.display());
    // groff with every warning on (`-k`: the page's UTF-8 through preconv, as man does).
    let strict = Command::new("groff")
        .args(["-k", "-ww", "-z", "-man", page.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(strict.status.success());
    assert_eq!(
        String::from_utf8_lossy(&strict.stderr),
        "",
        "groff -ww warns about {}",
        page.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn man_writes_one_page_per_subcommand_and_each_renders_cleanly() {
    let k = kanban();
    let dir = k.home().join("man1");
    let listed = k.ok(&["man", "--dir", dir.to_str().unwrap()]);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut printed: Vec<String> = listed
        .lines()
        .map(|l| {
            let path = Path::new(l);
            assert_eq!(path.parent(), Some(dir.as_path()), "{l}");
            path.file_name().unwrap().to_str().unwrap().to_owned()
        })
        .collect();
    printed.sort();
    assert_eq!(printed, names, "prints each page it writes");
    for page in [
        "kanban.1",
        "kanban-create.1",
        "kanban-block.1",
        "kanban-boards.1",
        "kanban-boards-rm.1",
        "kanban-cron-daemon.1",
        "kanban-owner-resolve.1",
        "kanban-completions.1",
        "kanban-man.1",
    ] {
        assert!(names.iter().any(|n| n == page), "{page} in {names:?}");
    }
    for hidden in ["kanban-submit.1", "kanban-help.1", "kanban-worker.1"] {
        assert!(!names.iter().any(|n| n == hidden), "{hidden} is written");
    }
    let root = std::fs::read_to_string(dir.join("kanban.1")).unwrap();
    assert_eq!(k.ok(&["man"]), root.trim(), "`kanban man` prints kanban.1");

    need("man");
    for name in &names {
        let text = man_renders(&dir.join(name));
        assert!(!text.trim().is_empty(), "{name} renders empty");
    }
    let root_text = man_renders(&dir.join("kanban.1"));
    for word in ["kanban-create(1)", "kanban-boards(1)", "Exit codes: 0 ok"] {
        assert!(root_text.contains(word), "{word} in {root_text}");
    }
    let rm = man_renders(&dir.join("kanban-boards-rm.1"));
    assert!(rm.contains("kanban boards rm"), "{rm}");
    assert!(rm.contains("<SLUG>"), "{rm}");
    let block = man_renders(&dir.join("kanban-block.1"));
    assert!(block.contains("needs_input"), "possible values: {block}");
}

#[test]
fn man_dir_that_cannot_be_created_is_an_error() {
    let k = kanban();
    let file = k.home().join("not-a-folder");
    std::fs::write(&file, "").unwrap();
    let out = k.run(&["man", "--dir", file.join("man1").to_str().unwrap()]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("cannot create"), "{}", out.stderr);
}
