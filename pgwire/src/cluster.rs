//! A throwaway PostgreSQL server for tests and benchmarks (feature `cluster`).
//!
//! [`TestCluster::start`] (or [`TestCluster::builder`]):
//!
//! 1. finds `initdb`, `pg_ctl` and `postgres` in the newest `/usr/lib/postgresql/<version>/bin`,
//!    else in a directory of `PATH`;
//! 2. when they are missing and the process runs as root, installs Debian's `postgresql` package
//!    (`apt-get install -y --no-install-recommends postgresql`, `DEBIAN_FRONTEND=noninteractive`
//!    given to that child only; `apt-get update` and a second try only when the first fails).
//!    Concurrent test processes take turns through a file lock in the temporary directory.
//!    Not root and missing: a clear error (tests fail, they never skip);
//! 3. creates a fresh directory under the temporary directory, runs `initdb` (superuser
//!    `postgres`, trust on the socket, UTF-8, C locale) and starts the server with
//!    `listen_addresses = ''`: a Unix socket in that directory (mode `0711`: searchable, not
//!    listable, by other users), no TCP (unless
//!    [`TestClusterBuilder::tcp`] asks for `127.0.0.1` on a free port). The server refuses to run
//!    as root, so as root `initdb` and `pg_ctl` run as `nobody` (through `setpriv`, else
//!    `runuser`) in a directory owned by `nobody`; otherwise as the current user;
//! 4. on drop, stops the server (`pg_ctl stop -m fast`, then `-m immediate`) and removes the
//!    directory. A small watcher process (`sh`, reading a pipe from this process) does the same
//!    when this process dies without dropping the cluster (a `static`, SIGKILL, Ctrl-C).
//!
//! `fsync` is off by default (with `synchronous_commit` and `full_page_writes`), which is what
//! tests want; a benchmark turns it on with [`TestClusterBuilder::fsync`].
//!
//! Password authentication: the `pg_hba.conf` written at start sends members of the group roles
//! `pgwire_scram`, `pgwire_md5` and `pgwire_password` through `scram-sha-256`, `md5` and
//! cleartext `password` on the socket, everyone else through `trust`.
//! [`TestCluster::create_role_with_password`] makes a SCRAM role (no reload needed: membership
//! is read when a connection authenticates).

#![allow(
    clippy::disallowed_types,
    reason = "the test harness (feature `cluster`, never in a product build) starts initdb, \
              pg_ctl, apt-get and its watcher as `std::process::Command`s; pgwire cannot link the \
              runtime's `identity::command`"
)]

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::config::encode;
use crate::{Client, Config, quote_identifier, quote_literal};

/// The superuser `initdb` creates; it connects through `trust` on the socket.
pub const SUPERUSER: &str = "postgres";

/// Where Debian and Ubuntu install the server's binaries, one folder per major version.
pub const DEBIAN_ROOT: &str = "/usr/lib/postgresql";

/// The port naming the socket (`.s.PGSQL.5432`) when no TCP port is opened.
const SOCKET_PORT: u16 = 5432;

/// Why a test cluster could not be started or used.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No server binaries, and none could be installed.
    #[error(
        "no PostgreSQL server found (initdb, pg_ctl and postgres under {searched}/<version>/bin \
         or on PATH): {hint}"
    )]
    NotFound {
        /// The folder searched for versions.
        searched: String,
        /// What to do.
        hint: String,
    },
    /// A program could not be started.
    #[error("cannot run {program}")]
    Spawn {
        /// The program.
        program: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A program ran and failed.
    #[error("{what} failed ({status}); its output ends with:\n{output}")]
    Command {
        /// What was run.
        what: String,
        /// Its exit status.
        status: String,
        /// The last lines of its output (and of the server log, for the server).
        output: String,
    },
    /// A file operation failed.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The environment cannot host a cluster (no unprivileged user, a socket path too long).
    #[error("{0}")]
    Setup(String),
    /// A statement on the cluster failed.
    #[error("cannot {what} on the test cluster")]
    Client {
        /// What was being done.
        what: String,
        /// The client's error.
        #[source]
        source: crate::Error,
    },
    /// [`TestCluster::shared`] failed to start earlier in this process.
    #[error("the shared test cluster could not be started: {0}")]
    Shared(String),
}

