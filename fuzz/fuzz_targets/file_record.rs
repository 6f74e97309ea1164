//! Fuzz target: the file store's counter files, `record::decode`. Whatever decodes re-encodes
//! to a slot that decodes to the same counter, and the file store's next two writes (sequence
//! number plus one, into the slot `decode` names, as `FileStore` writes them) are what the
//! following reads return.
//!
//! Input: byte 0 chooses the mode. Even: the rest is a file's bytes. Odd: the rest describes
//! valid slots (sequence number, start, window as 8 bytes each, count as 4, little-endian) so
//! that the checks also run on every value a valid file can hold; slot 1 is a second such
//! description, or the remaining bytes as they are.

#![no_main]

use libfuzzer_sys::fuzz_target;
use resolve::core::limiter::Counter;
use resolve::store::file::record::{self, RecordError, SLOT};

fn take<const N: usize>(input: &mut &[u8]) -> Option<[u8; N]> {
    let (head, rest) = input.split_first_chunk::<N>()?;
    *input = rest;
    Some(*head)
}

/// One valid slot described by the input.
fn slot(input: &mut &[u8]) -> Option<[u8; SLOT]> {
    let seq = u64::from_le_bytes(take(input)?);
    let counter = Counter {
        start_ms: u64::from_le_bytes(take(input)?),
        window_ms: u64::from_le_bytes(take(input)?),
        count: u32::from_le_bytes(take(input)?),
    };
    Some(record::encode(seq, &counter))
}

/// Writes one slot at `slot` as `pwrite` does: a file shorter than the offset gets a hole of
/// zero bytes.
fn write_slot(file: &mut Vec<u8>, slot: usize, bytes: &[u8; SLOT]) {
    let at = slot * SLOT;
    if file.len() < at + SLOT {
        file.resize(at + SLOT, 0);
    }
    file[at..at + SLOT].copy_from_slice(bytes);
}

fn check(file: &[u8]) {
    let loaded = match record::decode(file) {
        Ok(l) => l,
        Err(RecordError::TooLong) => {
            assert!(file.len() > 2 * SLOT, "TooLong for {} bytes", file.len());
            return;
        }
        Err(RecordError::NoValidSlot) => {
            assert!(!file.is_empty(), "an empty file is a new counter");
            return;
        }
    };
    assert!(loaded.next_slot < 2, "next slot {}", loaded.next_slot);
    match loaded.counter {
        None => {
            assert!(
                file.is_empty(),
                "no counter in a file of {} bytes",
                file.len()
            );
            assert_eq!((loaded.seq, loaded.next_slot), (0, 0));
        }
        Some(c) => {
            let again = record::decode(&record::encode(loaded.seq, &c))
                .expect("a re-encoded record does not decode");
            assert_eq!(again.counter, Some(c), "re-encoding changed the counter");
            assert_eq!(
                again.seq, loaded.seq,
                "re-encoding changed the sequence number"
            );
        }
    }

    // The file store's next two writes, each read back by the request after it.
    let mut file = file.to_vec();
    let mut current = loaded;
    for n in 1..=2u32 {
        let next = Counter {
            start_ms: 1_700_000_000_000,
            window_ms: 60_000,
            count: n,
        };
        // As `FileStore::store` writes: the next sequence number, wrapping at the top.
        let seq = record::next_seq(current.seq);
        write_slot(&mut file, current.next_slot, &record::encode(seq, &next));
        let read = record::decode(&file).unwrap_or_else(|e| {
            panic!("write {n} (seq {seq}) left a file that does not decode: {e:?}")
        });
        assert_eq!(
            read.counter,
            Some(next),
            "write {n} (seq {seq} into slot {}) is not what the next read returns \
             (it returns seq {} from slot {})",
            current.next_slot,
            read.seq,
            1 - read.next_slot
        );
        current = read;
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, rest @ ..] = data else {
        return;
    };
    if mode & 1 == 0 {
        check(rest);
        return;
    }
    let mut input = rest;
    let Some(first) = slot(&mut input) else {
        return;
    };
    let mut file = first.to_vec();
    match slot(&mut input) {
        Some(second) => file.extend_from_slice(&second),
        None => file.extend_from_slice(input),
    }
    check(&file);
});
