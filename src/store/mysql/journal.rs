//! The MySQL store's usage journal, notes and read-only counts.
//!
//! The journal is one table (`store.journal_table`, `rate_journal`): a row per hour and
//! total (`kind` `t`) or per hour, client and count (`kind` `c`, name `admitted` or
//! `refused`), with its count `n`. A request's entry is ONE statement in one round trip: a
//! multi-row `INSERT … ON DUPLICATE KEY UPDATE n = n + VALUES(n)`, its rows in key order, sent
//! as text with hexadecimal literals (no statement to prepare, nothing to escape). The
//! statement is atomic and takes its rows' locks in the same order in every process, so
//! concurrent requests add exactly; a deadlock rolls the statement back and it is tried again.
//! Sweeps delete client rows and totals past [`Expiry`], 1000 rows per statement.
//!
//! Every request adds to its hour's totals, so those rows are the hottest of the store: a
//! process adds to one of [`SHARDS`] rows of each total (its `client` column holds the shard,
//! `s0` to `s15`, chosen at random per process), so concurrent requests rarely wait for one
//! another's row lock. Readers add the shards up; sweeps fold the shards of finished hours
//! into one row per total (`client` empty), under the rows' locks, so nothing is counted
//! twice or lost. A client's own counts are spread the same way (name `refused#s3`), as one
//! client hammering the site is counted by many processes at once; they are kept 48 hours and
//! are not folded.
//!
//! Notes are rows of `store.notes_table` (`rate_notes`); each insert deletes those past the
//! newest [`KEEP_NOTES`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::core::journal::{ClientCount, Entry, Expiry, KEEP_NOTES, Note, Row};
use crate::store::mysql::client::{self, Conn, hex};
use crate::store::mysql::errors::Failed;

/// Rows each hour's total is spread over.
pub(crate) const SHARDS: u64 = 16;

/// The shard this process adds its totals to.
pub(crate) fn shard() -> String {
    static SHARD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SHARD
        .get_or_init(|| format!("s{}", crate::random::u64() % SHARDS))
        .clone()
}

/// The one statement that adds `entry` to `table`; None when the entry adds nothing.
pub(crate) fn add_sql(table: &str, entry: &Entry) -> Option<String> {
    add_sql_in(table, entry, &shard())
}

/// The same, adding the totals to shard `shard`.
pub(crate) fn add_sql_in(table: &str, entry: &Entry, shard: &str) -> Option<String> {
    // (kind, name, client) -> n, in key order: every process locks the rows in one order.
    let mut rows: BTreeMap<(&str, &str, &str), u64> = BTreeMap::new();
    for name in &entry.totals {
        *rows.entry(("t", name, shard)).or_default() += 1;
    }
    // A client's count goes to the process's shard too (`refused#s3`): a client hammering
    // the site is counted by many processes at once, all on its one row otherwise.
    let sharded = entry
        .client
        .as_ref()
        .map(|(_, count)| format!("{}#{shard}", count.name()));
    if let (Some((client, _)), Some(name)) = (&entry.client, &sharded) {
        *rows.entry(("c", name, client)).or_default() += 1;
    }
    if rows.is_empty() {
        return None;
    }
    let mut sql = format!("INSERT INTO `{table}` (hour, kind, name, client, n) VALUES ");
    for (i, ((kind, name, client), n)) in rows.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        let _ = write!(sql, "({}, '{kind}', ", entry.hour);
        hex(name.as_bytes(), &mut sql);
        sql.push_str(", ");
        hex(client.as_bytes(), &mut sql);
        let _ = write!(sql, ", {n})");
    }
    sql.push_str(" ON DUPLICATE KEY UPDATE n = n + VALUES(n)");
    Some(sql)
}

