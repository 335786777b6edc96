//! The probactr user behind a single sign-on identity: found by the provider's issuer
//! and subject (never by name: a provider's user called `admin` is not the local
//! `admin`), created at the first login under a free name, and given at every login the
//! roles the role map draws from their groups — taken away as well when their groups no
//! longer give them.

use probactr_common::config::{Grants, RoleMap};
use probactr_common::model::Role;
use probactr_common::store::{self, users::OidcUser};

use super::{Identity, Refusal};
use crate::service::Handles;

/// How many `NAME-2`, `NAME-3`… are tried when the name is taken.
const NAME_TRIES: usize = 9;

/// Why a verified identity does not get a session.
#[derive(Debug, thiserror::Error)]
pub enum Denial {
    /// The user was disabled by an administrator.
    #[error("the account {username} is disabled; ask an administrator")]
    Disabled {
        /// The user's name.
        username: String,
    },
    /// None of the user's groups gives a role.
    #[error("signed in as {username}, but none of your groups ({groups}) gives a role in probactr; ask an administrator to map one in PROBACTR_OIDC_ROLE_MAP")]
    NoRole {
        /// The user's name.
        username: String,
        /// Their groups, comma-separated.
        groups: String,
    },
    /// The provider's answer was refused, or the database failed.
    #[error(transparent)]
    Refused(#[from] Refusal),
}

/// The role per namespace and cluster admin flag `map` gives to `groups` (namespaces
/// that do not exist are left out and logged).
pub fn grants_for(map: &RoleMap, groups: &[String], namespaces: &[String]) -> Grants {
    let unknown = map.unknown_namespaces(namespaces);
    if !unknown.is_empty() {
        tracing::warn!(namespaces = ?unknown, "single sign-on: PROBACTR_OIDC_ROLE_MAP names namespaces that do not exist");
    }
    map.grant(groups, namespaces)
}

/// The user of `identity`, created when new, with the roles of `map` applied; refused
/// when disabled or given no role. Returns the user to open a session for.
pub async fn sign_in(handles: &Handles, map: &RoleMap, identity: &Identity) -> Result<OidcUser, Denial> {
    let groups = identity.groups.clone().unwrap_or_default();
    let mut tx = handles.pool.begin().await.map_err(store_error)?;
    let user = match store::users::by_oidc_identity(&mut *tx, &identity.issuer, &identity.subject).await? {
        Some(user) => user,
        None => create(handles, &mut tx, identity).await?,
    };
    let namespaces = store::namespaces::names(&mut *tx).await?;
    let grants = grants_for(map, &groups, &namespaces);
    apply(&mut tx, &user, &grants).await?;
    tx.commit().await.map_err(store_error)?;
    if user.disabled {
        return Err(Denial::Disabled {
            username: user.username,
        });
    }
    if !grants.cluster_admin && grants.namespaces.is_empty() {
        return Err(Denial::NoRole {
            username: user.username,
            groups: if groups.is_empty() {
                "none".to_owned()
            } else {
                groups.join(", ")
            },
        });
    }
    Ok(user)
}

fn store_error(err: sqlx::Error) -> Denial {
    Denial::Refused(Refusal::Store(err.into()))
}

impl From<store::StoreError> for Denial {
    fn from(err: store::StoreError) -> Self {
        Denial::Refused(Refusal::Store(err))
    }
}

/// Creates the user of a first login under the first free name of `NAME`, `NAME-2`…,
/// with a password nobody knows.
async fn create(
    handles: &Handles,
    tx: &mut sqlx::PgConnection,
    identity: &Identity,
) -> Result<OidcUser, Denial> {
    let unusable = handles
        .hasher
        .hash_blocking(&super::secret::random_hex())
        .await
        .map_err(|err| Denial::Refused(Refusal::Account(err.to_string())))?;
    let base: String = identity
        .username
        .chars()
        .take(super::claims::MAX_USERNAME_CHARS - 3)
        .collect();
    for n in 1..=NAME_TRIES {
        let name = if n == 1 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let created =
            store::users::create_oidc(&mut *tx, &name, &unusable, &identity.issuer, &identity.subject)
                .await?;
        if let Some(user) = created {
            tracing::info!(user.id = user.id, username = %user.username, issuer = %identity.issuer, "single sign-on: user created at first login");
            return Ok(user);
        }
    }
    // Every name taken (or the identity made meanwhile by a concurrent first login).
    if let Some(user) = store::users::by_oidc_identity(&mut *tx, &identity.issuer, &identity.subject).await? {
        return Ok(user);
    }
    let fallback = format!("sso-{}", &super::secret::digest(&identity.subject)[..12]);
    store::users::create_oidc(
        &mut *tx,
        &fallback,
        &unusable,
        &identity.issuer,
        &identity.subject,
    )
    .await?
    .ok_or_else(|| {
        Denial::Refused(Refusal::Account(format!(
            "no free user name for {}",
            identity.username
        )))
    })
}

/// Sets the user's whole grant: the cluster admin flag and the roles per namespace.
async fn apply(tx: &mut sqlx::PgConnection, user: &OidcUser, grants: &Grants) -> Result<(), Denial> {
    store::user_roles::replace(&mut *tx, user.id, grants.cluster_admin, &grants.namespaces).await?;
    // `users.role` is kept as the role in `default` (what the API's older `role` field
    // of a user reads and writes), like every other way of granting roles.
    let role = grants
        .namespaces
        .get(store::namespaces::DEFAULT)
        .copied()
        .unwrap_or(Role::Viewer);
    store::users::set_access(&mut *tx, user.id, role, user.disabled).await?;
    Ok(())
}
