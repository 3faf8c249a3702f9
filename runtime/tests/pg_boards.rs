//! PostgreSQL boards end to end, against a real server (`kanban_pgwire::cluster::TestCluster`):
//! selecting a board's store, `kanban boards create --url`, `kanban boards migrate` (every table
//! compared row by row, every refusal with its exit code and the SQLite board byte-identical),
//! and the password never reaching an output, an error or a file kanban writes.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test

use std::path::{Path, PathBuf};

use kanban_pgwire::cluster::TestCluster;
use kanban_pgwire::{Client, Value};
use kanban_runtime::board::engine::postgres::schema::{self as pg_schema, TABLES};
use kanban_tests::{Kanban, Run};

fn kanban() -> Kanban {
    Kanban::new(env!("CARGO_BIN_EXE_kanban"))
}

fn cluster() -> &'static TestCluster {
    TestCluster::shared().expect("a PostgreSQL test server (see the README's Testing section)")
}

/// A fresh empty database (unique per call in this process).
fn fresh_db(what: &str) -> String {
    cluster().fresh_database(what).expect("create a database")
}

/// `kanban <args>` with extra environment variables.
fn run_env(k: &Kanban, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = k.cmd();
    cmd.args(args);
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd.output().expect("run kanban").into()
}

/// A board with every kind of row: tasks in every status a command can reach (one `running`,
/// returned), links, comments, events, open and closed runs.
fn populated(k: &Kanban) -> (Vec<String>, String) {
    let a = k.create(
        "parent",
        &["--assignee", "bot", "--priority", "3", "--body", "b"],
    );
    let b = k.create("child", &["--parent", &a]);
    let c = k.create("triage", &["--triage"]);
    let d = k.create("blocked", &["--blocked"]);
    let e = k.create("goal", &["--goal", "--max-turns", "5"]);
    let f = k.create("review", &[]);
    let g = k.create("needs input", &["--idempotency-key", "k-1"]);
    let h = k.create("archived", &[]);
    let running = k.create("running", &["--max-runtime", "60"]);
    k.ok(&["claim", &a]);
    k.ok(&["complete", &a, "--summary", "s", "--result", "r", "--force"]);
    k.ok(&["comment", &b, "--body", "a comment\nwith two lines"]);
    k.ok(&["comment", &b, "--body", "second", "--author", "ops"]);
    let file = k.home().join("spec.md");
    std::fs::write(&file, "# spec\n").unwrap();
    k.ok(&["attach", &b, file.to_str().unwrap()]);
    k.ok(&["review", "request", &f, "--reviewer", "bot"]);
    k.ok(&["claim", &g]);
    k.ok(&["block", &g, "--reason", "why", "--kind", "needs_input"]);
    k.ok(&["archive", &h]);
    k.ok(&["claim", &e]);
    k.ok(&["reclaim", &e, "--reason", "moved"]);
    k.ok(&["claim", &running]);
    let ids = vec![a, b, c, d, e, f, g, h, running.clone()];
    (ids, running)
}

/// Every row of `table` in the SQLite file, in key order, as PostgreSQL values.
fn sqlite_rows(db: &Path, table: &str, columns: &[&str]) -> Vec<Vec<Value>> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open the SQLite board");
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {} FROM {table} ORDER BY {}",
            columns.join(", "),
            order(table)
        ))
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    let mut out = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let values = (0..columns.len())
            .map(|i| match row.get_ref(i).unwrap() {
                rusqlite::types::ValueRef::Null => Value::Null,
                rusqlite::types::ValueRef::Integer(n) => Value::Int(n),
                rusqlite::types::ValueRef::Real(f) => Value::Real(f),
                rusqlite::types::ValueRef::Text(t) => {
                    Value::Text(String::from_utf8(t.to_vec()).unwrap())
                }
                rusqlite::types::ValueRef::Blob(b) => Value::Blob(b.to_vec()),
            })
            .collect();
        out.push(values);
    }
    out
}

