//! Temporary blocks kept in the store, so every web server sharing it obeys them: added by
//! `resolve block` (or by `auto_block`), listed by `resolve blocks`, removed by `resolve
//! unblock` or by their expiry. The list is one small entry of the store's cache, changed only
//! under a lock taken with the store's atomic claim.
//!
//! Requests read it once each. Where the store is a server (MySQL, Redis), they read a copy in
//! the data directory (`blocks.copy`, see `crate::store::block_copy`), fetched again from the
//! store when it is older than
//! [`defaults::BLOCKS_COPY_SECS`]: a file read instead of a round trip on every request. A
//! change made here (`resolve block`, `unblock`, the dashboard, `auto_block`) rewrites this
//! server's copy at once; other servers sharing the store follow within those seconds.

use std::net::IpAddr;
use std::time::Duration;

use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::net::cidr::Cidr;
use crate::store::StoreError;
use crate::store::block_copy;
use crate::store::block_list::BlockList;
use crate::store::cache::Cache;
use crate::support::defaults;

/// The list holds at most this many blocks (about 60 KB, what every store's cache value
/// takes). Past it, the oldest automatic block makes way; only when none is left does an
/// owner's block, the one that ends soonest: a flood of automatic blocks never pushes out the
/// owner's.
pub const MAX_BLOCKS: usize = 500;
/// Longest reason kept, in characters.
pub const MAX_REASON: usize = 200;
/// A block without an end stays in the cache this long (ten years).
pub(crate) const FOREVER: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

/// One block: a range, until when (None: until unblocked), why, and whether `auto_block` set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub range: Cidr,
    pub until_ms: Option<u64>,
    pub reason: String,
    pub auto: bool,
}

impl Block {
    pub fn live_at(&self, now_ms: u64) -> bool {
        self.until_ms.is_none_or(|until| now_ms < until)
    }
}

/// A reason as kept: one line, no tabs, at most [`MAX_REASON`] characters.
pub fn clean_reason(text: &str) -> String {
    crate::support::text::one_line(text, MAX_REASON)
}

/// The list as stored: one line per block, `RANGE TAB UNTIL_MS TAB AUTO TAB REASON`.
pub fn encode(list: &[Block]) -> Vec<u8> {
    let mut out = String::new();
    for b in list {
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            b.range,
            b.until_ms.unwrap_or(0),
            u8::from(b.auto),
            clean_reason(&b.reason)
        ));
    }
    out.into_bytes()
}

/// The list read back; lines that do not parse are skipped (a damaged line must not block
/// anyone, nor unblock the others).
pub fn decode(bytes: &[u8]) -> Vec<Block> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(4, '\t');
            let range = Cidr::parse(parts.next()?)?;
            let until: u64 = parts.next()?.parse().ok()?;
            let auto = parts.next()? == "1";
            Some(Block {
                range,
                until_ms: (until != 0).then_some(until),
                auto,
                reason: parts.next().unwrap_or_default().to_owned(),
            })
        })
        .collect()
}

/// The live block covering `ip` at `now_ms`, if any.
pub fn find(list: &[Block], ip: IpAddr, now_ms: u64) -> Option<&Block> {
    list.iter()
        .find(|b| b.live_at(now_ms) && b.range.contains(ip))
}

/// `list` with `block` added at its end (replacing a block of the same range), ended blocks
/// dropped, and at most [`MAX_BLOCKS`] kept. The list is in the order blocks were set, so the
/// first automatic block is the oldest: automatic blocks go first, oldest first, then the
/// owner's, the one that ends soonest first.
pub fn with(list: Vec<Block>, block: Block, now_ms: u64) -> Vec<Block> {
    let mut out: Vec<Block> = list
        .into_iter()
        .filter(|b| b.live_at(now_ms) && b.range != block.range)
        .collect();
    out.push(block);
    while out.len() > MAX_BLOCKS {
        let oldest_auto = out.iter().position(|b| b.auto);
        let ends_soonest = || (0..out.len()).min_by_key(|&i| out[i].until_ms.unwrap_or(u64::MAX));
        match oldest_auto.or_else(ends_soonest) {
            Some(i) => {
                out.remove(i);
            }
            None => break,
        }
    }
    out
}

/// `list` without `range` (and without ended blocks); whether it held `range`.
pub fn without(list: Vec<Block>, range: Cidr, now_ms: u64) -> (Vec<Block>, bool) {
    let before = list.iter().any(|b| b.range == range && b.live_at(now_ms));
    let out = list
        .into_iter()
        .filter(|b| b.live_at(now_ms) && b.range != range)
        .collect();
    (out, before)
}

/// The blocks the store holds now (ended ones included; callers ask `live_at`).
pub fn read(store: &dyn Cache) -> Result<Vec<Block>, StoreError> {
    Ok(store.block_list()?.map(|b| decode(&b)).unwrap_or_default())
}

