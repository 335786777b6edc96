//! The web admin: server-rendered HTML over the same [`crate::service`] operations as
//! the API, with plain forms that work without JavaScript (the trigger form's preview
//! is a second submit button; lists refresh with a meta refresh). `static/app.js`
//! enhances where it helps: local time zones, and a live preview on the trigger form.
//!
//! Security: pages need the session cookie ([`AdminUser`], otherwise a redirect to the
//! login page); every state-changing form carries the session's CSRF token, checked by
//! [`FormPost`]; nothing changes state on GET; templates escape everything; the CSP
//! header allows no script but the site's own file. Actions say what they did on the
//! page they lead to ([`flash`]).

mod alerts;
mod cluster;
mod csrf;
mod dashboard;
mod definitions;
pub mod flash;
mod forms;
mod jobs;
mod ledger;
mod login;
mod namespaces;
mod pools;
mod runs;
mod secrets;
pub mod templates;
mod triggers;
mod users;
mod workflow_form;
mod workflows;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use minijinja::Value;

use crate::auth::{oidc, session, Principal, Role, Via};
use crate::error::{ApiError, FieldErrors};
use crate::input::{check, Page, QueryParams};
use crate::state::AppState;

use csrf::check_csrf;
pub use csrf::FormPost;
pub use forms::FormData;

/// Routes of the web admin.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(dashboard::dashboard))
        .route("/login", get(login::page).post(login::submit))
        .route("/logout", post(login::logout))
        .route("/auth/oidc/login", get(login::sso_start))
        .route(oidc::CALLBACK_PATH, get(login::sso_callback))
        .route("/namespace", get(switch_namespace))
        .route("/namespaces", get(namespaces::page).post(namespaces::create))
        .route("/namespaces/{name}", post(namespaces::update))
        .route("/namespaces/{name}/delete", post(namespaces::delete))
        .route("/jobs", get(jobs::list))
        .route("/jobs/new", get(jobs::new_form).post(jobs::create))
        .route("/jobs/{id}", get(jobs::show))
        .route("/jobs/{id}/edit", get(jobs::edit_form).post(jobs::update))
        .route("/jobs/{id}/pause", post(jobs::set_paused::<true>))
        .route("/jobs/{id}/resume", post(jobs::set_paused::<false>))
        .route("/jobs/{id}/run", post(jobs::run_now))
        .route("/jobs/{id}/delete", post(jobs::delete))
        .route(
            "/jobs/{id}/triggers/new",
            get(triggers::new_form).post(triggers::create),
        )
        .route(
            "/triggers/{id}/edit",
            get(triggers::edit_form).post(triggers::update),
        )
        .route("/triggers/{id}/ledger", get(ledger::page))
        .route("/triggers/{id}/backfill", post(ledger::backfill))
        .route("/triggers/{id}/pause", post(triggers::set_paused::<true>))
        .route("/triggers/{id}/resume", post(triggers::set_paused::<false>))
        .route("/triggers/{id}/delete", post(triggers::delete))
        .route(
            "/triggers/{id}/versions/{version}/restore",
            post(triggers::restore_version),
        )
        .route("/workflows", get(workflows::list))
        .route("/workflows/{id}", get(workflows::show))
        .route("/workflows/{id}/run", post(workflows::run_now))
        .route("/runs", get(runs::list))
        .route("/runs/{id}", get(runs::show))
        .route("/runs/{id}/cancel", post(runs::cancel))
        .route("/runs/{id}/rerun", post(runs::rerun))
        .route("/runs/{id}/retry", post(runs::retry))
        .route(
            "/jobs/{id}/versions/{version}/restore",
            post(jobs::restore_version),
        )
        .route("/runs/{id}/output.txt", get(runs::download_output))
        .route("/executors", get(cluster::executors))
        .route("/executors/{id}/{action}", post(cluster::route_executor))
        .route("/audit", get(cluster::audit))
        .route("/definitions", get(definitions::page).post(definitions::upload))
        .route("/definitions.yaml", get(definitions::download))
        .route("/alerts", get(alerts::page))
        .route("/alerts/channels", post(alerts::create_channel))
        .route("/alerts/channels/{id}/test", post(alerts::test_channel))
        .route("/alerts/channels/{id}/delete", post(alerts::delete_channel))
        .route("/alerts/rules", post(alerts::create_rule))
        .route("/alerts/rules/{id}/delete", post(alerts::delete_rule))
        .route("/notifications", get(alerts::notifications))
        .route("/pools", get(pools::list))
        .route("/secrets", get(secrets::list).post(secrets::set))
        .route("/secrets/{name}/delete", post(secrets::delete))
        .route("/users", get(users::list).post(users::create))
        .route("/users/{id}", post(users::update))
        .route("/account", get(users::account))
        .route("/account/password", post(users::change_password))
        .route("/account/tokens", post(users::create_token))
        .route("/tokens/{id}/revoke", post(users::revoke_token))
        // Workflows: create, edit, pause, runs, triggers and versions.
        .route("/workflows/new", get(workflows::new_form).post(workflows::create))
        .route(
            "/workflows/{id}/edit",
            get(workflows::edit_form).post(workflows::update),
        )
        .route("/workflows/{id}/pause", post(workflows::set_paused::<true>))
        .route("/workflows/{id}/resume", post(workflows::set_paused::<false>))
        .route(
            "/workflows/{id}/triggers/new",
            get(workflows::new_trigger).post(workflows::create_trigger),
        )
        .route(
            "/workflows/{id}/triggers/{trigger_id}/delete",
            post(workflows::delete_trigger),
        )
        .route(
            "/workflows/{id}/versions/{version}/restore",
            post(workflows::restore_version),
        )
        .route("/workflow-runs/{id}/cancel", post(workflows::cancel_run))
        .route(
            "/workflow-runs/{id}/steps/{name}/retry",
            post(workflows::retry_step),
        )
        .route("/account/time-zone", post(users::set_time_zone))
        .route(
            "/alerts/rules/{id}",
            get(alerts::edit_rule).post(alerts::update_rule),
        )
        .route(
            "/alerts/channels/{id}",
            get(alerts::edit_channel).post(alerts::update_channel),
        )
        .route("/static/style.css", get(stylesheet))
        .route("/static/app.js", get(script))
        .layer(axum::middleware::from_fn(flash::clear_after_showing))
}

