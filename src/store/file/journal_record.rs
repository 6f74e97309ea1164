//! The on-disk form of a file of the usage journal: a fixed-size header naming where the live
//! copy of the file's lines is, then room for two copies. A write puts the new lines where they
//! do not overlap the live copy, then rewrites the header (one small write at the start of the
//! file), so a write that never completed leaves the previous copy readable, as the two slots
//! of a counter file do. Pure: the store reads and writes the bytes.
//!
//! The lines of a journal file, one count each, as `KEY COUNT`:
//! - `t HOUR NAME` a total (`t 0 refused:ip 4`);
//! - `a HOUR CLIENT`, `r HOUR CLIENT`, `b HOUR CLIENT` a client's admitted and refused
//!   requests, and the bytes of the files it was served.
//!
//! HOUR is counted from the file's first hour (its name says which), names and clients are
//! written with `%XX` for `%`, spaces and anything not printable ASCII. A notes file holds
//! `AT_MS TEXT` lines instead, oldest first.

use std::collections::BTreeMap;
use std::io::Write as _;

use crate::core::journal::{ClientCount, Note, Row, notes_kept};
use crate::store::file::record::checksum;

/// Bytes of the header.
pub const HEADER: usize = 128;
const MAGIC: &str = "resolve-journal1";

/// Where the live copy is, and what it must hash to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Header {
    /// Offset and length of the live copy of the lines.
    pub off: u64,
    pub len: u64,
    /// Of a day's file: the hours of the day before this one are in it (their hour files are
    /// left-overs to ignore). 0 in other files.
    pub mark: u32,
    /// Checksum of the live copy.
    pub sum: u32,
}

/// Why a journal file could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// The header is not one this store writes.
    Header,
    /// The live copy is cut short or does not match its checksum.
    Copy,
    /// A line that no writer makes.
    Line,
}

/// The header's bytes.
pub fn encode_header(h: &Header) -> [u8; HEADER] {
    let body = format!(
        "{MAGIC} off={} len={} mark={} sum={:08x}",
        h.off, h.len, h.mark, h.sum
    );
    // At most 111 bytes with every number at its largest: always fits.
    crate::store::file::record::summed_line(&body, "hsum")
}

/// The header of a file that starts with `bytes` (`None`: an empty file, a new one).
pub fn decode_header(bytes: &[u8]) -> Result<Option<Header>, Damage> {
    if bytes.is_empty() {
        return Ok(None);
    }
    if bytes.len() < HEADER || bytes[HEADER - 1] != b'\n' {
        return Err(Damage::Header);
    }
    let text = std::str::from_utf8(&bytes[..HEADER - 1])
        .map_err(|_| Damage::Header)?
        .trim_end_matches(' ');
    let (body, hsum) = text.rsplit_once(" hsum=").ok_or(Damage::Header)?;
    if hsum.len() != 8 || u32::from_str_radix(hsum, 16).ok() != Some(checksum(body.as_bytes())) {
        return Err(Damage::Header);
    }
    let mut fields = body.split(' ');
    if fields.next() != Some(MAGIC) {
        return Err(Damage::Header);
    }
    let mut field = |name: &str| -> Option<&str> {
        let (k, v) = fields.next()?.split_once('=')?;
        (k == name).then_some(v)
    };
    let parsed = (|| {
        Some(Header {
            off: field("off")?.parse().ok()?,
            len: field("len")?.parse().ok()?,
            mark: field("mark")?.parse().ok()?,
            sum: u32::from_str_radix(field("sum")?, 16).ok()?,
        })
    })();
    match parsed {
        Some(h) if h.off >= HEADER as u64 && h.off.checked_add(h.len).is_some() => Ok(Some(h)),
        _ => Err(Damage::Header),
    }
}

