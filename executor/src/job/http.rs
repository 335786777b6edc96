//! `http` jobs: one request, judged by its status, with a guard against SSRF.
//!
//! # Why a guard
//!
//! Whoever may edit an HTTP job may make the executor send requests from *inside* the
//! network. The classic abuse is the cloud metadata service (`169.254.169.254`, on
//! AWS also `fd00:ec2::254`, on Google Cloud `fd20:ce::254`, on Alibaba Cloud
//! `100.100.100.200`; Azure's WireServer `168.63.129.16` hands out extension settings
//! alike), which hands out the machine's credentials to anyone who can reach it from
//! the machine. So by default the executor refuses link-local addresses
//! (`169.254.0.0/16`, `fe80::/10`) and those metadata addresses, unless
//! `PROBACTR_HTTP_ALLOW` lists a range that contains the address; and it refuses
//! anything in `PROBACTR_HTTP_DENY` (for example your private ranges), allow list or
//! not. Loopback is allowed by default (a job calling a sidecar is normal).
//!
//! # Why the *resolved* address
//!
//! Checking the URL's text is useless: `http://metadata.example.com/` can resolve to
//! `169.254.169.254`, and so can a name whose DNS answer changes between a check and
//! the connection (DNS rebinding). The check therefore sits in the client's resolver:
//! every address a name resolves to is checked, a name with any refused address is
//! refused as a whole, and the connection is made to exactly the addresses that were
//! checked. URLs with a literal IP never reach a resolver, so those are checked before
//! the request is sent, and again on every redirect (a permitted server may redirect to
//! a forbidden one; a redirect to a name goes through the resolver anyway). An
//! IPv4-mapped or IPv4-compatible IPv6 address (`::ffff:169.254.169.254`,
//! `::a9fe:a9fe`) or one in the NAT64 prefix (`64:ff9b::/96`) is judged by the IPv4
//! address inside it too, and the unspecified addresses (`0.0.0.0`, `0`, `::`), which
//! the kernel connects to the local host, are judged as the loopback addresses too: a
//! deny list of `127.0.0.0/8,::1/128` refuses them all.
//!
//! Proxies are disabled (`HTTP_PROXY` and friends are ignored): through a proxy the
//! executor would only ever see the proxy's address, and the guard would be blind.
//!
//! # Outcome
//!
//! The response status decides: a status in the job's `expect_status` (any 2xx when it
//! lists none) succeeds, anything else fails with the status recorded. The body's tail
//! is kept as the run's output. Redirects are followed (at most 10) and the final
//! status counts. The timeout covers the whole exchange, body included.

use std::error::Error as StdError;
use std::sync::Arc;

use probactr_common::http_guard::{check_literal, GuardedResolver};
pub use probactr_common::http_guard::{HttpPolicy, Refusal};
use probactr_common::jobspec::{FollowRedirects, HttpSpec};
use probactr_common::masking::MaskStream;
use reqwest::redirect;
use reqwest::{Method, Url};
use tokio_util::sync::CancellationToken;

use super::{timed_out_error, Ending, Execution, JobContext, Limits, TailBuffer, STOPPED_ERROR};

/// How many redirects a request may follow.
const MAX_REDIRECTS: usize = 10;

// ---------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------

/// The HTTP client of HTTP jobs: one per executor (connections are pooled), with the
/// address policy built into its resolver and redirect policy.
#[derive(Debug, Clone)]
pub struct HttpRunner {
    client: reqwest::Client,
    policy: Arc<HttpPolicy>,
}

impl HttpRunner {
    /// Builds the client. Fails only if the TLS backend cannot be set up.
    pub fn new(policy: HttpPolicy) -> Result<Self, reqwest::Error> {
        let policy = Arc::new(policy);
        // Redirects are followed by `exchange`, which decides per job what crosses them.
        let client = reqwest::Client::builder()
            .user_agent(concat!("probactr/", env!("CARGO_PKG_VERSION")))
            .no_proxy()
            .dns_resolver(GuardedResolver::new(policy.clone()))
            .redirect(redirect::Policy::none())
            .build()?;
        Ok(HttpRunner { client, policy })
    }

    /// The address policy.
    pub fn policy(&self) -> &HttpPolicy {
        &self.policy
    }

