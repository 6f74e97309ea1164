//! The data directory's budget, decided without I/O: how many files clients' own keys may
//! fill, and the folded key (one of many shared buckets) a new client is counted by past that.
//!
//! A key that has a file keeps it and is counted exactly. A new client's key gets a file while
//! the shard directories hold, all together, fewer entries than the clients' share of the
//! room for keys (`FILE_STORE_CLIENT_SHARE_PERCENT`, judged by the directory's total, never
//! by one shard). Past it the client is counted by a folded key: one of [`Budget::buckets`]
//! buckets of its rule, chosen by the hash of its network (an IPv4 address's /24, an IPv6
//! prefix's /48) or of its API key, each with the rule's limit, never one key for everyone.
//! The buckets are kept apart (`FILE_STORE_FOLD_DIR`), at most `buckets` files per rule that
//! folds, within `FILE_STORE_FOLD_SHARE_PERCENT` of the room. Folding stops as soon as there
//! is room again (a sweep removed ended keys, the budget was raised): the next new client gets
//! a key of its own. The controls' own counts and the sign-in budgets are never folded: they
//! are made while the directory holds less than the room less the buckets' share.
//!
//! The bound: while folding, a new client shares its limit with the new clients of the other
//! networks in its bucket, and nobody else. A flood spends a bucket's window only by sending
//! the rule's limit into it, so `R` folded requests in one window hold back at most
//! `R / limit` buckets, that is at most `R / (limit * buckets)` of the new visitors (one in
//! 256 for each spent bucket with the default budget); the others get the rule's own limit.
//! A client counted by a bucket that gets a key of its own once there is room again may be
//! admitted up to its limit once more within the bucket's window: at most twice its limit.

use std::net::IpAddr;

use sha2::{Digest, Sha256};

use crate::core::rule::{KeyKind, Rule};
use crate::net::cidr::{self, Cidr};
use crate::support::defaults;

/// Shard directories of the file store.
pub const SHARDS: u64 = 256;

/// What a new key may fill the directory to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// A client's own key: the clients' share.
    Client,
    /// A key never folded (the controls' counts, the sign-in budgets): the room less the
    /// buckets' share.
    Kept,
}

/// The data directory's budget (`store.max_files`, `store.max_bytes`), and the rules that
/// fold (their buckets are kept within it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub max_files: u64,
    pub max_bytes: u64,
    /// The rules whose keys fold (every rule that counts a client: `ip` and `api_key`).
    pub fold_rules: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_files: defaults::FILE_STORE_MAX_FILES,
            max_bytes: defaults::FILE_STORE_MAX_BYTES,
            fold_rules: defaults::FILE_STORE_FOLD_RULES,
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

    /// The folded keys of each rule: the buckets' share of the room, shared by the rules that
    /// fold, at most `FILE_STORE_FOLD_MAX_BUCKETS`, at least one.
    pub fn buckets(&self) -> u64 {
        (self.key_files() * defaults::FILE_STORE_FOLD_SHARE_PERCENT / 100 / self.fold_rules.max(1))
            .clamp(1, defaults::FILE_STORE_FOLD_MAX_BUCKETS)
    }

    /// The most entries the shard directories may hold, all together, when a key is made for
    /// `room`.
    pub fn cap(&self, room: Room) -> u64 {
        let keys = self.key_files();
        match room {
            Room::Client => keys * defaults::FILE_STORE_CLIENT_SHARE_PERCENT / 100,
            Room::Kept => keys.saturating_sub(self.buckets() * self.fold_rules.max(1)),
        }
    }
}

