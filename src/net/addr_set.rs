//! A set of addresses and ranges (IPv4 and IPv6) that answers "is this address in it?" in
//! O(log n): ranges are merged into sorted, disjoint intervals and searched by bisection, so a
//! block list of thousands of entries costs a request a few comparisons.

use std::net::IpAddr;

use crate::net::cidr::Cidr;

/// Disjoint, sorted, inclusive intervals of IPv4 and IPv6 addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddrSet {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
    /// The ranges as written, for printing.
    ranges: Vec<Cidr>,
}

/// Sorts and merges overlapping or adjacent intervals.
fn merge<T: Copy + Ord + num::Step>(mut list: Vec<(T, T)>) -> Vec<(T, T)> {
    list.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(list.len());
    for (start, end) in list {
        match out.last_mut() {
            Some(last) if start <= last.1 || T::after(last.1) == Some(start) => {
                last.1 = last.1.max(end);
            }
            _ => out.push((start, end)),
        }
    }
    out
}

/// Whether `x` lies in one of the sorted, disjoint `intervals`.
fn within<T: Copy + Ord>(intervals: &[(T, T)], x: T) -> bool {
    // The last interval starting at or before `x`.
    let i = intervals.partition_point(|(start, _)| *start <= x);
    i > 0 && x <= intervals[i - 1].1
}

/// The one step the merge needs: the next integer, if any.
mod num {
    pub trait Step: Sized {
        fn after(self) -> Option<Self>;
    }
    impl Step for u32 {
        fn after(self) -> Option<u32> {
            self.checked_add(1)
        }
    }
    impl Step for u128 {
        fn after(self) -> Option<u128> {
            self.checked_add(1)
        }
    }
}

impl AddrSet {
    pub fn new(ranges: Vec<Cidr>) -> AddrSet {
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for c in &ranges {
            match c.bounds() {
                (IpAddr::V4(a), IpAddr::V4(b)) => v4.push((u32::from(a), u32::from(b))),
                (IpAddr::V6(a), IpAddr::V6(b)) => v6.push((u128::from(a), u128::from(b))),
                _ => unreachable!("a range's bounds are of one family"),
            }
        }
        AddrSet {
            v4: merge(v4),
            v6: merge(v6),
            ranges,
        }
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match crate::net::cidr::canonical(ip) {
            IpAddr::V4(a) => within(&self.v4, u32::from(a)),
            IpAddr::V6(a) => within(&self.v6, u128::from(a)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The ranges as given.
    pub fn ranges(&self) -> &[Cidr] {
        &self.ranges
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(list: &[&str]) -> AddrSet {
        AddrSet::new(list.iter().map(|s| Cidr::parse(s).unwrap()).collect())
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn addresses_and_ranges_of_both_families() {
        let s = set(&["10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "::1"]);
        for yes in [
            "10.0.0.0",
            "10.255.255.255",
            "192.0.2.7",
            "::ffff:10.1.1.1",
            "2001:db8:ffff::9",
            "::1",
        ] {
            assert!(s.contains(ip(yes)), "{yes}");
        }
        for no in [
            "9.255.255.255",
            "11.0.0.0",
            "192.0.2.6",
            "192.0.2.8",
            "2001:db9::",
            "::2",
            "0.0.0.0",
        ] {
            assert!(!s.contains(ip(no)), "{no}");
        }
        assert!(!AddrSet::default().contains(ip("1.2.3.4")));
        assert!(set(&["0.0.0.0/0"]).contains(ip("255.255.255.255")));
        assert!(set(&["::/0"]).contains(ip("ffff::")));
        assert!(
            !set(&["::/0"]).contains(ip("1.2.3.4")),
            "IPv4 is not in ::/0"
        );
    }

    #[test]
    fn overlapping_and_adjacent_ranges_merge() {
        let s = set(&["10.0.0.0/24", "10.0.1.0/24", "10.0.0.128/25", "10.0.3.0/24"]);
        assert_eq!(s.v4.len(), 2);
        assert!(s.contains(ip("10.0.1.255")));
        assert!(!s.contains(ip("10.0.2.0")));
        assert!(s.contains(ip("10.0.3.0")));
    }

    /// Every answer agrees with asking each range in turn, on random ranges and addresses.
    #[test]
    fn agrees_with_a_linear_scan() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..50 {
            let ranges: Vec<Cidr> = (0..(next() % 40))
                .map(|_| {
                    let a = std::net::Ipv4Addr::from((next() as u32) & 0xFF_FF_00_00 | 0x0A00_0000);
                    Cidr::parse(&format!("{a}/{}", 8 + next() % 25)).unwrap()
                })
                .collect();
            let s = AddrSet::new(ranges.clone());
            for _ in 0..500 {
                let probe = IpAddr::V4(std::net::Ipv4Addr::from(
                    (next() as u32) & 0x0FFF_FFFF | 0x0A00_0000,
                ));
                let linear = ranges.iter().any(|c| c.contains(probe));
                assert_eq!(s.contains(probe), linear, "{probe} in {ranges:?}");
            }
        }
    }
}
