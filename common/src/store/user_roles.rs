//! `user_roles` and `users.cluster_admin`: what each user may do, namespace by namespace.
//! A cluster admin manages users, namespaces, executors and cluster-wide settings, and acts
//! as an admin in every namespace.

use std::collections::BTreeMap;

use sqlx::{PgConnection, PgExecutor};

use super::StoreError;
use crate::model::Role;

/// A user's whole grant: the cluster admin flag and a role per namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    /// Manages the cluster, and is an admin in every namespace.
    pub cluster_admin: bool,
    /// The user's role in each namespace where they have one.
    pub roles: BTreeMap<String, Role>,
}

/// The grant of user `user_id` (empty when the user does not exist).
pub async fn get(conn: &mut PgConnection, user_id: i64) -> Result<Grant, StoreError> {
    let cluster_admin = sqlx::query_scalar!("SELECT cluster_admin FROM users WHERE id = $1", user_id)
        .fetch_optional(&mut *conn)
        .await?
        .unwrap_or(false);
    Ok(Grant {
        cluster_admin,
        roles: roles(&mut *conn, user_id).await?,
    })
}

/// The roles of user `user_id`, by namespace.
pub async fn roles(db: impl PgExecutor<'_>, user_id: i64) -> Result<BTreeMap<String, Role>, StoreError> {
    let rows = sqlx::query!(
        r#"SELECT namespace, role AS "role: Role" FROM user_roles WHERE user_id = $1"#,
        user_id
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|row| (row.namespace, row.role)).collect())
}

/// Replaces the whole grant of user `user_id` (run it in a transaction with whatever else
/// must change with it). A namespace that does not exist is refused by the database
/// (`StoreError` of a foreign key violation).
pub async fn replace(
    conn: &mut PgConnection,
    user_id: i64,
    cluster_admin: bool,
    roles: &BTreeMap<String, Role>,
) -> Result<(), StoreError> {
    sqlx::query!(
        "UPDATE users SET cluster_admin = $2 WHERE id = $1",
        user_id,
        cluster_admin
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!("DELETE FROM user_roles WHERE user_id = $1", user_id)
        .execute(&mut *conn)
        .await?;
    let namespaces: Vec<String> = roles.keys().cloned().collect();
    let names: Vec<String> = roles.values().map(|role| role.as_str().to_owned()).collect();
    sqlx::query!(
        "INSERT INTO user_roles (user_id, namespace, role)
         SELECT $1, namespace, role FROM unnest($2::text[], $3::text[]) AS given (namespace, role)",
        user_id,
        &namespaces,
        &names
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}
