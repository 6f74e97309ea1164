//! The MySQL/MariaDB store: limits shared by every web server that reaches the database.
//!
//! Atomicity. Each decision is one transaction (READ COMMITTED) that first locks one row per
//! key in `counter_table` with a single `INSERT … ON DUPLICATE KEY UPDATE` over the keys in
//! sorted order. That statement creates a missing row and takes the exclusive row lock on an
//! existing one alike, in the same order in every process, so concurrent decisions on a key
//! queue behind each other and never deadlock on lock order; no gap locks are involved, so two
//! processes creating the same new key cannot deadlock either (one waits for the other). The
//! whole read-decide-write then runs under those locks: the "DELETE old; SELECT COUNT(*);
//! INSERT" race of naive limiters cannot happen. A named lock (GET_LOCK) would also serialise,
//! but it is per connection rather than per transaction and is lost silently when a connection
//! drops; an upsert alone cannot refuse without counting or cover several rules at once.
//!
//! Time is the database server's (`NOW(3)`), so web servers with skewed clocks agree.
//!
//! Fixed windows keep their counter in the key's row (O(1) per key). Sliding windows keep one
//! row per admitted request in `table` (`rate_events (id, rkey, ts)`, the layout PHP limiters
//! use, `ts` in milliseconds, Unix seconds or a `DATETIME` from `NOW()`) and use the key's
//! counter row as its lock; a key's expired rows are deleted whenever it admits a request, and
//! sweeps remove whatever nobody touches any more. Rows another program inserts take no lock:
//! each decision of resolve counts those committed when it reads, and resolve's decisions are
//! exact among themselves.
//!
//! The usage journal and its notes have tables of their own (`journal`).

mod connect;
mod errors;
mod journal;
pub mod schema;
pub mod settings;

use std::cell::RefCell;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder, SslOpts, TxOpts, Value};

use crate::core::decision::Decision;
use crate::core::journal as usage;
use crate::core::limiter::{self, Counter, State, Write};
use crate::core::rule::{Algorithm, Rule};
use crate::store::mysql::settings::MysqlSettings;
use crate::store::{Check, Store, StoreError, SweepReport};
use connect::connect_within;
use errors::{
    Deadline, ER_DUP_ENTRY, ER_LOCK_DEADLOCK, ER_NO_SUCH_TABLE, Failed, Phase, connection_gone,
    explain,
};
use schema::{
    KeyNeeds, NOW_MS, check_tables, create_tables_sql, like_prefix, ms_to_ts, ts_param, ts_read,
    ts_to_ms,
};

/// How many times a decision is tried when the server reports a deadlock or a duplicate key
/// (both roll the transaction back, so a retry cannot double-count). A table shared with a PHP
/// limiter's inserts deadlocks more often under load: each retry waits a little, at random, so
/// the two sides stop meeting, and the request's deadline still bounds the whole.
const ATTEMPTS: usize = 8;
/// Rows one sweep statement deletes at most, so no statement holds locks for long.
const SWEEP_BATCH: u32 = 1000;

pub struct MysqlStore {
    settings: MysqlSettings,
    /// Keys that a sweep may remove this long after their window ended.
    grace_ms: u64,
    /// How long the rules' keys get, which event rows are resolve's, and how long those are
    /// kept (sliding rows older than the longest window plus the grace can belong to no
    /// configured window).
    needs: KeyNeeds,
    conn: RefCell<Option<Conn>>,
}

impl MysqlStore {
    /// A store for `settings`. `rules` (every rule the site counts with) tells how long
    /// sliding records must be kept, and which keys and how long ones the tables hold.
    pub fn new(settings: MysqlSettings, rules: &[Rule], grace: Duration) -> MysqlStore {
        MysqlStore {
            settings,
            grace_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
            needs: KeyNeeds::of(rules),
            conn: RefCell::new(None),
        }
    }

