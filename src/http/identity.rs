//! Who the client is: its address from REMOTE_ADDR (or from a forwarded-for header, only when
//! the request came through a trusted proxy), with IPv6 clients grouped by prefix.

use std::net::IpAddr;

use crate::http::request::Env;
use crate::net::addr_set::AddrSet;
use crate::net::cdn::Cdn;
pub use crate::net::cidr::Cidr;
use crate::net::cidr::{canonical, mask};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientPolicy {
    /// IPv6 clients are grouped by this prefix length (1..=128).
    pub ipv6_prefix: u8,
    /// Proxies whose forwarded-for header is believed.
    pub trusted_proxies: Vec<Cidr>,
    /// Networks trusted by name: a request from one of their ranges names its client in the
    /// network's own header.
    pub trusted_networks: Vec<Cdn>,
    trusted: AddrSet,
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
    pub fn new(ipv6_prefix: u8, trusted_proxies: Vec<Cidr>, networks: Vec<Cdn>) -> ClientPolicy {
        ClientPolicy {
            ipv6_prefix,
            trusted: AddrSet::new(trusted_proxies.clone()),
            trusted_proxies,
            trusted_networks: networks,
        }
    }

    fn trusted(&self, ip: IpAddr) -> bool {
        self.trusted.contains(ip)
    }

    /// The known network whose ranges hold `ip`, if any.
    pub fn network_of(&self, ip: IpAddr) -> Option<Cdn> {
        Cdn::ALL.into_iter().find(|cdn| cdn.holds(ip))
    }

    /// The header a trusted network names its client in, when one is trusted.
    pub fn network_header(&self) -> Option<&'static str> {
        self.trusted_networks.first().map(|c| c.header())
    }

    /// A known network that `ip` (the client as found) belongs to but that is not trusted:
    /// its visitors all share the edge's address.
    pub fn untrusted_network(&self, ip: IpAddr) -> Option<Cdn> {
        self.network_of(ip)
            .filter(|cdn| !self.trusted_networks.contains(cdn))
    }

    /// Whether a peer's word about the request counts: a trusted proxy, or an edge of a
    /// trusted network.
    pub fn vouches_for(&self, peer: IpAddr) -> bool {
        self.trusted(peer)
            || self
                .network_of(peer)
                .is_some_and(|n| self.trusted_networks.contains(&n))
    }

    /// The client's address. A forwarded-for header counts only when the peer is a trusted
    /// proxy; then the client is the rightmost address in it that is not a trusted proxy. When
    /// the client so found is an edge of a trusted network, the network's own header
    /// (`connecting`, e.g. CF-Connecting-IP) names the client; from anywhere else that header
    /// is ignored.
    pub fn client_address(
        &self,
        remote_addr: Option<&str>,
        forwarded: Option<&str>,
        connecting: Option<&str>,
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
        if let Some(edge) = self.network_of(client)
            && self.trusted_networks.contains(&edge)
            && let Some(visitor) = connecting.and_then(parse_address)
        {
            client = visitor;
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

/// The client's address for a request: REMOTE_ADDR, or what a trusted proxy's forwarded
/// header (named `forwarded_header`) or a trusted network's own header names.
pub fn client_address_in(
    policy: &ClientPolicy,
    forwarded_header: &str,
    env: &Env,
) -> Result<IpAddr, IdentityError> {
    let text = |name: &str| env.header(name).and_then(|v| std::str::from_utf8(v).ok());
    let connecting = policy.network_header().and_then(text);
    policy.client_address(env.text("REMOTE_ADDR"), text(forwarded_header), connecting)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(trusted: &[&str]) -> ClientPolicy {
        let (named, plain): (Vec<&str>, Vec<&str>) =
            trusted.iter().partition(|s| Cdn::from_name(s).is_some());
        ClientPolicy::new(
            64,
            plain.iter().map(|s| Cidr::parse(s).unwrap()).collect(),
            named.iter().filter_map(|s| Cdn::from_name(s)).collect(),
        )
    }

    fn client(p: &ClientPolicy, remote: &str, fwd: Option<&str>) -> String {
        p.identity(p.client_address(Some(remote), fwd, None).unwrap())
    }

    fn behind(p: &ClientPolicy, remote: &str, fwd: Option<&str>, cf: Option<&str>) -> String {
        p.identity(p.client_address(Some(remote), fwd, cf).unwrap())
    }

    #[test]
    fn cloudflare_edges_name_the_visitor_and_nobody_else_can() {
        let p = policy(&["cloudflare", "10.0.0.0/8"]);
        let cf = Some("203.0.113.7");
        // An edge of each family; the header from anywhere else is a forgery.
        assert_eq!(behind(&p, "173.245.48.1", None, cf), "203.0.113.7");
        assert_eq!(behind(&p, "2606:4700::1", None, cf), "203.0.113.7");
        assert_eq!(behind(&p, "198.51.100.1", None, cf), "198.51.100.1");
        assert_eq!(
            behind(&p, "173.245.64.1", None, cf),
            "173.245.64.1",
            "outside /20"
        );
        // Through the host's own proxy, then Cloudflare.
        assert_eq!(
            behind(&p, "10.0.0.1", Some("104.16.0.9"), cf),
            "203.0.113.7"
        );
        // No header, or garbage: the edge is all we know.
        assert_eq!(behind(&p, "173.245.48.1", None, None), "173.245.48.1");
        assert_eq!(behind(&p, "173.245.48.1", None, Some("x")), "173.245.48.1");
        // Not trusted: the header is ignored, and the edge is a known network not trusted.
        let plain = policy(&[]);
        assert_eq!(behind(&plain, "173.245.48.1", None, cf), "173.245.48.1");
        let edge: IpAddr = "173.245.48.1".parse().unwrap();
        assert_eq!(plain.untrusted_network(edge), Some(Cdn::Cloudflare));
        assert_eq!(p.untrusted_network(edge), None);
        assert_eq!(plain.untrusted_network("192.0.2.1".parse().unwrap()), None);
        assert_eq!(p.network_header(), Some("CF-Connecting-IP"));
        assert_eq!(plain.network_header(), None);
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
        let p56 = ClientPolicy::new(56, vec![], vec![]);
        assert_eq!(
            client(&p56, "2001:db8:1:2ff::1", None),
            "2001:db8:1:200::/56"
        );
        let p128 = ClientPolicy::new(128, vec![], vec![]);
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
        assert_eq!(
            p.client_address(None, None, None),
            Err(IdentityError::Missing)
        );
        assert_eq!(
            p.client_address(Some("nonsense"), None, None),
            Err(IdentityError::Invalid)
        );
    }
}
