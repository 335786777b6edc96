//! URLs that are credentials (a Slack incoming webhook posts to its channel for whoever
//! knows it), as shown once sealed: scheme, host and port (where messages go) and a
//! fingerprint, the rest (path, query, user info: where such URLs keep their token)
//! masked, as `https://hooks.slack.com/*** (#1a2b3c4d)`.
//!
//! The fingerprint (the first 32 bits of the URL's SHA-256) lets a definitions file that
//! carries a URL be compared with the sealed one without opening it, so applying the same
//! file twice changes nothing and a changed token is seen. It says nothing useful about a
//! URL holding a random token; a URL short enough to guess is no credential to begin with.

use sha2::{Digest, Sha256};

use crate::secrets::MASK;

/// The masked form of `url`.
pub fn masked(url: &str) -> String {
    let fingerprint: String = Sha256::digest(url.as_bytes())
        .iter()
        .take(4)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    match url::Url::parse(url) {
        Ok(parsed) => {
            let port = parsed.port().map(|port| format!(":{port}")).unwrap_or_default();
            format!(
                "{}://{}{port}/{MASK} (#{fingerprint})",
                parsed.scheme(),
                parsed.host_str().unwrap_or_default()
            )
        }
        Err(_) => format!("{MASK} (#{fingerprint})"),
    }
}

/// Whether `text` is a masked URL as [`masked`] makes them (a client may send back what
/// it read).
pub fn is_masked(text: &str) -> bool {
    let Some((head, tail)) = text.rsplit_once(" (#") else {
        return false;
    };
    head.ends_with(MASK)
        && tail.len() == 9
        && tail.ends_with(')')
        && tail[..8].chars().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_scheme_host_port_and_a_fingerprint_are_shown() {
        let url = "https://hooks.slack.com/services/T0001/B0002/Xk2s9QwErTy7UiOp3aSdFgHj";
        let shown = masked(url);
        assert!(shown.starts_with("https://hooks.slack.com/*** (#"), "{shown}");
        assert!(!shown.contains("T0001") && !shown.contains("Xk2s9"), "{shown}");
        assert!(is_masked(&shown));
        assert_eq!(masked(url), shown, "the same URL, the same form");
        assert_ne!(masked(&url.replace("Hj", "Hk")), shown, "a new token, a new form");
        let with_login = masked("http://user:pass@10.0.0.5:8080/hook?token=abc");
        assert!(
            with_login.starts_with("http://10.0.0.5:8080/*** (#"),
            "{with_login}"
        );
        assert!(!is_masked("https://hooks.example.com/ops") && !is_masked("https://x/*** (#zz)"));
    }
}