    fn opts(&self) -> Result<Opts, StoreError> {
        let s = &self.settings;
        let base = match &s.url {
            Some(url) => OptsBuilder::from_opts(
                Opts::from_url(url.expose())
                    .map_err(|_| StoreError::unavailable("store.url is not a mysql:// URL"))?,
            ),
            None => OptsBuilder::new(),
        };
        let mut b = base
            .tcp_connect_timeout(Some(s.connect_timeout))
            .read_timeout(Some(s.read_timeout))
            .write_timeout(Some(s.read_timeout))
            // A TCP connection to localhost must stay TCP: the socket may be another server's.
            .prefer_socket(false)
            // Each CGI process prepares a statement once: no cache to keep.
            .stmt_cache_size(Some(16))
            // Known, so the driver does not ask the server for it at every connection (a
            // round trip per CGI request). Our packets are a few hundred bytes; 4 MiB is the
            // smallest default of the servers we support (MySQL 5.7).
            .max_allowed_packet(Some(4 << 20))
            .init(vec![
                format!(
                    "SET SESSION innodb_lock_wait_timeout = {}",
                    s.read_timeout.as_secs().max(1)
                ),
                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED".to_owned(),
            ]);
        if let Some(h) = &s.host {
            b = b.ip_or_hostname(Some(h.clone()));
        }
        if let Some(p) = s.port {
            b = b.tcp_port(p);
        }
        if let Some(sock) = &s.socket {
            b = b.socket(Some(sock.display().to_string()));
        }
        if let Some(u) = &s.user {
            b = b.user(Some(u.clone()));
        }
        if let Some(p) = &s.password {
            b = b.pass(Some(p.expose().to_owned()));
        }
        if let Some(d) = &s.database {
            b = b.db_name(Some(d.clone()));
        }
        if s.tls {
            b = b.ssl_opts(Some(SslOpts::default()));
        }
        Ok(b.into())
    }

    /// The time one request may spend on the store: connecting may take the connect timeout,
    /// the work then gets twice the read timeout.
    fn bound(&self) -> Duration {
        self.settings.connect_timeout + 2 * self.settings.read_timeout
    }

    /// Where the server is, as log lines name it.
    fn place(&self) -> String {
        let s = &self.settings;
        match (&s.socket, &s.host) {
            (Some(sock), _) => format!("socket {}", sock.display()),
            (None, Some(h)) => format!("{h}:{}", s.port.unwrap_or(crate::defaults::MYSQL_PORT)),
            (None, None) => "the server in store.url".to_owned(),
        }
    }

    fn describe(&self, e: &mysql::Error, phase: Phase) -> String {
        format!("mysql store at {}: {}", self.place(), explain(e, phase))
    }

