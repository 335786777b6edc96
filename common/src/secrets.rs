//! Job secrets: values encrypted at rest, referenced by jobs as `{{ secrets.NAME }}`,
//! resolved only by the executor just before a run, and masked in what the run leaves.
//!
//! Values are sealed with AES-256-GCM under the key of `PROBACTR_SECRET_KEY` (32 random
//! bytes, base64), each with a fresh 96-bit nonce; the row keeps the key's id (the first
//! bytes of its SHA-256), so a key can be rotated: with the old key in
//! `PROBACTR_SECRET_KEY_PREVIOUS`, old values still open, and re-sealing them all moves
//! them to the new key. The database never holds a value in the clear, and nothing but an
//! executor about to run a job ever opens one.
//!
//! Each value is also bound to what it seals (its [`Owner`]: a secret's name, a channel's
//! id and field), given to AES-GCM as associated data: whoever can write to the database
//! but holds no key cannot move a blob onto another row (say, a secret a job sends
//! somewhere the attacker reads, or a webhook URL), because it opens only as what it was
//! sealed for. Values sealed before binding existed (`bound` false) still open, without
//! that check, until the manager re-seals them bound at its start.

use std::fmt;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use sha2::{Digest, Sha256};

/// The namespace whose secrets are sealed as before namespaces existed (see
/// `store::namespaces::DEFAULT`).
const DEFAULT_NAMESPACE: &str = crate::store::namespaces::DEFAULT;

/// What stands for a secret's value in output and errors.
pub const MASK: &str = "***";

/// Errors of keys and sealed values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The key text is not 32 bytes in base64.
    #[error("must be 32 random bytes in base64 (for example `openssl rand -base64 32`)")]
    BadKey,
    /// No key of the keyring sealed this value.
    #[error("{owner} is sealed under key {key_id}, which is neither PROBACTR_SECRET_KEY nor PROBACTR_SECRET_KEY_PREVIOUS")]
    UnknownKey {
        /// What was being opened.
        owner: Owner,
        /// The key id the value records.
        key_id: String,
    },
    /// The value does not open: tampered with, copied from another sealed value, or not a
    /// value of ours.
    #[error("{0} does not open: its sealed value was altered or copied from another sealed value")]
    Corrupt(Owner),
}

/// What a sealed value belongs to; part of what is authenticated, so a value opens only
/// as the owner it was sealed for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// The job secret of this name in this namespace.
    Secret {
        /// The namespace the secret belongs to.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The signing secret of the alert channel of this id.
    ChannelSecret(i64),
    /// The URL of the alert channel of this id (webhook and Slack URLs are credentials).
    ChannelUrl(i64),
    /// The value of the run parameter of this name declared `secret` (see
    /// `params_schema`).
    Param(String),
    /// The signing secret of the webhook trigger of this id.
    WebhookSecret(i64),
}

