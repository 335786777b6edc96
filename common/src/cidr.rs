//! Address ranges in CIDR notation, as the HTTP job guard's allow and deny lists and the
//! manager's trusted proxies name them.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An address range in CIDR notation (`10.0.0.0/8`, `fe80::/10`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// `addr/prefix`, or a bare address (a range of one). Host bits are cleared.
    pub fn parse(text: &str) -> Option<Cidr> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr.parse::<IpAddr>().ok()?, Some(prefix.parse::<u8>().ok()?)),
            None => (text.parse::<IpAddr>().ok()?, None),
        };
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(bits);
        if prefix > bits {
            return None;
        }
        Some(Cidr {
            network: Cidr::masked(addr, prefix),
            prefix,
        })
    }

    /// Whether `addr` is in the range.
    pub fn contains(&self, addr: &IpAddr) -> bool {
        addr.is_ipv4() == self.network.is_ipv4() && Cidr::masked(*addr, self.prefix) == self.network
    }

    /// `addr` with all but its first `prefix` bits cleared.
    fn masked(addr: IpAddr, prefix: u8) -> IpAddr {
        match addr {
            IpAddr::V4(v4) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
            }
            IpAddr::V6(v6) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
            }
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// A text that is neither a CIDR range nor an IP address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is neither a CIDR range (like 10.0.0.0/8) nor an IP address")]
pub struct NotACidr(String);

impl FromStr for Cidr {
    type Err = NotACidr;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Cidr::parse(text.trim()).ok_or_else(|| NotACidr(text.to_owned()))
    }
}
