//! A decision in the MySQL store: a plain read that may refuse on its own, and for a request
//! that read as admitted, the same read under the keys' row locks, the limiter's decision and
//! its writes: one round trip for a refusal, three for an admission. Both decide the client's
//! own checks first (`limiter::decide_own_first`): a client over its own limit is refused by
//! them alone, from the plain read, which locks no row and waits on none.

use std::fmt::Write as _;

use crate::core::decision::Decision;
use crate::core::limiter::{self, Counter, State, Write};
use crate::core::rule::{Algorithm, Rule};
use crate::store::Check;
use crate::store::mysql::client::{self, Answer, Conn};
use crate::store::mysql::errors::{Deadline, Failed};
use crate::store::mysql::schema::{NOW_MS, ts_at, ts_read, ts_sql, ts_to_ms};
use crate::store::mysql::settings::{MysqlSettings, TsUnit};

/// One statement that reads what a decision needs, one row per fact, tagged in its first
/// column: `0` the server's time (always there), `1` a key's counter row, `2 + i` a time of
/// the `i`-th sliding check. One statement, so one time (`NOW(3)` is fixed within it) for
/// the rows and the sliding windows' bounds alike, and the server parses and plans once.
/// Sliding times are read from a bound a second earlier where `ts` holds seconds: the limiter
/// counts only those within.
pub(crate) fn read_sql(s: &MysqlSettings, checks: &[Check<'_>]) -> String {
    let mut sql = format!(
        "SELECT 0, NULL, {NOW_MS}, 0, 0 UNION ALL \
         SELECT 1, rkey, start_ms, window_ms, count FROM `{}` WHERE rkey IN (",
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
    for (i, c) in checks
        .iter()
        .filter(|c| c.rule.algorithm == Algorithm::Sliding)
        .enumerate()
    {
        let since = format!("CAST({NOW_MS} AS SIGNED) - {}", c.rule.window_ms());
        let bound = match s.events_ts {
            TsUnit::Millis => since,
            TsUnit::Seconds | TsUnit::DateTime => format!("({since}) DIV 1000"),
        };
        let _ = write!(
            sql,
            " UNION ALL SELECT {}, NULL, {read}, 0, 0 FROM `{}` WHERE rkey = ",
            i + 2,
            s.events_table
        );
        client::text(&c.key, &mut sql);
        let _ = write!(sql, " AND ts >= {}", ts_sql(s.events_ts, &bound));
    }
    sql
}

/// The server's time and each check's state from the answer to [`read_sql`].
pub(crate) fn states(
    s: &MysqlSettings,
    checks: &[Check<'_>],
    answer: Option<&Answer>,
) -> Result<(u64, Vec<State>), Failed> {
    let odd = || Failed::Db(client::Error::Protocol("a decision's read of other rows"));
    let mut now_ms = None;
    let mut counters = Vec::new();
    let mut times: Vec<Vec<u64>> = Vec::new();
    for r in &answer.ok_or_else(odd)?.rows {
        let [tag, key, a, b, c] = client::columns(r, "a decision's read of other rows")?;
        match client::num::<usize>(tag)? {
            0 => now_ms = Some(client::num(a)?),
            1 => counters.push((
                client::bytes(key),
                Counter {
                    start_ms: client::num(a)?,
                    window_ms: client::num(b)?,
                    count: client::num(c)?,
                },
            )),
            n => {
                let i = n - 2;
                if times.len() <= i {
                    times.resize(i + 1, Vec::new());
                }
                times[i].push(ts_to_ms(s.events_ts, client::num(a)?));
            }
        }
    }
    let now_ms = now_ms.ok_or_else(odd)?;
    let mut sliding = times.into_iter();
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
                let mut ms = sliding.next().unwrap_or_default();
                ms.sort_unstable();
                State::Sliding(ms)
            }
        });
    }
    Ok((now_ms, states))
}

/// Decides `checks` (not empty), the first `own` the client's own, their keys' rows locked in
/// key order for an admission. An admission deletes the rows of each sliding check's key older
/// than its `keep_ms` (at least its window).
pub(crate) fn decide(
    conn: &mut Conn,
    s: &MysqlSettings,
    deadline: &Deadline,
    (checks, own, size): (&[Check<'_>], usize, Option<u64>),
    keep_ms: &[u64],
) -> Result<Decision, Failed> {
    let rules: Vec<&Rule> = checks.iter().map(|c| c.rule).collect();
    let read = read_sql(s, checks);
    let (now_ms, read_states) = states(s, checks, conn.query(&read)?.first())?;
    let first = limiter::decide_sized(&rules, &read_states, own, size, now_ms);
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
    let (now_ms, locked_states) = states(s, checks, answers.get(4))?;
    let outcome = limiter::decide_sized(&rules, &locked_states, own, size, now_ms);
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
    for (((check, write), status), keep) in checks
        .iter()
        .zip(&outcome.writes)
        .zip(outcome.decision.statuses())
        .zip(keep_ms)
    {
        match write {
            Write::Keep => {}
            Write::Counter(c) => {
                update_counter(s, &check.key, c.start_ms, c.window_ms, c.count, &mut sql);
            }
            Write::Append => {
                let window = check.rule.window_ms();
                let _ = write!(sql, "INSERT INTO `{}` (rkey, ts) VALUES (", s.events_table);
                client::text(&check.key, &mut sql);
                let _ = write!(
                    sql,
                    ", {}); DELETE FROM `{}` WHERE rkey = ",
                    ts_at(s.events_ts, now_ms),
                    s.events_table
                );
                client::text(&check.key, &mut sql);
                let _ = write!(
                    sql,
                    " AND ts < {}; ",
                    ts_at(s.events_ts, now_ms.saturating_sub(window.max(*keep)))
                );
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
