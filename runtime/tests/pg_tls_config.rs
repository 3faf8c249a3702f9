//! The TLS keys of `[boards.<slug>]` in `kanban.toml` (`sslmode`, `sslrootcert`, `sslcert`,
//! `sslkey`, `channel_binding`) against a real server serving TLS with a certificate authority
//! made here (`kanban_pgwire::test_ca::TestCa`): they reach the connection, relative paths name
//! files next to `kanban.toml`, a key that disagrees with the URL, an unknown value and a missing
//! file are clear errors, and `kanban boards list` shows the mode.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test

use std::path::Path;
use std::sync::OnceLock;

use kanban_pgwire::Client;
use kanban_pgwire::cluster::TestCluster;
use kanban_pgwire::test_ca::TestCa;
use kanban_tests::Kanban;

/// A server on `127.0.0.1` serving TLS with a certificate for `localhost` only, and two CA files:
/// the one that signed it and another.
struct Tls {
    cluster: TestCluster,
    ca_pem: String,
    other_pem: String,
}

fn tls() -> &'static Tls {
    static TLS: OnceLock<Tls> = OnceLock::new();
    TLS.get_or_init(|| {
        let ca = TestCa::new("kanban test CA").unwrap();
        let other = TestCa::new("another CA").unwrap();
        let (cert, key) = ca.server_cert(&["localhost"]).unwrap();
        let cluster = TestCluster::builder()
            .tcp(true)
            .tls(&cert, &key)
            .start()
            .expect("a PostgreSQL test server with TLS (see the README's Testing section)");
        Tls {
            cluster,
            ca_pem: ca.pem().to_owned(),
            other_pem: other.pem().to_owned(),
        }
    })
}

/// A home whose `certs/` holds `ca.pem` (the server's CA) and `other.pem`.
fn home() -> Kanban {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    let certs = k.home().join("certs");
    std::fs::create_dir(&certs).unwrap();
    std::fs::write(certs.join("ca.pem"), &tls().ca_pem).unwrap();
    std::fs::write(certs.join("other.pem"), &tls().other_pem).unwrap();
    k
}

/// The URL of a fresh database at `host` (`localhost` or `127.0.0.1`), with `params`.
fn url(host: &str, params: &str) -> String {
    let t = tls();
    let db = t.cluster.fresh_database("tls_cfg").unwrap();
    let base = t.cluster.tcp_url_for("postgres", &db).unwrap();
    format!(
        "{}?connect_timeout=30{params}",
        base.replace("127.0.0.1", host)
    )
}

fn write_toml(k: &Kanban, board: &str) {
    std::fs::write(k.home().join("kanban.toml"), board).unwrap();
}

/// Connects with the settings `kanban.toml` gives board `team` and tells whether the server's
/// connection is encrypted.
fn encrypted(home: &Path) -> bool {
    let boards = kanban_runtime::config::boards::load(home).unwrap();
    let config = boards["team"].connect_config().unwrap();
    Client::connect(&config).unwrap().is_encrypted()
}

