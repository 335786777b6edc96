//! Sending one notification to its channel: a signed webhook POST, a Slack-compatible
//! message, or a mail through `PROBACTR_SMTP_URL`. Errors are texts for the delivery log
//! and never carry a secret: the channel's secret and URL are masked in them, whatever
//! the receiver answered.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use probactr_common::config::{Config, SmtpSettings, SmtpTls};
use probactr_common::http_guard::{check_literal, GuardedResolver, HttpPolicy};
use probactr_common::masking::Masker;
use probactr_common::model::ChannelKind;
use probactr_common::secrets::{Keyring, Owner};
use probactr_common::store::alerts::notifications::Delivery;
use reqwest::Url;
use serde_json::Value;
use sha2::Sha256;

use super::message;

/// How long one delivery may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// What sends notifications: an HTTP client, the SMTP transport, the keys that open
/// webhook secrets.
pub struct Sender {
    http: reqwest::Client,
    policy: Arc<HttpPolicy>,
    smtp: Option<AsyncSmtpTransport<Tokio1Executor>>,
    from: String,
    keys: Keyring,
}

impl Sender {
    /// A sender for these settings; an SMTP server that cannot be configured is an error
    /// naming `PROBACTR_SMTP_URL`.
    pub fn new(config: &Config, keys: Keyring) -> anyhow::Result<Sender> {
        // Webhooks reach the network from inside it, like HTTP jobs: the same guard.
        let policy = Arc::new(
            HttpPolicy::from_lists(&config.http_allow, &config.http_deny).map_err(anyhow::Error::msg)?,
        );
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .no_proxy()
            .dns_resolver(GuardedResolver::new(policy.clone()))
            // A receiver's redirect could lead a signed payload elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("probactr/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let smtp = config.smtp.as_ref().map(smtp_transport).transpose()?;
        Ok(Sender {
            http,
            policy,
            smtp,
            from: config.smtp_from.clone(),
            keys,
        })
    }

    /// Sends one notification.
    pub async fn send(&self, delivery: &Delivery) -> Result<(), String> {
        let sent = match delivery.channel.kind {
            ChannelKind::Webhook => self.webhook(delivery).await,
            ChannelKind::Slack => self.slack(delivery).await,
            ChannelKind::Email => self.email(delivery).await,
        };
        // A receiver's error page may echo what it was sent, and the error is stored in
        // the delivery log for operators to read.
        sent.map_err(|error| self.sensitive(delivery).mask(&error))
    }

    /// What of a delivery must never reach the delivery log: the channel's secret, and
    /// its URL (a Slack URL is itself a credential) with its password, query and long
    /// path segments (tokens).
    fn sensitive(&self, delivery: &Delivery) -> Masker {
        let mut values = Vec::new();
        if let Some(secret) = delivery.channel.secret.as_ref().and_then(|sealed| {
            self.keys
                .open(&Owner::ChannelSecret(delivery.channel.id), sealed)
                .ok()
        }) {
            values.push(secret);
        }
        if let Ok(url) = self.url_text(delivery) {
            values.push(url.clone());
            if let Ok(parsed) = Url::parse(&url) {
                values.extend(parsed.password().map(str::to_owned));
                values.extend(parsed.query().map(str::to_owned));
                let segments = parsed.path_segments().into_iter().flatten();
                values.extend(segments.filter(|segment| segment.len() >= 16).map(str::to_owned));
            }
        }
        Masker::new(&values)
    }

    async fn webhook(&self, delivery: &Delivery) -> Result<(), String> {
        let url = self.url_of(delivery)?;
        let mut body = delivery.payload.clone();
        body["delivery"] = Value::String(delivery.delivery_id.to_string());
        let bytes = serde_json::to_vec(&body).map_err(|err| err.to_string())?;
        let mut request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("x-probactr-delivery", delivery.delivery_id.to_string())
            .header("x-probactr-event", delivery.event.as_str());
        if let Some(sealed) = &delivery.channel.secret {
            let secret = self
                .keys
                .open(&Owner::ChannelSecret(delivery.channel.id), sealed)
                .map_err(|err| err.to_string())?;
            request = request.header(
                "x-probactr-signature",
                format!("sha256={}", sign(&secret, &bytes)),
            );
        }
        answer(request.body(bytes).send().await).await
    }