type Result<T> = std::result::Result<T, ClusterError>;

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClusterError {
    let context = context.into();
    move |source| ClusterError::Io { context, source }
}

/// How a role created by [`TestCluster::create_role`] must authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PasswordMethod {
    /// `scram-sha-256` (the password stored as a SCRAM verifier).
    Scram,
    /// `md5` (the password stored as an MD5 hash).
    Md5,
    /// Cleartext `password`.
    Cleartext,
}

impl PasswordMethod {
    fn group(self) -> &'static str {
        match self {
            PasswordMethod::Scram => "pgwire_scram",
            PasswordMethod::Md5 => "pgwire_md5",
            PasswordMethod::Cleartext => "pgwire_password",
        }
    }
}

/// Options of a [`TestCluster`]; [`TestCluster::builder`] gives the defaults.
#[derive(Debug, Clone)]
pub struct TestClusterBuilder {
    search_root: PathBuf,
    use_path: bool,
    install: bool,
    fsync: bool,
    base_dir: Option<PathBuf>,
    settings: Vec<(String, String)>,
    tcp: bool,
    /// The server's certificate chain and key, PEM, for `ssl = on`.
    tls: Option<(String, String)>,
}

impl Default for TestClusterBuilder {
    fn default() -> Self {
        TestClusterBuilder {
            search_root: PathBuf::from(DEBIAN_ROOT),
            use_path: true,
            install: true,
            fsync: false,
            base_dir: None,
            settings: Vec::new(),
            tcp: false,
            tls: None,
        }
    }
}

impl TestClusterBuilder {
    /// Durable commits (`fsync`, `synchronous_commit`, `full_page_writes` at their defaults)
    /// instead of the fast test settings. Benchmarks want this.
    pub fn fsync(mut self, on: bool) -> Self {
        self.fsync = on;
        self
    }

    /// A `postgresql.conf` setting (appended last, so it wins), e.g. `("max_connections", "200")`.
    pub fn setting(mut self, name: &str, value: &str) -> Self {
        self.settings.push((name.to_string(), value.to_string()));
        self
    }

    /// Where to look for `<version>/bin` folders (default [`DEBIAN_ROOT`]); the install step
    /// looks there again afterwards.
    pub fn search_root(mut self, dir: impl Into<PathBuf>) -> Self {
        self.search_root = dir.into();
        self
    }

    /// Whether to look on `PATH` when the search root has no server (default yes).
    pub fn use_path(mut self, yes: bool) -> Self {
        self.use_path = yes;
        self
    }

    /// Whether a missing server may be installed with apt-get when running as root (default
    /// yes).
    pub fn install(mut self, yes: bool) -> Self {
        self.install = yes;
        self
    }

    /// The folder the cluster's directory is created in (default the system's temporary
    /// directory). The socket path `<dir>/kanban-pg-…/.s.PGSQL.5432` must stay under 108 bytes,
    /// and `nobody` must be able to enter it when running as root.
    pub fn base_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.base_dir = Some(dir.into());
        self
    }

    /// Also listen on TCP, `127.0.0.1` on a free port (default: the Unix socket only). The
    /// same `pg_hba.conf` rules apply to TCP connections from `127.0.0.1`.
    pub fn tcp(mut self, yes: bool) -> Self {
        self.tcp = yes;
        self
    }

    /// Serve TLS (`ssl = on`) with this certificate chain and private key (PEM): they are
    /// written into the data directory, owned by the server's user, the key mode `0600`.
    pub fn tls(mut self, cert_pem: &str, key_pem: &str) -> Self {
        self.tls = Some((cert_pem.to_string(), key_pem.to_string()));
        self
    }

    /// Finds (or installs) the server, creates and starts the cluster.
    pub fn start(self) -> Result<TestCluster> {
        let bin = find_or_install(&self)?;
        let runner = Runner::detect()?;
        let base = self.base_dir.clone().unwrap_or_else(std::env::temp_dir);
        let dir = make_dir(&base, &runner)?;
        // From here on the directory is ours: clean it up on any failure.
        let mut cluster = TestCluster {
            dir,
            bin,
            runner,
            watcher: None,
            running: false,
            port: SOCKET_PORT,
            tcp: self.tcp,
        };
        cluster.init_and_start(&self)?;
        Ok(cluster)
    }
}

