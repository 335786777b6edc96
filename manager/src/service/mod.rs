//! The operations of the manager, shared by the REST API and the web admin.
//!
//! Each operation checks the caller's role, validates its command ([`crate::command`]:
//! every bad field named at once, and bad input changes nothing), makes its change and the audit row in one transaction, and
//! answers with an [`crate::error::ApiError`] the two front ends render their own way.

pub mod alerts;
pub mod calendars;
pub mod capacity;
pub mod cluster;
pub mod dashboard;
pub mod definitions;
pub mod job_versions;
pub mod jobs;
pub mod ledger;
pub mod maintenance;
pub mod namespaces;
pub mod pools;
pub mod reads;
pub mod resume;
pub mod runs;
pub mod secrets;
pub mod single_flight;
pub mod trigger_versions;
pub mod triggers;
pub mod users;
pub mod versions;
pub mod webhook_signature;
pub mod webhooks;
pub mod workflow_versions;
pub mod workflows;

use std::sync::Arc;
use std::time::Duration;

use probactr_common::secrets::Keyring;
use serde::Serialize;
use sqlx::PgPool;

use crate::auth::password::Hasher;
use cluster::{StatusCache, STATUS_MAX_AGE};

/// What the operations use: the pool, the password hasher, the keys that seal secrets and
/// the cluster summary's cache. The web admin's templates and the HTTP settings stay in
/// [`crate::state::AppState`], which carries these. Cheap to clone.
#[derive(Clone)]
pub struct Handles {
    /// The source of truth.
    pub pool: PgPool,
    /// Password hashing cost.
    pub hasher: Hasher,
    /// The keys sealing job secrets (`PROBACTR_SECRET_KEY`); None when unset.
    pub secret_keys: Option<Arc<Keyring>>,
    /// The cluster summary, shared by the requests of this manager.
    pub status_cache: Arc<StatusCache>,
    /// How old a served cluster summary may be.
    pub status_max_age: Duration,
    /// The manager's address as users reach it (`PROBACTR_PUBLIC_URL`), for the URLs of
    /// webhook triggers.
    pub public_url: String,
    /// The output archive (`PROBACTR_OUTPUT_ARCHIVE`), which serves runs' full output.
    pub archive: Option<probactr_common::archive::OutputArchive>,
    /// Where lists, run pages, output and the dashboard are read (`DATABASE_READ_URL`).
    pub reads: Arc<reads::Reads>,
    /// The pages of the job list being read, shared by the requests that ask meanwhile.
    pub job_pages: Arc<single_flight::SingleFlight<jobs::PageKey, Paged<jobs::JobView>>>,
}

/// The manager's address when `PROBACTR_PUBLIC_URL` is not set.
const DEFAULT_PUBLIC_URL: &str = "http://127.0.0.1:8080";

impl Handles {
    /// Handles over a pool, with the default hashing cost, no keys and a fresh cache.
    pub fn new(pool: PgPool) -> Handles {
        Handles {
            pool,
            hasher: Hasher::default(),
            secret_keys: None,
            status_cache: Arc::default(),
            status_max_age: STATUS_MAX_AGE,
            public_url: DEFAULT_PUBLIC_URL.to_owned(),
            archive: None,
            reads: Arc::default(),
            job_pages: Arc::default(),
        }
    }

    /// The pool for a read `who` makes of what many watch (lists, run pages, output,
    /// the dashboard): the read replica while it keeps up, else the primary.
    pub fn read_pool(&self, who: &crate::auth::Principal) -> &PgPool {
        self.reads.pool(&self.pool, who)
    }
}

/// A page of a list: the items and how many match in all.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Paged<T> {
    /// This page's items.
    pub items: Vec<T>,
    /// Items matching the filters, on every page.
    pub total: i64,
}

impl<T> Paged<T> {
    /// A list read whole: its one page.
    pub fn all(items: Vec<T>) -> Paged<T> {
        let total = items.len() as i64;
        Paged { items, total }
    }
}

/// A value as audit-log JSON (a value that cannot be serialized is recorded as null).
pub(crate) fn snapshot<T: Serialize>(value: &T) -> Option<serde_json::Value> {
    serde_json::to_value(value).ok()
}
