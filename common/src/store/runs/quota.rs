//! Namespace quotas as runs see them: why a queued run waits for its namespace's
//! `max_running`. The quota itself is held by the claim (see `CLAIM_QUEUED_SQL`) and the
//! database functions of migration `2026120102000001`; this module only reads it.

use sqlx::PgExecutor;

use crate::store::StoreError;

/// A namespace's quota as it stands: its runs counted in flight and its `max_running`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaUse {
    /// The namespace.
    pub namespace: String,
    /// Its runs claimed or running that the quota counts.
    pub running: i32,
    /// Its `max_running`.
    pub max_running: i32,
}

impl QuotaUse {
    fn new(namespace: String, running: i32, max_running: i32) -> QuotaUse {
        QuotaUse {
            namespace,
            running,
            max_running,
        }
    }

    /// Whether no more of the namespace's runs may be claimed now.
    pub fn full(&self) -> bool {
        self.running >= self.max_running
    }

    /// The reason shown on a queued run held by the quota: "namespace quota 5/5".
    pub fn reason(&self) -> String {
        format!("namespace quota {}/{}", self.running, self.max_running)
    }
}

/// The quota of the namespace of run `run_id`'s job, when it has one and the run is
/// queued (None otherwise: nothing of the namespace holds the run back).
pub async fn of_queued_run(db: impl PgExecutor<'_>, run_id: i64) -> Result<Option<QuotaUse>, StoreError> {
    Ok(sqlx::query!(
        r#"SELECT namespaces.name, namespaces.running, namespaces.max_running AS "max_running!"
           FROM runs_live AS runs JOIN jobs ON jobs.id = runs.job_id
           JOIN namespaces ON namespaces.name = jobs.namespace
           WHERE runs.id = $1 AND runs.state = 'queued' AND namespaces.max_running IS NOT NULL"#,
        run_id
    )
    .fetch_optional(db)
    .await?
    .map(|row| QuotaUse::new(row.name, row.running, row.max_running)))
}

/// Why queued run `run_id` waits for its namespace: "namespace quota 5/5" while the quota
/// is used up (None when it is not queued, its namespace has no quota, or there is room).
pub async fn queued_reason(db: impl PgExecutor<'_>, run_id: i64) -> Result<Option<String>, StoreError> {
    Ok(of_queued_run(db, run_id)
        .await?
        .filter(QuotaUse::full)
        .map(|quota| quota.reason()))
}

/// The quota of namespace `name` (None: it has none, or there is no such namespace).
pub async fn of_namespace(db: impl PgExecutor<'_>, name: &str) -> Result<Option<QuotaUse>, StoreError> {
    Ok(sqlx::query!(
        r#"SELECT name, running, max_running AS "max_running!" FROM namespaces
           WHERE name = $1 AND max_running IS NOT NULL"#,
        name
    )
    .fetch_optional(db)
    .await?
    .map(|row| QuotaUse::new(row.name, row.running, row.max_running)))
}
