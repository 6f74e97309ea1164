//! Tests of the kept answers' file: what comes back for the request it was kept for, and that a
//! damaged, half-written, foreign or too large answer is a miss, never another request's.

use super::*;
use crate::support::temp::Dir;

/// The tag of a request numbered `n`.
fn tag(n: u8) -> u64 {
    0x1234_5678_9abc_de00 + u64::from(n)
}

/// Keeps `k` under its own tag, whatever the file's key.
fn put(dir: &Path, k: &Kept) {
    write(dir, |_| k.tag, k.clone());
}

/// The answer kept under `tag`, whatever the file's key.
fn get(dir: &Path, tag: u64) -> Option<Kept> {
    read(dir, |_| tag)
}

fn kept(n: u8) -> Kept {
    let mut refusal = Box::new([0u8; refusals::SLOT_BYTES]);
    refusal[..4].copy_from_slice(b"rfm1");
    refusal[100] = 7;
    Kept {
        tag: tag(n),
        refusal_at: 512 * 33,
        refusal,
        waits: vec![86_400, 86_400, 3_600],
        blocks: BlocksSeen {
            source: BlocksSource::Entry,
            path: b"f4/f4.cache".to_vec(),
            sum: Some(list_sum(b"fetched 1\n[]")),
        },
        journal: Some(b",[[\"requests\",1]],[]]\n".to_vec()),
        lock_timeout_ms: 2000,
        head: b"Status: 429 Too Many Requests\nRetry-After: 86400\n".to_vec(),
        tail: b"\nToo many requests.\n".to_vec(),
    }
}

/// An answer for a request whose slot is `slot`, the `n`th such tag.
fn kept_at(slot: u64, n: u64) -> Kept {
    Kept {
        tag: slot + n * defaults::KEPT_ANSWER_SLOTS as u64,
        ..kept(0)
    }
}

#[test]
fn an_answer_comes_back_for_its_request_alone() {
    let k = kept(1);
    let slot = encode(&k).unwrap();
    assert_eq!(decode(&slot, k.tag), Some(k.clone()));
    assert_eq!(decode(&slot, tag(2)), None, "another request's");
    let no_journal = Kept {
        journal: None,
        blocks: BlocksSeen {
            source: BlocksSource::Copy,
            path: b"blocks.copy".to_vec(),
            sum: None,
        },
        ..k
    };
    let slot = encode(&no_journal).unwrap();
    assert_eq!(decode(&slot, no_journal.tag), Some(no_journal));
}

#[test]
fn a_damaged_or_cut_slot_is_a_miss() {
    let k = kept(3);
    let slot = encode(&k).unwrap();
    for at in [0, 5, 7, HEADER, HEADER + 40, slot.len() - 1] {
        let mut bad = slot.clone();
        bad[at] ^= 0x20;
        assert_eq!(decode(&bad, k.tag), None, "byte {at} changed");
    }
    for len in [0, 3, HEADER, slot.len() / 2, slot.len() - 1] {
        assert_eq!(decode(&slot[..len], k.tag), None, "cut at {len}");
    }
    // Half of another answer written over it.
    let other = encode(&Kept {
        tail: b"\nsomething else, longer than before\n".to_vec(),
        ..kept(3)
    })
    .unwrap();
    let mut torn = slot.clone();
    torn[slot.len() / 2..].copy_from_slice(&other[slot.len() / 2..slot.len()]);
    assert_eq!(decode(&torn, k.tag), None);
}

#[test]
fn an_answer_too_large_for_a_slot_is_not_kept() {
    let big = Kept {
        tail: vec![b'x'; SLOT_BYTES],
        ..kept(4)
    };
    assert_eq!(encode(&big), None);
    let dir = Dir::new("answers", "big");
    put(&dir, &big);
    assert_eq!(get(&dir, big.tag), None);
    // Nothing past the file's head was written.
    let len = std::fs::metadata(dir.join(defaults::KEPT_ANSWERS_FILE)).map_or(0, |m| m.len());
    assert!(len <= FILE_HEAD, "{len} bytes");
}

