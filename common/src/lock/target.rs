//! Where the lock server is: `REDIS_URL` read into a Redis client, with what managed
//! Redis services need beyond a plain URL.
//!
//! - `rediss://` is TLS. The certificate files ride in the URL's query, named as in a
//!   PostgreSQL URL: `sslrootcert` (the CA that signed the server's certificate, instead
//!   of the system's roots), `sslcert` and `sslkey` (a client certificate, for servers
//!   that ask for one). They are read when connecting, so a rotated certificate is picked
//!   up by the next connection.
//! - ACL users: `redis://user:password@host:port` (redis' own URL syntax).
//! - Sentinel: `redis+sentinel://[user:password@]host:port[,host:port…]/MASTER_NAME[/db]`
//!   names the sentinels (port 26379 when left out) and the master they watch; the
//!   credentials and the database are the master's. Sentinels that ask for a password of
//!   their own take `sentinel_username` and `sentinel_password` query parameters.
//!   `rediss+sentinel://` speaks TLS to the sentinels and the master alike, with the same
//!   certificate files. The master is looked up when connecting and again after a
//!   failover (see `link`).
//!
//! The query parameters are taken out before the URL reaches the redis crate, which
//! does not know them.

use std::fmt;
use std::path::{Path, PathBuf};

use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{ClientTlsConfig, ConnectionAddr, RedisError, TlsCertificates, TlsMode};

/// The TLS files named in a `rediss://` URL.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `sslrootcert`: the CA bundle (PEM) the server's certificate must chain to.
    pub root_cert: Option<PathBuf>,
    /// `sslcert`: the client certificate (PEM).
    pub client_cert: Option<PathBuf>,
    /// `sslkey`: the client certificate's private key (PEM).
    pub client_key: Option<PathBuf>,
}

/// A Redis URL taken apart: what the redis crate reads, and the TLS files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisTarget {
    /// The URL without probactr's query parameters.
    pub url: String,
    /// The certificate files of a `rediss://` URL.
    pub tls: TlsFiles,
    /// The sentinels of a `redis+sentinel://` URL; None for a URL naming one server.
    pub sentinel: Option<Sentinels>,
}

/// What a `redis+sentinel://` URL says.
#[derive(Clone, PartialEq, Eq)]
pub struct Sentinels {
    /// The sentinels' hosts and ports.
    pub nodes: Vec<(String, u16)>,
    /// The name under which the sentinels watch the master.
    pub master_name: String,
    /// The master's database number.
    pub db: i64,
    /// The master's ACL user.
    pub username: Option<String>,
    /// The master's password.
    pub password: Option<String>,
    /// `sentinel_username`: the sentinels' ACL user.
    pub sentinel_username: Option<String>,
    /// `sentinel_password`: the sentinels' password.
    pub sentinel_password: Option<String>,
    /// `rediss+sentinel://`: TLS to the sentinels and the master.
    pub tls: bool,
    /// `#insecure`: TLS without checking the host name.
    pub insecure: bool,
}

impl fmt::Debug for Sentinels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hidden = |secret: &Option<String>| secret.as_ref().map(|_| "***");
        f.debug_struct("Sentinels")
            .field("nodes", &self.nodes)
            .field("master_name", &self.master_name)
            .field("db", &self.db)
            .field("username", &self.username)
            .field("password", &hidden(&self.password))
            .field("sentinel_username", &self.sentinel_username)
            .field("sentinel_password", &hidden(&self.sentinel_password))
            .field("tls", &self.tls)
            .field("insecure", &self.insecure)
            .finish()
    }
}

/// How to reach the lock server: one address, or the master the sentinels name.
pub enum Server {
    /// A server at a fixed address.
    Direct(redis::Client),
    /// The master the sentinels name, looked up when connecting.
    Sentinel(SentinelClient),
}

