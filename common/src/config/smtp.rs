//! The SMTP server alerts are mailed through (`PROBACTR_SMTP_URL`): host, port, how the
//! connection is secured, and the login, never printed.

/// How the SMTP connection is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// Plain text, only when the URL says so (`smtp://…?tls=none`): a relay on a network
    /// the operator trusts.
    None,
    /// Plain text upgraded with STARTTLS, which must succeed (`?tls=starttls`).
    StartTls,
    /// TLS from the first byte (`smtps://`).
    Wrapper,
}

/// The SMTP server of `PROBACTR_SMTP_URL`.
#[derive(Clone, PartialEq, Eq)]
pub struct SmtpSettings {
    /// Host name or address.
    pub host: String,
    /// Port (25 for `smtp://`, 465 for `smtps://` unless given).
    pub port: u16,
    /// How the connection is secured.
    pub tls: SmtpTls,
    /// User name, when the server wants a login.
    pub user: Option<String>,
    /// Password (never printed: see the Debug impl).
    pub password: Option<String>,
}

impl std::fmt::Debug for SmtpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpSettings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

impl SmtpSettings {
    /// Parses `smtps://[user[:password]@]host[:port]` or
    /// `smtp://[user[:password]@]host[:port]?tls=starttls|none`; the error says what was
    /// expected. An `smtp://` URL must say how it is secured: mail carries job names,
    /// errors and links, and the login would cross the network in the clear, so plain
    /// text is never a default, only a choice (`tls=none`).
    pub fn parse(text: &str) -> Result<SmtpSettings, String> {
        let expected =
            "smtps://[user:password@]host[:port], smtp://[user:password@]host[:port]?tls=starttls, \
             or smtp://host[:port]?tls=none for a plain relay";
        let url = url::Url::parse(text).map_err(|err| format!("{expected} ({err})"))?;
        // `smtp://` starts undecided: the query must choose.
        let mut tls = match url.scheme() {
            "smtp" => None,
            "smtps" => Some(SmtpTls::Wrapper),
            _ => return Err(expected.to_owned()),
        };
        let host = url
            .host_str()
            .filter(|host| !host.is_empty())
            .ok_or_else(|| format!("{expected} (no host)"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        for (key, value) in url.query_pairs() {
            tls = match (key.as_ref(), value.as_ref(), tls) {
                ("tls", "starttls" | "required", None) => Some(SmtpTls::StartTls),
                ("tls", "none", None) => Some(SmtpTls::None),
                _ => return Err(format!("{expected} (unknown or repeated option {key}={value})")),
            };
        }
        let tls = tls.ok_or_else(|| {
            format!("{expected} (smtp:// without tls=: mail would go unencrypted; add ?tls=starttls, or ?tls=none to mean it)")
        })?;
        let decode = |text: &str| {
            percent_encoding::percent_decode_str(text)
                .decode_utf8_lossy()
                .into_owned()
        };
        let user = Some(url.username()).filter(|u| !u.is_empty()).map(decode);
        Ok(SmtpSettings {
            port: url
                .port()
                .unwrap_or(if tls == SmtpTls::Wrapper { 465 } else { 25 }),
            host,
            tls,
            user,
            password: url.password().map(decode),
        })
    }
}
