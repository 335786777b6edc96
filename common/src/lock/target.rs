//! Where the lock server is: `REDIS_URL` read into a Redis client, with what managed
//! Redis services need beyond a plain URL.
//!
//! - `rediss://` is TLS. The certificate files ride in the URL's query, named as in a
//!   PostgreSQL URL: `sslrootcert` (the CA that signed the server's certificate, instead
//!   of the system's roots), `sslcert` and `sslkey` (a client certificate, for servers
//!   that ask for one). They are read when connecting, so a rotated certificate is picked
//!   up by the next connection.
//! - ACL users: `redis://user:password@host:port` (redis' own URL syntax).
//!
//! The query parameters are taken out before the URL reaches the redis crate, which
//! does not know them.

use std::path::{Path, PathBuf};

use redis::{ClientTlsConfig, RedisError, TlsCertificates};

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

const PARAMS: [&str; 3] = ["sslrootcert", "sslcert", "sslkey"];

impl RedisTarget {
    /// Splits probactr's TLS parameters off `url`.
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
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let path = || PathBuf::from(percent_decode(value));
            match name {
                "sslrootcert" => tls.root_cert = Some(path()),
                "sslcert" => tls.client_cert = Some(path()),
                "sslkey" => tls.client_key = Some(path()),
                _ => kept.push(pair),
            }
        }
        let is_tls = base.starts_with("rediss://");
        if !is_tls {
            let given = [&tls.root_cert, &tls.client_cert, &tls.client_key];
            if let Some(at) = given.iter().position(|p| p.is_some()) {
                return Err(TargetError::NotTls(PARAMS[at]));
            }
        }
        if tls.client_cert.is_some() != tls.client_key.is_some() {
            return Err(TargetError::HalfClientCert);
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
        Ok(RedisTarget { url, tls })
    }

    /// A client for this target, with the certificate files read now.
    pub fn client(&self) -> Result<redis::Client, TargetError> {
        if self.tls == TlsFiles::default() {
            return Ok(redis::Client::open(self.url.as_str())?);
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
        let certificates = TlsCertificates {
            client_tls,
            root_cert,
        };
        Ok(redis::Client::build_with_tls(self.url.as_str(), certificates)?)
    }
}

/// A Redis client for `redis_url` (see the module doc for what the URL may carry).
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
}
