//! The connection to the lock server, and finding the master again after a failover.
//!
//! A URL naming one server gets one [`ConnectionManager`], which reconnects to that
//! address by itself. A `redis+sentinel://` URL gets the master the sentinels name; when
//! a call fails in a way a failover explains (the connection broke or timed out, or the
//! server answers `READONLY` because it was demoted to a replica), the sentinels are asked
//! again, and a master at a new address gets a new connection that every later call uses.
//! Lookups are serialised and spaced out, so a burst of failing calls asks once.

use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::SentinelClient;
use redis::RedisError;
use tokio::sync::Mutex;
use tokio::time::{timeout, Instant};

use super::client::is_transient;
use super::target::Server;

/// The least time between two lookups of the master.
const LOOKUP_GAP: Duration = Duration::from_millis(250);
/// How long a lookup (sentinels, then the master's role, then connecting) may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

/// The connection calls go through now, and how to find the master again.
pub(super) struct Link {
    current: RwLock<ConnectionManager>,
    sentinel: Option<Mutex<Finder>>,
}

/// The sentinels, and what the last lookup found.
struct Finder {
    client: SentinelClient,
    master: String,
    looked_at: Instant,
}

/// Bounded timeouts: a stalled Redis must fail a call (so lease renewal can reach its
/// stop point) rather than hang it.
fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(2)))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(500))
}

impl Link {
    /// Connects to `server` (for Sentinel: to the master the sentinels name now).
    pub(super) async fn open(server: Server) -> Result<Link, RedisError> {
        match server {
            Server::Direct(client) => {
                let conn = ConnectionManager::new_with_config(client, manager_config()).await?;
                Ok(Link::over(conn))
            }
            Server::Sentinel(mut client) => {
                let master = client.async_get_client().await?;
                let address = master.get_connection_info().addr().to_string();
                let conn = ConnectionManager::new_with_config(master, manager_config()).await?;
                tracing::info!(master = %address, "connected to the Redis master the sentinels name");
                Ok(Link {
                    current: RwLock::new(conn),
                    sentinel: Some(Mutex::new(Finder {
                        client,
                        master: address,
                        looked_at: Instant::now(),
                    })),
                })
            }
        }
    }

    /// A link over an existing connection, which it never replaces.
    pub(super) fn over(conn: ConnectionManager) -> Link {
        Link {
            current: RwLock::new(conn),
            sentinel: None,
        }
    }

    /// The connection to use now.
    pub(super) fn connection(&self) -> ConnectionManager {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Notes a failed call: with Sentinel, a failure a failover explains makes the link
    /// ask the sentinels where the master is now, and move there if it moved.
    pub(super) async fn failed(&self, error: &RedisError) {
        let Some(finder) = &self.sentinel else {
            return;
        };
        if !is_transient(error) {
            return;
        }
        let mut finder = finder.lock().await;
        if finder.looked_at.elapsed() < LOOKUP_GAP {
            return;
        }
        finder.looked_at = Instant::now();
        match timeout(LOOKUP_TIMEOUT, self.move_to_master(&mut finder)).await {
            Ok(Ok(())) => {}
            Ok(Err(lookup)) => {
                tracing::warn!(error = %lookup, after = %error, "cannot find the Redis master through the sentinels yet")
            }
            Err(_) => {
                tracing::warn!(after = %error, "finding the Redis master through the sentinels timed out")
            }
        }
        finder.looked_at = Instant::now();
    }

    async fn move_to_master(&self, finder: &mut Finder) -> Result<(), RedisError> {
        let master = finder.client.async_get_client().await?;
        let address = master.get_connection_info().addr().to_string();
        if address == finder.master {
            return Ok(());
        }
        let conn = ConnectionManager::new_with_config(master, manager_config()).await?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = conn;
        tracing::warn!(master = %address, previous = %finder.master, "the sentinels name a new Redis master; connected to it");
        finder.master = address;
        Ok(())
    }
}
