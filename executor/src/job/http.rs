//! `http` jobs: one request, judged by its status, with a guard against SSRF.
//!
//! # Why a guard
//!
//! Whoever may edit an HTTP job may make the executor send requests from *inside* the
//! network. The classic abuse is the cloud metadata service (`169.254.169.254`, on
//! AWS also `fd00:ec2::254`, on Alibaba Cloud `100.100.100.200`), which hands out the
//! machine's credentials to anyone who can reach it from the machine. So by default the
//! executor refuses link-local addresses (`169.254.0.0/16`, `fe80::/10`) and those
//! metadata addresses, unless
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
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use probactr_common::cidr::Cidr;
use probactr_common::jobspec::{FollowRedirects, HttpSpec};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::redirect;
use reqwest::{Method, Url};
use tokio_util::sync::CancellationToken;

use super::{timed_out_error, Ending, Execution, JobContext, Limits, TailBuffer, STOPPED_ERROR};

/// How many redirects a request may follow.
const MAX_REDIRECTS: usize = 10;

// ---------------------------------------------------------------------------------------
// Policy
// ---------------------------------------------------------------------------------------

/// Which addresses HTTP jobs may connect to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpPolicy {
    allow: Vec<Cidr>,
    deny: Vec<Cidr>,
}

/// A connection the policy refused: which address, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The refused address.
    pub addr: IpAddr,
    /// The name it was resolved from, if it came from a name.
    pub host: Option<String>,
    /// Why, for a person.
    pub reason: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Some(host) => write!(
                f,
                "refused to connect to {} (resolved from {host}): {}",
                self.addr, self.reason
            ),
            None => write!(f, "refused to connect to {}: {}", self.addr, self.reason),
        }
    }
}

impl StdError for Refusal {}

impl HttpPolicy {
    /// Builds a policy from the `PROBACTR_HTTP_ALLOW` and `PROBACTR_HTTP_DENY` entries:
    /// CIDR ranges (`10.0.0.0/8`, `fd00::/8`) or single addresses. The error names the
    /// variable and the entry that is neither.
    pub fn from_lists(allow: &[String], deny: &[String]) -> Result<HttpPolicy, String> {
        Ok(HttpPolicy {
            allow: parse_ranges("PROBACTR_HTTP_ALLOW", allow)?,
            deny: parse_ranges("PROBACTR_HTTP_DENY", deny)?,
        })
    }

    /// Whether a connection to `addr` is permitted.
    pub fn check(&self, addr: IpAddr) -> Result<(), Refusal> {
        let forms = forms(addr);
        let refuse = |reason: String| {
            Err(Refusal {
                addr,
                host: None,
                reason,
            })
        };
        if let Some(range) = forms
            .iter()
            .find_map(|ip| self.deny.iter().find(|net| net.contains(ip)))
        {
            return refuse(format!("it is in {range}, listed in PROBACTR_HTTP_DENY"));
        }
        for ip in &forms {
            let Some((range, what)) = forbidden_by_default(*ip) else {
                continue;
            };
            if !self.allow.iter().any(|net| net.contains(ip)) {
                return refuse(format!(
                    "it is in {range} ({what}), refused unless PROBACTR_HTTP_ALLOW lists a range containing it"
                ));
            }
        }
        Ok(())
    }
}

fn parse_ranges(variable: &str, entries: &[String]) -> Result<Vec<Cidr>, String> {
    entries
        .iter()
        .map(|entry| {
            parse_range(entry).ok_or_else(|| {
                format!("{variable}: {entry:?} is neither a CIDR range (like 10.0.0.0/8) nor an IP address")
            })
        })
        .collect()
}

fn parse_range(entry: &str) -> Option<Cidr> {
    entry.trim().parse().ok()
}

/// Every address a connection to `addr` may reach: the address itself; the IPv4
/// address embedded in it (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`, or
/// NAT64); and, for the unspecified addresses (`0.0.0.0`, `::`), which the kernel
/// connects to the local host, the loopback addresses.
fn forms(addr: IpAddr) -> Vec<IpAddr> {
    let mut forms = vec![addr];
    if let IpAddr::V6(v6) = addr {
        let embedded = v6
            .to_ipv4_mapped()
            .or_else(|| ipv4_compatible(v6))
            .or_else(|| nat64_embedded(v6));
        forms.extend(embedded.map(IpAddr::V4));
    }
    if forms.iter().any(IpAddr::is_unspecified) {
        forms.extend([IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST)]);
    }
    forms
}