impl Owner {
    /// The job secret `name` of `namespace`.
    pub fn secret(namespace: &str, name: &str) -> Owner {
        Owner::Secret {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The associated data: the owner's kind and identity, versioned, unambiguous (names
    /// are letters, digits, `_`, `-` and `.`; namespaces letters, digits and `-`). A secret
    /// of the `default` namespace keeps the data of the release before namespaces (its
    /// values sealed then open unchanged); one of another namespace is bound to its
    /// namespace too, so a value copied to a row of the same name in another namespace
    /// does not open there.
    fn associated_data(&self) -> Vec<u8> {
        match self {
            Owner::Secret { namespace, name } if namespace == DEFAULT_NAMESPACE => {
                format!("probactr/v1/secret/{name}")
            }
            Owner::Secret { namespace, name } => format!("probactr/v2/secret/{namespace}/{name}"),
            Owner::ChannelSecret(id) => format!("probactr/v1/channel/{id}/secret"),
            Owner::ChannelUrl(id) => format!("probactr/v1/channel/{id}/url"),
            Owner::Param(name) => format!("probactr/v1/param/{name}"),
            Owner::WebhookSecret(id) => format!("probactr/v1/trigger/{id}/webhook-secret"),
        }
        .into_bytes()
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::Secret { namespace, name } if namespace == DEFAULT_NAMESPACE => {
                write!(f, "secret {name}")
            }
            Owner::Secret { namespace, name } => write!(f, "secret {name} of namespace {namespace}"),
            Owner::ChannelSecret(id) => write!(f, "the signing secret of alert channel {id}"),
            Owner::ChannelUrl(id) => write!(f, "the URL of alert channel {id}"),
            Owner::Param(name) => write!(f, "the secret parameter {name}"),
            Owner::WebhookSecret(id) => write!(f, "the webhook secret of trigger {id}"),
        }
    }
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
    /// Whether it is bound to its [`Owner`] (false: sealed by a release before binding,
    /// waiting to be re-sealed).
    pub bound: bool,
}

impl Sealed {
    /// A value from its stored columns.
    pub fn from_columns(key_id: String, nonce: Vec<u8>, ciphertext: Vec<u8>, bound: bool) -> Sealed {
        Sealed {
            key_id,
            nonce,
            ciphertext,
            bound,
        }
    }

    /// A value from nullable columns: None unless all three are set (as the tables'
    /// CHECKs keep them).
    pub fn from_nullable_columns(
        key_id: Option<String>,
        nonce: Option<Vec<u8>>,
        ciphertext: Option<Vec<u8>>,
        bound: bool,
    ) -> Option<Sealed> {
        Some(Sealed::from_columns(key_id?, nonce?, ciphertext?, bound))
    }
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

    /// Seals `value` under the current key, bound to `owner`.
    pub fn seal(&self, owner: &Owner, value: &str) -> Sealed {
        let nonce: [u8; 12] = rand::random();
        let aad = owner.associated_data();
        let payload = Payload {
            msg: value.as_bytes(),
            aad: &aad,
        };
        let ciphertext = self
            .current
            .cipher
            .encrypt(&Nonce::from(nonce), payload)
            // AES-GCM fails only for inputs beyond 64 GiB.
            .unwrap_or_default();
        Sealed {
            key_id: self.current.id.clone(),
            nonce: nonce.to_vec(),
            ciphertext,
            bound: true,
        }
    }

    /// Opens a value sealed for `owner` with the key that sealed it; the error names the
    /// owner. A value sealed before binding opens without the owner check.
    pub fn open(&self, owner: &Owner, sealed: &Sealed) -> Result<String, SecretError> {
        let key = [Some(&self.current), self.previous.as_ref()]
            .into_iter()
            .flatten()
            .find(|key| key.id == sealed.key_id)
            .ok_or_else(|| SecretError::UnknownKey {
                owner: owner.clone(),
                key_id: sealed.key_id.clone(),
            })?;
        let corrupt = || SecretError::Corrupt(owner.clone());
        let nonce: [u8; 12] = sealed.nonce.as_slice().try_into().map_err(|_| corrupt())?;
        let aad = if sealed.bound {
            owner.associated_data()
        } else {
            Vec::new()
        };
        let payload = Payload {
            msg: sealed.ciphertext.as_slice(),
            aad: &aad,
        };
        let plain = key
            .cipher
            .decrypt(&Nonce::from(nonce), payload)
            .map_err(|_| corrupt())?;
        String::from_utf8(plain).map_err(|_| corrupt())
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
        let owner = Owner::secret("default", "token");
        let sealed = ring.seal(&owner, "s3cret");
        assert!(!String::from_utf8_lossy(&sealed.ciphertext).contains("s3cret"));
        assert_eq!(ring.open(&owner, &sealed).as_deref(), Ok("s3cret"));
        assert_ne!(
            ring.seal(&owner, "s3cret").nonce,
            sealed.nonce,
            "a fresh nonce per value"
        );

        let rotated = Keyring::new(key(2), Some(key(1)));
        assert_eq!(
            rotated.open(&owner, &sealed).as_deref(),
            Ok("s3cret"),
            "the previous key still opens"
        );
        assert_eq!(rotated.seal(&owner, "x").key_id, key(2).id());
        let elsewhere = Keyring::new(key(3), None);
        assert!(matches!(
            elsewhere.open(&owner, &sealed),
            Err(SecretError::UnknownKey { .. })
        ));
        let mut tampered = sealed.clone();
        tampered.ciphertext[0] ^= 1;
        assert_eq!(ring.open(&owner, &tampered), Err(SecretError::Corrupt(owner)));
        assert_eq!(SecretKey::parse("c2hvcnQ=").err(), Some(SecretError::BadKey));
    }