/// The journal's rows of the hours `from..to`.
pub(crate) fn rows(conn: &mut Conn, table: &str, from: u32, to: u32) -> Result<Vec<Row>, Failed> {
    let found = conn.query(&format!(
        "SELECT hour, kind, name, client, n FROM `{table}` WHERE hour >= {from} AND hour < {to}"
    ))?;
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap_or_else(|e| lossy(e.as_bytes()));
    let mut out = Vec::new();
    for r in found.into_iter().flat_map(|a| a.rows) {
        let [hour, kind, name, who, n] = r.as_slice() else {
            return Err(Failed::Db(client::Error::Protocol(
                "a journal row of other columns",
            )));
        };
        let (hour, n): (u32, u64) = (client::num(hour)?, client::num(n)?);
        let (name, who) = (text(client::bytes(name)), text(client::bytes(who)));
        match client::bytes(kind).as_slice() {
            b"t" => out.push(Row::Total {
                hour,
                name,
                count: n,
            }),
            b"c" => {
                let unsharded = name.split_once('#').map_or(name.as_str(), |(n, _)| n);
                if let Some(count) = ClientCount::from_name(unsharded) {
                    out.push(Row::Client {
                        hour,
                        client: who,
                        count,
                        n,
                    });
                }
            }
            // Written by a later version: not ours to read.
            _ => {}
        }
    }
    Ok(out)
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Keeps `note`, and only the newest [`KEEP_NOTES`].
pub(crate) fn note(conn: &mut Conn, table: &str, note: &Note) -> Result<(), Failed> {
    let mut sql = format!(
        "INSERT INTO `{table}` (at_ms, note) VALUES ({}, ",
        note.at_ms
    );
    hex(note.text.as_bytes(), &mut sql);
    let _ = write!(
        sql,
        "); DELETE FROM `{table}` WHERE id <= (SELECT id FROM \
         (SELECT id FROM `{table}` ORDER BY id DESC LIMIT 1 OFFSET {KEEP_NOTES}) AS older)"
    );
    conn.query(&sql)?;
    Ok(())
}

/// The kept notes, newest first.
pub(crate) fn notes(conn: &mut Conn, table: &str) -> Result<Vec<Note>, Failed> {
    let found = conn.query(&format!(
        "SELECT at_ms, note FROM `{table}` ORDER BY id DESC LIMIT {KEEP_NOTES}"
    ))?;
    let mut out = Vec::new();
    for r in found.into_iter().flat_map(|a| a.rows) {
        let [at_ms, text] = r.as_slice() else {
            return Err(Failed::Db(client::Error::Protocol(
                "a note row of other columns",
            )));
        };
        out.push(Note {
            at_ms: client::num(at_ms)?,
            text: String::from_utf8(client::bytes(text)).unwrap_or_else(|e| lossy(e.as_bytes())),
        });
    }
    Ok(out)
}

/// Folds the shards of the totals of hours before `before` into one row per total, at most
/// `batch` shard rows in one transaction: the shard rows are read under their locks, their
/// sums added to the folded rows and the shard rows deleted, all or nothing. Returns the shard
/// rows folded.
pub(crate) fn fold(conn: &mut Conn, table: &str, before: u32, batch: u32) -> Result<u64, Failed> {
    let answers = conn.query(&format!(
        "START TRANSACTION; SELECT hour, name, client, n FROM `{table}` WHERE hour < {before} \
         AND kind = 't' AND client <> '' ORDER BY hour, kind, name, client LIMIT {batch} FOR UPDATE"
    ));
    let answers = match answers {
        Ok(a) => a,
        Err(e) => {
            let _ = conn.query("ROLLBACK");
            return Err(e.into());
        }
    };
    let mut found: Vec<(u32, Vec<u8>, Vec<u8>, u64)> = Vec::new();
    for r in answers.into_iter().flat_map(|a| a.rows) {
        let [hour, name, who, n] = r.as_slice() else {
            let _ = conn.query("ROLLBACK");
            return Err(Failed::Db(client::Error::Protocol(
                "a journal row of other columns",
            )));
        };
        found.push((
            client::num(hour)?,
            client::bytes(name),
            client::bytes(who),
            client::num(n)?,
        ));
    }
    if found.is_empty() {
        conn.query("ROLLBACK")?;
        return Ok(0);
    }
    let mut sums: BTreeMap<(u32, &[u8]), u64> = BTreeMap::new();
    for (hour, name, _, n) in &found {
        *sums.entry((*hour, name.as_slice())).or_default() += n;
    }
    let mut sql = format!("INSERT INTO `{table}` (hour, kind, name, client, n) VALUES ");
    for (i, ((hour, name), n)) in sums.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        let _ = write!(sql, "({hour}, 't', ");
        hex(name, &mut sql);
        let _ = write!(sql, ", '', {n})");
    }
    sql.push_str(" ON DUPLICATE KEY UPDATE n = n + VALUES(n); ");
    let _ = write!(
        sql,
        "DELETE FROM `{table}` WHERE kind = 't' AND (hour, name, client) IN ("
    );
    for (i, (hour, name, who, _)) in found.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        let _ = write!(sql, "({hour}, ");
        hex(name, &mut sql);
        sql.push_str(", ");
        hex(who, &mut sql);
        sql.push(')');
    }
    sql.push_str("); COMMIT");
    if let Err(e) = conn.query(&sql) {
        let _ = conn.query("ROLLBACK");
        return Err(e.into());
    }
    Ok(found.len() as u64)
}

/// What a sweep deletes from the journal at `now_ms`: statements of at most `batch` rows, each
/// with its bound.
pub(crate) fn sweep_jobs(table: &str, now_ms: u64, batch: u32) -> [String; 2] {
    let expiry = Expiry::at(now_ms);
    [
        format!(
            "DELETE FROM `{table}` WHERE hour < {} AND kind <> 't' LIMIT {batch}",
            expiry.clients_before
        ),
        format!(
            "DELETE FROM `{table}` WHERE hour < {} LIMIT {batch}",
            expiry.totals_before
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_keeps_one_shard() {
        let shard = shard();
        assert_eq!(shard, super::shard());
        let n: u64 = shard.strip_prefix('s').unwrap().parse().unwrap();
        assert!(n < SHARDS);
    }

    #[test]
    fn an_entry_is_one_statement_with_its_rows_in_key_order() {
        let entry = Entry {
            hour: 7,
            totals: vec!["requests".into(), "refused:ip".into(), "requests".into()],
            client: Some(("203.0.113.7".into(), ClientCount::Refused)),
        };
        // Totals go to the process's shard (`s3` = X'7333' here).
        assert_eq!(
            add_sql_in("j", &entry, "s3").unwrap(),
            "INSERT INTO `j` (hour, kind, name, client, n) VALUES \
             (7, 'c', X'72656675736564237333', X'3230332e302e3131332e37', 1), \
             (7, 't', X'726566757365643a6970', X'7333', 1), \
             (7, 't', X'7265717565737473', X'7333', 2) \
             ON DUPLICATE KEY UPDATE n = n + VALUES(n)"
        );
        let nothing = Entry {
            hour: 7,
            totals: vec![],
            client: None,
        };
        assert_eq!(add_sql("j", &nothing), None);
    }
}
