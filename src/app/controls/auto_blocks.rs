//! Automatic blocks that address rotation cannot flush. An attacker with many addresses (an
//! IPv6 /48 holds 65,536 /64s) used to get each one blocked until the list was full, and then
//! each new block pushed out the oldest: its own first block among them. Here:
//!
//! - when [`defaults::AUTO_BLOCK_WIDEN_AT`] automatic blocks fall in one network (an IPv4 /24,
//!   an IPv6 /48), they become one block of the network, ending when the last of them would;
//! - an address inside a live block is not blocked again;
//! - when the list is full, a new automatic block is not added (and the caller logs it): the
//!   blocks already there stay until they end, so a flood cannot choose which go. Only the
//!   owner's blocks push automatic ones out ([`blocks::with`]).
//!
//! Pure: the list, the new block and the time in; the list to keep out.

use crate::app::controls::blocks::{self, Block, MAX_BLOCKS};
use crate::net::cidr::{self, Cidr};
use crate::support::defaults;

/// What adding an automatic block did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Added {
    /// The block was added as it was.
    Block,
    /// It made its network's [`defaults::AUTO_BLOCK_WIDEN_AT`]th: the network is blocked.
    Network(Cidr),
    /// A live block covers it already: nothing changed.
    Covered,
    /// The list is full: nothing changed.
    Full,
}

/// The network around `range`: its /24 or /48, or `range` itself when that is as wide.
pub fn network_of(range: &Cidr) -> Cidr {
    let (first, _) = range.bounds();
    let prefix = if range.is_ipv4() {
        defaults::AUTO_BLOCK_NETWORK_V4_PREFIX
    } else {
        defaults::AUTO_BLOCK_NETWORK_V6_PREFIX
    };
    if range.prefix() <= prefix {
        return *range;
    }
    Cidr::parse(&format!("{}/{prefix}", cidr::mask(first, prefix))).unwrap_or(*range)
}

/// Whether `inner` lies wholly within `outer`.
fn within(inner: &Cidr, outer: &Cidr) -> bool {
    inner.is_ipv4() == outer.is_ipv4()
        && inner.prefix() >= outer.prefix()
        && outer.contains(inner.bounds().0)
}

/// `list` with the automatic `block` added as the module says, at `now_ms`.
pub fn add(list: Vec<Block>, block: Block, now_ms: u64) -> (Vec<Block>, Added) {
    let list: Vec<Block> = list.into_iter().filter(|b| b.live_at(now_ms)).collect();
    if list.iter().any(|b| within(&block.range, &b.range)) {
        return (list, Added::Covered);
    }
    let network = network_of(&block.range);
    let neighbours: Vec<&Block> = list
        .iter()
        .filter(|b| b.auto && within(&b.range, &network))
        .collect();
    if network != block.range && neighbours.len() + 1 >= defaults::AUTO_BLOCK_WIDEN_AT {
        let until_ms = neighbours
            .iter()
            .map(|b| b.until_ms)
            .chain([block.until_ms])
            .try_fold(0u64, |last, u| u.map(|u| last.max(u)));
        let wide = Block {
            range: network,
            until_ms,
            reason: format!(
                "automatic: {} addresses of {network} blocked",
                neighbours.len() + 1
            ),
            auto: true,
        };
        let kept: Vec<Block> = list
            .into_iter()
            .filter(|b| !(b.auto && within(&b.range, &network)))
            .collect();
        return (blocks::with(kept, wide, now_ms), Added::Network(network));
    }
    if list.len() >= MAX_BLOCKS {
        return (list, Added::Full);
    }
    (blocks::with(list, block, now_ms), Added::Block)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auto(range: &str, until_ms: u64) -> Block {
        Block {
            range: Cidr::parse(range).unwrap(),
            until_ms: Some(until_ms),
            reason: "automatic".into(),
            auto: true,
        }
    }

    #[test]
    fn rotating_addresses_of_one_network_get_the_network_blocked() {
        let mut list = Vec::new();
        let mut outcomes = Vec::new();
        for i in 0..5 {
            let (l, added) = add(list, auto(&format!("2001:db8:7:{i:x}::/64"), 1_000 + i), 0);
            list = l;
            outcomes.push(added);
        }
        let net = Cidr::parse("2001:db8:7::/48").unwrap();
        assert_eq!(
            outcomes,
            vec![
                Added::Block,
                Added::Block,
                Added::Network(net),
                Added::Covered,
                Added::Covered
            ]
        );
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].range, net);
        assert_eq!(list[0].until_ms, Some(1_002), "as long as the last of them");
        // The same for IPv4 addresses of one /24; another /24 is apart.
        let mut list = Vec::new();
        for i in 1..=3 {
            list = add(list, auto(&format!("198.51.100.{i}"), 5_000), 0).0;
        }
        let (list, added) = add(list, auto("198.51.101.1", 5_000), 0);
        assert_eq!(added, Added::Block);
        assert_eq!(
            list.iter().map(|b| b.range.to_string()).collect::<Vec<_>>(),
            vec!["198.51.100.0/24", "198.51.101.1/32"]
        );
    }

    #[test]
    fn a_flood_cannot_flush_an_automatic_block() {
        // The block that matters, then a flood from as many networks as the list holds.
        let (mut list, _) = add(Vec::new(), auto("203.0.113.9", 9_000_000), 0);
        let mut full = 0;
        for i in 0..(MAX_BLOCKS + 100) {
            let range = format!("10.{}.{}.1", i / 256, i % 256);
            let (l, added) = add(list, auto(&range, 9_000_000 + i as u64), 0);
            list = l;
            full += usize::from(added == Added::Full);
        }
        assert_eq!(list.len(), MAX_BLOCKS);
        assert_eq!(full, 101);
        assert!(
            blocks::find(&list, "203.0.113.9".parse().unwrap(), 1).is_some(),
            "still blocked"
        );
        // 505 /64s of one /48 make one block, not 505.
        let (mut list, _) = add(Vec::new(), auto("203.0.113.9", 9_000_000), 0);
        for i in 0..505u32 {
            list = add(list, auto(&format!("2001:db8:9:{i:x}::/64"), 9_000_000), 0).0;
        }
        assert_eq!(list.len(), 2);
        assert!(blocks::find(&list, "203.0.113.9".parse().unwrap(), 1).is_some());
        // Ended blocks make room again.
        let (_, added) = add(
            (0..MAX_BLOCKS)
                .map(|i| auto(&format!("10.{}.{}.1", i / 256, i % 256), 10))
                .collect(),
            auto("192.0.2.1", 100),
            10,
        );
        assert_eq!(added, Added::Block);
    }
}
