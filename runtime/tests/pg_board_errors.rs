//! A PostgreSQL board's first use and its failures, against a real server
//! (`kanban_pgwire::cluster::TestCluster`): a board configured in `kanban.toml` is created on
//! first use, a database without a board is never made one by a command that may not, a
//! read-only session, an unreachable server and a connection lost mid-read are said in
//! PostgreSQL's words (the URL named, never its password), a server that never answers fails
//! within the connect timeout, and 8 concurrent `boards create --url` of one empty database
//! create one schema. Every refusal: its exit code, its message, and nothing changed.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test

use kanban_pgwire::Value;
use kanban_pgwire::cluster::TestCluster;
use kanban_runtime::board::engine::postgres::schema as pg_schema;
use kanban_tests::{Kanban, Run};

const SECRET: &str = "Sekr1t-Pw-9q";

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

/// `url` with `SECRET` as its password (the test server trusts its socket, so it is never
/// asked for; it must only never be shown).
fn with_password(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, host) = rest.split_once('@').unwrap();
    format!("{scheme}://{user}:{SECRET}@{host}")
}

fn configure(k: &Kanban, slug: &str, url: &str) {
    std::fs::write(
        k.home().join("kanban.toml"),
        format!("[boards.{slug}]\nurl = \"{url}\"\n"),
    )
    .unwrap();
}

fn run_env(k: &Kanban, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = k.cmd();
    cmd.args(args);
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd.output().expect("run kanban").into()
}

fn count(db: &str, sql: &str) -> i64 {
    cluster()
        .connect(db)
        .unwrap()
        .query_one(sql, &[])
        .unwrap()
        .get(0)
        .and_then(Value::as_i64)
        .unwrap()
}

fn version(db: &str) -> i64 {
    pg_schema::schema_version(&mut cluster().connect(db).unwrap()).unwrap()
}

fn refused(run: &Run, code: i32, says: &[&str]) {
    assert_eq!(
        run.code, code,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    for s in says {
        assert!(run.stderr.contains(s), "missing {s:?} in: {}", run.stderr);
    }
    assert!(!run.stderr.contains(SECRET), "{}", run.stderr);
    assert!(!run.stdout.contains(SECRET), "{}", run.stdout);
}

#[test]
fn a_board_configured_in_kanban_toml_is_created_on_first_use() {
    // The first command on a configured board creates it there, as the default board is.
    let k = kanban();
    let db = fresh_db("first_use");
    configure(&k, "team", &with_password(&cluster().url(&db)));
    let id = k.create("first", &["--board", "team"]);
    assert_eq!(version(&db), pg_schema::LATEST);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM tasks"), 1);
    let shown = k.json(&["--board", "team", "show", &id]);
    assert_eq!(shown["task"]["title"], "first", "{shown}");
    assert!(!k.home().join("kanban/boards/team/kanban.db").exists());
    assert!(!k.home().join("kanban/boards/team/postgres.url").exists());

    // `kanban boards create SLUG` of a configured board creates it in PostgreSQL (never a
    // SQLite file the configuration would hide), and joins one that is there.
    let k = kanban();
    let db = fresh_db("configured_create");
    configure(&k, "ops", &with_password(&cluster().url(&db)));
    let made = k.json(&["boards", "create", "ops"]);
    assert_eq!(made["store"], "postgres", "{made}");
    assert_eq!(made["joined_version"], 0, "{made}");
    assert!(made["url_file"].is_null(), "{made}");
    assert!(!made.to_string().contains(SECRET));
    assert_eq!(version(&db), pg_schema::LATEST);
    let again = k.json(&["boards", "create", "ops"]);
    assert_eq!(again["joined_version"], pg_schema::LATEST, "{again}");
    assert!(!k.home().join("kanban/boards/ops").exists());
    // `--url` for a board kanban.toml configures: it exists there; nothing is recorded.
    let run = k.run(&["boards", "create", "ops", "--url", &cluster().url(&db)]);
    refused(&run, 1, &["already exists", "kanban.toml"]);
    assert!(!k.home().join("kanban/boards/ops").exists());
}

#[test]
fn a_database_without_a_board_is_made_one_only_by_a_command_that_may() {
    let k = kanban();
    let db = fresh_db("no_board");
    let url = cluster().url(&db);
    // A worker's pinned board (HERMES_KANBAN_DB) is never created.
    let run = run_env(&k, &["list"], &[("HERMES_KANBAN_DB", &url)]);
    refused(
        &run,
        1,
        &[
            "holds no kanban board",
            "HERMES_KANBAN_DB",
            "kanban boards create",
        ],
    );
    assert!(!run.stderr.contains("`kanban create`"), "{}", run.stderr);
    assert_eq!(version(&db), 0);

    // A board recorded by `boards create --url` whose database lost its board: not recreated
    // behind the operator's back; the message says what happened and what to do.
    let made = k.json(&["boards", "create", "rec", "--url", &url]);
    assert_eq!(made["joined_version"], 0);
    let mut admin = cluster().connect(&db).unwrap();
    admin
        .batch("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        .unwrap();
    let run = k.run(&["--board", "rec", "create", "x"]);
    refused(
        &run,
        1,
        &[
            "holds no kanban board",
            "postgres.url",
            "kanban boards create rec --url",
        ],
    );
    assert_eq!(version(&db), 0);
}

#[test]
fn a_write_on_a_read_only_session_is_refused_in_postgres_words() {
    let k = kanban();
    let db = fresh_db("read_only");
    let url = with_password(&cluster().url(&db));
    configure(&k, "team", &url);
    let id = k.create("kept", &["--board", "team"]);
    cluster()
        .connect(&db)
        .unwrap()
        .batch(&format!(
            "ALTER DATABASE {db} SET default_transaction_read_only = on"
        ))
        .unwrap();
    for args in [
        &["--board", "team", "create", "refused"][..],
        &["--board", "team", "comment", &id, "--body", "refused"][..],
        &["--board", "team", "archive", &id][..],
    ] {
        let run = k.run(args);
        refused(
            &run,
            1,
            &[
                "cannot write the PostgreSQL board",
                &cluster().url(&db),
                "read-only",
                "nothing was changed",
            ],
        );
        assert!(!run.stderr.contains("file"), "{args:?}: {}", run.stderr);
        assert!(!run.stderr.contains("SQLite"), "{args:?}: {}", run.stderr);
    }
    // Reads still work; nothing was written.
    let list = k.json(&["--board", "team", "list"]);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM tasks"), 1);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM task_comments"), 0);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM tasks WHERE status = 'archived'"),
        0
    );
}