    #[test]
    fn a_secret_is_bound_to_its_namespace_and_default_ones_open_as_before_namespaces() {
        let ring = Keyring::new(key(1), None);
        // What a release before namespaces sealed for secret `db`: the default namespace's.
        let nonce = [9u8; 12];
        let before = Sealed {
            key_id: key(1).id().to_owned(),
            nonce: nonce.to_vec(),
            ciphertext: key(1)
                .cipher
                .encrypt(
                    &Nonce::from(nonce),
                    Payload {
                        msg: b"old".as_slice(),
                        aad: b"probactr/v1/secret/db",
                    },
                )
                .expect("seal"),
            bound: true,
        };
        assert_eq!(
            ring.open(&Owner::secret("default", "db"), &before).as_deref(),
            Ok("old")
        );
        assert!(ring.open(&Owner::secret("payments", "db"), &before).is_err());
        let of_payments = ring.seal(&Owner::secret("payments", "db"), "new");
        assert_eq!(
            ring.open(&Owner::secret("payments", "db"), &of_payments)
                .as_deref(),
            Ok("new")
        );
        for elsewhere in [Owner::secret("default", "db"), Owner::secret("reports", "db")] {
            assert!(
                ring.open(&elsewhere, &of_payments).is_err(),
                "copied to {elsewhere}"
            );
        }
        assert_eq!(
            Owner::secret("payments", "db").to_string(),
            "secret db of namespace payments"
        );
    }

    #[test]
    fn a_value_opens_only_as_what_it_was_sealed_for() {
        let ring = Keyring::new(key(1), None);
        let sealed = ring.seal(&Owner::secret("default", "db"), "s3cret");
        for other in [
            Owner::secret("default", "api"),
            Owner::ChannelSecret(1),
            Owner::ChannelUrl(1),
        ] {
            let err = ring.open(&other, &sealed).expect_err("copied onto another owner");
            assert_eq!(err, SecretError::Corrupt(other.clone()));
            assert!(err.to_string().starts_with(&other.to_string()), "{err}");
        }
        let url = ring.seal(&Owner::ChannelUrl(7), "https://hooks.example.com/T/B/x");
        assert!(ring.open(&Owner::ChannelUrl(8), &url).is_err());
        assert!(ring.open(&Owner::ChannelSecret(7), &url).is_err());
        assert!(ring.open(&Owner::ChannelUrl(7), &url).is_ok());

        // As a release before binding sealed: no associated data, recorded unbound.
        let nonce = [7u8; 12];
        let legacy = Sealed {
            key_id: key(1).id().to_owned(),
            nonce: nonce.to_vec(),
            ciphertext: key(1)
                .cipher
                .encrypt(&Nonce::from(nonce), b"old".as_slice())
                .expect("seal"),
            bound: false,
        };
        assert_eq!(
            ring.open(&Owner::secret("default", "db"), &legacy).as_deref(),
            Ok("old")
        );
        let claimed = Sealed {
            bound: true,
            ..legacy
        };
        assert!(
            ring.open(&Owner::secret("default", "db"), &claimed).is_err(),
            "an unbound value marked bound does not open"
        );
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
