//! TLS against the real server: each `sslmode` with a certificate authority made here, a wrong
//! host name under `verify-full`, a server without TLS under `require`, and authentication
//! over TLS, bound to the channel (SCRAM-SHA-256-PLUS).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kanban_pgwire::cluster::{PasswordMethod, SUPERUSER, TestCluster};
use kanban_pgwire::test_ca::TestCa;
use kanban_pgwire::{ChannelBinding, Client, Config, Error, SslMode, Value};

struct Tls {
    cluster: TestCluster,
    /// The CA that signed the server's certificate (for `localhost` only).
    ca: PathBuf,
    /// Another CA, which signed nothing the server has.
    other_ca: PathBuf,
}

/// One TLS server for this test binary; its certificate names `localhost`, not `127.0.0.1`.
fn tls() -> &'static Tls {
    static TLS: OnceLock<Tls> = OnceLock::new();
    TLS.get_or_init(|| {
        let ca = TestCa::new("kanban test CA").expect("a CA");
        let other = TestCa::new("another CA").expect("another CA");
        let (cert, key) = ca
            .server_cert(&["localhost"])
            .expect("a server certificate");
        let cluster = TestCluster::builder()
            .tcp(true)
            .tls(&cert, &key)
            .start()
            .expect("the TLS test cluster starts");
        let ca_path = cluster.dir().join("test-ca.pem");
        let other_ca = cluster.dir().join("other-ca.pem");
        std::fs::write(&ca_path, ca.pem()).expect("write the CA");
        std::fs::write(&other_ca, other.pem()).expect("write the other CA");
        Tls {
            cluster,
            ca: ca_path,
            other_ca,
        }
    })
}

/// The server's URL at `host` with `params`.
fn url(t: &Tls, host: &str, user: &str, params: &str) -> String {
    let base = t.cluster.tcp_url_for(user, "postgres").expect("TCP");
    let base = base.replace("127.0.0.1", host);
    format!("{base}?connect_timeout=30&{params}")
}

fn param_path(p: &Path) -> String {
    p.to_string_lossy().replace('/', "%2F")
}

/// Connects and tells whether the server sees TLS on the connection.
fn connect(url: &str) -> Result<(Client, bool), Error> {
    let mut c = Client::connect(&Config::parse(url).expect("a test URL"))?;
    let row = c.query_one(
        "SELECT ssl::int4::int8 FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        &[],
    )?;
    let ssl = row.get(0) == Some(&Value::Int(1));
    assert_eq!(ssl, c.is_encrypted(), "the client and the server agree");
    Ok((c, ssl))
}

