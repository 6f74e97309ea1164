//! This server's memory of refusals, for every store when each request is a process of its own
//! (CGI): a client refused by its own rules is answered for up to a second from a small file in
//! the data directory (`refusals`), never past the refusal's end, without the cache lookup and
//! the store's decision. With a store on a server (MySQL, Redis) that is a connection and its
//! round trips saved: a scraper in a loop is refused by local reads and takes no connection of
//! the account's `max_user_connections`. With the file store, the client's record files are
//! neither locked nor read. The store is asked again once a second.
//!
//! Within a window counts only grow, so a refusal still holds; the one thing that frees a
//! place early is a paid call taken back (a refund), and every refund on this server forgets
//! every refusal remembered. Another server's refund is seen within
//! [`defaults::REFUSAL_MEMORY_MS`], as in a FastCGI process's memory of refusals.
//! Nothing remembered ever admits a request: admissions always go to the store, exact as before.
//!
//! The file is [`defaults::REFUSAL_SLOTS`] slots of [`SLOT_BYTES`], one chosen by the checks'
//! hash: a slot holds one refusal, its checks named whole and a checksum over it, so that a
//! slot half written while it was read, another client's or a damaged one is a miss (the store
//! is asked), never a refusal of the wrong client. Its size is bounded whatever the traffic:
//! nothing to sweep.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::core::decision::{Decision, RuleStatus};
use crate::store::counters::{Counters, RecalledSlot};
use crate::store::fields::Fields;
use crate::store::file::safe_open::OPEN_FLAGS;
use crate::store::{Check, StoreError, checks_key};
use crate::support::defaults;

/// Bytes of one slot: a refusal of up to 32 rules with their names and keys fits.
pub const SLOT_BYTES: usize = 512;
const MAGIC: &[u8; 4] = b"rfm1";
/// Magic, payload length (u16) and checksum (u64) before the payload.
const HEADER: usize = 4 + 2 + 8;

/// A store's counters with this server's memory of refusals beside them.
pub struct RememberedRefusals {
    inner: Rc<dyn Counters>,
    path: PathBuf,
    /// The slot the last refusal was recalled from.
    recalled: std::cell::RefCell<Option<RecalledSlot>>,
}

impl RememberedRefusals {
    /// `inner` with refusals remembered in `data_dir`'s [`defaults::REFUSALS_FILE`].
    pub fn new(inner: Rc<dyn Counters>, data_dir: &Path) -> RememberedRefusals {
        RememberedRefusals {
            inner,
            path: data_dir.join(defaults::REFUSALS_FILE),
            recalled: std::cell::RefCell::new(None),
        }
    }

    fn open(&self, write: bool) -> io::Result<File> {
        open_file(&self.path, write)
    }

    /// Every refusal forgotten at once (the file emptied): a place was freed.
    fn forget_all(&self) {
        if let Ok(file) = OpenOptions::new()
            .write(true)
            .custom_flags(OPEN_FLAGS)
            .open(&self.path)
        {
            let _ = file.set_len(0);
        }
    }
}

