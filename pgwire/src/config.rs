//! Connection settings: `postgres://` URLs, the password (set by the caller or looked up in a
//! libpq password file), and a redacted URL for logs.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};

/// The Unix-socket directory used when a URL names no host (Debian's and Ubuntu's default,
/// where the distribution's server puts its socket).
pub const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";

/// The default port (also names the Unix socket `<dir>/.s.PGSQL.<port>`).
pub const DEFAULT_PORT: u16 = 5432;

/// How long a connection waits for each answer of the server when the URL sets no
/// `read_timeout`: a server that stops answering (a half-open connection keepalive has not yet
/// found dead, a server stuck) fails the call instead of stalling it. Waiting for a
/// notification is bounded by its own timeout instead.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(120);

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A TCP host name or IP address.
    Tcp(String),
    /// A directory holding the server's Unix socket `.s.PGSQL.<port>`.
    Unix(PathBuf),
}

/// The URL's `sslmode`, libpq's values and default. TLS applies to TCP connections; a Unix
/// socket never reaches the network and ignores it, as libpq does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SslMode {
    /// `disable`: plaintext only.
    Disable,
    /// `allow`: plaintext first; TLS only when the server refuses the plaintext connection.
    Allow,
    /// `prefer` (libpq's default): TLS when the server offers it, else plaintext. The server's
    /// certificate is not checked (as in libpq), unless `sslrootcert` is given.
    #[default]
    Prefer,
    /// `require`: TLS or no connection. The certificate is not checked unless `sslrootcert`
    /// is given, which makes it `verify-ca` (as in libpq).
    Require,
    /// `verify-ca`: TLS with a certificate signed by a trusted authority (`sslrootcert`, else
    /// the Mozilla roots built in), for any host name.
    VerifyCa,
    /// `verify-full`: `verify-ca`, and the certificate names the host connected to.
    VerifyFull,
}

impl SslMode {
    /// Every value, in libpq's order.
    pub const VALUES: [&'static str; 6] = [
        "disable",
        "allow",
        "prefer",
        "require",
        "verify-ca",
        "verify-full",
    ];

    fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

impl std::fmt::Display for SslMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SslMode {
    type Err = Error;
    fn from_str(v: &str) -> Result<SslMode> {
        match v {
            "disable" => Ok(SslMode::Disable),
            "allow" => Ok(SslMode::Allow),
            "prefer" => Ok(SslMode::Prefer),
            "require" => Ok(SslMode::Require),
            "verify-ca" => Ok(SslMode::VerifyCa),
            "verify-full" => Ok(SslMode::VerifyFull),
            other => Err(bad(format!(
                "unknown sslmode `{other}` (one of: {})",
                SslMode::VALUES.join(", ")
            ))),
        }
    }
}

/// The URL's `channel_binding`, libpq's values and default: whether SCRAM binds the login to
/// the TLS channel (`SCRAM-SHA-256-PLUS`, `tls-server-end-point`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChannelBinding {
    /// `disable`: never bind (SCRAM-SHA-256 with the `n` flag, even over TLS).
    Disable,
    /// `prefer` (libpq's default): bind over TLS when the server offers it.
    #[default]
    Prefer,
    /// `require`: the login must be channel-bound; a connection without TLS, a server that does
    /// not offer `SCRAM-SHA-256-PLUS`, or one that lets the client in without SCRAM (`trust`,
    /// `md5`, `password`) is refused.
    Require,
}

impl ChannelBinding {
    /// Every value, in libpq's order.
    pub const VALUES: [&'static str; 3] = ["disable", "prefer", "require"];

    fn as_str(self) -> &'static str {
        match self {
            ChannelBinding::Disable => "disable",
            ChannelBinding::Prefer => "prefer",
            ChannelBinding::Require => "require",
        }
    }
}

impl std::fmt::Display for ChannelBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ChannelBinding {
    type Err = Error;
    fn from_str(v: &str) -> Result<ChannelBinding> {
        match v {
            "disable" => Ok(ChannelBinding::Disable),
            "prefer" => Ok(ChannelBinding::Prefer),
            "require" => Ok(ChannelBinding::Require),
            other => Err(bad(format!(
                "unknown channel_binding `{other}` (one of: {})",
                ChannelBinding::VALUES.join(", ")
            ))),
        }
    }
}

/// Connection settings. `Display` is the [`Config::redacted`] URL and `Debug` hides the
/// password, so a `Config` may be logged.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    user: String,
    password: Option<String>,
    host: Host,
    port: u16,
    dbname: String,
    application_name: Option<String>,
    connect_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    ssl_mode: SslMode,
    ssl_root_cert: Option<PathBuf>,
    ssl_cert: Option<PathBuf>,
    ssl_key: Option<PathBuf>,
    channel_binding: ChannelBinding,
    allow_weak_auth: bool,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::Config(msg.into())
}