    /// Runs `work` on the connection (opening one if needed), creating the tables when they are
    /// missing and retrying what the server asks to retry. A connection that failed is dropped,
    /// so the next call opens a new one: the store recovers by itself when the server returns.
    fn with_conn<T>(
        &self,
        mut work: impl FnMut(&mut Conn, &Deadline) -> Result<T, Failed>,
    ) -> Result<T, StoreError> {
        let deadline = Deadline(Instant::now() + self.bound());
        let mut slot = self.conn.borrow_mut();
        let mut created = false;
        let mut attempt = 0;
        // A connection kept from an earlier request (FastCGI) may have been closed by the server
        // since: if it turns out gone, the work is tried once more on a new one. Work that failed
        // so was not committed, or, if the connection broke during COMMIT, counted once more: an
        // over-count, never an under-count.
        let mut kept = slot.is_some();
        loop {
            attempt += 1;
            if slot.is_none() {
                let budget = deadline.0.saturating_duration_since(Instant::now());
                let conn = connect_within(self.opts()?, budget).map_err(|f| {
                    StoreError::unavailable(match f {
                        Failed::Db(e) => self.describe(&e, Phase::Connect),
                        Failed::OutOfTime => format!(
                            "mysql store at {}: the server answered too slowly: no complete handshake within {} ms (store.connect_timeout_ms + 2 x store.read_timeout_ms)",
                            self.place(),
                            self.bound().as_millis()
                        ),
                    })
                })?;
                *slot = Some(conn);
            }
            let conn = slot.as_mut().expect("connected above");
            match work(conn, &deadline) {
                Ok(v) => return Ok(v),
                Err(f) if f.code() == Some(ER_NO_SUCH_TABLE) && !created => {
                    created = true;
                    for sql in create_tables_sql(&self.settings) {
                        if let Err(e) = conn.query_drop(sql) {
                            let detail = self.describe(&e, Phase::Work);
                            *slot = None;
                            return Err(StoreError::unavailable(format!(
                                "{detail}; creating the tables failed: grant CREATE to store.user or run `resolve check` as a user who can"
                            )));
                        }
                    }
                }
                Err(f)
                    if matches!(f.code(), Some(ER_LOCK_DEADLOCK | ER_DUP_ENTRY))
                        && attempt < ATTEMPTS =>
                {
                    let most = 2u64 << attempt.min(5);
                    std::thread::sleep(Duration::from_millis(1 + crate::random::u64() % most));
                }
                Err(Failed::OutOfTime) => {
                    // The transaction may still be open on this connection: drop it.
                    *slot = None;
                    return Err(StoreError::unavailable(format!(
                        "mysql store at {}: the server answered too slowly (more than {} ms for one request; see store.read_timeout_ms)",
                        self.place(),
                        self.bound().as_millis()
                    )));
                }
                Err(Failed::Db(error))
                    if kept && connection_gone(&error) && deadline.check().is_ok() =>
                {
                    kept = false;
                    *slot = None;
                }
                Err(Failed::Db(error)) => {
                    let detail = self.describe(&error, Phase::Work);
                    if !matches!(error, mysql::Error::MySqlError(_)) {
                        *slot = None;
                    }
                    return Err(StoreError::unavailable(detail));
                }
            }
        }
    }

