//! Starting the manager: pool, migrations, sealed values brought to the current format,
//! the first admin, the listener, and a graceful shutdown when the token is cancelled.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use probactr_common::config::{Config, LocalLogin};
use probactr_common::{reach, store};
use tokio_util::sync::CancellationToken;

use crate::auth::{password, Role};
use crate::service::reads::Reads;
use crate::state::AppState;

/// Why the first admin cannot be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootstrapError {
    /// No user exists and no password was configured.
    #[error("no user exists yet: set PROBACTR_ADMIN_PASSWORD (at least {} characters) to create the first admin, {user:?}", password::MIN_PASSWORD_CHARS)]
    MissingPassword {
        /// `PROBACTR_ADMIN_USER`.
        user: String,
    },
    /// The configured password is too short.
    #[error(
        "PROBACTR_ADMIN_PASSWORD is too short: it must be at least {} characters",
        password::MIN_PASSWORD_CHARS
    )]
    WeakPassword,
}

/// What the bootstrap did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bootstrap {
    /// Users exist already; the configured admin (if any) was not consulted.
    UsersExist,
    /// The first admin was created.
    Created,
}

/// Creates the first admin from the configuration when no user exists. Several managers
/// may race here: the insert ignores a name that another one just created.
pub async fn bootstrap_admin(
    state: &AppState,
    config: &Config,
) -> anyhow::Result<Result<Bootstrap, BootstrapError>> {
    if store::users::any(&state.handles.pool)
        .await
        .context("while looking for users")?
    {
        return Ok(Ok(Bootstrap::UsersExist));
    }
    let Some(admin_password) = &config.admin_password else {
        return Ok(Err(BootstrapError::MissingPassword {
            user: config.admin_user.clone(),
        }));
    };
    if password::check_strength(admin_password).is_err() {
        return Ok(Err(BootstrapError::WeakPassword));
    }
    let hash = state.handles.hasher.hash(admin_password)?;
    store::users::create(&state.handles.pool, &config.admin_user, &hash, Role::Admin)
        .await
        .context("while creating the first admin")?;
    tracing::info!(username = %config.admin_user, "first admin created");
    Ok(Ok(Bootstrap::Created))
}

/// With password logins off, says at start-up whether the break-glass user can log in:
/// a name that is no enabled cluster admin leaves nobody a way in when the provider fails.
async fn warn_without_break_glass(state: &AppState, policy: &LocalLogin) -> anyhow::Result<()> {
    let LocalLogin::BreakGlassOnly(name) = policy else {
        return Ok(());
    };
    let user = store::users::by_name(&state.handles.pool, name)
        .await
        .context("while looking for the break-glass user")?;
    let can = match user {
        Some(user) if !user.disabled => {
            let mut conn = state.handles.pool.acquire().await?;
            store::user_roles::get(&mut conn, user.id)
                .await
                .context("while reading the break-glass user's roles")?
                .cluster_admin
        }
        _ => false,
    };
    if can {
        tracing::info!(username = %name, "password logins are off but for the break-glass admin");
    } else {
        tracing::warn!(username = %name, "PROBACTR_BREAK_GLASS_USER names no enabled cluster admin: nobody can log in with a password");
    }
    Ok(())
}

/// Runs the manager until `shutdown` is cancelled. Exits the process with code 2 when
/// no user exists and the first admin's password is missing or too short.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let secret_keys = config.secret_keys_or_exit("probactr-manager");
    // Redis serves only the readiness probe: the manager starts without it.
    if !reach::postgres(&config.database_url, config.connect_timeout, &shutdown).await? {
        return Ok(());
    }
    let pool = store::pool(&config.database_url, config.db_pool_size).context("while opening the pool")?;
    store::migrate(&pool).await.context("while applying migrations")?;
    // Values sealed by earlier releases are bound to their owners now (SQL cannot: it has
    // no key); idempotent, so every start may try.
    crate::sealing::bind_unbound(&pool, &secret_keys)
        .await
        .context("while re-sealing sealed values bound to their owners")?;
    let sso = match &config.oidc {
        Some(settings) => Some(
            crate::auth::oidc::Sso::new(settings.clone(), &config.public_url)
                .context("while setting up single sign-on")?,
        ),
        None => None,
    };
    let mut state = AppState::new(pool, &config.redis_url)
        .context("while building the state")?
        .with_cookie_secure(config.cookie_secure)
        .with_trusted_proxies(&config.trusted_proxies)
        .with_stream_limits(config.sse_per_user, config.sse_max)
        .with_secret_keys(Some(secret_keys))
        .with_sso(sso)
        .with_local_login(config.local_login.clone());
    state.handles.public_url = config.public_url.trim_end_matches('/').to_owned();
    state.handles.archive = config
        .output_archive
        .as_ref()
        .map(probactr_common::archive::OutputArchive::new)
        .transpose()
        .context("PROBACTR_OUTPUT_ARCHIVE")?;
    if let Some(read_url) = &config.database_read_url {
        let replica =
            store::pool(read_url, config.db_pool_size).context("while opening the read replica's pool")?;
        let reads = Arc::new(Reads::with_replica(replica, config.read_max_lag));
        tokio::spawn(reads.clone().watch(state.handles.pool.clone(), shutdown.clone()));
        state.handles.reads = reads;
    }
    tokio::spawn(
        state
            .tokens
            .clone()
            .watch(state.handles.pool.clone(), shutdown.clone()),
    );
    if let Some(sso) = state.sso.clone() {
        // Discovery in the background: the provider being down must not keep the
        // manager from serving (password logins, the API); logins discover again.
        tokio::spawn(async move { sso.warm_up().await });
    }
    if let Err(err) = bootstrap_admin(&state, &config).await? {
        eprintln!("probactr-manager: {err}");
        std::process::exit(2);
    }
    warn_without_break_glass(&state, &config.local_login).await?;
    let listener = tokio::net::TcpListener::bind(config.manager_listen)
        .await
        .with_context(|| format!("while binding PROBACTR_MANAGER_LISTEN={}", config.manager_listen))?;
    tracing::info!(address = %listener.local_addr()?, "manager listening");
    let app = crate::app(state).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .context("while serving")?;
    tracing::info!("manager stopped");
    Ok(())
}