impl Config {
    /// Parses `postgres://[user[:password]@][host][:port][/dbname][?param=value&…]` (or
    /// `postgresql://`). Components are percent-decoded; a host that decodes to an absolute
    /// path (`%2Ftmp%2Fpg`) is a Unix-socket directory. Parameters: `host`, `port`, `user`,
    /// `password`, `dbname`, `sslmode` (see [`SslMode`]), `sslrootcert` (a PEM file of trusted authorities, or
    /// `system` for the built-in Mozilla roots), `sslcert` and `sslkey` (a client certificate
    /// and its key, PEM), `channel_binding` (see [`ChannelBinding`]),
    /// `application_name`, `connect_timeout` (whole seconds, 0 = none), `read_timeout` (whole
    /// seconds, 0 = none, default [`DEFAULT_READ_TIMEOUT`]), `allow_weak_auth`
    /// (`true`/`false`, default `false`: whether a TCP connection may answer a server that asks
    /// for the cleartext `password` or `md5` method; see [`Config::allow_weak_auth`]). Without a host the
    /// socket directory is [`DEFAULT_SOCKET_DIR`]; the database defaults to the user name. A user
    /// is required (the library does not guess the operating-system user).
    ///
    /// Errors never quote the password.
    pub fn parse(url: &str) -> Result<Config> {
        let rest = url
            .strip_prefix("postgresql://")
            .or_else(|| url.strip_prefix("postgres://"))
            .ok_or_else(|| bad("the URL must start with postgres:// or postgresql://"))?;
        if rest.contains('#') {
            return Err(bad("the URL must not contain a fragment (`#`)"));
        }
        let (main, query) = match rest.split_once('?') {
            Some((m, q)) => (m, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match main.find('/') {
            Some(i) => (&main[..i], &main[i + 1..]),
            None => (main, ""),
        };
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        let mut user = None;
        let mut password = None;
        if let Some(info) = userinfo {
            let (u, p) = match info.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (info, None),
            };
            let u = decode(u).map_err(|()| bad("the user name has an invalid percent-encoding"))?;
            if !u.is_empty() {
                user = Some(u);
            }
            if let Some(p) = p {
                password = Some(
                    decode(p).map_err(|()| bad("the password has an invalid percent-encoding"))?,
                );
            }
        }
        let (host, port) = split_host_port(hostport)?;
        let mut host = match host {
            Some(h) => Some(host_from(&h)?),
            None => None,
        };
        let mut port = port;
        let mut dbname = if path.is_empty() {
            None
        } else {
            Some(
                decode(path)
                    .map_err(|()| bad("the database name has an invalid percent-encoding"))?,
            )
        };
        let mut ssl_mode = SslMode::default();
        let mut application_name = None;
        let mut connect_timeout = None;
        let mut read_timeout = Some(DEFAULT_READ_TIMEOUT);
        let mut ssl_root_cert = None;
        let mut ssl_cert = None;
        let mut ssl_key = None;
        let mut channel_binding = ChannelBinding::default();
        let mut allow_weak_auth = false;
        if let Some(query) = query {
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                let (k, v) = pair
                    .split_once('=')
                    .ok_or_else(|| bad(format!("the URL parameter `{pair}` has no `=value`")))?;
                let key = decode(k)
                    .map_err(|()| bad("a URL parameter name has an invalid percent-encoding"))?;
                let value = decode(v).map_err(|()| {
                    bad(format!(
                        "the URL parameter `{key}` has an invalid percent-encoding"
                    ))
                })?;
                match key.as_str() {
                    "host" => host = Some(host_from(&value)?),
                    "port" => port = Some(parse_port(&value)?),
                    "user" => user = Some(value),
                    "password" => password = Some(value),
                    "dbname" => dbname = Some(value),
                    "sslmode" => ssl_mode = value.parse()?,
                    "channel_binding" => channel_binding = value.parse()?,
                    "sslrootcert" => ssl_root_cert = Some(path_param("sslrootcert", value)?),
                    "sslcert" => ssl_cert = Some(path_param("sslcert", value)?),
                    "sslkey" => ssl_key = Some(path_param("sslkey", value)?),
                    "application_name" => application_name = Some(value),
                    "connect_timeout" => {
                        connect_timeout = parse_seconds("connect_timeout", &value)?
                    }
                    "read_timeout" => read_timeout = parse_seconds("read_timeout", &value)?,
                    "allow_weak_auth" => {
                        allow_weak_auth = match value.as_str() {
                            "true" => true,
                            "false" => false,
                            _ => {
                                return Err(bad(format!(
                                    "allow_weak_auth must be `true` or `false`, not `{value}`"
                                )));
                            }
                        }
                    }
                    other => {
                        return Err(bad(format!(
                            "unknown URL parameter `{other}` (supported: host, port, user, password, \
                             dbname, sslmode, sslrootcert, sslcert, sslkey, channel_binding, \
                             application_name, \
                             connect_timeout, read_timeout, allow_weak_auth)"
                        )));
                    }
                }
            }
        }
        if ssl_cert.is_some() != ssl_key.is_some() {
            return Err(bad(
                "sslcert and sslkey go together: give both (the client certificate and its key) \
                 or neither",
            ));
        }
        if channel_binding == ChannelBinding::Require && ssl_mode == SslMode::Disable {
            return Err(bad(
                "channel_binding=require needs TLS, which sslmode=disable turns off",
            ));
        }
        let user = user
            .filter(|u| !u.is_empty())
            .ok_or_else(|| bad("the URL names no user: write postgres://USER@HOST/DB"))?;
        for (what, value) in [
            ("user name", Some(&user)),
            ("database name", dbname.as_ref()),
        ] {
            if value.is_some_and(|v| v.contains('\0')) {
                return Err(bad(format!("the {what} contains a NUL byte")));
            }
        }
        if password.as_ref().is_some_and(|p| p.contains('\0')) {
            return Err(bad("the password contains a NUL byte"));
        }
        Ok(Config {
            dbname: dbname
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| user.clone()),
            user,
            password,
            host: host.unwrap_or_else(|| Host::Unix(PathBuf::from(DEFAULT_SOCKET_DIR))),
            port: port.unwrap_or(DEFAULT_PORT),
            application_name,
            connect_timeout,
            read_timeout,
            ssl_mode,
            ssl_root_cert,
            ssl_cert,
            ssl_key,
            channel_binding,
            allow_weak_auth,
        })
    }

    /// The user name.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Where the server listens.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The port (for a Unix socket it names the socket file).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The database.
    pub fn dbname(&self) -> &str {
        &self.dbname
    }

    /// The `application_name` sent at startup (shown in `pg_stat_activity`).
    pub fn application_name(&self) -> Option<&str> {
        self.application_name.as_deref()
    }

    /// The connect timeout, `None` for none.
    pub fn connect_timeout(&self) -> Option<Duration> {
        self.connect_timeout
    }

    /// The `sslmode`.
    pub fn ssl_mode(&self) -> SslMode {
        self.ssl_mode
    }

    /// The `sslrootcert` file (`None` when not given; `Some("system")` names the built-in
    /// roots).
    pub fn ssl_root_cert(&self) -> Option<&Path> {
        self.ssl_root_cert.as_deref()
    }

    /// The client certificate and its key (`sslcert`, `sslkey`), when given.
    pub fn ssl_client_cert(&self) -> Option<(&Path, &Path)> {
        self.ssl_cert.as_deref().zip(self.ssl_key.as_deref())
    }

    /// The `channel_binding`.
    pub fn channel_binding(&self) -> ChannelBinding {
        self.channel_binding
    }

    /// Sets `channel_binding`.
    pub fn set_channel_binding(&mut self, binding: ChannelBinding) -> &mut Self {
        self.channel_binding = binding;
        self
    }

    /// Sets `sslmode`.
    pub fn set_ssl_mode(&mut self, mode: SslMode) -> &mut Self {
        self.ssl_mode = mode;
        self
    }

    /// Sets `sslrootcert`.
    pub fn set_ssl_root_cert(&mut self, path: Option<PathBuf>) -> &mut Self {
        self.ssl_root_cert = path;
        self
    }

    /// Sets `sslcert` and `sslkey` together.
    pub fn set_ssl_client_cert(&mut self, cert_and_key: Option<(PathBuf, PathBuf)>) -> &mut Self {
        (self.ssl_cert, self.ssl_key) = cert_and_key.unzip();
        self
    }

    /// Whether a TCP connection may answer a server that asks for the cleartext `password`
    /// method (the password crosses the network as it is) or `md5` (a hash an eavesdropper can
    /// replay or attack offline, and that a spoofed server can collect). `false` unless the URL
    /// says `allow_weak_auth=true`: such a request is then refused before anything is sent. A
    /// Unix-socket connection never reaches the network and always answers them.
    pub fn allow_weak_auth(&self) -> bool {
        self.allow_weak_auth
    }

    /// Sets [`Config::allow_weak_auth`].
    pub fn set_allow_weak_auth(&mut self, yes: bool) -> &mut Self {
        self.allow_weak_auth = yes;
        self
    }

    /// True when a password is set (the password itself is only handed to the server).
    pub fn has_password(&self) -> bool {
        self.password.is_some()
    }

    pub(crate) fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// Sets the password (e.g. from `PGPASSWORD`, which the caller reads).
    pub fn set_password(&mut self, password: impl Into<String>) -> &mut Self {
        self.password = Some(password.into());
        self
    }

    /// Sets `application_name`.
    pub fn set_application_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.application_name = Some(name.into());
        self
    }

    /// How long the connection waits for each answer of the server once connected (`None`:
    /// as long as it takes); [`DEFAULT_READ_TIMEOUT`] unless the URL sets `read_timeout`.
    pub fn read_timeout(&self) -> Option<Duration> {
        self.read_timeout
    }

    /// Sets [`Config::read_timeout`].
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) -> &mut Self {
        self.read_timeout = timeout;
        self
    }

    /// Sets the connect timeout (`None`: wait as long as the operating system does).
    pub fn set_connect_timeout(&mut self, timeout: Option<Duration>) -> &mut Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the database.
    pub fn set_dbname(&mut self, dbname: impl Into<String>) -> &mut Self {
        self.dbname = dbname.into();
        self
    }

    /// The path of the Unix socket, for a Unix-socket host.
    pub fn socket_path(&self) -> Option<PathBuf> {
        match &self.host {
            Host::Unix(dir) => Some(dir.join(format!(".s.PGSQL.{}", self.port))),
            Host::Tcp(_) => None,
        }
    }

    /// The URL without the password, for logs, events and `--json` output. Parsing it gives the
    /// same settings without the password.
    pub fn redacted(&self) -> String {
        let host = match &self.host {
            Host::Tcp(h) if h.contains(':') => format!("[{h}]"),
            Host::Tcp(h) => encode(h),
            Host::Unix(dir) => encode(&dir.to_string_lossy()),
        };
        let mut url = format!(
            "postgres://{}@{host}:{}/{}",
            encode(&self.user),
            self.port,
            encode(&self.dbname)
        );
        let mut params = Vec::new();
        if self.ssl_mode != SslMode::default() {
            params.push(format!("sslmode={}", self.ssl_mode.as_str()));
        }
        for (key, path) in [
            ("sslrootcert", &self.ssl_root_cert),
            ("sslcert", &self.ssl_cert),
            ("sslkey", &self.ssl_key),
        ] {
            if let Some(path) = path {
                params.push(format!("{key}={}", encode(&path.to_string_lossy())));
            }
        }
        if self.channel_binding != ChannelBinding::default() {
            params.push(format!("channel_binding={}", self.channel_binding.as_str()));
        }
        if let Some(name) = &self.application_name {
            params.push(format!("application_name={}", encode(name)));
        }
        if let Some(t) = self.connect_timeout {
            params.push(format!("connect_timeout={}", t.as_secs().max(1)));
        }
        if self.read_timeout != Some(DEFAULT_READ_TIMEOUT) {
            let secs = self.read_timeout.map_or(0, |t| t.as_secs().max(1));
            params.push(format!("read_timeout={secs}"));
        }
        if self.allow_weak_auth {
            params.push("allow_weak_auth=true".into());
        }
        if !params.is_empty() {
            url.push('?');
            url.push_str(&params.join("&"));
        }
        url
    }

    /// Looks the password up in a libpq password file (`~/.pgpass` format: lines of
    /// `host:port:database:user:password`, `*` matching anything, `\:` and `\\` escapes, `#`
    /// comments; the first matching line wins). A Unix-socket connection matches the host
    /// `localhost` or its socket directory. The caller passes the path (`PGPASSFILE` or
    /// `~/.pgpass`); a missing file is `Ok(None)`, like libpq. A file readable by group or others
    /// is refused with an error saying to `chmod 0600` it (libpq ignores such a file).
    pub fn password_from_passfile(&self, path: &Path) -> Result<Option<String>> {
        use std::os::unix::fs::PermissionsExt;
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(Error::io(
                    format!("cannot read the password file {}", path.display()),
                    e,
                ));
            }
        };
        if !meta.is_file() {
            return Err(bad(format!(
                "the password file {} is not a regular file",
                path.display()
            )));
        }
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(bad(format!(
                "the password file {} is accessible by group or others; run `chmod 0600 {}`",
                path.display(),
                path.display()
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::io(
                format!("cannot read the password file {}", path.display()),
                e,
            )
        })?;
        Ok(self.match_passfile(&text))
    }

    /// Like [`Config::password_from_passfile`], and sets the password when one is found and
    /// none is set yet. Returns whether the config now has a password.
    pub fn apply_passfile(&mut self, path: &Path) -> Result<bool> {
        if self.password.is_none() {
            self.password = self.password_from_passfile(path)?;
        }
        Ok(self.password.is_some())
    }

    /// Fills in the password the way libpq does, from values the caller read: a password
    /// already set (in the URL or by [`Config::set_password`]) wins; else `pgpassword` (the
    /// value of `PGPASSWORD`, ignored when empty); else the password file `passfile` (the value
    /// of `PGPASSFILE`), or `<home>/.pgpass` without one. Returns whether the config now has a
    /// password (none is fine for `trust`).
    pub fn resolve_password(
        &mut self,
        pgpassword: Option<&str>,
        passfile: Option<&Path>,
        home: Option<&Path>,
    ) -> Result<bool> {
        if self.password.as_deref().is_some_and(|p| !p.is_empty()) {
            return Ok(true);
        }
        if let Some(pw) = pgpassword.filter(|p| !p.is_empty()) {
            self.password = Some(pw.to_string());
            return Ok(true);
        }
        let file = match (passfile, home) {
            (Some(f), _) => f.to_path_buf(),
            (None, Some(home)) => home.join(".pgpass"),
            (None, None) => return Ok(false),
        };
        self.password = self.password_from_passfile(&file)?;
        Ok(self.password.is_some())
    }

    fn match_passfile(&self, text: &str) -> Option<String> {
        let port = self.port.to_string();
        let hosts: Vec<String> = match &self.host {
            Host::Tcp(h) => vec![h.clone()],
            Host::Unix(dir) => vec!["localhost".into(), dir.to_string_lossy().into_owned()],
        };
        for line in text.lines() {
            let line = line.trim_end_matches('\r');
            if line.trim_start().starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let fields = split_passfile_line(line);
            let [host, p, db, user, password] = fields.as_slice() else {
                continue;
            };
            let matches = |field: &str, value: &str| field == "*" || field == value;
            if (host == "*" || hosts.iter().any(|h| h == host))
                && matches(p, &port)
                && matches(db, &self.dbname)
                && matches(user, &self.user)
            {
                return Some(password.clone());
            }
        }
        None
    }
}

