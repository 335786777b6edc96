//! `oidc_logins`: single sign-on logins under way at the provider, each found by the
//! digest of the value in the browser's cookie and taken once by the callback. Making
//! the random values and the cookie belongs to the manager; this module only stores them.

use std::time::Duration;

use sqlx::PgExecutor;

use super::StoreError;

/// What the callback of a login needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingLogin {
    /// The `state` sent to the provider, which must come back.
    pub state: String,
    /// The `nonce` the ID token must carry.
    pub nonce: String,
    /// The PKCE code verifier, proving to the provider that this client asked for the code.
    pub pkce_verifier: String,
}

/// Records a login that starts now, and forgets those older than `max_age`.
pub async fn create(
    db: impl PgExecutor<'_>,
    binding_hash: &str,
    login: &PendingLogin,
    max_age: Duration,
) -> Result<(), StoreError> {
    sqlx::query!(
        "WITH expired AS (
             DELETE FROM oidc_logins WHERE created_at < now() - make_interval(secs => $5))
         INSERT INTO oidc_logins (binding_hash, state, nonce, pkce_verifier) VALUES ($1, $2, $3, $4)",
        binding_hash,
        login.state,
        login.nonce,
        login.pkce_verifier,
        max_age.as_secs_f64()
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Takes (deletes and returns) the login of `binding_hash` if it started less than
/// `max_age` ago: a callback completes a login once.
pub async fn take(
    db: impl PgExecutor<'_>,
    binding_hash: &str,
    max_age: Duration,
) -> Result<Option<PendingLogin>, StoreError> {
    let row = sqlx::query!(
        "DELETE FROM oidc_logins WHERE binding_hash = $1
         RETURNING state, nonce, pkce_verifier, created_at > now() - make_interval(secs => $2) AS \"fresh!\"",
        binding_hash,
        max_age.as_secs_f64()
    )
    .fetch_optional(db)
    .await?;
    Ok(row.filter(|row| row.fresh).map(|row| PendingLogin {
        state: row.state,
        nonce: row.nonce,
        pkce_verifier: row.pkce_verifier,
    }))
}
