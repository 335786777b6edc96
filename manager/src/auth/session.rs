//! The web admin's session cookie: a random id (only its SHA-256 is stored), HttpOnly
//! and SameSite=Strict (and Secure when `PROBACTR_COOKIE_SECURE` is set: behind HTTPS),
//! replaced by a new id at every login, deleted at logout and when the password changes,
//! with an idle and an absolute timeout.

use std::time::Duration;

use axum::http::{header, HeaderMap, HeaderValue};
use probactr_common::store::{self, StoreError};
use sqlx::{PgExecutor, PgPool};

use super::{secret, Principal, Via};

/// The cookie's name.
pub const COOKIE_NAME: &str = "probactr_session";

/// A session unused for this long is over.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// A session is over this long after login, used or not.
pub const ABSOLUTE_TIMEOUT: Duration = Duration::from_secs(12 * 60 * 60);

/// The session cookie's value, if the request carries one.
pub fn cookie(headers: &HeaderMap) -> Option<String> {
    cookie_named(headers, COOKIE_NAME).filter(|value| !value.is_empty())
}

/// The value of the request's cookie `cookie`, trimmed, if it carries one.
pub fn cookie_named(headers: &HeaderMap, cookie: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == cookie)
        .map(|(_, value)| value.trim().to_owned())
}

/// A `Set-Cookie` value: `name=value` with `path`, `max_age` seconds and the attributes
/// every cookie of the site carries (HttpOnly, SameSite=Strict, and Secure when `secure`).
pub fn cookie_header(name: &str, value: &str, path: &str, max_age: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let text = format!("{name}={value}; Path={path}; HttpOnly; SameSite=Strict{secure}; Max-Age={max_age}");
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("invalid=; Max-Age=0"))
}

/// `Set-Cookie` that installs a session (`secure`: `PROBACTR_COOKIE_SECURE`).
pub fn set_cookie(value: &str, secure: bool) -> HeaderValue {
    cookie_header(COOKIE_NAME, value, "/", ABSOLUTE_TIMEOUT.as_secs(), secure)
}

/// `Set-Cookie` that removes the session cookie.
pub fn clear_cookie(secure: bool) -> HeaderValue {
    cookie_header(COOKIE_NAME, "", "/", 0, secure)
}

/// The caller behind a session cookie, if the session is valid.
pub async fn principal(pool: &PgPool, cookie: &str) -> Result<Option<Principal>, StoreError> {
    let Some(h) = store::sessions::holder(pool, &secret::digest(cookie), IDLE_TIMEOUT).await? else {
        return Ok(None);
    };
    Ok(Some(Principal {
        user_id: h.user_id,
        access: super::session_access(pool, h.user_id).await?,
        via: Via::Session {
            csrf: h.csrf_token.unwrap_or_default(),
            cookie: cookie.to_owned(),
        },
        username: h.username,
        changing: false,
    }))
}

/// A new session of `user_id`; returns the cookie value (the only copy of the secret).
pub async fn start(db: impl PgExecutor<'_>, user_id: i64) -> Result<String, StoreError> {
    let cookie = secret::random_hex();
    store::sessions::create(
        db,
        &secret::digest(&cookie),
        user_id,
        &secret::random_hex(),
        ABSOLUTE_TIMEOUT,
    )
    .await?;
    Ok(cookie)
}

/// Ends the session of a cookie (logout, or the old one at a new login).
pub async fn end(db: impl PgExecutor<'_>, cookie: &str) -> Result<(), StoreError> {
    store::sessions::delete(db, &secret::digest(cookie)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cookie_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; probactr_session=abc ; b=2"),
        );
        assert_eq!(cookie(&headers).as_deref(), Some("abc"));
        let mut none = HeaderMap::new();
        none.append(header::COOKIE, HeaderValue::from_static("probactr_session="));
        assert_eq!(cookie(&none), None);
        let set = set_cookie("xyz", false);
        let text = set.to_str().unwrap_or_default();
        assert!(text.starts_with("probactr_session=xyz; Path=/;"), "{text}");
        assert!(text.contains("HttpOnly") && text.contains("SameSite=Strict"));
        assert!(!text.contains("Secure"));
        let secure = set_cookie("xyz", true);
        assert!(secure.to_str().unwrap_or_default().contains("; Secure"));
        let cleared = clear_cookie(true);
        let text = cleared.to_str().unwrap_or_default();
        assert!(
            text.starts_with("probactr_session=;") && text.ends_with("Max-Age=0"),
            "{text}"
        );
        assert!(text.contains("; Secure"));
    }
}
