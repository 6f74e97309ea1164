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
//! counter row as its lock. An admission deletes its key's rows that no window counts any more:
//! a default key's once out of its rule's window, a key a `key_template` makes (which other
//! programs may count over longer windows) once older than the longest sliding window plus the
//! sweep grace, as sweeps keep them; sweeps remove whatever nobody touches any more. Rows
//! another program inserts take no lock:
//! each decision of resolve counts those committed when it reads, and resolve's decisions are
//! exact among themselves.
//!
//! The usage journal and its notes have tables of their own (`journal`).
//!
//! A refusal is decided on a plain read of the committed rows, without a transaction or a lock:
//! counts only grow within a window (a refund aside, which may as well come after), so what is
//! over the limit on that read is over it on any later one, and a refused request costs one round
//! trip and writes nothing. Only a request that read as admitted takes the locks and decides
//! again (`decide`). Statements are sent as text, several in one packet where they belong
//! together, with every value a literal of digits or hexadecimal (`client`): nothing to escape.

mod auth;
pub mod client;
mod decide;
mod errors;
mod journal;
pub mod packet;
pub mod schema;
pub mod settings;

use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::core::decision::Decision;
use crate::core::journal as usage;
use crate::core::rule::{Algorithm, Rule, Unit};
use crate::store::cache::Cache;
use crate::store::counters::Counters;
use crate::store::journal::Journal;
use crate::store::mysql::settings::{MysqlSettings, url_parts};
use crate::store::notes::Notes;
use crate::store::upkeep::Upkeep;
use crate::store::{Check, StoreError, SweepReport};
use client::{Conn, Params, Place};
use errors::{
    Deadline, ER_DUP_ENTRY, ER_LOCK_DEADLOCK, ER_NO_SUCH_TABLE, Failed, Phase, connection_gone,
    explain,
};
use schema::{KeyNeeds, NOW_MS, check_tables, create_tables_sql, like_prefix, ts_at};

/// How many times a decision is tried when the server reports a deadlock or a duplicate key
/// (both roll the transaction back, so a retry cannot double-count). A table shared with a PHP
/// limiter's inserts deadlocks more often under load: each retry waits a little, at random, so
/// the two sides stop meeting, and the request's deadline still bounds the whole.
const ATTEMPTS: usize = 8;
/// Rows one sweep statement deletes at most, so no statement holds locks for long.
const SWEEP_BATCH: u32 = 1000;
/// How long creating the tables may take: once per installation, and a loaded server can take
/// seconds over five `CREATE TABLE`s, far more than a request's read timeout.
const CREATE_BUDGET: Duration = Duration::from_secs(20);

