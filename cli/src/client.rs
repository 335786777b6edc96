//! The REST API as the client uses it: authenticated JSON requests, and the API's errors
//! (each bad field named) turned into messages a person reads.

use std::time::Duration;

use probactr_common::backoff::Backoff;
use probactr_definitions::Refusal;
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// What went wrong talking to the manager.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The manager could not be reached.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The manager's address.
        url: String,
        /// Why.
        reason: String,
    },
    /// The manager answered with an error.
    #[error("{0}")]
    Refused(Refusal),
    /// No credentials.
    #[error("not logged in: run `probactr login URL`, or set PROBACTR_URL and PROBACTR_TOKEN")]
    NotLoggedIn,
    /// The manager could not do it now and said to try again (`Retry-After`).
    #[error("{0}")]
    Busy(Refusal),
}

impl ClientError {
    /// The error as callers see it once retrying is over: busy is a refusal like others.
    fn settled(self) -> ClientError {
        match self {
            ClientError::Busy(refusal) => ClientError::Refused(refusal),
            other => other,
        }
    }
}

/// Attempts of [`Client::post_once`] in all.
const ONCE_ATTEMPTS: u32 = 6;

/// Whether an answer says "try again": 503, or 409 with `Retry-After`.
fn response_retry_after(status: StatusCode, retry_after: bool) -> bool {
    status == StatusCode::SERVICE_UNAVAILABLE || (status == StatusCode::CONFLICT && retry_after)
}

/// A key no other call makes: the time, the process and the standard library's random
/// hasher seed (no dependency needed for 128 unpredictable-enough bits).
fn idempotency_key() -> String {
    use std::hash::{BuildHasher, Hasher};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(nanos);
    hasher.write_u32(std::process::id());
    format!(
        "probactr-cli-{nanos:x}-{:x}-{:016x}",
        std::process::id(),
        hasher.finish()
    )
}

/// A client of one manager.
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    namespace: Option<String>,
}

