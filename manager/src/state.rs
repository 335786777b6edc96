//! What every handler shares: the handles the operations use ([`Handles`]: the
//! PostgreSQL pool among them), the Redis client (readiness only; the manager takes no
//! locks), the compiled templates of the web admin and the HTTP settings.

use probactr_common::cidr::Cidr;
use probactr_common::config::LocalLogin;
use probactr_common::lock::target::RedisTarget;
use probactr_common::secrets::Keyring;
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;

use crate::admin::templates;
use crate::auth::oidc::Sso;
use crate::auth::password::Hasher;
use crate::auth::tokens::TokenCache;
use crate::service::Handles;
use crate::streams::Streams;

/// Shared state of the site; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// What the operations of [`crate::service`] use (the pool among them).
    pub handles: Handles,
    /// Redis (one server, or the master sentinels name), checked by `/readyz`.
    pub redis: Arc<RedisTarget>,
    /// The web admin's templates (HTML auto-escaping on).
    pub templates: Arc<minijinja::Environment<'static>>,
    /// Whether the admin's cookies carry the Secure attribute (`PROBACTR_COOKIE_SECURE`:
    /// set it when browsers reach the manager over HTTPS).
    pub cookie_secure: bool,
    /// Proxies whose `X-Forwarded-For` names the client (`PROBACTR_TRUSTED_PROXIES`).
    pub trusted_proxies: Arc<[Cidr]>,
    /// The open live output streams, bounded per user and in time.
    pub streams: Arc<Streams>,
    /// Single sign-on (`PROBACTR_OIDC_ISSUER` set).
    pub sso: Option<Arc<Sso>>,
    /// Who may log in with a password (`PROBACTR_LOCAL_LOGIN`).
    pub local_login: LocalLogin,
    /// Bearer tokens verified recently (remembered only while
    /// [`TokenCache::watch`] listens for changes to access).
    pub tokens: Arc<TokenCache>,
}

impl AppState {
    /// State over a pool and a Redis URL (the URL is checked, not connected to).
    pub fn new(pool: PgPool, redis_url: &str) -> anyhow::Result<AppState> {
        Ok(AppState {
            handles: Handles::new(pool),
            redis: Arc::new(RedisTarget::parse(redis_url)?),
            templates: Arc::new(templates::environment()?),
            cookie_secure: false,
            trusted_proxies: Arc::from([]),
            streams: Arc::default(),
            sso: None,
            local_login: LocalLogin::Open,
            tokens: Arc::default(),
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

    /// The same state offering single sign-on through `sso` (or not).
    pub fn with_sso(mut self, sso: Option<Sso>) -> AppState {
        self.sso = sso.map(Arc::new);
        self
    }

    /// The same state letting only `policy`'s users log in with a password.
    pub fn with_local_login(mut self, policy: LocalLogin) -> AppState {
        self.local_login = policy;
        self
    }

    /// The same state sealing secrets with these keys.
    pub fn with_secret_keys(mut self, keys: Option<Keyring>) -> AppState {
        self.handles.secret_keys = keys.map(Arc::new);
        self
    }

    /// The same state with a cheap password hash, for tests that create many users, and
    /// a cluster summary computed afresh for every request, so tests see their changes.
    pub fn with_fast_hashing(mut self) -> AppState {
        self.handles.hasher = Hasher::fast_for_tests();
        self.handles.status_max_age = Duration::ZERO;
        self
    }
}