/// Splits a password-file line into its five fields, unescaping `\x` (the fifth field is the
/// rest of the line, colons included).
fn split_passfile_line(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next()
                    && let Some(f) = fields.last_mut()
                {
                    f.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(f) = fields.last_mut() {
                    f.push(c);
                }
            }
        }
    }
    fields
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("host", &self.host)
            .field("port", &self.port)
            .field("dbname", &self.dbname)
            .field("application_name", &self.application_name)
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("allow_weak_auth", &self.allow_weak_auth)
            .field("ssl_mode", &self.ssl_mode)
            .field("ssl_root_cert", &self.ssl_root_cert)
            .field("ssl_cert", &self.ssl_cert)
            .field("ssl_key", &self.ssl_key)
            .field("channel_binding", &self.channel_binding)
            .finish()
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl std::str::FromStr for Config {
    type Err = Error;
    fn from_str(s: &str) -> Result<Config> {
        Config::parse(s)
    }
}

/// The names of the parameters the query string of `url` sets, percent-decoded, in order: what
/// [`Config::parse`] reads them as. For a caller that layers settings of its own over a URL's
/// and must tell a parameter the URL gives from a default.
pub fn url_parameter_names(url: &str) -> Result<Vec<String>> {
    let Some((_, query)) = url.split_once('?') else {
        return Ok(Vec::new());
    };
    let query = query.split_once('#').map_or(query, |(q, _)| q);
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            decode(pair.split_once('=').map_or(pair, |(k, _)| k))
                .map_err(|()| bad("a URL parameter name has an invalid percent-encoding"))
        })
        .collect()
}

