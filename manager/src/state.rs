//! What every handler shares: the PostgreSQL pool, the Redis client (readiness only; the
//! manager takes no locks) and the compiled templates of the web admin.

use probactr_common::cidr::Cidr;
use probactr_common::lock::target::RedisTarget;
use probactr_common::secrets::Keyring;
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;

use crate::admin::templates;
use crate::auth::password::Hasher;
use crate::service::cluster::{StatusCache, STATUS_MAX_AGE};
use crate::streams::Streams;

/// Shared state of the site; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The source of truth.
    pub pool: PgPool,
    /// Redis (one server, or the master sentinels name), checked by `/readyz`.
    pub redis: Arc<RedisTarget>,
    /// The web admin's templates (HTML auto-escaping on).
    pub templates: Arc<minijinja::Environment<'static>>,
    /// Password hashing cost.
    pub hasher: Hasher,
    /// Whether the admin's cookies carry the Secure attribute (`PROBACTR_COOKIE_SECURE`:
    /// set it when browsers reach the manager over HTTPS).
    pub cookie_secure: bool,
    /// The cluster summary, shared by the requests of this manager.
    pub status_cache: Arc<StatusCache>,
    /// How old a served cluster summary may be.
    pub status_max_age: Duration,
    /// Proxies whose `X-Forwarded-For` names the client (`PROBACTR_TRUSTED_PROXIES`).
    pub trusted_proxies: Arc<[Cidr]>,
    /// The keys sealing job secrets (`PROBACTR_SECRET_KEY`); None when unset.
    pub secret_keys: Option<Arc<Keyring>>,
    /// The open live output streams, bounded per user and in time.
    pub streams: Arc<Streams>,
}

impl AppState {
    /// State over a pool and a Redis URL (the URL is checked, not connected to).
    pub fn new(pool: PgPool, redis_url: &str) -> anyhow::Result<AppState> {
        Ok(AppState {
            pool,
            redis: Arc::new(RedisTarget::parse(redis_url)?),
            templates: Arc::new(templates::environment()?),
            hasher: Hasher::default(),
            cookie_secure: false,
            status_cache: Arc::default(),
            status_max_age: STATUS_MAX_AGE,
            trusted_proxies: Arc::from([]),
            secret_keys: None,
            streams: Arc::default(),
        })
    }

    /// The same state with cookies marked Secure (or not).
    pub fn with_cookie_secure(mut self, secure: bool) -> AppState {
        self.cookie_secure = secure;
        self
    }

    /// The same state trusting `X-Forwarded-For` from these proxies.
    pub fn with_trusted_proxies(mut self, proxies: &[Cidr]) -> AppState {
        self.trusted_proxies = Arc::from(proxies);
        self
    }

    /// The same state bounding live output streams: `per_user` open at once per user,
    /// each ending after `max_age` (`PROBACTR_SSE_PER_USER`, `PROBACTR_SSE_MAX_SECS`).
    pub fn with_stream_limits(mut self, per_user: u32, max_age: Duration) -> AppState {
        self.streams = Arc::new(Streams::new(per_user, max_age));
        self
    }

    /// The same state sealing secrets with these keys.
    pub fn with_secret_keys(mut self, keys: Option<Keyring>) -> AppState {
        self.secret_keys = keys.map(Arc::new);
        self
    }

    /// The same state with a cheap password hash, for tests that create many users, and
    /// a cluster summary computed afresh for every request, so tests see their changes.
    pub fn with_fast_hashing(mut self) -> AppState {
        self.hasher = Hasher::fast_for_tests();
        self.status_max_age = Duration::ZERO;
        self
    }
}
