//! The reader of settings: one variable at a time, its declared default when unset, and
//! errors that name the variable and what it expected.

use std::net::SocketAddr;
use std::time::Duration;

use super::units::{format_duration, parse_bytes, parse_duration};
use super::vars::default_of;
use super::{redact_url, CgroupSetting, ConfigError, LogFormat, SmtpSettings};
use crate::account::AccountName;
use crate::backoff::Backoff;
use crate::cidr::Cidr;
use crate::secrets::{Keyring, SecretKey};

/// Reads one variable at a time, falling back to its declared default.
pub(super) struct Env<'a> {
    pub(super) lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl Env<'_> {
    pub(super) fn raw(&self, name: &'static str) -> String {
        (self.lookup)(name).unwrap_or_else(|| default_of(name).to_owned())
    }

    pub(super) fn text(&self, name: &'static str) -> String {
        self.raw(name)
    }

    /// `s3://BUCKET/PREFIX`, or None when empty.
    pub(super) fn archive(&self, name: &'static str) -> Result<Option<super::ArchiveLocation>, ConfigError> {
        let value = self.raw(name);
        if value.trim().is_empty() {
            return Ok(None);
        }
        let mut location = super::ArchiveLocation::parse(&value)
            .ok_or_else(|| Self::invalid(name, &value, "s3://BUCKET/PREFIX (a bucket name in lower case)"))?;
        location.aws = super::ARCHIVE_AWS_VARS
            .iter()
            .filter_map(|&aws| (self.lookup)(aws).map(|value| (aws, value)))
            .collect();
        Ok(Some(location))
    }

    pub(super) fn invalid(name: &'static str, value: &str, expected: &str) -> ConfigError {
        ConfigError::Invalid {
            var: name,
            // The message is printed: a URL's password must not be.
            value: redact_url(value),
            expected: expected.to_owned(),
        }
    }

    pub(super) fn url(&self, name: &'static str, schemes: &[&str]) -> Result<String, ConfigError> {
        let value = self.raw(name);
        if schemes.iter().any(|scheme| value.starts_with(scheme)) {
            Ok(value)
        } else {
            Err(Env::invalid(
                name,
                &value,
                &format!("a URL starting with {}", schemes.join(" or ")),
            ))
        }
    }

    /// Like [`Env::url`], but None when empty (a feature left off).
    pub(super) fn optional_url(
        &self,
        name: &'static str,
        schemes: &[&str],
    ) -> Result<Option<String>, ConfigError> {
        if self.raw(name).trim().is_empty() {
            return Ok(None);
        }
        self.url(name, schemes).map(Some)
    }

    /// An SMTP server URL; None when empty. The error never repeats the password.
    pub(super) fn smtp(&self, name: &'static str) -> Result<Option<SmtpSettings>, ConfigError> {
        let value = self.raw(name);
        if value.trim().is_empty() {
            return Ok(None);
        }
        SmtpSettings::parse(&value)
            .map(Some)
            .map_err(|expected| Env::invalid(name, &value, &expected))
    }

    /// A mail address (`name@domain`, or `Display Name <name@domain>`).
    pub(super) fn mailbox(&self, name: &'static str) -> Result<String, ConfigError> {
        let value = self.raw(name);
        let address = value
            .rsplit_once('<')
            .map(|(_, rest)| rest.trim_end_matches('>'))
            .unwrap_or(&value);
        match address.split_once('@') {
            Some((local, domain)) if !local.is_empty() && !domain.is_empty() && !address.contains(' ') => {
                Ok(value)
            }
            _ => Err(Env::invalid(
                name,
                &value,
                "a mail address such as probactr@example.com",
            )),
        }
    }

    /// The secret keys; an error never repeats a key's text.
    pub(super) fn keyring(&self) -> Result<Option<Keyring>, ConfigError> {
        let key = |name: &'static str| -> Result<Option<SecretKey>, ConfigError> {
            let text = self.raw(name);
            if text.trim().is_empty() {
                return Ok(None);
            }
            SecretKey::parse(&text)
                .map(Some)
                .map_err(|err| ConfigError::Inconsistent {
                    var: name,
                    message: err.to_string(),
                })
        };
        let current = key("PROBACTR_SECRET_KEY")?;
        let previous = key("PROBACTR_SECRET_KEY_PREVIOUS")?;
        match (current, previous) {
            (Some(current), previous) => Ok(Some(Keyring::new(current, previous))),
            (None, Some(_)) => Err(ConfigError::Inconsistent {
                var: "PROBACTR_SECRET_KEY_PREVIOUS",
                message: "is set without PROBACTR_SECRET_KEY".into(),
            }),
            (None, None) => Ok(None),
        }
    }

    pub(super) fn cidrs(&self, name: &'static str) -> Result<Vec<Cidr>, ConfigError> {
        let value = self.raw(name);
        self.list(name)
            .iter()
            .map(|entry| entry.parse::<Cidr>())
            .collect::<Result<_, _>>()
            .map_err(|_| Env::invalid(name, &value, "CIDR ranges like 10.0.0.0/8,fd00::/8"))
    }

    pub(super) fn number(&self, name: &'static str, min: u32, max: u32) -> Result<u32, ConfigError> {
        let value = self.raw(name);
        match value.trim().parse::<u32>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(Env::invalid(
                name,
                &value,
                &format!("a whole number from {min} to {max}"),
            )),
        }
    }

    /// A size in bytes from `min` to `max`: a whole number, or one followed by `KiB` or
    /// `MiB` (`K` and `M` too).
    pub(super) fn bytes(&self, name: &'static str, min: u64, max: u64) -> Result<u64, ConfigError> {
        let value = self.raw(name);
        match parse_bytes(&value) {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(Env::invalid(
                name,
                &value,
                &format!("a size like 65536, 512KiB or 1MiB, from {min} to {max} bytes"),
            )),
        }
    }

    pub(super) fn duration(&self, name: &'static str) -> Result<Duration, ConfigError> {
        let value = self.raw(name);
        match parse_duration(&value) {
            Ok(d) if !d.is_zero() => Ok(d),
            _ => Err(Env::invalid(
                name,
                &value,
                "a positive duration like 500ms, 5s, 2m, 1h or 30d",
            )),
        }
    }

    /// A duration from zero up to `max`.
    pub(super) fn duration_or_zero(
        &self,
        name: &'static str,
        max: Duration,
    ) -> Result<Duration, ConfigError> {
        let value = self.raw(name);
        match parse_duration(&value) {
            Ok(d) if d <= max => Ok(d),
            _ => Err(Env::invalid(
                name,
                &value,
                &format!(
                    "a duration like 0s, 500ms or 2s, at most {}",
                    format_duration(max)
                ),
            )),
        }
    }

    pub(super) fn labels(&self, name: &'static str) -> Result<crate::labels::Labels, ConfigError> {
        let value = self.raw(name);
        crate::labels::parse_labels(&value).map_err(|why| ConfigError::Inconsistent {
            var: name,
            message: format!("{why}; expected name=value,name=value such as zone=a,gpu=1"),
        })
    }

    /// A list of namespace names (None when empty), each checked like `namespaces.name`.
    pub(super) fn namespaces(&self, name: &'static str) -> Result<Option<Vec<String>>, ConfigError> {
        let names = self.list(name);
        let valid = |item: &str| {
            let bytes = item.as_bytes();
            (1..=63).contains(&bytes.len())
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                && bytes.first() != Some(&b'-')
                && bytes.last() != Some(&b'-')
        };
        if let Some(bad) = names.iter().find(|item| !valid(item)) {
            return Err(Env::invalid(
                name,
                &self.raw(name),
                &format!(
                    "namespace names a,b (lowercase letters, digits and inner dashes; {bad:?} is not one)"
                ),
            ));
        }
        Ok(Some(names).filter(|names| !names.is_empty()))
    }

    pub(super) fn list(&self, name: &'static str) -> Vec<String> {
        self.raw(name)
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect()
    }

    pub(super) fn optional_account(&self, name: &'static str) -> Result<Option<AccountName>, ConfigError> {
        let value = self.raw(name);
        if value.trim().is_empty() {
            return Ok(None);
        }
        AccountName::parse(&value)
            .map(Some)
            .map_err(|expected| Env::invalid(name, &value, &expected))
    }

    pub(super) fn accounts(&self, name: &'static str) -> Result<Vec<AccountName>, ConfigError> {
        let value = self.raw(name);
        self.list(name)
            .iter()
            .map(|entry| {
                AccountName::parse(entry).map_err(|expected| {
                    Env::invalid(
                        name,
                        &value,
                        &format!("a comma-separated list of accounts, each {expected}"),
                    )
                })
            })
            .collect()
    }

    pub(super) fn addr(&self, name: &'static str) -> Result<SocketAddr, ConfigError> {
        let value = self.raw(name);
        value
            .trim()
            .parse()
            .map_err(|_| Env::invalid(name, &value, "an address like 127.0.0.1:8080"))
    }

    pub(super) fn optional_addr(&self, name: &'static str) -> Result<Option<SocketAddr>, ConfigError> {
        if self.raw(name).trim().is_empty() {
            Ok(None)
        } else {
            self.addr(name).map(Some)
        }
    }

    pub(super) fn backoff(&self, name: &'static str) -> Result<Backoff, ConfigError> {
        let value = self.raw(name);
        value.parse().map_err(|why: String| {
            Env::invalid(name, &value, &format!("jitter:BASE:CAP or fixed:DELAY ({why})"))
        })
    }

    pub(super) fn flag(&self, name: &'static str) -> Result<bool, ConfigError> {
        let value = self.raw(name);
        match value.trim() {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            _ => Err(Env::invalid(name, &value, "true or false")),
        }
    }

    pub(super) fn log_format(&self, name: &'static str) -> Result<LogFormat, ConfigError> {
        let value = self.raw(name);
        match value.trim() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(Env::invalid(name, &value, "text or json")),
        }
    }

    pub(super) fn cgroup(&self, name: &'static str) -> Result<CgroupSetting, ConfigError> {
        let value = self.raw(name);
        match value.trim() {
            "" | "auto" => Ok(CgroupSetting::Auto),
            "off" => Ok(CgroupSetting::Off),
            path if path.starts_with('/') => Ok(CgroupSetting::Path(path.into())),
            _ => Err(Env::invalid(
                name,
                &value,
                "auto, off, or the absolute path of a cgroup v2 directory delegated to the executor",
            )),
        }
    }
}
