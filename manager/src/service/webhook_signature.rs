//! Checking a webhook delivery's signature: an HMAC-SHA256 of the body under the
//! trigger's secret, in hex, in a header. One rule covers GitHub's form
//! (`X-Hub-Signature-256: sha256=HEX`, prefix `sha256=`) and Stripe's
//! (`Stripe-Signature: t=TIME,v1=HEX[,v1=HEX]`, prefix `v1=`, signed over `TIME.BODY`):
//! the header is read as comma-separated elements; those starting with the prefix are
//! candidate signatures; a `t=` element, when present, is a Unix time that is signed
//! before the body (with a dot) and must be within [`TOLERANCE_SECS`] of now.
//!
//! A trigger configured in the timestamped form (see [`is_timestamped`]) requires the
//! `t=` element: otherwise a captured `t=T,v1=M` over `T.body` could be replayed later as
//! `v1=M` with the body `T.body`, which no time check would see.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How far a signed timestamp may be from now (a captured delivery replayed later fails).
pub const TOLERANCE_SECS: i64 = 300;

/// Why a signature was refused (the reason recorded with the delivery).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The header is absent or not text.
    #[error("signature header missing")]
    Missing,
    /// Its `t=` is not a time, or is too far from now.
    #[error("signature timestamp missing, malformed or older than 5 minutes")]
    Stale,
    /// No candidate matches.
    #[error("signature does not match")]
    Mismatch,
}

/// Whether a trigger's signature, by its configured header and prefix, is of Stripe's
/// timestamped form (`Stripe-Signature`, or the `v1=` prefix), whose `t=` is mandatory.
pub fn is_timestamped(header_name: &str, prefix: &str) -> bool {
    header_name.eq_ignore_ascii_case("stripe-signature") || prefix == "v1="
}

/// Checks `header` (the signature header's value) against the HMAC of `body` under
/// `secret`, at Unix time `now`; `timestamped` (see [`is_timestamped`]) makes `t=`
/// mandatory.
pub fn verify(
    header: Option<&str>,
    prefix: &str,
    timestamped: bool,
    secret: &str,
    body: &[u8],
    now: i64,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let elements: Vec<&str> = header.split(',').map(str::trim).collect();
    let timestamp = (prefix != "t=")
        .then(|| elements.iter().find_map(|e| e.strip_prefix("t=")))
        .flatten();
    match timestamp {
        Some(time) => {
            let time: i64 = time.parse().map_err(|_| SignatureError::Stale)?;
            // `abs_diff` cannot overflow, whatever `t=` an attacker sends.
            if now.abs_diff(time) > TOLERANCE_SECS.unsigned_abs() {
                return Err(SignatureError::Stale);
            }
        }
        None if timestamped => return Err(SignatureError::Stale),
        None => {}
    }
    let candidates = elements
        .iter()
        .filter(|e| !(timestamp.is_some() && e.starts_with("t=")))
        .filter_map(|e| e.strip_prefix(prefix))
        .filter_map(|hex_mac| hex::decode(hex_mac).ok());
    for candidate in candidates {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
            return Err(SignatureError::Mismatch);
        };
        if let Some(time) = timestamp {
            mac.update(time.as_bytes());
            mac.update(b".");
        }
        mac.update(body);
        // Constant time: `verify_slice` compares without an early exit.
        if mac.verify_slice(&candidate).is_ok() {
            return Ok(());
        }
    }
    Err(SignatureError::Mismatch)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sign(secret: &str, payload: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(payload);
        hex::encode(mac.finalize().into_bytes())
    }

    #[test]
    fn github_and_stripe_forms_verify() {
        let body = br#"{"ref":"main"}"#;
        let github = format!("sha256={}", sign("s3cret-key", body));
        assert_eq!(
            verify(Some(&github), "sha256=", false, "s3cret-key", body, 0),
            Ok(())
        );
        assert_eq!(
            verify(Some(&github), "sha256=", false, "other-key", body, 0),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(None, "sha256=", false, "s3cret-key", body, 0),
            Err(SignatureError::Missing)
        );

        let signed = [b"1700000000.".as_slice(), body].concat();
        let stripe = format!("t=1700000000,v1={},v0=00", sign("whsec", &signed));
        assert_eq!(
            verify(Some(&stripe), "v1=", true, "whsec", body, 1_700_000_100),
            Ok(())
        );
        assert_eq!(
            verify(Some(&stripe), "v1=", true, "whsec", body, 1_700_001_000),
            Err(SignatureError::Stale)
        );
        let tampered = format!("t=1700000001,v1={}", sign("whsec", &signed));
        assert_eq!(
            verify(Some(&tampered), "v1=", true, "whsec", body, 1_700_000_000),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn a_timestamped_signature_replayed_without_its_time_is_refused() {
        let body = br#"{"id":"evt_1"}"#;
        let signed = [b"1700000000.".as_slice(), body].concat();
        let replay = format!("v1={}", sign("whsec", &signed));
        assert!(is_timestamped("Stripe-Signature", "v1="));
        assert!(!is_timestamped("X-Hub-Signature-256", "sha256="));
        assert_eq!(
            verify(Some(&replay), "v1=", true, "whsec", &signed, 1_800_000_000),
            Err(SignatureError::Stale)
        );
        let extreme = format!("t={},v1=00", i64::MIN);
        assert_eq!(
            verify(Some(&extreme), "v1=", true, "whsec", body, i64::MAX),
            Err(SignatureError::Stale)
        );
    }
}
