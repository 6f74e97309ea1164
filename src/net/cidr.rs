//! An address range (`10.0.0.0/8`, `2001:db8::/32`, or one address): parsing, matching, and
//! the address forms that mean one client (`::ffff:192.0.2.1` is `192.0.2.1`).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address range such as `10.0.0.0/8` or `2001:db8::/32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `ADDR/PREFIX` or a single address (a /32 or /128).
    pub fn parse(s: &str) -> Option<Cidr> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr = canonical(addr.parse().ok()?);
        let max = max_prefix(addr);
        let prefix = match prefix {
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p.len() <= 3 => {
                p.parse::<u8>().ok()?
            }
            Some(_) => return None,
            None => max,
        };
        (prefix <= max).then(|| Cidr {
            addr: mask(addr, prefix),
            prefix,
        })
    }

    /// The prefix length: 32 or 128 for one address.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.prefix) == self.addr
    }

    /// The first and the last address of the range.
    pub fn bounds(&self) -> (IpAddr, IpAddr) {
        let last = match self.addr {
            IpAddr::V4(a) => {
                let host = u32::MAX.checked_shr(u32::from(self.prefix)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(a) | host))
            }
            IpAddr::V6(a) => {
                let host = u128::MAX.checked_shr(u32::from(self.prefix)).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) | host))
            }
        };
        (self.addr, last)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn max_prefix(ip: IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}

/// IPv4 addresses written as IPv6 (`::ffff:192.0.2.1`) are the IPv4 client they carry.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

pub fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    // A shift by the whole width (prefix 0) leaves no bits.
    let shift = |width: u32| width - u32::from(prefix);
    match ip {
        IpAddr::V4(v4) => {
            let m = u32::MAX.checked_shl(shift(32)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & m))
        }
        IpAddr::V6(v6) => {
            let m = u128::MAX.checked_shl(shift(128)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & m))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_parsing_and_matching() {
        let c = Cidr::parse("10.1.2.3/8").unwrap();
        assert_eq!(c.to_string(), "10.0.0.0/8");
        assert!(c.contains("10.255.0.1".parse().unwrap()));
        assert!(c.contains("::ffff:10.0.0.9".parse().unwrap()));
        assert!(!c.contains("11.0.0.1".parse().unwrap()));
        assert!(!c.contains("::a00:1".parse().unwrap()));
        assert!(
            Cidr::parse("0.0.0.0/0")
                .unwrap()
                .contains("8.8.8.8".parse().unwrap())
        );
        assert_eq!(
            Cidr::parse("192.0.2.1").unwrap().to_string(),
            "192.0.2.1/32"
        );
        let v6 = Cidr::parse("2001:db8::/32").unwrap();
        assert!(v6.contains("2001:db8:ffff::1".parse().unwrap()));
        assert!(!v6.contains("2001:db9::1".parse().unwrap()));
        for bad in [
            "",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "x/8",
            "10.0.0.0/8/8",
        ] {
            assert!(Cidr::parse(bad).is_none(), "{bad:?}");
        }
    }
}
