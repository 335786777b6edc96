//! Flash messages: what an action did ("Job nightly paused", "Run #123 queued"), said
//! once on the page the action leads to.
//!
//! The action's redirect sets a short-lived cookie holding the message; the next page
//! shows it ([`super::AdminUser::layout`]) and [`clear_after_showing`] expires the
//! cookie in that page's response, so a reload does not show it again. The cookie holds
//! nothing but the text, which templates escape like everything else.

use axum::extract::Request;
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use crate::auth::session;

/// The flash cookie's name.
pub const COOKIE: &str = "probactr_flash";

/// How long a message waits for the page that shows it.
const MAX_AGE_SECS: u64 = 60;

/// The longest message kept (a job name can be long).
const MAX_LEN: usize = 300;

/// `redirect`, saying `message` on the page it leads to.
pub fn redirect(redirect: Redirect, message: &str) -> Response {
    let mut response = redirect.into_response();
    let text: String = message.chars().take(MAX_LEN).collect();
    let value = super::encode_component(&text);
    response.headers_mut().append(
        header::SET_COOKIE,
        session::cookie_header(COOKIE, &value, "/", MAX_AGE_SECS, false),
    );
    response
}

/// Back to `to` after a restore, saying which version `version` became (`now`).
pub fn restored(to: &str, version: i64, now: i64) -> Response {
    redirect(
        Redirect::to(to),
        &format!("Version {version} restored as version {now}"),
    )
}

/// To the page of run `run`, just queued; `how` (when any) says from what.
pub fn run_queued(run: i64, how: Option<String>) -> Response {
    let message = match how {
        None => format!("Run #{run} queued"),
        Some(how) => format!("Run #{run} queued: {how}"),
    };
    redirect(Redirect::to(&format!("/runs/{run}")), &message)
}

/// What a pause (`paused`) or a resume did, as its message says it.
pub fn paused_or_resumed(paused: bool) -> &'static str {
    if paused {
        "paused"
    } else {
        "resumed"
    }
}

/// The message a request carries, if any.
pub fn read(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|cookies| cookies.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| decode_component(value))
        .filter(|text| !text.is_empty())
}

/// Expires the flash cookie once a page (not a redirect, not an error) was answered to
/// a request that carried it: that page showed the message.
pub async fn clear_after_showing(request: Request, next: Next) -> Response {
    let carried = read(request.headers()).is_some();
    let mut response = next.run(request).await;
    let is_page = response.status() == StatusCode::OK
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|kind| kind.starts_with("text/html"));
    if carried && is_page {
        response.headers_mut().append(
            header::SET_COOKIE,
            session::cookie_header(COOKIE, "", "/", 0, false),
        );
    }
    response
}

/// The inverse of [`super::encode_component`] (invalid escapes are kept as they are).
fn decode_component(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_survive_the_cookie() {
        let message = "Job «nightly; 50% off» paused";
        let response = redirect(Redirect::to("/jobs"), message);
        let set = response.headers()[header::SET_COOKIE]
            .to_str()
            .unwrap_or_default()
            .to_owned();
        let value = set.split(';').next().unwrap_or_default().to_owned();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            format!("other=1; {value}").parse().expect("a header"),
        );
        assert_eq!(read(&headers).as_deref(), Some(message));
    }
}
