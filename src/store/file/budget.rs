//! The data directory's budget, decided without I/O: how many files each shard may hold for
//! each level of key, and the coarser keys a client's key folds into once its shard is full.
//!
//! A key that has a file keeps it and is counted exactly. A new key gets a file only while its
//! shard (one of 256, by the key's hash) holds fewer than its share of the files for clients'
//! own keys ([`Level::Client`], `FILE_STORE_CLIENT_SHARE_PERCENT` of the room for keys); past
//! that it is counted by its network's key (an IPv4 address's /24, an IPv6 prefix's /48:
//! [`Level::Network`], which may fill the rest of the room), and past that by the rule's one
//! key for everyone ([`Level::All`], always made: one file a rule). Every level has the rule's
//! limit, so a folded client shares its limit with its network, never gets more than it.

use std::net::IpAddr;

use crate::core::rule::{KeyKind, Rule};
use crate::net::cidr::{self, Cidr};
use crate::support::defaults;

/// Shard directories of the file store.
pub const SHARDS: u64 = 256;

/// What identity a key counts by, finest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// One client (an address, an IPv6 prefix, an API key).
    Client,
    /// A client's network.
    Network,
    /// Everyone the rule counts, together.
    All,
}

/// The data directory's budget (`store.max_files`, `store.max_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub max_files: u64,
    pub max_bytes: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_files: defaults::FILE_STORE_MAX_FILES,
            max_bytes: defaults::FILE_STORE_MAX_BYTES,
        }
    }
}

impl Budget {
    /// Files the counters may take in all: the budget less the journal's and the directories'
    /// share, in files and in bytes (a key's file takes one block).
    pub fn key_files(&self) -> u64 {
        let by_count = self
            .max_files
            .saturating_sub(defaults::FILE_STORE_JOURNAL_FILES);
        let by_bytes = self
            .max_bytes
            .saturating_sub(defaults::FILE_STORE_JOURNAL_BYTES)
            / defaults::FILE_STORE_KEY_FILE_BYTES;
        by_count.min(by_bytes)
    }

    /// The most entries a shard may hold when a key of `level` is made in it (None: no bound,
    /// the rule's one key for everyone).
    pub fn shard_cap(&self, level: Level) -> Option<u64> {
        let room = self.key_files();
        let files = match level {
            Level::Client => room * defaults::FILE_STORE_CLIENT_SHARE_PERCENT / 100,
            Level::Network => room,
            Level::All => return None,
        };
        Some((files / SHARDS).max(1))
    }
}

/// The keys `key` (of rule `rule`) folds into, finest first, each with its level: its
/// network's, then the rule's key for everyone. Empty for a key that does not count one client
/// by its rule's template (a site-wide key, the controls' own counts): those are never folded.
pub fn coarser(rule: &Rule, key: &str) -> Vec<(Level, String)> {
    if rule.key == KeyKind::Global {
        return Vec::new();
    }
    let Some(identity) = rule
        .key_template
        .identity_in(rule.name.as_str(), key)
        .filter(|i| !i.is_empty() && *i != ALL)
    else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(2);
    if rule.key == KeyKind::Ip
        && let Some(network) = network_of(identity)
    {
        out.push((Level::Network, rule.key_for(&network)));
    }
    out.push((Level::All, rule.key_for(ALL)));
    out
}

/// The identity of the key for everyone a rule counts.
const ALL: &str = "*";

/// The network an address or prefix is folded into, when it is finer than that network.
fn network_of(identity: &str) -> Option<String> {
    let own = Cidr::parse(identity)?;
    let prefix = if own.is_ipv4() {
        defaults::FILE_STORE_FOLD_V4_PREFIX
    } else {
        defaults::FILE_STORE_FOLD_V6_PREFIX
    };
    if own.prefix() <= prefix {
        return None;
    }
    let addr: IpAddr = cidr::mask(own.bounds().0, prefix);
    Some(format!("{addr}/{prefix}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::rule::Algorithm;

    fn rule(kind: KeyKind, template: &str) -> Rule {
        Rule::new("ip", kind, Algorithm::Fixed, 5, 60, template).unwrap()
    }

    #[test]
    fn clients_fold_into_their_network_then_everyone() {
        let ip = rule(KeyKind::Ip, defaults::KEY_TEMPLATE_IP);
        let keys = |key: &str| coarser(&ip, key);
        assert_eq!(
            keys("resolve:ip:2001:db8:1:2::/64"),
            [
                (Level::Network, "resolve:ip:2001:db8:1::/48".to_owned()),
                (Level::All, "resolve:ip:*".to_owned())
            ]
        );
        assert_eq!(
            keys("resolve:ip:192.0.2.77"),
            [
                (Level::Network, "resolve:ip:192.0.2.0/24".to_owned()),
                (Level::All, "resolve:ip:*".to_owned())
            ]
        );
        // A network already that wide folds into everyone's key only.
        assert_eq!(
            keys("resolve:ip:2001:db8::/32"),
            [(Level::All, "resolve:ip:*".to_owned())]
        );
        // The coarser keys themselves, other rules' keys, the controls' counts: never.
        for key in [
            "resolve:ip:*",
            "resolve:other:192.0.2.77",
            "resolve:~refusals:192.0.2.77",
        ] {
            assert_eq!(keys(key), [], "{key}");
        }
        let site = rule(KeyKind::Global, defaults::KEY_TEMPLATE_GLOBAL);
        assert_eq!(coarser(&site, "resolve:ip:*"), []);
        let api = rule(KeyKind::ApiKey, defaults::KEY_TEMPLATE_API_KEY);
        assert_eq!(
            coarser(&api, "resolve:ip:key:sha256:0123456789abcdef"),
            [(Level::All, "resolve:ip:key:*".to_owned())]
        );
    }

    #[test]
    fn the_budget_is_shared_out_by_level_and_shard() {
        let b = Budget::default();
        // 10,000 files less the journal's and directories' 1,500; 64 MiB less 8 MiB is 14,336
        // blocks.
        assert_eq!(b.key_files(), 8_500);
        assert_eq!(b.shard_cap(Level::Client), Some(24));
        assert_eq!(b.shard_cap(Level::Network), Some(33));
        assert_eq!(b.shard_cap(Level::All), None);
        let by_bytes = Budget {
            max_files: 1_000_000,
            max_bytes: 16 * 1024 * 1024,
        };
        assert_eq!(by_bytes.key_files(), 2_048);
        let tiny = Budget {
            max_files: 0,
            max_bytes: 0,
        };
        assert_eq!(tiny.shard_cap(Level::Client), Some(1));
    }
}