async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        include_str!("../../static/style.css"),
    )
}

async fn script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        include_str!("../../static/app.js"),
    )
}

/// A page's failure: the login page for a missing session, else an error page.
#[derive(Debug)]
pub enum AdminError {
    /// No valid session: go log in.
    Login,
    /// Anything else, shown as an error page with the error's status.
    Api(ApiError),
}

impl From<ApiError> for AdminError {
    fn from(err: ApiError) -> Self {
        AdminError::Api(err)
    }
}

impl From<sqlx::Error> for AdminError {
    fn from(err: sqlx::Error) -> Self {
        AdminError::Api(err.into())
    }
}

impl From<probactr_common::store::StoreError> for AdminError {
    fn from(err: probactr_common::store::StoreError) -> Self {
        AdminError::Api(err.into())
    }
}

impl From<anyhow::Error> for AdminError {
    fn from(err: anyhow::Error) -> Self {
        AdminError::Api(err.into())
    }
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        match self {
            AdminError::Login | AdminError::Api(ApiError::Unauthorized) => {
                Redirect::to("/login").into_response()
            }
            AdminError::Api(err) => {
                let err = err.normalized();
                err.log();
                let status = err.status_code();
                let message = match &err {
                    ApiError::Internal(_) => "Something went wrong on our side; it was logged.".to_owned(),
                    // A bad query parameter (a page's filter or sort): name each.
                    ApiError::Invalid(fields) => {
                        let named: Vec<String> = fields
                            .iter()
                            .map(|(field, why)| format!("{field}: {why}"))
                            .collect();
                        format!("{err}: {}", named.join("; "))
                    }
                    other => other.to_string(),
                };
                let mut response = (status, Html(error_page(status, &message))).into_response();
                if matches!(err, ApiError::Busy) {
                    crate::error::mark_busy(&mut response);
                }
                response
            }
        }
    }
}