fn order(table: &str) -> &'static str {
    match table {
        "task_links" => "parent_id, child_id",
        "kanban_dispatchers" => "dispatcher",
        _ => "id",
    }
}

fn pg_rows(client: &mut Client, table: &str, columns: &[&str]) -> Vec<Vec<Value>> {
    client
        .query(
            &format!(
                "SELECT {} FROM {table} ORDER BY {}",
                columns.join(", "),
                order(table)
            ),
            &[],
        )
        .unwrap()
        .into_iter()
        .map(|r| r.into_values())
        .collect()
}

fn sqlite_order_fix(rows: &mut [Vec<Value>], table: &str) {
    // Text keys: one order whatever the server's collation.
    if table == "tasks" || table == "task_links" {
        rows.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    }
}

/// Every file under `dir` (recursively) with its bytes, `-shm` index files left out.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if !p.to_string_lossy().ends_with("-shm")
                && !p.to_string_lossy().ends_with(".dispatch.lock")
            {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

#[test]
fn migrate_copies_every_row_of_every_table_and_switches_the_board() {
    let k = kanban();
    let (mut ids, running) = populated(&k);
    // A completion contract (schema 7) travels with its task.
    ids.push(k.create(
        "contracted",
        &[
            "--completion-contract",
            "https://github.com/acme/app/pull/7",
        ],
    ));
    k.ok(&[
        "complete",
        &running,
        "--summary",
        "finished before the move",
        "--force",
    ]);
    k.assert_fsck_clean();
    let db = k.default_db();
    // A dispatcher's recorded tick (schema 8) travels too.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "INSERT INTO kanban_dispatchers (dispatcher, last_tick_at, interval_seconds) \
             VALUES ('host-a:42', 1000, 5)",
            [],
        )
        .unwrap();
    let before: Vec<Vec<Vec<Value>>> = TABLES
        .iter()
        .map(|(t, c)| {
            let mut rows = sqlite_rows(&db, t, c);
            sqlite_order_fix(&mut rows, t);
            rows
        })
        .collect();
    assert!(
        before.iter().all(|rows| !rows.is_empty()),
        "every table has rows"
    );
    let shows: Vec<serde_json::Value> = ids.iter().map(|id| k.json(&["show", id])).collect();
    // The list's order too (tasks of one second and one priority in creation order).
    let listed = k.json(&["list", "--all"]);

    let name = fresh_db("migrate_all");
    let url = cluster().url(&name);
    let out = k.json(&["boards", "migrate", "default", "--to", &url]);
    assert_eq!(out["slug"], "default");
    assert_eq!(out["rows"]["tasks"], ids.len());
    let kept = PathBuf::from(out["kept"].as_str().unwrap());
    assert!(
        kept.is_file(),
        "the SQLite file is kept as {}",
        kept.display()
    );
    assert!(!db.exists(), "nothing opens the old file by mistake");

    let mut client = cluster().connect(&name).unwrap();
    for ((table, columns), expected) in TABLES.iter().zip(&before) {
        let mut got = pg_rows(&mut client, table, columns);
        sqlite_order_fix(&mut got, table);
        assert_eq!(&got, expected, "{table}: every row, every column");
        // And the kept file still holds exactly what was copied.
        let mut kept_rows = sqlite_rows(&kept, table, columns);
        sqlite_order_fix(&mut kept_rows, table);
        assert_eq!(&kept_rows, expected, "{table} in the kept file");
    }
    // Ids are never reused: each sequence continues after the largest copied id.
    for table in pg_schema::IDENTITY_TABLES {
        let max = client
            .query_one(&format!("SELECT MAX(id) FROM {table}"), &[])
            .unwrap()
            .get(0)
            .and_then(Value::as_i64)
            .unwrap();
        let next = client
            .query_one(
                &format!("SELECT nextval(pg_get_serial_sequence('{table}', 'id'))"),
                &[],
            )
            .unwrap()
            .get(0)
            .and_then(Value::as_i64)
            .unwrap();
        assert!(next > max, "{table}: next id {next} after {max}");
    }
    assert_eq!(
        pg_schema::schema_version(&mut client).unwrap(),
        pg_schema::LATEST
    );
    // The copy was analysed: the planner knows how many tasks there are.
    let counted = client
        .query_one(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = 'tasks'::regclass",
            &[],
        )
        .unwrap()
        .get(0)
        .and_then(Value::as_i64);
    assert_eq!(counted, Some(i64::try_from(ids.len()).unwrap()));

    // The board is now a PostgreSQL board: listed so, its URL recorded without a password.
    let list = k.json(&["boards", "list"]);
    let default = &list.as_array().unwrap()[0];
    assert_eq!(default["store"], "postgres");
    assert_eq!(
        default["url"].as_str().unwrap(),
        out["url"].as_str().unwrap()
    );
    assert!(default["db_path"].is_null());
    let recorded = std::fs::read_to_string(out["url_file"].as_str().unwrap()).unwrap();
    assert_eq!(recorded.trim(), out["url"].as_str().unwrap());

    // A second migration of the same board is refused: it is not a SQLite board any more.
    let again = k.run(&["boards", "migrate", "default", "--to", &url]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(
        again.stderr.contains("already lives in PostgreSQL"),
        "{}",
        again.stderr
    );

    // The board now opens on PostgreSQL: the same tasks, the same `show --json`, and no SQLite
    // file appears in its place.
    let list = k.run(&["list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    for (id, shown) in ids.iter().zip(&shows) {
        assert_eq!(&k.json(&["show", id]), shown, "{id}");
    }
    let contracted = k.json(&["show", ids.last().unwrap()]);
    assert_eq!(
        contracted["task"]["completion_contract"],
        "https://github.com/acme/app/pull/7"
    );
    assert_eq!(k.json(&["list", "--all"]), listed);
    assert!(!db.exists(), "no SQLite board appeared in its place");
}

#[test]
fn migrate_refusals_change_nothing_and_say_why() {
    let k = kanban();
    let (_, running) = populated(&k);
    let cluster = cluster();
    let home_before = snapshot(k.home());
    let unchanged = |what: &str| {
        assert_eq!(
            snapshot(k.home()),
            home_before,
            "{what}: the home is byte-identical"
        );
    };
    let target = fresh_db("refusals");
    let url = cluster.url(&target);

    // A running task: refused (exit 3), naming it.
    let run = k.run(&["boards", "migrate", "default", "--to", &url]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains(&running) && run.stderr.contains("running"),
        "{}",
        run.stderr
    );
    unchanged("running task");
    let mut client = cluster.connect(&target).unwrap();
    let tables = |client: &mut Client| {
        client
            .query_one(
                "SELECT COUNT(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = 'public'",
                &[],
            )
            .unwrap()
            .get(0)
            .and_then(Value::as_i64)
            .unwrap()
    };
    assert_eq!(tables(&mut client), 0, "the target stays empty");
    k.ok(&["complete", &running, "--force", "--summary", "done"]);
    let home_before = snapshot(k.home());
    let unchanged = |what: &str| {
        assert_eq!(
            snapshot(k.home()),
            home_before,
            "{what}: the home is byte-identical"
        );
    };

    // A dispatcher holding the board's dispatch lock: refused (exit 3).
    {
        let lock = kanban_runtime::home::lock::TickLock::try_acquire(&k.default_db())
            .unwrap()
            .unwrap();
        let run = k.run(&["boards", "migrate", "default", "--to", &url]);
        assert_eq!(run.code, 3, "{}", run.stderr);
        assert!(run.stderr.contains("dispatcher"), "{}", run.stderr);
        drop(lock);
    }
    unchanged("dispatch lock");

    // A target that is not empty: refused (exit 3), naming what is there.
    let busy = fresh_db("refusals_busy");
    cluster
        .connect(&busy)
        .unwrap()
        .batch("CREATE TABLE someone_elses (x int)")
        .unwrap();
    let run = k.run(&["boards", "migrate", "default", "--to", &cluster.url(&busy)]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("not empty") && run.stderr.contains("someone_elses"),
        "{}",
        run.stderr
    );
    unchanged("non-empty target");

    // Errors (exit 1): a bad URL, a URL with a password, an unreachable server, a wrong password.
    cluster
        .create_role_with_password("kb_refusals", "Right-Pass-1")
        .unwrap();
    let owned = fresh_db("refusals_owned");
    cluster
        .connect(&owned)
        .unwrap()
        .batch(&format!("ALTER DATABASE {owned} OWNER TO kb_refusals"))
        .unwrap();
    let role_url = cluster.url_for("kb_refusals", &owned);
    let with_password = role_url.replacen("kb_refusals@", "kb_refusals:Right-Pass-1@", 1);
    for (what, to, env, needles) in [
        (
            "not a URL",
            "kanban.db".to_owned(),
            vec![],
            vec!["not a PostgreSQL URL"],
        ),
        (
            "bad port",
            "postgres://u@localhost:99999/db".to_owned(),
            vec![],
            vec!["invalid PostgreSQL URL"],
        ),
        (
            "password on the command line",
            with_password.clone(),
            vec![],
            vec!["password", "pgpass"],
        ),
        (
            "unreachable",
            "postgres://u@127.0.0.1:1/db?connect_timeout=5".to_owned(),
            vec![],
            vec!["cannot connect", "127.0.0.1:1"],
        ),
        (
            "wrong password",
            role_url.clone(),
            vec![("PGPASSWORD", "Wrong-Pass-2")],
            vec!["cannot connect", "password"],
        ),
        (
            "no password",
            role_url.clone(),
            vec![],
            vec!["cannot connect", "password"],
        ),
    ] {
        let run = run_env(&k, &["boards", "migrate", "default", "--to", &to], &env);
        assert_eq!(run.code, 1, "{what}: {}", run.stderr);
        for needle in needles {
            assert!(
                run.stderr.contains(needle),
                "{what}: {needle} in {}",
                run.stderr
            );
        }
        for secret in ["Right-Pass-1", "Wrong-Pass-2"] {
            assert!(
                !run.stderr.contains(secret) && !run.stdout.contains(secret),
                "{what}"
            );
        }
        unchanged(what);
    }
    assert_eq!(tables(&mut cluster.connect(&owned).unwrap()), 0);

    // With the right password (PGPASSWORD) the same command works.
    let run = run_env(
        &k,
        &["--json", "boards", "migrate", "default", "--to", &role_url],
        &[("PGPASSWORD", "Right-Pass-1")],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("Right-Pass-1"));
}

#[test]
fn a_board_url_in_kanban_toml_or_from_boards_create_selects_postgres() {
    let k = kanban();
    let cluster = cluster();
    let a = fresh_db("select_a");
    let url_a = cluster.url(&a);
    // `boards create --url`: the schema is created, the URL recorded, the board listed.
    let made = k.json(&["boards", "create", "team", "--url", &url_a]);
    assert_eq!(made["store"], "postgres");
    assert_eq!(made["joined_version"], 0);
    let mut client = cluster.connect(&a).unwrap();
    assert_eq!(
        pg_schema::schema_version(&mut client).unwrap(),
        pg_schema::LATEST
    );
    // A second host joining the same database: the board is shared, not recreated.
    let k2 = kanban();
    let joined = k2.json(&["boards", "create", "team", "--url", &url_a]);
    assert_eq!(joined["joined_version"], pg_schema::LATEST);
    // Creating it again on this host is refused: it exists.
    let again = k.run(&["boards", "create", "team", "--url", &url_a]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    // A database holding something else is refused, and nothing is recorded.
    let other = fresh_db("select_other");
    cluster
        .connect(&other)
        .unwrap()
        .batch("CREATE TABLE tasks (id int)")
        .unwrap();
    let run = k.run(&["boards", "create", "other", "--url", &cluster.url(&other)]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(!k.home().join("kanban/boards/other").exists());

    // `[boards.<slug>] url` in kanban.toml.
    let b = fresh_db("select_b");
    std::fs::write(
        k.home().join("kanban.toml"),
        format!("[boards.ops]\nurl = \"{}\"\n", cluster.url(&b)),
    )
    .unwrap();
    let list = k.json(&["boards", "list"]);
    let stores: Vec<(String, String)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["slug"].as_str().unwrap().to_owned(),
                e["store"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        stores,
        [
            ("default".to_owned(), "sqlite".to_owned()),
            ("ops".to_owned(), "postgres".to_owned()),
            ("team".to_owned(), "postgres".to_owned()),
        ]
    );
    let human = k.ok(&["boards", "list"]);
    assert!(
        human.contains("ops (postgres postgres://postgres@"),
        "{human}"
    );
    // Two different URLs for one board: an error naming both places.
    std::fs::write(
        k.home().join("kanban.toml"),
        format!("[boards.team]\nurl = \"{}\"\n", cluster.url(&b)),
    )
    .unwrap();
    let run = k.run(&["--board", "team", "list"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("two different PostgreSQL URLs") && run.stderr.contains("postgres.url"),
        "{}",
        run.stderr
    );
    // `boards rm`: a board kanban.toml declares is refused; a recorded one loses its folder
    // only.
    std::fs::write(
        k.home().join("kanban.toml"),
        format!("[boards.ops]\nurl = \"{}\"\n", cluster.url(&b)),
    )
    .unwrap();
    let run = k.run(&["boards", "rm", "ops"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("declared by [boards.ops]"),
        "{}",
        run.stderr
    );
    let run = k.run(&["boards", "rm", "team"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!k.home().join("kanban/boards/team").exists());
    assert_eq!(
        pg_schema::schema_version(&mut cluster.connect(&a).unwrap()).unwrap(),
        pg_schema::LATEST,
        "the database is left as it is"
    );
    // A bad URL in kanban.toml is an error naming the file and the key.
    std::fs::write(
        k.home().join("kanban.toml"),
        "[boards.ops]\nurl = \"sqlite:x\"\n",
    )
    .unwrap();
    let run = k.run(&["boards", "list"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("kanban.toml") && run.stderr.contains("[boards.ops] url"),
        "{}",
        run.stderr
    );
}

/// A distinctive password, looked for in everything kanban prints or writes.
const SECRET: &str = "Zx-9q-Sekr1t-Pw";

#[test]
fn the_password_appears_in_no_output_error_or_file() {
    let k = kanban();
    let cluster = cluster();
    cluster
        .create_role_with_password("kb_secret", SECRET)
        .unwrap();
    let db = fresh_db("redaction");
    cluster
        .connect(&db)
        .unwrap()
        .batch(&format!("ALTER DATABASE {db} OWNER TO kb_secret"))
        .unwrap();
    let bare = cluster.url_for("kb_secret", &db);
    let with_password = bare.replacen("kb_secret@", &format!("kb_secret:{SECRET}@"), 1);
    let t = k.create("a task", &[]);
    k.ok(&["comment", &t, "--body", "before the move"]);
    let mut outputs: Vec<(String, Run)> = Vec::new();
    let mut record = |what: &str, run: Run| outputs.push((what.to_owned(), run));

    // kanban.toml may hold the password; nothing that reads it prints it.
    std::fs::write(
        k.home().join("kanban.toml"),
        format!("[boards.team]\nurl = \"{with_password}\"\n"),
    )
    .unwrap();
    record("boards list", k.run(&["boards", "list"]));
    record("boards list --json", k.run(&["--json", "boards", "list"]));
    record("open the board", k.run(&["--board", "team", "list"]));
    record(
        "show on the board",
        k.run(&["--json", "--board", "team", "show", "t_00000000"]),
    );
    record("identity", k.run(&["identity"]));
    record("identity --json", k.run(&["--json", "identity"]));
    record(
        "dispatch --dry-run",
        k.run(&["--board", "team", "dispatch", "--dry-run"]),
    );
    record(
        "a worker's pinned URL with a password",
        run_env(&k, &["list"], &[("HERMES_KANBAN_DB", &with_password)]),
    );
    record(
        "a worker's pinned URL",
        run_env(
            &k,
            &["--json", "identity"],
            &[("HERMES_KANBAN_DB", &bare), ("HERMES_KANBAN_BOARD", "team")],
        ),
    );
    // A bad URL in kanban.toml, with the password in it.
    std::fs::write(
        k.home().join("kanban.toml"),
        format!("[boards.team]\nurl = \"{with_password}?sslmode=maybe\"\n"),
    )
    .unwrap();
    record("bad url in kanban.toml", k.run(&["boards", "list"]));
    std::fs::write(
        k.home().join("kanban.toml"),
        format!("[boards.team]\nurl = {with_password}\n"),
    )
    .unwrap();
    record(
        "kanban.toml that does not parse",
        k.run(&["boards", "list"]),
    );
    std::fs::remove_file(k.home().join("kanban.toml")).unwrap();
    // On the command line: refused, without repeating it.
    record(
        "create --url with a password",
        k.run(&["boards", "create", "x", "--url", &with_password]),
    );
    record(
        "migrate --to with a password",
        k.run(&["boards", "migrate", "default", "--to", &with_password]),
    );
    // The real thing: PGPASSWORD, then everything about the migrated board (into a database of
    // its own: `dispatch` above made the first one the `team` board).
    let target = fresh_db("redaction_target");
    cluster
        .connect(&target)
        .unwrap()
        .batch(&format!("ALTER DATABASE {target} OWNER TO kb_secret"))
        .unwrap();
    let bare_target = cluster.url_for("kb_secret", &target);
    let migrated = run_env(
        &k,
        &[
            "--json",
            "boards",
            "migrate",
            "default",
            "--to",
            &bare_target,
        ],
        &[("PGPASSWORD", SECRET)],
    );
    assert_eq!(migrated.code, 0, "{}", migrated.stderr);
    record("migrate", migrated);
    record(
        "boards list after",
        run_env(&k, &["--json", "boards", "list"], &[("PGPASSWORD", SECRET)]),
    );
    record(
        "list after",
        run_env(&k, &["--json", "list"], &[("PGPASSWORD", SECRET)]),
    );
    record(
        "show after",
        run_env(&k, &["--json", "show", &t], &[("PGPASSWORD", SECRET)]),
    );
    record(
        "events after",
        run_env(&k, &["--json", "events", &t], &[("PGPASSWORD", SECRET)]),
    );
    record(
        "fsck after",
        run_env(&k, &["fsck"], &[("PGPASSWORD", SECRET)]),
    );
    record(
        "dispatch after",
        run_env(&k, &["dispatch", "--once"], &[("PGPASSWORD", SECRET)]),
    );

    for (what, run) in &outputs {
        assert!(
            !run.stdout.contains(SECRET) && !run.stderr.contains(SECRET),
            "{what}: the password leaked\nstdout: {}\nstderr: {}",
            run.stdout,
            run.stderr
        );
    }
    // Refusals were refusals.
    let code = |what: &str| outputs.iter().find(|(w, _)| w == what).unwrap().1.code;
    assert_eq!(code("create --url with a password"), 1);
    assert_eq!(code("migrate --to with a password"), 1);
    assert_eq!(code("a worker's pinned URL with a password"), 1);
    assert_eq!(code("bad url in kanban.toml"), 1);
    assert_eq!(code("kanban.toml that does not parse"), 1);
    // Every file kanban wrote under its home (the recorded URL, logs, the kept board).
    for (path, bytes) in snapshot(k.home()) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(SECRET),
            "{} holds the password",
            path.display()
        );
    }
    // And no row of the board in PostgreSQL (events included).
    let mut client = cluster.connect(&db).unwrap();
    for (table, columns) in TABLES {
        for row in pg_rows(&mut client, table, columns) {
            assert!(!format!("{row:?}").contains(SECRET), "{table}");
        }
    }
}

#[test]
fn migrate_a_10000_task_board() {
    use kanban_runtime::board::{Board, Completion, Durability, NewTask, OpenOptions};
    use kanban_runtime::db::target::{PgTarget, UrlSource};
    use kanban_runtime::home as paths;
    use kanban_runtime::home::migrate;
    let home = tempfile::tempdir().unwrap();
    let root = home.path();
    let db = paths::db_path(root, "default");
    let t = 1_790_000_000;
    {
        let board = Board::open_path(
            &db,
            &OpenOptions {
                durability: Durability::Normal,
                ..OpenOptions::create()
            },
        )
        .unwrap();
        let parents: Vec<String> = board
            .create_tasks(
                &(0..5_000)
                    .map(|i| NewTask {
                        title: format!("parent {i}"),
                        body: Some(format!("body of task {i}, with some text to copy")),
                        priority: i % 7,
                        ..NewTask::default()
                    })
                    .collect::<Vec<_>>(),
                t,
            )
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect();
        board
            .create_tasks(
                &(0..5_000)
                    .map(|i| NewTask {
                        title: format!("child {i}"),
                        parents: vec![parents[i].clone()],
                        ..NewTask::default()
                    })
                    .collect::<Vec<_>>(),
                t,
            )
            .unwrap();
        board
            .complete_many(&parents[..2_500], &Completion::default(), t + 1)
            .unwrap();
    }
    let before: Vec<usize> = TABLES
        .iter()
        .map(|(table, columns)| sqlite_rows(&db, table, columns).len())
        .collect();
    assert_eq!(before[0], 10_000);
    let name = fresh_db("ten_thousand");
    let target = PgTarget::parse(&cluster().url(&name), UrlSource::Argument("--to")).unwrap();
    let location = paths::locate(root, "default").unwrap();
    let started = std::time::Instant::now();
    let done = migrate::to_postgres(root, &location, &target, t + 2).unwrap();
    let elapsed = started.elapsed();
    let mut client = cluster().connect(&name).unwrap();
    for ((table, _), expected) in TABLES.iter().zip(&before) {
        let n = client
            .query_one(&format!("SELECT COUNT(*) FROM {table}"), &[])
            .unwrap()
            .get(0)
            .and_then(Value::as_i64)
            .unwrap();
        assert_eq!(usize::try_from(n).unwrap(), *expected, "{table}");
        assert_eq!(done.rows[*table], *expected as u64, "{table}");
    }
    // A figure for the README (no assertion on time: speed is measured, not tested).
    eprintln!(
        "migrate_a_10000_task_board: {} rows in {} ms (copy {} ms)",
        before.iter().sum::<usize>(),
        elapsed.as_millis(),
        done.copy_ms
    );
}

#[test]
fn a_column_the_board_lacks_is_copied_as_null() {
    let k = kanban();
    let t = k.create("adopted", &[]);
    k.ok(&["claim", &t]);
    k.ok(&["complete", &t, "--force", "--summary", "done"]);
    rusqlite::Connection::open(k.default_db())
        .unwrap()
        .execute_batch("ALTER TABLE task_runs DROP COLUMN step_key")
        .unwrap();
    let name = fresh_db("adopted");
    let out = k.json(&[
        "boards",
        "migrate",
        "default",
        "--to",
        &cluster().url(&name),
    ]);
    assert_eq!(out["rows"]["task_runs"], 1);
    let row = cluster()
        .connect(&name)
        .unwrap()
        .query_one("SELECT task_id, step_key FROM task_runs", &[])
        .unwrap();
    assert_eq!(row.get(0).and_then(Value::as_str), Some(t.as_str()));
    assert_eq!(row.get(1), Some(&Value::Null));
}