    async fn slack(&self, delivery: &Delivery) -> Result<(), String> {
        let url = self.url_of(delivery)?;
        let body = serde_json::to_vec(&message::slack(&delivery.payload)).map_err(|err| err.to_string())?;
        let request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .body(body);
        answer(request.send().await).await
    }

    async fn email(&self, delivery: &Delivery) -> Result<(), String> {
        let Some(smtp) = &self.smtp else {
            return Err("PROBACTR_SMTP_URL is not set on this monitor: email channels cannot send".into());
        };
        let from: Mailbox = self
            .from
            .parse()
            .map_err(|err| format!("PROBACTR_SMTP_FROM: {err}"))?;
        let mut builder = Message::builder()
            .from(from)
            .subject(message::subject(&delivery.payload))
            .message_id(Some(format!("<{}@probactr>", delivery.delivery_id)));
        let recipients = delivery
            .channel
            .config
            .get("to")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|to| {
                let address = to.as_str().unwrap_or_default();
                address
                    .parse::<Mailbox>()
                    .map_err(|err| format!("recipient {address:?}: {err}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if recipients.is_empty() {
            return Err("the channel has no recipient".into());
        }
        for mailbox in recipients {
            builder = builder.to(mailbox);
        }
        let mail = builder
            .multipart(MultiPart::alternative_plain_html(
                message::plain_text(&delivery.payload),
                message::html(&delivery.payload),
            ))
            .map_err(|err| format!("cannot build the mail: {err}"))?;
        smtp.send(mail)
            .await
            .map(|_| ())
            .map_err(|err| format!("SMTP: {err}"))
    }
}

fn smtp_transport(settings: &SmtpSettings) -> anyhow::Result<AsyncSmtpTransport<Tokio1Executor>> {
    let tls = || {
        TlsParameters::new(settings.host.clone())
            .map_err(|err| anyhow::anyhow!("PROBACTR_SMTP_URL: cannot set up TLS: {err}"))
    };
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(settings.host.as_str())
        .port(settings.port)
        .timeout(Some(TIMEOUT))
        .tls(match settings.tls {
            SmtpTls::None => Tls::None,
            SmtpTls::StartTls => Tls::Required(tls()?),
            SmtpTls::Wrapper => Tls::Wrapper(tls()?),
        });
    if let Some(user) = &settings.user {
        builder = builder.credentials(Credentials::new(
            user.clone(),
            settings.password.clone().unwrap_or_default(),
        ));
    }
    Ok(builder.build())
}

impl Sender {
    /// The channel's URL, opened from its sealed form (or, for a channel of a release
    /// before sealed URLs not yet sealed by a manager's start, from its configuration);
    /// refused when it names an address the guard refuses (names are checked by the
    /// resolver). Errors never repeat the URL: it is a credential.
    fn url_of(&self, delivery: &Delivery) -> Result<Url, String> {
        let text = self.url_text(delivery)?;
        let url = Url::parse(&text).map_err(|err| format!("the channel's url: {err}"))?;
        check_literal(&self.policy, &url).map_err(|refusal| refusal.to_string())?;
        Ok(url)
    }

    /// The channel's URL as configured: opened when sealed.
    fn url_text(&self, delivery: &Delivery) -> Result<String, String> {
        Ok(match &delivery.channel.url {
            Some(sealed) => self
                .keys
                .open(&Owner::ChannelUrl(delivery.channel.id), sealed)
                .map_err(|err| err.to_string())?,
            None => delivery
                .channel
                .config
                .get("url")
                .and_then(Value::as_str)
                .ok_or("the channel has no url")?
                .to_owned(),
        })
    }
}

async fn answer(result: reqwest::Result<reqwest::Response>) -> Result<(), String> {
    let response = result.map_err(describe)?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let body = response.text().await.unwrap_or_default();
    let body: String = body.chars().take(200).collect();
    Err(format!("HTTP {status}: {body}"))
}

/// A reqwest error with its causes, without the URL's query (which may hold a token).
fn describe(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// HMAC-SHA256 of `body` under `secret`, in lowercase hex.
pub fn sign(secret: &str, body: &[u8]) -> String {
    // HMAC accepts keys of any length.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::sign;

    #[test]
    fn signature_is_the_hmac_sha256_of_the_body() {
        // RFC 4231 test case 2.
        assert_eq!(
            sign("Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
