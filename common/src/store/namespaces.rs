//! `namespaces`: the teams' shares of one cluster. Every job, workflow, secret, alert
//! channel and alert rule belongs to exactly one; `default` always exists.

use sqlx::PgExecutor;

use super::StoreError;

/// The namespace objects go to when none is named, and where everything made before
/// namespaces existed lives.
pub const DEFAULT: &str = "default";

/// Every namespace's name, in order.
pub async fn names(db: impl PgExecutor<'_>) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar!("SELECT name FROM namespaces ORDER BY name")
        .fetch_all(db)
        .await?)
}