/// The checksum of a copy: FNV-1a's step over 8-byte words, each product turned so that its
/// high bits reach the low ones. A request checks its file's copy and sums the new one: eight
/// times fewer steps than a byte at a time.
pub fn sum(data: &[u8]) -> u32 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        h = (h ^ w).wrapping_mul(PRIME).rotate_left(29);
    }
    for b in words.remainder() {
        h = (h ^ u64::from(*b)).wrapping_mul(PRIME).rotate_left(29);
    }
    (h ^ (h >> 32)) as u32
}

/// Whether `copy` is the live copy `header` names.
pub fn check_copy(header: &Header, copy: &[u8]) -> Result<(), Damage> {
    if copy.len() as u64 != header.len || sum(copy) != header.sum {
        return Err(Damage::Copy);
    }
    Ok(())
}

/// Where a new copy of `len` bytes goes, given the live one: right after the header when it
/// fits before the live copy, else after the live copy, leaving room before it for the next
/// copy to go back to the front. The file holds at most about twice its lines.
pub fn place(live: Option<&Header>, len: u64) -> u64 {
    let front = HEADER as u64;
    match live {
        None => front,
        Some(h) if front + len <= h.off => front,
        Some(h) => (h.off + h.len).max(front + len + slack(len)),
    }
}

/// Room left for a file's lines to grow before the next copy goes to the front: a request
/// adds a line or two at most.
fn slack(len: u64) -> u64 {
    len / 4 + 128
}

