//! Bearer tokens verified once and remembered, so that a script's requests do not each
//! pay a database round trip to prove who sent them.
//!
//! A remembered caller must not outlive a change to their rights: the database notifies
//! [`ACCESS_CHANNEL`] whenever a token is revoked or changed, a user is disabled or
//! their roles change, or a namespace comes or goes (`probactr_notify_access`), and every
//! manager forgets all it remembered. Remembering is only on while this manager listens
//! ([`TokenCache::watch`]): from its start until it is subscribed, and whenever its
//! listening connection is lost, every request asks the database, as before. An entry
//! also lapses after [`REMEMBER_FOR`], or when its token expires, whichever is first.
//!
//! The manager that serves such a change forgets at once, when the request is answered
//! ([`forget_after_access_changes`]), so that its caller's next request never meets the
//! old rights; the others forget when the notification reaches them, moments later.
//!
//! A lookup that began before a change and ends after it must not store what it read:
//! every forgetting moves the cache to a new generation, and an answer read in an older
//! one is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use chrono::{DateTime, Utc};
use probactr_common::backoff::Backoff;
use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::{is_safe_method, Principal};

/// The channel `probactr_notify_access` notifies on every change to who may do what.
pub const ACCESS_CHANNEL: &str = "probactr_access";

/// How long a verified token is remembered at most (its last-use time, kept to the
/// minute, is touched when it is looked up again).
pub const REMEMBER_FOR: Duration = Duration::from_secs(30);

/// Tokens remembered past this many are all forgotten at once (a bound on memory
/// against a flood of distinct tokens; real clusters hold far fewer).
const MAX_REMEMBERED: usize = 10_000;

/// The callers behind recently verified tokens, by the digest of the token.
#[derive(Debug, Default)]
pub struct TokenCache {
    memory: Mutex<Memory>,
}

#[derive(Debug, Default)]
struct Memory {
    /// Whether this manager listens for changes (nothing is remembered otherwise).
    listening: bool,
    /// Moved on by every forgetting.
    generation: u64,
    remembered: HashMap<String, Remembered>,
}

#[derive(Debug)]
struct Remembered {
    principal: Principal,
    until: Instant,
}

/// When a lookup began, to store its answer only if nothing changed meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct Generation(Option<u64>);

impl TokenCache {
    /// The caller behind the token of digest `digest`, if it was verified recently.
    pub fn recall(&self, digest: &str) -> Option<Principal> {
        let memory = self.memory();
        let remembered = memory.remembered.get(digest)?;
        (memory.listening && Instant::now() < remembered.until).then(|| remembered.principal.clone())
    }

    /// The generation a lookup begins in: pass it to [`TokenCache::remember`].
    pub fn generation(&self) -> Generation {
        let memory = self.memory();
        Generation(memory.listening.then_some(memory.generation))
    }

    /// Remembers the caller a lookup begun in `generation` found, unless anything
    /// changed since it began; no longer than the token's own expiry.
    pub fn remember(
        &self,
        generation: Generation,
        digest: String,
        principal: &Principal,
        expires_at: Option<DateTime<Utc>>,
    ) {
        let mut until = Instant::now() + REMEMBER_FOR;
        if let Some(expires_at) = expires_at {
            match (expires_at - Utc::now()).to_std() {
                Ok(left) => until = until.min(Instant::now() + left),
                Err(_) => return,
            }
        }
        let mut memory = self.memory();
        if !memory.listening || generation.0 != Some(memory.generation) {
            return;
        }
        if memory.remembered.len() >= MAX_REMEMBERED {
            memory.remembered.clear();
        }
        let principal = principal.clone();
        memory.remembered.insert(digest, Remembered { principal, until });
    }

    /// Forgets every token (something about who may do what changed).
    pub fn forget_all(&self) {
        let mut memory = self.memory();
        memory.generation += 1;
        memory.remembered.clear();
    }

    fn set_listening(&self, listening: bool) {
        self.forget_all();
        self.memory().listening = listening;
    }