/// A running throwaway server. See the module docs.
#[derive(Debug)]
pub struct TestCluster {
    dir: PathBuf,
    bin: PathBuf,
    runner: Runner,
    watcher: Option<(Child, ChildStdin)>,
    running: bool,
    port: u16,
    tcp: bool,
}

static SHARED: OnceLock<std::result::Result<TestCluster, String>> = OnceLock::new();

impl TestCluster {
    /// The default options (fast, non-durable).
    pub fn builder() -> TestClusterBuilder {
        TestClusterBuilder::default()
    }

    /// Starts a cluster with the default options.
    pub fn start() -> Result<TestCluster> {
        Self::builder().start()
    }

    /// One cluster for the whole test process, started by the first caller (tests of one binary
    /// share it and each uses its own database from [`TestCluster::create_database`]). It is
    /// never dropped: the watcher process stops it and removes its directory when the test
    /// process exits.
    pub fn shared() -> Result<&'static TestCluster> {
        match SHARED.get_or_init(|| TestCluster::start().map_err(|e| error_chain(&e))) {
            Ok(c) => Ok(c),
            Err(e) => Err(ClusterError::Shared(e.clone())),
        }
    }

    /// The directory holding the socket, the data directory and the server log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The folder of the server binaries in use.
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    /// The superuser's URL for database `db` (no password: trust on the socket).
    pub fn url(&self, db: &str) -> String {
        self.url_for(SUPERUSER, db)
    }

    /// `user`'s URL for database `db`, without a password.
    pub fn url_for(&self, user: &str, db: &str) -> String {
        format!(
            "postgres://{}@{}:{}/{}",
            encode(user),
            encode(&self.dir.to_string_lossy()),
            self.port,
            encode(db)
        )
    }

    /// `user`'s TCP URL (`127.0.0.1`) for database `db`, when the cluster listens on TCP.
    pub fn tcp_url_for(&self, user: &str, db: &str) -> Option<String> {
        self.tcp.then(|| {
            format!(
                "postgres://{}@127.0.0.1:{}/{}",
                encode(user),
                self.port,
                encode(db)
            )
        })
    }

    /// The port: of the TCP listener when there is one; it also names the socket file.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's settings for database `db`.
    pub fn config(&self, db: &str) -> Config {
        self.config_for(SUPERUSER, db)
    }

    /// `user`'s settings for database `db`, without a password.
    pub fn config_for(&self, user: &str, db: &str) -> Config {
        // The URL is built from a path and names percent-encoded above, so it always parses;
        // a failure here is a bug in `url_for`.
        Config::parse(&self.url_for(user, db))
            .unwrap_or_else(|e| panic!("the test cluster built an unparsable URL: {e}"))
    }

    /// A superuser connection to database `db`.
    pub fn connect(&self, db: &str) -> Result<Client> {
        Client::connect(&self.config(db)).map_err(|source| ClusterError::Client {
            what: format!("connect to database {db}"),
            source,
        })
    }

    /// Creates database `name` (owned by the superuser).
    pub fn create_database(&self, name: &str) -> Result<()> {
        self.admin(
            &format!("CREATE DATABASE {}", ident(name)?),
            "create a database",
        )
    }

    /// Creates a fresh empty database named `<prefix>_<pid>_<n>` (unique within this process,
    /// and across the processes sharing the server) and returns its name.
    pub fn fresh_database(&self, prefix: &str) -> Result<String> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{prefix}_{}_{n}", std::process::id());
        self.create_database(&name)?;
        Ok(name)
    }

    /// Creates a login role with `password` that must authenticate with SCRAM-SHA-256.
    pub fn create_role_with_password(&self, name: &str, password: &str) -> Result<()> {
        self.create_role(name, password, PasswordMethod::Scram)
    }

    /// Creates a login role with `password` that must authenticate with `method` (it may
    /// connect to every database, and owns nothing).
    pub fn create_role(&self, name: &str, password: &str, method: PasswordMethod) -> Result<()> {
        let encryption = match method {
            PasswordMethod::Md5 => "md5",
            PasswordMethod::Scram | PasswordMethod::Cleartext => "scram-sha-256",
        };
        let literal = quote_literal(password).map_err(|source| ClusterError::Client {
            what: "quote the password".into(),
            source,
        })?;
        self.admin(
            &format!(
                "SET password_encryption = '{encryption}'; \
                 CREATE ROLE {} LOGIN PASSWORD {literal} IN ROLE {}",
                ident(name)?,
                method.group()
            ),
            "create a role",
        )
    }

    /// The last `lines` lines of the server log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(
            &fs::read_to_string(self.dir.join("server.log")).unwrap_or_default(),
            lines,
        )
    }

    fn admin(&self, sql: &str, what: &str) -> Result<()> {
        let mut client = self.connect("postgres")?;
        client.batch(sql).map_err(|source| ClusterError::Client {
            what: what.to_string(),
            source,
        })
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn init_and_start(&mut self, opts: &TestClusterBuilder) -> Result<()> {
        if opts.tcp {
            // A free port now; another process could take it before the server does, which
            // makes `pg_ctl start` fail with the log saying so.
            let listener = std::net::TcpListener::bind("127.0.0.1:0")
                .map_err(io_err("cannot find a free TCP port on 127.0.0.1"))?;
            self.port = listener
                .local_addr()
                .map_err(io_err("cannot find a free TCP port on 127.0.0.1"))?
                .port();
        }
        let socket = self.dir.join(format!(".s.PGSQL.{}", self.port));
        if socket.as_os_str().len() >= 108 {
            return Err(ClusterError::Setup(format!(
                "the socket path {} is too long for a Unix socket (108 bytes); pick a shorter \
                 base_dir",
                socket.display()
            )));
        }
        let data = self.data();
        let initdb = self.bin.join("initdb");
        let out = self.run(
            &initdb,
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                SUPERUSER.as_ref(),
                "--auth=trust".as_ref(),
                "--encoding=UTF8".as_ref(),
                "--locale=C".as_ref(),
                "--no-sync".as_ref(),
            ],
        )?;
        check(&out, "initdb", "")?;

        let mut conf = String::from("\n# kanban-pgwire test cluster\n");
        let mut settings: Vec<(String, String)> = vec![
            (
                "listen_addresses".into(),
                if opts.tcp {
                    "127.0.0.1".into()
                } else {
                    String::new()
                },
            ),
            (
                "unix_socket_directories".into(),
                self.dir.to_string_lossy().into_owned(),
            ),
            ("port".into(), self.port.to_string()),
        ];
        if let Some((cert, key)) = &opts.tls {
            for (name, text, setting) in [
                ("server.crt", cert, "ssl_cert_file"),
                ("server.key", key, "ssl_key_file"),
            ] {
                let path = data.join(name);
                let write = || -> std::io::Result<()> {
                    fs::write(&path, text)?;
                    fs::set_permissions(&path, fs::Permissions::from_mode(0o600))?;
                    if let Some((uid, gid)) = self.runner.owner() {
                        std::os::unix::fs::chown(&path, Some(uid), Some(gid))?;
                    }
                    Ok(())
                };
                write().map_err(io_err(format!("cannot write {}", path.display())))?;
                settings.push((setting.into(), path.to_string_lossy().into_owned()));
            }
            settings.push(("ssl".into(), "on".into()));
        }
        if !opts.fsync {
            for name in ["fsync", "synchronous_commit", "full_page_writes"] {
                settings.push((name.into(), "off".into()));
            }
        }
        settings.extend(opts.settings.iter().cloned());
        for (name, value) in settings {
            conf.push_str(&format!("{name} = '{}'\n", value.replace('\'', "''")));
        }
        let conf_path = data.join("postgresql.conf");
        OpenOptions::new()
            .append(true)
            .open(&conf_path)
            .and_then(|mut f| f.write_all(conf.as_bytes()))
            .map_err(io_err(format!("cannot append to {}", conf_path.display())))?;
        let mut hba = String::from("# kanban-pgwire test cluster\n");
        let kinds: &[&str] = if opts.tcp {
            &["local", "host"]
        } else {
            &["local"]
        };
        for kind in kinds {
            let from = if *kind == "host" { " 127.0.0.1/32" } else { "" };
            for (who, method) in [
                ("+pgwire_scram", "scram-sha-256"),
                ("+pgwire_md5", "md5"),
                ("+pgwire_password", "password"),
                ("all", "trust"),
            ] {
                hba.push_str(&format!("{kind} all {who}{from} {method}\n"));
            }
        }
        let hba_path = data.join("pg_hba.conf");
        fs::write(&hba_path, hba)
            .map_err(io_err(format!("cannot write {}", hba_path.display())))?;

        self.spawn_watcher()?;
        let log = self.dir.join("server.log");
        let pg_ctl = self.bin.join("pg_ctl");
        let out = self.run(
            &pg_ctl,
            &[
                "start".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-w".as_ref(),
                "-t".as_ref(),
                "120".as_ref(),
            ],
        )?;
        self.running = true;
        check(&out, "pg_ctl start", &self.log_tail(20))?;
        self.admin(
            "CREATE ROLE pgwire_scram NOLOGIN; CREATE ROLE pgwire_md5 NOLOGIN; \
             CREATE ROLE pgwire_password NOLOGIN",
            "create the password group roles",
        )
    }

    /// Runs a server program as the cluster's user, with a clean environment (no `PG*`
    /// variable of ours reaches it), and collects its output.
    #[allow(
        clippy::disallowed_methods,
        reason = "the test harness drives initdb and pg_ctl as child processes"
    )]
    fn run(&self, program: &Path, args: &[&std::ffi::OsStr]) -> Result<Output> {
        let mut cmd = self.runner.command(program);
        cmd.args(args)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("LC_ALL", "C")
            .env("TZ", "UTC")
            .current_dir(&self.dir)
            .stdin(Stdio::null());
        cmd.output().map_err(|source| ClusterError::Spawn {
            program: program.display().to_string(),
            source,
        })
    }

    /// Starts `sh`, which waits for this process's end of a pipe to close and then stops the
    /// server and removes the directory. It runs in its own process group, so a Ctrl-C to the
    /// test run does not stop it before it has cleaned up.
    #[allow(
        clippy::disallowed_methods,
        reason = "the test harness starts its cleanup watcher as a child process"
    )]
    fn spawn_watcher(&mut self) -> Result<()> {
        let script = r#"d=$1; shift; read -r _; "$@" >/dev/null 2>&1; rm -rf -- "$d""#;
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(script).arg("sh").arg(&self.dir);
        cmd.args(self.runner.prefix());
        cmd.arg(self.bin.join("pg_ctl"))
            .args(["stop", "-D"])
            .arg(self.data())
            .args(["-m", "immediate", "-w"])
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let mut child = cmd.spawn().map_err(|source| ClusterError::Spawn {
            program: "/bin/sh (the cluster's cleanup watcher)".into(),
            source,
        })?;
        let Some(stdin) = child.stdin.take() else {
            return Err(ClusterError::Setup("the watcher has no stdin pipe".into()));
        };
        self.watcher = Some((child, stdin));
        Ok(())
    }

    fn stop(&mut self) {
        if let Some((mut child, stdin)) = self.watcher.take() {
            // Our own child, by its handle: it must not clean up behind our back now.
            let _ = child.kill();
            let _ = child.wait();
            drop(stdin);
        }
        if self.running {
            let data = self.data();
            let pg_ctl = self.bin.join("pg_ctl");
            for mode in ["fast", "immediate"] {
                let args: [&std::ffi::OsStr; 8] = [
                    "stop".as_ref(),
                    "-D".as_ref(),
                    data.as_os_str(),
                    "-m".as_ref(),
                    mode.as_ref(),
                    "-w".as_ref(),
                    "-t".as_ref(),
                    "60".as_ref(),
                ];
                if self.run(&pg_ctl, &args).is_ok_and(|o| o.status.success()) {
                    break;
                }
            }
            self.running = false;
        }
        if let Err(e) = fs::remove_dir_all(&self.dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!("test cluster: cannot remove {}: {e}", self.dir.display());
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Who runs the server: this user, or `nobody` when this process is root.
#[derive(Debug, Clone)]
enum Runner {
    CurrentUser,
    /// Through `setpriv --reuid --regid --clear-groups`.
    Setpriv {
        setpriv: PathBuf,
        uid: u32,
        gid: u32,
    },
    /// Through `runuser -u nobody --`.
    Runuser {
        runuser: PathBuf,
        uid: u32,
        gid: u32,
    },
}

impl Runner {
    fn detect() -> Result<Runner> {
        if !rustix::process::geteuid().is_root() {
            return Ok(Runner::CurrentUser);
        }
        let passwd =
            fs::read_to_string("/etc/passwd").map_err(io_err("cannot read /etc/passwd"))?;
        let (uid, gid) = passwd
            .lines()
            .find_map(|line| {
                let f: Vec<&str> = line.split(':').collect();
                (f.len() > 3 && f[0] == "nobody")
                    .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
                    .flatten()
            })
            .ok_or_else(|| {
                ClusterError::Setup(
                    "running as root, and there is no user `nobody` to run the PostgreSQL \
                     server as (it refuses root)"
                        .into(),
                )
            })?;
        if let Some(setpriv) = find_program("setpriv") {
            return Ok(Runner::Setpriv { setpriv, uid, gid });
        }
        if let Some(runuser) = find_program("runuser") {
            return Ok(Runner::Runuser { runuser, uid, gid });
        }
        Err(ClusterError::Setup(
            "running as root without setpriv or runuser (util-linux): cannot start the \
             PostgreSQL server as `nobody`"
                .into(),
        ))
    }

    fn owner(&self) -> Option<(u32, u32)> {
        match self {
            Runner::CurrentUser => None,
            Runner::Setpriv { uid, gid, .. } | Runner::Runuser { uid, gid, .. } => {
                Some((*uid, *gid))
            }
        }
    }

    /// The words run before the program.
    fn prefix(&self) -> Vec<std::ffi::OsString> {
        match self {
            Runner::CurrentUser => Vec::new(),
            Runner::Setpriv { setpriv, uid, gid } => vec![
                setpriv.into(),
                format!("--reuid={uid}").into(),
                format!("--regid={gid}").into(),
                "--clear-groups".into(),
            ],
            Runner::Runuser { runuser, .. } => {
                vec![runuser.into(), "-u".into(), "nobody".into(), "--".into()]
            }
        }
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "the test harness drives the server's programs as child processes"
    )]
    fn command(&self, program: &Path) -> Command {
        let prefix = self.prefix();
        match prefix.split_first() {
            None => Command::new(program),
            Some((first, rest)) => {
                let mut cmd = Command::new(first);
                cmd.args(rest).arg(program);
                cmd
            }
        }
    }
}

/// Creates `<base>/kanban-pg-<pid>-<n>`, owned by the cluster's user, mode `0711`: others can
/// reach the socket by its name but not list the folder (the data directory inside stays `0700`,
/// as the server demands). A client in a user namespace whose root is the real root (`unshare
/// --user --map-root-user` run as root) has no capability over `nobody`'s files, so a `0700`
/// folder would hide the socket from it.
fn make_dir(base: &Path, runner: &Runner) -> Result<PathBuf> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    for _ in 0..100 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("kanban-pg-{}-{n}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => {
                let setup = || -> std::io::Result<()> {
                    fs::set_permissions(&dir, fs::Permissions::from_mode(0o711))?;
                    if let Some((uid, gid)) = runner.owner() {
                        std::os::unix::fs::chown(&dir, Some(uid), Some(gid))?;
                    }
                    Ok(())
                };
                if let Err(e) = setup() {
                    let _ = fs::remove_dir_all(&dir);
                    return Err(io_err(format!("cannot prepare {}", dir.display()))(e));
                }
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(io_err(format!(
                    "cannot create a directory in {}",
                    base.display()
                ))(e));
            }
        }
    }
    Err(ClusterError::Setup(format!(
        "cannot find a free directory name in {}",
        base.display()
    )))
}

