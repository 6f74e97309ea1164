//! The content delivery networks a site may sit behind, by name: their published address
//! ranges (shipped in the program) and the header in which each passes on the visitor's
//! address. `"trusted_proxies": ["cloudflare"]` names one.
//!
//! Refreshing the ranges: fetch <https://www.cloudflare.com/ips-v4> and
//! <https://www.cloudflare.com/ips-v6>, compare them with `CLOUDFLARE_V4` and `CLOUDFLARE_V6`,
//! write any change in its canonical form, set `CLOUDFLARE_RANGES_DATE` to the day they were
//! fetched (docs/configuration.md, "Behind Cloudflare", repeats it), and release. The lists rarely
//! change (the last change split 104.16.0.0/12 into 104.16.0.0/13 and 104.24.0.0/14).

use std::net::IpAddr;

use crate::net::cidr::Cidr;

/// The day `CLOUDFLARE_V4` and `CLOUDFLARE_V6` were taken from Cloudflare's published pages
/// (<https://www.cloudflare.com/ips-v4>, <https://www.cloudflare.com/ips-v6>), as the lists
/// stood that day. `resolve check` prints it.
pub const CLOUDFLARE_RANGES_DATE: &str = "2024-06-25";

/// Cloudflare's published IPv4 ranges.
pub const CLOUDFLARE_V4: &[&str] = &[
    "173.245.48.0/20",
    "103.21.244.0/22",
    "103.22.200.0/22",
    "103.31.4.0/22",
    "141.101.64.0/18",
    "108.162.192.0/18",
    "190.93.240.0/20",
    "188.114.96.0/20",
    "197.234.240.0/22",
    "198.41.128.0/17",
    "162.158.0.0/15",
    "104.16.0.0/13",
    "104.24.0.0/14",
    "172.64.0.0/13",
    "131.0.72.0/22",
];

/// Cloudflare's published IPv6 ranges.
pub const CLOUDFLARE_V6: &[&str] = &[
    "2400:cb00::/32",
    "2606:4700::/32",
    "2803:f800::/32",
    "2405:b500::/32",
    "2405:8100::/32",
    "2a06:98c0::/29",
    "2c0f:f248::/32",
];

/// Cloudflare's ranges, read from `CLOUDFLARE_V4` and `CLOUDFLARE_V6` when compiled.
static CLOUDFLARE: [Cidr; CLOUDFLARE_V4.len() + CLOUDFLARE_V6.len()] = {
    let mut all = [Cidr::parse_const("0.0.0.0/0"); CLOUDFLARE_V4.len() + CLOUDFLARE_V6.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = Cidr::parse_const(if i < CLOUDFLARE_V4.len() {
            CLOUDFLARE_V4[i]
        } else {
            CLOUDFLARE_V6[i - CLOUDFLARE_V4.len()]
        });
        i += 1;
    }
    all
};

/// A network known by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Cdn {
    Cloudflare,
}

impl Cdn {
    /// Every network known by name.
    pub const ALL: [Cdn; 1] = [Cdn::Cloudflare];

    pub fn name(self) -> &'static str {
        match self {
            Cdn::Cloudflare => "cloudflare",
        }
    }

    pub fn from_name(name: &str) -> Option<Cdn> {
        Cdn::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The header that carries the visitor's address (a single address, not a list).
    pub fn header(self) -> &'static str {
        match self {
            Cdn::Cloudflare => "CF-Connecting-IP",
        }
    }

    /// Its published ranges, as written.
    pub fn ranges(self) -> impl Iterator<Item = &'static str> {
        match self {
            Cdn::Cloudflare => CLOUDFLARE_V4.iter().chain(CLOUDFLARE_V6).copied(),
        }
    }

    /// Whether `ip` is in one of its published ranges. The ranges are read when the program is
    /// compiled: a request (which asks for every client) reads no text and allocates nothing.
    pub fn holds(self, ip: IpAddr) -> bool {
        let ranges: &[Cidr] = match self {
            Cdn::Cloudflare => &CLOUDFLARE,
        };
        ranges.iter().any(|r| r.contains(ip))
    }

    /// The day its ranges were taken from its published lists (`YYYY-MM-DD`).
    pub fn ranges_date(self) -> &'static str {
        match self {
            Cdn::Cloudflare => CLOUDFLARE_RANGES_DATE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::cidr::Cidr;

    #[test]
    fn every_published_range_parses_as_written() {
        for cdn in Cdn::ALL {
            for r in cdn.ranges() {
                let c = Cidr::parse(r).unwrap_or_else(|| panic!("{r}"));
                assert_eq!(c.to_string(), r, "written in its canonical form");
                assert_eq!(Cidr::parse_const(r), c, "read alike when compiled");
                let (first, last) = c.bounds();
                assert!(cdn.holds(first) && cdn.holds(last), "{r}");
            }
            assert_eq!(Cdn::from_name(cdn.name()), Some(cdn));
        }
        assert_eq!(Cdn::from_name("fastly"), None);
        assert_eq!(CLOUDFLARE_V4.len() + CLOUDFLARE_V6.len(), 22);
        assert_eq!(CLOUDFLARE.len(), 22);
        for outside in [
            "173.245.64.0",
            "104.28.0.0",
            "2400:cb01::",
            "192.0.2.1",
            "::1",
        ] {
            assert!(
                !Cdn::Cloudflare.holds(outside.parse().unwrap()),
                "{outside}"
            );
        }
    }

    #[test]
    fn the_ranges_date_is_a_day_and_the_documentation_gives_it() {
        let date = CLOUDFLARE_RANGES_DATE;
        let digits = |r: std::ops::Range<usize>| date[r].bytes().all(|b| b.is_ascii_digit());
        assert!(
            date.len() == 10 && digits(0..4) && digits(5..7) && digits(8..10),
            "{date}"
        );
        assert_eq!((&date[4..5], &date[7..8]), ("-", "-"), "{date}");
        let docs = include_str!("../../docs/configuration.md");
        let section = &docs[docs.find("### Behind Cloudflare").expect("the section")..];
        let section = &section[..section[4..].find("\n### ").map_or(section.len(), |i| i + 4)];
        assert!(
            section.contains(&format!("taken on {date} from")),
            "docs/configuration.md's \"Behind Cloudflare\" gives another date:\n{section}"
        );
    }
}
