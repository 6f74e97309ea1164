//! The store's three tables: how they are created, their columns, and how the `events` table's
//! `ts` column maps to milliseconds.

use crate::store::mysql::settings::{MysqlSettings, TsUnit};

/// Length of the `rkey` columns resolve creates: 191 characters, the longest a utf8mb4 column
/// can be and still be indexed whole in InnoDB's older row formats. Every key must fit.
pub const KEY_COLUMN_LEN: usize = 191;

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

/// The SQL that creates the tables.
pub fn create_tables_sql(s: &MysqlSettings) -> [String; 3] {
    let ts_comment = match s.events_ts {
        TsUnit::Millis => "milliseconds since 1970",
        TsUnit::Seconds => "seconds since 1970",
    };
    [
        format!(
            "CREATE TABLE IF NOT EXISTS `{}` (\
             rkey VARCHAR({KEY_COLUMN_LEN}) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY, \
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
             rkey VARCHAR({KEY_COLUMN_LEN}) NOT NULL, \
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
    ]
}

/// The columns each table must have, for `check`.
pub(crate) const COUNTER_COLUMNS: [&str; 5] =
    ["rkey", "start_ms", "window_ms", "count", "expires_ms"];
pub(crate) const EVENTS_COLUMNS: [&str; 2] = ["rkey", "ts"];
pub(crate) const CACHE_COLUMNS: [&str; 3] = ["ckey", "expires_ms", "value"];
