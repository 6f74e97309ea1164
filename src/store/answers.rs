//! This server's kept answers, for CGI: the 429 a request was given from the memory of refusals
//! (`refusals`), kept in the data directory's `answers` file with what it rested on, so that
//! the same request repeated (a scraper in a loop) is answered again before the configuration
//! is read. What is kept here is only written and read: whether a kept answer still stands is
//! judged by `gateway::replay`, against the same files the full way reads.
//!
//! The file begins with a key of its own, random, made with the file; then come
//! [`defaults::KEPT_ANSWER_SLOTS`] slots of [`SLOT_BYTES`]. A request is named by its tag, a
//! SipHash-2-4 under that key of everything that makes its answer, so that nothing of the
//! request itself is kept (its cookies, a client's key) and no client can make its request
//! pass for another's without the key. The tag chooses the slot; a slot holds one answer, its
//! tag and a checksum over it, so that a slot half written while it was read, another
//! request's or a damaged one is a miss (the request goes the full way), never another
//! request's answer. Its size is bounded whatever the traffic: nothing to sweep.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use crate::store::fields::Fields;
use crate::store::file::safe_open::OPEN_FLAGS;
use crate::store::refusals;
use crate::support::{defaults, siphash};

/// Bytes of one slot: a refusal's answer as text, JSON or the HTML page fits.
pub const SLOT_BYTES: usize = 16_384;
const MAGIC: &[u8; 4] = b"kan1";
/// Magic, payload length (u16) and checksum (u64) before the payload.
const HEADER: usize = 4 + 2 + 8;
/// Bytes before the first slot: the file's magic and key, on a page of their own.
const FILE_HEAD: u64 = 4096;
const FILE_MAGIC: &[u8; 4] = b"kak1";

/// Where the list of blocked clients a request reads is, and what it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlocksSeen {
    pub source: BlocksSource,
    /// Below the data directory.
    pub path: Vec<u8>,
    /// A checksum of the list's bytes as read; None when there were none (no file, or a copy
    /// too old to be used).
    pub sum: Option<u64>,
}

/// How the block list is read: the file store's own entry, or a server store's copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlocksSource {
    /// The file store's entry, read whole (expired or not: an entry only expires to nothing).
    Entry,
    /// The copy a server store's requests read while it is fresh
    /// ([`defaults::BLOCKS_COPY_SECS`]), its list without its first line.
    Copy,
}

/// One kept answer and what it rested on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// The request it answers, by its tag under the file's key.
    pub tag: u64,
    /// The `refusals` slot the refusal was recalled from: where, and its bytes then.
    pub refusal_at: u64,
    pub refusal: Box<[u8; refusals::SLOT_BYTES]>,
    /// The waits the answer says, in whole seconds, as [`crate::core::decision::Decision::waits`]
    /// gives them: the same waits, the same bytes.
    pub waits: Vec<u32>,
    pub blocks: BlocksSeen,
    /// The usage journal's line after its hour (`,[...]]\n`); None when nothing is journaled.
    pub journal: Option<Vec<u8>>,
    /// How long the journal's append waits for the spool file's lock.
    pub lock_timeout_ms: u32,
    /// The answer as written, up to its last header line, and from the blank line on: the
    /// time taken (`Server-Timing`) goes between.
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
}

/// A 64-bit checksum of `bytes` from `basis`, eight bytes at a step, each step mixed so that
/// every bit counts in every bit: a slot's, a configuration's and a block list's. Not a defence
/// against anyone: what it guards is only ever written by the owner or the site's own
/// processes (the request is named by a keyed hash instead).
pub fn sum(basis: u64, bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let step = |h: u64, w: u64| {
        let h = (h ^ w).wrapping_mul(K);
        h ^ (h >> 29)
    };
    let mut chunks = bytes.chunks_exact(8);
    let mut h = basis ^ (bytes.len() as u64).wrapping_mul(K);
    for c in &mut chunks {
        h = step(h, u64::from_le_bytes(c.try_into().unwrap_or_default()));
    }
    let mut last = [0u8; 8];
    last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = step(h, u64::from_le_bytes(last));
    // The last steps' bits spread down too (the slot is chosen by the low ones).
    let h = (h ^ (h >> 32)).wrapping_mul(K);
    h ^ (h >> 32)
}

