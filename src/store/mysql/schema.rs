//! The store's five tables: how they are created, their columns, how `check` finds them in
//! shape, and how the `events` table's `ts` column maps to milliseconds.

use mysql::Conn;
use mysql::prelude::Queryable;

use crate::store::mysql::errors::Failed;
use crate::store::mysql::settings::{MysqlSettings, TsUnit};

/// The server's time in milliseconds, in SQL.
pub(crate) const NOW_MS: &str = "CAST(ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000) AS UNSIGNED)";

pub(crate) fn ts_to_ms(unit: TsUnit, ts: i64) -> u64 {
    let ts = u64::try_from(ts).unwrap_or(0);
    match unit {
        TsUnit::Millis => ts,
        TsUnit::Seconds => ts.saturating_mul(1000),
    }
}

pub(crate) fn ms_to_ts(unit: TsUnit, ms: u64) -> i64 {
    let v = match unit {
        TsUnit::Millis => ms,
        TsUnit::Seconds => ms / 1000,
    };
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The SQL that creates the tables: counters, events, cache, journal, notes.
pub fn create_tables_sql(s: &MysqlSettings) -> [String; 5] {
    let ts_comment = match s.events_ts {
        TsUnit::Millis => "milliseconds since 1970",
        TsUnit::Seconds => "seconds since 1970",
    };
    [
        format!(
            "CREATE TABLE IF NOT EXISTS `{}` (\
             rkey VARCHAR(191) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY, \
             start_ms BIGINT UNSIGNED NOT NULL, \
             window_ms BIGINT UNSIGNED NOT NULL, \
             count INT UNSIGNED NOT NULL, \
             expires_ms BIGINT UNSIGNED NOT NULL, \
             KEY expires (expires_ms)) ENGINE=InnoDB",
            s.counter_table
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS `{}` (\
             id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, \
             rkey VARCHAR(191) NOT NULL, \
             ts BIGINT NOT NULL COMMENT '{ts_comment}', \
             KEY rkey_ts (rkey, ts), KEY ts (ts)) ENGINE=InnoDB",
            s.events_table
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS `{}` (\
             ckey VARCHAR(191) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY, \
             expires_ms BIGINT UNSIGNED NOT NULL, \
             value BLOB NOT NULL, \
             KEY expires (expires_ms)) ENGINE=InnoDB",
            s.cache_table
        ),
        // The usage journal: per hour, the site's totals (kind `t`, client '') and each
        // client's admitted and refused counts (kind `c`, name `admitted` or `refused`).
        format!(
            "CREATE TABLE IF NOT EXISTS `{}` (\
             hour INT UNSIGNED NOT NULL COMMENT 'hours since 1970, UTC', \
             kind CHAR(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, \
             name VARBINARY(191) NOT NULL, \
             client VARBINARY(191) NOT NULL, \
             n BIGINT UNSIGNED NOT NULL, \
             PRIMARY KEY (hour, kind, name, client)) ENGINE=InnoDB",
            s.journal_table
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS `{}` (\
             id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, \
             at_ms BIGINT UNSIGNED NOT NULL, \
             note BLOB NOT NULL) ENGINE=InnoDB",
            s.notes_table
        ),
    ]
}

/// The columns each table must have, for `check`.
pub(crate) const COUNTER_COLUMNS: [&str; 5] =
    ["rkey", "start_ms", "window_ms", "count", "expires_ms"];
pub(crate) const EVENTS_COLUMNS: [&str; 2] = ["rkey", "ts"];
pub(crate) const CACHE_COLUMNS: [&str; 3] = ["ckey", "expires_ms", "value"];
pub(crate) const JOURNAL_COLUMNS: [&str; 5] = ["hour", "kind", "name", "client", "n"];
pub(crate) const NOTES_COLUMNS: [&str; 3] = ["id", "at_ms", "note"];

/// Checks every table exists with the columns the queries need, creating missing ones.
/// Returns what was done, for `check`.
pub(crate) fn check_tables(conn: &mut Conn, s: &MysqlSettings) -> Result<Vec<String>, Failed> {
    let mut report = Vec::new();
    let create = create_tables_sql(s);
    for (table, needed, sql) in [
        (&s.counter_table, &COUNTER_COLUMNS[..], &create[0]),
        (&s.events_table, &EVENTS_COLUMNS[..], &create[1]),
        (&s.cache_table, &CACHE_COLUMNS[..], &create[2]),
        (&s.journal_table, &JOURNAL_COLUMNS[..], &create[3]),
        (&s.notes_table, &NOTES_COLUMNS[..], &create[4]),
    ] {
        let typed: Vec<(String, String)> = conn.exec(
            "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
            (table.as_str(),),
        )?;
        let columns: Vec<String> = typed.iter().map(|(c, _)| c.clone()).collect();
        if columns.is_empty() {
            conn.query_drop(sql.as_str())?;
            report.push(format!("created table {table}"));
            continue;
        }
        let missing: Vec<&str> = needed
            .iter()
            .copied()
            .filter(|c| !columns.iter().any(|have| have.eq_ignore_ascii_case(c)))
            .collect();
        let ts_type = typed
            .iter()
            .find(|(c, _)| c.eq_ignore_ascii_case("ts"))
            .map(|(_, t)| t.to_ascii_lowercase());
        let ts_problem = match (*table == s.events_table, ts_type.as_deref(), s.events_ts) {
            (true, Some("bigint" | "decimal" | "double"), _) => None,
            (true, Some("int" | "mediumint"), TsUnit::Seconds) => None,
            (true, Some(t @ ("int" | "mediumint")), TsUnit::Millis) => Some(format!(
                "its ts column is {t}, too small for milliseconds: set store.events_ts to \"s\" if it holds Unix seconds"
            )),
            (true, Some(t), _) => Some(format!(
                "its ts column is {t}: resolve needs a number (Unix seconds or milliseconds)"
            )),
            _ => None,
        };
        if let Some(problem) = ts_problem {
            report.push(format!("WRONG SHAPE: table {table}: {problem}"));
        } else if missing.is_empty() {
            report.push(format!("table {table} has the columns it needs"));
        } else {
            report.push(format!(
                "WRONG SHAPE: table {table} lacks {}: rename it and let resolve create its own, or set another table name",
                missing.join(", ")
            ));
        }
    }
    Ok(report)
}
