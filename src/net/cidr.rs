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

    /// A range written out in full, `ADDR/PREFIX`, read when the program is compiled (for the
    /// tables shipped in it): IPv4 as four decimal numbers, IPv6 as hexadecimal groups with at
    /// most one `::`, the prefix in decimal. A text not of that form stops the build; a range
    /// read so equals [`Cidr::parse`]'s (a test compares them).
    pub const fn parse_const(s: &str) -> Cidr {
        let b = s.as_bytes();
        let mut slash = 0;
        while slash < b.len() && b[slash] != b'/' {
            slash += 1;
        }
        assert!(slash + 1 < b.len(), "a range is written ADDR/PREFIX");
        let prefix = number(b, slash + 1, b.len(), 10);
        let mut colons = false;
        let mut i = 0;
        while i < slash {
            colons |= b[i] == b':';
            i += 1;
        }
        if !colons {
            assert!(prefix <= 32, "an IPv4 prefix is at most 32");
            let (mut bits, mut start, mut octets, mut i) = (0u32, 0, 0, 0);
            while i <= slash {
                if i == slash || b[i] == b'.' {
                    let octet = number(b, start, i, 10);
                    assert!(octet <= 255, "an IPv4 number is at most 255");
                    bits = (bits << 8) | octet;
                    octets += 1;
                    start = i + 1;
                }
                i += 1;
            }
            assert!(octets == 4, "an IPv4 address has four numbers");
            let mask = match u32::MAX.checked_shl(32 - prefix) {
                Some(m) => m,
                None => 0,
            };
            return Cidr {
                addr: IpAddr::V4(Ipv4Addr::from_bits(bits & mask)),
                prefix: prefix as u8,
            };
        }
        assert!(prefix <= 128, "an IPv6 prefix is at most 128");
        // The groups before `::` and after it, each shifted in; `gap` is where `::` stood.
        let (mut head, mut tail, mut head_groups, mut tail_groups) = (0u128, 0u128, 0u32, 0u32);
        let (mut gap, mut start, mut i) = (false, 0, 0);
        while i <= slash {
            if i == slash || b[i] == b':' {
                if i > start {
                    let group = number(b, start, i, 16) as u128;
                    if gap {
                        tail = (tail << 16) | group;
                        tail_groups += 1;
                    } else {
                        head = (head << 16) | group;
                        head_groups += 1;
                    }
                } else {
                    // An empty group only where `::` begins or ends the address.
                    let leading = i == 0 && i + 1 < slash && b[i + 1] == b':';
                    assert!(leading || (i == slash && gap), "an empty IPv6 group");
                }
                if i + 1 < slash && b[i] == b':' && b[i + 1] == b':' {
                    assert!(!gap, "an IPv6 address has at most one ::");
                    gap = true;
                    i += 1;
                }
                start = i + 1;
            }
            i += 1;
        }
        let groups = head_groups + tail_groups;
        assert!(
            groups == 8 || (gap && groups < 8),
            "an IPv6 address has eight groups, or fewer and ::"
        );
        let head_shift = 16 * (8 - head_groups);
        let head = match head.checked_shl(head_shift) {
            Some(h) => h,
            None => 0,
        };
        let mask = match u128::MAX.checked_shl(128 - prefix) {
            Some(m) => m,
            None => 0,
        };
        Cidr {
            addr: IpAddr::V6(Ipv6Addr::from_bits((head | tail) & mask)),
            prefix: prefix as u8,
        }
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

/// The number written in `b[from..to]` in `radix` (10 or 16), for [`Cidr::parse_const`].
const fn number(b: &[u8], from: usize, to: usize, radix: u32) -> u32 {
    assert!(
        from < to && to - from <= 4,
        "a number of one to four digits"
    );
    let (mut n, mut i) = (0u32, from);
    while i < to {
        let digit = match b[i] {
            d @ b'0'..=b'9' => (d - b'0') as u32,
            d @ b'a'..=b'f' if radix == 16 => (d - b'a') as u32 + 10,
            _ => panic!("not a digit of the range's number"),
        };
        n = n * radix + digit;
        i += 1;
    }
    n
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
        for written in [
            "10.0.0.0/8",
            "10.1.2.3/8",
            "0.0.0.0/0",
            "192.0.2.1/32",
            "2001:db8::/32",
            "2001:db8:ffff::1/127",
            "::/0",
            "::1/128",
            "fe80::1:2/64",
            "1:2:3:4:5:6:7:8/128",
            "2a06:98c0::/29",
            "2001:db8::/48",
            "0:0:0:0:0:0:0:1/128",
        ] {
            assert_eq!(
                Cidr::parse_const(written),
                Cidr::parse(written).unwrap(),
                "{written}"
            );
        }
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
