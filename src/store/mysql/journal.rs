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
//! twice or lost.
//!
//! Notes are rows of `store.notes_table` (`rate_notes`); each insert deletes those past the
//! newest [`KEEP_NOTES`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use mysql::Conn;
use mysql::prelude::Queryable;

use crate::core::journal::{ClientCount, Entry, Expiry, KEEP_NOTES, Note, Row};
use crate::core::limiter::{self, Counter, State};
use crate::core::rule::Algorithm;
use crate::store::Check;
use crate::store::mysql::errors::Failed;
use crate::store::mysql::schema::{NOW_MS, ms_to_ts, ts_param, ts_read, ts_to_ms};
use crate::store::mysql::settings::MysqlSettings;

/// `X'…'`: any bytes as an SQL literal, with nothing to escape.
fn hex(bytes: &[u8], out: &mut String) {
    out.push_str("X'");
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out.push('\'');
}

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
    if let Some((client, count)) = &entry.client {
        *rows.entry(("c", count.name(), client)).or_default() += 1;
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

/// A row as the table holds it: hour, kind, name, client, n.
type TableRow = (u32, String, Vec<u8>, Vec<u8>, u64);

/// The journal's rows of the hours `from..to`.
pub(crate) fn rows(conn: &mut Conn, table: &str, from: u32, to: u32) -> Result<Vec<Row>, Failed> {
    let found: Vec<TableRow> = conn.exec(
        format!("SELECT hour, kind, name, client, n FROM `{table}` WHERE hour >= ? AND hour < ?"),
        (from, to),
    )?;
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap_or_else(|e| lossy(e.as_bytes()));
    Ok(found
        .into_iter()
        .filter_map(|(hour, kind, name, client, n)| match kind.as_str() {
            "t" => Some(Row::Total {
                hour,
                name: text(name),
                count: n,
            }),
            "c" => Some(Row::Client {
                hour,
                client: text(client),
                count: ClientCount::from_name(&text(name))?,
                n,
            }),
            // Written by a later version: not ours to read.
            _ => None,
        })
        .collect())
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Keeps `note`, and only the newest [`KEEP_NOTES`].
pub(crate) fn note(conn: &mut Conn, table: &str, note: &Note) -> Result<(), Failed> {
    conn.exec_drop(
        format!("INSERT INTO `{table}` (at_ms, note) VALUES (?, ?)"),
        (note.at_ms, note.text.as_bytes()),
    )?;
    conn.exec_drop(
        format!(
            "DELETE FROM `{table}` WHERE id <= (SELECT id FROM \
             (SELECT id FROM `{table}` ORDER BY id DESC LIMIT 1 OFFSET {KEEP_NOTES}) AS older)"
        ),
        (),
    )?;
    Ok(())
}

/// The kept notes, newest first.
pub(crate) fn notes(conn: &mut Conn, table: &str) -> Result<Vec<Note>, Failed> {
    let found: Vec<(u64, Vec<u8>)> = conn.exec(
        format!("SELECT at_ms, note FROM `{table}` ORDER BY id DESC LIMIT {KEEP_NOTES}"),
        (),
    )?;
    Ok(found
        .into_iter()
        .map(|(at_ms, text)| Note {
            at_ms,
            text: String::from_utf8(text).unwrap_or_else(|e| lossy(e.as_bytes())),
        })
        .collect())
}

/// Folds the shards of the totals of hours before `before` into one row per total, at most
/// `batch` shard rows in one transaction: the shard rows are read under their locks, their
/// sums added to the folded rows and the shard rows deleted, all or nothing. Returns the shard
/// rows folded.
pub(crate) fn fold(conn: &mut Conn, table: &str, before: u32, batch: u32) -> Result<u64, Failed> {
    let mut tx = conn.start_transaction(mysql::TxOpts::default())?;
    let found: Vec<(u32, Vec<u8>, Vec<u8>, u64)> = tx.exec(
        format!(
            "SELECT hour, name, client, n FROM `{table}` WHERE hour < ? AND kind = 't' \
             AND client <> '' ORDER BY hour, kind, name, client LIMIT {batch} FOR UPDATE"
        ),
        (before,),
    )?;
    if found.is_empty() {
        tx.rollback()?;
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
    sql.push_str(" ON DUPLICATE KEY UPDATE n = n + VALUES(n)");
    tx.query_drop(sql)?;
    let mut delete =
        format!("DELETE FROM `{table}` WHERE kind = 't' AND (hour, name, client) IN (");
    for (i, (hour, name, client, _)) in found.iter().enumerate() {
        if i > 0 {
            delete.push_str(", ");
        }
        let _ = write!(delete, "({hour}, ");
        hex(name, &mut delete);
        delete.push_str(", ");
        hex(client, &mut delete);
        delete.push(')');
    }
    delete.push(')');
    tx.query_drop(delete)?;
    tx.commit()?;
    Ok(found.len() as u64)
}

/// What a sweep deletes from the journal at `now_ms`: statements of at most `batch` rows, each
/// with its bound.
pub(crate) fn sweep_jobs(table: &str, now_ms: u64, batch: u32) -> [(String, i64); 2] {
    let expiry = Expiry::at(now_ms);
    [
        (
            format!("DELETE FROM `{table}` WHERE hour < ? AND kind <> 't' LIMIT {batch}"),
            i64::from(expiry.clients_before),
        ),
        (
            format!("DELETE FROM `{table}` WHERE hour < ? LIMIT {batch}"),
            i64::from(expiry.totals_before),
        ),
    ]
}

/// How many requests each check's key counts now, read as a decision reads them (the counter
/// row of a fixed window, the event rows of a sliding one) without writing anything.
pub(crate) fn used(
    conn: &mut Conn,
    s: &MysqlSettings,
    checks: &[Check<'_>],
) -> Result<Vec<u32>, Failed> {
    let now_ms: u64 = conn.query_first(format!("SELECT {NOW_MS}"))?.unwrap_or(0);
    let fixed: Vec<&str> = checks
        .iter()
        .filter(|c| c.rule.algorithm == Algorithm::Fixed)
        .map(|c| c.key.as_str())
        .collect();
    let counters: Vec<(String, u64, u64, u32)> = if fixed.is_empty() {
        Vec::new()
    } else {
        conn.exec(
            format!(
                "SELECT rkey, start_ms, window_ms, count FROM `{}` WHERE rkey IN ({})",
                s.counter_table,
                vec!["?"; fixed.len()].join(", ")
            ),
            fixed,
        )?
    };
    let mut out = Vec::with_capacity(checks.len());
    for c in checks {
        let state = match c.rule.algorithm {
            Algorithm::Fixed => State::Fixed(
                counters
                    .iter()
                    .find(|r| r.0 == c.key && r.1 > 0)
                    .map(|r| Counter {
                        start_ms: r.1,
                        window_ms: r.2,
                        count: r.3,
                    }),
            ),
            Algorithm::Sliding => {
                let since = now_ms.saturating_sub(c.rule.window_ms());
                // As the decision reads them: `ts` in its unit (a DATETIME as the server's
                // local time), a bound that may take in a second too many for the limiter to
                // leave out.
                let (ts, read) = (ts_param(s.events_ts), ts_read(s.events_ts));
                let times: Vec<i64> = conn.exec(
                    format!(
                        "SELECT {read} FROM `{}` WHERE rkey = ? AND ts >= {ts}",
                        s.events_table
                    ),
                    (c.key.as_str(), ms_to_ts(s.events_ts, since)),
                )?;
                State::Sliding(
                    times
                        .into_iter()
                        .map(|t| ts_to_ms(s.events_ts, t))
                        .collect(),
                )
            }
        };
        out.push(limiter::used(c.rule, &state, now_ms));
    }
    Ok(out)
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
             (7, 'c', X'72656675736564', X'3230332e302e3131332e37', 1), \
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
