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

/// A row of `namespaces`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Namespace {
    /// Unique name (lower-case letters, digits and dashes; never changes).
    pub name: String,
    /// Free text.
    pub description: String,
    /// At most this many of its runs claimed or running at once (None: no quota).
    pub max_running: Option<i32>,
    /// At most this many jobs, retired ones not counted (None: no quota).
    pub max_jobs: Option<i32>,
    /// Created.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Last changed.
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

/// What a namespace is made or changed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceFields {
    /// Free text.
    pub description: String,
    /// See [`Namespace::max_running`].
    pub max_running: Option<i32>,
    /// See [`Namespace::max_jobs`].
    pub max_jobs: Option<i32>,
}

/// A statement writing a namespace from its name and [`NamespaceFields`] (`$1` to `$4`)
/// that returns the row unless it skipped it.
macro_rules! write_namespace {
    ($sql:tt, $name:ident, $fields:ident) => {
        sqlx::query_as!(
            Namespace,
            $sql,
            $name,
            $fields.description,
            $fields.max_running,
            $fields.max_jobs
        )
    };
}

/// Namespaces by name; only those named in `only` when given.
pub async fn list(db: impl PgExecutor<'_>, only: Option<&[String]>) -> Result<Vec<Namespace>, StoreError> {
    Ok(sqlx::query_as!(
        Namespace,
        "SELECT name, description, max_running, max_jobs, created_at, updated_at FROM namespaces
         WHERE $1::text[] IS NULL OR name = ANY($1) ORDER BY name",
        only as Option<&[String]>
    )
    .fetch_all(db)
    .await?)
}

/// One namespace.
pub async fn get(db: impl PgExecutor<'_>, name: &str) -> Result<Option<Namespace>, StoreError> {
    Ok(sqlx::query_as!(
        Namespace,
        "SELECT name, description, max_running, max_jobs, created_at, updated_at FROM namespaces WHERE name = $1",
        name
    )
    .fetch_optional(db)
    .await?)
}

/// One namespace, locked for the rest of the transaction: creations counted against its
/// quotas take this lock first, so that concurrent ones are counted one after the other.
pub async fn get_for_update(db: impl PgExecutor<'_>, name: &str) -> Result<Option<Namespace>, StoreError> {
    Ok(sqlx::query_as!(
        Namespace,
        "SELECT name, description, max_running, max_jobs, created_at, updated_at FROM namespaces
         WHERE name = $1 FOR UPDATE",
        name
    )
    .fetch_optional(db)
    .await?)
}

/// Creates a namespace; None when the name is taken.
pub async fn create(
    db: impl PgExecutor<'_>,
    name: &str,
    fields: &NamespaceFields,
) -> Result<Option<Namespace>, StoreError> {
    let statement = write_namespace!(
        "INSERT INTO namespaces (name, description, max_running, max_jobs) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name) DO NOTHING
         RETURNING name, description, max_running, max_jobs, created_at, updated_at",
        name,
        fields
    );
    Ok(statement.fetch_optional(db).await?)
}

/// Replaces a namespace's description and quotas; None when it does not exist.
pub async fn update(
    db: impl PgExecutor<'_>,
    name: &str,
    fields: &NamespaceFields,
) -> Result<Option<Namespace>, StoreError> {
    let statement = write_namespace!(
        "UPDATE namespaces SET description = $2, max_running = $3, max_jobs = $4, updated_at = now()
         WHERE name = $1
         RETURNING name, description, max_running, max_jobs, created_at, updated_at",
        name,
        fields
    );
    Ok(statement.fetch_optional(db).await?)
}

/// What a namespace still holds, by kind of object (`jobs`, `workflows`, `secrets`,
/// `alert channels`, `alert rules`), the kinds it holds none of left out. Retired jobs
/// count: their history belongs to the namespace.
pub async fn contents(db: impl PgExecutor<'_>, name: &str) -> Result<Vec<(&'static str, i64)>, StoreError> {
    let row = sqlx::query!(
        r#"SELECT (SELECT count(*) FROM jobs WHERE namespace = $1) AS "jobs!",
                  (SELECT count(*) FROM workflows WHERE namespace = $1) AS "workflows!",
                  (SELECT count(*) FROM secrets WHERE namespace = $1) AS "secrets!",
                  (SELECT count(*) FROM alert_channels WHERE namespace = $1) AS "channels!",
                  (SELECT count(*) FROM alert_rules WHERE namespace = $1) AS "rules!""#,
        name
    )
    .fetch_one(db)
    .await?;
    Ok([
        ("job", row.jobs),
        ("workflow", row.workflows),
        ("secret", row.secrets),
        ("alert channel", row.channels),
        ("alert rule", row.rules),
    ]
    .into_iter()
    .filter(|(_, count)| *count > 0)
    .collect())
}

/// Deletes a namespace (the roles in it go with it); whether it existed. The database
/// refuses it while objects refer to it (a foreign key violation).
pub async fn delete(db: impl PgExecutor<'_>, name: &str) -> Result<bool, StoreError> {
    let done = sqlx::query!("DELETE FROM namespaces WHERE name = $1", name)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// How many jobs of namespace `name` count against its `max_jobs` (retired ones do not).
pub async fn job_count(db: impl PgExecutor<'_>, name: &str) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM jobs WHERE namespace = $1 AND deleted_at IS NULL"#,
        name
    )
    .fetch_one(db)
    .await?)
}

/// Which of the secrets `names` exist in namespace `name`.
pub async fn secrets_present(
    db: impl PgExecutor<'_>,
    name: &str,
    names: &[String],
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT name FROM secrets WHERE namespace = $1 AND name = ANY($2)",
        name,
        names
    )
    .fetch_all(db)
    .await?)
}

/// The namespace of each secret's name in `name`'s view: the names of namespace `name`.
pub async fn secret_names(db: impl PgExecutor<'_>, name: &str) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT name FROM secrets WHERE namespace = $1 ORDER BY name",
        name
    )
    .fetch_all(db)
    .await?)
}
