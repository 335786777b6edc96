//! Webhook triggers: their settings (the signing secret sealed, bound to the trigger),
//! their URL's token (made at creation and on rotation, shown once, stored as a digest),
//! the list of their deliveries, and receiving a delivery: find the trigger by the token,
//! then signature, pause, rate, repeat and parameters, each refusal recorded with its reason,
//! else a run of the trigger's job with the parameters the body maps to.

use axum::http::{HeaderMap, StatusCode};
use chrono::Utc;
use probactr_common::json_path::JsonPath;
use probactr_common::secrets::{Keyring, Owner};
use probactr_common::store::trigger_webhooks::{self, Receiver, Settings, Signature, HMAC_SHA256};
use probactr_common::store::webhook_deliveries::{self, Delivery, NewDelivery};
use probactr_common::store::{self, audit::Change};
use serde::Serialize;
use serde_json::{json, Map, Value};
use sqlx::PgConnection;

use super::webhook_signature;
use super::{Handles, Paged};
use crate::auth::secret;
use crate::auth::Principal;
use crate::command::params;
use crate::command::webhook::WebhookDraft;
use crate::error::ApiError;

/// What precedes the random part of a webhook token (recognisable in logs and scanners).
pub const TOKEN_PREFIX: &str = "whk_";

/// The path of a webhook's URL.
pub fn hook_path(token: &str) -> String {
    format!("/hooks/{token}")
}

/// A new webhook token and its digest.
fn new_token() -> (String, String) {
    let token = format!("{TOKEN_PREFIX}{}", secret::random_hex());
    let digest = secret::digest(&token);
    (token, digest)
}

/// The URL of a webhook, shown once (on creation and on rotation).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct HookUrl {
    /// `POST` here to start a run (the manager's `PROBACTR_PUBLIC_URL` and the path).
    pub url: String,
    /// The path alone: `/hooks/{token}`.
    pub path: String,
}

impl HookUrl {
    fn new(handles: &Handles, token: &str) -> HookUrl {
        let path = hook_path(token);
        HookUrl {
            url: format!("{}{path}", handles.public_url),
            path,
        }
    }
}

/// Makes the webhook of a newly created trigger; returns its URL's token.
pub async fn create_in(
    conn: &mut PgConnection,
    keys: Option<&Keyring>,
    trigger_id: i64,
    draft: &WebhookDraft,
) -> Result<String, ApiError> {
    let settings = Settings {
        signature: sealed_signature(keys, trigger_id, draft, None)?,
        params_from: params_from(draft, None),
        dedup_header: draft.dedup_header.clone().flatten(),
        rate_per_minute: draft.rate_or(None),
    };
    let (token, digest) = new_token();
    trigger_webhooks::insert(&mut *conn, trigger_id, &digest, &settings).await?;
    Ok(token)
}

/// Lays an edit's webhook fields over the stored settings.
pub async fn update_in(
    conn: &mut PgConnection,
    keys: Option<&Keyring>,
    trigger_id: i64,
    draft: &WebhookDraft,
) -> Result<(), ApiError> {
    if !draft.is_given() {
        return Ok(());
    }
    let stored = trigger_webhooks::of_triggers(&mut *conn, &[trigger_id])
        .await?
        .pop()
        .ok_or_else(|| ApiError::not_found("trigger", trigger_id))?;
    let stored_signature = trigger_webhooks::signature(&mut *conn, trigger_id).await?;
    let settings = Settings {
        signature: sealed_signature(keys, trigger_id, draft, stored_signature)?,
        params_from: params_from(draft, Some(stored.params_from)),
        dedup_header: match &draft.dedup_header {
            Some(given) => given.clone(),
            None => stored.dedup_header,
        },
        rate_per_minute: draft.rate_or(Some(stored.rate_per_minute)),
    };
    trigger_webhooks::update(&mut *conn, trigger_id, &settings).await?;
    Ok(())
}

fn params_from(draft: &WebhookDraft, stored: Option<Value>) -> Value {
    match &draft.params_from {
        Some(Some(map)) => Value::Object(map.clone()),
        Some(None) => json!({}),
        None => stored.unwrap_or_else(|| json!({})),
    }
}

fn sealed_signature(
    keys: Option<&Keyring>,
    trigger_id: i64,
    draft: &WebhookDraft,
    stored: Option<Signature>,
) -> Result<Option<Signature>, ApiError> {
    let spec = match &draft.signature {
        None => return Ok(stored),
        Some(None) => return Ok(None),
        Some(Some(spec)) => spec,
    };
    let keys = keys.ok_or_else(|| {
        ApiError::field(
            "signature.secret",
            "this manager has no PROBACTR_SECRET_KEY to seal it",
        )
    })?;
    Ok(Some(Signature {
        header: spec.header.clone(),
        prefix: spec.prefix.clone(),
        algorithm: HMAC_SHA256.to_owned(),
        secret: keys.seal(&Owner::WebhookSecret(trigger_id), &spec.secret),
    }))
}