/// Why a Redis URL cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// A TLS parameter on a URL that is not `rediss://`.
    #[error("{0} needs a rediss:// URL (TLS)")]
    NotTls(&'static str),
    /// `sslcert` without `sslkey`, or the reverse.
    #[error("sslcert and sslkey go together: a client certificate needs its key")]
    HalfClientCert,
    /// A Sentinel parameter on a URL that is not `redis+sentinel://`.
    #[error("{0} needs a redis+sentinel:// URL")]
    NotSentinel(&'static str),
    /// A `redis+sentinel://` URL that does not say what it must.
    #[error("redis+sentinel:// URL: {0} (redis+sentinel://[user:password@]host:port[,host:port...]/MASTER_NAME[/db])")]
    BadSentinelUrl(String),
    /// A certificate file could not be read.
    #[error("cannot read {param} {path}: {error}")]
    Unreadable {
        /// The URL parameter that named the file.
        param: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        error: std::io::Error,
    },
    /// The redis crate refused the URL or the certificates.
    #[error("redis: {0}")]
    Redis(#[from] RedisError),
}

/// The port of a sentinel named without one.
pub const SENTINEL_PORT: u16 = 26379;

const SENTINEL_SCHEMES: [&str; 2] = ["redis+sentinel://", "rediss+sentinel://"];
const SENTINEL_PARAMS: [&str; 2] = ["sentinel_username", "sentinel_password"];
const PARAMS: [&str; 3] = ["sslrootcert", "sslcert", "sslkey"];

impl RedisTarget {
    /// Splits probactr's TLS (and Sentinel) parameters off `url`.
    pub fn parse(url: &str) -> Result<RedisTarget, TargetError> {
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, query),
            None => (url, ""),
        };
        let (query, fragment) = match query.split_once('#') {
            Some((query, fragment)) => (query, Some(fragment)),
            None => (query, None),
        };
        let mut tls = TlsFiles::default();
        let mut sentinel_auth: [Option<String>; 2] = [None, None];
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let path = || PathBuf::from(percent_decode(value));
            match name {
                "sslrootcert" => tls.root_cert = Some(path()),
                "sslcert" => tls.client_cert = Some(path()),
                "sslkey" => tls.client_key = Some(path()),
                "sentinel_username" => sentinel_auth[0] = Some(percent_decode(value)),
                "sentinel_password" => sentinel_auth[1] = Some(percent_decode(value)),
                _ => kept.push(pair),
            }
        }
        let is_sentinel = SENTINEL_SCHEMES.iter().any(|scheme| base.starts_with(scheme));
        let is_tls = base.starts_with("rediss://") || base.starts_with("rediss+sentinel://");
        if !is_tls {
            let given = [&tls.root_cert, &tls.client_cert, &tls.client_key];
            if let Some(at) = given.iter().position(|p| p.is_some()) {
                return Err(TargetError::NotTls(PARAMS[at]));
            }
        }
        if tls.client_cert.is_some() != tls.client_key.is_some() {
            return Err(TargetError::HalfClientCert);
        }
        if !is_sentinel {
            if let Some(at) = sentinel_auth.iter().position(Option::is_some) {
                return Err(TargetError::NotSentinel(SENTINEL_PARAMS[at]));
            }
        }
        let mut url = base.to_owned();
        if !kept.is_empty() {
            url.push('?');
            url.push_str(&kept.join("&"));
        }
        if let Some(fragment) = fragment {
            url.push('#');
            url.push_str(fragment);
        }
        let sentinel = if is_sentinel {
            if let Some(unknown) = kept.first() {
                return Err(TargetError::BadSentinelUrl(format!(
                    "unknown parameter {}",
                    unknown.split('=').next().unwrap_or(unknown)
                )));
            }
            let [sentinel_username, sentinel_password] = sentinel_auth;
            let mut sentinels = parse_sentinels(base, fragment)?;
            sentinels.sentinel_username = sentinel_username;
            sentinels.sentinel_password = sentinel_password;
            Some(sentinels)
        } else {
            None
        };
        Ok(RedisTarget { url, tls, sentinel })
    }

    /// How to reach this target, with the certificate files read now.
    pub fn server(&self) -> Result<Server, TargetError> {
        match &self.sentinel {
            Some(sentinels) => Ok(Server::Sentinel(self.sentinel_client(sentinels)?)),
            None => Ok(Server::Direct(self.client()?)),
        }
    }

    /// Connects afresh and sends `PING`: whether the server answers (for Sentinel: the
    /// master the sentinels name now).
    pub async fn ping(&self) -> Result<(), TargetError> {
        let client = match self.server()? {
            Server::Direct(client) => client,
            Server::Sentinel(mut sentinel) => sentinel.async_get_client().await?,
        };
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await?;
        Ok(())
    }

    /// A client for a target naming one server, with the certificate files read now.
    pub fn client(&self) -> Result<redis::Client, TargetError> {
        if self.sentinel.is_some() {
            return Err(TargetError::BadSentinelUrl(
                "names sentinels, not one server".into(),
            ));
        }
        match self.certificates()? {
            None => Ok(redis::Client::open(self.url.as_str())?),
            Some(certificates) => Ok(redis::Client::build_with_tls(self.url.as_str(), certificates)?),
        }
    }

    /// The certificate files, read; None when the URL names none.
    fn certificates(&self) -> Result<Option<TlsCertificates>, TargetError> {
        if self.tls == TlsFiles::default() {
            return Ok(None);
        }
        let root_cert = self
            .tls
            .root_cert
            .as_deref()
            .map(|path| read_file("sslrootcert", path))
            .transpose()?;
        let client_tls = match (&self.tls.client_cert, &self.tls.client_key) {
            (Some(cert), Some(key)) => Some(ClientTlsConfig {
                client_cert: read_file("sslcert", cert)?,
                client_key: read_file("sslkey", key)?,
            }),
            _ => None,
        };
        Ok(Some(TlsCertificates {
            client_tls,
            root_cert,
        }))
    }

    /// A client that asks the sentinels for the master of `sentinels.master_name`.
    fn sentinel_client(&self, sentinels: &Sentinels) -> Result<SentinelClient, TargetError> {
        let nodes = sentinels.nodes.iter().map(|(host, port)| {
            if sentinels.tls {
                ConnectionAddr::TcpTls {
                    host: host.clone(),
                    port: *port,
                    insecure: sentinels.insecure,
                    tls_params: None,
                }
            } else {
                ConnectionAddr::Tcp(host.clone(), *port)
            }
        });
        let mut builder =
            SentinelClientBuilder::new(nodes, &sentinels.master_name, SentinelServerType::Master)?
                .set_client_to_redis_db(sentinels.db);
        if let Some(username) = &sentinels.username {
            builder = builder.set_client_to_redis_username(username);
        }
        if let Some(password) = &sentinels.password {
            builder = builder.set_client_to_redis_password(password);
        }
        if let Some(username) = &sentinels.sentinel_username {
            builder = builder.set_client_to_sentinel_username(username);
        }
        if let Some(password) = &sentinels.sentinel_password {
            builder = builder.set_client_to_sentinel_password(password);
        }
        if sentinels.tls {
            let mode = if sentinels.insecure {
                TlsMode::Insecure
            } else {
                TlsMode::Secure
            };
            builder = builder
                .set_client_to_redis_tls_mode(mode)
                .set_client_to_sentinel_tls_mode(mode);
            if let Some(certificates) = self.certificates()? {
                builder = builder
                    .set_client_to_redis_certificates(certificates.clone())
                    .set_client_to_sentinel_certificates(certificates);
            }
        }
        Ok(builder.build()?)
    }
}