#[test]
fn each_sslmode_connects_as_libpq_would() {
    let t = tls();
    let ca = param_path(&t.ca);
    for (params, encrypted) in [
        ("sslmode=disable".to_string(), false),
        // The server accepts plaintext, so `allow` stays plaintext.
        ("sslmode=allow".to_string(), false),
        // libpq's default: TLS when offered, the certificate not checked.
        (String::new(), true),
        ("sslmode=prefer".to_string(), true),
        ("sslmode=require".to_string(), true),
        (format!("sslmode=require&sslrootcert={ca}"), true),
        // The certificate names localhost, not 127.0.0.1: verify-ca does not care.
        (format!("sslmode=verify-ca&sslrootcert={ca}"), true),
    ] {
        let (_, ssl) = connect(&url(t, "127.0.0.1", SUPERUSER, &params))
            .unwrap_or_else(|e| panic!("{params}: {e:?}"));
        assert_eq!(ssl, encrypted, "{params}");
    }
    let (_, ssl) = connect(&url(
        t,
        "localhost",
        SUPERUSER,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .expect("verify-full with the right name and CA");
    assert!(ssl);
}

#[test]
fn verification_refuses_a_wrong_name_or_an_unknown_authority() {
    let t = tls();
    let ca = param_path(&t.ca);
    let other = param_path(&t.other_ca);
    for (host, params, want) in [
        (
            "127.0.0.1",
            format!("sslmode=verify-full&sslrootcert={ca}"),
            "NotValidForName",
        ),
        (
            "localhost",
            format!("sslmode=verify-full&sslrootcert={other}"),
            "UnknownIssuer",
        ),
        (
            "127.0.0.1",
            format!("sslmode=verify-ca&sslrootcert={other}"),
            "UnknownIssuer",
        ),
        // With a root certificate file, `require` checks the authority (libpq).
        (
            "127.0.0.1",
            format!("sslmode=require&sslrootcert={other}"),
            "UnknownIssuer",
        ),
        // Without sslrootcert, verify-* trusts the built-in public roots only.
        (
            "localhost",
            "sslmode=verify-full".to_string(),
            "UnknownIssuer",
        ),
    ] {
        let err = connect(&url(t, host, SUPERUSER, &params)).expect_err(&params);
        let text = format!("{err} {err:?}");
        assert!(matches!(err, Error::Io { .. }), "{params}: {text}");
        assert!(
            text.contains("TLS handshake") && text.contains(want),
            "{params}: {text}"
        );
    }
    let err = connect(&url(
        t,
        "127.0.0.1",
        SUPERUSER,
        "sslmode=verify-ca&sslrootcert=%2Fno%2Fsuch%2Fca.pem",
    ))
    .expect_err("a missing root file");
    assert!(err.to_string().contains("/no/such/ca.pem"), "{err}");
}

#[test]
fn a_server_without_tls_is_refused_under_require_and_verify() {
    let plain = TestCluster::builder()
        .tcp(true)
        .start()
        .expect("a TCP cluster without TLS");
    let base = plain.tcp_url_for(SUPERUSER, "postgres").expect("TCP");
    for mode in [SslMode::Require, SslMode::VerifyCa, SslMode::VerifyFull] {
        let err = Client::connect(&Config::parse(&format!("{base}?sslmode={mode}")).unwrap())
            .expect_err("no TLS on the server");
        assert!(
            err.to_string().contains("does not offer TLS"),
            "{mode}: {err}"
        );
    }
    let mut c = Client::connect(&Config::parse(&base).unwrap()).expect("prefer falls back");
    assert!(!c.is_encrypted());
    c.batch("SELECT 1").unwrap();
}

#[test]
fn scram_over_tls_and_md5_over_tls_only_when_opted_in() {
    let t = tls();
    t.cluster
        .create_role("tls_scram", "tls-secret", PasswordMethod::Scram)
        .unwrap();
    let mut config = Config::parse(&url(t, "127.0.0.1", "tls_scram", "sslmode=require")).unwrap();
    config.set_password("tls-secret");
    let mut c = Client::connect(&config).expect("SCRAM over TLS");
    assert!(c.is_encrypted());
    // The server offered SCRAM-SHA-256-PLUS and accepted the certificate hash.
    assert!(c.is_channel_bound());
    assert_eq!(
        c.query_one("SELECT current_user", &[]).unwrap().get(0),
        Some(&Value::Text("tls_scram".into()))
    );
    config.set_ssl_mode(SslMode::Disable);
    config.set_password("tls-secret");
    let c = Client::connect(&config).expect("SCRAM without TLS");
    assert!(!c.is_encrypted() && !c.is_channel_bound());
    config.set_ssl_mode(SslMode::Require);
    config.set_password("wrong-guess");
    let err = Client::connect(&config).expect_err("a wrong password over TLS");
    assert_eq!(err.code(), Some("28P01"), "{err:?}");

    t.cluster
        .create_role("tls_md5", "md5-secret", PasswordMethod::Md5)
        .unwrap();
    let mut config = Config::parse(&url(t, "127.0.0.1", "tls_md5", "sslmode=require")).unwrap();
    config.set_password("md5-secret");
    let err = Client::connect(&config).expect_err("md5 over TCP, even with TLS");
    assert!(err.to_string().contains("allow_weak_auth=true"), "{err}");
    config.set_allow_weak_auth(true);
    assert!(Client::connect(&config).expect("opted in").is_encrypted());
}

#[test]
fn channel_binding_require_refuses_every_login_it_cannot_bind() {
    let t = tls();
    t.cluster
        .create_role("cb_scram", "cb-secret", PasswordMethod::Scram)
        .unwrap();
    t.cluster
        .create_role("cb_md5", "cb-md5-secret", PasswordMethod::Md5)
        .unwrap();
    let login = |user: &str, password: &str, params: &str| {
        let mut config = Config::parse(&url(t, "127.0.0.1", user, params)).unwrap();
        config.set_password(password);
        Client::connect(&config)
    };
    let c = login(
        "cb_scram",
        "cb-secret",
        "sslmode=require&channel_binding=require",
    )
    .expect("SCRAM-SHA-256-PLUS under channel_binding=require");
    assert!(c.is_encrypted() && c.is_channel_bound());
    let c = login(
        "cb_scram",
        "cb-secret",
        "sslmode=require&channel_binding=disable",
    )
    .expect("channel_binding=disable over TLS");
    assert!(c.is_encrypted() && !c.is_channel_bound());
    for (user, password, params, want) in [
        // The superuser logs in by trust: nothing is bound.
        (
            SUPERUSER,
            "",
            "sslmode=require&channel_binding=require",
            "without a channel-bound",
        ),
        (
            "cb_md5",
            "cb-md5-secret",
            "sslmode=require&channel_binding=require&allow_weak_auth=true",
            "`md5` method",
        ),
        // `allow` stays in plaintext on this server.
        (
            "cb_scram",
            "cb-secret",
            "sslmode=allow&channel_binding=require",
            "not encrypted",
        ),
    ] {
        let err = login(user, password, params).expect_err(params);
        assert!(matches!(err, Error::Auth(_)), "{params}: {err:?}");
        assert!(err.to_string().contains(want), "{params}: {err}");
    }
    let mut config = Config::parse(&url(t, "127.0.0.1", "cb_scram", "")).unwrap();
    config.set_channel_binding(ChannelBinding::Require);
    config.set_ssl_mode(SslMode::Disable);
    config.set_password("cb-secret");
    let err = Client::connect(&config).expect_err("set by hand, require without TLS");
    assert!(err.to_string().contains("not encrypted"), "{err}");
}