/// `text` with the five HTML-special characters escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            other => out.push(other),
        }
    }
    out
}

fn error_page(status: StatusCode, message: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{status} · probactr</title>\
         <link rel=\"stylesheet\" href=\"/static/style.css\"></head><body><main><h1>{status}</h1>\
         <div class=\"alert bad\">{}</div><p><a href=\"/\">Back to the dashboard</a></p></main></body></html>",
        escape(message)
    )
}

/// The signed-in user of an admin page (session cookie only; bearer tokens are for the
/// API), with the flash message the request carries and the namespaces the pages show.
#[derive(Debug, Clone)]
pub struct AdminUser(pub Principal, pub Option<String>, pub Scope);

/// The namespaces of the header's switcher: every one the user sees, and the one chosen
/// (kept in a cookie across pages; None: all of them).
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The namespaces the user sees, by name.
    pub namespaces: Vec<String>,
    /// The one the pages are narrowed to.
    pub chosen: Option<String>,
    /// The header's maintenance notes: each window open now, then the next to open.
    pub maintenance: Vec<String>,
    /// The zone the user reads times in (None: the browser's own).
    pub time_zone: Option<String>,
}

/// The cookie keeping the switcher's choice.
pub const NAMESPACE_COOKIE: &str = "probactr_namespace";

impl FromRequestParts<AppState> for AdminUser {
    type Rejection = AdminError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let cookie = session::cookie(&parts.headers).ok_or(AdminError::Login)?;
        let mut principal = session::principal(&state.handles.pool, &cookie)
            .await?
            .ok_or(AdminError::Login)?;
        if !parts.method.is_safe() {
            crate::auth::note_writer(parts, &mut principal);
        }
        let flash = flash::read(&parts.headers);
        let namespaces = match principal.access.visible() {
            Some(names) => names,
            None => probactr_common::store::namespaces::names(&state.handles.pool)
                .await
                .map_err(ApiError::from)?,
        };
        // A choice the user no longer sees is forgotten (it shows all they see).
        let chosen = chosen_namespace(&parts.headers).filter(|name| namespaces.contains(name));
        let maintenance = maintenance_notes(&crate::service::maintenance::outlook(&state.handles).await?);
        let time_zone = crate::service::users::own_time_zone(&state.handles, &principal).await?;
        Ok(AdminUser(
            principal,
            flash,
            Scope {
                namespaces,
                chosen,
                maintenance,
                time_zone,
            },
        ))
    }
}

/// The header's lines about maintenance: the windows open now, and the next one.
fn maintenance_notes(outlook: &crate::service::maintenance::Outlook) -> Vec<String> {
    let until = |window: &probactr_common::maintenance::Window| {
        window.plan.until.map_or_else(
            || "until resumed".to_owned(),
            |until| format!("until {}", until.format("%Y-%m-%d %H:%M UTC")),
        )
    };
    let mut notes: Vec<String> = outlook
        .active
        .iter()
        .map(|window| {
            format!(
                "Maintenance now ({}, {}): {}",
                window.plan.policy.as_str(),
                until(window),
                window.reason_text()
            )
        })
        .collect();
    if let Some(next) = &outlook.next {
        notes.push(format!(
            "Next maintenance from {} ({}, {}): {}",
            next.plan.from.format("%Y-%m-%d %H:%M UTC"),
            next.plan.policy.as_str(),
            until(next),
            next.reason_text()
        ));
    }
    notes
}