/// The IPv4 address of a deprecated IPv4-compatible address `::a.b.c.d` (not `::` or
/// `::1`, which are IPv6's own unspecified and loopback addresses).
fn ipv4_compatible(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    if s[..6] != [0; 6] || (s[6] == 0 && s[7] <= 1) {
        return None;
    }
    let [.., a, b, c, d] = v6.octets();
    Some(Ipv4Addr::new(a, b, c, d))
}

/// The IPv4 address inside an address of the NAT64 well-known prefix `64:ff9b::/96`.
fn nat64_embedded(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    if s[..6] != [0x64, 0xff9b, 0, 0, 0, 0] {
        return None;
    }
    let [.., a, b, c, d] = v6.octets();
    Some(Ipv4Addr::new(a, b, c, d))
}

/// The default-refused range containing `ip`, with what it is.
fn forbidden_by_default(ip: IpAddr) -> Option<(&'static str, &'static str)> {
    const AWS_V6_METADATA: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254);
    const ALIBABA_METADATA: Ipv4Addr = Ipv4Addr::new(100, 100, 100, 200);
    match ip {
        IpAddr::V4(v4) if v4.is_link_local() => {
            Some(("169.254.0.0/16", "link-local, home of cloud metadata services"))
        }
        IpAddr::V4(v4) if v4 == ALIBABA_METADATA => {
            Some(("100.100.100.200", "the Alibaba Cloud metadata service"))
        }
        IpAddr::V6(v6) if v6 == AWS_V6_METADATA => Some(("fd00:ec2::254", "the AWS metadata service")),
        IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => Some(("fe80::/10", "IPv6 link-local")),
        _ => None,
    }
}

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

