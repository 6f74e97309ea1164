//! The Redis store's usage journal and notes, as commands and the reading of their replies.
//!
//! Keys: `resolve:journal:totals:HOUR`, a hash `name -> count` that expires when
//! [`journal::KEEP_HOURS`] have passed since the hour; `resolve:journal:clients:HOUR`, a hash
//! `admitted:CLIENT` / `refused:CLIENT -> count` that expires after
//! [`journal::CLIENT_HOURS`]; `resolve:journal:notes`, a list, newest first, trimmed to
//! [`journal::KEEP_NOTES`]. (No rule's key can take these names: a rule named `journal` keys
//! an address, `key:HASH` or `*`.) A request's entry is one `MULTI` … `EXEC` sent in one
//! write: every `HINCRBY` and both `PEXPIREAT`s run together, alone, or none of them, and the
//! expiry is set with the counts, so no key is left without one. Nothing needs sweeping.

use std::collections::BTreeMap;

use crate::core::journal::{self, ClientCount, Entry, HOUR_MS, KEEP_NOTES, Note, Row};
use crate::core::key::Reserved;
use crate::store::redis::resp::{self, OddReply, Reply};

/// Fields of a clients hash fetched whole; bigger ones are read with `HSCAN`.
pub const WHOLE_HASH: i64 = 20_000;
/// Hours asked for in one exchange.
pub const HOURS_AT_ONCE: u32 = 1_000;

/// The totals of `hour`; in a cluster (`tagged`) with the hour in braces, so that an hour's
/// two hashes share a slot and its transaction runs on one node.
pub fn totals_key(hour: u32, tagged: bool) -> String {
    hour_key(
        Reserved::JournalTotals(hour).key().into_owned(),
        hour,
        tagged,
    )
}

/// The clients of `hour`, tagged as [`totals_key`].
pub fn clients_key(hour: u32, tagged: bool) -> String {
    hour_key(
        Reserved::JournalClients(hour).key().into_owned(),
        hour,
        tagged,
    )
}

fn hour_key(key: String, hour: u32, tagged: bool) -> String {
    if !tagged {
        return key;
    }
    let hour = hour.to_string();
    crate::core::slot::tagged(&key, key.len() - hour.len(), &hour)
}

pub fn notes_key() -> std::borrow::Cow<'static, str> {
    Reserved::JournalNotes.key()
}

/// When the rows of `hour` may go, kept `hours` after it (ms since 1970).
fn expires_at(hour: u32, hours: u32) -> String {
    ((u64::from(hour) + u64::from(hours) + 1) * HOUR_MS).to_string()
}

/// The transaction that adds `entry`; empty when it adds nothing.
pub fn add_commands(entry: &Entry, tagged: bool) -> Vec<Vec<u8>> {
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    for (name, n) in &entry.totals {
        *totals.entry(name).or_default() += n;
    }
    if totals.is_empty() && entry.clients.is_empty() {
        return Vec::new();
    }
    let mut out = vec![resp::encode(&[b"MULTI"])];
    if !totals.is_empty() {
        let key = totals_key(entry.hour, tagged);
        for (name, n) in totals {
            out.push(add_to(&key, name, n));
        }
        let at = expires_at(entry.hour, journal::KEEP_HOURS);
        out.push(resp::encode(&[b"PEXPIREAT", key.as_bytes(), at.as_bytes()]));
    }
    if !entry.clients.is_empty() {
        let key = clients_key(entry.hour, tagged);
        for (client, count, n) in &entry.clients {
            out.push(add_to(&key, &format!("{}:{client}", count.name()), *n));
        }
        let at = expires_at(entry.hour, journal::CLIENT_HOURS);
        out.push(resp::encode(&[b"PEXPIREAT", key.as_bytes(), at.as_bytes()]));
    }
    out.push(resp::encode(&[b"EXEC"]));
    out
}

/// The command that adds `n` to `field` of the hash at `key`.
fn add_to(key: &str, field: &str, n: u64) -> Vec<u8> {
    resp::encode(&[
        b"HINCRBY",
        key.as_bytes(),
        field.as_bytes(),
        n.to_string().as_bytes(),
    ])
}