/// The folder holding `initdb`, `pg_ctl` and `postgres`: the newest version under the search
/// root, else the first `PATH` directory that has `initdb` (followed through symlinks).
fn find_bin_dir(opts: &TestClusterBuilder) -> Option<PathBuf> {
    let complete = |dir: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|p| dir.join(p).is_file())
    };
    let mut versions: Vec<(Vec<u32>, PathBuf)> = fs::read_dir(&opts.search_root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version: Vec<u32> = name
                .split('.')
                .map(|p| p.parse().ok())
                .collect::<Option<_>>()?;
            let bin = entry.path().join("bin");
            complete(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    if !opts.use_path {
        return None;
    }
    let initdb = find_program("initdb")?;
    let bin = fs::canonicalize(&initdb).ok()?.parent()?.to_path_buf();
    complete(&bin).then_some(bin)
}

/// `name` in a directory of `PATH`, or in `/usr/bin`/`/usr/sbin`/`/bin`/`/sbin`.
#[allow(
    clippy::disallowed_methods,
    reason = "the test harness looks for server programs on PATH, like a shell"
)]
fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/bin", "/usr/sbin", "/bin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn find_or_install(opts: &TestClusterBuilder) -> Result<PathBuf> {
    if let Some(bin) = find_bin_dir(opts) {
        return Ok(bin);
    }
    let searched = opts.search_root.display().to_string();
    if !rustix::process::geteuid().is_root() {
        return Err(ClusterError::NotFound {
            searched,
            hint: "install the server (Debian/Ubuntu: `apt-get install postgresql`), or run the \
                   tests as root to have it installed"
                .into(),
        });
    }
    if !opts.install {
        return Err(ClusterError::NotFound {
            searched,
            hint: "installing it was turned off for this cluster".into(),
        });
    }
    install_postgresql()?;
    find_bin_dir(opts).ok_or_else(|| ClusterError::NotFound {
        searched,
        hint: "apt-get installed the `postgresql` package, yet the binaries are still not \
               there"
            .into(),
    })
}

