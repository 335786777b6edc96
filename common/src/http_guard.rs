//! The guard of every request probactr sends from inside the network on a user's behalf
//! (HTTP jobs from executors, alert webhooks from monitors): which addresses may be
//! reached. The executor's `job::http` module explains why the check sits in the
//! resolver and covers the addresses embedded in others; this module is the policy
//! (`PROBACTR_HTTP_ALLOW`, `PROBACTR_HTTP_DENY`, the ranges refused by default), the
//! resolver that applies it to names, and the check of URLs naming an address.

use std::error::Error as StdError;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::Url;

use crate::cidr::Cidr;

/// Which addresses HTTP jobs and alert webhooks may connect to.
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
    const GCP_V6_METADATA: Ipv6Addr = Ipv6Addr::new(0xfd20, 0x00ce, 0, 0, 0, 0, 0, 0x0254);
    const ALIBABA_METADATA: Ipv4Addr = Ipv4Addr::new(100, 100, 100, 200);
    // Azure's WireServer: it hands VM extensions their settings (secrets included) and
    // answers anything inside the VM, so it is as sensitive as a metadata service.
    const AZURE_WIRESERVER: Ipv4Addr = Ipv4Addr::new(168, 63, 129, 16);
    match ip {
        IpAddr::V4(v4) if v4.is_link_local() => {
            Some(("169.254.0.0/16", "link-local, home of cloud metadata services"))
        }
        IpAddr::V4(v4) if v4 == ALIBABA_METADATA => {
            Some(("100.100.100.200", "the Alibaba Cloud metadata service"))
        }
        IpAddr::V4(v4) if v4 == AZURE_WIRESERVER => Some((
            "168.63.129.16",
            "the Azure WireServer (VM agent and extension settings)",
        )),
        IpAddr::V6(v6) if v6 == AWS_V6_METADATA => Some(("fd00:ec2::254", "the AWS metadata service")),
        IpAddr::V6(v6) if v6 == GCP_V6_METADATA => {
            Some(("fd20:ce::254", "the Google Cloud metadata service"))
        }
        IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => Some(("fe80::/10", "IPv6 link-local")),
        _ => None,
    }
}

/// A resolver that refuses names resolving to addresses the policy refuses.
#[derive(Debug)]
pub struct GuardedResolver {
    policy: Arc<HttpPolicy>,
}

impl GuardedResolver {
    /// A resolver checking every address against `policy`.
    pub fn new(policy: Arc<HttpPolicy>) -> GuardedResolver {
        GuardedResolver { policy }
    }
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

/// Refuses a URL whose host is an IP literal the policy refuses (names are checked by
/// the resolver).
pub fn check_literal(policy: &HttpPolicy, url: &Url) -> Result<(), Refusal> {
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
            "fd20:ce::254",
            "168.63.129.16",
            "::ffff:168.63.129.16",
            "64:ff9b::a83f:8110",
        ] {
            assert!(p.check(ip(addr)).is_err(), "{addr} was let through");
        }
        assert!(p.check(ip("100.100.100.201")).is_ok());
        assert!(p.check(ip("168.63.129.17")).is_ok());
        assert!(p.check(ip("fd20:ce::253")).is_ok());
        for url in [
            "http://168.63.129.16/machine?comp=goalstate",
            "http://[fd20:ce::254]/computeMetadata/v1/",
        ] {
            let refusal = check_literal(&p, &Url::parse(url).unwrap()).unwrap_err();
            assert!(
                refusal.reason.contains("Google") || refusal.reason.contains("Azure"),
                "{refusal}"
            );
        }
    }

    #[test]
    fn literal_hosts() {
        let p = HttpPolicy::default();
        assert!(check_literal(&p, &Url::parse("http://[fe80::1]:80/").unwrap()).is_err());
        assert!(check_literal(&p, &Url::parse("http://169.254.169.254/latest").unwrap()).is_err());
        assert!(check_literal(&p, &Url::parse("http://example.com/").unwrap()).is_ok());
    }
}
