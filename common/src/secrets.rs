//! Job secrets: values encrypted at rest, referenced by jobs as `{{ secrets.NAME }}`,
//! resolved only by the executor just before a run, and masked in what the run leaves.
//!
//! Values are sealed with AES-256-GCM under the key of `PROBACTR_SECRET_KEY` (32 random
//! bytes, base64), each with a fresh 96-bit nonce; the row keeps the key's id (the first
//! bytes of its SHA-256), so a key can be rotated: with the old key in
//! `PROBACTR_SECRET_KEY_PREVIOUS`, old values still open, and re-sealing them all moves
//! them to the new key. The database never holds a value in the clear, and nothing but an
//! executor about to run a job ever opens one.

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use sha2::{Digest, Sha256};

/// What stands for a secret's value in output and errors.
pub const MASK: &str = "***";

/// Errors of keys and sealed values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The key text is not 32 bytes in base64.
    #[error("must be 32 random bytes in base64 (for example `openssl rand -base64 32`)")]
    BadKey,
    /// No key of the keyring sealed this value.
    #[error("sealed under key {0}, which is neither PROBACTR_SECRET_KEY nor PROBACTR_SECRET_KEY_PREVIOUS")]
    UnknownKey(String),
    /// The value does not open: tampered with, or not a value of ours.
    #[error("does not decrypt (altered, or sealed under another key)")]
    Corrupt,
}

/// A value as the database keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The id of the key that sealed it.
    pub key_id: String,
    /// The nonce, 12 bytes.
    pub nonce: Vec<u8>,
    /// The ciphertext with its authentication tag.
    pub ciphertext: Vec<u8>,
}

/// One AES-256 key and its id.
#[derive(Clone)]
pub struct SecretKey {
    id: String,
    cipher: Aes256Gcm,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretKey({})", self.id)
    }
}

impl SecretKey {
    /// A key from its base64 text.
    pub fn parse(text: &str) -> Result<SecretKey, SecretError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| SecretError::BadKey)?;
        if bytes.len() != 32 {
            return Err(SecretError::BadKey);
        }
        let id = hex_prefix(&Sha256::digest(&bytes));
        let cipher = Aes256Gcm::new_from_slice(&bytes).map_err(|_| SecretError::BadKey)?;
        Ok(SecretKey { id, cipher })
    }

    /// Its id, as sealed values record it.
    pub fn id(&self) -> &str {
        &self.id
    }
}

fn hex_prefix(digest: &[u8]) -> String {
    digest.iter().take(6).map(|byte| format!("{byte:02x}")).collect()
}

/// The current key, and the previous one during a rotation.
#[derive(Debug, Clone)]
pub struct Keyring {
    current: SecretKey,
    previous: Option<SecretKey>,
}

impl Keyring {
    /// A keyring sealing with `current` and opening with either key.
    pub fn new(current: SecretKey, previous: Option<SecretKey>) -> Keyring {
        Keyring { current, previous }
    }

    /// The id of the key new values are sealed with.
    pub fn current_id(&self) -> &str {
        self.current.id()
    }

    /// Seals `value` under the current key.
    pub fn seal(&self, value: &str) -> Sealed {
        let nonce: [u8; 12] = rand::random();
        let ciphertext = self
            .current
            .cipher
            .encrypt(&Nonce::from(nonce), value.as_bytes())
            // AES-GCM fails only for inputs beyond 64 GiB.
            .unwrap_or_default();
        Sealed {
            key_id: self.current.id.clone(),
            nonce: nonce.to_vec(),
            ciphertext,
        }
    }