/// `apt-get install -y --no-install-recommends postgresql`, one test process at a time; the
/// package lists are refreshed (`apt-get update`) only when the first attempt fails.
fn install_postgresql() -> Result<()> {
    let lock_path = std::env::temp_dir().join("kanban-pgwire-install.lock");
    let lock =
        File::create(&lock_path).map_err(io_err(format!("cannot open {}", lock_path.display())))?;
    lock.lock()
        .map_err(io_err(format!("cannot lock {}", lock_path.display())))?;
    // Another process may have installed it while we waited: apt-get then does nothing.
    eprintln!("test cluster: installing PostgreSQL with apt-get (running as root)");
    let first = apt_get(&["install", "-y", "--no-install-recommends", "postgresql"])?;
    if first.status.success() {
        return Ok(());
    }
    let update = apt_get(&["update"])?;
    check(&update, "apt-get update", "")?;
    let second = apt_get(&["install", "-y", "--no-install-recommends", "postgresql"])?;
    check(
        &second,
        "apt-get install -y --no-install-recommends postgresql",
        "",
    )
    // The lock is released when `lock` is dropped.
}

#[allow(
    clippy::disallowed_methods,
    reason = "the test harness installs the server with apt-get as a child process"
)]
fn apt_get(args: &[&str]) -> Result<Output> {
    let apt = find_program("apt-get").ok_or_else(|| ClusterError::NotFound {
        searched: DEBIAN_ROOT.into(),
        hint: "there is no apt-get to install it with: install the PostgreSQL server \
               (initdb, pg_ctl, postgres) and put it on PATH"
            .into(),
    })?;
    Command::new(&apt)
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| ClusterError::Spawn {
            program: apt.display().to_string(),
            source,
        })
}

