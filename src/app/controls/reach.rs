//! How far an entry of the `block` or `allow` list reaches, judged in one place for every way
//! of writing the lists (the dashboard's Block button and settings, `resolve block`, `resolve
//! check`): every address of a family, a range wider than the dashboard may block, or one that
//! holds the owner's own address. Pure: the callers decide what a concern costs (a refusal, a
//! confirmation, a warning).

use std::net::IpAddr;

use crate::net::cidr::Cidr;
use crate::support::defaults;

/// Which list an entry is written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    /// Refused before anything counts.
    Block,
    /// Past the visitor (`ip`) limits.
    Allow,
}

/// What an entry reaches that its writer must mean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Concern {
    /// Every address of its family (`0.0.0.0/0`, `::/0`).
    Everyone { list: List, range: Cidr },
    /// Wider than the dashboard's Block button's limit (an IPv4 /16, an IPv6 /32).
    Wide { list: List, range: Cidr, least: u8 },
    /// A block that holds the address of the owner writing it.
    Owner { range: Cidr, address: IpAddr },
}

/// The widest prefix the dashboard may write for `range`'s family, and the family's name.
fn widest(range: &Cidr) -> (u8, &'static str) {
    if range.is_ipv4() {
        (defaults::ADMIN_BLOCK_WIDEST_V4, "IPv4")
    } else {
        (defaults::ADMIN_BLOCK_WIDEST_V6, "IPv6")
    }
}

/// The one concern of `range` written to `list` by an owner at `owner` (None: unknown, as on
/// the command line), the gravest first: everyone, then the owner's address, then the width.
pub fn judge(list: List, range: &Cidr, owner: Option<IpAddr>) -> Option<Concern> {
    let (least, _) = widest(range);
    if range.prefix() == 0 {
        return Some(Concern::Everyone {
            list,
            range: *range,
        });
    }
    if list == List::Block
        && let Some(address) = owner.filter(|a| range.contains(*a))
    {
        return Some(Concern::Owner {
            range: *range,
            address,
        });
    }
    (range.prefix() < least).then_some(Concern::Wide {
        list,
        range: *range,
        least,
    })
}

/// Every concern of `ranges` written to `list`, in their order.
pub fn judge_all(list: List, ranges: &[Cidr], owner: Option<IpAddr>) -> Vec<Concern> {
    ranges
        .iter()
        .filter_map(|r| judge(list, r, owner))
        .collect()
}

impl Concern {
    /// The range it is about.
    pub fn range(&self) -> Cidr {
        match self {
            Concern::Everyone { range, .. }
            | Concern::Wide { range, .. }
            | Concern::Owner { range, .. } => *range,
        }
    }

    /// The list it is about.
    pub fn list(&self) -> List {
        match self {
            Concern::Everyone { list, .. } | Concern::Wide { list, .. } => *list,
            Concern::Owner { .. } => List::Block,
        }
    }

    /// What it does, in a sentence for the owner.
    pub fn describe(&self) -> String {
        let does = |list: List| match list {
            List::Block => "refuses",
            List::Allow => "lets past the visitor limits",
        };
        match self {
            Concern::Everyone { list, range } => {
                let (_, family) = widest(range);
                let who = if *list == List::Block {
                    " (you and the dashboard too)"
                } else {
                    ""
                };
                format!(
                    "{range} covers every {family} address: it {} every visitor{who}",
                    does(*list)
                )
            }
            Concern::Wide { list, range, least } => {
                let (_, family) = widest(range);
                format!(
                    "{range} is wider than an {family} /{least}, the widest the dashboard's \
                     Block button takes: it {} whole networks",
                    does(*list)
                )
            }
            Concern::Owner { range, address } => format!(
                "{range} holds your own address {address}: it refuses you, the dashboard too"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Cidr {
        Cidr::parse(s).unwrap()
    }

    #[test]
    fn every_entry_is_judged_alike() {
        let me: IpAddr = "203.0.113.7".parse().unwrap();
        let cases = [
            (List::Block, "0.0.0.0/0", Some("everyone")),
            (List::Block, "::/0", Some("everyone")),
            (List::Allow, "0.0.0.0/0", Some("everyone")),
            (List::Block, "10.0.0.0/8", Some("wide")),
            (List::Allow, "2001:db8::/16", Some("wide")),
            (List::Block, "203.0.113.0/24", Some("owner")),
            (List::Block, "203.0.113.7", Some("owner")),
            (List::Allow, "203.0.113.0/24", None),
            (List::Block, "198.51.100.0/24", None),
            (List::Block, "10.1.0.0/16", None),
            (List::Block, "2001:db8::/32", None),
        ];
        for (list, range, want) in cases {
            let got = judge(list, &cidr(range), Some(me)).map(|c| match c {
                Concern::Everyone { .. } => "everyone",
                Concern::Wide { .. } => "wide",
                Concern::Owner { .. } => "owner",
            });
            assert_eq!(got, want, "{list:?} {range}");
        }
        // Without the owner's address (the command line), only the width counts.
        assert_eq!(judge(List::Block, &cidr("203.0.113.0/24"), None), None);
        let all = judge_all(
            List::Block,
            &[
                cidr("0.0.0.0/0"),
                cidr("198.51.100.0/24"),
                cidr("203.0.113.0/24"),
            ],
            Some(me),
        );
        assert_eq!(all.len(), 2);
        assert!(all[0].describe().contains("every IPv4 address"), "{all:?}");
        assert!(all[1].describe().contains("your own address 203.0.113.7"));
    }
}
