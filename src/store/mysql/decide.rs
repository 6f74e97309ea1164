//! A decision in the MySQL store: a plain read that may refuse on its own, and for a request
//! that read as admitted, the same read under the keys' row locks, the limiter's decision and
//! its writes: one round trip for a refusal, three for an admission.

use std::fmt::Write as _;

use crate::core::decision::Decision;
use crate::core::limiter::{self, Counter, State, Write};
use crate::core::rule::{Algorithm, Rule};
use crate::store::Check;
use crate::store::mysql::client::{self, Answer, Conn};
use crate::store::mysql::errors::{Deadline, Failed};
use crate::store::mysql::schema::{NOW_MS, ms_to_ts, ts_param, ts_read, ts_to_ms};
use crate::store::mysql::settings::MysqlSettings;

/// Statements that read what a decision needs, answered in this order: the server's time kept
/// in `@now` (an OK), that time, the fixed and sliding keys' counter rows, then each sliding
/// check's times in the order of `checks`. Sliding times are read from a bound a second
/// earlier than the window when `ts` holds seconds: the limiter counts only those within.
pub(crate) fn read_sql(s: &MysqlSettings, checks: &[Check<'_>]) -> String {
    let mut sql = format!("SET @now := {NOW_MS}; SELECT @now; ");
    let _ = write!(
        sql,
        "SELECT rkey, start_ms, window_ms, count FROM `{}` WHERE rkey IN (",
        s.counter_table
    );
    for (i, c) in checks.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        client::text(&c.key, &mut sql);
    }
    sql.push(')');
    let read = ts_read(s.events_ts);
    for c in checks
        .iter()
        .filter(|c| c.rule.algorithm == Algorithm::Sliding)
    {
        let since = format!("CAST(@now AS SIGNED) - {}", c.rule.window_ms());
        let bound = match s.events_ts {
            crate::store::mysql::settings::TsUnit::Millis => since,
            _ => format!("({since}) DIV 1000"),
        };
        let _ = write!(
            sql,
            "; SELECT {read} FROM `{}` WHERE rkey = ",
            s.events_table
        );
        client::text(&c.key, &mut sql);
        let _ = write!(
            sql,
            " AND ts >= {} ORDER BY ts",
            ts_param(s.events_ts).replace('?', &bound)
        );
    }
    sql
}