const SUM_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// The checksum of a block list's bytes.
pub fn list_sum(bytes: &[u8]) -> u64 {
    sum(SUM_BASIS, bytes)
}

/// Where in the file the answer to a request of `tag` is kept.
pub fn slot_offset(tag: u64) -> u64 {
    let slots = defaults::KEPT_ANSWER_SLOTS as u64;
    FILE_HEAD + (tag % slots) * SLOT_BYTES as u64
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) -> Option<()> {
    out.extend_from_slice(&u16::try_from(bytes.len()).ok()?.to_le_bytes());
    out.extend_from_slice(bytes);
    Some(())
}

/// The slot for `kept`; None when it does not fit.
pub fn encode(kept: &Kept) -> Option<Vec<u8>> {
    let mut p = Vec::with_capacity(SLOT_BYTES);
    p.extend_from_slice(&kept.tag.to_le_bytes());
    p.extend_from_slice(&kept.refusal_at.to_le_bytes());
    p.extend_from_slice(&kept.refusal[..]);
    p.extend_from_slice(&u16::try_from(kept.waits.len()).ok()?.to_le_bytes());
    for w in &kept.waits {
        p.extend_from_slice(&w.to_le_bytes());
    }
    p.push(match kept.blocks.source {
        BlocksSource::Entry => 1,
        BlocksSource::Copy => 2,
    });
    put_bytes(&mut p, &kept.blocks.path)?;
    match kept.blocks.sum {
        Some(sum) => {
            p.push(1);
            p.extend_from_slice(&sum.to_le_bytes());
        }
        None => p.push(0),
    }
    match &kept.journal {
        Some(line) => {
            p.push(1);
            put_bytes(&mut p, line)?;
        }
        None => p.push(0),
    }
    p.extend_from_slice(&kept.lock_timeout_ms.to_le_bytes());
    put_bytes(&mut p, &kept.head)?;
    put_bytes(&mut p, &kept.tail)?;
    if HEADER + p.len() > SLOT_BYTES {
        return None;
    }
    let mut slot = Vec::with_capacity(HEADER + p.len());
    slot.extend_from_slice(MAGIC);
    slot.extend_from_slice(&u16::try_from(p.len()).ok()?.to_le_bytes());
    slot.extend_from_slice(&sum(SUM_BASIS, &p).to_le_bytes());
    slot.extend_from_slice(&p);
    Some(slot)
}

/// The answer kept in `slot` when the slot is whole and kept for a request of `tag`.
pub fn decode(slot: &[u8], tag: u64) -> Option<Kept> {
    if slot.get(..4)? != MAGIC {
        return None;
    }
    let len = usize::from(u16::from_le_bytes([*slot.get(4)?, *slot.get(5)?]));
    let payload = slot.get(HEADER..HEADER + len)?;
    let checksum = u64::from_le_bytes(slot[6..HEADER].try_into().ok()?);
    if self::sum(SUM_BASIS, payload) != checksum {
        return None;
    }
    let mut f = Fields(payload);
    if f.u64()? != tag {
        return None;
    }
    let refusal_at = f.u64()?;
    let refusal = Box::new(f.take::<{ refusals::SLOT_BYTES }>()?);
    let n = f.u16()?;
    let waits = (0..n).map(|_| f.u32()).collect::<Option<Vec<u32>>>()?;
    let source = match f.u8()? {
        1 => BlocksSource::Entry,
        2 => BlocksSource::Copy,
        _ => return None,
    };
    let path = f.bytes()?.to_vec();
    let sum = match f.u8()? {
        0 => None,
        1 => Some(f.u64()?),
        _ => return None,
    };
    let journal = match f.u8()? {
        0 => None,
        1 => Some(f.bytes()?.to_vec()),
        _ => return None,
    };
    let lock_timeout_ms = f.u32()?;
    let head = f.bytes()?.to_vec();
    let tail = f.bytes()?.to_vec();
    if !f.rest().is_empty() {
        return None;
    }
    Some(Kept {
        tag,
        refusal_at,
        refusal,
        waits,
        blocks: BlocksSeen { source, path, sum },
        journal,
        lock_timeout_ms,
        head,
        tail,
    })
}

