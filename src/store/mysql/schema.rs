//! The store's five tables: how they are created, their columns and what `check` finds wrong
//! with them, and how the `events` table's `ts` column maps to milliseconds.

use crate::core::rule::{Algorithm, Rule};
use crate::store::mysql::client::{self, Conn};
use crate::store::mysql::errors::Failed;
use crate::store::mysql::settings::{MysqlSettings, TsUnit};
use crate::support::defaults;

/// Length of the `rkey` columns resolve creates: 191 characters, the longest a utf8mb4 column
/// can be and still be indexed whole in InnoDB's older row formats. Every key must fit.
pub const KEY_COLUMN_LEN: usize = 191;

/// The server's time in milliseconds, in SQL.
pub(crate) const NOW_MS: &str = "CAST(ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000) AS UNSIGNED)";

/// The server's time zone now, as seconds east of UTC: what `NOW()` adds to the time.
const OFFSET: &str = "TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())";

/// A time in milliseconds as a `ts` parameter: itself for `ms`; its second (rounded down) for
/// `s` and for `datetime`, which [`ts_sql`] writes as the server's local time.
pub(crate) fn ms_to_ts(unit: TsUnit, ms: u64) -> i64 {
    let v = match unit {
        TsUnit::Millis => ms,
        TsUnit::Seconds | TsUnit::DateTime => ms / 1000,
    };
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A `ts` as [`ts_read`] reads it, in milliseconds. A whole second counts until its end: a
/// request stamped second T was made before T + 1, so it is kept in the window until T + 1 +
/// the window, never leaving it early, and just as long as a PHP limiter's
/// `ts >= NOW() - INTERVAL window SECOND` counts it.
pub(crate) fn ts_to_ms(unit: TsUnit, ts: i64) -> u64 {
    let ts = u64::try_from(ts).unwrap_or(0);
    match unit {
        TsUnit::Millis => ts,
        TsUnit::Seconds | TsUnit::DateTime => ts.saturating_add(1).saturating_mul(1000),
    }
}

/// SQL for a `ts` value from `value`, an SQL expression of what [`ms_to_ts`] makes. A
/// `DATETIME` is the server's local time, as `NOW()` writes it: the Unix second plus the time
/// zone's offset now, counted
/// from 1970-01-01 00:00:00 by calendar alone (no conversion that could fall into a daylight
/// saving gap), so that resolve and the PHP code do the same arithmetic on the same values.
pub(crate) fn ts_sql(unit: TsUnit, value: &str) -> String {
    match unit {
        TsUnit::Millis | TsUnit::Seconds => value.to_owned(),
        TsUnit::DateTime => {
            format!("TIMESTAMPADD(SECOND, {value} + {OFFSET}, TIMESTAMP'1970-01-01 00:00:00')")
        }
    }
}

/// SQL for the `ts` of the time `ms`: [`ts_sql`] of [`ms_to_ts`].
pub(crate) fn ts_at(unit: TsUnit, ms: u64) -> String {
    ts_sql(unit, &ms_to_ts(unit, ms).to_string())
}

/// SQL that reads `ts` as [`ts_to_ms`] takes it: the number itself, or a `DATETIME` back in
/// Unix seconds.
pub(crate) fn ts_read(unit: TsUnit) -> String {
    match unit {
        TsUnit::Millis | TsUnit::Seconds => "ts".to_owned(),
        TsUnit::DateTime => {
            format!("TIMESTAMPDIFF(SECOND, TIMESTAMP'1970-01-01 00:00:00', ts) - {OFFSET}")
        }
    }
}

/// What is wrong with an events table whose `ts` column has type `data_type` (lowercase), for
/// `unit`: None when they fit.
pub(crate) fn ts_problem(data_type: &str, unit: TsUnit) -> Option<String> {
    match (data_type, unit) {
        ("bigint" | "decimal" | "double", TsUnit::Millis | TsUnit::Seconds)
        | ("int" | "mediumint", TsUnit::Seconds)
        | ("datetime" | "timestamp", TsUnit::DateTime) => None,
        (t @ ("int" | "mediumint"), TsUnit::Millis) => Some(format!(
            "its ts column is {t}, too small for milliseconds: set store.events_ts to \"s\" if it holds Unix seconds"
        )),
        (t @ ("int" | "mediumint" | "bigint" | "decimal" | "double"), TsUnit::DateTime) => {
            Some(format!(
                "its ts column is {t}, a number: set store.events_ts to \"s\" if it holds Unix seconds (UNIX_TIMESTAMP()), or \"ms\" for milliseconds"
            ))
        }
        (t @ ("datetime" | "timestamp"), _) => Some(format!(
            "its ts column is {t}: set store.events_ts to \"datetime\" (rows written with NOW(), in the server's time zone)"
        )),
        (t, _) => Some(format!(
            "its ts column is {t}: resolve needs a number (Unix seconds or milliseconds) or a DATETIME"
        )),
    }
}

/// What is wrong with a table whose `rkey` column holds `len` characters, when `longest` is
/// the longest key resolve writes there (with the rule that writes it): None when it fits.
pub(crate) fn key_problem(table: &str, len: u64, longest: &(String, usize)) -> Option<String> {
    let (rule, needed) = longest;
    (len < *needed as u64).then(|| {
        format!(
            "its rkey column holds {len} characters, but rule {rule} writes keys of up to {needed} (see its key_template): shorten the template, or widen the column: ALTER TABLE `{table}` MODIFY rkey VARCHAR({KEY_COLUMN_LEN}) NOT NULL"
        )
    })
}

/// The SQL that creates the tables: counters, events, cache, journal, notes.
pub fn create_tables_sql(s: &MysqlSettings) -> [String; 5] {
    let ts = match s.events_ts {
        TsUnit::Millis => "BIGINT NOT NULL COMMENT 'milliseconds since 1970'",
        TsUnit::Seconds => "BIGINT NOT NULL COMMENT 'seconds since 1970'",
        TsUnit::DateTime => "DATETIME NOT NULL COMMENT 'NOW(), in the server time zone'",
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
             ts {ts}, \
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
             PRIMARY KEY (hour, kind, name, client)) ENGINE=MyISAM",
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

/// Checks every table exists with the columns the queries need, creating missing ones, and
/// that the events table's `ts` and the key columns fit what the rules write. Returns what was
/// done, for `check`.
pub(crate) fn check_tables(
    conn: &mut Conn,
    s: &MysqlSettings,
    needs: &KeyNeeds,
) -> Result<Vec<String>, Failed> {
    let mut report = Vec::new();
    let create = create_tables_sql(s);
    for (table, needed, sql) in [
        (&s.counter_table, &COUNTER_COLUMNS[..], &create[0]),
        (&s.events_table, &EVENTS_COLUMNS[..], &create[1]),
        (&s.cache_table, &CACHE_COLUMNS[..], &create[2]),
        (&s.journal_table, &JOURNAL_COLUMNS[..], &create[3]),
        (&s.notes_table, &NOTES_COLUMNS[..], &create[4]),
    ] {
        let mut typed: Vec<(String, String, Option<u64>)> = Vec::new();
        let found = conn.query(&format!(
            "SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH \
             FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = {}",
            client::text_lit(table)
        ))?;
        for r in found.into_iter().flat_map(|a| a.rows) {
            let [name, data_type, len] = client::columns(&r, "a column row of other columns")?;
            let text = |v| String::from_utf8_lossy(&client::bytes(v)).into_owned();
            let len = match len {
                None => None,
                Some(_) => Some(client::num(len)?),
            };
            typed.push((text(name), text(data_type), len));
        }
        if typed.is_empty() {
            conn.query(sql.as_str())?;
            report.push(format!("created table {table}"));
            continue;
        }
        let missing: Vec<&str> = needed
            .iter()
            .copied()
            .filter(|c| !typed.iter().any(|have| have.0.eq_ignore_ascii_case(c)))
            .collect();
        let column = |name: &str| typed.iter().find(|c| c.0.eq_ignore_ascii_case(name));
        let events = *table == s.events_table;
        let ts_problem = column("ts")
            .filter(|_| events)
            .and_then(|c| ts_problem(&c.1.to_ascii_lowercase(), s.events_ts));
        // The keys written to this table, and the room its key column has for them.
        let longest = if events {
            &needs.longest_sliding
        } else {
            &needs.longest
        };
        let key_problem = column("rkey")
            .and_then(|c| c.2)
            .zip(longest.as_ref())
            .and_then(|(len, longest)| key_problem(table, len, longest));
        // Every problem at once, so that one run of `check` names all there is to fix.
        let mut problems = Vec::new();
        if !missing.is_empty() {
            problems.push(format!(
                "it lacks {}: rename it and let resolve create its own, or set another table name",
                missing.join(", ")
            ));
        }
        problems.extend(ts_problem);
        problems.extend(key_problem);
        if problems.is_empty() {
            report.push(format!("table {table} has the columns it needs"));
        } else {
            report.push(format!(
                "WRONG SHAPE: table {table}: {}",
                problems.join("; and ")
            ));
        }
    }
    Ok(report)
}

/// What the rules ask of the tables: how long their keys get, which event rows are resolve's
/// to sweep, and how long those must be kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyNeeds {
    /// The longest key any rule writes (in the counter table), with that rule's name.
    pub longest: Option<(String, usize)>,
    /// The longest key a sliding rule writes (in the events table), with that rule's name.
    pub longest_sliding: Option<(String, usize)>,
    /// The longest sliding window, in milliseconds.
    pub longest_sliding_ms: u64,
    /// Some sliding rule writes keys of a default template (`resolve:RULE:…`).
    pub default_sliding: bool,
    /// What the keys of resolve's event rows start with: `resolve:` (the default templates and
    /// rules since removed) and each sliding rule's template's text before its identity.
    pub prefixes: Vec<String>,
}

impl KeyNeeds {
    pub(crate) fn of(rules: &[Rule]) -> KeyNeeds {
        let longest = |sliding_only: bool| {
            rules
                .iter()
                .filter(|r| !sliding_only || r.algorithm == Algorithm::Sliding)
                .map(|r| {
                    let name = r.name.as_str();
                    (name.to_owned(), r.key_template.longest_key(name))
                })
                .max_by_key(|(_, len)| *len)
        };
        let mut prefixes = vec!["resolve:".to_owned()];
        for r in rules.iter().filter(|r| r.algorithm == Algorithm::Sliding) {
            let prefix = r.key_template.prefix(r.name.as_str());
            if !prefix.is_empty() && !prefixes.iter().any(|p| prefix.starts_with(p.as_str())) {
                prefixes.retain(|p| !p.starts_with(prefix.as_str()));
                prefixes.push(prefix);
            }
        }
        KeyNeeds {
            longest: longest(false),
            longest_sliding: longest(true),
            longest_sliding_ms: rules
                .iter()
                .filter(|r| r.algorithm == Algorithm::Sliding)
                .map(Rule::window_ms)
                .max()
                .unwrap_or(0),
            default_sliding: rules
                .iter()
                .any(|r| r.algorithm == Algorithm::Sliding && default_keys(r)),
            prefixes,
        }
    }

    /// How old the rows of `rule`'s key may get before an admission of that key deletes them,
    /// in milliseconds. A default template's key (`resolve:RULE:…`) is counted by its rule
    /// alone: its window. A key a `key_template` makes may be counted by other programs (a PHP
    /// limiter, another site's resolve) over longer windows: the longest sliding window plus
    /// the grace, as sweeps keep them, so an admission deletes nothing a sweep would keep.
    pub(crate) fn keep_ms(&self, rule: &Rule, grace_ms: u64) -> u64 {
        let own = rule.window_ms();
        if default_keys(rule) {
            own
        } else {
            own.max(self.longest_sliding_ms.saturating_add(grace_ms))
        }
    }

    /// How long the events table keeps rows, for `check`: a table shared with another program
    /// loses that program's rows of these keys sooner than its own windows would.
    pub(crate) fn sweep_note(&self, table: &str, grace_ms: u64) -> String {
        let kept_secs = self
            .longest_sliding_ms
            .saturating_add(grace_ms)
            .div_ceil(1000);
        let mut note = format!(
            "rows of {table} are kept {kept_secs} s (the longest sliding window plus \
             store.sweep_grace_secs), then deleted by admissions of their key and by sweeps of \
             keys that start with {}, so a PHP limiter's longer window over those keys is \
             shortened to {kept_secs} s",
            self.prefixes.join(" or ")
        );
        if self.default_sliding {
            note.push_str(
                "; rows under keys of rules without a key_template (resolve:RULE:…) are deleted \
                 by admissions once out of their rule's window",
            );
        }
        note
    }
}

/// Whether `rule` writes the keys resolve makes when no `key_template` is given.
fn default_keys(rule: &Rule) -> bool {
    [
        defaults::KEY_TEMPLATE_IP,
        defaults::KEY_TEMPLATE_API_KEY,
        defaults::KEY_TEMPLATE_GLOBAL,
    ]
    .contains(&rule.key_template.as_str())
}

/// A `LIKE … ESCAPE '!'` pattern for the keys that start with `prefix`.
pub(crate) fn like_prefix(prefix: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '!' | '%' | '_') {
            pattern.push('!');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_seconds_count_until_their_end() {
        for unit in [TsUnit::Seconds, TsUnit::DateTime] {
            assert_eq!(ms_to_ts(unit, 1_700_000_000_999), 1_700_000_000);
            assert_eq!(ts_to_ms(unit, 1_700_000_000), 1_700_000_001_000);
        }
        assert_eq!(
            ms_to_ts(TsUnit::Millis, 1_700_000_000_999),
            1_700_000_000_999
        );
        assert_eq!(
            ts_to_ms(TsUnit::Millis, 1_700_000_000_999),
            1_700_000_000_999
        );
    }

    #[test]
    fn check_names_the_events_ts_that_fits_the_column() {
        assert_eq!(ts_problem("datetime", TsUnit::DateTime), None);
        assert_eq!(ts_problem("timestamp", TsUnit::DateTime), None);
        assert_eq!(ts_problem("int", TsUnit::Seconds), None);
        assert_eq!(ts_problem("bigint", TsUnit::Millis), None);
        for unit in [TsUnit::Millis, TsUnit::Seconds] {
            let p = ts_problem("datetime", unit).unwrap();
            assert!(p.contains("set store.events_ts to \"datetime\""), "{p}");
        }
        let p = ts_problem("int", TsUnit::DateTime).unwrap();
        assert!(p.contains("set store.events_ts to \"s\""), "{p}");
        let p = ts_problem("int", TsUnit::Millis).unwrap();
        assert!(p.contains("too small for milliseconds"), "{p}");
        let p = ts_problem("varchar", TsUnit::DateTime).unwrap();
        assert!(p.contains("a number") && p.contains("DATETIME"), "{p}");
    }

    #[test]
    fn admissions_keep_a_templates_rows_as_long_as_sweeps_do() {
        let rule = |name: &str, window_secs, template: &str| {
            let kind = crate::core::rule::KeyKind::Ip;
            Rule::new(name, kind, Algorithm::Sliding, 5, window_secs, template).unwrap()
        };
        let short = rule("short", 2, "resolve:{ip}");
        let own = rule("own", 10, "resolve:{rule}:{ip}");
        let long = rule("long", 60, "rl:{rule}:{ip}");
        let needs = KeyNeeds::of(&[short.clone(), own.clone(), long.clone()]);
        // A default template's key is its rule's alone; another may be counted over longer
        // windows, by other rules or programs.
        assert_eq!(needs.keep_ms(&own, 5_000), 10_000);
        assert_eq!(needs.keep_ms(&short, 5_000), 65_000);
        assert_eq!(needs.keep_ms(&short, 0), 60_000);
        assert_eq!(needs.keep_ms(&long, 0), 60_000);
        assert_eq!(needs.keep_ms(&rule("x", 120, "resolve:{ip}"), 0), 120_000);
        let note = needs.sweep_note("rate_events", 5_000);
        assert!(
            note.starts_with("rows of rate_events are kept 65 s"),
            "{note}"
        );
        assert!(note.contains("start with resolve: or rl:long:"), "{note}");
        assert!(note.ends_with("once out of their rule's window"), "{note}");
        let note = KeyNeeds::of(&[short]).sweep_note("rate_events", 0);
        assert!(note.ends_with("shortened to 2 s"), "{note}");
    }

    #[test]
    fn sweeps_look_for_each_sliding_template_once() {
        let rule = |name: &str, algorithm, template: &str| {
            Rule::new(
                name,
                crate::core::rule::KeyKind::Ip,
                algorithm,
                5,
                60,
                template,
            )
            .unwrap()
        };
        let needs = KeyNeeds::of(&[
            rule("ip", Algorithm::Sliding, "resolve:{rule}:{ip}"),
            rule("php", Algorithm::Sliding, "rate_lim:{ip}"),
            rule("fixed", Algorithm::Fixed, "fixed:{ip}"),
            Rule {
                window_secs: std::num::NonZeroU32::new(600).unwrap(),
                ..rule("again", Algorithm::Sliding, "resolve:{ip}")
            },
        ]);
        assert_eq!(needs.prefixes, ["resolve:", "rate_lim:"]);
        assert_eq!(needs.longest_sliding_ms, 600_000);
        assert_eq!(needs.longest_sliding, Some(("ip".to_owned(), 11 + 43)));
        assert_eq!(needs.longest, Some(("ip".to_owned(), 11 + 43)));
        assert_eq!(like_prefix("rate_limit:"), "rate!_limit:%");
        assert_eq!(like_prefix("a%b!"), "a!%b!!%");
        assert_eq!(
            key_problem("rate_events", 120, &("ip".to_owned(), 130)).unwrap(),
            "its rkey column holds 120 characters, but rule ip writes keys of up to 130 (see its key_template): shorten the template, or widen the column: ALTER TABLE `rate_events` MODIFY rkey VARCHAR(191) NOT NULL"
        );
        assert_eq!(
            key_problem("rate_events", 120, &("ip".to_owned(), 51)),
            None
        );
    }
}