/// The switcher's choice a request's cookies carry.
fn chosen_namespace(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == NAMESPACE_COOKIE)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// `GET /namespace?name=NAME&next=PATH`: the header's switcher; an empty name shows
/// every namespace again.
pub async fn switch_namespace(
    State(state): State<AppState>,
    user: AdminUser,
    query: QueryParams,
) -> Response {
    let name = query.text("name").unwrap_or_default().trim().to_owned();
    let value = if user.2.namespaces.contains(&name) {
        name
    } else {
        String::new()
    };
    let next = query
        .text("next")
        .filter(|next| is_local_path(next))
        .unwrap_or("/")
        .to_owned();
    let max_age = if value.is_empty() { 0 } else { 365 * 24 * 3600 };
    let cookie = session::cookie_header(NAMESPACE_COOKIE, &value, "/", max_age, state.cookie_secure);
    let mut response = Redirect::to(&next).into_response();
    response
        .headers_mut()
        .append(axum::http::header::SET_COOKIE, cookie);
    response
}

impl AdminUser {
    /// The session's CSRF token.
    pub fn csrf(&self) -> &str {
        match &self.0.via {
            Via::Session { csrf, .. } => csrf,
            Via::Token(_) => "",
        }
    }

    /// The namespace the switcher narrowed the pages to (None: every one the user sees).
    pub fn namespace(&self) -> Option<&str> {
        self.2.chosen.as_deref()
    }

    /// The namespace the definitions page downloads and uploads: the chosen one, else
    /// `default` when the user sees it, else the first they see.
    pub fn definitions_namespace(&self) -> Option<&str> {
        self.namespace().or_else(|| {
            let default = probactr_common::store::namespaces::DEFAULT;
            if self.0.access.sees(default) {
                Some(default)
            } else {
                self.2.namespaces.first().map(String::as_str)
            }
        })
    }

    /// The namespaces a list shows: the chosen one, or every one the user sees (None
    /// for a cluster admin: all).
    pub fn listing(&self) -> Option<Vec<String>> {
        self.0.access.listing(self.namespace())
    }

    /// The namespaces where the user may do what `allowed` says of a role (the create
    /// forms' choices), the chosen one first.
    pub fn namespaces_where(&self, allowed: impl Fn(Role) -> bool) -> Vec<String> {
        let mut names: Vec<String> = self
            .2
            .namespaces
            .iter()
            .filter(|name| self.0.access.role_in(name).is_some_and(&allowed))
            .cloned()
            .collect();
        if let Some(chosen) = self.namespace() {
            if let Some(at) = names.iter().position(|name| name == chosen) {
                let first = names.remove(at);
                names.insert(0, first);
            }
        }
        names
    }

    /// What every page's layout needs: the user, the CSRF token, the active section, the
    /// namespace switcher.
    pub fn layout(&self, active: &str) -> Value {
        let who = &self.0;
        let best = who.access.best_role();
        minijinja::context! {
            user => minijinja::context! {
                username => who.username,
                role => if who.access.cluster_admin { "cluster admin" } else { best.map_or("no role", |role| role.as_str()) },
                can_operate => best.is_some_and(|role| role.can_operate()),
                is_admin => best.is_some_and(|role| role.is_admin()),
                cluster_admin => who.access.cluster_admin,
            },
            csrf => self.csrf(),
            active => active,
            flash => self.1,
            namespaces => self.2.namespaces,
            namespace => self.2.chosen,
            maintenance => self.2.maintenance,
            time_zone => self.2.time_zone,
        }
    }
}

/// Renders a template with a context.
pub fn render(state: &AppState, name: &str, context: Value) -> Result<Html<String>, AdminError> {
    let template = state.templates.get_template(name).map_err(anyhow::Error::from)?;
    let html = template.render(context).map_err(anyhow::Error::from)?;
    Ok(Html(html))
}

