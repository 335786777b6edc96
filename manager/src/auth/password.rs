//! Password hashing with argon2id (PHC strings, so the cost travels with each hash and
//! can be raised without invalidating old ones).

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

/// The shortest password accepted for a user (the first admin included).
pub const MIN_PASSWORD_CHARS: usize = 12;

/// A password too short to be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be at least {MIN_PASSWORD_CHARS} characters long")]
pub struct WeakPassword;

/// Checks a new password's length.
pub fn check_strength(password: &str) -> Result<(), WeakPassword> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        Err(WeakPassword)
    } else {
        Ok(())
    }
}

/// Hashes and verifies passwords at a fixed cost.
#[derive(Debug, Clone)]
pub struct Hasher {
    params: Params,
}

impl Default for Hasher {
    /// argon2's recommended defaults (19 MiB, 2 passes).
    fn default() -> Self {
        Hasher {
            params: Params::default(),
        }
    }
}

impl Hasher {
    /// A cheap cost for tests (hashes made with it are still verified by any hasher).
    pub fn fast_for_tests() -> Hasher {
        let params = Params::new(256, 1, 1, None).unwrap_or_default();
        Hasher { params }
    }

    fn argon2(&self) -> Argon2<'static> {
        Argon2::new(Algorithm::Argon2id, Version::V0x13, self.params.clone())
    }

    /// The PHC string of `password` with a fresh salt.
    pub fn hash(&self, password: &str) -> anyhow::Result<String> {
        let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>())
            .map_err(|err| anyhow::anyhow!("encoding a salt: {err}"))?;
        let hash = self
            .argon2()
            .hash_password(password.as_bytes(), &salt)
            .map_err(|err| anyhow::anyhow!("hashing a password: {err}"))?;
        Ok(hash.to_string())
    }

    /// Whether `password` matches `phc`; a malformed stored hash never matches.
    pub fn verify(&self, password: &str, phc: &str) -> bool {
        match PasswordHash::new(phc) {
            Ok(parsed) => self
                .argon2()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok(),
            Err(err) => {
                tracing::error!(error = %err, "a stored password hash does not parse");
                false
            }
        }
    }

    /// [`Hasher::hash`] on the blocking pool: argon2 spends tens of milliseconds of CPU,
    /// which on the async threads would stall every other request of a login burst.
    pub async fn hash_blocking(&self, password: &str) -> anyhow::Result<String> {
        let (hasher, password) = (self.clone(), password.to_owned());
        tokio::task::spawn_blocking(move || hasher.hash(&password)).await?
    }

    /// [`Hasher::verify`] on the blocking pool; with no stored hash (an unknown or
    /// disabled user) it spends the time of a verification and answers false.
    pub async fn verify_blocking(&self, password: &str, phc: Option<&str>) -> bool {
        let (hasher, password, phc) = (self.clone(), password.to_owned(), phc.map(str::to_owned));
        let verified = tokio::task::spawn_blocking(move || match phc {
            Some(phc) => hasher.verify(&password, &phc),
            None => {
                hasher.verify_dummy(&password);
                false
            }
        });
        verified.await.unwrap_or(false)
    }

    /// Spends the time of one verification, so that an unknown user name answers as
    /// slowly as a wrong password.
    pub fn verify_dummy(&self, password: &str) {
        let salt = SaltString::from_b64("cHJvYmFjdHJkdW1teXNhbHQ").ok();
        if let Some(salt) = salt {
            let _ = self.argon2().hash_password(password.as_bytes(), &salt);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_then_verify() -> anyhow::Result<()> {
        let hasher = Hasher::fast_for_tests();
        let phc = hasher.hash("correct horse battery")?;
        assert!(phc.starts_with("$argon2id$"));
        assert!(hasher.verify("correct horse battery", &phc));
        assert!(!hasher.verify("wrong", &phc));
        assert!(
            Hasher::default().verify("correct horse battery", &phc),
            "cost travels with the hash"
        );
        assert!(!hasher.verify("x", "not a hash"));
        Ok(())
    }

    #[test]
    fn strength_counts_characters() {
        assert_eq!(check_strength("short"), Err(WeakPassword));
        assert_eq!(check_strength("ééééééééééé"), Err(WeakPassword));
        assert!(check_strength("twelve chars").is_ok());
    }
}