#[test]
fn answers_are_kept_in_the_data_directory_one_slot_each() {
    let dir = Dir::new("answers", "file");
    assert_eq!(get(&dir, tag(1)), None, "no file yet");
    // Two requests that share no slot, and one that shares the first one's.
    let a = kept_at(3, 0);
    let b = kept_at(4, 0);
    let c = kept_at(3, 1);
    assert_ne!(a.tag, c.tag);
    put(&dir, &a);
    put(&dir, &b);
    assert_eq!(get(&dir, a.tag), Some(a.clone()));
    assert_eq!(get(&dir, b.tag), Some(b.clone()));
    // One longer than the first page read (an HTML page), in the file's last slot.
    let last = defaults::KEPT_ANSWER_SLOTS as u64 - 1;
    let long = Kept {
        tail: vec![b'p'; 10_000],
        ..kept_at(last, 0)
    };
    put(&dir, &long);
    assert_eq!(get(&dir, long.tag), Some(long.clone()));
    // The same slot: the last one kept is the one there; the other is a miss.
    put(&dir, &c);
    assert_eq!(get(&dir, a.tag), None);
    assert_eq!(get(&dir, c.tag), Some(c));
    let size = std::fs::metadata(dir.join(defaults::KEPT_ANSWERS_FILE))
        .unwrap()
        .len();
    assert!(
        size <= (defaults::KEPT_ANSWER_SLOTS * SLOT_BYTES) as u64,
        "bounded: {size}"
    );
}

#[test]
fn a_planted_link_is_never_followed() {
    let dir = Dir::new("answers", "link");
    let elsewhere = Dir::new("answers", "elsewhere");
    let k = kept(6);
    put(&elsewhere, &k);
    std::os::unix::fs::symlink(
        elsewhere.join(defaults::KEPT_ANSWERS_FILE),
        dir.join(defaults::KEPT_ANSWERS_FILE),
    )
    .unwrap();
    assert_eq!(get(&dir, k.tag), None);
    put(&dir, &kept(7));
    assert_eq!(get(&elsewhere, kept(7).tag), None);
}

#[test]
fn the_sum_sees_every_byte_and_tags_spread_requests_over_the_slots() {
    let base = vec![b'a'; 37];
    let whole = sum(1, &base);
    for at in 0..base.len() {
        let mut changed = base.clone();
        changed[at] = b'b';
        assert_ne!(sum(1, &changed), whole, "byte {at}");
    }
    assert_ne!(sum(1, &base[..36]), whole, "a byte fewer");
    assert_ne!(sum(1, &[&base[..], &[0]].concat()), whole, "a zero more");
    assert_ne!(sum(2, &base), whole, "another basis");
    // 1,024 requests that differ in one address, by their tags: most of the 256 slots are used.
    let key = siphash::Key(3, 4);
    let slots: std::collections::HashSet<u64> = (0..1024)
        .map(|i| {
            slot_offset(siphash::hash(
                key,
                format!("REMOTE_ADDR\0192.0.{}.{}\0", i / 256, i % 256).as_bytes(),
            ))
        })
        .collect();
    assert!(slots.len() > 240, "{} slots used", slots.len());
}

#[test]
fn the_file_has_a_random_key_of_its_own_made_once() {
    let (one, two) = (Dir::new("answers", "key1"), Dir::new("answers", "key2"));
    let name = |k: siphash::Key| siphash::hash(k, b"GET /cgi-bin/resolve?link=x");
    let k = kept(9);
    for dir in [&one, &two] {
        write(dir, name, k.clone());
        assert!(read(dir, name).is_some());
        // Kept again: the same key, the same tag.
        write(dir, name, k.clone());
        assert!(read(dir, name).is_some());
    }
    let head =
        |dir: &Dir| std::fs::read(dir.join(defaults::KEPT_ANSWERS_FILE)).unwrap()[..20].to_vec();
    assert_ne!(head(&one), head(&two), "each file its own key");
    // The file gone, so is its key: what was kept under the old one is not found.
    let tag_before = read(&one, name).unwrap().tag;
    std::fs::remove_file(one.join(defaults::KEPT_ANSWERS_FILE)).unwrap();
    put(
        &one,
        &Kept {
            tag: tag_before,
            ..k.clone()
        },
    );
    assert!(read(&one, name).is_none(), "found under a key made since");
}
