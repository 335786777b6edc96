//! `/api/v1/pools`: scarce things a namespace's jobs share, `{name, slots, rate}`. A job
//! takes one with `pool` and `pool_slots`; its runs wait queued while the pool is full or
//! its rate allows no start.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use probactr_common::model::Rate;
use probactr_common::store::pools::Pool;
use serde_json::Value;

use super::bodies::{NewPoolBody, PoolSlotsBody};
use super::listing::list_handler;
use super::named::{delete_named, get_named};
use crate::auth::Principal;
use crate::command::rate;
use crate::error::{ApiError, ErrorBody};
use crate::input::{ApiJson, Input, QueryParams};
use crate::service::pools::{self, PoolChange, PoolView, MAX_SLOTS};
use crate::service::Paged;
use crate::state::AppState;

list_handler! {
    /// Every pool the caller sees, with the slots used now.
    pools -> Pool { path: "/pools", operation_id: "list_pools", tag: "pools",
        namespace: "Only this namespace's pools (default: every namespace the caller sees)",
        ok: "The pools", otherwise: "Not signed in, or a server error" }
}

/// Create a pool (admins of its namespace).
#[utoipa::path(post, path = "/pools", operation_id = "create_pool", tag = "pools",
    request_body = NewPoolBody,
    responses(
        (status = CREATED, description = "Created", body = Pool),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = CONFLICT, description = "The namespace already has a pool so named", body = ErrorBody),
        (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Pool>), ApiError> {
    let mut input = Input::new(body)?;
    let name = input.required_text("name");
    let namespace = input.namespace();
    let slots = input.int("slots", 1, MAX_SLOTS);
    let slots = input.required("slots", slots);
    let rate = read_rate(&mut input).flatten();
    input.finish()?;
    let pool = pools::create(
        &state.handles,
        &who,
        &namespace,
        &name.unwrap_or_default(),
        slots.unwrap_or_default() as i32,
        rate,
    )
    .await?;
    Ok((StatusCode::CREATED, Json(pool)))
}

get_named! {
    /// A pool: its slots, the runs holding them and how many wait.
    pools -> PoolView { path: "/pools/{name}", operation_id: "get_pool", tag: "pools",
        name: "The pool", missing: "No such pool" }
}

/// Change a pool's slots, its rate or both (admins of its namespace). Runs holding slots
/// keep them; starts already counted count against a new rate.
#[utoipa::path(patch, path = "/pools/{name}", operation_id = "update_pool", tag = "pools",
    params(("name" = String, Path, description = "The pool"),
           ("namespace" = Option<String>, Query, description = "Its namespace (default: default)")),
    request_body = PoolSlotsBody,
    responses(
        (status = OK, description = "The pool", body = Pool),
        (status = NOT_FOUND, description = "No such pool", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn update(
    State(state): State<AppState>,
    who: Principal,
    Path(name): Path<String>,
    query: QueryParams,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Pool>, ApiError> {
    let mut input = Input::new(body)?;
    let slots = input.int("slots", 1, MAX_SLOTS);
    let slots = input.not_null("slots", slots);
    let rate = read_rate(&mut input);
    if slots.is_none() && rate.is_none() && !input.has_errors() {
        input.error("slots", "give slots, rate or both");
    }
    input.finish()?;
    let namespace = query.namespace();
    let change = PoolChange {
        slots: slots.map(|slots| slots as i32),
        rate,
    };
    let pool = pools::update(&state.handles, &who, namespace, &name, change).await?;
    Ok(Json(pool))
}

/// The body's `rate`: absent (None), null (`Some(None)`: no bound) or a rate; a bad one
/// is recorded against `rate.limit`, `rate.per_secs` or `rate`.
fn read_rate(input: &mut Input) -> Option<Option<Rate>> {
    let given = input.raw("rate")?;
    rate::checked(&given, &mut |field: &str, message: String| {
        input.error(field, message)
    })
}

delete_named! {
    /// Delete a pool (admins of its namespace); 409 naming the jobs that take it.
    pools { path: "/pools/{name}", operation_id: "delete_pool", tag: "pools",
        name: "The pool", missing: "No such pool", conflict: "Jobs take it (named)" }
}
