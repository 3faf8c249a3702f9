//! Password authentication against a real server (SCRAM-SHA-256, md5, cleartext), and the rule
//! that the password appears in no error, `Display` or `Debug` text.

use kanban_pgwire::cluster::{PasswordMethod, TestCluster};
use kanban_pgwire::{Client, Config, Error, Value};

/// Every text a caller might log for `e`: `Display`, `Debug` and the source chain.
fn texts(e: &Error) -> String {
    let mut out = format!("{e}\n{e:?}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(&format!("\n{s}\n{s:?}"));
        source = s.source();
    }
    out
}

fn config(cluster: &TestCluster, user: &str, password: Option<&str>) -> Config {
    let mut c = cluster.config_for(user, "postgres");
    if let Some(pw) = password {
        c.set_password(pw);
    }
    c
}

fn check_method(role: &str, method: PasswordMethod, password: &str) {
    let cluster = TestCluster::shared().expect("the test cluster starts");
    cluster
        .create_role(role, password, method)
        .expect("create the role");

    let good = config(cluster, role, Some(password));
    let mut client = Client::connect(&good).expect("the right password is accepted");
    let row = client
        .query_one("SELECT current_user", &[])
        .expect("a query after password authentication");
    assert_eq!(row.get(0), Some(&Value::Text(role.into())));
    for text in [
        good.to_string(),
        format!("{good:?}"),
        good.redacted(),
        format!("{client:?}"),
    ] {
        assert!(!text.contains(password), "{text}");
    }

    let wrong = "Wr0ng-Guess-Of-The-Password";
    let err = Client::connect(&config(cluster, role, Some(wrong)))
        .expect_err("a wrong password is refused");
    assert_eq!(err.code(), Some("28P01"), "{err:?}");
    let all = texts(&err);
    assert!(!all.contains(wrong) && !all.contains(password), "{all}");

    let err = Client::connect(&config(cluster, role, None)).expect_err("no password is refused");
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    assert!(err.to_string().contains("none is set"), "{err}");
}

#[test]
fn scram_sha_256_accepts_the_password_and_refuses_a_wrong_one() {
    check_method("scram_user", PasswordMethod::Scram, "Sc:r@m pässword/1");
}

#[test]
fn md5_accepts_the_password_and_refuses_a_wrong_one() {
    check_method("md5_user", PasswordMethod::Md5, "md5-secret-Hunter2");
}

#[test]
fn cleartext_password_accepts_the_password_and_refuses_a_wrong_one() {
    check_method(
        "plain_user",
        PasswordMethod::Cleartext,
        "plain-secret-Hunter3",
    );
}

#[test]
fn a_password_in_the_url_is_used_and_never_shown() {
    let cluster = TestCluster::shared().expect("the test cluster starts");
    let password = "url-secret-%41";
    cluster
        .create_role_with_password("url_user", "url-secret-A")
        .unwrap();
    let url = format!(
        "{}?password={password}",
        cluster.url_for("url_user", "postgres")
    );
    let config = Config::parse(&url).unwrap();
    let mut client = Client::connect(&config).unwrap();
    assert_eq!(
        client.query_one("SELECT 1", &[]).unwrap().get(0),
        Some(&Value::Int(1))
    );
    for text in [config.to_string(), format!("{config:?}"), config.redacted()] {
        assert!(!text.contains("url-secret"), "{text}");
    }
    // A database that does not exist: the server's error names it, not the password.
    let mut missing = config.clone();
    missing.set_dbname("no_such_db");
    let err = Client::connect(&missing).unwrap_err();
    assert_eq!(err.code(), Some("3D000"), "{err:?}");
    assert!(!texts(&err).contains("url-secret"));
}

#[test]
fn a_missing_socket_is_an_io_error_naming_the_socket_not_the_password() {
    let config = Config::parse("postgres://u:sock-secret@%2Fnonexistent%2Fdir:6000/d").unwrap();
    let err = Client::connect(&config).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    let all = texts(&err);
    assert!(all.contains("/nonexistent/dir/.s.PGSQL.6000"), "{all}");
    assert!(!all.contains("sock-secret"), "{all}");
}