#[test]
fn a_read_whose_session_the_server_ends_says_the_connection_was_lost() {
    let k = kanban();
    let db = fresh_db("read_lost");
    let url = with_password(&cluster().url(&db));
    configure(&k, "team", &url);
    let id = k.create("kept", &["--board", "team"]);
    // The server ends the session of whoever reads `tasks`, mid-statement, as
    // `pg_terminate_backend` from an operator (or a fast shutdown) does: SQLSTATE 57P01, the
    // socket closed. Opening the board reads no task, so the command's first read meets it.
    let mut admin = cluster().connect(&db).unwrap();
    admin
        .batch(
            "CREATE FUNCTION end_my_session() RETURNS boolean LANGUAGE sql VOLATILE \
             AS 'SELECT pg_terminate_backend(pg_backend_pid())'; \
             ALTER TABLE tasks RENAME TO tasks_kept; \
             CREATE VIEW tasks AS SELECT * FROM tasks_kept WHERE end_my_session()",
        )
        .unwrap();
    for args in [
        &["--board", "team", "list"][..],
        &["--board", "team", "--json", "list"][..],
        &["--board", "team", "show", &id][..],
    ] {
        let run = k.run(args);
        refused(
            &run,
            1,
            &[
                "lost the connection to the PostgreSQL board",
                &cluster().url(&db),
                "run the command again",
            ],
        );
        for wrong in ["a board query failed", "SQLite", "file", "disk"] {
            assert!(!run.stderr.contains(wrong), "{args:?}: {}", run.stderr);
        }
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    }
    // The session, not the board, was lost: with the table back, the same reads work.
    admin
        .batch("DROP VIEW tasks; ALTER TABLE tasks_kept RENAME TO tasks")
        .unwrap();
    let list = k.json(&["--board", "team", "list"]);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["id"], id.as_str(), "{list}");
}

#[test]
fn a_server_that_never_answers_fails_within_the_connect_timeout() {
    // A socket that listens but never accepts: the TCP connect succeeds (the kernel queues
    // it) and the server's greeting never comes.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let k = kanban();
    let url = format!("postgres://kb:{SECRET}@127.0.0.1:{port}/board?connect_timeout=1");
    configure(&k, "team", &url);
    for args in [
        &["--board", "team", "list"][..],
        &["--board", "team", "create", "t"][..],
    ] {
        let run = k.run(args);
        refused(
            &run,
            1,
            &[
                "cannot connect to the PostgreSQL board",
                &format!("postgres://kb@127.0.0.1:{port}/board"),
                "connect timeout",
            ],
        );
        assert!(!run.stderr.contains("SQLite"), "{}", run.stderr);
    }
    assert!(!k.home().join("kanban/boards/team").exists());
    // `boards create --url` too.
    let run = k.run(&[
        "boards",
        "create",
        "other",
        "--url",
        &format!("postgres://kb@127.0.0.1:{port}/board?connect_timeout=1"),
    ]);
    refused(&run, 1, &["cannot connect to", "127.0.0.1"]);
    assert!(!k.home().join("kanban/boards/other").exists());
    drop(silent);
}