    /// Runs an HTTP job.
    pub(super) async fn run(
        &self,
        spec: &HttpSpec,
        ctx: &JobContext,
        limits: &Limits,
        stop: &CancellationToken,
    ) -> Execution {
        let request = match self.request(spec, ctx) {
            Ok(request) => request,
            Err(error) => return Execution::failed(error),
        };
        let follow = Follow {
            spec,
            ctx,
            policy: &self.policy,
        };
        let mut progress = Progress {
            status: None,
            body: TailBuffer::new(limits.output_bytes),
        };
        let outcome = tokio::select! {
            biased;
            () = stop.cancelled() => Outcome::Stopped,
            result = tokio::time::timeout(limits.timeout, exchange(&self.client, request, &follow, &mut progress)) => {
                match result {
                    Err(_elapsed) => Outcome::TimedOut,
                    Ok(Err(error)) => Outcome::Broken(error),
                    Ok(Ok(())) => Outcome::Complete,
                }
            }
        };
        judge(spec, limits, outcome, &progress)
    }

    /// Builds the request, refusing a literal IP the policy refuses.
    fn request(&self, spec: &HttpSpec, ctx: &JobContext) -> Result<reqwest::Request, String> {
        let url = Url::parse(&spec.url).map_err(|err| format!("invalid URL {:?}: {err}", spec.url))?;
        check_literal(&self.policy, &url).map_err(|refusal| refusal.to_string())?;
        let method =
            Method::from_bytes(spec.method.as_bytes()).map_err(|err| format!("invalid method: {err}"))?;
        let mut builder = self.client.request(method, url);
        for (name, value) in &spec.headers {
            builder = builder.header(name, value);
        }
        for (name, value) in ctx.identity() {
            builder = builder.header(header_name(name), value);
        }
        if let Some((parent, state)) = &ctx.trace {
            builder = builder.header("traceparent", parent);
            if let Some(state) = state {
                builder = builder.header("tracestate", state);
            }
        }
        if let Some(body) = &spec.body {
            builder = builder.body(body.clone());
        }
        builder
            .build()
            .map_err(|err| format!("invalid request: {}", describe(&err)))
    }
}

/// `RUN_ID` → `X-Probactr-Run-Id`.
fn header_name(suffix: &str) -> String {
    let words: Vec<String> = suffix
        .split('_')
        .map(|word| {
            let lower = word.to_ascii_lowercase();
            let mut chars = lower.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect();
    format!("X-Probactr-{}", words.join("-"))
}

/// What following a job's redirects needs: its spec (headers, body, policy), its
/// identity headers and the address policy.
struct Follow<'a> {
    spec: &'a HttpSpec,
    ctx: &'a JobContext,
    policy: &'a HttpPolicy,
}

impl Follow<'_> {
    /// The request a redirect `response` to `request` leads to, or None when the job's
    /// `follow_redirects` says to stop here (or the response is no redirect). Same
    /// origin: the same headers, and the body for 307 and 308. Another origin (only with
    /// `any`): none of the job's headers and never a body.
    fn next(
        &self,
        request: &reqwest::Request,
        response: &reqwest::Response,
    ) -> Result<Option<reqwest::Request>, String> {
        let status = response.status();
        if !status.is_redirection() || self.spec.follow_redirects == FollowRedirects::None {
            return Ok(None);
        }
        let Some(location) = response.headers().get(reqwest::header::LOCATION) else {
            return Ok(None);
        };
        let location = location
            .to_str()
            .map_err(|_| "a redirect with an unreadable Location".to_owned())?;
        let url = request
            .url()
            .join(location)
            .map_err(|err| format!("a redirect to an invalid URL {location:?}: {err}"))?;
        let same_origin = url.origin() == request.url().origin();
        if !same_origin && self.spec.follow_redirects == FollowRedirects::SameOrigin {
            tracing::info!(to = %url.origin().ascii_serialization(), "not following a redirect to another origin");
            return Ok(None);
        }
        check_literal(self.policy, &url).map_err(|refusal| refusal.to_string())?;
        let keeps_method = matches!(status.as_u16(), 307 | 308);
        let method = if keeps_method || request.method() == Method::HEAD {
            request.method().clone()
        } else {
            Method::GET
        };
        let mut next = reqwest::Request::new(method, url);
        if same_origin {
            for (name, value) in &self.spec.headers {
                append_header(&mut next, name, value)?;
            }
            if keeps_method {
                if let Some(body) = &self.spec.body {
                    *next.body_mut() = Some(body.clone().into());
                }
            }
        }
        for (name, value) in self.ctx.identity() {
            append_header(&mut next, &header_name(name), &value)?;
        }
        Ok(Some(next))
    }
}

