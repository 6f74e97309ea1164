//! The on-disk form of one file-store counter: two fixed-size text slots, each with a sequence
//! number and a checksum. A write fills the slot not holding the newest valid record, so a
//! write that never completed leaves the previous record readable: no reset, no unreadable file.

use crate::core::limiter::Counter;

/// Bytes per slot; the file holds at most two.
pub const SLOT: usize = 128;
const MAGIC: &str = "resolve1";
/// Bytes of a slot's checksum, ` sum=` and eight hex digits, at the end of its line.
const SUM_TAIL: usize = " sum=".len() + 8;

/// What a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loaded {
    /// The newest valid counter, None for an empty (new) file.
    pub counter: Option<Counter>,
    /// Its sequence number (0 for a new file).
    pub seq: u64,
    /// Slot index the next write goes to.
    pub next_slot: usize,
}

/// Why a file could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordError {
    /// Neither slot holds a valid record.
    NoValidSlot,
    /// The file is longer than two slots: it is not ours.
    TooLong,
}

/// FNV-1a, 32 bits: enough to tell a torn or scribbled slot from a written one.
pub(crate) fn checksum(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// One slot's bytes for counter `c` with sequence number `seq`.
pub fn encode(seq: u64, c: &Counter) -> [u8; SLOT] {
    let body = format!(
        "{MAGIC} seq={seq} start={} window={} count={}",
        c.start_ms, c.window_ms, c.count
    );
    // At most 118 bytes with every number at its largest: always fits.
    summed_line(&body, "sum")
}

/// `body` followed by ` NAME=` and its checksum, padded with spaces to `N` bytes, the last a
/// line feed (a line longer than that is cut, which no writer's is).
pub fn summed_line<const N: usize>(body: &str, name: &str) -> [u8; N] {
    // Laid out in place rather than through `format!` (the journal writes one at every request).
    let mut sum = [0; 8];
    crate::support::hex::lower_into(&checksum(body.as_bytes()).to_be_bytes(), &mut sum);
    let mut out = [b' '; N];
    let mut at = 0;
    for part in [body.as_bytes(), b" ", name.as_bytes(), b"=", &sum] {
        let n = part.len().min(N - 1 - at);
        out[at..at + n].copy_from_slice(&part[..n]);
        at += n;
    }
    out[N - 1] = b'\n';
    out
}

fn parse_slot(slot: &[u8]) -> Option<(u64, Counter)> {
    if slot.len() != SLOT || slot[SLOT - 1] != b'\n' {
        return None;
    }
    // The padding taken off as bytes, not characters (decoded from the end one by one, it cost
    // more than the rest): what is left is valid UTF-8 exactly when the whole line is.
    let line = &slot[..SLOT - 1];
    let end = line.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    let text = std::str::from_utf8(&line[..end]).ok()?;
    // The line ends with ` sum=` and eight hex digits: taken from the end rather than searched
    // for (a substring search cost more than the rest of the parse).
    let (body, tail) = text.split_at_checked(text.len().checked_sub(SUM_TAIL)?)?;
    let sum = tail.strip_prefix(" sum=")?;
    if u32::from_str_radix(sum, 16).ok()? != checksum(body.as_bytes()) {
        return None;
    }
    // The fields in their order, each ` NAME=VALUE` taken off the front (split on spaces and
    // then on `=`, they cost a refusal more than the rest of the parse).
    let mut rest = body.strip_prefix(MAGIC)?;
    let mut field = |name: &str| -> Option<u64> {
        let value = rest
            .strip_prefix(' ')?
            .strip_prefix(name)?
            .strip_prefix('=')?;
        let end = value.bytes().position(|b| b == b' ').unwrap_or(value.len());
        let (value, after) = value.split_at(end);
        rest = after;
        value.parse().ok()
    };
    // The writer stores `seq + 1`: a slot at the top could not be followed, so it is damage
    // (no file reaches it by writing: that takes 2^64 writes).
    let seq = field("seq")?;
    let start_ms = field("start")?;
    let window_ms = field("window")?;
    let count = u32::try_from(field("count")?).ok()?;
    Some((
        seq,
        Counter {
            start_ms,
            window_ms,
            count,
        },
    ))
}

/// Whether sequence number `a` was written after `b`. The writer stores `seq + 1` wrapping at
/// 2^64, so the numbers are compared as serial numbers (RFC 1982): the one ahead by less than
/// half the range is the newer, and 0 follows `u64::MAX`.
fn newer(a: u64, b: u64) -> bool {
    let ahead = a.wrapping_sub(b);
    ahead != 0 && ahead < 1 << 63
}

/// The sequence number written after `seq`.
pub fn next_seq(seq: u64) -> u64 {
    seq.wrapping_add(1)
}

/// Reads a whole file's bytes.
pub fn decode(bytes: &[u8]) -> Result<Loaded, RecordError> {
    if bytes.is_empty() {
        return Ok(Loaded {
            counter: None,
            seq: 0,
            next_slot: 0,
        });
    }
    if bytes.len() > 2 * SLOT {
        return Err(RecordError::TooLong);
    }
    let slots = [
        bytes.get(..SLOT).and_then(parse_slot),
        bytes.get(SLOT..2 * SLOT).and_then(parse_slot),
    ];
    let newest = match slots {
        [Some(a), Some(b)] if newer(b.0, a.0) => (1, b),
        [Some(a), _] => (0, a),
        [None, Some(b)] => (1, b),
        [None, None] => return Err(RecordError::NoValidSlot),
    };
    let (slot, (seq, counter)) = newest;
    Ok(Loaded {
        counter: Some(counter),
        seq,
        next_slot: 1 - slot,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: Counter = Counter {
        start_ms: 1_700_000_000_123,
        window_ms: 60_000,
        count: 7,
    };

    fn file(slots: &[[u8; SLOT]]) -> Vec<u8> {
        slots.concat()
    }

    #[test]
    fn round_trip_and_slot_alternation() {
        let empty = decode(&[]).unwrap();
        assert_eq!((empty.counter, empty.next_slot), (None, 0));

        let newer = Counter { count: 8, ..C };
        let newest = Counter { count: 9, ..C };
        // The slots written, and what is read: the newest counter, its number, the slot the
        // next write goes to.
        for (slots, want) in [
            (file(&[encode(1, &C)]), (Some(C), 1, 1)),
            (
                file(&[encode(1, &C), encode(2, &newer)]),
                (Some(newer), 2, 0),
            ),
            (
                file(&[encode(3, &newest), encode(2, &newer)]),
                (Some(newest), 3, 1),
            ),
        ] {
            let loaded = decode(&slots).unwrap();
            assert_eq!((loaded.counter, loaded.seq, loaded.next_slot), want);
        }
    }

    #[test]
    fn extreme_values_fit_a_slot() {
        let big = Counter {
            start_ms: u64::MAX,
            window_ms: u64::MAX,
            count: u32::MAX,
        };
        let slot = encode(u64::MAX, &big);
        assert_eq!(decode(&slot).unwrap().counter, Some(big));
    }

    #[test]
    fn sequence_numbers_wrap_around() {
        // The write after u64::MAX is 0, into the other slot, and it is the newer one.
        assert_eq!(next_seq(u64::MAX), 0);
        let wrapped = Counter { count: 8, ..C };
        let loaded = decode(&file(&[encode(u64::MAX, &C), encode(0, &wrapped)])).unwrap();
        assert_eq!((loaded.counter, loaded.seq), (Some(wrapped), 0));
        let loaded = decode(&file(&[encode(0, &wrapped), encode(u64::MAX, &C)])).unwrap();
        assert_eq!((loaded.counter, loaded.next_slot), (Some(wrapped), 1));
        // Equal numbers (only a crafted file has them): the first slot.
        let loaded = decode(&file(&[encode(4, &C), encode(4, &wrapped)])).unwrap();
        assert_eq!(loaded.counter, Some(C));
    }

    #[test]
    fn a_torn_write_falls_back_to_the_other_slot() {
        let newer = Counter { count: 8, ..C };
        let good = file(&[encode(1, &C), encode(2, &newer)]);
        // Every prefix of the second slot's write, over the old bytes (zeros here), reads as
        // the first slot's record or the new one: never as nothing.
        for cut in 0..=SLOT {
            let mut torn = file(&[encode(1, &C), [0u8; SLOT]]);
            torn[SLOT..SLOT + cut].copy_from_slice(&good[SLOT..SLOT + cut]);
            let loaded = decode(&torn).unwrap();
            let want = if cut == SLOT { newer } else { C };
            assert_eq!(loaded.counter, Some(want), "cut at {cut}");
        }
        // A file cut short inside the second slot still reads the first.
        assert_eq!(decode(&good[..SLOT + 10]).unwrap().counter, Some(C));
    }

    #[test]
    fn a_summed_line_is_its_body_and_checksum_padded_or_cut() {
        let line: [u8; 32] = summed_line("abc", "sum");
        let want = format!("abc sum={:08x}", checksum(b"abc"));
        assert_eq!(&line[..want.len()], want.as_bytes());
        assert!(line[want.len()..31].iter().all(|&b| b == b' '));
        assert_eq!(line[31], b'\n');
        // A line longer than the slot is cut, its last byte still the line feed.
        let long: [u8; 16] = summed_line("0123456789abcdef", "sum");
        assert_eq!(&long[..], b"0123456789abcde\n");
    }

    #[test]
    fn fields_are_read_in_their_order_and_nothing_else() {
        // A slot as a writer lays it out, from its body (the checksum made to match).
        let slot = |body: &str| -> [u8; SLOT] { summed_line(body, "sum") };
        let good = "resolve1 seq=3 start=1000 window=60000 count=7";
        let counter = Counter {
            start_ms: 1000,
            window_ms: 60_000,
            count: 7,
        };
        assert_eq!(parse_slot(&slot(good)), Some((3, counter)));
        // What follows the last field is not read.
        assert_eq!(
            parse_slot(&slot(&format!("{good} more"))),
            Some((3, counter))
        );
        for bad in [
            "resolve1",
            "resolve1x seq=3 start=1000 window=60000 count=7",
            "resolve1  seq=3 start=1000 window=60000 count=7",
            "resolve1 seq=3 window=60000 start=1000 count=7",
            "resolve1 seq=3 start=1000 window=60000",
            "resolve1 seq=3 start=1000 window=60000 count=",
            "resolve1 seq=3 start=10=00 window=60000 count=7",
            "resolve1 seq=3 start=1000 window=60000 count=4294967296",
            "resolve1 seqq=3 start=1000 window=60000 count=7",
            "resolve1 seq=-3 start=1000 window=60000 count=7",
        ] {
            assert_eq!(parse_slot(&slot(bad)), None, "{bad}");
        }
    }

    #[test]
    fn damage_is_detected() {
        let mut flipped = encode(1, &C).to_vec();
        flipped[30] ^= 1;
        assert_eq!(decode(&flipped), Err(RecordError::NoValidSlot));
        assert_eq!(decode(b"hello\n"), Err(RecordError::NoValidSlot));
        assert_eq!(decode(&[0u8; SLOT]), Err(RecordError::NoValidSlot));
        assert_eq!(decode(&[b'x'; 3 * SLOT]), Err(RecordError::TooLong));
        let mut bad_count = encode(1, &C).to_vec();
        let text = String::from_utf8(bad_count.clone())
            .unwrap()
            .replace("count=7", "count=x");
        bad_count.copy_from_slice(text.as_bytes());
        assert_eq!(decode(&bad_count), Err(RecordError::NoValidSlot));
    }
}