    fn memory(&self) -> MutexGuard<'_, Memory> {
        // A panic while holding the lock leaves plain data behind: still usable.
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Listens for changes to access until `stop` is cancelled, remembering tokens only
    /// while subscribed.
    pub async fn watch(self: Arc<Self>, pool: PgPool, stop: CancellationToken) {
        let backoff = Backoff::FullJitter {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(5),
        };
        let mut failures = 0u32;
        while !stop.is_cancelled() {
            match self.listen(&pool, &stop).await {
                Ok(()) => failures = 0,
                Err(err) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(error = %err, "not listening for access changes: every token is checked in the database");
                }
            }
            self.set_listening(false);
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(backoff.delay(failures)) => {}
            }
        }
    }

    /// One subscription: remembers while it lasts; returns when its connection is lost.
    async fn listen(&self, pool: &PgPool, stop: &CancellationToken) -> Result<(), sqlx::Error> {
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(ACCESS_CHANNEL).await?;
        self.set_listening(true);
        loop {
            let received = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                received = listener.try_recv() => received?,
            };
            match received {
                Some(_) => self.forget_all(),
                // The connection was lost: changes meanwhile went unheard.
                None => return Ok(()),
            }
        }
    }
}

/// Where the requests that may change who may do what are served: tokens, users and
/// their roles, namespaces, one's own account (under the API's `/api/v1` and the admin's
/// root alike).
const ACCESS_PATHS: &[&str] = &["/auth/", "/tokens", "/users", "/namespaces", "/me/", "/account/"];

/// Forgets every remembered token once a request that may have changed access is
/// answered (its change committed), whether it succeeded or not: forgetting costs a
/// lookup per token, remembering too long a revoked right.
pub async fn forget_after_access_changes(
    State(tokens): State<Arc<TokenCache>>,
    request: Request,
    next: Next,
) -> Response {
    let may_change_access = !is_safe_method(request.method()) && touches_access(request.uri().path());
    let response = next.run(request).await;
    if may_change_access {
        tokens.forget_all();
    }
    response
}

fn touches_access(path: &str) -> bool {
    let path = path.strip_prefix("/api/v1").unwrap_or(path);
    ACCESS_PATHS.iter().any(|prefix| path.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Access, Via};

    fn someone() -> Principal {
        Principal {
            user_id: 7,
            username: "someone".into(),
            access: Access::default(),
            via: Via::Token(1),
            changing: false,
        }
    }

    fn listening() -> TokenCache {
        let cache = TokenCache::default();
        cache.set_listening(true);
        cache
    }

    #[test]
    fn nothing_is_remembered_unless_listening() {
        let cache = TokenCache::default();
        cache.remember(cache.generation(), "d".into(), &someone(), None);
        assert!(cache.recall("d").is_none());
        let cache = listening();
        cache.remember(cache.generation(), "d".into(), &someone(), None);
        assert_eq!(cache.recall("d"), Some(someone()));
        cache.set_listening(false);
        assert!(cache.recall("d").is_none(), "a lost subscription forgets");
    }

    #[test]
    fn a_lookup_that_overlapped_a_change_is_not_kept() {
        let cache = listening();
        let before = cache.generation();
        cache.forget_all();
        cache.remember(before, "d".into(), &someone(), None);
        assert!(cache.recall("d").is_none());
    }

    #[test]
    fn changes_to_tokens_users_roles_and_namespaces_touch_access() {
        for path in [
            "/api/v1/auth/token",
            "/api/v1/tokens/3",
            "/api/v1/users/7/roles",
            "/api/v1/namespaces/pay",
            "/api/v1/me/password",
            "/users/7",
            "/tokens/3/revoke",
            "/namespaces/pay/delete",
            "/account/password",
        ] {
            assert!(touches_access(path), "{path}");
        }
        for path in ["/api/v1/jobs/3/run", "/api/v1/runs/9/cancel", "/jobs/3/delete"] {
            assert!(!touches_access(path), "{path}");
        }
    }

    #[test]
    fn an_expired_token_is_not_kept() {
        let cache = listening();
        let past = Utc::now() - chrono::TimeDelta::seconds(1);
        cache.remember(cache.generation(), "d".into(), &someone(), Some(past));
        assert!(cache.recall("d").is_none());
        let soon = Utc::now() + chrono::TimeDelta::milliseconds(30);
        cache.remember(cache.generation(), "d".into(), &someone(), Some(soon));
        assert!(cache.recall("d").is_some());
        std::thread::sleep(Duration::from_millis(60));
        assert!(cache.recall("d").is_none(), "forgotten when the token expires");
    }
}