fn append_header(request: &mut reqwest::Request, name: &str, value: &str) -> Result<(), String> {
    let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
        .map_err(|err| format!("invalid header name {name:?}: {err}"))?;
    let value = reqwest::header::HeaderValue::from_str(value)
        .map_err(|err| format!("invalid header value: {err}"))?;
    request.headers_mut().append(name, value);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Exchange
// ---------------------------------------------------------------------------------------

/// What arrived so far; kept outside the exchange so that a timeout still shows it.
struct Progress {
    status: Option<u16>,
    body: TailBuffer,
}

/// How the exchange ended, before the status is judged.
enum Outcome {
    Complete,
    Broken(String),
    TimedOut,
    Stopped,
}

/// Sends the request and reads the body into `progress`; the error is a transport error.
async fn exchange(
    client: &reqwest::Client,
    request: reqwest::Request,
    follow: &Follow<'_>,
    progress: &mut Progress,
) -> Result<(), String> {
    let mut request = request;
    let mut redirects = 0;
    let mut response = loop {
        let sent = request.try_clone();
        let response = client.execute(request).await.map_err(|err| describe(&err))?;
        let next = match &sent {
            Some(sent) => follow.next(sent, &response)?,
            None => None,
        };
        match next {
            Some(next) if redirects < MAX_REDIRECTS => {
                redirects += 1;
                request = next;
            }
            Some(_) => return Err(format!("more than {MAX_REDIRECTS} redirects")),
            None => break response,
        }
    };
    progress.status = Some(response.status().as_u16());
    // A server may echo what it was sent (a token in a header or the URL): the body is
    // masked as it arrives, before the tail keeps its end.
    let mut masked = MaskStream::new(follow.ctx.masker.clone());
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| format!("while reading the body: {}", describe(&err)))?
    {
        progress.body.push(&masked.push(&chunk));
    }
    progress.body.push(&masked.finish());
    Ok(())
}

/// The execution for an outcome: the status decides when the exchange completed.
fn judge(spec: &HttpSpec, limits: &Limits, outcome: Outcome, progress: &Progress) -> Execution {
    let mut execution = match outcome {
        Outcome::Complete => match progress.status {
            Some(status) if spec.accepts(status) => Execution::ended(Ending::Succeeded),
            Some(status) => Execution::failed(format!(
                "unexpected HTTP status {status} (expected {})",
                expected(spec)
            )),
            None => Execution::failed("no response"),
        },
        Outcome::Broken(error) => Execution::failed(error),
        Outcome::TimedOut => Execution::ended(Ending::TimedOut).with_error(timed_out_error(limits.timeout)),
        Outcome::Stopped => Execution::ended(Ending::Stopped).with_error(STOPPED_ERROR),
    };
    execution.http_status = progress.status.map(i32::from);
    execution.with_output(&progress.body)
}

fn expected(spec: &HttpSpec) -> String {
    if spec.expect_status.is_empty() {
        return "2xx".to_owned();
    }
    spec.expect_status
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A reqwest error as one line: a refusal alone when the policy refused, else the
/// error and its causes.
fn describe(err: &(dyn StdError + 'static)) -> String {
    let mut source: Option<&(dyn StdError + 'static)> = Some(err);
    let mut parts = Vec::new();
    while let Some(current) = source {
        if let Some(refusal) = current.downcast_ref::<Refusal>() {
            return refusal.to_string();
        }
        let text = current.to_string();
        if !parts.iter().any(|part: &String| part.contains(&text)) {
            parts.push(text);
        }
        source = current.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names() {
        assert_eq!(header_name("RUN_ID"), "X-Probactr-Run-Id");
        assert_eq!(header_name("SCHEDULED_AT"), "X-Probactr-Scheduled-At");
        assert_eq!(header_name("FENCE"), "X-Probactr-Fence");
    }
}