#[test]
fn tls_keys_in_kanban_toml_reach_the_connection_with_paths_next_to_the_file() {
    let k = home();
    // The test runs from another folder: `certs/ca.pem` is found next to kanban.toml.
    assert!(!Path::new("certs/ca.pem").exists());
    write_toml(
        &k,
        &format!(
            "[boards.team]\nurl = \"{}\"\nsslmode = \"verify-full\"\nsslrootcert = \"certs/ca.pem\"\n",
            url("localhost", "")
        ),
    );
    let id = k.create("over TLS", &["--board", "team"]);
    assert!(id.starts_with("t_"), "{id}");
    assert!(encrypted(k.home()));
    let human = k.ok(&["boards", "list"]);
    assert!(human.contains(" tls=verify-full)"), "{human}");
    let ca = k.home().join("certs/ca.pem");
    assert!(
        human.contains(&format!(
            "sslrootcert={}",
            ca.display().to_string().replace('/', "%2F")
        )),
        "the redacted URL carries the absolute path: {human}"
    );
    let listed = k.json(&["boards", "list"]);
    let team = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["slug"] == "team")
        .unwrap();
    assert_eq!(team["tls"], "verify-full");
    let default = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["slug"] == "default")
        .unwrap();
    assert!(default["tls"].is_null(), "{default}");

    // verify-full checks the name: the certificate names localhost, not 127.0.0.1.
    write_toml(
        &k,
        &format!(
            "[boards.team]\nurl = \"{}\"\nsslmode = \"verify-full\"\nsslrootcert = \"certs/ca.pem\"\n",
            url("127.0.0.1", "")
        ),
    );
    let run = k.run(&["--board", "team", "list"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("not valid for name \"127.0.0.1\""),
        "{}",
        run.stderr
    );
    // Another authority is refused; the key, not the URL, chose it.
    write_toml(
        &k,
        &format!(
            "[boards.team]\nurl = \"{}\"\nsslmode = \"verify-ca\"\nsslrootcert = \"certs/other.pem\"\n",
            url("localhost", "")
        ),
    );
    let run = k.run(&["--board", "team", "list"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("UnknownIssuer"), "{}", run.stderr);
    // sslmode = "disable" turns TLS off on a server that offers it.
    write_toml(
        &k,
        &format!(
            "[boards.team]\nurl = \"{}\"\nsslmode = \"disable\"\n",
            url("localhost", "")
        ),
    );
    assert!(!encrypted(k.home()));
    assert!(k.ok(&["boards", "list"]).contains(" tls=disable)"));
    // channel_binding = "require" reaches the client: the superuser logs in by trust, unbound.
    write_toml(
        &k,
        &format!(
            "[boards.team]\nurl = \"{}\"\nchannel_binding = \"require\"\n",
            url("localhost", "")
        ),
    );
    let run = k.run(&["--board", "team", "list"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("channel_binding=require"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_key_and_the_url_that_disagree_are_an_error_naming_both() {
    let k = home();
    let ca = k.home().join("certs/ca.pem");
    let ca_param = ca.display().to_string().replace('/', "%2F");
    for (params, keys, names) in [
        (
            "&sslmode=require".to_owned(),
            "sslmode = \"verify-full\"\n".to_owned(),
            &["[boards.team] sslmode = \"verify-full\"", "sslmode=require"][..],
        ),
        (
            "&channel_binding=disable".to_owned(),
            "channel_binding = \"require\"\n".to_owned(),
            &[
                "[boards.team] channel_binding = \"require\"",
                "channel_binding=disable",
            ][..],
        ),
        (
            "&sslrootcert=%2Fetc%2Fother.pem".to_owned(),
            "sslrootcert = \"certs/ca.pem\"\n".to_owned(),
            &[
                "sslrootcert = \"",
                "certs/ca.pem",
                "sslrootcert=/etc/other.pem",
            ][..],
        ),
    ] {
        write_toml(
            &k,
            &format!(
                "[boards.team]\nurl = \"{}\"\n{keys}",
                url("localhost", &params)
            ),
        );
        for args in [&["boards", "list"][..], &["--board", "team", "list"][..]] {
            let run = k.run(args);
            assert_eq!(run.code, 1, "{params} {args:?}: {}", run.stderr);
            for name in names {
                assert!(
                    run.stderr.contains(name),
                    "{params}: {name} in {}",
                    run.stderr
                );
            }
            assert!(run.stderr.contains("kanban.toml"), "{}", run.stderr);
        }
    }
    // The same value in both places is no disagreement; a relative path in the URL of
    // kanban.toml also names a file next to it.
    write_toml(
        &k,
        &format!(
            "[boards.team]\nurl = \"{}\"\nsslmode = \"verify-full\"\nsslrootcert = \"{}\"\n",
            url(
                "localhost",
                "&sslmode=verify-full&sslrootcert=certs%2Fca.pem"
            ),
            ca.display()
        ),
    );
    assert!(k.ok(&["boards", "list"]).contains(&ca_param));
    assert!(encrypted(k.home()));
}

#[test]
fn an_unknown_value_names_the_key_and_the_values_it_takes() {
    let k = home();
    let base = url("localhost", "");
    for (keys, names) in [
        (
            "sslmode = \"maybe\"\n",
            &[
                "[boards.team] sslmode",
                "\"maybe\"",
                "disable, allow, prefer, require, verify-ca, verify-full",
            ][..],
        ),
        (
            "channel_binding = \"always\"\n",
            &[
                "[boards.team] channel_binding",
                "\"always\"",
                "disable, prefer, require",
            ][..],
        ),
        (
            "sslrootcert = \"\"\n",
            &["[boards.team] sslrootcert", "PEM file"][..],
        ),
        (
            "sslcert = \"certs/ca.pem\"\n",
            &["sslcert and sslkey go together"][..],
        ),
        (
            "sslmode = \"disable\"\nchannel_binding = \"require\"\n",
            &["channel_binding = \"require\" needs TLS"][..],
        ),
        ("sslmod = \"require\"\n", &["sslmod"][..]),
    ] {
        write_toml(&k, &format!("[boards.team]\nurl = \"{base}\"\n{keys}"));
        let run = k.run(&["boards", "list"]);
        assert_eq!(run.code, 1, "{keys}: {}", run.stderr);
        for name in names {
            assert!(
                run.stderr.contains(name),
                "{keys}: {name} in {}",
                run.stderr
            );
        }
    }
}

#[test]
fn a_missing_certificate_file_is_an_error_at_open_naming_it() {
    let k = home();
    let base = url("localhost", "");
    for (keys, missing) in [
        ("sslrootcert = \"certs/gone.pem\"\n", "sslrootcert file"),
        (
            "sslcert = \"certs/client.pem\"\nsslkey = \"certs/client.key\"\n",
            "sslcert file",
        ),
    ] {
        write_toml(&k, &format!("[boards.team]\nurl = \"{base}\"\n{keys}"));
        // Listing the boards opens none: the entry is fine until the board is used.
        assert!(k.ok(&["boards", "list"]).contains("team (postgres "));
        let run = k.run(&["--board", "team", "list"]);
        assert_eq!(run.code, 1, "{keys}: {}", run.stderr);
        let gone = k.home().join(keys.split('"').nth(1).unwrap());
        assert!(
            run.stderr.contains(missing) && run.stderr.contains(&gone.display().to_string()),
            "{keys}: {}",
            run.stderr
        );
        assert!(run.stderr.contains("does not exist"), "{}", run.stderr);
    }
}