fn check(out: &Output, what: &str, extra: &str) -> Result<()> {
    if out.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    let mut output = tail(&text, 20);
    if !extra.is_empty() {
        output.push_str("\n-- server log --\n");
        output.push_str(extra);
    }
    Err(ClusterError::Command {
        what: what.to_string(),
        status: out.status.to_string(),
        output,
    })
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn ident(name: &str) -> Result<String> {
    quote_identifier(name).map_err(|source| ClusterError::Client {
        what: "quote a name".into(),
        source,
    })
}

/// An error and its sources on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_finder_picks_the_newest_complete_version() {
        let root = std::env::temp_dir().join(format!("pgwire-finder-{}", std::process::id()));
        for (version, complete) in [
            ("9.6", true),
            ("15", true),
            ("16", false),
            ("notaversion", true),
        ] {
            let bin = root.join(version).join("bin");
            fs::create_dir_all(&bin).unwrap();
            let programs: &[&str] = if complete {
                &["initdb", "pg_ctl", "postgres"]
            } else {
                &["initdb"]
            };
            for p in programs {
                fs::write(bin.join(p), "").unwrap();
            }
        }
        let opts = TestCluster::builder().search_root(&root).use_path(false);
        assert_eq!(find_bin_dir(&opts), Some(root.join("15").join("bin")));
        let empty = TestCluster::builder()
            .search_root(root.join("none"))
            .use_path(false);
        assert_eq!(find_bin_dir(&empty), None);
        fs::remove_dir_all(&root).unwrap();
    }
}