/// Gives a webhook trigger a new token: the previous URL stops working at once; the new
/// one is shown this once.
pub async fn rotate_token(handles: &Handles, who: &Principal, id: i64) -> Result<HookUrl, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let trigger = store::triggers::get_for_update(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))?;
    let namespace = super::triggers::namespace_of(&mut tx, who, &trigger).await?;
    who.require_operator(&namespace, "rotate webhook tokens")?;
    let (token, digest) = new_token();
    if !trigger_webhooks::set_token(&mut *tx, id, &digest).await? {
        return Err(ApiError::Conflict(format!(
            "trigger {id} is not a webhook: it has no token"
        )));
    }
    let change = Change {
        action: "trigger.rotate_token",
        object_type: "trigger",
        object_id: Some(id),
        before: None,
        after: None,
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(trigger.id = id, "webhook token rotated");
    Ok(HookUrl::new(handles, &token))
}

/// The URL of a token just made (for the answer that shows it once).
pub fn url_of(handles: &Handles, token: &str) -> HookUrl {
    HookUrl::new(handles, token)
}

/// A webhook trigger's deliveries, newest first.
pub async fn deliveries(
    handles: &Handles,
    who: &Principal,
    id: i64,
    limit: i64,
    offset: i64,
) -> Result<Paged<Delivery>, ApiError> {
    let trigger = super::triggers::get(handles, who, id).await?;
    let (items, total) = webhook_deliveries::list(&handles.pool, trigger.id, limit, offset).await?;
    Ok(Paged { items, total })
}

/// The answer to a delivery.
#[derive(Debug, Clone, Serialize)]
pub struct Reply {
    /// The status.
    #[serde(skip)]
    pub status: StatusCode,
    /// The run started (or, for a repeat, the first delivery's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<i64>,
    /// Whether it repeated a delivery already accepted.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Reply {
    fn refused(status: StatusCode, reason: impl Into<String>) -> Reply {
        Reply {
            status,
            run_id: None,
            duplicate: false,
            error: Some(reason.into()),
        }
    }
}

/// Receives a delivery to the webhook of `token`. An unknown token is a 404 that records
/// nothing (it names no trigger); every other delivery is recorded with its outcome.
pub async fn receive(
    handles: &Handles,
    token: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let Some(receiver) = trigger_webhooks::receiver_for_update(&mut tx, &secret::digest(token)).await? else {
        return Err(ApiError::not_found("hook", "?"));
    };
    let delivery_id = receiver
        .settings
        .dedup_header
        .as_deref()
        .and_then(|name| headers.get(name))
        .and_then(|value| value.to_str().ok())
        .map(|value| value.chars().take(200).collect::<String>());
    let reply = decide(&mut tx, handles, &receiver, headers, body, delivery_id.as_deref()).await?;
    let outcome = match (reply.run_id, reply.duplicate) {
        (_, true) => "duplicate",
        (Some(_), false) => "accepted",
        (None, false) => "refused",
    };
    webhook_deliveries::record(
        &mut *tx,
        &NewDelivery {
            trigger_id: receiver.trigger_id,
            delivery_id: delivery_id.as_deref(),
            outcome,
            status: i32::from(reply.status.as_u16()),
            reason: reply.error.as_deref(),
            run_id: reply.run_id,
        },
    )
    .await?;
    tx.commit().await?;
    tracing::info!(trigger.id = receiver.trigger_id, job.id = receiver.job_id, run.id = ?reply.run_id,
        status = reply.status.as_u16(), outcome, "webhook delivery");
    Ok(reply)
}