/// Where this server keeps its copy of the list: in the data directory when the store is a
/// server; None when the store is read locally anyway (files, memory).
pub fn copy_path(config: &Config) -> Option<PathBuf> {
    use crate::store::settings::StoreKind;
    match config.store.kind {
        StoreKind::Mysql(_) | StoreKind::Redis(_) => {
            Some(config.data_dir.join(defaults::BLOCKS_COPY))
        }
        _ => None,
    }
}

/// The list for a request at `now_ms`: from the copy at `copy` while it is fresh, else from
/// the store (and the copy written again). A copy that cannot be read or written only costs
/// the round trip.
pub fn read_for_request(
    store: &dyn Cache,
    copy: Option<&Path>,
    now_ms: u64,
) -> Result<Vec<Block>, StoreError> {
    let Some(path) = copy else {
        return read(store);
    };
    if let Some(bytes) = block_copy::read_fresh(path, now_ms, defaults::BLOCKS_COPY_SECS * 1000) {
        return Ok(decode(&bytes));
    }
    let list = read(store)?;
    block_copy::keep(path, &encode(&list), now_ms);
    Ok(list)
}

/// Changes the stored list with `change` under the lock, so concurrent changes (two `resolve
/// block` commands, automatic blocks from many requests) all take effect.
/// This server's copy (`copy`) is written again with the new list.
pub fn update<T>(
    store: &dyn Cache,
    copy: Option<&Path>,
    now_ms: u64,
    change: impl FnOnce(Vec<Block>) -> (Vec<Block>, T),
) -> Result<T, StoreError> {
    let mut changed = None;
    store.change_block_list(Box::new(|stored| {
        let (list, out) = change(stored.map(|b| decode(&b)).unwrap_or_default());
        let last = list.iter().map(|b| b.until_ms).max().flatten();
        let ttl = match (list.iter().any(|b| b.until_ms.is_none()), last) {
            (true, _) | (false, None) => FOREVER,
            (false, Some(until)) => Duration::from_millis(until.saturating_sub(now_ms).max(1000)),
        };
        let bytes = encode(&list);
        changed = Some((list, out));
        Ok((bytes, ttl))
    }))?;
    let (list, out) =
        changed.ok_or_else(|| StoreError::unavailable("the block list was not changed"))?;
    if let Some(path) = copy {
        block_copy::keep(path, &encode(&list), now_ms);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::SystemClock;
    use crate::store::memory::MemoryStore;

    #[test]
    fn its_keys_are_among_those_no_rule_may_make() {
        use crate::core::key::Reserved;
        for key in [Reserved::BlockList.key(), Reserved::BlockListLock.key()] {
            let reserved = crate::core::key::RESERVED_PREFIXES;
            assert!(reserved.iter().any(|p| key.starts_with(p)), "{key}");
        }
    }

    fn block(range: &str, until_ms: Option<u64>) -> Block {
        Block {
            range: Cidr::parse(range).unwrap(),
            until_ms,
            reason: "test".into(),
            auto: false,
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn blocks_round_trip_and_damaged_lines_are_skipped() {
        let list = vec![
            block("203.0.113.0/24", Some(5_000)),
            Block {
                reason: "tab\there\nand newline".into(),
                auto: true,
                ..block("2001:db8::/64", None)
            },
        ];
        let mut bytes = encode(&list);
        bytes.extend_from_slice(b"junk line\n10.0.0.0/8\tx\t0\t\n");
        let back = decode(&bytes);
        assert_eq!(back.len(), 2);
        assert_eq!(back[0], list[0]);
        assert_eq!(back[1].reason, "tab here and newline");
        assert!(back[1].auto);
    }

    #[test]
    fn a_block_covers_its_range_until_it_ends() {
        let list = vec![
            block("203.0.113.0/24", Some(5_000)),
            block("2001:db8::/64", None),
        ];
        assert!(find(&list, ip("203.0.113.9"), 4_999).is_some());
        assert!(find(&list, ip("203.0.113.9"), 5_000).is_none(), "ended");
        assert!(find(&list, ip("203.0.114.1"), 0).is_none());
        assert!(
            find(&list, ip("2001:db8::77"), u64::MAX - 1).is_some(),
            "no end"
        );
    }

    #[test]
    fn adding_replaces_the_same_range_and_drops_ended_ones() {
        let list = vec![
            block("192.0.2.1", Some(10)),
            block("192.0.2.2", Some(1_000)),
        ];
        let list = with(list, block("192.0.2.2", Some(2_000)), 100);
        assert_eq!(list, vec![block("192.0.2.2", Some(2_000))]);
        let (list, had) = without(list, Cidr::parse("192.0.2.2").unwrap(), 100);
        assert!(had && list.is_empty());
        let (_, had) = without(vec![], Cidr::parse("192.0.2.2").unwrap(), 100);
        assert!(!had);
    }

    #[test]
    fn the_list_is_bounded_keeping_those_that_end_last() {
        let mut list = Vec::new();
        for i in 0..(MAX_BLOCKS as u64 + 10) {
            let range = format!("10.0.{}.{}", i / 256, i % 256);
            list = with(list, block(&range, Some(1_000 + i)), 0);
        }
        assert_eq!(list.len(), MAX_BLOCKS);
        assert!(list.iter().all(|b| b.until_ms.unwrap() >= 1_010));
    }

    #[test]
    fn a_flood_of_automatic_blocks_never_pushes_out_the_owners() {
        let auto = |i: usize| Block {
            auto: true,
            ..block(&format!("10.1.{}.{}", i / 256, i % 256), Some(9_000_000))
        };
        let ranges = |list: &[Block], auto: bool| -> Vec<String> {
            list.iter()
                .filter(|b| b.auto == auto)
                .map(|b| b.range.to_string())
                .collect()
        };
        // 400 of the owner's blocks, ending before any automatic one, and 100 automatic.
        let mut list = Vec::new();
        for i in 0..400 {
            list = with(
                list,
                block(&format!("10.0.{}.{}", i / 256, i % 256), Some(1_000 + i)),
                0,
            );
        }
        let owners = ranges(&list, false);
        for i in 0..100 {
            list = with(list, auto(i), 0);
        }
        assert_eq!(list.len(), MAX_BLOCKS);
        // 300 more automatic blocks: each pushes out the oldest automatic one.
        for i in 100..400 {
            list = with(list, auto(i), 0);
        }
        assert_eq!(list.len(), MAX_BLOCKS);
        assert_eq!(ranges(&list, false), owners, "every owner's block kept");
        let autos: Vec<String> = (300..400).map(|i| auto(i).range.to_string()).collect();
        assert_eq!(
            ranges(&list, true),
            autos,
            "the newest 100 automatic blocks"
        );
        // The owner's blocks push out automatic ones too, and only then each other.
        for i in 400..501 {
            list = with(
                list,
                block(&format!("10.0.{}.{}", i / 256, i % 256), Some(1_000 + i)),
                0,
            );
        }
        assert_eq!(list.len(), MAX_BLOCKS);
        assert!(ranges(&list, true).is_empty());
        assert!(
            !ranges(&list, false).contains(&"10.0.0.0/32".to_owned()),
            "ended soonest"
        );
        // With no automatic block left, a new automatic block is the one that makes way.
        let before = list.clone();
        assert_eq!(with(list, auto(999), 0), before);
    }

    #[test]
    fn concurrent_updates_all_take_effect() {
        let store = MemoryStore::new(SystemClock, Duration::ZERO);
        std::thread::scope(|s| {
            for t in 0..8 {
                let store = store.clone();
                s.spawn(move || {
                    for i in 0..20 {
                        let b = block(&format!("10.{t}.0.{i}"), None);
                        update(&store, None, 0, |list| (with(list, b, 0), ())).unwrap();
                    }
                });
            }
        });
        assert_eq!(read(&store).unwrap().len(), 160);
    }

    #[test]
    fn a_copy_serves_for_seconds_and_a_change_here_rewrites_it() {
        let store = MemoryStore::new(SystemClock, Duration::ZERO);
        let dir = std::env::temp_dir().join(format!("resolve-blocks-copy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join(defaults::BLOCKS_COPY);
        let _ = std::fs::remove_file(&copy);
        let t0 = 1_000_000;
        let ranges = |list: Vec<Block>| -> Vec<String> {
            list.iter().map(|b| b.range.to_string()).collect()
        };
        let a = block("192.0.2.1", None);
        update(&store, Some(&copy), t0, |l| (with(l, a, t0), ())).unwrap();
        assert_eq!(
            ranges(read_for_request(&store, Some(&copy), t0).unwrap()),
            ["192.0.2.1/32"]
        );
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&copy).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Another server adds a block: seen here once the copy is 5 s old.
        let b = block("192.0.2.2", None);
        let both = with(read(&store).unwrap(), b, t0);
        store
            .change_block_list(Box::new(|_| Ok((encode(&both), FOREVER))))
            .unwrap();
        let late = t0 + defaults::BLOCKS_COPY_SECS * 1000;
        assert_eq!(
            ranges(read_for_request(&store, Some(&copy), late - 1).unwrap()).len(),
            1
        );
        assert_eq!(
            ranges(read_for_request(&store, Some(&copy), late).unwrap()).len(),
            2
        );
        // A change made here is in the copy at once.
        let range = Cidr::parse("192.0.2.1").unwrap();
        update(&store, Some(&copy), late + 1, |l| {
            without(l, range, late + 1)
        })
        .unwrap();
        assert_eq!(
            ranges(read_for_request(&store, Some(&copy), late + 2).unwrap()),
            ["192.0.2.2/32"]
        );
        // A damaged copy, or one from the future, is read past.
        std::fs::write(&copy, b"fetched x\n").unwrap();
        assert_eq!(
            ranges(read_for_request(&store, Some(&copy), late + 3).unwrap()).len(),
            1
        );
        std::fs::write(&copy, format!("fetched {}\n", late * 2)).unwrap();
        assert_eq!(
            ranges(read_for_request(&store, Some(&copy), late + 4).unwrap()).len(),
            1
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