/// The transaction that keeps `note`, trims the list to the newest [`KEEP_NOTES`] and reads
/// them back (for [`notes_dropped`]).
pub fn note_commands(note: &Note) -> Vec<Vec<u8>> {
    let value = format!("{} {}", note.at_ms, note.text);
    let last = (KEEP_NOTES - 1).to_string();
    vec![
        resp::encode(&[b"MULTI"]),
        resp::encode(&[b"LPUSH", notes_key().as_bytes(), value.as_bytes()]),
        resp::encode(&[b"LTRIM", notes_key().as_bytes(), b"0", last.as_bytes()]),
        resp::encode(&[b"LRANGE", notes_key().as_bytes(), b"0", b"-1"]),
        resp::encode(&[b"EXEC"]),
    ]
}

/// After [`note_commands`]' transaction (its `EXEC` reply): the commands that remove the
/// notes of a kind beyond its share ([`journal::notes_kept`]), oldest first.
pub fn notes_dropped(exec: &Reply) -> Result<Vec<Vec<u8>>, OddReply> {
    let Reply::Array(Some(items)) = exec else {
        return Err(OddReply(format!("EXEC answered {exec:?}")));
    };
    let Some(Reply::Array(Some(list))) = items.last() else {
        return Err(OddReply("the notes were not read back".into()));
    };
    let values: Vec<&[u8]> = list
        .iter()
        .filter_map(|item| match item {
            Reply::Bulk(Some(bytes)) => Some(bytes.as_slice()),
            _ => None,
        })
        .collect();
    let texts: Vec<String> = values
        .iter()
        .map(|v| {
            let text = String::from_utf8_lossy(v);
            text.split_once(' ').map_or("", |(_, t)| t).to_owned()
        })
        .collect();
    let kept = journal::notes_kept(texts.iter().map(String::as_str));
    Ok(values
        .iter()
        .zip(kept)
        .filter(|(_, keep)| !keep)
        .map(|(value, _)| resp::encode(&[b"LREM", notes_key().as_bytes(), b"-1", value]))
        .collect())
}

/// Whether a transaction's last reply (`EXEC`'s) says every command ran.
pub fn committed(exec: &Reply) -> Result<(), OddReply> {
    match exec {
        Reply::Array(Some(items)) => match items.iter().find_map(|r| match r {
            Reply::Error(e) => Some(e),
            _ => None,
        }) {
            Some(e) => Err(OddReply(format!(
                "a command of the transaction failed: {e}"
            ))),
            None => Ok(()),
        },
        other => Err(OddReply(format!("EXEC answered {other:?}"))),
    }
}

/// The notes of an `LRANGE`, newest first.
pub fn notes_from(reply: &Reply) -> Result<Vec<Note>, OddReply> {
    let Reply::Array(Some(items)) = reply else {
        return Err(OddReply(format!("LRANGE answered {reply:?}")));
    };
    items
        .iter()
        .map(|item| {
            let Reply::Bulk(Some(bytes)) = item else {
                return Err(OddReply(format!("a note is {item:?}")));
            };
            let text = String::from_utf8_lossy(bytes);
            let (at, text) = text
                .split_once(' ')
                .ok_or_else(|| OddReply("a note without its time".into()))?;
            Ok(Note {
                at_ms: at
                    .parse()
                    .map_err(|_| OddReply("a note without its time".into()))?,
                text: text.to_owned(),
            })
        })
        .collect()
}

/// The field-value pairs of an `HGETALL` (or the second half of an `HSCAN`).
pub fn pairs(reply: &Reply) -> Result<Vec<(String, u64)>, OddReply> {
    let Reply::Array(Some(items)) = reply else {
        return Err(OddReply(format!("a hash answered {reply:?}")));
    };
    items
        .chunks(2)
        .map(|pair| match pair {
            [Reply::Bulk(Some(field)), Reply::Bulk(Some(value))] => Ok((
                String::from_utf8_lossy(field).into_owned(),
                String::from_utf8_lossy(value)
                    .parse()
                    .map_err(|_| OddReply("a count that is not a number".into()))?,
            )),
            other => Err(OddReply(format!("a hash field is {other:?}"))),
        })
        .collect()
}

/// The rows of a clients hash's fields.
pub fn client_rows(hour: u32, fields: Vec<(String, u64)>, out: &mut Vec<Row>) {
    for (field, n) in fields {
        if let Some((count, client)) = field.split_once(':')
            && let Some(count) = ClientCount::from_name(count)
        {
            out.push(Row::Client {
                hour,
                client: client.to_owned(),
                count,
                n,
            });
        }
    }
}

