//! The owner's controls over who the client is and who gets through: the `client` section
//! (IPv6 grouping, trusted proxies, networks by name), the `block` and `allow` lists and
//! `auto_block`.

use crate::config::error::{ConfigError, err};
use crate::config::raw::{RawAutoBlock, RawClient};
use crate::http::identity::{Cidr, ClientPolicy};
use crate::net::addr_set::AddrSet;
use crate::support::defaults;

/// The `client` section: how the client's address is found (IPv6 grouping, trusted proxies
/// and networks by name), and the header a trusted proxy names it in.
pub(crate) fn client(raw: Option<RawClient>) -> Result<(ClientPolicy, String), ConfigError> {
    let client = raw.unwrap_or(RawClient {
        ipv6_prefix: None,
        trusted_proxies: None,
        forwarded_header: None,
    });
    let ipv6_prefix = client.ipv6_prefix.unwrap_or(defaults::IPV6_PREFIX);
    if !(1..=128).contains(&ipv6_prefix) {
        return Err(err(
            "client.ipv6_prefix",
            "must be 1 to 128; 64 groups each subscriber's addresses (the default)",
        ));
    }
    let mut trusted_proxies = Vec::new();
    let mut trusted_networks = Vec::new();
    for (i, s) in client
        .trusted_proxies
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if let Some(cdn) = crate::net::cdn::Cdn::from_name(s) {
            trusted_networks.push(cdn);
            continue;
        }
        trusted_proxies.push(Cidr::parse(s).ok_or_else(|| {
            err(
                format!("client.trusted_proxies[{i}]"),
                format!("{s:?} is not an address or range: write e.g. \"10.0.0.0/8\" or \"2001:db8::/32\", or \"cloudflare\" for Cloudflare's published ranges"),
            )
        })?);
    }
    let forwarded_header = client
        .forwarded_header
        .unwrap_or_else(|| defaults::FORWARDED_HEADER.to_owned());
    if !crate::http::request::is_header_name(&forwarded_header) {
        return Err(err(
            "client.forwarded_header",
            "must be a header name of letters, digits and '-', e.g. \"X-Forwarded-For\" or \"CF-Connecting-IP\"",
        ));
    }
    Ok((
        ClientPolicy::new(ipv6_prefix, trusted_proxies, trusted_networks),
        forwarded_header,
    ))
}

/// `auto_block`: a client refused `refusals` times within `window_secs` is blocked for
/// `block_secs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct AutoBlock {
    pub refusals: u32,
    pub window_secs: u32,
    pub block_secs: u32,
}

/// An address list (`block`, `allow`): addresses and ranges, IPv4 and IPv6.
pub(crate) fn addr_list(list: Option<Vec<String>>, field: &str) -> Result<AddrSet, ConfigError> {
    let list = list.unwrap_or_default();
    if list.len() > defaults::MAX_LIST_ENTRIES {
        return Err(err(
            field,
            format!(
                "at most {} entries: merge neighbours into ranges (\"203.0.113.0/24\")",
                defaults::MAX_LIST_ENTRIES
            ),
        ));
    }
    let mut ranges = Vec::with_capacity(list.len());
    for (i, s) in list.iter().enumerate() {
        ranges.push(Cidr::parse(s).ok_or_else(|| {
            err(
                format!("{field}[{i}]"),
                format!("{s:?} is not an address or range: write e.g. \"203.0.113.7\", \"203.0.113.0/24\" or \"2001:db8::/48\""),
            )
        })?);
    }
    Ok(AddrSet::new(ranges))
}

pub(crate) fn auto_block(raw: RawAutoBlock) -> Result<AutoBlock, ConfigError> {
    let number = |v: u64, field: &str, max: u64, hint: &str| {
        u32::try_from(v)
            .ok()
            .filter(|n| (1..=max).contains(&u64::from(*n)))
            .ok_or_else(|| {
                err(
                    format!("auto_block.{field}"),
                    format!("must be 1 to {max}{hint}"),
                )
            })
    };
    Ok(AutoBlock {
        refusals: number(raw.refusals, "refusals", 1_000_000, ", e.g. 300 refusals")?,
        window_secs: number(
            raw.window_secs,
            "window_secs",
            86_400,
            " seconds (a day), e.g. 600",
        )?,
        block_secs: number(
            raw.block_secs,
            "block_secs",
            366 * 86_400,
            " seconds (a year), e.g. 3600",
        )?,
    })
}
