//! `alert_channels`: where alert messages go. A webhook's signing secret is stored sealed
//! (see [`crate::secrets`]) and never read back by the API.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;

use crate::model::ChannelKind;
use crate::secrets::Sealed;
use crate::store::StoreError;

/// A channel as the API shows it: its secret only as `has_secret`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Channel {
    /// Id.
    pub id: i64,
    /// Unique name.
    pub name: String,
    /// Kind.
    pub kind: ChannelKind,
    /// Public configuration: `url` (webhook, slack) or `to` (email).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub config: serde_json::Value,
    /// Whether a webhook signs its messages.
    pub has_secret: bool,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

/// What becomes of a channel's secret on an update.
#[derive(Debug, Clone)]
pub enum SecretChange {
    /// Left as it is.
    Keep,
    /// Replaced.
    Set(Sealed),
    /// Removed.
    Clear,
}

/// The outcome of deleting a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deleted {
    /// Gone.
    Yes,
    /// No such channel.
    NotFound,
    /// Rules (named) still send to it.
    InUse(Vec<String>),
}

/// Creates a channel.
pub async fn create(
    db: impl PgExecutor<'_>,
    name: &str,
    kind: ChannelKind,
    config: &serde_json::Value,
    secret: Option<&Sealed>,
) -> Result<Channel, StoreError> {
    Ok(sqlx::query_as!(
        Channel,
        r#"INSERT INTO alert_channels (name, kind, config, secret_key_id, secret_nonce, secret_sealed)
           VALUES ($1, $2, $3, $4, $5, $6)
           RETURNING id, name, kind AS "kind: ChannelKind", config, secret_sealed IS NOT NULL AS "has_secret!",
                     created_at, updated_at"#,
        name,
        kind as ChannelKind,
        config,
        secret.map(|s| s.key_id.as_str()),
        secret.map(|s| s.nonce.as_slice()),
        secret.map(|s| s.ciphertext.as_slice()),
    )
    .fetch_one(db)
    .await?)
}

/// Replaces a channel's name and configuration and changes its secret as told; None when
/// there is no such channel.
pub async fn update(
    db: impl PgExecutor<'_>,
    id: i64,
    name: &str,
    config: &serde_json::Value,
    secret: &SecretChange,
) -> Result<Option<Channel>, StoreError> {
    let (keep, sealed) = match secret {
        SecretChange::Keep => (true, None),
        SecretChange::Set(sealed) => (false, Some(sealed)),
        SecretChange::Clear => (false, None),
    };
    Ok(sqlx::query_as!(
        Channel,
        r#"UPDATE alert_channels
           SET name = $2, config = $3,
               secret_key_id = CASE WHEN $4 THEN secret_key_id ELSE $5 END,
               secret_nonce = CASE WHEN $4 THEN secret_nonce ELSE $6 END,
               secret_sealed = CASE WHEN $4 THEN secret_sealed ELSE $7 END,
               updated_at = now()
           WHERE id = $1
           RETURNING id, name, kind AS "kind: ChannelKind", config, secret_sealed IS NOT NULL AS "has_secret!",
                     created_at, updated_at"#,
        id,
        name,
        config,
        keep,
        sealed.map(|s| s.key_id.as_str()),
        sealed.map(|s| s.nonce.as_slice()),
        sealed.map(|s| s.ciphertext.as_slice()),
    )
    .fetch_optional(db)
    .await?)
}

/// One channel.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Channel>, StoreError> {
    Ok(sqlx::query_as!(
        Channel,
        r#"SELECT id, name, kind AS "kind: ChannelKind", config, secret_sealed IS NOT NULL AS "has_secret!",
                  created_at, updated_at
           FROM alert_channels WHERE id = $1"#,
        id
    )
    .fetch_optional(db)
    .await?)
}

/// Every channel, by name.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<Channel>, StoreError> {
    Ok(sqlx::query_as!(
        Channel,
        r#"SELECT id, name, kind AS "kind: ChannelKind", config, secret_sealed IS NOT NULL AS "has_secret!",
                  created_at, updated_at
           FROM alert_channels ORDER BY name"#
    )
    .fetch_all(db)
    .await?)
}

/// The ids among `ids` that name no channel.
pub async fn missing(db: impl PgExecutor<'_>, ids: &[i64]) -> Result<Vec<i64>, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT wanted AS "id!" FROM unnest($1::bigint[]) AS wanted
           WHERE NOT EXISTS (SELECT 1 FROM alert_channels WHERE id = wanted)"#,
        ids
    )
    .fetch_all(db)
    .await?)
}

/// Deletes a channel unless a rule sends to it.
pub async fn delete(conn: &mut sqlx::PgConnection, id: i64) -> Result<Deleted, StoreError> {
    let users = sqlx::query_scalar!(
        "SELECT alert_rules.name FROM alert_rules JOIN alert_rule_channels ON rule_id = alert_rules.id
         WHERE channel_id = $1 ORDER BY alert_rules.name",
        id
    )
    .fetch_all(&mut *conn)
    .await?;
    if !users.is_empty() {
        return Ok(Deleted::InUse(users));
    }
    let gone = sqlx::query!("DELETE FROM alert_channels WHERE id = $1", id)
        .execute(&mut *conn)
        .await?;
    Ok(if gone.rows_affected() == 1 {
        Deleted::Yes
    } else {
        Deleted::NotFound
    })
}

/// The sealed secrets of channels sealed under another key than `key_id` (a rotation).
pub async fn secrets_under_other_keys(
    db: impl PgExecutor<'_>,
    key_id: &str,
) -> Result<Vec<(i64, Sealed)>, StoreError> {
    let rows = sqlx::query!(
        r#"SELECT id, secret_key_id AS "key_id!", secret_nonce AS "nonce!", secret_sealed AS "sealed!"
           FROM alert_channels WHERE secret_key_id IS NOT NULL AND secret_key_id <> $1"#,
        key_id
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            (
                row.id,
                Sealed {
                    key_id: row.key_id,
                    nonce: row.nonce,
                    ciphertext: row.sealed,
                },
            )
        })
        .collect())
}

/// Stores a channel's secret sealed anew (a rotation); false when the channel is gone.
pub async fn reseal_secret(db: impl PgExecutor<'_>, id: i64, sealed: &Sealed) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "UPDATE alert_channels SET secret_key_id = $2, secret_nonce = $3, secret_sealed = $4
         WHERE id = $1 AND secret_key_id IS NOT NULL",
        id,
        sealed.key_id,
        sealed.nonce,
        sealed.ciphertext
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}
