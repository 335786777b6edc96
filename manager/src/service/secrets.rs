//! Secrets: set (create or replace), list, delete, and re-seal under the current key
//! (admins). A value goes from the request straight into its sealed form: it is never
//! returned, logged or audited, only its name is.

use probactr_common::params_schema;
use probactr_common::secrets::{self, Keyring, Owner};
use probactr_common::store::{self, audit::Change, secrets::SecretInfo};
use serde::Serialize;
use serde_json::json;

use super::Handles;
use crate::auth::{Principal, Role};
use crate::error::{ApiError, FieldErrors};
use crate::input::check;

/// The longest value accepted.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;

fn keys(handles: &Handles) -> Result<&Keyring, ApiError> {
    handles.secret_keys.as_deref().ok_or_else(|| {
        ApiError::Conflict(
            "secrets are off: the manager has no PROBACTR_SECRET_KEY (32 random bytes in base64)".into(),
        )
    })
}

/// 404 unless `who` sees `namespace`, 403 unless they are an admin there.
fn require_secrets(who: &Principal, namespace: &str) -> Result<(), ApiError> {
    who.role_for(namespace, "namespace", namespace)?;
    who.require_admin(namespace, "manage secrets")
}

/// The secrets of `namespace`, or of every namespace where the caller is an admin (names
/// and who set them, never values).
pub async fn list(
    handles: &Handles,
    who: &Principal,
    namespace: Option<&str>,
) -> Result<Vec<SecretInfo>, ApiError> {
    match namespace {
        Some(namespace) => require_secrets(who, namespace)?,
        None if who.access.best_role() != Some(Role::Admin) => {
            return Err(ApiError::Forbidden(
                "only a namespace's admins may manage its secrets".into(),
            ))
        }
        None => {}
    }
    let asked = who.access.listing(namespace);
    let mut list = store::secrets::list(&handles.pool, namespace).await?;
    // Secrets are an admin's business: their names show only where the caller is one.
    list.retain(|secret| {
        asked
            .as_ref()
            .is_none_or(|shown| shown.contains(&secret.namespace))
            && who
                .access
                .role_in(&secret.namespace)
                .is_some_and(|role| role.is_admin())
    });
    Ok(list)
}

/// Sets a secret's value; `must_exist` for a replacement (PUT), else creating is
/// allowed too. Returns whether it was created.
pub async fn set(
    handles: &Handles,
    who: &Principal,
    namespace: &str,
    name: &str,
    value: Option<&str>,
    must_exist: bool,
) -> Result<bool, ApiError> {
    require_secrets(who, namespace)?;
    let mut errors = FieldErrors::new();
    if !secrets::is_valid_name(name) {
        errors.insert(
            "name".into(),
            "must be 1 to 100 letters, digits, `_`, `-` or `.`".into(),
        );
    }
    match value {
        None => {
            errors.insert("value".into(), "is required".into());
        }
        Some(value) if value.is_empty() || value.len() > MAX_VALUE_BYTES => {
            errors.insert("value".into(), format!("must be 1 to {MAX_VALUE_BYTES} bytes"));
        }
        Some(_) => {}
    }
    check(errors)?;
    let sealed = keys(handles)?.seal(&Owner::secret(namespace, name), value.unwrap_or_default());
    let mut tx = handles.pool.begin().await?;
    if must_exist && !store::secrets::exists(&mut *tx, namespace, name).await? {
        return Err(ApiError::not_found("secret", name));
    }
    let created = store::secrets::put(&mut *tx, namespace, name, &sealed, &who.username).await?;
    let change = Change {
        action: if created { "secret.create" } else { "secret.update" },
        object_type: "secret",
        object_id: None,
        before: None,
        after: Some(json!({"name": name, "key_id": sealed.key_id})),
    };
    store::audit::record_in(&mut *tx, who.actor(), Some(namespace), change).await?;
    tx.commit().await?;
    tracing::info!(
        secret.namespace = namespace,
        secret.name = name,
        created,
        "secret set"
    );
    Ok(created)
}

/// Deletes a secret.
pub async fn delete(handles: &Handles, who: &Principal, namespace: &str, name: &str) -> Result<(), ApiError> {
    require_secrets(who, namespace)?;
    let mut tx = handles.pool.begin().await?;
    if !store::secrets::delete(&mut *tx, namespace, name).await? {
        return Err(ApiError::not_found("secret", name));
    }
    let change = Change {
        action: "secret.delete",
        object_type: "secret",
        object_id: None,
        before: Some(json!({"name": name})),
        after: None,
    };
    store::audit::record_in(&mut *tx, who.actor(), Some(namespace), change).await?;
    tx.commit().await?;
    tracing::info!(secret.namespace = namespace, secret.name = name, "secret deleted");
    Ok(())
}

