//! Who the client is: its address from REMOTE_ADDR (or from a forwarded-for header, only when
//! the request came through a trusted proxy), with IPv6 clients grouped by prefix.

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

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.prefix) == self.addr
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
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
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

/// Parses one address as a server or proxy writes it: plain, with an IPv6 zone (`fe80::1%eth0`),
/// in brackets, or with a port (`192.0.2.1:5678`, `[2001:db8::1]:443`).
pub fn parse_address(s: &str) -> Option<IpAddr> {
    let s = s.trim_matches(|c| c == ' ' || c == '\t');
    if s.is_empty() || s.len() > 64 {
        return None;
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    let unbracketed = match s.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map(|(inner, _port)| inner)?,
        None => match s.split_once(':') {
            // `a.b.c.d:port`; a bare IPv6 address has more than one colon and parsed above
            // unless it carries a zone.
            Some((host, port)) if !port.contains(':') => host,
            _ => s,
        },
    };
    let without_zone = unbracketed.split('%').next().unwrap_or(unbracketed);
    without_zone.parse::<IpAddr>().ok().map(canonical)
}

/// How the client's address is found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClientPolicy {
    /// IPv6 clients are grouped by this prefix length (1..=128).
    pub ipv6_prefix: u8,
    /// Proxies whose forwarded-for header is believed.
    #[serde(serialize_with = "crate::show::texts")]
    pub trusted_proxies: Vec<Cidr>,
}

/// Why no client address could be found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityError {
    /// The server gave no REMOTE_ADDR.
    Missing,
    /// REMOTE_ADDR is not an address.
    Invalid,
}

impl ClientPolicy {
    fn trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|c| c.contains(ip))
    }

    /// The client's address. A forwarded-for header counts only when the peer is a trusted
    /// proxy; then the client is the rightmost address in it that is not a trusted proxy.
    pub fn client_address(
        &self,
        remote_addr: Option<&str>,
        forwarded: Option<&str>,
    ) -> Result<IpAddr, IdentityError> {
        let remote = remote_addr.ok_or(IdentityError::Missing)?;
        let mut client = parse_address(remote).ok_or(IdentityError::Invalid)?;
        if let Some(header) = forwarded {
            for hop in header.rsplit(',') {
                if !self.trusted(client) {
                    break;
                }
                match parse_address(hop) {
                    Some(ip) => client = ip,
                    None => break,
                }
            }
        }
        Ok(client)
    }

    /// The identity a per-address rule counts by: an IPv4 address, or an IPv6 prefix (a whole
    /// address, with a prefix of 128, written as the address alone, as `REMOTE_ADDR` has it).
    pub fn identity(&self, ip: IpAddr) -> String {
        match canonical(ip) {
            IpAddr::V4(v4) => v4.to_string(),
            v6 if self.ipv6_prefix >= 128 => v6.to_string(),
            v6 => format!("{}/{}", mask(v6, self.ipv6_prefix), self.ipv6_prefix),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(trusted: &[&str]) -> ClientPolicy {
        ClientPolicy {
            ipv6_prefix: 64,
            trusted_proxies: trusted.iter().map(|s| Cidr::parse(s).unwrap()).collect(),
        }
    }

    fn client(p: &ClientPolicy, remote: &str, fwd: Option<&str>) -> String {
        p.identity(p.client_address(Some(remote), fwd).unwrap())
    }

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

    #[test]
    fn ipv6_clients_are_grouped_by_prefix() {
        let p = policy(&[]);
        assert_eq!(
            client(&p, "2001:db8:1:2:aaaa::1", None),
            "2001:db8:1:2::/64"
        );
        assert_eq!(
            client(&p, "2001:db8:1:2:ffff:ffff:ffff:ffff", None),
            "2001:db8:1:2::/64"
        );
        assert_ne!(client(&p, "2001:db8:1:3::1", None), "2001:db8:1:2::/64");
        let p56 = ClientPolicy {
            ipv6_prefix: 56,
            ..p.clone()
        };
        assert_eq!(
            client(&p56, "2001:db8:1:2ff::1", None),
            "2001:db8:1:200::/56"
        );
        let p128 = ClientPolicy {
            ipv6_prefix: 128,
            ..p
        };
        assert_eq!(client(&p128, "2001:db8::7", None), "2001:db8::7");
    }

    #[test]
    fn ipv4_and_mapped_addresses_are_one_client() {
        let p = policy(&[]);
        assert_eq!(client(&p, "203.0.113.7", None), "203.0.113.7");
        assert_eq!(client(&p, "::ffff:203.0.113.7", None), "203.0.113.7");
    }

    #[test]
    fn odd_address_spellings() {
        for (spelled, address) in [
            ("fe80::1%eth0", "fe80::1"),
            ("[2001:db8::1]:443", "2001:db8::1"),
            ("192.0.2.1:5678", "192.0.2.1"),
            (" 192.0.2.1 ", "192.0.2.1"),
        ] {
            assert_eq!(
                parse_address(spelled),
                Some(address.parse().unwrap()),
                "{spelled:?}"
            );
        }
        for bad in [
            "",
            "unknown",
            "1.2.3",
            "999.1.1.1",
            "[::1",
            "::1]:80",
            "a:b",
            &"1".repeat(100),
        ] {
            assert_eq!(parse_address(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn forwarded_headers_are_ignored_from_untrusted_peers() {
        let p = policy(&["10.0.0.0/8"]);
        assert_eq!(
            client(&p, "198.51.100.1", Some("203.0.113.7")),
            "198.51.100.1"
        );
        let none = policy(&[]);
        assert_eq!(client(&none, "10.0.0.1", Some("203.0.113.7")), "10.0.0.1");
    }

    #[test]
    fn forwarded_headers_from_trusted_proxies_name_the_client() {
        let p = policy(&["10.0.0.0/8", "2001:db8:ffff::/48"]);
        // The proxy, what it forwarded, and the client that is.
        for (remote, forwarded, want) in [
            ("10.0.0.1", "203.0.113.7", "203.0.113.7"),
            // Spoofed entries to the left of the real client are not reached.
            ("10.0.0.1", "1.1.1.1, 203.0.113.7, 10.0.0.2", "203.0.113.7"),
            ("2001:db8:ffff::1", "2001:db8:5:6::1", "2001:db8:5:6::/64"),
            // Garbage stops the walk at the last address a trusted proxy vouched for.
            ("10.0.0.1", "junk", "10.0.0.1"),
            ("10.0.0.1", "", "10.0.0.1"),
            ("10.0.0.1", "203.0.113.9\r\nX: y, 10.0.0.3", "10.0.0.3"),
            // Only proxies: the leftmost one is all we know.
            ("10.0.0.1", "10.0.0.5, 10.0.0.6", "10.0.0.5"),
        ] {
            assert_eq!(
                client(&p, remote, Some(forwarded)),
                want,
                "{remote} forwarding {forwarded:?}"
            );
        }
    }

    #[test]
    fn missing_or_invalid_remote_addr() {
        let p = policy(&[]);
        assert_eq!(p.client_address(None, None), Err(IdentityError::Missing));
        assert_eq!(
            p.client_address(Some("nonsense"), None),
            Err(IdentityError::Invalid)
        );
    }
}
