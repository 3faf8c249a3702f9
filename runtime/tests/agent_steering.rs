//! Per-task steering, limits and the default assignee (issue 28 items 2-4), end to end with the
//! real binary, real dispatchers and real workers: `--model/--provider/--reasoning` reach a
//! `command` profile's argv through its placeholders (and `kanban profiles --json`), skills are
//! put before the prompt (`sdlc-review` on a review run), a task whose skills are all missing is
//! blocked `kanban_skills_unavailable`, bad steering is refused creating nothing, `set-model`
//! updates and checks; a per-profile cap holds while another profile spawns; the memory guard's
//! readings (files named in kanban.toml) change spawning; the default assignee is saved.

// Test code drives the real binary and real processes; a failed setup step fails the test at
// once, with the panic message.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use kanban_tests::Kanban;
use serde_json::Value;

const KANBAN: &str = env!("CARGO_BIN_EXE_kanban");

/// A home with `kanban.toml` = `[dispatch]` (fast ticks, `dispatch` added) then `profiles`.
fn home(dispatch: &str, profiles: &str) -> Kanban {
    let k = Kanban::new(KANBAN);
    std::fs::write(
        k.home().join("kanban.toml"),
        format!(
            "[dispatch]\ncrash_grace_seconds = 0\ninterval_seconds = 0.05\n{dispatch}\n{}",
            // Each command profile's `kanban` finds the home through HERMES_HOME.
            profiles.replace("@HOME@", &k.home().display().to_string())
        ),
    )
    .unwrap();
    k.ok(&["init"]);
    k
}

/// A `command` profile running `sh -c SCRIPT sh EXTRA…` (the prompt on stdin).
fn sh_profile(name: &str, script: &str, extra: &[&str]) -> String {
    let mut argv = vec![
        "\"sh\"".to_owned(),
        "\"-c\"".to_owned(),
        format!("'''{script}'''"),
        "\"sh\"".to_owned(),
    ];
    argv.extend(extra.iter().map(|a| format!("{a:?}")));
    format!(
        "\n[profiles.{name}]\nagent = \"command\"\nenv = {{ HERMES_HOME = \"@HOME@\" }}\ncommand = [{}]\n",
        argv.join(", ")
    )
}

/// Records its argv and prompt in `dir` (files named after the task), then completes.
fn recorder(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "printf '%s\\n' \"$@\" > '{d}/argv-'\"$HERMES_KANBAN_TASK\"; \
         cat > '{d}/prompt-'\"$HERMES_KANBAN_TASK\"; '{KANBAN}' complete --summary recorded"
    )
}

