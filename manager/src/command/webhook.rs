//! The webhook settings of a trigger of kind `webhook` ([`WebhookDraft`]): signature
//! checking, the body's mapping to run parameters, the header naming a delivery, the
//! rate. Read with the rest of a trigger's body; each field absent keeps its stored value
//! on an edit.

use axum::http::HeaderName;
use probactr_common::json_path::JsonPath;
use probactr_common::store::trigger_webhooks::{DEFAULT_RATE_PER_MINUTE, HMAC_SHA256};
use serde_json::{Map, Value};

use super::Checks;
use crate::input::{Given, Input};

/// The most deliveries per minute a webhook may accept.
pub const MAX_RATE_PER_MINUTE: i64 = 100_000;

/// Signature checking as given: the secret in the clear, to be sealed. In the API: how a
/// webhook trigger checks a delivery's signature, an HMAC-SHA256 of the body (of
/// `t.body` when the header carries a `t=` time, as Stripe's does), in hex, after
/// `prefix`, in `header`.
#[derive(Debug, Clone, utoipa::ToSchema)]
pub struct SignatureSpec {
    /// The header carrying it: `X-Hub-Signature-256` (GitHub), `Stripe-Signature`.
    pub header: String,
    /// The shared secret (write-only: sealed, never shown).
    #[schema(write_only)]
    pub secret: String,
    /// `hmac-sha256` (the default and only one).
    #[schema(required = false)]
    pub algorithm: String,
    /// What precedes the hex MAC: `sha256=` (GitHub), `v1=` (Stripe). Default none (empty).
    #[schema(required = false)]
    pub prefix: String,
}

/// A trigger body's webhook fields.
#[derive(Debug, Clone, Default, utoipa::ToSchema)]
pub struct WebhookDraft {
    /// For `webhook`: check each delivery's signature (null: unsigned deliveries).
    #[schema(value_type = Option<SignatureSpec>)]
    pub signature: Given<SignatureSpec>,
    /// For `webhook`: run parameter name to a path into the JSON body, such as
    /// `{"ref": "$.ref", "sha": "$.head_commit.id"}` (`$`, `.name`, `[index]`).
    #[schema(value_type = Option<Object>)]
    pub params_from: Given<Map<String, Value>>,
    /// For `webhook`: the header naming a delivery (`X-GitHub-Delivery`); a repeat within
    /// 24 h answers with the first run and starts nothing.
    #[schema(value_type = Option<String>)]
    pub dedup_header: Given<String>,
    /// For `webhook`: deliveries accepted per minute (default 60); more answer 429.
    #[schema(value_type = Option<i32>)]
    pub rate_per_minute: Given<i64>,
}

impl WebhookDraft {
    /// Reads the webhook fields of a trigger body, noting the problems in `input`.
    pub fn read(input: &mut Input) -> WebhookDraft {
        WebhookDraft {
            signature: read_signature(input),
            params_from: read_params_from(input),
            dedup_header: read_header(input, "dedup_header"),
            rate_per_minute: input.int("rate_per_minute", 1, MAX_RATE_PER_MINUTE),
        }
    }

    /// Whether any webhook field was given.
    pub fn is_given(&self) -> bool {
        self.signature.is_some()
            || self.params_from.is_some()
            || self.dedup_header.is_some()
            || self.rate_per_minute.is_some()
    }

    /// Reports each given field as not applying (the trigger is not a webhook).
    pub fn reject_all(&self, checks: &mut Checks) {
        let given = [
            ("signature", self.signature.is_some()),
            ("params_from", self.params_from.is_some()),
            ("dedup_header", self.dedup_header.is_some()),
            ("rate_per_minute", self.rate_per_minute.is_some()),
        ];
        for (field, _) in given.iter().filter(|(_, given)| *given) {
            checks.error(field, "applies to webhook triggers only");
        }
    }

    /// The rate given, or `stored` (the default for a new webhook) when absent or null.
    pub fn rate_or(&self, stored: Option<i32>) -> i32 {
        match self.rate_per_minute {
            Some(Some(rate)) => rate as i32,
            Some(None) => DEFAULT_RATE_PER_MINUTE,
            None => stored.unwrap_or(DEFAULT_RATE_PER_MINUTE),
        }
    }
}

fn read_header(input: &mut Input, key: &str) -> Given<String> {
    let header = input.text(key)?;
    match header {
        Some(name) if HeaderName::from_bytes(name.as_bytes()).is_err() => {
            input.error(key, "must be an HTTP header name, such as X-GitHub-Delivery");
            None
        }
        other => Some(other),
    }
}

fn read_signature(input: &mut Input) -> Given<SignatureSpec> {
    let Some(mut nested) = input.object("signature")? else {
        return Some(None);
    };
    let header = read_header(&mut nested, "header");
    let header = nested.required("header", header);
    let secret = nested.required_text("secret").filter(|secret| {
        let long_enough = secret.len() >= 8;
        long_enough || {
            nested.error("secret", "must be at least 8 characters");
            false
        }
    });
    let algorithm = nested.text("algorithm").flatten();
    if algorithm.as_deref().is_some_and(|a| a != HMAC_SHA256) {
        nested.error("algorithm", format!("must be {HMAC_SHA256}"));
    }
    let algorithm = algorithm.unwrap_or_else(|| HMAC_SHA256.to_owned());
    let prefix = nested.text("prefix").flatten().unwrap_or_default();
    let failed = nested.has_errors();
    input.absorb(nested);
    if failed {
        return None;
    }
    Some(Some(SignatureSpec {
        header: header?,
        secret: secret?,
        algorithm,
        prefix,
    }))
}

fn read_params_from(input: &mut Input) -> Given<Map<String, Value>> {
    let given = input.raw("params_from")?;
    let map = match given {
        Value::Null => return Some(None),
        Value::Object(map) => map,
        _ => {
            input.error(
                "params_from",
                "must be an object of parameter names to paths, such as {\"ref\": \"$.ref\"}",
            );
            return None;
        }
    };
    let mut failed = false;
    for (name, path) in &map {
        let field = format!("params_from.{name}");
        match path.as_str().map(JsonPath::parse) {
            Some(Ok(_)) => {}
            Some(Err(err)) => {
                input.error(&field, err.to_string());
                failed = true;
            }
            None => {
                input.error(&field, "must be a path such as $.head_commit.id");
                failed = true;
            }
        }
    }
    (!failed).then_some(Some(map))
}