impl Client {
    /// A client of the manager at `base` (`http://host:port`), with a bearer token.
    pub fn new(base: &str, token: Option<String>) -> Result<Client, ClientError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .user_agent(concat!("probactr-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| ClientError::Unreachable {
                url: base.to_owned(),
                reason: err.to_string(),
            })?;
        Ok(Client {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token,
            namespace: None,
        })
    }

    /// The same client confined to one namespace (`-n`, `PROBACTR_NAMESPACE`): every read
    /// asks the API for that namespace's objects only, and definitions are applied there.
    pub fn in_namespace(mut self, namespace: Option<String>) -> Client {
        self.namespace = namespace.filter(|name| !name.is_empty());
        self
    }

    /// The namespace this client is confined to, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// `path` with the client's namespace added to its query, for the requests the API
    /// scopes by `?namespace=` (reads, and applying definitions).
    fn scoped(&self, method: &Method, path: &str) -> String {
        let Some(namespace) = &self.namespace else {
            return path.to_owned();
        };
        let scoped = *method == Method::GET || path.starts_with("/definitions/apply");
        if !scoped || path.contains("namespace=") || path.starts_with("/namespaces") {
            return path.to_owned();
        }
        let separator = if path.contains('?') { '&' } else { '?' };
        format!(
            "{path}{separator}namespace={}",
            crate::commands::encode(namespace)
        )
    }

    /// `GET /api/v1{path}`.
    pub async fn get(&self, path: &str) -> Result<Value, ClientError> {
        self.call(Method::GET, path, None).await
    }

    /// `POST /api/v1{path}` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        self.call(Method::POST, path, Some(body)).await
    }

    /// `POST /api/v1{path}` that must act once even when sent again: it carries an
    /// `Idempotency-Key` made for this call, and is sent again with the same key when the
    /// connection broke, the manager was busy (503) or the first attempt is still running
    /// (409 with `Retry-After`). The manager answers a repeat with the first answer (the
    /// same run id), so a retry never acts twice.
    pub async fn post_once(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        let key = idempotency_key();
        let backoff = Backoff::full_jitter(Duration::from_millis(200), Duration::from_secs(5));
        let mut attempt = 0;
        loop {
            let outcome = self.send(Method::POST, path, Some(body), Some(&key)).await;
            let again = matches!(
                &outcome,
                Err(ClientError::Unreachable { .. } | ClientError::Busy(_))
            );
            if !again || attempt + 1 >= ONCE_ATTEMPTS {
                return outcome.map_err(ClientError::settled);
            }
            if let Err(err) = &outcome {
                eprintln!("{err}; sending again with the same Idempotency-Key");
            }
            tokio::time::sleep(backoff.delay(attempt)).await;
            attempt += 1;
        }
    }

    /// `DELETE /api/v1{path}`.
    pub async fn delete(&self, path: &str) -> Result<Value, ClientError> {
        self.call(Method::DELETE, path, None).await
    }

    /// One request; the answer's JSON (null for an empty one), or the API's error.
    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value, ClientError> {
        self.send(method, path, body, None)
            .await
            .map_err(ClientError::settled)
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
    ) -> Result<Value, ClientError> {
        let url = format!("{}/api/v1{}", self.base, self.scoped(&method, path));
        let mut request = self.http.request(method, &url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(key) = idempotency_key {
            request = request.header("idempotency-key", key);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.map_err(|err| ClientError::Unreachable {
            url: self.base.clone(),
            reason: describe(&err),
        })?;
        let status = response.status();
        let retry_after = response.headers().contains_key("retry-after");
        let text = response.text().await.unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        if status == StatusCode::UNAUTHORIZED && self.token.is_none() && path != "/auth/token" {
            return Err(ClientError::NotLoggedIn);
        }
        // Busy (503) and "the same request is still running" (409 with Retry-After) say
        // that sending it again may succeed.
        let retry_after = response_retry_after(status, retry_after);
        if retry_after {
            return Err(ClientError::Busy(refusal(status, &body, &text)));
        }
        Err(ClientError::Refused(refusal(status, &body, &text)))
    }
}

/// The API's error: its message (with the status), and each bad field.
fn refusal(status: StatusCode, body: &Value, text: &str) -> Refusal {
    let Some(error) = body.get("error") else {
        return Refusal {
            message: format!("{status}: {}", text.chars().take(300).collect::<String>()),
            fields: Vec::new(),
        };
    };
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("request refused");
    if let Some(listed) = body.get("errors").and_then(Value::as_array) {
        // A refused apply lists its problems in the files' order.
        return Refusal {
            message: format!("{message} ({status})"),
            fields: listed.iter().map(listed_problem).collect(),
        };
    }
    let fields = error
        .get("fields")
        .and_then(Value::as_object)
        .map(|fields| {
            fields
                .iter()
                .map(|(field, problem)| (field.clone(), problem.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    Refusal {
        message: format!("{message} ({status})"),
        fields,
    }
}

/// One problem of an apply's `errors` as (`FILE:LINE: field`, problem).
fn listed_problem(problem: &Value) -> (String, String) {
    let text = |field: &str| problem[field].as_str().unwrap_or_default().to_owned();
    let mut at = text("file");
    if let Some(line) = problem["line"].as_u64() {
        at.push_str(&format!(":{line}"));
    }
    if let Some(field) = problem["field"].as_str() {
        at.push_str(&format!(": {field}"));
    }
    (at, text("message"))
}

fn describe(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The definitions of the cluster behind the API, for `export` and `apply`.
impl probactr_definitions::Registry for Client {
    async fn jobs(&self) -> Result<Vec<Value>, Refusal> {
        Ok(items(self.get("/jobs?limit=500").await.map_err(refused)?))
    }

    async fn triggers(&self, job_id: i64) -> Result<Vec<Value>, Refusal> {
        Ok(items(
            self.get(&format!("/jobs/{job_id}/triggers"))
                .await
                .map_err(refused)?,
        ))
    }

    async fn create_job(&self, body: Value) -> Result<i64, Refusal> {
        let made = self.post("/jobs", &body).await.map_err(refused)?;
        made["id"].as_i64().ok_or_else(|| Refusal {
            message: "the manager answered without a job id".into(),
            fields: Vec::new(),
        })
    }

    async fn update_job(&self, id: i64, body: Value) -> Result<(), Refusal> {
        self.call(Method::PATCH, &format!("/jobs/{id}"), Some(&body))
            .await
            .map_err(refused)?;
        Ok(())
    }

    async fn delete_job(&self, id: i64) -> Result<(), Refusal> {
        self.delete(&format!("/jobs/{id}")).await.map_err(refused)?;
        Ok(())
    }

    async fn create_trigger(&self, job_id: i64, body: Value) -> Result<(), Refusal> {
        self.post(&format!("/jobs/{job_id}/triggers"), &body)
            .await
            .map_err(refused)?;
        Ok(())
    }

    async fn update_trigger(&self, id: i64, body: Value) -> Result<(), Refusal> {
        self.call(Method::PATCH, &format!("/triggers/{id}"), Some(&body))
            .await
            .map_err(refused)?;
        Ok(())
    }

    async fn delete_trigger(&self, id: i64) -> Result<(), Refusal> {
        self.delete(&format!("/triggers/{id}")).await.map_err(refused)?;
        Ok(())
    }

    async fn channels(&self) -> Result<Option<Vec<Value>>, Refusal> {
        match self.get("/channels").await {
            Ok(page) => Ok(Some(items(page))),
            Err(ClientError::Refused(refusal)) if refusal.message.contains("(403") => Ok(None),
            Err(err) => Err(refused(err)),
        }
    }

    async fn put_channel(&self, id: Option<i64>, body: Value) -> Result<(), Refusal> {
        match id {
            None => self.post("/channels", &body).await,
            Some(id) => {
                self.call(Method::PUT, &format!("/channels/{id}"), Some(&body))
                    .await
            }
        }
        .map_err(refused)?;
        Ok(())
    }

    async fn rules(&self) -> Result<Vec<Value>, Refusal> {
        Ok(items(self.get("/alert-rules").await.map_err(refused)?))
    }

    async fn put_rule(&self, id: Option<i64>, body: Value) -> Result<(), Refusal> {
        match id {
            None => self.post("/alert-rules", &body).await,
            Some(id) => {
                self.call(Method::PUT, &format!("/alert-rules/{id}"), Some(&body))
                    .await
            }
        }
        .map_err(refused)?;
        Ok(())
    }

    async fn workflows(&self) -> Result<Vec<Value>, Refusal> {
        Ok(items(self.get("/workflows").await.map_err(refused)?))
    }

    async fn put_workflow(&self, id: Option<i64>, body: Value) -> Result<i64, Refusal> {
        let saved = match id {
            None => self.post("/workflows", &body).await,
            Some(id) => {
                self.call(Method::PUT, &format!("/workflows/{id}"), Some(&body))
                    .await
            }
        }
        .map_err(refused)?;
        saved["id"].as_i64().ok_or_else(|| Refusal {
            message: "the manager answered without a workflow id".into(),
            fields: Vec::new(),
        })
    }

    async fn workflow_triggers(&self, workflow_id: i64) -> Result<Vec<Value>, Refusal> {
        Ok(items(
            self.get(&format!("/workflows/{workflow_id}/triggers"))
                .await
                .map_err(refused)?,
        ))
    }

    async fn create_workflow_trigger(&self, workflow_id: i64, body: Value) -> Result<(), Refusal> {
        self.post(&format!("/workflows/{workflow_id}/triggers"), &body)
            .await
            .map_err(refused)?;
        Ok(())
    }

    async fn delete_workflow_trigger(&self, workflow_id: i64, id: i64) -> Result<(), Refusal> {
        self.delete(&format!("/workflows/{workflow_id}/triggers/{id}"))
            .await
            .map_err(refused)?;
        Ok(())
    }
}

fn items(page: Value) -> Vec<Value> {
    page.get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn refused(err: ClientError) -> Refusal {
    match err {
        ClientError::Refused(refusal) => refusal,
        other => Refusal {
            message: other.to_string(),
            fields: Vec::new(),
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn client(namespace: Option<&str>) -> Client {
        Client::new("http://127.0.0.1:1", None)
            .unwrap()
            .in_namespace(namespace.map(str::to_owned))
    }

    #[test]
    fn a_namespace_scopes_reads_and_apply_only() {
        let scoped = client(Some("pay ments"));
        assert_eq!(
            scoped.scoped(&Method::GET, "/jobs"),
            "/jobs?namespace=pay%20ments"
        );
        assert_eq!(
            scoped.scoped(&Method::GET, "/jobs?q=x&limit=5"),
            "/jobs?q=x&limit=5&namespace=pay%20ments"
        );
        assert_eq!(
            scoped.scoped(&Method::POST, "/definitions/apply?dry_run=false"),
            "/definitions/apply?dry_run=false&namespace=pay%20ments"
        );
        assert_eq!(scoped.scoped(&Method::POST, "/jobs/4/run"), "/jobs/4/run");
        assert_eq!(scoped.scoped(&Method::GET, "/namespaces"), "/namespaces");
        assert_eq!(
            scoped.scoped(&Method::GET, "/audit?namespace=x"),
            "/audit?namespace=x"
        );
        assert_eq!(client(None).scoped(&Method::GET, "/jobs"), "/jobs");
        assert_eq!(client(Some("")).scoped(&Method::GET, "/jobs"), "/jobs");
    }
}