fn split_host_port(hostport: &str) -> Result<(Option<String>, Option<u16>)> {
    if hostport.contains(',') {
        return Err(bad("several hosts in one URL are not supported"));
    }
    let (host, port) = if let Some(rest) = hostport.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| bad("an IPv6 host lacks its closing `]`"))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| bad(format!("unexpected `{p}` after the IPv6 host")))?,
            ),
        };
        (h.to_string(), port)
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (
                decode(h).map_err(|()| bad("the host has an invalid percent-encoding"))?,
                Some(p),
            ),
            None => (
                decode(hostport).map_err(|()| bad("the host has an invalid percent-encoding"))?,
                None,
            ),
        }
    };
    let port = match port {
        Some(p) => Some(parse_port(p)?),
        None => None,
    };
    Ok(((!host.is_empty()).then_some(host), port))
}

fn host_from(h: &str) -> Result<Host> {
    if h.is_empty() {
        return Err(bad("the host is empty"));
    }
    if h.contains('\0') {
        return Err(bad("the host contains a NUL byte"));
    }
    if h.starts_with('/') {
        Ok(Host::Unix(PathBuf::from(h)))
    } else if h.contains('/') {
        Err(bad(format!(
            "the host `{h}` is neither a host name nor an absolute socket directory"
        )))
    } else {
        Ok(Host::Tcp(h.to_string()))
    }
}