/// A resolver that refuses names resolving to addresses the policy refuses.
#[derive(Debug)]
struct GuardedResolver {
    policy: Arc<HttpPolicy>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for addr in &addrs {
                policy.check(addr.ip()).map_err(|refusal| Refusal {
                    host: Some(host.clone()),
                    ..refusal
                })?;
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

impl HttpRunner {
    /// Builds the client. Fails only if the TLS backend cannot be set up.
    pub fn new(policy: HttpPolicy) -> Result<Self, reqwest::Error> {
        let policy = Arc::new(policy);
        // Redirects are followed by `exchange`, which decides per job what crosses them.
        let client = reqwest::Client::builder()
            .user_agent(concat!("probactr/", env!("CARGO_PKG_VERSION")))
            .no_proxy()
            .dns_resolver(GuardedResolver {
                policy: policy.clone(),
            })
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

/// Refuses a URL whose host is an IP literal the policy refuses (names are checked by
/// the resolver).
fn check_literal(policy: &HttpPolicy, url: &Url) -> Result<(), Refusal> {
    let Some(host) = url.host_str() else { return Ok(()) };
    let literal = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match literal.parse::<IpAddr>() {
        Ok(addr) => policy.check(addr),
        Err(_) => Ok(()),
    }
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
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| format!("while reading the body: {}", describe(&err)))?
    {
        progress.body.push(&chunk);
    }
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str]) -> HttpPolicy {
        let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        HttpPolicy::from_lists(&owned(allow), &owned(deny)).unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn cidr_parsing_and_matching() {
        let net = Cidr::parse("10.1.2.3/8").unwrap();
        assert_eq!(net.to_string(), "10.0.0.0/8");
        assert!(
            net.contains(&ip("10.255.0.1")) && !net.contains(&ip("11.0.0.1")) && !net.contains(&ip("::1"))
        );
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(&ip("8.8.8.8")));
        assert!(Cidr::parse("::/0").unwrap().contains(&ip("::1")));
        assert!(Cidr::parse("fe80::/10").unwrap().contains(&ip("febf::1")));
        assert!(Cidr::parse("1.2.3.4").unwrap().contains(&ip("1.2.3.4")));
        for bad in ["10.0.0.0/33", "::/129", "10.0.0/8", "x", "10.0.0.0/", "/8"] {
            assert!(Cidr::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn bad_entries_are_named() {
        let err = HttpPolicy::from_lists(&[], &["10.0.0.0/8".into(), "nope".into()]).unwrap_err();
        assert!(
            err.contains("PROBACTR_HTTP_DENY") && err.contains("\"nope\""),
            "{err}"
        );
        let err = HttpPolicy::from_lists(&["1.2.3.4/40".into()], &[]).unwrap_err();
        assert!(
            err.contains("PROBACTR_HTTP_ALLOW") && err.contains("1.2.3.4/40"),
            "{err}"
        );
    }

    #[test]
    fn default_policy() {
        let p = HttpPolicy::default();
        for ok in ["127.0.0.1", "::1", "10.0.0.1", "93.184.216.34", "fd00:ec2::253"] {
            assert!(p.check(ip(ok)).is_ok(), "{ok}");
        }
        for refused in [
            "169.254.169.254",
            "169.254.0.1",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
        ] {
            let refusal = p.check(ip(refused)).unwrap_err();
            assert!(refusal.to_string().contains(refused), "{refusal}");
        }
    }

    #[test]
    fn allow_and_deny() {
        let p = policy(&["169.254.169.254/32"], &["10.0.0.0/8", "127.0.0.0/8"]);
        assert!(p.check(ip("169.254.169.254")).is_ok());
        assert!(p.check(ip("::ffff:169.254.169.254")).is_ok());
        assert!(p.check(ip("169.254.169.253")).is_err());
        let refusal = p.check(ip("10.3.3.3")).unwrap_err();
        assert!(
            refusal.reason.contains("10.0.0.0/8") && refusal.reason.contains("PROBACTR_HTTP_DENY"),
            "{refusal}"
        );
        assert!(p.check(ip("::ffff:127.0.0.1")).is_err());
        // Deny wins over allow.
        let p = policy(&["169.254.0.0/16"], &["169.254.169.254"]);
        assert!(p.check(ip("169.254.169.254")).is_err());
    }

    #[test]
    fn addresses_that_reach_the_local_host_without_naming_it_are_denied_with_it() {
        let p = policy(&[], &["127.0.0.0/8", "::1/128"]);
        for url in [
            "http://0.0.0.0:8080/",
            "http://0:8080/",
            "http://[::]:8080/",
            "http://[::ffff:0.0.0.0]:8080/",
            "http://[::ffff:127.0.0.1]:8080/",
            "http://[::127.0.0.1]:8080/",
            "http://127.1/",
            "http://[::1]/",
        ] {
            let url = Url::parse(url).unwrap();
            assert!(check_literal(&p, &url).is_err(), "{url} was let through");
        }
        assert!(check_literal(&p, &Url::parse("http://10.0.0.1/").unwrap()).is_ok());
        assert!(check_literal(&p, &Url::parse("http://[2001:db8::1]/").unwrap()).is_ok());
    }

    #[test]
    fn every_cloud_metadata_address_is_refused_by_default() {
        let p = policy(&[], &[]);
        for addr in [
            "169.254.169.254",
            "100.100.100.200",
            "::a9fe:a9fe",
            "::ffff:a9fe:a9fe",
            "fd00:ec2::254",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(p.check(ip(addr)).is_err(), "{addr} was let through");
        }
        assert!(p.check(ip("100.100.100.201")).is_ok());
    }

    #[test]
    fn header_names() {
        assert_eq!(header_name("RUN_ID"), "X-Probactr-Run-Id");
        assert_eq!(header_name("SCHEDULED_AT"), "X-Probactr-Scheduled-At");
        assert_eq!(header_name("FENCE"), "X-Probactr-Fence");
    }

    #[test]
    fn literal_hosts() {
        let p = HttpPolicy::default();
        assert!(check_literal(&p, &Url::parse("http://[fe80::1]:80/").unwrap()).is_err());
        assert!(check_literal(&p, &Url::parse("http://169.254.169.254/latest").unwrap()).is_err());
        assert!(check_literal(&p, &Url::parse("http://example.com/").unwrap()).is_ok());
    }
}
