//! Random secrets (session ids, CSRF tokens, API tokens) and how they are stored: the
//! client holds 256 random bits, the database only their SHA-256.

use sha2::{Digest, Sha256};

/// Prefix of API tokens, so a leaked one is recognisable in logs and scanners.
pub const TOKEN_PREFIX: &str = "pat_";

/// 256 random bits as hex.
pub fn random_hex() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

/// A new API token.
pub fn new_api_token() -> String {
    format!("{TOKEN_PREFIX}{}", random_hex())
}

/// What the database stores for a secret.
pub fn digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Compares two secrets in constant time.
pub fn same(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_random_and_digested() {
        let a = new_api_token();
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() == TOKEN_PREFIX.len() + 64);
        assert_ne!(a, new_api_token());
        assert_eq!(digest("x").len(), 64);
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "ab"));
    }
}