async fn decide(
    conn: &mut PgConnection,
    handles: &Handles,
    receiver: &Receiver,
    headers: &HeaderMap,
    body: &[u8],
    delivery_id: Option<&str>,
) -> Result<Reply, ApiError> {
    let settings = &receiver.settings;
    if let Some(signature) = &settings.signature {
        let keys = handles.secret_keys.as_deref().ok_or_else(|| {
            ApiError::Unavailable(
                "this manager has no PROBACTR_SECRET_KEY to open the webhook secret".to_owned(),
            )
        })?;
        let secret = keys
            .open(&Owner::WebhookSecret(receiver.trigger_id), &signature.secret)
            .map_err(|err| ApiError::Internal(err.into()))?;
        let header = headers
            .get(signature.header.as_str())
            .and_then(|v| v.to_str().ok());
        let timestamped = webhook_signature::is_timestamped(&signature.header, &signature.prefix);
        if let Err(err) = webhook_signature::verify(
            header,
            &signature.prefix,
            timestamped,
            &secret,
            body,
            Utc::now().timestamp(),
        ) {
            return Ok(Reply::refused(StatusCode::UNAUTHORIZED, err.to_string()));
        }
    }
    // Only after the signature: a sender without the secret learns nothing of the
    // trigger's state and is not counted against its rate.
    if receiver.paused {
        return Ok(Reply::refused(
            StatusCode::CONFLICT,
            "the trigger or its job is paused",
        ));
    }
    let counted = webhook_deliveries::counted_last_minute(&mut *conn, receiver.trigger_id).await?;
    if counted >= i64::from(settings.rate_per_minute) {
        return Ok(Reply::refused(
            StatusCode::TOO_MANY_REQUESTS,
            format!("more than {} deliveries a minute", settings.rate_per_minute),
        ));
    }
    if let Some(delivery_id) = delivery_id {
        if let Some(run_id) =
            webhook_deliveries::accepted_run(&mut *conn, receiver.trigger_id, delivery_id).await?
        {
            return Ok(Reply {
                status: StatusCode::OK,
                run_id,
                duplicate: true,
                error: None,
            });
        }
    }
    let params = match mapped_params(&settings.params_from, body) {
        Ok(params) => params,
        Err(reason) => return Ok(Reply::refused(StatusCode::UNPROCESSABLE_ENTITY, reason)),
    };
    let trigger_params = store::triggers::params_of(&mut *conn, &[receiver.trigger_id])
        .await?
        .pop()
        .map_or_else(|| json!({}), |(_, params)| params);
    let checked = own_params(
        receiver.params_schema.as_ref(),
        &trigger_params,
        &params,
        handles.secret_keys.as_deref(),
    );
    let params = match checked {
        Ok(params) => params,
        Err(ApiError::Invalid(fields)) => {
            let reason = fields
                .iter()
                .map(|(field, message)| format!("{field}: {message}"))
                .collect::<Vec<_>>()
                .join("; ");
            return Ok(Reply::refused(StatusCode::UNPROCESSABLE_ENTITY, reason));
        }
        Err(other) => return Err(other),
    };
    let runs = store::runs::queue_delivered(&mut *conn, receiver.job_id, receiver.trigger_id).await?;
    let Some(first) = runs.first() else {
        return Ok(Reply::refused(StatusCode::CONFLICT, "the job has nowhere to run"));
    };
    if params.as_object().is_some_and(|p| !p.is_empty()) {
        for run in &runs {
            store::run_inputs::set_params(&mut *conn, run.id, &params).await?;
        }
    }
    Ok(Reply {
        status: StatusCode::ACCEPTED,
        run_id: Some(first.id),
        duplicate: false,
        error: None,
    })
}

/// A delivery's own parameters: those the body maps to, each checked (and sealed when
/// secret) but no default filled in, so that the run sees them over its trigger's
/// `params` (`probactr_run_params`) and the schema's defaults under both (filled when it
/// starts). Together with the trigger's, they must give every required parameter.
fn own_params(
    schema: Option<&Value>,
    trigger_params: &Value,
    mapped: &Value,
    keys: Option<&Keyring>,
) -> Result<Value, ApiError> {
    let own = params::checked(schema, mapped, params::Given::Part, keys, "params")?;
    let mut seen = trigger_params.as_object().cloned().unwrap_or_default();
    seen.extend(own.as_object().cloned().unwrap_or_default());
    params::complete(schema, &Value::Object(seen), "params")?;
    Ok(own)
}

/// The run parameters `params_from` maps the body to: a path that names nothing leaves
/// its parameter out (to its default, or to the schema's verdict).
fn mapped_params(params_from: &Value, body: &[u8]) -> Result<Value, String> {
    let Some(mapping) = params_from.as_object().filter(|m| !m.is_empty()) else {
        return Ok(json!({}));
    };
    let document: Value = serde_json::from_slice(body)
        .map_err(|_| "the body is not JSON, and params_from reads it".to_owned())?;
    let mut params = Map::new();
    for (name, path) in mapping {
        let path = path
            .as_str()
            .and_then(|text| JsonPath::parse(text).ok())
            .ok_or_else(|| format!("params_from.{name} is not a path"))?;
        if let Some(value) = path.find(&document).filter(|v| !v.is_null()) {
            params.insert(name.clone(), value.clone());
        }
    }
    Ok(Value::Object(params))
}
