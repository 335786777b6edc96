//! Single sign-on with OpenID Connect: the authorization code flow with PKCE, through
//! the `openidconnect` crate, whose HTTP goes through the workspace's `reqwest`.
//!
//! A login starts at `GET /auth/oidc/login` ([`Sso::begin`]): a random `state`, `nonce`
//! and PKCE verifier are kept in PostgreSQL (`oidc_logins`, so any manager replica may
//! receive the callback), found by the digest of a random value that only the browser
//! holds, in a short-lived HttpOnly cookie; the browser is sent to the provider. The
//! provider sends it back to `GET /auth/oidc/callback` ([`Sso::finish`]): the pending
//! login is taken (once), `state` compared, the code exchanged with the verifier, and the
//! ID token checked — signature against the provider's published keys (JWKS), issuer,
//! audience, expiry and nonce. The groups come from the ID token's groups claim, else
//! from the userinfo endpoint. What the manager then does with the identity (user,
//! roles, session) is in `admin::login`.
//!
//! Discovery is lazy: nothing at start-up depends on the provider (the manager tries it
//! once in the background and logs the outcome), so a provider that is down never stops
//! password logins. Each login uses the provider's metadata and keys fetched at most
//! [`METADATA_MAX_AGE`] ago, fetching them again when older (keys rotate) or missing;
//! when a refresh fails, the last good ones are used.

pub mod accounts;
pub mod claims;

use std::time::{Duration, Instant};

use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreGenderClaim, CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm, CoreProviderMetadata,
};
use openidconnect::{
    AccessToken, AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken,
    EndpointMaybeSet, EndpointNotSet, EndpointSet, IdToken, IssuerUrl, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RequestTokenError, Scope, SubjectIdentifier,
    TokenResponse, UserInfoClaims,
};
use probactr_common::config::OidcSettings;
use probactr_common::store::oidc_logins::{self, PendingLogin};
use probactr_common::store::StoreError;
use sqlx::PgPool;
use tokio::sync::Mutex;

use super::secret;
pub use claims::{ExtraClaims, Identity};

/// Where the provider sends the browser back, under the manager's public URL.
pub const CALLBACK_PATH: &str = "/auth/oidc/callback";

/// The cookie binding a login under way to the browser that started it.
pub const FLOW_COOKIE: &str = "probactr_oidc";

/// How long a login may stay at the provider before its callback is refused.
pub const LOGIN_MAX_AGE: Duration = Duration::from_secs(10 * 60);

/// How long the provider's metadata and keys are used before they are fetched again.
pub const METADATA_MAX_AGE: Duration = Duration::from_secs(10 * 60);

/// How long one request to the provider may take.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

/// The client made from the provider's discovered metadata.
type ProviderClient = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// The ID token read with every claim the provider sent (the groups claim among them).
type FullIdToken =
    IdToken<ExtraClaims, CoreGenderClaim, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm>;

