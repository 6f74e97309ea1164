//! This server's kept answers, for CGI: the 429 a request was given from the memory of refusals
//! (`refusals`), kept in the data directory's `answers` file with what it rested on, so that
//! the same request repeated (a scraper in a loop) is answered again before the configuration
//! is read. What is kept here is only written and read: whether a kept answer still stands is
//! judged by `gateway::replay`, against the same files the full way reads.
//!
//! The file is [`defaults::KEPT_ANSWER_SLOTS`] slots of [`SLOT_BYTES`], one chosen by the
//! request's digest: a slot holds one answer, the digest whole and a checksum over it, so that
//! a slot half written while it was read, another request's or a damaged one is a miss (the
//! request goes the full way), never another request's answer. Its size is bounded whatever
//! the traffic: nothing to sweep.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use crate::store::file::safe_open::OPEN_FLAGS;
use crate::store::refusals;
use crate::support::defaults;

/// Bytes of one slot: a refusal's answer as text, JSON or the HTML page fits.
pub const SLOT_BYTES: usize = 16_384;
const MAGIC: &[u8; 4] = b"kan1";
/// Magic, payload length (u16) and checksum (u64) before the payload.
const HEADER: usize = 4 + 2 + 8;
/// Bytes of a request's digest (SHA-256).
pub const DIGEST_BYTES: usize = 32;

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
    /// The request's digest: the program, its configuration (where and what) and the request.
    pub digest: [u8; DIGEST_BYTES],
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

/// FNV-1a, 64 bits, from `basis`: a slot's checksum and a block list's (not a defence against
/// anyone: the digest is kept whole and compared, and what a list's sum guards is only ever
/// written by the site's own processes).
pub fn fnv(basis: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(basis, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

const SUM_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// The checksum of a block list's bytes.
pub fn list_sum(bytes: &[u8]) -> u64 {
    fnv(SUM_BASIS, bytes)
}

/// Where in the file the answer to a request of `digest` is kept.
pub fn slot_offset(digest: &[u8; DIGEST_BYTES]) -> u64 {
    let slots = defaults::KEPT_ANSWER_SLOTS as u64;
    let n = u64::from_le_bytes(digest[..8].try_into().unwrap_or_default());
    (n % slots) * SLOT_BYTES as u64
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) -> Option<()> {
    out.extend_from_slice(&u16::try_from(bytes.len()).ok()?.to_le_bytes());
    out.extend_from_slice(bytes);
    Some(())
}

/// The slot for `kept`; None when it does not fit.
pub fn encode(kept: &Kept) -> Option<Vec<u8>> {
    let mut p = Vec::with_capacity(SLOT_BYTES);
    p.extend_from_slice(&kept.digest);
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
    slot.extend_from_slice(&fnv(SUM_BASIS, &p).to_le_bytes());
    slot.extend_from_slice(&p);
    Some(slot)
}

/// Reads fields off the front of a payload.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }
    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u16()?);
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
}

/// The answer kept in `slot` when the slot is whole and kept for a request of `digest`.
pub fn decode(slot: &[u8], digest: &[u8; DIGEST_BYTES]) -> Option<Kept> {
    if slot.get(..4)? != MAGIC {
        return None;
    }
    let len = usize::from(u16::from_le_bytes([*slot.get(4)?, *slot.get(5)?]));
    let payload = slot.get(HEADER..HEADER + len)?;
    let sum = u64::from_le_bytes(slot[6..HEADER].try_into().ok()?);
    if fnv(SUM_BASIS, payload) != sum {
        return None;
    }
    let mut f = Fields(payload);
    if &f.take::<DIGEST_BYTES>()? != digest {
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
    if !f.0.is_empty() {
        return None;
    }
    Some(Kept {
        digest: *digest,
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

/// The answer kept in `data_dir` for a request of `digest`: one open and one read.
pub fn read(data_dir: &Path, digest: &[u8; DIGEST_BYTES]) -> Option<Kept> {
    let file = open(data_dir, false).ok()?;
    let mut slot = vec![0u8; SLOT_BYTES];
    let n = read_at_most(&file, &mut slot, slot_offset(digest)).ok()?;
    decode(&slot[..n], digest)
}

/// Keeps `kept` in `data_dir`, in place of whatever its slot held; an answer too large for a
/// slot, or a file that cannot be written, is not kept (the next request goes the full way).
pub fn write(data_dir: &Path, kept: &Kept) {
    let Some(slot) = encode(kept) else {
        return;
    };
    if let Ok(file) = open(data_dir, true) {
        let _ = file.write_all_at(&slot, slot_offset(&kept.digest));
    }
}

fn open(data_dir: &Path, write: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(!write)
        .write(write)
        .create(write)
        .truncate(false)
        .mode(0o600)
        .custom_flags(OPEN_FLAGS)
        .open(data_dir.join(defaults::KEPT_ANSWERS_FILE))
}

/// Reads up to `buf`'s length at `offset`; fewer bytes at the file's end.
fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests;