fn parse_port(p: &str) -> Result<u16> {
    p.parse::<u16>().ok().filter(|&n| n > 0).ok_or_else(|| {
        bad(format!(
            "the port must be a number from 1 to 65535, not `{p}`"
        ))
    })
}

/// A `connect_timeout` or `read_timeout` value: whole seconds, `0` for none.
fn parse_seconds(key: &str, value: &str) -> Result<Option<Duration>> {
    let secs: u64 = value.trim().parse().map_err(|_| {
        bad(format!(
            "{key} must be a whole number of seconds, not `{value}`"
        ))
    })?;
    Ok((secs > 0).then(|| Duration::from_secs(secs)))
}

/// A file named by a TLS parameter: non-empty.
fn path_param(key: &str, value: String) -> Result<PathBuf> {
    if value.is_empty() || value.contains('\0') {
        return Err(bad(format!("{key} must name a file")));
    }
    Ok(PathBuf::from(value))
}

/// What the URL writes as is: RFC 3986's unreserved characters; everything else is `%XX`.
const UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-decodes `s` (UTF-8 required; a `%` not followed by two hex digits is refused). `+` is
/// kept as is.
fn decode(s: &str) -> std::result::Result<String, ()> {
    let bytes = s.as_bytes();
    let well_formed = bytes.iter().enumerate().all(|(i, &b)| {
        b != b'%'
            || bytes
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
    });
    if !well_formed {
        return Err(());
    }
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map(std::borrow::Cow::into_owned)
        .map_err(|_| ())
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub(crate) fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, UNRESERVED).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_tcp_url_with_every_part() {
        let c = Config::parse(
            "postgresql://al%40ice:s3cr%3At@db.example.com:6543/kan%20ban?sslmode=disable&application_name=kanban%20d&connect_timeout=7",
        )
        .unwrap();
        assert_eq!(c.user(), "al@ice");
        assert_eq!(c.password(), Some("s3cr:t"));
        assert_eq!(c.host(), &Host::Tcp("db.example.com".into()));
        assert_eq!(c.port(), 6543);
        assert_eq!(c.dbname(), "kan ban");
        assert_eq!(c.ssl_mode(), SslMode::Disable);
        assert_eq!(c.application_name(), Some("kanban d"));
        assert_eq!(c.connect_timeout(), Some(Duration::from_secs(7)));
        assert!(
            !c.allow_weak_auth(),
            "weak authentication is off by default"
        );
        let c = Config::parse("postgres://u@h/db?allow_weak_auth=true").unwrap();
        assert!(c.allow_weak_auth());
        assert_eq!(
            Config::parse(&c.redacted()).unwrap(),
            c,
            "the redacted URL keeps the opt-in"
        );
    }

    #[test]
    fn channel_binding_takes_libpq_values_and_needs_tls_to_be_required() {
        let c = Config::parse("postgres://u@h/db").unwrap();
        assert_eq!(c.channel_binding(), ChannelBinding::Prefer);
        for value in ChannelBinding::VALUES {
            let c = Config::parse(&format!("postgres://u@h/db?channel_binding={value}")).unwrap();
            assert_eq!(c.channel_binding().to_string(), value);
            assert_eq!(Config::parse(&c.redacted()).unwrap(), c, "{value}");
        }
        let err = Config::parse("postgres://u@h/db?channel_binding=maybe").unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown channel_binding `maybe` (one of: disable, prefer, require)"),
            "{err}"
        );
        let err =
            Config::parse("postgres://u@h/db?channel_binding=require&sslmode=disable").unwrap_err();
        assert!(err.to_string().contains("needs TLS"), "{err}");
        assert!(Config::parse("postgres://u@h/db?channel_binding=disable&sslmode=disable").is_ok());
    }

    #[test]
    fn parameter_names_are_decoded_in_order() {
        assert_eq!(
            url_parameter_names("postgres://u@h/db?ssl%6Dode=require&connect_timeout=3&").unwrap(),
            ["sslmode", "connect_timeout"]
        );
        assert!(url_parameter_names("postgres://u@h/db").unwrap().is_empty());
        assert!(url_parameter_names("postgres://u@h/db?%zz=1").is_err());
    }

    #[test]
    fn defaults_port_database_and_socket_directory() {
        let c = Config::parse("postgres://kanban@").unwrap();
        assert_eq!(c.host(), &Host::Unix(DEFAULT_SOCKET_DIR.into()));
        assert_eq!(c.port(), 5432);
        assert_eq!(c.dbname(), "kanban");
        assert_eq!(c.ssl_mode(), SslMode::Prefer);
        assert!(!c.has_password());
        let c = Config::parse("postgres://kanban@localhost").unwrap();
        assert_eq!(c.host(), &Host::Tcp("localhost".into()));
        assert_eq!(c.port(), 5432);
    }

    #[test]
    fn a_malformed_percent_escape_is_refused_and_encoding_round_trips() {
        for bad in ["%", "%4", "%G1", "%+f", "%FF"] {
            assert_eq!(decode(bad), Err(()), "{bad}");
        }
        assert_eq!(decode("a+b%2F%C3%A9").as_deref(), Ok("a+b/é"));
        assert_eq!(encode("a b/é~-._"), "a%20b%2F%C3%A9~-._");
        assert!(Config::parse("postgres://us%+fer@localhost/db").is_err());
    }

    #[test]
    fn a_percent_encoded_absolute_host_is_a_socket_directory() {
        let c = Config::parse("postgres://user@%2Ftmp%2Fpg/db").unwrap();
        assert_eq!(c.host(), &Host::Unix("/tmp/pg".into()));
        assert_eq!(
            c.socket_path().unwrap(),
            PathBuf::from("/tmp/pg/.s.PGSQL.5432")
        );
        let c = Config::parse("postgres://user@/db?host=/run/pg&port=5433").unwrap();
        assert_eq!(c.host(), &Host::Unix("/run/pg".into()));
        assert_eq!(
            c.socket_path().unwrap(),
            PathBuf::from("/run/pg/.s.PGSQL.5433")
        );
        let c = Config::parse("postgres://[::1]:5999/db?user=u").unwrap();
        assert_eq!(c.host(), &Host::Tcp("::1".into()));
        assert_eq!(c.port(), 5999);
        assert_eq!(c.user(), "u");
    }

    #[test]
    fn bad_urls_get_a_clear_error_without_the_password() {
        let cases = [
            ("mysql://u:hunter2@h/db", "must start with postgres://"),
            ("postgres://u:hunter2@h:99999/db", "port must be a number"),
            ("postgres://u:hunter2@h:0/db", "port must be a number"),
            ("postgres://u:hunter2@h:abc/db", "port must be a number"),
            ("postgres://:hunter2@h/db", "names no user"),
            (
                "postgres://u:hunter2@h/db?sslcert=/c.pem",
                "sslcert and sslkey go together",
            ),
            ("postgres://u:hunter2@h/db?sslrootcert=", "must name a file"),
            ("postgres://u:hunter2@h/db?sslmode=maybe", "unknown sslmode"),
            (
                "postgres://u:hunter2@h/db?frobnicate=1",
                "unknown URL parameter `frobnicate`",
            ),
            ("postgres://u:hunter2@h/db?port", "has no `=value`"),
            (
                "postgres://u:hunter2@h/db?connect_timeout=soon",
                "connect_timeout",
            ),
            ("postgres://u:hunter2@a,b/db", "several hosts"),
            ("postgres://u:hunter2@[::1/db", "closing `]`"),
            (
                "postgres://u:hunt%zzer2@h/db",
                "password has an invalid percent-encoding",
            ),
            (
                "postgres://u%ff:hunter2@h/db",
                "user name has an invalid percent-encoding",
            ),
            ("postgres://u:hunter2@h/db#frag", "fragment"),
            (
                "postgres://u:hunter2@h/db?host=relative/dir",
                "neither a host name",
            ),
            ("postgres://u:hunter2@h/d%00b", "NUL"),
            (
                "postgres://u:hunter2@h/db?read_timeout=-1",
                "read_timeout must be a whole number of seconds",
            ),
            (
                "postgres://u:hunter2@h/db?allow_weak_auth=yes",
                "allow_weak_auth must be `true` or `false`",
            ),
        ];
        for (url, want) in cases {
            let err = Config::parse(url).expect_err(url);
            let text = format!("{err} {err:?}");
            assert!(text.contains(want), "{url}: `{text}` lacks `{want}`");
            assert!(
                !text.contains("hunter2") && !text.contains("hunt"),
                "{url}: {text}"
            );
        }
    }

    #[test]
    fn redacted_display_and_debug_never_show_the_password() {
        let mut c = Config::parse(
            "postgres://kanban:hunter2@%2Ftmp%2Fpg%20x:5433/board?application_name=k&connect_timeout=3&sslmode=disable",
        )
        .unwrap();
        c.set_password("other-secret");
        let red = c.redacted();
        assert_eq!(
            red,
            "postgres://kanban@%2Ftmp%2Fpg%20x:5433/board?sslmode=disable&application_name=k&connect_timeout=3"
        );
        for text in [red.clone(), c.to_string(), format!("{c:?}")] {
            assert!(
                !text.contains("other-secret") && !text.contains("hunter2"),
                "{text}"
            );
        }
        assert!(format!("{c:?}").contains("<redacted>"));
        let mut back = Config::parse(&red).unwrap();
        assert!(!back.has_password());
        back.set_password("other-secret");
        assert_eq!(back, c);
        let tcp = Config::parse("postgres://u:pw@[::1]:7/d").unwrap();
        assert_eq!(tcp.redacted(), "postgres://u@[::1]:7/d");
    }

    #[test]
    fn passfile_lines_match_with_wildcards_and_escapes() {
        let c = Config::parse("postgres://kan%3Aban@db.example:5432/board").unwrap();
        let text = "# comment\n\
                    other:5432:board:kan\\:ban:wrong-host\n\
                    db.example:5433:board:kan\\:ban:wrong-port\n\
                    short:line\n\
                    db.example:*:board:kan\\:ban:pa\\:ss:with:colons\n\
                    *:*:*:*:fallback\n";
        assert_eq!(c.match_passfile(text).as_deref(), Some("pa:ss:with:colons"));
        let other = Config::parse("postgres://someone@db.example/x").unwrap();
        assert_eq!(other.match_passfile(text).as_deref(), Some("fallback"));
        let sock = Config::parse("postgres://u@%2Frun%2Fpg/d").unwrap();
        assert_eq!(
            sock.match_passfile("localhost:5432:d:u:viasock\n")
                .as_deref(),
            Some("viasock")
        );
        assert_eq!(
            sock.match_passfile("/run/pg:5432:d:u:viadir\n").as_deref(),
            Some("viadir")
        );
        assert_eq!(sock.match_passfile("db.example:5432:d:u:no\n"), None);
    }

    #[test]
    fn resolve_password_follows_libpq_precedence() {
        use std::os::unix::fs::PermissionsExt;
        let home = std::env::temp_dir().join(format!("pgwire-home-{}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        let pgpass = home.join(".pgpass");
        std::fs::write(&pgpass, "*:*:*:*:from-home\n").unwrap();
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
        let other = home.join("other");
        std::fs::write(&other, "*:*:*:*:from-passfile\n").unwrap();
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();

        let resolved = |url: &str, env: Option<&str>, file: Option<&Path>, home: Option<&Path>| {
            let mut c = Config::parse(url).unwrap();
            let has = c.resolve_password(env, file, home).unwrap();
            assert_eq!(has, c.password().is_some());
            c.password().map(str::to_string)
        };
        let url = "postgres://u@h/d";
        let h = Some(home.as_path());
        assert_eq!(
            resolved("postgres://u:in-url@h/d", Some("env"), Some(&other), h).as_deref(),
            Some("in-url")
        );
        assert_eq!(
            resolved(url, Some("env"), Some(&other), h).as_deref(),
            Some("env")
        );
        assert_eq!(
            resolved(url, Some(""), Some(&other), h).as_deref(),
            Some("from-passfile")
        );
        assert_eq!(resolved(url, None, None, h).as_deref(), Some("from-home"));
        assert_eq!(resolved(url, None, Some(&home.join("missing")), h), None);
        assert_eq!(resolved(url, None, None, None), None);
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn passfile_missing_is_none_and_loose_permissions_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("pgwire-passfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Config::parse("postgres://u@h/d").unwrap();
        assert_eq!(
            c.password_from_passfile(&dir.join("missing")).unwrap(),
            None
        );
        let file = dir.join("pgpass");
        std::fs::write(&file, "h:5432:d:u:from-file\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = c.password_from_passfile(&file).unwrap_err().to_string();
        assert!(err.contains("chmod 0600"), "{err}");
        assert!(!err.contains("from-file"), "{err}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(c.apply_passfile(&file).unwrap());
        assert_eq!(c.password(), Some("from-file"));
        c.set_password("explicit");
        assert!(c.apply_passfile(&file).unwrap());
        assert_eq!(c.password(), Some("explicit"), "an explicit password wins");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