/// Renders a template with a status other than 200 (forms with errors).
pub fn render_status(
    state: &AppState,
    status: StatusCode,
    name: &str,
    context: Value,
) -> Result<Response, AdminError> {
    Ok((status, render(state, name, context)?).into_response())
}

/// Where to go after an action: the form's `next` when it is a path of this site, else
/// `fallback` (never an absolute or scheme-relative URL: no open redirect).
pub fn next_or(form: &FormData, fallback: &str) -> Redirect {
    match form.get("next") {
        Some(next) if is_local_path(next) => Redirect::to(next),
        _ => Redirect::to(fallback),
    }
}

/// A path of this site: it starts with one `/`, and holds no backslash (browsers read
/// it as `/`) and no control character or white space (browsers drop tabs and line
/// breaks, so `/\t/evil.example` would become `//evil.example`).
fn is_local_path(next: &str) -> bool {
    next.starts_with('/')
        && !next.starts_with("//")
        && !next.contains('\\')
        && !next.chars().any(|c| c.is_control() || c.is_whitespace())
}

/// Position of a page in a list, for the pager.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Pager {
    /// 1-based index of the first item shown.
    pub first: i64,
    /// 1-based index of the last item shown.
    pub last: i64,
    /// Items in all.
    pub total: i64,
    /// Offset of the previous page.
    pub prev: Option<i64>,
    /// Offset of the next page.
    pub next: Option<i64>,
}

impl Pager {
    /// The pager of `shown` items at `page` out of `total`.
    pub fn new(page: Page, shown: usize, total: i64) -> Pager {
        let shown = shown as i64;
        Pager {
            first: if shown == 0 { 0 } else { page.offset + 1 },
            last: page.offset + shown,
            total,
            prev: (page.offset > 0).then(|| (page.offset - page.limit).max(0)),
            next: (page.offset + shown < total).then_some(page.offset + page.limit),
        }
    }
}

/// A list page's position, and what `filter` reads of the rest of its query: one 400
/// that names every bad parameter of both.
pub fn page_and_filter<F>(
    query: &QueryParams,
    filter: impl FnOnce(&QueryParams, &mut FieldErrors) -> F,
) -> Result<(Page, F), ApiError> {
    let mut errors = FieldErrors::new();
    let page = query.page(&mut errors);
    let filter = filter(query, &mut errors);
    check(errors)?;
    Ok((page, filter))
}

/// Percent-encodes a query-string component.
pub fn encode_component(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_of_this_site_are_followed() {
        for good in ["/", "/jobs/3", "/runs?state=failed&offset=50"] {
            assert!(is_local_path(good), "{good}");
        }
        for bad in [
            "//evil.example/",
            "/\\evil.example/",
            "/\t/evil.example/",
            "/\n/evil.example",
            "/ /evil.example",
            "https://evil.example/",
            "javascript:alert(1)",
            "",
        ] {
            assert!(!is_local_path(bad), "{bad:?} was followed");
        }
    }

    #[test]
    fn escaping_and_encoding() {
        assert_eq!(
            escape("<a href='x'>&\"</a>"),
            "&lt;a href=&#x27;x&#x27;&gt;&amp;&quot;&lt;/a&gt;"
        );
        assert_eq!(encode_component("a b&c/é"), "a%20b%26c%2F%C3%A9");
    }

    #[test]
    fn pager_edges() {
        let page = crate::input::Page { limit: 10, offset: 0 };
        let p = Pager::new(page, 10, 25);
        assert_eq!((p.first, p.last, p.prev, p.next), (1, 10, None, Some(10)));
        let last = Pager::new(
            crate::input::Page {
                limit: 10,
                offset: 20,
            },
            5,
            25,
        );
        assert_eq!(
            (last.first, last.last, last.prev, last.next),
            (21, 25, Some(10), None)
        );
        let empty = Pager::new(page, 0, 0);
        assert_eq!((empty.first, empty.last, empty.next), (0, 0, None));
    }
}
