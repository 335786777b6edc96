//! Sealed values in their current format: each bound to what it seals (see
//! [`probactr_common::secrets::Owner`]), and channel URLs sealed and shown masked (see
//! [`probactr_common::masked_url`]).
//!
//! SQL cannot re-seal without the key, so the migration that introduced binding only
//! marks which values are not bound yet; the manager, which holds the key and has just
//! run the migrations, re-seals them at its start ([`bind_unbound`]). It is idempotent
//! and safe with several managers starting at once: the rows are locked while they are
//! re-sealed, and a value set meanwhile is already bound and left alone.

use probactr_common::masked_url;
use probactr_common::model::ChannelKind;
use probactr_common::secrets::{Keyring, Owner, Sealed};
use probactr_common::store::{self, StoreError};
use serde_json::Value;
use sqlx::PgPool;

/// `config` with its URL masked.
pub fn with_masked_url(config: &Value, url: &str) -> Value {
    let mut config = config.clone();
    if let Value::Object(map) = &mut config {
        map.insert("url".into(), Value::String(masked_url::masked(url)));
    }
    config
}

/// What [`bind_unbound`] re-sealed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bound {
    /// Job secrets re-sealed bound to their names.
    pub secrets: usize,
    /// Channels whose secret was re-sealed bound or whose URL was sealed.
    pub channels: usize,
    /// Values left as they were because they do not open (named in the log).
    pub failed: usize,
}

/// Re-seals every value sealed before binding, bound to its owner, and seals the URLs
/// channels of earlier releases keep in the clear. A value that does not open (sealed
/// under a key this manager does not have) is left as it is and logged by name: it
/// cannot be used anywhere either, and a later start with the key binds it.
pub async fn bind_unbound(pool: &PgPool, keys: &Keyring) -> Result<Bound, StoreError> {
    let mut bound = Bound::default();
    let mut tx = pool.begin().await?;
    for secret in store::secrets::unbound(&mut tx).await? {
        let (namespace, name) = (secret.namespace, secret.name);
        let owner = Owner::secret(&namespace, &name);
        match keys.open(&owner, &secret.sealed) {
            Ok(value) => {
                store::secrets::reseal(&mut *tx, &namespace, &name, &keys.seal(&owner, &value)).await?;
                bound.secrets += 1;
            }
            Err(err) => {
                tracing::warn!(secret.name = %name, error = %err, "secret left unbound: it does not open");
                bound.failed += 1;
            }
        }
    }
    for channel in store::alerts::channels::unbound(&mut tx).await? {
        let id = channel.id;
        let rebound = |owner: Owner, sealed: Option<Sealed>| -> Result<Option<Sealed>, ()> {
            match sealed.filter(|sealed| !sealed.bound) {
                None => Ok(None),
                Some(sealed) => match keys.open(&owner, &sealed) {
                    Ok(value) => Ok(Some(keys.seal(&owner, &value))),
                    Err(err) => {
                        tracing::warn!(channel.id = id, error = %err, "channel value left unbound: it does not open");
                        Err(())
                    }
                },
            }
        };
        let (Ok(secret), Ok(mut url)) = (
            rebound(Owner::ChannelSecret(id), channel.secret.clone()),
            rebound(Owner::ChannelUrl(id), channel.url.clone()),
        ) else {
            bound.failed += 1;
            continue;
        };
        let mut config = channel.config.clone();
        let in_the_clear =
            channel.url.is_none() && matches!(channel.kind, ChannelKind::Webhook | ChannelKind::Slack);
        if in_the_clear {
            if let Some(clear) = channel.config.get("url").and_then(Value::as_str) {
                url = Some(keys.seal(&Owner::ChannelUrl(id), clear));
                config = with_masked_url(&channel.config, clear);
            }
        }
        if secret.is_none() && url.is_none() {
            continue;
        }
        store::alerts::channels::reseal(&mut *tx, id, &config, secret.as_ref(), url.as_ref()).await?;
        bound.channels += 1;
    }
    tx.commit().await?;
    if bound != Bound::default() {
        tracing::info!(
            secrets = bound.secrets,
            channels = bound.channels,
            failed = bound.failed,
            "sealed values bound to their owners"
        );
    }
    Ok(bound)
}
