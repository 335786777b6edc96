//! The login rate limit: at most [`MAX_FAILURES`] failed logins per user name and client
//! address in [`WINDOW`]. Failures are rows in PostgreSQL, so every manager replica
//! counts the same ones; a successful login clears the key's failures.

use std::net::IpAddr;
use std::time::Duration;

use probactr_common::cidr::Cidr;
use probactr_common::config::LocalLogin;
use probactr_common::store;

use crate::error::ApiError;
use crate::state::AppState;

/// Failed logins allowed per user and address in [`WINDOW`].
pub const MAX_FAILURES: i64 = 5;

/// How long a failure counts.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);

/// The client's address: the socket's peer, or, when the peer is a trusted proxy
/// (`PROBACTR_TRUSTED_PROXIES`), the rightmost address of `X-Forwarded-For` that is not
/// itself a trusted proxy ("unknown" when served without connect info, as in tests).
/// From anyone else the header is ignored: anyone can forge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAddr(pub String);

impl axum::extract::FromRequestParts<AppState> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|info| info.0.ip());
        let Some(peer) = peer else {
            return Ok(ClientAddr("unknown".to_owned()));
        };
        let forwarded = parts
            .headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .collect::<Vec<_>>()
            .join(",");
        Ok(ClientAddr(
            client_address(peer, &forwarded, &state.trusted_proxies).to_string(),
        ))
    }
}

/// The client behind `peer`: walking `X-Forwarded-For` from the right while the hop is a
/// trusted proxy, the first hop that is not (or the last trusted one, when all are).
fn client_address(peer: IpAddr, forwarded_for: &str, trusted: &[Cidr]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|range| range.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    let mut client = peer;
    for hop in forwarded_for
        .rsplit(',')
        .map(str::trim)
        .filter(|hop| !hop.is_empty())
    {
        let Ok(hop) = hop.parse::<IpAddr>() else {
            // A hop that is not an address ends what can be believed.
            break;
        };
        client = hop;
        if !is_trusted(&hop) {
            break;
        }
    }
    client
}

/// Whether user `user_id` is a cluster admin (the break-glass user must be).
async fn is_cluster_admin(state: &AppState, user_id: i64) -> Result<bool, ApiError> {
    let mut conn = state.handles.pool.acquire().await?;
    Ok(store::user_roles::get(&mut conn, user_id).await?.cluster_admin)
}

/// Why a password login is refused when `PROBACTR_LOCAL_LOGIN` is false.
pub const LOCAL_LOGIN_OFF: &str = "password login is turned off on this cluster: sign in with single sign-on";

/// Checks a user name and password under the rate limit: each attempt is counted as a
/// failure before the password is checked (so a burst of concurrent attempts evaluates
/// at most [`MAX_FAILURES`]), and a successful one clears the key's failures. The error
/// is the same whether the user exists or not. With password logins off, only the
/// break-glass user gets this far (403 for the others).
pub async fn authenticate(
    state: &AppState,
    username: &str,
    password: &str,
    address: &str,
) -> Result<store::users::User, ApiError> {
    // Password logins turned off (single sign-on only) spare the break-glass user alone;
    // refused before anything is looked up, so the answer tells nothing about the user.
    if !state.local_login.allows(username) {
        tracing::info!(username, address, "password login refused: local login is off");
        return Err(ApiError::Forbidden(LOCAL_LOGIN_OFF.to_owned()));
    }
    let reserved =
        store::login_failures::reserve(&state.handles.pool, username, address, WINDOW, MAX_FAILURES).await?;
    if let Some(retry_after_secs) = reserved {
        tracing::warn!(username, address, "login rate limit engaged");
        return Err(ApiError::TooManyAttempts { retry_after_secs });
    }
    let user = store::users::by_name(&state.handles.pool, username).await?;
    let stored = user
        .as_ref()
        .filter(|user| !user.disabled)
        .map(|user| user.password_hash.as_str());
    let verified = state.handles.hasher.verify_blocking(password, stored).await;
    match user {
        Some(user) if verified => {
            store::login_failures::clear(&state.handles.pool, username, address).await?;
            if state.local_login != LocalLogin::Open && !is_cluster_admin(state, user.id).await? {
                tracing::warn!(
                    user.id = user.id,
                    username,
                    "break-glass login refused: not a cluster admin"
                );
                return Err(ApiError::Forbidden(LOCAL_LOGIN_OFF.to_owned()));
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("a test address")
    }

    #[test]
    fn forwarded_for_is_believed_only_from_trusted_proxies() {
        let trusted: Vec<Cidr> = ["10.0.0.0/8".parse().expect("a test range")].into();
        // No proxy: the header is whatever the client wrote.
        assert_eq!(
            client_address(ip("203.0.113.9"), "1.2.3.4", &trusted),
            ip("203.0.113.9")
        );
        // One proxy: the rightmost hop it added.
        assert_eq!(
            client_address(ip("10.0.0.2"), "1.2.3.4, 198.51.100.7", &trusted),
            ip("198.51.100.7")
        );
        // Two proxies in a row: past the trusted hops.
        assert_eq!(
            client_address(ip("10.0.0.2"), "1.2.3.4, 198.51.100.7, 10.0.0.3", &trusted),
            ip("198.51.100.7")
        );
        // No header, or garbage: the proxy itself.
        assert_eq!(client_address(ip("10.0.0.2"), "", &trusted), ip("10.0.0.2"));
        assert_eq!(
            client_address(ip("10.0.0.2"), "not-an-ip", &trusted),
            ip("10.0.0.2")
        );
        // Without trusted proxies the header never counts.
        assert_eq!(
            client_address(ip("10.0.0.2"), "198.51.100.7", &[]),
            ip("10.0.0.2")
        );
    }
}