/// The folded key `key` (of rule `rule`) is counted by once the clients' share is full: its
/// rule's bucket for its network (or API key), one of `buckets`. None for a key that is never
/// folded: a site-wide key, the controls' own counts (not written by the rule's template),
/// the sign-in budgets, and the buckets themselves.
pub fn folded(rule: &Rule, key: &str, buckets: u64) -> Option<String> {
    if rule.key == KeyKind::Global || never_folded(rule) {
        return None;
    }
    let identity = rule
        .key_template
        .identity_in(rule.name.as_str(), key)
        .filter(|i| !i.is_empty() && !i.starts_with(BUCKET) && *i != "*")?;
    let by = match rule.key {
        KeyKind::Ip => network_of(identity).unwrap_or_else(|| identity.to_owned()),
        _ => identity.to_owned(),
    };
    let digest = Sha256::digest(by.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let bucket = u64::from_be_bytes(first) % buckets.max(1);
    Some(rule.key_for(&format!("{BUCKET}{bucket}")))
}

/// Whether a rule's keys are never folded: the dashboard's sign-in budgets (their names are
/// kept from the configuration's rules), whose failures must only ever be blamed on the
/// client's own address and network.
pub fn never_folded(rule: &Rule) -> bool {
    rule.name.as_str().starts_with(defaults::ADMIN_SIGNIN_RULE)
}

/// What a folded key's identity starts with (no client's identity holds a `~`).
const BUCKET: &str = "~fold-";

/// The network an address or prefix is folded by, when it is finer than that network: what
/// chooses its bucket, and what the owner is told to block.
pub fn network_of(identity: &str) -> Option<String> {
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

    fn rule(name: &str, kind: KeyKind, template: &str) -> Rule {
        Rule::new(name, kind, Algorithm::Fixed, 5, 60, template).unwrap()
    }

    #[test]
    fn a_client_folds_into_its_networks_bucket_never_one_key_for_everyone() {
        let ip = rule("ip", KeyKind::Ip, defaults::KEY_TEMPLATE_IP);
        let keys = |key: &str| folded(&ip, key, 256);
        // One network's clients share a bucket.
        assert_eq!(
            keys("resolve:ip:2001:db8:1:2::/64"),
            keys("resolve:ip:2001:db8:1:7::/64")
        );
        assert_eq!(keys("resolve:ip:192.0.2.77"), keys("resolve:ip:192.0.2.1"));
        let bucket = keys("resolve:ip:192.0.2.77").unwrap();
        assert!(bucket.starts_with("resolve:ip:~fold-"), "{bucket}");
        // Networks spread over the buckets: 3,500 /24s fill nearly all 256.
        let used: std::collections::BTreeSet<String> = (0..3500u32)
            .map(|i| keys(&format!("resolve:ip:10.{}.{}.9", i / 256, i % 256)).unwrap())
            .collect();
        assert!(used.len() > 250, "{}", used.len());
        // The buckets themselves, the controls' counts, site-wide keys, the sign-in budgets:
        // never folded.
        for key in [
            bucket.as_str(),
            "resolve:ip:*",
            "resolve:other:192.0.2.77",
            "resolve:~refusals:192.0.2.77",
        ] {
            assert_eq!(keys(key), None, "{key}");
        }
        let site = rule("ip", KeyKind::Global, defaults::KEY_TEMPLATE_GLOBAL);
        assert_eq!(folded(&site, "resolve:ip:*", 256), None);
        for name in [
            defaults::ADMIN_SIGNIN_RULE,
            defaults::ADMIN_SIGNIN_NETWORK_RULE,
            defaults::ADMIN_SIGNIN_DEVICE_RULE,
        ] {
            let signin = rule(name, KeyKind::Ip, defaults::KEY_TEMPLATE_IP);
            assert_eq!(
                folded(&signin, &signin.key_for("192.0.2.77"), 256),
                None,
                "{name}"
            );
        }
        let api = rule("ip", KeyKind::ApiKey, defaults::KEY_TEMPLATE_API_KEY);
        let key = folded(&api, "resolve:ip:key:sha256:0123456789abcdef", 256).unwrap();
        assert!(key.starts_with("resolve:ip:key:~fold-"), "{key}");
        assert_eq!(folded(&api, &key, 256), None);
    }

    #[test]
    fn the_budget_is_shared_out_by_the_directorys_total() {
        let b = Budget::default();
        // 10,000 files less the journal's and directories' 1,500; 64 MiB less 8 MiB is 14,336
        // blocks.
        assert_eq!(b.key_files(), 8_500);
        assert_eq!(b.buckets(), 256);
        assert_eq!(b.cap(Room::Client), 6_375);
        assert_eq!(b.cap(Room::Kept), 8_500 - 512);
        let small = Budget {
            max_files: 3_000,
            ..Budget::default()
        };
        assert_eq!(small.buckets(), 150);
        assert_eq!(small.cap(Room::Client), 1_125);
        let by_bytes = Budget {
            max_files: 1_000_000,
            max_bytes: 16 * 1024 * 1024,
            fold_rules: 2,
        };
        assert_eq!(by_bytes.key_files(), 2_048);
        let tiny = Budget {
            max_files: 0,
            max_bytes: 0,
            fold_rules: 9,
        };
        assert_eq!(tiny.buckets(), 1);
        assert_eq!(tiny.cap(Room::Client), 0);
        // Never more buckets than the buckets' share, whatever the rules.
        for rules in 1..20 {
            let b = Budget {
                fold_rules: rules,
                ..Budget::default()
            };
            assert!(b.buckets() * rules <= b.key_files() / 5, "{rules}");
            assert!(b.cap(Room::Client) <= b.cap(Room::Kept), "{rules}");
        }
    }
}