/// The answer of a rotation.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Rotated {
    /// The key every secret is now sealed under.
    pub key_id: String,
    /// Secrets moved to it.
    pub resealed: Vec<String>,
}

/// Re-seals the secret parameters (`params_schema`) that triggers and workflow steps
/// keep sealed under another key. Runs' own are not: they live as long as the history, and
/// open while the previous key is set.
async fn reseal_params(tx: &mut sqlx::PgConnection, keys: &Keyring) -> Result<(), ApiError> {
    let failed = |err: secrets::SecretError| ApiError::Conflict(format!("cannot re-seal: {err}"));
    for (id, params) in store::triggers::with_sealed_params(&mut *tx).await? {
        if let Some(params) = params_schema::resealed(&params, keys).map_err(failed)? {
            store::triggers::set_params(&mut *tx, id, &params).await?;
        }
    }
    for owner in store::workflows::with_sealed_params(&mut *tx).await? {
        if let Some(params) = params_schema::resealed(&owner.params, keys).map_err(failed)? {
            store::workflows::reseal_params(&mut *tx, &owner, &params).await?;
        }
    }
    Ok(())
}

/// Re-seals the signature secrets of webhook triggers sealed under another key.
async fn reseal_webhook_secrets(tx: &mut sqlx::PgConnection, keys: &Keyring) -> Result<(), ApiError> {
    for (trigger_id, sealed) in
        store::trigger_webhooks::secrets_under_other_keys(&mut *tx, keys.current_id()).await?
    {
        let owner = Owner::WebhookSecret(trigger_id);
        let secret = keys
            .open(&owner, &sealed)
            .map_err(|err| ApiError::Conflict(format!("cannot re-seal: {err}")))?;
        store::trigger_webhooks::reseal_secret(&mut *tx, trigger_id, &sealed, &keys.seal(&owner, &secret))
            .await?;
    }
    Ok(())
}

/// Re-seals every secret sealed under another key with the current one (after setting
/// a new PROBACTR_SECRET_KEY and the old one as PROBACTR_SECRET_KEY_PREVIOUS).
pub async fn rotate(handles: &Handles, who: &Principal) -> Result<Rotated, ApiError> {
    who.require_cluster_admin("re-seal every secret of the cluster")?;
    let keys = keys(handles)?;
    let mut tx = handles.pool.begin().await?;
    let stale = store::secrets::sealed_under_other_keys(&mut *tx, keys.current_id()).await?;
    let mut names = Vec::with_capacity(stale.len());
    for secret in stale {
        let owner = Owner::secret(&secret.namespace, &secret.name);
        let value = keys
            .open(&owner, &secret.sealed)
            .map_err(|err| ApiError::Conflict(format!("cannot re-seal: {err}")))?;
        store::secrets::reseal(
            &mut *tx,
            &secret.namespace,
            &secret.name,
            &keys.seal(&owner, &value),
        )
        .await?;
        names.push(secret.name);
    }
    // Alert channels' webhook secrets and URLs are sealed under the same keys.
    for channel in store::alerts::channels::sealed_under_other_keys(&mut *tx, keys.current_id()).await? {
        let reseal = |owner: Owner, sealed: Option<&secrets::Sealed>| match sealed {
            None => Ok(None),
            Some(sealed) => keys
                .open(&owner, sealed)
                .map(|value| Some(keys.seal(&owner, &value)))
                .map_err(|err| ApiError::Conflict(format!("cannot re-seal: {err}"))),
        };
        let secret = reseal(Owner::ChannelSecret(channel.id), channel.secret.as_ref())?;
        let url = reseal(Owner::ChannelUrl(channel.id), channel.url.as_ref())?;
        store::alerts::channels::reseal(
            &mut *tx,
            channel.id,
            &channel.config,
            secret.as_ref(),
            url.as_ref(),
        )
        .await?;
    }
    reseal_params(&mut tx, keys).await?;
    reseal_webhook_secrets(&mut tx, keys).await?;
    let change = Change {
        action: "secret.rotate",
        object_type: "secret",
        object_id: None,
        before: None,
        after: Some(json!({"key_id": keys.current_id(), "resealed": names})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(
        key.id = keys.current_id(),
        count = names.len(),
        "secrets re-sealed"
    );
    Ok(Rotated {
        key_id: keys.current_id().to_owned(),
        resealed: names,
    })
}