/// `s` with `%`, spaces and anything not printable ASCII as `%XX`.
pub fn escape(s: &str, out: &mut String) {
    for b in s.bytes() {
        if b.is_ascii_graphic() && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

fn unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The key of a total of hour `base + offset`.
pub fn total_key(offset: u32, name: &str) -> String {
    let mut k = format!("t {offset} ");
    escape(name, &mut k);
    k
}

/// The key of a client's count of hour `base + offset`.
pub fn client_key(offset: u32, client: &str, count: ClientCount) -> String {
    let tag = match count {
        ClientCount::Admitted => 'a',
        ClientCount::Refused => 'r',
        ClientCount::Bytes => 'b',
    };
    let mut k = format!("{tag} {offset} ");
    escape(client, &mut k);
    k
}

/// One line: its key and count.
fn split_line(line: &str) -> Result<(&str, u64), Damage> {
    let (key, n) = line.rsplit_once(' ').ok_or(Damage::Line)?;
    Ok((key, n.parse().map_err(|_| Damage::Line)?))
}

/// The lines `copy` with each `(key, n)` of `keys` added to its key's count (a key given
/// twice gets both), keys not there yet added at the end. Lines of other keys are copied as
/// they are: a request's work grows with the size of its file only by a search and a copy.
pub fn add(copy: &[u8], keys: &[(String, u64)]) -> Result<Vec<u8>, Damage> {
    if copy.last().is_some_and(|b| *b != b'\n') {
        return Err(Damage::Line);
    }
    // Each key once, with how many it adds and whether it was found.
    let mut wanted: Vec<(&str, u64, bool)> = Vec::with_capacity(keys.len());
    for (k, n) in keys {
        match wanted.iter_mut().find(|(w, _, _)| w == k) {
            Some((_, times, _)) => *times += n,
            None => wanted.push((k, *n, false)),
        }
    }
    let mut out = Vec::with_capacity(copy.len() + 64 * keys.len());
    for line in copy.split_inclusive(|b| *b == b'\n') {
        let body = &line[..line.len() - 1];
        let space = body.iter().rposition(|b| *b == b' ').ok_or(Damage::Line)?;
        let key = &body[..space];
        match wanted.iter_mut().find(|(w, _, _)| w.as_bytes() == key) {
            None => out.extend_from_slice(line),
            Some((k, times, found)) => {
                let n: u64 = std::str::from_utf8(&body[space + 1..])
                    .ok()
                    .and_then(|n| n.parse().ok())
                    .ok_or(Damage::Line)?;
                *found = true;
                let _ = writeln!(out, "{k} {}", n + *times);
            }
        }
    }
    for (k, times, _) in wanted.iter().filter(|(_, _, found)| !found) {
        // By value, as above: both branches format with the same function.
        let _ = writeln!(out, "{k} {}", *times);
    }
    Ok(out)
}

/// The rows of a file whose first hour is `base`.
pub fn rows(copy: &[u8], base: u32) -> Result<Vec<Row>, Damage> {
    let text = std::str::from_utf8(copy).map_err(|_| Damage::Line)?;
    let mut out = Vec::new();
    for line in text.lines() {
        let (key, n) = split_line(line)?;
        let mut parts = key.splitn(3, ' ');
        let (Some(tag), Some(offset), Some(what)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(Damage::Line);
        };
        let hour = offset
            .parse::<u32>()
            .ok()
            .and_then(|o| base.checked_add(o))
            .ok_or(Damage::Line)?;
        let what = unescape(what).ok_or(Damage::Line)?;
        out.push(match tag {
            "t" => Row::Total {
                hour,
                name: what,
                count: n,
            },
            "a" | "r" | "b" => Row::Client {
                hour,
                client: what,
                count: match tag {
                    "a" => ClientCount::Admitted,
                    "r" => ClientCount::Refused,
                    _ => ClientCount::Bytes,
                },
                n,
            },
            _ => return Err(Damage::Line),
        });
    }
    Ok(out)
}

/// The lines of a day's file (first hour `base`) holding these totals.
pub fn totals(totals: &BTreeMap<(u32, String), u64>, base: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for ((hour, name), n) in totals {
        let _ = writeln!(out, "{} {n}", total_key(hour - base, name));
    }
    out
}

/// The notes in a notes file, oldest first.
pub fn notes(copy: &[u8]) -> Result<Vec<Note>, Damage> {
    let text = std::str::from_utf8(copy).map_err(|_| Damage::Line)?;
    text.lines()
        .map(|line| {
            let (at, t) = line.split_once(' ').ok_or(Damage::Line)?;
            Ok(Note {
                at_ms: at.parse().map_err(|_| Damage::Line)?,
                text: unescape(t).ok_or(Damage::Line)?,
            })
        })
        .collect()
}

/// A notes file's lines with `note` added and only those [`notes_kept`] says kept: the
/// newest of each kind, at most [`KEEP_NOTES`](crate::core::journal::KEEP_NOTES) in all.
pub fn add_note(copy: &[u8], note: &Note) -> Result<Vec<u8>, Damage> {
    let mut all = notes(copy)?;
    all.push(note.clone());
    let kept = notes_kept(all.iter().rev().map(|n| n.text.as_str()));
    let mut out = String::new();
    for (n, keep) in all.iter().zip(kept.iter().rev()) {
        if *keep {
            out.push_str(&n.at_ms.to_string());
            out.push(' ');
            escape(&n.text, &mut out);
            out.push('\n');
        }
    }
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::journal::KEEP_NOTES;

    #[test]
    fn headers_round_trip_and_damage_is_seen() {
        assert_eq!(decode_header(b""), Ok(None));
        let h = Header {
            off: 128,
            len: 42,
            mark: 480,
            sum: 0xdead_beef,
        };
        let bytes = encode_header(&h);
        assert_eq!(decode_header(&bytes), Ok(Some(h)));
        let big = Header {
            off: u64::MAX / 2,
            len: u64::MAX / 2,
            mark: u32::MAX,
            sum: u32::MAX,
        };
        assert_eq!(decode_header(&encode_header(&big)), Ok(Some(big)));
        for cut in [1, 10, HEADER - 1] {
            assert_eq!(decode_header(&bytes[..cut]), Err(Damage::Header), "{cut}");
        }
        let mut flipped = bytes;
        flipped[20] ^= 1;
        assert_eq!(decode_header(&flipped), Err(Damage::Header));
        assert_eq!(decode_header(&[b'x'; 300]), Err(Damage::Header));
        // A header pointing into itself is not one a writer makes.
        let inside = encode_header(&Header { off: 3, ..h });
        assert_eq!(decode_header(&inside), Err(Damage::Header));
    }

    #[test]
    fn a_new_copy_never_overlaps_the_live_one_and_the_file_stays_small() {
        let mut live: Option<Header> = None;
        let mut end = 0;
        for len in (0..400u64).map(|i| 40 + i * 30) {
            let off = place(live.as_ref(), len);
            if let Some(h) = live {
                assert!(
                    off + len <= h.off || off >= h.off + h.len,
                    "{off} {len} {h:?}"
                );
            }
            assert!(off >= HEADER as u64);
            end = end.max(off + len);
            assert!(
                end <= HEADER as u64 + 2 * len + slack(len) + 64,
                "{end} for {len}"
            );
            live = Some(Header {
                off,
                len,
                ..Header::default()
            });
        }
    }

    #[test]
    fn counts_are_added_and_read_back() {
        let keys = [
            (total_key(0, "requests"), 1),
            (total_key(0, "refused:ip"), 1),
            (client_key(0, "203.0.113.7", ClientCount::Refused), 1),
        ];
        let one = add(b"", &keys).unwrap();
        let two = add(&one, &[keys[0].clone(), (keys[0].0.clone(), 1)]).unwrap();
        let mut got = rows(&two, 100).unwrap();
        got.sort_by_key(|r| format!("{r:?}"));
        assert_eq!(
            got,
            [
                Row::Client {
                    hour: 100,
                    client: "203.0.113.7".into(),
                    count: ClientCount::Refused,
                    n: 1
                },
                Row::Total {
                    hour: 100,
                    name: "refused:ip".into(),
                    count: 1
                },
                Row::Total {
                    hour: 100,
                    name: "requests".into(),
                    count: 3
                },
            ]
        );
        // Names with spaces, line ends and other bytes survive, one line each.
        let odd = "a b\n%c\u{e9}";
        let bytes = add(b"", &[(total_key(2, odd), 1)]).unwrap();
        assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 1);
        assert_eq!(
            rows(&bytes, 0).unwrap(),
            [Row::Total {
                hour: 2,
                name: odd.into(),
                count: 1
            }]
        );
        // A count that is no number, one too many fields, an unknown kind, an hour that is no
        // number, a name badly escaped.
        let bad = [
            "t 0 x\n",
            "t 0 x y\n",
            "q 0 x 1\n",
            "t x 1\n",
            "t 0 %zz 1\n",
        ];
        for line in bad {
            assert_eq!(rows(line.as_bytes(), 0), Err(Damage::Line), "{line:?}");
        }
        assert_eq!(add(b"nonsense\n", &keys), Err(Damage::Line));
    }

    #[test]
    fn the_copy_checksum_sees_every_byte_changed() {
        let copy: Vec<u8> = (0..100u8).map(|i| b'a' + i % 26).collect();
        let whole = sum(&copy);
        for at in 0..copy.len() {
            for bit in 0..8 {
                let mut changed = copy.clone();
                changed[at] ^= 1 << bit;
                assert_ne!(sum(&changed), whole, "byte {at} bit {bit}");
            }
            assert_ne!(sum(&copy[..at]), whole, "cut at {at}");
        }
    }

    #[test]
    fn notes_keep_the_newest() {
        let mut copy = Vec::new();
        for n in 0..60u64 {
            let note = Note {
                at_ms: n,
                text: format!("ACTION NEEDED: {n}\nsecond line"),
            };
            copy = add_note(&copy, &note).unwrap();
        }
        let kept = notes(&copy).unwrap();
        assert_eq!(kept.len(), KEEP_NOTES);
        assert_eq!(kept[0].at_ms, 10);
        assert_eq!(kept[49].text, "ACTION NEEDED: 59\nsecond line");
    }
}
