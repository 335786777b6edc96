//! The login rate limit: at most [`MAX_FAILURES`] failed logins per user name and client
//! address in [`WINDOW`]. Failures are rows in PostgreSQL, so every manager replica
//! counts the same ones; a successful login clears the key's failures.

use std::time::Duration;

use probactr_common::store;

use crate::error::ApiError;
use crate::state::AppState;

/// Failed logins allowed per user and address in [`WINDOW`].
pub const MAX_FAILURES: i64 = 5;

/// How long a failure counts.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);

/// The client's address as the socket saw it ("unknown" when served without connect
/// info, as in tests). Proxies' forwarding headers are not trusted: anyone can forge them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAddr(pub String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        let address = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|info| info.0.ip().to_string())
            .unwrap_or_else(|| "unknown".to_owned());
        Ok(ClientAddr(address))
    }
}

/// Checks a user name and password under the rate limit: each attempt is counted as a
/// failure before the password is checked (so a burst of concurrent attempts evaluates
/// at most [`MAX_FAILURES`]), and a successful one clears the key's failures. The error
/// is the same whether the user exists or not.
pub async fn authenticate(
    state: &AppState,
    username: &str,
    password: &str,
    address: &str,
) -> Result<store::users::User, ApiError> {
    let reserved =
        store::login_failures::reserve(&state.pool, username, address, WINDOW, MAX_FAILURES).await?;
    if let Some(retry_after_secs) = reserved {
        tracing::warn!(username, address, "login rate limit engaged");
        return Err(ApiError::TooManyAttempts { retry_after_secs });
    }
    let user = store::users::by_name(&state.pool, username).await?;
    let verified = match &user {
        Some(user) if !user.disabled => state.hasher.verify(password, &user.password_hash),
        _ => {
            state.hasher.verify_dummy(password);
            false
        }
    };
    match user {
        Some(user) if verified => {
            store::login_failures::clear(&state.pool, username, address).await?;
            tracing::info!(user.id = user.id, username, "login");
            Ok(user)
        }
        _ => {
            // The failure was recorded when the attempt was reserved.
            tracing::info!(username, address, "failed login");
            Err(ApiError::Unauthorized)
        }
    }
}