    /// Opens a sealed value with the key that sealed it.
    pub fn open(&self, sealed: &Sealed) -> Result<String, SecretError> {
        let key = [Some(&self.current), self.previous.as_ref()]
            .into_iter()
            .flatten()
            .find(|key| key.id == sealed.key_id)
            .ok_or_else(|| SecretError::UnknownKey(sealed.key_id.clone()))?;
        let nonce: [u8; 12] = sealed
            .nonce
            .as_slice()
            .try_into()
            .map_err(|_| SecretError::Corrupt)?;
        let plain = key
            .cipher
            .decrypt(&Nonce::from(nonce), sealed.ciphertext.as_slice())
            .map_err(|_| SecretError::Corrupt)?;
        String::from_utf8(plain).map_err(|_| SecretError::Corrupt)
    }
}

/// Whether `name` may name a secret: letters, digits, `_`, `-` and `.`, 1 to 100.
pub fn is_valid_name(name: &str) -> bool {
    (1..=100).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// The names `text` references as `{{ secrets.NAME }}` (spaces inside the braces
/// optional), in order, each once.
pub fn references(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        if let Some(name) = after[..end].trim().strip_prefix("secrets.") {
            let name = name.trim();
            if is_valid_name(name) && !names.iter().any(|known| known == name) {
                names.push(name.to_owned());
            }
        }
        rest = &after[end + 2..];
    }
    names
}

/// `text` with every `{{ secrets.NAME }}` replaced by the value `value_of` gives NAME
/// (references it does not know are left as they are).
pub fn substitute(text: &str, value_of: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        let inner = after[..end].trim();
        let value = inner
            .strip_prefix("secrets.")
            .and_then(|name| value_of(name.trim()));
        out.push_str(&rest[..start]);
        match value {
            Some(value) => out.push_str(&value),
            None => out.push_str(&rest[start..start + 2 + end + 2]),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// `text` with every occurrence of the `values` (and of their encoded forms, see
/// [`crate::masking`]) replaced by [`MASK`] (longest first, so a value containing
/// another is masked whole).
pub fn mask(text: &str, values: &[String]) -> String {
    crate::masking::Masker::new(values).mask(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> SecretKey {
        SecretKey::parse(&base64::engine::general_purpose::STANDARD.encode([byte; 32])).expect("a key")
    }

    #[test]
    fn sealed_values_open_with_their_key_only() {
        let ring = Keyring::new(key(1), None);
        let sealed = ring.seal("s3cret");
        assert!(!String::from_utf8_lossy(&sealed.ciphertext).contains("s3cret"));
        assert_eq!(ring.open(&sealed).as_deref(), Ok("s3cret"));
        assert_ne!(ring.seal("s3cret").nonce, sealed.nonce, "a fresh nonce per value");

        let rotated = Keyring::new(key(2), Some(key(1)));
        assert_eq!(
            rotated.open(&sealed).as_deref(),
            Ok("s3cret"),
            "the previous key still opens"
        );
        assert_eq!(rotated.seal("x").key_id, key(2).id());
        let elsewhere = Keyring::new(key(3), None);
        assert!(matches!(elsewhere.open(&sealed), Err(SecretError::UnknownKey(_))));
        let mut tampered = sealed.clone();
        tampered.ciphertext[0] ^= 1;
        assert_eq!(ring.open(&tampered), Err(SecretError::Corrupt));
        assert_eq!(SecretKey::parse("c2hvcnQ=").err(), Some(SecretError::BadKey));
    }

    #[test]
    fn references_are_found_substituted_and_masked() {
        let text = "Bearer {{ secrets.api_token }} and {{secrets.db.password}} and {{ params.x }} {{ secrets.api_token }}";
        assert_eq!(references(text), ["api_token", "db.password"]);
        let value_of = |name: &str| (name == "api_token").then(|| "T0K".to_owned());
        assert_eq!(
            substitute(text, &value_of),
            "Bearer T0K and {{secrets.db.password}} and {{ params.x }} T0K"
        );
        assert_eq!(
            mask("got T0K and T0KEN", &["T0K".into(), "T0KEN".into()]),
            "got *** and ***"
        );
        assert!(!is_valid_name("") && !is_valid_name("a b") && is_valid_name("db.password-2"));
    }
}