/// Why a single sign-on login was refused. Each says what happened in words for the
/// login page; none repeats a token or a secret.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// Discovery (metadata or keys) failed and none was cached.
    #[error("the provider {name} cannot be reached ({why}); try again later")]
    Unavailable {
        /// The provider's name.
        name: String,
        /// What failed.
        why: String,
    },
    /// The callback came with no login under way in this browser, or one too old.
    #[error("this single sign-on login expired or was started in another browser; please sign in again")]
    NoLoginUnderWay,
    /// The `state` that came back is not the one sent.
    #[error("the provider's answer does not belong to this login (state mismatch); please sign in again")]
    StateMismatch,
    /// The provider answered the authorization request with an error.
    #[error("the provider {name} refused the login: {error}")]
    Provider {
        /// The provider's name.
        name: String,
        /// Its error code and description.
        error: String,
    },
    /// The callback has neither a code nor an error.
    #[error("the provider's answer has no authorization code")]
    NoCode,
    /// Exchanging the code for tokens failed.
    #[error("the provider {name} did not exchange the login's code for tokens: {why}")]
    Exchange {
        /// The provider's name.
        name: String,
        /// Why.
        why: String,
    },
    /// The token response has no ID token.
    #[error("the provider's token response has no ID token")]
    NoIdToken,
    /// The ID token's signature does not verify against the provider's keys.
    #[error("the ID token's signature does not verify against the provider's keys: it was altered, or not signed by {name}")]
    BadSignature {
        /// The provider's name.
        name: String,
    },
    /// The ID token names another issuer.
    #[error("the ID token was issued by another issuer than the configured {expected} (issuer mismatch)")]
    IssuerMismatch {
        /// `PROBACTR_OIDC_ISSUER`.
        expected: String,
    },
    /// The ID token's nonce is not this login's.
    #[error("the ID token does not answer this login (nonce mismatch); please sign in again")]
    NonceMismatch,
    /// The ID token is for another client.
    #[error("the ID token is not meant for this manager (audience mismatch)")]
    AudienceMismatch,
    /// The ID token has expired.
    #[error("the ID token has expired; please sign in again")]
    Expired,
    /// Anything else wrong with the ID token.
    #[error("the ID token is not valid: {0}")]
    InvalidIdToken(String),
    /// The groups could not be read.
    #[error("the user's groups could not be read: {0}")]
    Groups(String),
    /// The user's account could not be made.
    #[error("the account could not be made: {0}")]
    Account(String),
    /// The database failed.
    #[error("the login could not be recorded: {0}")]
    Store(#[from] StoreError),
}

impl Refusal {
    /// A short word for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::Unavailable { .. } => "provider_unavailable",
            Refusal::NoLoginUnderWay => "no_login_under_way",
            Refusal::StateMismatch => "state_mismatch",
            Refusal::Provider { .. } => "provider_error",
            Refusal::NoCode => "no_code",
            Refusal::Exchange { .. } => "code_exchange",
            Refusal::NoIdToken => "no_id_token",
            Refusal::BadSignature { .. } => "bad_signature",
            Refusal::IssuerMismatch { .. } => "issuer_mismatch",
            Refusal::NonceMismatch => "nonce_mismatch",
            Refusal::AudienceMismatch => "audience_mismatch",
            Refusal::Expired => "expired",
            Refusal::InvalidIdToken(_) => "invalid_id_token",
            Refusal::Groups(_) => "groups",
            Refusal::Account(_) => "account",
            Refusal::Store(_) => "store",
        }
    }
}

/// What the callback received (its query string).
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct Callback {
    /// The authorization code.
    pub code: Option<String>,
    /// The state sent with the authorization request.
    pub state: Option<String>,
    /// The provider's error code, instead of a code.
    pub error: Option<String>,
    /// The provider's description of its error.
    pub error_description: Option<String>,
}

/// The provider's client, and when its metadata was fetched.
struct Discovered {
    client: ProviderClient,
    at: Instant,
}

/// Single sign-on: the settings, the HTTP client and the discovered provider.
pub struct Sso {
    settings: OidcSettings,
    redirect: RedirectUrl,
    http: reqwest::Client,
    discovered: Mutex<Option<Discovered>>,
}

/// A failure of the HTTP client, for `openidconnect`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpFailure(String);

/// Sends one request of `openidconnect` with `client` (redirects not followed: a
/// provider's endpoints answer directly, and following them would let a response steer
/// the manager elsewhere).
async fn send(
    client: reqwest::Client,
    request: openidconnect::HttpRequest,
) -> Result<openidconnect::HttpResponse, HttpFailure> {
    let (parts, body) = request.into_parts();
    let response = client
        .request(parts.method, parts.uri.to_string())
        .headers(parts.headers)
        .body(body)
        .send()
        .await
        .map_err(|err| HttpFailure(describe(&err)))?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .bytes()
        .await
        .map_err(|err| HttpFailure(describe(&err)))?;
    let mut answer = openidconnect::HttpResponse::new(body.to_vec());
    *answer.status_mut() = status;
    *answer.headers_mut() = headers;
    Ok(answer)
}

