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

/// Signature checking as given: the secret in the clear, to be sealed.
#[derive(Debug, Clone)]
pub struct SignatureSpec {
    /// The header carrying the signature.
    pub header: String,
    /// The shared secret.
    pub secret: String,
    /// What precedes the hex MAC in the header (`sha256=`); empty for none.
    pub prefix: String,
}

/// A trigger body's webhook fields.
#[derive(Debug, Clone, Default)]
pub struct WebhookDraft {
    /// `signature` (null: unsigned).
    pub signature: Given<SignatureSpec>,
    /// `params_from`: parameter name to path (null: none).
    pub params_from: Given<Map<String, Value>>,
    /// `dedup_header` (null: none).
    pub dedup_header: Given<String>,
    /// `rate_per_minute` (null: the default).
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
    let prefix = nested.text("prefix").flatten().unwrap_or_default();
    let failed = nested.has_errors();
    input.absorb(nested);
    if failed {
        return None;
    }
    Some(Some(SignatureSpec {
        header: header?,
        secret: secret?,
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
