//! `trigger_webhooks`: what a webhook trigger has besides its `triggers` row — the digest
//! of its URL's token, its signature checking (the secret sealed, bound to the trigger,
//! never read back by the API), how its body maps to run parameters, the header that
//! names a delivery, and its rate. Deliveries look their trigger up by the token's digest.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgExecutor};

use super::StoreError;
use crate::secrets::Sealed;

/// Deliveries a webhook accepts per minute when its trigger does not say.
pub const DEFAULT_RATE_PER_MINUTE: i32 = 60;

/// The one signature algorithm webhooks check.
pub const HMAC_SHA256: &str = "hmac-sha256";

/// A webhook's settings as the API shows them: the secret only as `has_secret`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Webhook {
    /// Its trigger.
    pub trigger_id: i64,
    /// The header carrying the signature (None: deliveries are not signed).
    pub signature_header: Option<String>,
    /// What precedes the hex signature in that header (`sha256=`).
    pub signature_prefix: String,
    /// `hmac-sha256` when signed.
    pub signature_algorithm: Option<String>,
    /// Whether a signing secret is stored.
    pub has_secret: bool,
    /// Run parameter name to path into the JSON body.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub params_from: serde_json::Value,
    /// The header naming a delivery, for repeats within 24 h.
    pub dedup_header: Option<String>,
    /// Deliveries accepted per minute.
    pub rate_per_minute: i32,
    /// When the URL's token was made.
    pub token_rotated_at: DateTime<Utc>,
}

/// Signature checking as stored.
#[derive(Debug, Clone)]
pub struct Signature {
    /// The header carrying it.
    pub header: String,
    /// What precedes the hex MAC in the header.
    pub prefix: String,
    /// The algorithm (`hmac-sha256`).
    pub algorithm: String,
    /// The secret, sealed for [`crate::secrets::Owner::WebhookSecret`].
    pub secret: Sealed,
}

/// A webhook's settings as written.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Signature checking (None: none).
    pub signature: Option<Signature>,
    /// Run parameter name to path into the JSON body.
    pub params_from: serde_json::Value,
    /// The header naming a delivery.
    pub dedup_header: Option<String>,
    /// Deliveries accepted per minute.
    pub rate_per_minute: i32,
}

/// A write of a webhook's settings: `$pre` (its trigger, and the token's digest at
/// creation) first, then the settings in one order (a missing signature binds NULLs and an
/// empty prefix).
macro_rules! write_settings {
    ($sql:tt, $settings:ident, [$($pre:expr),*]) => {{
        let signature = $settings.signature.as_ref();
        sqlx::query!(
            $sql,
            $($pre,)*
            signature.map(|s| s.header.as_str()),
            signature.map_or("", |s| s.prefix.as_str()),
            signature.map(|s| s.algorithm.as_str()),
            signature.map(|s| s.secret.key_id.as_str()),
            signature.map(|s| s.secret.nonce.as_slice()),
            signature.map(|s| s.secret.ciphertext.as_slice()),
            $settings.params_from,
            $settings.dedup_header,
            $settings.rate_per_minute
        )
    }};
}