#[test]
fn eight_concurrent_boards_create_of_one_empty_database_make_one_schema() {
    const N: usize = 8;
    for round in 0..2 {
        let db = fresh_db(&format!("create_race{round}"));
        let url = cluster().url(&db);
        let homes: Vec<Kanban> = (0..N).map(|_| kanban()).collect();
        let children: Vec<_> = homes
            .iter()
            .map(|k| {
                let mut cmd = k.cmd();
                cmd.args(["--json", "boards", "create", "team", "--url", &url]);
                cmd.stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                cmd.spawn().unwrap()
            })
            .collect();
        let mut created = 0;
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let made: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if made["joined_version"] == 0 {
                created += 1;
            } else {
                assert_eq!(made["joined_version"], pg_schema::LATEST, "{made}");
            }
        }
        assert_eq!(created, 1, "round {round}: exactly one created the schema");
        assert_eq!(version(&db), pg_schema::LATEST);
        // Every host uses the one board.
        let id = homes[0].create("shared", &["--board", "team"]);
        for k in &homes {
            let shown = k.json(&["--board", "team", "show", &id]);
            assert_eq!(shown["task"]["title"], "shared", "{shown}");
        }
    }
}

#[test]
fn concurrent_boards_migrate_into_one_empty_database_copy_exactly_one_board() {
    // Four hosts each migrate their own SQLite board into the same empty database at once:
    // one copy wins; the others find it not empty (exit 3) and keep their SQLite board.
    const N: usize = 4;
    let db = fresh_db("migrate_race");
    let url = cluster().url(&db);
    let homes: Vec<Kanban> = (0..N).map(|_| kanban()).collect();
    for (n, k) in homes.iter().enumerate() {
        k.create(&format!("from host {n}"), &[]);
    }
    let children: Vec<_> = homes
        .iter()
        .map(|k| {
            let mut cmd = k.cmd();
            cmd.args(["boards", "migrate", "default", "--to", &url]);
            cmd.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let mut winner = None;
    for (n, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => {
                assert!(winner.is_none(), "two migrations copied: {stderr}");
                winner = Some(n);
            }
            Some(3) => {
                assert!(stderr.contains("is not empty"), "{stderr}");
                assert!(stderr.contains("nothing was changed"), "{stderr}");
                let k = &homes[n];
                assert!(k.default_db().is_file());
                assert!(!k.home().join("kanban/boards/default/postgres.url").exists());
                let list = k.json(&["list"]);
                assert_eq!(list[0]["title"], format!("from host {n}"), "{list}");
            }
            other => panic!("host {n} exited {other:?}: {stderr}"),
        }
    }
    let winner = winner.expect("one migration copied the board");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM tasks"), 1);
    let list = homes[winner].json(&["list"]);
    assert_eq!(list[0]["title"], format!("from host {winner}"), "{list}");
}

#[test]
fn a_full_or_damaged_server_is_advised_about_as_a_server_not_a_file() {
    let k = kanban();
    let db = fresh_db("server_faults");
    configure(&k, "team", &cluster().url(&db));
    k.create("kept", &["--board", "team"]);
    let mut admin = cluster().connect(&db).unwrap();
    for (code, says) in [
        ("53100", "the PostgreSQL server's disk is full"),
        ("XX001", "the PostgreSQL server reports damaged data"),
        (
            "58030",
            "the PostgreSQL server could not read or write its files",
        ),
    ] {
        // The server refuses the insert with the SQLSTATE a full disk, a damaged page or a
        // failed file access gives.
        admin
            .batch(&format!(
                "CREATE OR REPLACE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '{code}'; END $$; \
                 DROP TRIGGER IF EXISTS refuse ON tasks; \
                 CREATE TRIGGER refuse BEFORE INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION refuse()"
            ))
            .unwrap();
        let run = k.run(&["--board", "team", "create", "refused"]);
        refused(&run, 1, &[says, "nothing was changed"]);
        for sqlite in ["SQLite", "sqlite3", "`df`"] {
            assert!(!run.stderr.contains(sqlite), "{code}: {}", run.stderr);
        }
        assert_eq!(count(&db, "SELECT COUNT(*) FROM tasks"), 1);
    }
}