fn dispatch(k: &Kanban, args: &[&str]) -> Output {
    let mut child = k
        .cmd()
        .arg("dispatch")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("dispatch {args:?} did not finish");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "dispatch {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Asserts task `id` is done, printing its `show` and worker log when it is not.
fn assert_done(k: &Kanban, id: &str) {
    let status = k.status(id);
    if status != "done" {
        let log = std::fs::read_to_string(k.home().join(format!("kanban/logs/{id}.log")))
            .unwrap_or_default();
        panic!("{id} is {status}\n{}\n{log}", k.ok(&["show", id]));
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn events_of(k: &Kanban, id: &str, kind: &str) -> Vec<Value> {
    k.json(&["events", id])
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .cloned()
        .collect()
}

fn read(dir: &Path, what: &str, id: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{what}-{id}"))).unwrap()
}

fn write_skill(k: &Kanban, name: &str, text: &str) {
    let dir = k.home().join("skills");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.md")), text).unwrap();
}

const STEERED_ARGS: [&str; 4] = [
    "--model={model}",
    "--provider={provider}",
    "--reasoning={reasoning}",
    "--fixed",
];

#[test]
fn model_provider_reasoning_and_skills_reach_the_agents_argv_prompt_and_profiles() {
    let rec = tempfile::tempdir().unwrap();
    let k = home("", &sh_profile("rec", &recorder(rec.path()), &STEERED_ARGS));
    write_skill(&k, "tone", "SKILL-TONE: answer in haiku.");
    let steered = k.create(
        "steered",
        &[
            "--assignee",
            "rec",
            "--model",
            "m-large",
            "--provider",
            "p-one",
            "--reasoning",
            "HIGH",
            "--skill",
            "tone",
            "--skill",
            " tone ",
            "--skill",
            "absent",
        ],
    );
    let plain = k.create("plain", &["--assignee", "rec"]);

    // Stored in the original's columns, shown by `show` and `show --json`.
    let task = &k.json(&["show", &steered])["task"];
    assert_eq!(task["model_override"], "m-large");
    assert_eq!(task["provider_override"], "p-one");
    assert_eq!(task["reasoning_effort"], "high");
    assert_eq!(task["skills"], serde_json::json!(["tone", "absent"]));
    let shown = k.ok(&["show", &steered]);
    assert!(shown.contains("skills: tone, absent"), "{shown}");
    assert!(
        shown.contains("model m-large  provider p-one  reasoning high"),
        "{shown}"
    );

    // `profiles --json`: the raw argv, and with --task the placeholders filled.
    let profiles = k.json(&["profiles"]);
    let p = &profiles["profiles"][0];
    assert_eq!(p["name"], "rec");
    assert_eq!(p["agent"], "command");
    assert_eq!(p["argv"][4], "--model={model}");
    let filled = k.json(&["profiles", "--task", &steered]);
    let argv: Vec<&str> = filled["profiles"][0]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        &argv[3..],
        [
            "sh",
            "--model=m-large",
            "--provider=p-one",
            "--reasoning=high",
            "--fixed"
        ]
    );

    // `kanban context` shows the prompt with its skills first, as the worker gets it.
    let context = k.ok(&["context", &steered]);
    assert!(context.starts_with("## Skill: tone"), "{context}");

    dispatch(&k, &["--until-idle"]);
    assert_done(&k, &steered);
    assert_done(&k, &plain);
    assert_eq!(
        read(rec.path(), "argv", &steered),
        "--model=m-large\n--provider=p-one\n--reasoning=high\n--fixed\n"
    );
    // Unset placeholders drop their argument.
    assert_eq!(read(rec.path(), "argv", &plain), "--fixed\n");
    // The skill found is before the task's prompt; the missing one is named.
    let prompt = read(rec.path(), "prompt", &steered);
    let skill_at = prompt.find("SKILL-TONE: answer in haiku.").expect(&prompt);
    assert!(skill_at < prompt.find("steered").unwrap(), "{prompt}");
    assert!(prompt.contains("not available"), "{prompt}");
    assert!(prompt.contains("absent"), "{prompt}");
    assert!(!read(rec.path(), "prompt", &plain).contains("Skill:"));
}

#[test]
fn bad_steering_inputs_exit_with_a_clear_message_and_create_nothing() {
    let k = home("", "");
    for (args, message) in [
        (
            vec!["--provider", "p-one"],
            "a provider override needs a model override",
        ),
        (
            vec!["--model", "m", "--reasoning", "extreme"],
            "unknown reasoning level",
        ),
        (vec!["--skill", "a,b"], "cannot contain a comma"),
        (
            vec!["--skill", "web", "--skill", "terminal"],
            "'web', 'terminal' are toolset names",
        ),
        (vec!["--skill", "../escape"], "is not a plain name"),
    ] {
        let mut all = vec!["create", "bad"];
        all.extend(args.iter().copied());
        let run = k.run(&all);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stdout);
        assert!(run.stderr.contains(message), "{args:?}: {}", run.stderr);
    }
    assert_eq!(k.json(&["list"]).as_array().unwrap().len(), 0);
}

#[test]
fn set_model_updates_validates_and_clears() {
    let k = home("", "");
    let id = k.create("t", &[]);
    let set = k.json(&[
        "set-model",
        &id,
        "m2",
        "--provider",
        "p2",
        "--reasoning",
        "low",
    ]);
    assert_eq!(set["model_override"], "m2");
    let task = &k.json(&["show", &id])["task"];
    assert_eq!(task["provider_override"], "p2");
    assert_eq!(task["reasoning_effort"], "low");
    assert!(!events_of(&k, &id, "edited").is_empty());

    let run = k.run(&["set-model", &id, "--provider", "p3"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("a provider override needs a model override"),
        "{}",
        run.stderr
    );
    let run = k.run(&["set-model", &id, "m3", "--reasoning", "ultra"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("unknown reasoning level"),
        "{}",
        run.stderr
    );
    assert_eq!(k.json(&["show", &id])["task"]["model_override"], "m2");

    k.ok(&["set-model", &id]);
    let task = &k.json(&["show", &id])["task"];
    assert!(task["model_override"].is_null() && task["provider_override"].is_null());
}

#[test]
fn a_review_run_loads_sdlc_review() {
    let rec = tempfile::tempdir().unwrap();
    let d = rec.path().display();
    let implementer = format!(
        "cat >/dev/null; if [ -e '{d}/once' ]; then '{KANBAN}' complete --summary done; \
         else touch '{d}/once' && '{KANBAN}' review request --reviewer rev --summary first; fi"
    );
    let reviewer =
        format!("cat > '{d}/review-prompt'; '{KANBAN}' review changes --reason 'needs tests'");
    let k = home(
        "max_spawn = 2",
        &format!(
            "{}{}",
            sh_profile("impl", &implementer, &[]),
            sh_profile("rev", &reviewer, &[])
        ),
    );
    write_skill(&k, "sdlc-review", "SDLC-REVIEW-CHECKLIST");
    let id = k.create("feature", &["--assignee", "impl"]);
    dispatch(&k, &["--until-idle"]);
    assert_done(&k, &id);
    let prompt = std::fs::read_to_string(rec.path().join("review-prompt")).unwrap();
    assert!(prompt.starts_with("## Skill: sdlc-review"), "{prompt}");
    assert!(prompt.contains("SDLC-REVIEW-CHECKLIST"), "{prompt}");
}

#[test]
fn a_task_whose_skills_are_all_missing_is_blocked_skills_unavailable() {
    let rec = tempfile::tempdir().unwrap();
    let k = home("", &sh_profile("rec", &recorder(rec.path()), &[]));
    let id = k.create("needs skills", &["--assignee", "rec", "--skill", "nowhere"]);
    let out = dispatch(&k, &["--until-idle"]);
    assert_eq!(k.status(&id), "blocked", "{}", stdout(&out));
    let task = &k.json(&["show", &id])["task"];
    assert_eq!(task["block_kind"], "needs_input");
    let blocked = events_of(&k, &id, "blocked");
    let reason = blocked.last().unwrap()["payload"]["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(reason.starts_with("kanban_skills_unavailable"), "{reason}");
    assert!(reason.contains("nowhere"), "{reason}");
    // The agent never ran.
    assert!(!rec.path().join(format!("prompt-{id}")).exists());
}

/// The `[start, end]` nanoseconds each task's agent recorded.
fn intervals(dir: &Path, ids: &[String]) -> Vec<(u128, u128)> {
    ids.iter()
        .map(|id| {
            let text = read(dir, "iv", id);
            let mut it = text.split_whitespace().map(|n| n.parse::<u128>().unwrap());
            (it.next().unwrap(), it.next().unwrap())
        })
        .collect()
}

fn max_overlap(ivs: &[(u128, u128)]) -> usize {
    ivs.iter()
        .map(|&(s, _)| ivs.iter().filter(|&&(a, b)| a <= s && s <= b).count())
        .max()
        .unwrap_or(0)
}

#[test]
fn a_per_profile_cap_holds_while_another_profile_still_spawns() {
    let rec = tempfile::tempdir().unwrap();
    let d = rec.path().display();
    let script = format!(
        "cat >/dev/null; s=$(date +%s%N); sleep 0.4; e=$(date +%s%N); \
         echo \"$s $e\" > '{d}/iv-'\"$HERMES_KANBAN_TASK\"; '{KANBAN}' complete --summary ok"
    );
    let k = home(
        "max_spawn = 4\nmax_in_progress = 8",
        &format!(
            "{}max_in_progress = 2\n{}",
            sh_profile("slow", &script, &[]),
            sh_profile("fast", &script, &[])
        ),
    );
    let slow: Vec<String> = (0..6)
        .map(|i| k.create(&format!("slow {i}"), &["--assignee", "slow"]))
        .collect();
    let fast: Vec<String> = (0..2)
        .map(|i| k.create(&format!("fast {i}"), &["--assignee", "fast"]))
        .collect();
    // The first tick would start two of `slow` and both of `fast` (the cap skips the rest).
    let dry = stdout(&dispatch(&k, &["--dry-run"]));
    for id in [&slow[0], &slow[1], &fast[0], &fast[1]] {
        assert!(dry.contains(id.as_str()), "{dry}");
    }
    assert!(!dry.contains(slow[2].as_str()), "{dry}");
    assert_eq!(k.json(&["profiles"])["profiles"][1]["max_in_progress"], 2);

    dispatch(&k, &["--until-idle"]);
    for id in slow.iter().chain(&fast) {
        assert_done(&k, id);
    }
    let slow_ivs = intervals(rec.path(), &slow);
    assert!(max_overlap(&slow_ivs) <= 2, "{slow_ivs:?}");
    // `fast` ran while `slow` tasks were still waiting for their cap.
    let last_slow_start = slow_ivs.iter().map(|iv| iv.0).max().unwrap();
    for iv in intervals(rec.path(), &fast) {
        assert!(iv.0 < last_slow_start);
    }
}

/// A home whose memory guard reads `meminfo` (MemTotal / MemAvailable in MiB) and, when given,
/// a pressure stall file with `some avg10`.
fn memory_home(total_mib: u64, available_mib: u64, psi_some: Option<f64>) -> Kanban {
    let dispatch = "max_spawn = 4\nmeminfo_path = \"meminfo\"\nmemory_pressure_path = \"psi\"";
    let k = home(
        dispatch,
        "\n[profiles.default]\nagent = \"builtin:complete\"\n",
    );
    std::fs::write(
        k.home().join("meminfo"),
        format!(
            "MemTotal: {} kB\nMemFree: 0 kB\nMemAvailable: {} kB\n",
            total_mib * 1024,
            available_mib * 1024
        ),
    )
    .unwrap();
    if let Some(some) = psi_some {
        std::fs::write(
            k.home().join("psi"),
            format!(
                "some avg10={some:.2} avg60=0.00 avg300=0.00 total=1\n\
                 full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
            ),
        )
        .unwrap();
    }
    k
}

fn running_after_one_tick(k: &Kanban) -> (usize, String) {
    for i in 0..3 {
        k.create(&format!("t{i}"), &["--assignee", "default"]);
    }
    let out = stdout(&dispatch(k, &["--once"]));
    let spawned = out.lines().filter(|l| l.starts_with("spawned")).count();
    (spawned, out)
}

#[test]
fn memory_pressure_readings_change_spawning() {
    // ok: the three ready tasks start.
    let k = memory_home(8192, 4096, None);
    assert_eq!(k.json(&["profiles"])["limits"]["memory_pressure"], "ok");
    let (n, out) = running_after_one_tick(&k);
    assert_eq!(n, 3, "{out}");
    assert!(!out.contains("memory pressure"), "{out}");

    // elevated (12 % available): one per tick, said on a waiting line.
    let k = memory_home(8192, 1000, None);
    let (n, out) = running_after_one_tick(&k);
    assert_eq!(n, 1, "{out}");
    assert!(out.contains("waiting: memory pressure elevated"), "{out}");

    // critical (under 64 MiB available): nothing.
    let k = memory_home(8192, 50, None);
    let (n, out) = running_after_one_tick(&k);
    assert_eq!(n, 0, "{out}");
    assert!(out.contains("waiting: memory pressure critical"), "{out}");

    // A pressure stall file wins over MemAvailable: plenty available, but stalled.
    let k = memory_home(8192, 4096, Some(25.0));
    assert_eq!(
        k.json(&["profiles"])["limits"]["memory_pressure"],
        "elevated"
    );
    let (n, out) = running_after_one_tick(&k);
    assert_eq!(n, 1, "{out}");
}

#[test]
fn an_unset_max_in_progress_is_derived_from_memory() {
    // 1 GiB: clamp(1024 / 512, 2, 8) = 2 workers on this host.
    let k = memory_home(1024, 900, None);
    let limits = &k.json(&["profiles"])["limits"];
    assert_eq!(limits["max_in_progress"], 2);
    assert_eq!(limits["max_in_progress_source"], "memory");
    for i in 0..4 {
        k.create(&format!("t{i}"), &["--assignee", "default"]);
    }
    let dry = stdout(&dispatch(&k, &["--dry-run"]));
    assert_eq!(
        dry.lines().filter(|l| l.contains("would spawn")).count(),
        2,
        "{dry}"
    );
    // 64 GiB: 8.
    let k = memory_home(65_536, 60_000, None);
    assert_eq!(k.json(&["profiles"])["limits"]["max_in_progress"], 8);
}

#[test]
fn an_unassigned_task_run_by_the_default_profile_is_assigned_to_it() {
    let k = home(
        "default_profile = \"helper\"",
        "\n[profiles.helper]\nagent = \"builtin:complete\"\n",
    );
    let id = k.create("no assignee", &[]);
    dispatch(&k, &["--until-idle"]);
    let task = &k.json(&["show", &id])["task"];
    assert_eq!(task["status"], "done");
    assert_eq!(task["assignee"], "helper");
    let assigned = events_of(&k, &id, "assigned");
    assert_eq!(assigned.len(), 1);
    assert_eq!(assigned[0]["payload"]["assignee"], "helper");
    assert_eq!(assigned[0]["payload"]["source"], "kanban.default_assignee");
}

/// The same on a PostgreSQL board: steering reaches the argv and the prompt, `set-model`
/// updates, a per-profile cap holds in the first tick, the default assignee is saved.
#[test]
fn steering_caps_and_the_default_assignee_work_on_a_postgres_board() {
    let cluster = kanban_pgwire::cluster::TestCluster::shared().expect("a PostgreSQL test server");
    let url = cluster.url(&cluster.fresh_database("steering").expect("a database"));
    let rec = tempfile::tempdir().unwrap();
    let k = home(
        "max_spawn = 4\nmax_in_progress = 8\ndefault_profile = \"rec\"",
        &format!(
            "{}max_in_progress = 1\n\n[boards.default]\nurl = \"{url}\"\n",
            sh_profile("rec", &recorder(rec.path()), &STEERED_ARGS)
        ),
    );
    write_skill(&k, "tone", "SKILL-TONE");
    let steered = k.create(
        "steered",
        &["--assignee", "rec", "--model", "m1", "--skill", "tone"],
    );
    k.ok(&[
        "set-model",
        &steered,
        "m2",
        "--provider",
        "p2",
        "--reasoning",
        "low",
    ]);
    let unassigned = k.create("unassigned", &[]);
    let third = k.create("third", &["--assignee", "rec"]);
    let dry = stdout(&dispatch(&k, &["--dry-run"]));
    assert!(dry.contains(steered.as_str()), "{dry}");
    assert!(
        !dry.contains(unassigned.as_str()) && !dry.contains(third.as_str()),
        "{dry}"
    );

    dispatch(&k, &["--until-idle"]);
    for id in [&steered, &unassigned, &third] {
        assert_done(&k, id);
    }
    assert_eq!(
        read(rec.path(), "argv", &steered),
        "--model=m2\n--provider=p2\n--reasoning=low\n--fixed\n"
    );
    assert!(read(rec.path(), "prompt", &steered).starts_with("## Skill: tone"));
    assert_eq!(k.json(&["show", &unassigned])["task"]["assignee"], "rec");
    let assigned = events_of(&k, &unassigned, "assigned");
    assert_eq!(assigned[0]["payload"]["source"], "kanban.default_assignee");
}