/// An error with its causes, on one line.
fn describe(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

impl Sso {
    /// Single sign-on with `settings`, the provider calling back to `public_url`'s
    /// [`CALLBACK_PATH`]. Contacts nobody yet.
    pub fn new(settings: OidcSettings, public_url: &str) -> anyhow::Result<Sso> {
        let redirect = RedirectUrl::new(format!("{}{CALLBACK_PATH}", public_url.trim_end_matches('/')))
            .map_err(|err| anyhow::anyhow!("PROBACTR_PUBLIC_URL does not make a redirect URL: {err}"))?;
        IssuerUrl::new(settings.issuer.clone())
            .map_err(|err| anyhow::anyhow!("PROBACTR_OIDC_ISSUER is not a URL: {err}"))?;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(PROVIDER_TIMEOUT)
            .build()?;
        Ok(Sso {
            settings,
            redirect,
            http,
            discovered: Mutex::new(None),
        })
    }

    /// The provider's name, for the login page's button.
    pub fn name(&self) -> &str {
        &self.settings.name
    }

    /// The settings.
    pub fn settings(&self) -> &OidcSettings {
        &self.settings
    }

    fn http_client(
        &self,
    ) -> impl Fn(
        openidconnect::HttpRequest,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<openidconnect::HttpResponse, HttpFailure>> + Send>,
    > + '_ {
        move |request| Box::pin(send(self.http.clone(), request))
    }

    /// The provider's client: the cached one while fresh, else discovered again (the
    /// stale one kept when that fails).
    async fn client(&self) -> Result<ProviderClient, Refusal> {
        let mut discovered = self.discovered.lock().await;
        if let Some(fresh) = discovered.as_ref().filter(|d| d.at.elapsed() < METADATA_MAX_AGE) {
            return Ok(fresh.client.clone());
        }
        match self.discover().await {
            Ok(client) => {
                *discovered = Some(Discovered {
                    client: client.clone(),
                    at: Instant::now(),
                });
                Ok(client)
            }
            Err(why) => match discovered.as_ref() {
                Some(stale) => {
                    tracing::warn!(issuer = %self.settings.issuer, error = %why, "single sign-on: refreshing the provider's metadata failed; using the last good ones");
                    Ok(stale.client.clone())
                }
                None => {
                    tracing::warn!(issuer = %self.settings.issuer, error = %why, "single sign-on: the provider cannot be discovered");
                    Err(Refusal::Unavailable {
                        name: self.settings.name.clone(),
                        why,
                    })
                }
            },
        }
    }

    async fn discover(&self) -> Result<ProviderClient, String> {
        let issuer = IssuerUrl::new(self.settings.issuer.clone()).map_err(|err| err.to_string())?;
        let http = self.http_client();
        let metadata = CoreProviderMetadata::discover_async(issuer, &http)
            .await
            .map_err(|err| describe(&err))?;
        let client = CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(self.settings.client_id.clone()),
            self.settings.client_secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(self.redirect.clone());
        Ok(client)
    }

    /// Tries discovery once (at start-up, in the background) and logs how it went.
    pub async fn warm_up(&self) {
        if self.client().await.is_ok() {
            tracing::info!(issuer = %self.settings.issuer, "single sign-on: provider discovered");
        }
    }

    /// Starts a login: returns the provider's URL to send the browser to and the value
    /// of the cookie binding the login to this browser.
    pub async fn begin(&self, pool: &PgPool) -> Result<(String, String), Refusal> {
        let client = self.client().await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in &self.settings.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.url();
        let binding = secret::random_hex();
        let pending = PendingLogin {
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
        };
        oidc_logins::create(pool, &secret::digest(&binding), &pending, LOGIN_MAX_AGE).await?;
        Ok((url.to_string(), binding))
    }

    /// Completes a login from the callback's query and the browser's cookie: the
    /// identity the provider vouches for, with its groups.
    pub async fn finish(
        &self,
        pool: &PgPool,
        binding: Option<&str>,
        callback: &Callback,
    ) -> Result<Identity, Refusal> {
        // The pending login is taken first, whatever the answer: it is used once.
        let pending = match binding {
            Some(binding) if !binding.is_empty() => {
                oidc_logins::take(pool, &secret::digest(binding), LOGIN_MAX_AGE).await?
            }
            _ => None,
        };
        let pending = pending.ok_or(Refusal::NoLoginUnderWay)?;
        let state = callback.state.as_deref().unwrap_or_default();
        if !secret::same(state, &pending.state) {
            return Err(Refusal::StateMismatch);
        }
        if let Some(error) = &callback.error {
            let error = match callback.error_description.as_deref().filter(|d| !d.is_empty()) {
                Some(description) => format!("{error} ({description})"),
                None => error.clone(),
            };
            return Err(Refusal::Provider {
                name: self.settings.name.clone(),
                error,
            });
        }
        let code = callback
            .code
            .clone()
            .filter(|c| !c.is_empty())
            .ok_or(Refusal::NoCode)?;
        let client = self.client().await?;
        let http = self.http_client();
        let exchange = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|err| self.exchange_failure(describe(&err)))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier.clone()))
            .request_async(&http)
            .await;
        let tokens = exchange.map_err(|err| {
            self.exchange_failure(match &err {
                RequestTokenError::ServerResponse(answer) => match answer.error_description() {
                    Some(description) => format!("{} ({description})", answer.error()),
                    None => answer.error().to_string(),
                },
                other => describe(other),
            })
        })?;
        let id_token = tokens.id_token().ok_or(Refusal::NoIdToken)?;
        let id_token: FullIdToken = id_token
            .to_string()
            .parse()
            .map_err(|err: serde_json::Error| Refusal::InvalidIdToken(err.to_string()))?;
        let verifier = client.id_token_verifier();
        let nonce = Nonce::new(pending.nonce.clone());
        let claims = id_token
            .claims(&verifier, &nonce)
            .map_err(|err| self.token_refusal(err))?;
        let mut identity =
            Identity::from_id_token(&self.settings.issuer, claims, &self.settings.groups_claim)
                .map_err(Refusal::Groups)?;
        if identity.groups.is_none() && client.user_info_url().is_some() {
            identity.groups = Some(
                self.groups_from_userinfo(&client, tokens.access_token().clone(), claims.subject().clone())
                    .await?,
            );
        }
        Ok(identity)
    }

    fn exchange_failure(&self, why: String) -> Refusal {
        Refusal::Exchange {
            name: self.settings.name.clone(),
            why,
        }
    }

    fn token_refusal(&self, err: ClaimsVerificationError) -> Refusal {
        match err {
            ClaimsVerificationError::SignatureVerification(_) => Refusal::BadSignature {
                name: self.settings.name.clone(),
            },
            ClaimsVerificationError::InvalidIssuer(_) => Refusal::IssuerMismatch {
                expected: self.settings.issuer.clone(),
            },
            ClaimsVerificationError::InvalidNonce(_) => Refusal::NonceMismatch,
            ClaimsVerificationError::InvalidAudience(_) => Refusal::AudienceMismatch,
            ClaimsVerificationError::Expired(_) => Refusal::Expired,
            other => Refusal::InvalidIdToken(other.to_string()),
        }
    }

    /// The groups claim from the userinfo endpoint (providers that keep the ID token
    /// small put the profile there); the answer must be about the ID token's subject.
    async fn groups_from_userinfo(
        &self,
        client: &ProviderClient,
        access_token: AccessToken,
        subject: SubjectIdentifier,
    ) -> Result<Vec<String>, Refusal> {
        let http = self.http_client();
        let request = client
            .user_info(access_token, Some(subject))
            .map_err(|err| Refusal::Groups(describe(&err)))?;
        let info: UserInfoClaims<ExtraClaims, CoreGenderClaim> = request
            .request_async(&http)
            .await
            .map_err(|err| Refusal::Groups(format!("the userinfo endpoint failed: {}", describe(&err))))?;
        Ok(
            claims::groups_in(info.additional_claims(), &self.settings.groups_claim)
                .map_err(Refusal::Groups)?
                .unwrap_or_default(),
        )
    }
}
