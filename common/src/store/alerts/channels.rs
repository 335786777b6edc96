//! `alert_channels`: where alert messages go. A webhook's signing secret and the URL of a
//! webhook or Slack channel (itself a credential) are stored sealed, bound to the
//! channel's id (see [`crate::secrets`]), and never read back by the API: `config.url`
//! holds only a masked form.

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
    /// The namespace it belongs to: only that namespace's rules send to it.
    pub namespace: String,
    /// Name, unique within its namespace.
    pub name: String,
    /// Kind.
    pub kind: ChannelKind,
    /// Public configuration: `url` (webhook, slack: masked, as `https://host/***`; the
    /// URL itself is sealed) or `to` (email).
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

/// A channel to create: its id reserved first ([`reserve_id`]), since its sealed values
/// are bound to it.
#[derive(Debug, Clone)]
pub struct NewChannel<'a> {
    /// The reserved id.
    pub id: i64,
    /// Its namespace.
    pub namespace: &'a str,
    /// Name, unique within its namespace.
    pub name: &'a str,
    /// Kind.
    pub kind: ChannelKind,
    /// Public configuration (a URL only masked).
    pub config: &'a serde_json::Value,
    /// The sealed signing secret (webhook).
    pub secret: Option<&'a Sealed>,
    /// The sealed URL (webhook, slack).
    pub url: Option<&'a Sealed>,
}

/// Takes the id of a channel about to be created (its sealed values are bound to it).
pub async fn reserve_id(db: impl PgExecutor<'_>) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar!(r#"SELECT nextval(pg_get_serial_sequence('alert_channels', 'id')) AS "id!""#)
            .fetch_one(db)
            .await?,
    )
}

/// Creates a channel under its reserved id.
pub async fn create(db: impl PgExecutor<'_>, new: &NewChannel<'_>) -> Result<Channel, StoreError> {
    let (secret, url) = (new.secret, new.url);
    Ok(sqlx::query_as!(
        Channel,
        r#"INSERT INTO alert_channels (id, name, kind, config, secret_key_id, secret_nonce, secret_sealed,
                                      secret_bound, url_key_id, url_nonce, url_sealed, url_bound, namespace)
           OVERRIDING SYSTEM VALUE
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
           RETURNING id, namespace, name, kind AS "kind: ChannelKind", config, secret_sealed IS NOT NULL AS "has_secret!",
                     created_at, updated_at"#,
        new.id,
        new.name,
        new.kind as ChannelKind,
        new.config,
        secret.map(|s| s.key_id.as_str()),
        secret.map(|s| s.nonce.as_slice()),
        secret.map(|s| s.ciphertext.as_slice()),
        secret.is_none_or(|s| s.bound),
        url.map(|s| s.key_id.as_str()),
        url.map(|s| s.nonce.as_slice()),
        url.map(|s| s.ciphertext.as_slice()),
        url.is_none_or(|s| s.bound),
        new.namespace,
    )
    .fetch_one(db)
    .await?)
}

/// Replaces a channel's name and configuration, changes its secret as told and its URL
/// when given; None when there is no such channel.
pub async fn update(
    db: impl PgExecutor<'_>,
    id: i64,
    name: &str,
    config: &serde_json::Value,
    secret: &SecretChange,
    url: Option<&Sealed>,
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
               secret_bound = CASE WHEN $4 THEN secret_bound ELSE $8 END,
               url_key_id = COALESCE($9, url_key_id),
               url_nonce = COALESCE($10, url_nonce),
               url_sealed = COALESCE($11, url_sealed),
               url_bound = COALESCE($12, url_bound),
               updated_at = now()
           WHERE id = $1
           RETURNING id, namespace, name, kind AS "kind: ChannelKind", config, secret_sealed IS NOT NULL AS "has_secret!",
                     created_at, updated_at"#,
        id,
        name,
        config,
        keep,
        sealed.map(|s| s.key_id.as_str()),
        sealed.map(|s| s.nonce.as_slice()),
        sealed.map(|s| s.ciphertext.as_slice()),
        sealed.is_none_or(|s| s.bound),
        url.map(|s| s.key_id.as_str()),
        url.map(|s| s.nonce.as_slice()),
        url.map(|s| s.ciphertext.as_slice()),
        url.map(|s| s.bound),
    )
    .fetch_optional(db)
    .await?)
}

/// One channel.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Channel>, StoreError> {
    Ok(sqlx::query_as!(
        Channel,
        r#"SELECT id, namespace, name, kind AS "kind: ChannelKind", config, secret_sealed IS NOT NULL AS "has_secret!",
                  created_at, updated_at
           FROM alert_channels WHERE id = $1"#,
        id
    )
    .fetch_optional(db)
    .await?)
}