/// The parts of `redis+sentinel://[user:password@]host:port[,host:port...]/MASTER_NAME[/db]`
/// (`base` is the URL without its query).
fn parse_sentinels(base: &str, fragment: Option<&str>) -> Result<Sentinels, TargetError> {
    let bad = |why: &str| TargetError::BadSentinelUrl(why.to_owned());
    let (scheme, rest) = base.split_once("://").ok_or_else(|| bad("no scheme"))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, authority),
    };
    let (username, password) = match userinfo {
        None => (None, None),
        Some(userinfo) => {
            let (user, password) = match userinfo.split_once(':') {
                Some((user, password)) => (user, Some(percent_decode(password))),
                None => (userinfo, None),
            };
            let user = Some(percent_decode(user)).filter(|user| !user.is_empty());
            (user, password)
        }
    };
    let nodes = hosts
        .split(',')
        .map(|node| parse_node(node).ok_or_else(|| bad(&format!("bad sentinel address {node:?}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let mut segments = path.split('/').filter(|segment| !segment.is_empty());
    let master_name = segments
        .next()
        .map(percent_decode)
        .ok_or_else(|| bad("no master name"))?;
    let db = match segments.next() {
        None => 0,
        Some(db) => db
            .parse::<i64>()
            .map_err(|_| bad(&format!("bad database number {db:?}")))?,
    };
    if let Some(extra) = segments.next() {
        return Err(bad(&format!("unexpected {extra:?} after the database number")));
    }
    let insecure = match fragment {
        None | Some("") => false,
        Some("insecure") => true,
        Some(other) => return Err(bad(&format!("unknown fragment #{other}"))),
    };
    Ok(Sentinels {
        nodes,
        master_name,
        db,
        username,
        password,
        sentinel_username: None,
        sentinel_password: None,
        tls: scheme == "rediss+sentinel",
        insecure,
    })
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`; None when the port is not a number.
fn parse_node(node: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(v6) = node.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match node.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (node, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some(port) => port.parse().ok()?,
        None => SENTINEL_PORT,
    };
    Some((host.to_owned(), port))
}

/// How to reach the server of `redis_url` (see the module doc for what the URL may carry).
pub fn server(redis_url: &str) -> Result<Server, TargetError> {
    RedisTarget::parse(redis_url)?.server()
}

/// A Redis client for `redis_url`, a URL naming one server.
pub fn client(redis_url: &str) -> Result<redis::Client, TargetError> {
    RedisTarget::parse(redis_url)?.client()
}

fn read_file(param: &'static str, path: &Path) -> Result<Vec<u8>, TargetError> {
    std::fs::read(path).map_err(|error| TargetError::Unreadable {
        param,
        path: path.to_owned(),
        error,
    })
}

/// `%XX` escapes decoded (paths in a URL query may carry them); bad escapes stay as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn plain_urls_pass_through() {
        let target = RedisTarget::parse("redis://user:pw@127.0.0.1:6379/2").unwrap();
        assert_eq!(target.url, "redis://user:pw@127.0.0.1:6379/2");
        assert_eq!(target.tls, TlsFiles::default());
    }

    #[test]
    fn tls_files_are_taken_out_of_the_query() {
        let target = RedisTarget::parse(
            "rediss://h:6380/0?sslrootcert=/etc/tls/ca.crt&protocol=resp3&sslcert=/etc/tls/c.crt&sslkey=/etc/tls/my%20key.pem#insecure",
        )
        .unwrap();
        assert_eq!(target.url, "rediss://h:6380/0?protocol=resp3#insecure");
        assert_eq!(
            target.tls.root_cert.as_deref(),
            Some(Path::new("/etc/tls/ca.crt"))
        );
        assert_eq!(
            target.tls.client_cert.as_deref(),
            Some(Path::new("/etc/tls/c.crt"))
        );
        assert_eq!(
            target.tls.client_key.as_deref(),
            Some(Path::new("/etc/tls/my key.pem"))
        );
    }

    #[test]
    fn tls_files_need_rediss_and_a_whole_client_certificate() {
        let err = RedisTarget::parse("redis://h:6379?sslrootcert=/ca.crt").unwrap_err();
        assert!(err.to_string().contains("sslrootcert needs a rediss://"), "{err}");
        let err = RedisTarget::parse("rediss://h:6379?sslcert=/c.crt").unwrap_err();
        assert!(matches!(err, TargetError::HalfClientCert), "{err}");
    }

    #[test]
    fn a_missing_certificate_file_is_named() {
        let err = client("rediss://h:6380?sslrootcert=/nonexistent/ca.crt").unwrap_err();
        assert!(
            err.to_string().contains("sslrootcert /nonexistent/ca.crt"),
            "{err}"
        );
    }

    #[test]
    fn sentinel_urls_name_the_sentinels_the_master_and_its_database() {
        let target = RedisTarget::parse(
            "redis+sentinel://app:p%40ss@s1:26380,s2,[::1]:26381/main/3?sentinel_password=sp",
        )
        .unwrap();
        let sentinels = target.sentinel.unwrap();
        assert_eq!(
            sentinels.nodes,
            vec![
                ("s1".to_owned(), 26380),
                ("s2".to_owned(), SENTINEL_PORT),
                ("::1".to_owned(), 26381)
            ]
        );
        assert_eq!(sentinels.master_name, "main");
        assert_eq!(sentinels.db, 3);
        assert_eq!(sentinels.username.as_deref(), Some("app"));
        assert_eq!(sentinels.password.as_deref(), Some("p@ss"));
        assert_eq!(sentinels.sentinel_password.as_deref(), Some("sp"));
        assert!(!sentinels.tls);
        let shown = format!("{sentinels:?}");
        assert!(!shown.contains("p@ss") && !shown.contains("\"sp\""), "{shown}");
    }

    #[test]
    fn tls_sentinel_urls_keep_the_certificate_files() {
        let target =
            RedisTarget::parse("rediss+sentinel://s1:26379/main?sslrootcert=/etc/tls/ca.crt#insecure")
                .unwrap();
        let sentinels = target.sentinel.as_ref().unwrap();
        assert!(sentinels.tls && sentinels.insecure);
        assert_eq!(sentinels.db, 0);
        assert_eq!(
            target.tls.root_cert.as_deref(),
            Some(Path::new("/etc/tls/ca.crt"))
        );
        assert!(target.server().is_err(), "the CA file does not exist");
    }

    #[test]
    fn bad_sentinel_urls_say_what_is_wrong() {
        let cases = [
            ("redis+sentinel://s1:26379", "no master name"),
            ("redis+sentinel://s1:x/main", "bad sentinel address"),
            ("redis+sentinel://s1/main/zero", "bad database number"),
            (
                "redis+sentinel://s1/main?protocol=resp3",
                "unknown parameter protocol",
            ),
            (
                "redis+sentinel://s1/main?sslrootcert=/ca.crt",
                "sslrootcert needs a rediss://",
            ),
            (
                "redis://h:6379?sentinel_password=x",
                "sentinel_password needs a redis+sentinel://",
            ),
        ];
        for (url, expected) in cases {
            let err = RedisTarget::parse(url).unwrap_err().to_string();
            assert!(err.contains(expected), "{url}: {err}");
        }
    }

    #[test]
    fn a_sentinel_url_builds_a_sentinel_client_without_connecting() {
        let target = RedisTarget::parse("redis+sentinel://127.0.0.1:1,127.0.0.1:2/main").unwrap();
        assert!(matches!(target.server().unwrap(), Server::Sentinel(_)));
        assert!(target.client().is_err());
    }
}
