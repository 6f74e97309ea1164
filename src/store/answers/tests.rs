//! Tests of the kept answers' file: what comes back for the digest it was kept for, and that a
//! damaged, half-written, foreign or too large answer is a miss, never another request's.

use super::*;
use crate::support::temp::Dir;

fn kept(digest_byte: u8) -> Kept {
    let mut refusal = Box::new([0u8; refusals::SLOT_BYTES]);
    refusal[..4].copy_from_slice(b"rfm1");
    refusal[100] = 7;
    Kept {
        digest: [digest_byte; DIGEST_BYTES],
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

#[test]
fn an_answer_comes_back_for_its_digest_alone() {
    let k = kept(1);
    let slot = encode(&k).unwrap();
    assert_eq!(decode(&slot, &k.digest), Some(k.clone()));
    assert_eq!(decode(&slot, &[2; DIGEST_BYTES]), None, "another request's");
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
    assert_eq!(decode(&slot, &no_journal.digest), Some(no_journal));
}

#[test]
fn a_damaged_or_cut_slot_is_a_miss() {
    let k = kept(3);
    let slot = encode(&k).unwrap();
    for at in [0, 5, 7, HEADER, HEADER + 40, slot.len() - 1] {
        let mut bad = slot.clone();
        bad[at] ^= 0x20;
        assert_eq!(decode(&bad, &k.digest), None, "byte {at} changed");
    }
    for len in [0, 3, HEADER, slot.len() / 2, slot.len() - 1] {
        assert_eq!(decode(&slot[..len], &k.digest), None, "cut at {len}");
    }
    // Half of another answer written over it.
    let other = encode(&Kept {
        tail: b"\nsomething else, longer than before\n".to_vec(),
        ..kept(3)
    })
    .unwrap();
    let mut torn = slot.clone();
    torn[slot.len() / 2..].copy_from_slice(&other[slot.len() / 2..slot.len()]);
    assert_eq!(decode(&torn, &k.digest), None);
}

#[test]
fn an_answer_too_large_for_a_slot_is_not_kept() {
    let big = Kept {
        tail: vec![b'x'; SLOT_BYTES],
        ..kept(4)
    };
    assert_eq!(encode(&big), None);
    let dir = Dir::new("answers", "big");
    write(&dir, &big);
    assert_eq!(read(&dir, &big.digest), None);
    assert!(!dir.join(defaults::KEPT_ANSWERS_FILE).exists());
}

#[test]
fn answers_are_kept_in_the_data_directory_one_slot_each() {
    let dir = Dir::new("answers", "file");
    assert_eq!(read(&dir, &[1; DIGEST_BYTES]), None, "no file yet");
    // Two digests that share no slot, and one that shares the first one's.
    let a = kept(1);
    let b = kept(2);
    let mut c = kept(5);
    c.digest[..8].copy_from_slice(&a.digest[..8]);
    assert_ne!(slot_offset(&a.digest), slot_offset(&b.digest));
    assert_eq!(slot_offset(&a.digest), slot_offset(&c.digest));
    write(&dir, &a);
    write(&dir, &b);
    assert_eq!(read(&dir, &a.digest), Some(a.clone()));
    assert_eq!(read(&dir, &b.digest), Some(b.clone()));
    // The same slot: the last one kept is the one there; the other is a miss.
    write(&dir, &c);
    assert_eq!(read(&dir, &a.digest), None);
    assert_eq!(read(&dir, &c.digest), Some(c));
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
    write(&elsewhere, &k);
    std::os::unix::fs::symlink(
        elsewhere.join(defaults::KEPT_ANSWERS_FILE),
        dir.join(defaults::KEPT_ANSWERS_FILE),
    )
    .unwrap();
    assert_eq!(read(&dir, &k.digest), None);
    write(&dir, &kept(7));
    assert_eq!(read(&elsewhere, &kept(7).digest), None);
}