impl Counters for RememberedRefusals {
    fn decide_sized(
        &self,
        checks: &[Check<'_>],
        own: usize,
        size: Option<u64>,
    ) -> Result<Decision, StoreError> {
        self.inner.decide_sized(checks, own, size)
    }

    fn refund(&self, checks: &[Check<'_>], at_ms: u64) -> Result<(), StoreError> {
        // Forgotten first: a refusal remembered after the place is freed would stand in its way.
        self.forget_all();
        self.inner.refund(checks, at_ms)
    }

    fn charge(&self, checks: &[Check<'_>], at_ms: u64, size: u64) -> Result<(), StoreError> {
        self.inner.charge(checks, at_ms, size)
    }

    fn used(&self, checks: &[Check<'_>]) -> Result<Vec<u32>, StoreError> {
        self.inner.used(checks)
    }

    /// One open and one read of a slot: a file that cannot be read remembers nothing.
    fn recall_own(&self, own: &[Check<'_>], now_ms: u64) -> Option<Decision> {
        let key = checks_key(own);
        let mut slot = [0u8; SLOT_BYTES];
        let file = self.open(false).ok()?;
        let at = slot_offset(&key);
        file.read_exact_at(&mut slot, at).ok()?;
        let (asked_ms, refusal) = decode(&slot, &key)?;
        let later = still_holds(&refusal, asked_ms, now_ms)?;
        *self.recalled.borrow_mut() = Some(RecalledSlot {
            at,
            bytes: slot.to_vec(),
        });
        Some(later)
    }

    fn recalled_from(&self) -> Option<RecalledSlot> {
        self.recalled.borrow().clone()
    }

    /// One open and one write of a slot; a refusal too large for a slot, or a file that
    /// cannot be written, is not remembered (the next request asks the store).
    fn remember_own(&self, own: &[Check<'_>], asked_ms: u64, refusal: &Decision) {
        let key = checks_key(own);
        let Some(slot) = encode(&key, asked_ms, refusal) else {
            return;
        };
        if let Ok(file) = self.open(true) {
            let _ = file.write_all_at(&slot, slot_offset(&key));
        }
    }
}

/// The `refusals` file of `data_dir`, to read (as the memory of refusals reads it).
pub fn open_to_read(data_dir: &Path) -> io::Result<File> {
    open_file(&data_dir.join(defaults::REFUSALS_FILE), false)
}

fn open_file(path: &Path, write: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(!write)
        .write(write)
        .create(write)
        .truncate(false)
        .mode(0o600)
        .custom_flags(OPEN_FLAGS)
        .open(path)
}

/// A refusal remembered at `asked_ms` as it stands at `now_ms`, while it still holds and is
/// younger than [`defaults::REFUSAL_MEMORY_MS`]: shared by both memories of refusals.
pub fn still_holds(refusal: &Decision, asked_ms: u64, now_ms: u64) -> Option<Decision> {
    now_ms
        .checked_sub(asked_ms)
        .filter(|e| *e < defaults::REFUSAL_MEMORY_MS)
        .and_then(|e| refusal.refusal_later(e))
}

/// FNV-1a, 64 bits, from `basis`: a slot's place and its checksum (not a defence against
/// anyone: a slot chosen on purpose only loses another client's refusal, and the key is kept
/// whole and compared).
fn fnv(basis: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(basis, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

const PLACE_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const SUM_BASIS: u64 = 0x6c62_272e_07bb_0142;

fn slot_offset(key: &str) -> u64 {
    let slots = defaults::REFUSAL_SLOTS as u64;
    (fnv(PLACE_BASIS, key.as_bytes()) % slots) * SLOT_BYTES as u64
}

/// The slot for a refusal of the checks named `key`, asked at `asked_ms`; None for an
/// admission or when it does not fit.
fn encode(key: &str, asked_ms: u64, refusal: &Decision) -> Option<[u8; SLOT_BYTES]> {
    let Decision::Refuse {
        rule,
        wait_ms,
        statuses,
    } = refusal
    else {
        return None;
    };
    let mut payload = Vec::with_capacity(SLOT_BYTES - HEADER);
    payload.extend_from_slice(&asked_ms.to_le_bytes());
    payload.extend_from_slice(&u32::try_from(*rule).ok()?.to_le_bytes());
    payload.extend_from_slice(&wait_ms.to_le_bytes());
    payload.extend_from_slice(&u16::try_from(statuses.len()).ok()?.to_le_bytes());
    for s in statuses {
        payload.extend_from_slice(&s.remaining.to_le_bytes());
        payload.extend_from_slice(&s.reset_ms.to_le_bytes());
        payload.push(u8::from(s.shared));
    }
    payload.extend_from_slice(key.as_bytes());
    if HEADER + payload.len() > SLOT_BYTES {
        return None;
    }
    let mut slot = [0u8; SLOT_BYTES];
    slot[..4].copy_from_slice(MAGIC);
    slot[4..6].copy_from_slice(&u16::try_from(payload.len()).ok()?.to_le_bytes());
    slot[6..HEADER].copy_from_slice(&fnv(SUM_BASIS, &payload).to_le_bytes());
    slot[HEADER..HEADER + payload.len()].copy_from_slice(&payload);
    Some(slot)
}

/// The refusal in `slot` and when it was asked, when the slot is whole (whatever checks it
/// names): for a slot known to be the one a refusal was recalled from.
pub fn decode_recalled(slot: &[u8; SLOT_BYTES]) -> Option<(u64, Decision)> {
    decode_named(slot).map(|(asked_ms, refusal, _)| (asked_ms, refusal))
}

/// The refusal in `slot` and when it was asked, when the slot is whole and names `key`.
fn decode(slot: &[u8; SLOT_BYTES], key: &str) -> Option<(u64, Decision)> {
    let (asked_ms, refusal, named) = decode_named(slot)?;
    (named == key.as_bytes()).then_some((asked_ms, refusal))
}

/// The refusal in `slot`, when it was asked and the checks it names, when the slot is whole.
fn decode_named(slot: &[u8; SLOT_BYTES]) -> Option<(u64, Decision, &[u8])> {
    if &slot[..4] != MAGIC {
        return None;
    }
    let len = usize::from(u16::from_le_bytes([slot[4], slot[5]]));
    let payload = slot.get(HEADER..HEADER + len)?;
    let sum = u64::from_le_bytes(slot[6..HEADER].try_into().ok()?);
    if fnv(SUM_BASIS, payload) != sum {
        return None;
    }
    let mut f = Fields(payload);
    let asked_ms = f.u64()?;
    let rule = usize::try_from(f.u32()?).ok()?;
    let wait_ms = f.u64()?;
    let n = f.u16()?;
    let mut statuses = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        let remaining = f.u32()?;
        let reset_ms = f.u64()?;
        let [shared] = f.take::<1>()?;
        statuses.push(RuleStatus {
            remaining,
            reset_ms,
            shared: shared != 0,
        });
    }
    if rule >= statuses.len() {
        return None;
    }
    let refusal = Decision::Refuse {
        rule,
        wait_ms,
        statuses,
    };
    Some((asked_ms, refusal, f.rest()))
}

#[cfg(test)]
mod tests;