/// Milliseconds of the server's `TIME` reply.
pub fn ms_from_time(reply: &Reply) -> Result<u64, OddReply> {
    let Reply::Array(Some(parts)) = reply else {
        return Err(OddReply(format!("TIME answered {reply:?}")));
    };
    let number = |i: usize| -> Option<u64> {
        match parts.get(i)? {
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).parse().ok(),
            _ => None,
        }
    };
    match (number(0), number(1)) {
        (Some(s), Some(us)) => Ok(s * 1000 + us / 1000),
        _ => Err(OddReply(format!("TIME answered {reply:?}"))),
    }
}

/// The hours `from..to` where the store can hold anything at the server's hour `now`: none
/// older than the totals are kept, and a day ahead at most (clocks of web servers that are
/// ahead of the server's).
pub fn hours_held(from: u32, to: u32, now: u32) -> std::ops::Range<u32> {
    let oldest = now.saturating_sub(journal::KEEP_HOURS + 1);
    from.max(oldest)..to.min(now.saturating_add(25))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn its_keys_are_among_those_no_rule_may_make() {
        for key in [
            totals_key(10, false),
            clients_key(10, true),
            notes_key().into_owned(),
        ] {
            let reserved = crate::core::key::RESERVED_PREFIXES;
            assert!(reserved.iter().any(|p| key.starts_with(p)), "{key}");
        }
    }

    fn words(command: &[u8]) -> Vec<String> {
        String::from_utf8_lossy(command)
            .split("\r\n")
            .filter(|w| !w.is_empty() && !w.starts_with(['*', '$']))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn an_entry_is_one_transaction_with_its_expiries() {
        let entry = Entry::refused_with_a_total_twice(10, "2001:db8::/64");
        let sent: Vec<Vec<String>> = add_commands(&entry, false)
            .iter()
            .map(|c| words(c))
            .collect();
        let totals_end = ((10 + 9600 + 1) * HOUR_MS).to_string();
        let clients_end = ((10 + 48 + 1) * HOUR_MS).to_string();
        assert_eq!(
            sent,
            [
                vec!["MULTI"],
                vec!["HINCRBY", "resolve:journal:totals:10", "refused:ip", "1"],
                vec!["HINCRBY", "resolve:journal:totals:10", "requests", "2"],
                vec!["PEXPIREAT", "resolve:journal:totals:10", &totals_end],
                vec![
                    "HINCRBY",
                    "resolve:journal:clients:10",
                    "refused:2001:db8::/64",
                    "1"
                ],
                vec!["PEXPIREAT", "resolve:journal:clients:10", &clients_end],
                vec!["EXEC"],
            ]
        );
        let nothing = Entry {
            hour: 1,
            totals: vec![],
            clients: vec![],
        };
        assert!(add_commands(&nothing, false).is_empty());
        // In a cluster, the hour in braces: both hashes in one slot, the transaction on one
        // node.
        let tagged = add_commands(&entry, true);
        let keys: Vec<String> = tagged[1..tagged.len() - 1]
            .iter()
            .map(|c| words(c)[1].clone())
            .collect();
        assert_eq!(keys[0], "resolve:journal:totals:{10}");
        assert_eq!(keys[3], "resolve:journal:clients:{10}");
        let slots: std::collections::BTreeSet<u16> = keys
            .iter()
            .map(|k| crate::core::slot::slot_of(k.as_bytes()))
            .collect();
        assert_eq!(slots.len(), 1);
    }

    #[test]
    fn client_fields_keep_the_colons_of_their_address() {
        let mut rows = Vec::new();
        client_rows(
            3,
            vec![
                ("admitted:2001:db8::/64".into(), 2),
                ("other:x".into(), 1),
                ("nocolon".into(), 1),
            ],
            &mut rows,
        );
        assert_eq!(
            rows,
            [Row::Client {
                hour: 3,
                client: "2001:db8::/64".into(),
                count: ClientCount::Admitted,
                n: 2
            }]
        );
    }

    #[test]
    fn only_hours_the_store_can_hold_are_asked_for() {
        assert_eq!(hours_held(0, u32::MAX, 20_000), 10_399..20_025);
        assert_eq!(hours_held(19_990, 20_001, 20_000), 19_990..20_001);
    }
}