/// Creates the webhook of a trigger with the digest of its token.
pub async fn insert(
    db: impl PgExecutor<'_>,
    trigger_id: i64,
    token_digest: &str,
    settings: &Settings,
) -> Result<(), StoreError> {
    write_settings!(
        "INSERT INTO trigger_webhooks (trigger_id, token_digest, signature_header, signature_prefix,
                                       signature_algorithm, secret_key_id, secret_nonce, secret_sealed,
                                       params_from, dedup_header, rate_per_minute)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        settings,
        [trigger_id, token_digest]
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Replaces a webhook's settings (its token stays).
pub async fn update(db: impl PgExecutor<'_>, trigger_id: i64, settings: &Settings) -> Result<(), StoreError> {
    write_settings!(
        "UPDATE trigger_webhooks
         SET signature_header = $2, signature_prefix = $3, signature_algorithm = $4, secret_key_id = $5,
             secret_nonce = $6, secret_sealed = $7, params_from = $8, dedup_header = $9, rate_per_minute = $10
         WHERE trigger_id = $1",
        settings,
        [trigger_id]
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The trigger whose webhook's token has this digest, unlocked.
async fn trigger_of_token(db: impl PgExecutor<'_>, token_digest: &str) -> Result<Option<i64>, StoreError> {
    Ok(
        sqlx::query_scalar::<_, i64>("SELECT trigger_id FROM trigger_webhooks WHERE token_digest = $1")
            .bind(token_digest)
            .fetch_optional(db)
            .await?,
    )
}

/// Replaces a webhook's token by another (the previous URL stops working at once); false
/// when the trigger has no webhook.
pub async fn set_token(
    db: impl PgExecutor<'_>,
    trigger_id: i64,
    token_digest: &str,
) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "UPDATE trigger_webhooks SET token_digest = $2, token_rotated_at = now() WHERE trigger_id = $1",
        trigger_id,
        token_digest
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The webhooks of the given triggers (those that have one).
pub async fn of_triggers(db: impl PgExecutor<'_>, trigger_ids: &[i64]) -> Result<Vec<Webhook>, StoreError> {
    Ok(sqlx::query_as!(
        Webhook,
        r#"SELECT trigger_id, signature_header, signature_prefix, signature_algorithm,
                  secret_sealed IS NOT NULL AS "has_secret!", params_from, dedup_header, rate_per_minute,
                  token_rotated_at
           FROM trigger_webhooks WHERE trigger_id = ANY($1) ORDER BY trigger_id"#,
        trigger_ids
    )
    .fetch_all(db)
    .await?)
}

/// The stored signature of a trigger's webhook (None: unsigned, or no webhook).
pub async fn signature(db: impl PgExecutor<'_>, trigger_id: i64) -> Result<Option<Signature>, StoreError> {
    let row = sqlx::query!(
        "SELECT signature_header, signature_prefix, signature_algorithm, secret_key_id, secret_nonce, secret_sealed
         FROM trigger_webhooks WHERE trigger_id = $1",
        trigger_id
    )
    .fetch_optional(db)
    .await?;
    Ok(row.and_then(|row| {
        signature_of(
            row.signature_header,
            row.signature_prefix,
            row.signature_algorithm,
            Sealed::from_nullable_columns(row.secret_key_id, row.secret_nonce, row.secret_sealed, true),
        )
    }))
}

/// The signature secrets of webhooks sealed under another key than `key_id`, by trigger
/// id (what a key rotation re-seals).
pub async fn secrets_under_other_keys(
    db: impl PgExecutor<'_>,
    key_id: &str,
) -> Result<Vec<(i64, Sealed)>, StoreError> {
    let rows = sqlx::query!(
        r#"SELECT trigger_id, secret_key_id AS "key_id!", secret_nonce AS "nonce!", secret_sealed AS "ciphertext!"
           FROM trigger_webhooks
           WHERE secret_sealed IS NOT NULL AND secret_key_id <> $1 ORDER BY trigger_id"#,
        key_id
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            (
                row.trigger_id,
                Sealed::from_columns(row.key_id, row.nonce, row.ciphertext, true),
            )
        })
        .collect())
}

/// Replaces the signature secret of trigger `trigger_id`'s webhook, sealed as `was`, by
/// the same secret sealed anew; false when it changed meanwhile (an edit's new secret
/// is kept, not overwritten by the old one).
pub async fn reseal_secret(
    db: impl PgExecutor<'_>,
    trigger_id: i64,
    was: &Sealed,
    sealed: &Sealed,
) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "UPDATE trigger_webhooks SET secret_key_id = $3, secret_nonce = $4, secret_sealed = $5
         WHERE trigger_id = $1 AND secret_nonce = $2",
        trigger_id,
        was.nonce.as_slice(),
        sealed.key_id.as_str(),
        sealed.nonce.as_slice(),
        sealed.ciphertext.as_slice()
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// What a delivery needs of the webhook its token names, with its trigger and job.
#[derive(Debug, Clone)]
pub struct Receiver {
    /// The trigger.
    pub trigger_id: i64,
    /// Its job.
    pub job_id: i64,
    /// The job's namespace.
    pub namespace: String,
    /// The trigger or its job is paused.
    pub paused: bool,
    /// The job's declared parameters.
    pub params_schema: Option<serde_json::Value>,
    /// The settings.
    pub settings: Settings,
}

/// The webhook whose token has this digest, locked for the rest of the transaction so
/// that deliveries to one trigger are decided one at a time (its rate and its repeats
/// are then exact); None when no webhook has it.
///
/// Locks in the one order of every writer of a webhook (rotate-token, edits): its
/// `triggers` row first, then its `trigger_webhooks` row. Locking the webhook first would
/// deadlock against them, since the delivery's inserts take a key-share lock on the
/// `triggers` row they refer to.
pub async fn receiver_for_update(
    conn: &mut PgConnection,
    token_digest: &str,
) -> Result<Option<Receiver>, StoreError> {
    let Some(trigger_id) = trigger_of_token(&mut *conn, token_digest).await? else {
        return Ok(None);
    };
    if super::triggers::get_for_update(&mut *conn, trigger_id)
        .await?
        .is_none()
    {
        return Ok(None);
    }
    // A rotation committed in between leaves this token naming nothing: the select below
    // then finds no row.
    let row = sqlx::query!(
        r#"SELECT hooks.trigger_id, triggers.job_id, jobs.namespace, (triggers.paused OR jobs.paused) AS "paused!",
                  jobs.params_schema, hooks.signature_header, hooks.signature_prefix, hooks.signature_algorithm,
                  hooks.secret_key_id, hooks.secret_nonce, hooks.secret_sealed, hooks.params_from,
                  hooks.dedup_header, hooks.rate_per_minute
           FROM trigger_webhooks AS hooks
           JOIN triggers ON triggers.id = hooks.trigger_id
           JOIN jobs ON jobs.id = triggers.job_id
           WHERE hooks.token_digest = $1 AND jobs.deleted_at IS NULL
           FOR UPDATE OF hooks"#,
        token_digest
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|row| {
        let signature = signature_of(
            row.signature_header,
            row.signature_prefix,
            row.signature_algorithm,
            Sealed::from_nullable_columns(row.secret_key_id, row.secret_nonce, row.secret_sealed, true),
        );
        Receiver {
            trigger_id: row.trigger_id,
            job_id: row.job_id,
            namespace: row.namespace,
            paused: row.paused,
            params_schema: row.params_schema,
            settings: Settings {
                signature,
                params_from: row.params_from,
                dedup_header: row.dedup_header,
                rate_per_minute: row.rate_per_minute,
            },
        }
    }))
}

/// A webhook's signature check from its nullable columns (None: it checks none).
fn signature_of(
    header: Option<String>,
    prefix: String,
    algorithm: Option<String>,
    secret: Option<Sealed>,
) -> Option<Signature> {
    Some(Signature {
        header: header?,
        prefix,
        algorithm: algorithm?,
        secret: secret?,
    })
}