/// The answer kept in `data_dir` for a request whose tag under the file's key is `tag_of` it:
/// one open and two reads (the key, the slot), a third for a long answer. Most answers (text,
/// JSON) are in the slot's first page; a longer one (the HTML page) is read on, so that a
/// request touches no more memory than it reads.
pub fn read(data_dir: &Path, tag_of: impl FnOnce(siphash::Key) -> u64) -> Option<Kept> {
    const FIRST: usize = 4096;
    let file = open(data_dir, false).ok()?;
    let tag = tag_of(file_key(&file)?);
    let at = slot_offset(tag);
    let mut slot = vec![0u8; FIRST];
    let n = read_at_most(&file, &mut slot, at).ok()?;
    slot.truncate(n);
    let len = usize::from(u16::from_le_bytes([*slot.get(4)?, *slot.get(5)?]));
    let whole = (HEADER + len).min(SLOT_BYTES);
    if n == FIRST && whole > FIRST {
        slot.resize(whole, 0);
        let more = read_at_most(&file, &mut slot[FIRST..], at + FIRST as u64).ok()?;
        slot.truncate(FIRST + more);
    }
    decode(&slot, tag)
}

/// Keeps `kept` in `data_dir` under its request's tag (`tag_of` it under the file's key), in
/// place of whatever its slot held; the file and its key are made first when missing. An
/// answer too large for a slot, or a file that cannot be written, is not kept (the next
/// request goes the full way).
pub fn write(data_dir: &Path, tag_of: impl FnOnce(siphash::Key) -> u64, mut kept: Kept) {
    let Ok(file) = open(data_dir, true) else {
        return;
    };
    let Some(key) = file_key(&file).or_else(|| new_key(&file)) else {
        return;
    };
    kept.tag = tag_of(key);
    if let Some(slot) = encode(&kept) {
        let _ = file.write_all_at(&slot, slot_offset(kept.tag));
    }
}

/// The file's key, when its head holds one.
fn file_key(file: &File) -> Option<siphash::Key> {
    let mut head = [0u8; 4 + 16];
    file.read_exact_at(&mut head, 0).ok()?;
    let (magic, key) = head.split_at(4);
    (magic == FILE_MAGIC).then(|| siphash::Key::from_bytes(key.try_into().unwrap_or_default()))
}

/// A new key for a new file, from the kernel's generator. Two processes that make the file at
/// once may each write one: the answers kept under the key that lost are misses, no more.
fn new_key(file: &File) -> Option<siphash::Key> {
    let key = crate::support::random::secret_bytes::<16>().ok()?;
    let mut head = Vec::with_capacity(4 + 16);
    head.extend_from_slice(FILE_MAGIC);
    head.extend_from_slice(&key);
    file.write_all_at(&head, 0).ok()?;
    Some(siphash::Key::from_bytes(key))
}

fn open(data_dir: &Path, write: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(write)
        .create(write)
        .truncate(false)
        .mode(0o600)
        .custom_flags(OPEN_FLAGS)
        .open(data_dir.join(defaults::KEPT_ANSWERS_FILE))
}

/// Reads up to `buf`'s length at `offset` in one call: a regular file gives fewer bytes only at
/// its end (and anything else in the file's place is only a miss).
fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    loop {
        match file.read_at(buf, offset) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            read => return read,
        }
    }
}

#[cfg(test)]
mod tests;