pub struct MysqlStore {
    settings: MysqlSettings,
    /// Keys that a sweep may remove this long after their window ended.
    grace_ms: u64,
    /// How long the rules' keys get, which event rows are resolve's, and how long those are
    /// kept (sliding rows older than the longest window plus the grace can belong to no
    /// configured window).
    needs: KeyNeeds,
    conn: RefCell<Option<Conn>>,
    /// While a request is served: when its first operation began (None until then). All of a
    /// request's operations together stay within [`MysqlStore::bound`] of it.
    request: Cell<Option<Option<Instant>>>,
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
            request: Cell::new(None),
        }
    }

    /// Where and as whom to connect: the fields of the store, over the parts of its URL.
    fn params(&self) -> Result<Params, StoreError> {
        let s = &self.settings;
        let url = match &s.url {
            Some(url) => url_parts(url.expose())
                .map_err(|_| StoreError::unavailable("store.url is not a mysql:// URL"))?,
            None => Default::default(),
        };
        let place = match s.socket.clone().or(url.socket) {
            Some(path) => Place::Unix(path),
            None => Place::Tcp {
                host: s
                    .host
                    .clone()
                    .or(url.host)
                    .unwrap_or_else(|| "127.0.0.1".to_owned()),
                port: s
                    .port
                    .or(url.port)
                    .unwrap_or(crate::support::defaults::MYSQL_PORT),
            },
        };
        Ok(Params {
            place,
            user: s.user.clone().or(url.user).unwrap_or_default(),
            password: s
                .password
                .as_ref()
                .map(|p| p.expose().to_owned())
                .or(url.password)
                .unwrap_or_default(),
            database: s.database.clone().or(url.database),
            tls: s.tls,
            ca_file: s.ca_file.clone(),
            connect_timeout: s.connect_timeout,
            read_timeout: s.read_timeout,
        })
    }

    /// The time one request may spend on the store: connecting may take the connect timeout,
    /// the work then gets twice the read timeout.
    fn bound(&self) -> Duration {
        self.settings.connect_timeout + 2 * self.settings.read_timeout
    }

    /// Where the server is, as log lines name it.
    fn place(&self) -> String {
        match self.params().map(|p| p.place) {
            Ok(Place::Unix(sock)) => format!("socket {}", sock.display()),
            Ok(Place::Tcp { host, port }) => format!("{host}:{port}"),
            Err(_) => "the server in store.url".to_owned(),
        }
    }

    fn describe(&self, e: &client::Error, phase: Phase) -> String {
        let mut said = explain(e, phase);
        // MariaDB 10.11 refuses a plain client of a server that requires TLS
        // (require_secure_transport) as it refuses a wrong password; MySQL says why (3159).
        let plain_tcp =
            !self.settings.tls && matches!(self.params().map(|p| p.place), Ok(Place::Tcp { .. }));
        if plain_tcp && matches!(e, client::Error::Server(m) if m.code == 1045) {
            said.push_str(
                "; or the server accepts only TLS (require_secure_transport=ON, which MariaDB \
                 10.11 answers with this same error): then set store.tls to true, and \
                 store.ca_file to your provider's CA bundle when a public CA did not sign its \
                 certificate",
            );
        }
        format!("mysql store at {}: {said}", self.place())
    }

    fn too_slow(&self, what: &str) -> StoreError {
        StoreError::unavailable(format!(
            "mysql store at {}: the server answered too slowly: {what} within {} ms (store.connect_timeout_ms + 2 x store.read_timeout_ms)",
            self.place(),
            self.bound().as_millis()
        ))
    }

    fn out_of_time(&self) -> StoreError {
        StoreError::unavailable(format!(
            "mysql store at {}: the server answered too slowly (more than {} ms for one request; see store.read_timeout_ms)",
            self.place(),
            self.bound().as_millis()
        ))
    }

    /// Runs `work` on the connection (opening one if needed), creating the tables when they are
    /// missing and retrying what the server asks to retry. A connection that failed is dropped,
    /// so the next call opens a new one: the store recovers by itself when the server returns.
    fn with_conn<T>(
        &self,
        mut work: impl FnMut(&mut Conn, &Deadline) -> Result<T, Failed>,
    ) -> Result<T, StoreError> {
        let now = Instant::now();
        let began = match self.request.get() {
            Some(None) => {
                self.request.set(Some(Some(now)));
                now
            }
            Some(Some(began)) => began,
            None => now,
        };
        let mut deadline = Deadline(began + self.bound());
        if deadline.check().is_err() {
            return Err(self.out_of_time());
        }
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
                let conn = Conn::open(&self.params()?, deadline.0).map_err(|e| {
                    if deadline.check().is_err() {
                        self.too_slow("no complete handshake")
                    } else {
                        StoreError::unavailable(self.describe(&e, Phase::Connect))
                    }
                })?;
                *slot = Some(conn);
            }
            let conn = slot.as_mut().expect("connected above");
            conn.set_deadline(Some(deadline.0));
            match work(conn, &deadline) {
                Ok(v) => return Ok(v),
                Err(f) if f.code() == Some(ER_NO_SUCH_TABLE) && !created => {
                    created = true;
                    conn.set_timeout(CREATE_BUDGET);
                    conn.set_deadline(Some(Instant::now() + CREATE_BUDGET));
                    for sql in create_tables_sql(&self.settings) {
                        if let Err(e) = conn.query(&sql) {
                            let detail = self.describe(&e, Phase::Work);
                            *slot = None;
                            return Err(StoreError::unavailable(format!(
                                "{detail}; creating the tables failed: grant CREATE to store.user or run `resolve check` as a user who can"
                            )));
                        }
                    }
                    conn.set_timeout(self.settings.read_timeout);
                    deadline = Deadline(Instant::now() + self.bound());
                }
                Err(f)
                    if matches!(f.code(), Some(ER_LOCK_DEADLOCK | ER_DUP_ENTRY))
                        && attempt < ATTEMPTS =>
                {
                    let most = 2u64 << attempt.min(5);
                    std::thread::sleep(Duration::from_millis(
                        1 + crate::support::random::u64() % most,
                    ));
                }
                Err(Failed::OutOfTime) => {
                    // The transaction may still be open on this connection: drop it.
                    *slot = None;
                    return Err(self.out_of_time());
                }
                Err(Failed::Db(_)) if deadline.check().is_err() => {
                    *slot = None;
                    return Err(self.out_of_time());
                }
                Err(Failed::Db(error)) if kept && connection_gone(&error) => {
                    kept = false;
                    *slot = None;
                }
                Err(Failed::Db(error)) => {
                    let detail = self.describe(&error, Phase::Work);
                    if !matches!(error, client::Error::Server(_)) {
                        *slot = None;
                    }
                    return Err(StoreError::unavailable(detail));
                }
            }
        }
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
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let mut sql = format!(
            "INSERT INTO `{}` (ckey, expires_ms, value) VALUES (",
            self.settings.cache_table
        );
        client::text(key, &mut sql);
        let _ = write!(sql, ", {NOW_MS} + {ttl_ms}, ");
        client::hex(value, &mut sql);
        let _ = write!(sql, ") ON DUPLICATE KEY UPDATE {on_duplicate}");
        self.with_conn(|conn, _| Ok(one(conn.query(&sql)?).affected))
    }

    /// Runs one statement and returns the rows it affected.
    fn run(&self, sql: &str) -> Result<u64, StoreError> {
        self.with_conn(|conn, _| Ok(one(conn.query(sql)?).affected))
    }
}