    fn decide_on(
        &self,
        conn: &mut Conn,
        deadline: &Deadline,
        checks: &[Check<'_>],
    ) -> Result<Decision, Failed> {
        let s = &self.settings;
        let mut order: Vec<usize> = (0..checks.len()).collect();
        order.sort_by(|a, b| checks[*a].key.cmp(&checks[*b].key));
        let sliding = checks
            .iter()
            .any(|c| c.rule.algorithm == Algorithm::Sliding);

        // Statements are prepared before the transaction: while the rows are locked, every
        // round trip is one that other requests for the key wait on.
        deadline.check()?;
        let placeholders = vec!["(?, 0, 0, 0, 0)"; checks.len()].join(", ");
        let lock_rows = conn.prep(format!(
            "INSERT INTO `{}` (rkey, start_ms, window_ms, count, expires_ms) VALUES {placeholders} \
             ON DUPLICATE KEY UPDATE count = count",
            s.counter_table
        ))?;
        let in_list = vec!["?"; checks.len()].join(", ");
        let read_rows = conn.prep(format!(
            "SELECT rkey, start_ms, window_ms, count, {NOW_MS} \
             FROM `{}` WHERE rkey IN ({in_list})",
            s.counter_table
        ))?;
        let write_counter = conn.prep(format!(
            "UPDATE `{}` SET start_ms = ?, window_ms = ?, count = ?, expires_ms = ? WHERE rkey = ?",
            s.counter_table
        ))?;
        let sliding_statements = if sliding {
            let (ts, read) = (ts_param(s.events_ts), ts_read(s.events_ts));
            // A bound from `ms_to_ts` can take in rows just outside the window (a whole second
            // of them): the limiter counts only those within.
            Some((
                conn.prep(format!(
                    "SELECT {read} FROM `{}` WHERE rkey = ? AND ts >= {ts} ORDER BY ts",
                    s.events_table
                ))?,
                conn.prep(format!(
                    "INSERT INTO `{}` (rkey, ts) VALUES (?, {ts})",
                    s.events_table
                ))?,
                conn.prep(format!(
                    "DELETE FROM `{}` WHERE rkey = ? AND ts < {ts}",
                    s.events_table
                ))?,
            ))
        } else {
            None
        };

        deadline.check()?;
        // READ COMMITTED is the session's (set when connecting): no extra round trip here.
        let mut tx = conn.start_transaction(TxOpts::default())?;
        deadline.check()?;
        // Lock (creating if needed) every key's row, in key order.
        let keys: Vec<Value> = order
            .iter()
            .map(|i| checks[*i].key.clone().into())
            .collect();
        tx.exec_drop(&lock_rows, keys.clone())?;
        deadline.check()?;
        let rows: Vec<(String, u64, u64, u32, u64)> = tx.exec(&read_rows, keys)?;
        let now_ms = rows.first().map_or(0, |r| r.4);
        let mut states = Vec::with_capacity(checks.len());
        for check in checks {
            let row = rows.iter().find(|r| r.0 == check.key);
            let state = match check.rule.algorithm {
                Algorithm::Fixed => State::Fixed(row.and_then(|r| {
                    (r.1 > 0).then_some(Counter {
                        start_ms: r.1,
                        window_ms: r.2,
                        count: r.3,
                    })
                })),
                Algorithm::Sliding => {
                    deadline.check()?;
                    let since = now_ms.saturating_sub(check.rule.window_ms());
                    let (select_times, _, _) = sliding_statements
                        .as_ref()
                        .expect("prepared for sliding rules");
                    let times: Vec<i64> = tx.exec(
                        select_times,
                        (check.key.as_str(), ms_to_ts(s.events_ts, since)),
                    )?;
                    State::Sliding(
                        times
                            .into_iter()
                            .map(|t| ts_to_ms(s.events_ts, t))
                            .collect(),
                    )
                }
            };
            states.push(state);
        }

        let rules: Vec<&Rule> = checks.iter().map(|c| c.rule).collect();
        let outcome = limiter::decide(&rules, &states, now_ms);
        for ((check, write), status) in checks
            .iter()
            .zip(&outcome.writes)
            .zip(outcome.decision.statuses())
        {
            deadline.check()?;
            match write {
                Write::Keep => {}
                Write::Counter(c) => tx.exec_drop(
                    &write_counter,
                    (
                        c.start_ms,
                        c.window_ms,
                        c.count,
                        c.end_ms(),
                        check.key.as_str(),
                    ),
                )?,
                Write::Append => {
                    let window = check.rule.window_ms();
                    let (_, insert_event, delete_old) = sliding_statements
                        .as_ref()
                        .expect("prepared for sliding rules");
                    tx.exec_drop(
                        insert_event,
                        (check.key.as_str(), ms_to_ts(s.events_ts, now_ms)),
                    )?;
                    tx.exec_drop(
                        delete_old,
                        (
                            check.key.as_str(),
                            ms_to_ts(s.events_ts, now_ms.saturating_sub(window)),
                        ),
                    )?;
                    // The lock row remembers when the key was last used, for sweeps.
                    let used = check.rule.limit.get() - status.remaining;
                    tx.exec_drop(
                        &write_counter,
                        (
                            now_ms,
                            window,
                            used,
                            now_ms.saturating_add(window),
                            check.key.as_str(),
                        ),
                    )?;
                }
            }
        }
        deadline.check()?;
        if outcome.decision.is_admit() {
            tx.commit()?;
        } else {
            // A refused request writes nothing: not even the empty row that locked a new key.
            tx.rollback()?;
        }
        Ok(outcome.decision)
    }

    /// Checks both tables exist with the columns the queries need, creating missing ones.
    /// Returns what was done, for `check`.
    pub fn init_tables(&self) -> Result<Vec<String>, StoreError> {
        let s = &self.settings;
        let needs = &self.needs;
        self.with_conn(|conn, _| check_tables(conn, s, needs))
    }

    /// Writes `key`'s cache row to expire `ttl` after the server's now; where the key has a row
    /// already, `on_duplicate` (an assignment list) says what becomes of it. Returns the rows
    /// affected as the server counts them.
    fn cache_upsert(
        &self,
        key: &str,
        value: &[u8],
        ttl: Duration,
        on_duplicate: &str,
    ) -> Result<u64, StoreError> {
        let table = &self.settings.cache_table;
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.with_conn(|conn, _| {
            conn.exec_drop(
                format!(
                    "INSERT INTO `{table}` (ckey, expires_ms, value) VALUES (?, {NOW_MS} + ?, ?) \
                     ON DUPLICATE KEY UPDATE {on_duplicate}"
                ),
                (key, ttl_ms, value),
            )?;
            Ok(conn.affected_rows())
        })
    }
}

impl Store for MysqlStore {
    fn decide(&self, checks: &[Check<'_>]) -> Result<Decision, StoreError> {
        if checks.is_empty() {
            return Ok(Decision::no_checks());
        }
        self.with_conn(|conn, deadline| self.decide_on(conn, deadline, checks))
    }

    fn sweep(&self, budget: Option<Duration>) -> Result<SweepReport, StoreError> {
        let deadline = budget.map(|b| Instant::now() + b);
        let s = &self.settings;
        let grace = self.grace_ms;
        let longest = self.needs.longest_sliding_ms;
        self.with_conn(|conn, _| {
            let now_ms: u64 = conn.query_first(format!("SELECT {NOW_MS}"))?.unwrap_or(0);
            let mut report = SweepReport {
                complete: true,
                ..SweepReport::default()
            };
            let counters = format!(
                "DELETE FROM `{}` WHERE expires_ms < ? LIMIT {SWEEP_BATCH}",
                s.counter_table
            );
            // Only resolve's keys: a shared table's other rows belong to another program.
            let events = format!(
                "DELETE FROM `{}` WHERE ts < {} AND rkey LIKE ? ESCAPE '!' LIMIT {SWEEP_BATCH}",
                s.events_table,
                ts_param(s.events_ts)
            );
            let cache = format!(
                "DELETE FROM `{}` WHERE expires_ms < ? LIMIT {SWEEP_BATCH}",
                s.cache_table
            );
            let events_before = ms_to_ts(
                s.events_ts,
                now_ms.saturating_sub(longest.saturating_add(grace)),
            );
            // Finished hours' totals first: one row each instead of one per shard.
            let finished = crate::core::journal::hour_of(now_ms).saturating_sub(1);
            loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    report.complete = false;
                    return Ok(report);
                }
                let folded = journal::fold(conn, &s.journal_table, finished, SWEEP_BATCH)?;
                report.removed += folded;
                if folded < u64::from(SWEEP_BATCH) {
                    break;
                }
            }
            let [journal_clients, journal_totals] =
                journal::sweep_jobs(&s.journal_table, now_ms, SWEEP_BATCH);
            let mut jobs: Vec<(&str, Vec<Value>)> = vec![
                (&counters, vec![now_ms.saturating_sub(grace).into()]),
                (&cache, vec![now_ms.into()]),
                (&journal_clients.0, vec![journal_clients.1.into()]),
                (&journal_totals.0, vec![journal_totals.1.into()]),
            ];
            for prefix in &self.needs.prefixes {
                jobs.push((
                    &events,
                    vec![events_before.into(), like_prefix(prefix).into()],
                ));
            }
            for (sql, params) in jobs {
                loop {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        report.complete = false;
                        return Ok(report);
                    }
                    conn.exec_drop(sql, params.clone())?;
                    let n = conn.affected_rows();
                    report.removed += n;
                    if n < u64::from(SWEEP_BATCH) {
                        break;
                    }
                }
            }
            Ok(report)
        })
    }

    fn probe(&self) -> Result<String, StoreError> {
        let report = self.init_tables()?;
        let version: String = self
            .with_conn(|conn, _| Ok(conn.query_first("SELECT VERSION()")?.unwrap_or_default()))?;
        if let Some(bad) = report.iter().find(|l| l.starts_with("WRONG SHAPE")) {
            return Err(StoreError::unavailable(bad.clone()));
        }
        let s = &self.settings;
        Ok(format!(
            "mysql store (server {version}); tables {}, {}, {}, {} and {}: {}; {}",
            s.counter_table,
            s.events_table,
            s.cache_table,
            s.journal_table,
            s.notes_table,
            report.join("; "),
            self.needs.sweep_note(&s.events_table, self.grace_ms)
        ))
    }

    fn refund(&self, checks: &[Check<'_>], at_ms: u64) -> Result<(), StoreError> {
        let s = &self.settings;
        self.with_conn(|conn, deadline| {
            for c in checks {
                deadline.check()?;
                match c.rule.algorithm {
                    // One statement: atomic on its row, and only within the same window.
                    Algorithm::Fixed => conn.exec_drop(
                        format!(
                            "UPDATE `{}` SET count = count - 1 \
                             WHERE rkey = ? AND count > 0 AND start_ms <= ? AND expires_ms > ?",
                            s.counter_table
                        ),
                        (c.key.as_str(), at_ms, at_ms),
                    )?,
                    Algorithm::Sliding => conn.exec_drop(
                        format!(
                            "DELETE FROM `{}` WHERE rkey = ? AND ts = {} LIMIT 1",
                            s.events_table,
                            ts_param(s.events_ts)
                        ),
                        (c.key.as_str(), ms_to_ts(s.events_ts, at_ms)),
                    )?,
                }
            }
            Ok(())
        })
    }

    fn cache_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let table = &self.settings.cache_table;
        self.with_conn(|conn, _| {
            Ok(conn.exec_first(
                format!("SELECT value FROM `{table}` WHERE ckey = ? AND expires_ms > {NOW_MS}"),
                (key,),
            )?)
        })
    }

    fn cache_claim(&self, key: &str, value: &[u8], ttl: Duration) -> Result<bool, StoreError> {
        // One statement: a row that is missing or expired becomes ours; a live one stays.
        let affected = self.cache_upsert(
            key,
            value,
            ttl,
            &format!(
                "value = IF(expires_ms <= {NOW_MS}, VALUES(value), value), \
                 expires_ms = IF(expires_ms <= {NOW_MS}, VALUES(expires_ms), expires_ms)"
            ),
        )?;
        // 1: inserted; 2: an expired row replaced; 0: a live row left alone.
        Ok(affected > 0)
    }

    fn cache_release(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        let table = &self.settings.cache_table;
        self.with_conn(|conn, _| {
            conn.exec_drop(
                format!("DELETE FROM `{table}` WHERE ckey = ? AND value = ?"),
                (key, value),
            )?;
            Ok(())
        })
    }

    fn cache_put(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError> {
        self.cache_upsert(
            key,
            value,
            ttl,
            "expires_ms = VALUES(expires_ms), value = VALUES(value)",
        )?;
        Ok(())
    }

    fn used(&self, checks: &[Check<'_>]) -> Result<Vec<u32>, StoreError> {
        if checks.is_empty() {
            return Ok(Vec::new());
        }
        self.with_conn(|conn, _| journal::used(conn, &self.settings, checks))
    }

    fn journal_add(&self, entry: &usage::Entry) -> Result<(), StoreError> {
        let Some(sql) = journal::add_sql(&self.settings.journal_table, entry) else {
            return Ok(());
        };
        // One statement, atomic by itself: a deadlock rolls it back and it is sent again.
        self.with_conn(|conn, _| Ok(conn.query_drop(&sql)?))
    }

    fn journal_rows(&self, from_hour: u32, to_hour: u32) -> Result<Vec<usage::Row>, StoreError> {
        let table = &self.settings.journal_table;
        self.with_conn(|conn, _| journal::rows(conn, table, from_hour, to_hour))
    }

    fn journal_note(&self, note: &usage::Note) -> Result<(), StoreError> {
        let table = &self.settings.notes_table;
        self.with_conn(|conn, _| journal::note(conn, table, note))
    }

    fn journal_notes(&self) -> Result<Vec<usage::Note>, StoreError> {
        let table = &self.settings.notes_table;
        self.with_conn(|conn, _| journal::notes(conn, table))
    }
}

#[cfg(test)]
mod tests;