/// The server's time and each check's state from the answers to [`read_sql`].
pub(crate) fn states(
    s: &MysqlSettings,
    checks: &[Check<'_>],
    answers: &[Answer],
) -> Result<(u64, Vec<State>), Failed> {
    let short = || Failed::Db(client::Error::Protocol("fewer answers than statements"));
    let now_ms: u64 = client::num(
        answers
            .get(1)
            .and_then(|a| a.rows.first())
            .and_then(|r| r.first())
            .ok_or_else(short)?,
    )?;
    let mut counters = Vec::new();
    for r in &answers.get(2).ok_or_else(short)?.rows {
        let [key, start, window, count] = r.as_slice() else {
            return Err(short());
        };
        counters.push((
            client::bytes(key),
            Counter {
                start_ms: client::num(start)?,
                window_ms: client::num(window)?,
                count: client::num(count)?,
            },
        ));
    }
    let mut sliding = answers.iter().skip(3);
    let mut states = Vec::with_capacity(checks.len());
    for c in checks {
        states.push(match c.rule.algorithm {
            Algorithm::Fixed => State::Fixed(
                counters
                    .iter()
                    .find(|(k, counter)| k == c.key.as_bytes() && counter.start_ms > 0)
                    .map(|(_, counter)| *counter),
            ),
            Algorithm::Sliding => {
                let times = sliding.next().ok_or_else(short)?;
                let mut ms = Vec::with_capacity(times.rows.len());
                for r in &times.rows {
                    let t: i64 = client::num(r.first().ok_or_else(short)?)?;
                    ms.push(ts_to_ms(s.events_ts, t));
                }
                State::Sliding(ms)
            }
        });
    }
    Ok((now_ms, states))
}

/// Decides `checks` (not empty), their keys' rows locked in key order for an admission.
pub(crate) fn decide(
    conn: &mut Conn,
    s: &MysqlSettings,
    deadline: &Deadline,
    checks: &[Check<'_>],
) -> Result<Decision, Failed> {
    let rules: Vec<&Rule> = checks.iter().map(|c| c.rule).collect();
    let read = read_sql(s, checks);
    let (now_ms, read_states) = states(s, checks, &conn.query(&read)?)?;
    let first = limiter::decide(&rules, &read_states, now_ms);
    if !first.decision.is_admit() {
        return Ok(first.decision);
    }

    deadline.check()?;
    let mut keys: Vec<&str> = checks.iter().map(|c| c.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    // READ COMMITTED, and row-lock waits bounded by the read timeout; then every key's row
    // locked (created when missing) in key order, then the read again under the locks.
    let mut sql = format!(
        "SET SESSION innodb_lock_wait_timeout = {}; \
         SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION; \
         INSERT INTO `{}` (rkey, start_ms, window_ms, count, expires_ms) VALUES ",
        s.read_timeout.as_secs().max(1),
        s.counter_table
    );
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        client::text(k, &mut sql);
        sql.push_str(", 0, 0, 0, 0)");
    }
    sql.push_str(" ON DUPLICATE KEY UPDATE count = count; ");
    sql.push_str(&read);
    let answers = in_transaction(conn, &sql)?;
    let (now_ms, locked_states) = states(s, checks, answers.get(4..).unwrap_or_default())?;
    let outcome = limiter::decide(&rules, &locked_states, now_ms);
    if let Err(e) = deadline.check() {
        let _ = conn.query("ROLLBACK");
        return Err(e);
    }
    if !outcome.decision.is_admit() {
        // A refused request writes nothing: not even the empty row that locked a new key.
        conn.query("ROLLBACK")?;
        return Ok(outcome.decision);
    }
    let mut sql = String::new();
    for ((check, write), status) in checks
        .iter()
        .zip(&outcome.writes)
        .zip(outcome.decision.statuses())
    {
        match write {
            Write::Keep => {}
            Write::Counter(c) => {
                update_counter(s, &check.key, c.start_ms, c.window_ms, c.count, &mut sql);
            }
            Write::Append => {
                let window = check.rule.window_ms();
                let ts = |ms: u64| {
                    ts_param(s.events_ts).replace('?', &ms_to_ts(s.events_ts, ms).to_string())
                };
                let _ = write!(sql, "INSERT INTO `{}` (rkey, ts) VALUES (", s.events_table);
                client::text(&check.key, &mut sql);
                let _ = write!(
                    sql,
                    ", {}); DELETE FROM `{}` WHERE rkey = ",
                    ts(now_ms),
                    s.events_table
                );
                client::text(&check.key, &mut sql);
                let _ = write!(sql, " AND ts < {}; ", ts(now_ms.saturating_sub(window)));
                // The lock row remembers when the key was last used, for sweeps.
                let used = check.rule.limit.get() - status.remaining;
                update_counter(s, &check.key, now_ms, window, used, &mut sql);
            }
        }
    }
    sql.push_str("COMMIT");
    in_transaction(conn, &sql)?;
    Ok(outcome.decision)
}

fn update_counter(
    s: &MysqlSettings,
    key: &str,
    start_ms: u64,
    window_ms: u64,
    count: u32,
    sql: &mut String,
) {
    let _ = write!(
        sql,
        "UPDATE `{}` SET start_ms = {start_ms}, window_ms = {window_ms}, count = {count}, \
         expires_ms = {} WHERE rkey = ",
        s.counter_table,
        start_ms.saturating_add(window_ms)
    );
    client::text(key, sql);
    sql.push_str("; ");
}

/// Runs statements of an open transaction; on an error the transaction is rolled back (a lock
/// wait timeout ends only its statement) before the error is returned.
fn in_transaction(conn: &mut Conn, sql: &str) -> Result<Vec<Answer>, Failed> {
    conn.query(sql).map_err(|e| {
        if matches!(e, client::Error::Server(_)) {
            let _ = conn.query("ROLLBACK");
        }
        Failed::Db(e)
    })
}