/// The answer of a query of one statement.
fn one(mut answers: Vec<client::Answer>) -> client::Answer {
    answers.pop().unwrap_or_default()
}

impl Counters for MysqlStore {
    fn decide_sized(
        &self,
        checks: &[Check<'_>],
        own: usize,
        size: Option<u64>,
    ) -> Result<Decision, StoreError> {
        if checks.is_empty() {
            return Ok(Decision::no_checks());
        }
        let s = &self.settings;
        let keep: Vec<u64> = checks
            .iter()
            .map(|c| self.needs.keep_ms(c.rule, self.grace_ms))
            .collect();
        self.with_conn(|conn, deadline| {
            decide::decide(conn, s, deadline, (checks, own, size), &keep)
        })
    }

    fn refund(&self, checks: &[Check<'_>], at_ms: u64) -> Result<(), StoreError> {
        if checks.is_empty() {
            return Ok(());
        }
        let s = &self.settings;
        // One statement per check, each atomic on its rows, all in one round trip; a rule of
        // bytes keeps what it counted.
        let mut sql = String::new();
        for c in checks.iter().filter(|c| c.rule.unit == Unit::Requests) {
            if !sql.is_empty() {
                sql.push_str("; ");
            }
            match c.rule.algorithm {
                // Only within the same window.
                Algorithm::Fixed => {
                    let _ = write!(
                        sql,
                        "UPDATE `{}` SET count = count - 1 WHERE count > 0 AND start_ms <= {at_ms} \
                         AND expires_ms > {at_ms} AND rkey = ",
                        s.counter_table
                    );
                    client::text(&c.key, &mut sql);
                }
                Algorithm::Sliding => {
                    let _ = write!(
                        sql,
                        "DELETE FROM `{}` WHERE ts = {} AND rkey = ",
                        s.events_table,
                        ts_at(s.events_ts, at_ms)
                    );
                    client::text(&c.key, &mut sql);
                    sql.push_str(" LIMIT 1");
                }
            }
        }
        if sql.is_empty() {
            return Ok(());
        }
        self.with_conn(|conn, _| {
            conn.query(&sql)?;
            Ok(())
        })
    }

    fn charge(&self, checks: &[Check<'_>], at_ms: u64, size: u64) -> Result<(), StoreError> {
        // One increment per check of bytes, each atomic on its row, within the request's
        // window (as `limiter::charged`), all in one round trip.
        let mut sql = String::new();
        for c in checks {
            let amount = match (c.rule.unit, c.rule.algorithm) {
                (Unit::Bytes, Algorithm::Fixed) => c.rule.unit.amount(Some(size)),
                _ => 0,
            };
            if amount == 0 {
                continue;
            }
            if !sql.is_empty() {
                sql.push_str("; ");
            }
            let _ = write!(
                sql,
                "UPDATE `{}` SET count = LEAST(count + {amount}, {}) WHERE start_ms <= {at_ms} \
                 AND expires_ms > {at_ms} AND rkey = ",
                self.settings.counter_table,
                u32::MAX
            );
            client::text(&c.key, &mut sql);
        }
        if sql.is_empty() {
            return Ok(());
        }
        self.with_conn(|conn, _| {
            conn.query(&sql)?;
            Ok(())
        })
    }

    fn used(&self, checks: &[Check<'_>]) -> Result<Vec<u32>, StoreError> {
        if checks.is_empty() {
            return Ok(Vec::new());
        }
        let s = &self.settings;
        let sql = decide::read_sql(s, checks);
        self.with_conn(|conn, _| {
            let (now_ms, states) = decide::states(s, checks, conn.query(&sql)?.first())?;
            Ok(checks
                .iter()
                .zip(&states)
                .map(|(c, state)| crate::core::limiter::used(c.rule, state, now_ms))
                .collect())
        })
    }
}

impl Cache for MysqlStore {
    fn cache_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut sql = format!(
            "SELECT value FROM `{}` WHERE ckey = ",
            self.settings.cache_table
        );
        client::text(key, &mut sql);
        let _ = write!(sql, " AND expires_ms > {NOW_MS}");
        self.with_conn(|conn, _| {
            Ok(one(conn.query(&sql)?)
                .rows
                .into_iter()
                .next()
                .and_then(|r| r.into_iter().next())
                .map(|v| v.unwrap_or_default()))
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
        let mut sql = format!("DELETE FROM `{}` WHERE ckey = ", self.settings.cache_table);
        client::text(key, &mut sql);
        sql.push_str(" AND value = ");
        client::hex(value, &mut sql);
        self.run(&sql)?;
        Ok(())
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
}

impl Journal for MysqlStore {
    fn journal_add(&self, entry: &usage::Entry) -> Result<(), StoreError> {
        let Some(sql) = journal::add_sql(&self.settings.journal_table, entry) else {
            return Ok(());
        };
        // One statement, atomic by itself: a deadlock rolls it back and it is sent again.
        self.run(&sql)?;
        Ok(())
    }

    fn journal_rows(&self, from_hour: u32, to_hour: u32) -> Result<Vec<usage::Row>, StoreError> {
        let table = &self.settings.journal_table;
        self.with_conn(|conn, _| journal::rows(conn, table, from_hour, to_hour))
    }
}

impl Notes for MysqlStore {
    fn journal_note(&self, note: &usage::Note) -> Result<(), StoreError> {
        let table = &self.settings.notes_table;
        self.with_conn(|conn, _| journal::note(conn, table, note))
    }

    fn journal_notes(&self) -> Result<Vec<usage::Note>, StoreError> {
        let table = &self.settings.notes_table;
        self.with_conn(|conn, _| journal::notes(conn, table))
    }
}

impl Upkeep for MysqlStore {
    fn begin_request(&self) {
        self.request.set(Some(None));
    }

    fn sweep(&self, budget: Option<Duration>) -> Result<SweepReport, StoreError> {
        let deadline = budget.map(|b| Instant::now() + b);
        let s = &self.settings;
        let grace = self.grace_ms;
        let longest = self.needs.longest_sliding_ms;
        self.with_conn(|conn, _| {
            let now_ms: u64 = match one(conn.query(&format!("SELECT {NOW_MS}"))?)
                .rows
                .first()
                .and_then(|r| r.first())
            {
                Some(v) => client::num(v)?,
                None => 0,
            };
            let mut report = SweepReport {
                complete: true,
                ..SweepReport::default()
            };
            let events_before = now_ms.saturating_sub(longest.saturating_add(grace));
            let [journal_clients, journal_totals] =
                journal::sweep_jobs(&s.journal_table, now_ms, SWEEP_BATCH);
            let mut jobs = vec![
                format!(
                    "DELETE FROM `{}` WHERE expires_ms < {} LIMIT {SWEEP_BATCH}",
                    s.counter_table,
                    now_ms.saturating_sub(grace)
                ),
                format!(
                    "DELETE FROM `{}` WHERE expires_ms < {now_ms} LIMIT {SWEEP_BATCH}",
                    s.cache_table
                ),
                journal_clients,
                journal_totals,
            ];
            // Only resolve's keys: a shared table's other rows belong to another program.
            for prefix in &self.needs.prefixes {
                jobs.push(format!(
                    "DELETE FROM `{}` WHERE ts < {} AND rkey LIKE {} ESCAPE '!' LIMIT {SWEEP_BATCH}",
                    s.events_table,
                    ts_at(s.events_ts, events_before),
                    client::text_lit(&like_prefix(prefix))
                ));
            }
            for sql in jobs {
                loop {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        report.complete = false;
                        return Ok(report);
                    }
                    let n = one(conn.query(&sql)?).affected;
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
        let (version, tls) = self.with_conn(|conn, _| {
            let version = one(conn.query("SELECT VERSION()")?)
                .rows
                .first()
                .and_then(|r| r.first())
                .map(|v| String::from_utf8_lossy(&client::bytes(v)).into_owned())
                .unwrap_or_default();
            Ok((version, conn.tls.clone()))
        })?;
        let tls = match (tls, self.params().map(|p| p.place)) {
            (Some(tls), _) => format!(", {tls}"),
            (None, Ok(Place::Tcp { .. })) => ", no TLS".to_owned(),
            (None, _) => String::new(),
        };
        if let Some(bad) = report.iter().find(|l| l.starts_with("WRONG SHAPE")) {
            return Err(StoreError::unavailable(bad.clone()));
        }
        let s = &self.settings;
        Ok(format!(
            "mysql store (server {version}{tls}); tables {}, {}, {}, {} and {}: {}; {}",
            s.counter_table,
            s.events_table,
            s.cache_table,
            s.journal_table,
            s.notes_table,
            report.join("; "),
            self.needs.sweep_note(&s.events_table, self.grace_ms)
        ))
    }
}

#[cfg(test)]
mod tests;