/// Every channel, by namespace and name.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<Channel>, StoreError> {
    Ok(sqlx::query_as!(
        Channel,
        r#"SELECT id, namespace, name, kind AS "kind: ChannelKind", config, secret_sealed IS NOT NULL AS "has_secret!",
                  created_at, updated_at
           FROM alert_channels ORDER BY namespace, name"#
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

/// A channel's sealed values, to seal anew (a rotation, or binding values of earlier
/// releases).
#[derive(Debug, Clone)]
pub struct SealedParts {
    /// The channel.
    pub id: i64,
    /// Its kind.
    pub kind: ChannelKind,
    /// Its configuration: the URL in the clear (channels of releases before sealed URLs)
    /// or masked.
    pub config: serde_json::Value,
    /// Its sealed signing secret.
    pub secret: Option<Sealed>,
    /// Its sealed URL.
    pub url: Option<Sealed>,
}

/// The columns of a channel the rotation and the binding read.
struct SealedRow {
    id: i64,
    kind: ChannelKind,
    config: serde_json::Value,
    secret_key_id: Option<String>,
    secret_nonce: Option<Vec<u8>>,
    secret_sealed: Option<Vec<u8>>,
    secret_bound: bool,
    url_key_id: Option<String>,
    url_nonce: Option<Vec<u8>>,
    url_sealed: Option<Vec<u8>>,
    url_bound: bool,
}

impl From<SealedRow> for SealedParts {
    fn from(row: SealedRow) -> SealedParts {
        SealedParts {
            id: row.id,
            kind: row.kind,
            config: row.config,
            secret: Sealed::from_nullable_columns(
                row.secret_key_id,
                row.secret_nonce,
                row.secret_sealed,
                row.secret_bound,
            ),
            url: Sealed::from_nullable_columns(row.url_key_id, row.url_nonce, row.url_sealed, row.url_bound),
        }
    }
}

/// Channel `id`'s kind, configuration and sealed values (what sending through it takes).
pub async fn sealed_parts(db: impl PgExecutor<'_>, id: i64) -> Result<Option<SealedParts>, StoreError> {
    let row = sqlx::query_as!(
        SealedRow,
        r#"SELECT id, kind AS "kind: ChannelKind", config, secret_key_id, secret_nonce, secret_sealed, secret_bound,
                  url_key_id, url_nonce, url_sealed, url_bound
           FROM alert_channels WHERE id = $1"#,
        id
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(SealedParts::from))
}

/// The channels with a value sealed under another key than `key_id` (a rotation).
pub async fn sealed_under_other_keys(
    db: impl PgExecutor<'_>,
    key_id: &str,
) -> Result<Vec<SealedParts>, StoreError> {
    let rows = sqlx::query_as!(
        SealedRow,
        r#"SELECT id, kind AS "kind: ChannelKind", config, secret_key_id, secret_nonce, secret_sealed, secret_bound,
                  url_key_id, url_nonce, url_sealed, url_bound
           FROM alert_channels WHERE secret_key_id <> $1 OR url_key_id <> $1 ORDER BY id"#,
        key_id
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(SealedParts::from).collect())
}

/// The channels an earlier release left with a value sealed unbound or a URL in the
/// clear, locked until the transaction ends (a channel changed meanwhile is re-read).
pub async fn unbound(conn: &mut sqlx::PgConnection) -> Result<Vec<SealedParts>, StoreError> {
    let rows = sqlx::query_as!(
        SealedRow,
        r#"SELECT id, kind AS "kind: ChannelKind", config, secret_key_id, secret_nonce, secret_sealed, secret_bound,
                  url_key_id, url_nonce, url_sealed, url_bound
           FROM alert_channels
           WHERE (secret_sealed IS NOT NULL AND NOT secret_bound)
              OR (url_sealed IS NOT NULL AND NOT url_bound)
              OR (kind IN ('webhook', 'slack') AND url_sealed IS NULL)
           ORDER BY id FOR UPDATE"#
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(SealedParts::from).collect())
}

/// Stores a channel's values sealed anew, each when given, and its configuration (with
/// the URL masked once it is sealed); false when the channel is gone.
pub async fn reseal(
    db: impl PgExecutor<'_>,
    id: i64,
    config: &serde_json::Value,
    secret: Option<&Sealed>,
    url: Option<&Sealed>,
) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "UPDATE alert_channels
         SET config = $2,
             secret_key_id = COALESCE($3, secret_key_id), secret_nonce = COALESCE($4, secret_nonce),
             secret_sealed = COALESCE($5, secret_sealed), secret_bound = COALESCE($6, secret_bound),
             url_key_id = COALESCE($7, url_key_id), url_nonce = COALESCE($8, url_nonce),
             url_sealed = COALESCE($9, url_sealed), url_bound = COALESCE($10, url_bound)
         WHERE id = $1",
        id,
        config,
        secret.map(|s| s.key_id.as_str()),
        secret.map(|s| s.nonce.as_slice()),
        secret.map(|s| s.ciphertext.as_slice()),
        secret.map(|s| s.bound),
        url.map(|s| s.key_id.as_str()),
        url.map(|s| s.nonce.as_slice()),
        url.map(|s| s.ciphertext.as_slice()),
        url.map(|s| s.bound),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The namespace of each alert channel, by id.
pub async fn namespaces(
    db: impl PgExecutor<'_>,
) -> Result<std::collections::HashMap<i64, String>, StoreError> {
    Ok(sqlx::query!("SELECT id, namespace FROM alert_channels")
        .fetch_all(db)
        .await?
        .into_iter()
        .map(|row| (row.id, row.namespace))
        .collect())
}
