//! The Redis store: every decision is one Lua script, run atomically by the server, that reads
//! every rule's key, decides with the server's clock (`TIME`) and writes, so no two requests
//! interleave and no crash can leave half a decision behind. Every key written gets its expiry
//! in the same script (no INCR-then-EXPIRE gap): fixed windows expire when they end, sliding
//! records when the newest leaves the window. Nothing needs sweeping. The usage journal
//! (`journal`) is hashes per hour that expire by themselves too.
//!
//! Long because the store is one client of every role (counters, cache, journal, notes,
//! upkeep) over one connection, each role a few commands of its own.

pub mod cluster;
mod journal;
pub mod resp;
pub mod settings;
pub mod steps;

use std::cell::RefCell;
use std::io;
use std::sync::OnceLock;
use std::time::Duration;

use crate::core::decision::{Decision, RuleStatus};
use crate::core::journal as usage;
use crate::core::limiter::{self, Counter, State};
use crate::core::rule::{Algorithm, Unit};
use crate::core::slot;
use crate::store::cache::Cache;
use crate::store::counters::Counters;
use crate::store::journal::Journal;
use crate::store::notes::Notes;
use crate::store::redis::settings::RedisSettings;
use crate::store::upkeep::Upkeep;
use crate::store::{Check, StoreError, SweepReport};
use cluster::Cluster;
use resp::{Connection, OddReply, Reply};

/// The decision, as the limiter in `limiter.rs` makes it (`decide_own_first`), in Lua. ARGV
/// holds, per key, the algorithm (`f` or `s`), the limit and the window in milliseconds and
/// what the request counts there (`Unit::amount`: 1, or a file's kibibytes on a fixed window
/// of bytes), then how many of the first keys are the client's own (all when missing). Returns
/// `{admitted, refusing rule (1-based), wait ms, now ms, used_1, reset_1, used_2, ...}`, a
/// pair per key read: every key, or only the client's own when they refused by themselves.
pub const SCRIPT: &str = include_str!("redis/decide.lua");

/// SHA-1 of [`SCRIPT`], as `EVALSHA` names it (tests/fastcgi.rs checks it against the server's
/// `SCRIPT LOAD`).
pub const SCRIPT_SHA1: &str = "3f6e6176fae92c1766b9fc3fb8dbd409a713a253";

/// SHA-1 of [`REFUND_SCRIPT`].
pub const REFUND_SCRIPT_SHA1: &str = "6239abfd513a653d73eeec52ce739e436ccd7345";

/// Takes back one request admitted at `ARGV[1]` (ms) from each key, or charges a file's size
/// to it after the answer; `ARGV[1 + i]` is key i's change: `f` (one request from a fixed
/// window), `s` (one record from a sliding one), `+N` (N kibibytes added to a fixed window).
/// A fixed window is changed only if it started no later (the same window: an ended one has
/// expired).
pub const REFUND_SCRIPT: &str = include_str!("redis/refund.lua");

/// The lines of [`SCRIPT`] that read the server's clock, and what [`script_at`] puts in their
/// place.
const SCRIPT_CLOCK: &str = "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n";
const SCRIPT_GIVEN_CLOCK: &str = "local now = tonumber(ARGV[4 * #KEYS + 2])\n";

/// [`SCRIPT`] deciding at a time it is given (the `ARGV` after `own`) instead of the server's
/// `TIME`: a Redis Cluster decides a request in steps, one slot each, and the steps after the
/// first decide at the first one's time, so that the request has one time in every key (what
/// a refund names) whatever the nodes' clocks.
pub fn script_at() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| SCRIPT.replacen(SCRIPT_CLOCK, SCRIPT_GIVEN_CLOCK, 1))
}

/// SHA-1 of [`script_at`].
pub const SCRIPT_AT_SHA1: &str = "22461503050695011ec7ca833b2a73cfacb9f594";

pub struct RedisStore {
    settings: RedisSettings,
    conn: RefCell<Option<Connection>>,
    /// A Redis Cluster's map and connections; None for a single Redis.
    cluster: Option<RefCell<Cluster>>,
}

/// A count of milliseconds from the script (never negative in a well-formed answer).
fn ms(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Turns the script's answer into a decision, for `checks` of which the first `own` are the
/// client's own: a refusal by those alone tells of them only.
pub fn decision_from(
    reply: &Reply,
    checks: &[Check<'_>],
    own: usize,
) -> Result<Decision, OddReply> {
    let Reply::Array(Some(items)) = reply else {
        return Err(OddReply(format!("the script answered {reply:?}")));
    };
    let ints: Vec<i64> = items
        .iter()
        .map(|i| match i {
            Reply::Int(v) => Ok(*v),
            other => Err(OddReply(format!(
                "the script answered {other:?} among numbers"
            ))),
        })
        .collect::<Result<_, _>>()?;
    let own = own.min(checks.len());
    let refused_by_own =
        ints.len() == 4 + 2 * own && ints[0] == 0 && (1..=own as i64).contains(&ints[1]);
    let read = if refused_by_own { own } else { checks.len() };
    if ints.len() != 4 + 2 * read {
        return Err(OddReply(format!(
            "the script answered {} numbers for {} keys",
            ints.len(),
            checks.len()
        )));
    }
    let statuses = checks[..read]
        .iter()
        .enumerate()
        .map(|(i, c)| RuleStatus {
            remaining: c
                .rule
                .limit
                .get()
                .saturating_sub(u32::try_from(ints[4 + 2 * i]).unwrap_or(u32::MAX)),
            reset_ms: ms(ints[5 + 2 * i]),
            shared: false,
        })
        .collect();
    if ints[0] == 1 {
        return Ok(Decision::Admit {
            statuses,
            at_ms: u64::try_from(ints[3]).unwrap_or(0),
        });
    }
    let rule = usize::try_from(ints[1] - 1)
        .ok()
        .filter(|r| *r < read)
        .ok_or_else(|| OddReply("the script named no refusing rule".into()))?;
    Ok(Decision::Refuse {
        rule,
        wait_ms: ms(ints[2]),
        statuses,
    })
}

impl RedisStore {
    pub fn new(settings: RedisSettings) -> RedisStore {
        let cluster = settings.is_cluster().then(|| {
            let mut seeds = Vec::new();
            if let resp::Target::Tcp { host, port } = &settings.target {
                seeds.push(node_name(host, *port));
            }
            for (host, port) in &settings.cluster_nodes {
                let node = node_name(host, *port);
                if !seeds.contains(&node) {
                    seeds.push(node);
                }
            }
            RefCell::new(Cluster::new(
                seeds,
                settings.username.clone(),
                settings.password.clone(),
                settings.connect_timeout,
                settings.read_timeout,
                match &settings.target {
                    resp::Target::Tls { ca_file, .. } => Some(ca_file.clone()),
                    _ => None,
                },
            ))
        });
        RedisStore {
            settings,
            conn: RefCell::new(None),
            cluster,
        }
    }

    fn place(&self) -> String {
        self.settings.target.place()
    }

    /// Where the store is, as its log lines begin: `redis store at HOST:PORT`, or `redis
    /// cluster at SEED, SEED`.
    fn at(&self) -> String {
        if self.cluster.is_some() {
            let seeds: Vec<String> = self
                .settings
                .cluster_nodes
                .iter()
                .map(|(h, p)| node_name(h, *p))
                .collect();
            return format!("redis cluster at {}", seeds.join(", "));
        }
        format!("redis store at {}", self.place())
    }

    /// Sends `command` (opening and authenticating a connection first if needed, in the same
    /// write) and returns its reply. A connection that failed is dropped; the next call opens
    /// a new one, so the store recovers by itself when the server returns.
    fn call(&self, command: Vec<u8>) -> Result<Reply, StoreError> {
        let mut replies = self.exchange(std::slice::from_ref(&command), true)?;
        Ok(replies.pop().expect("one reply per command"))
    }

    /// Sends `commands` in one write (after AUTH and SELECT when the connection is new) and
    /// returns their replies, one round trip. An error reply fails the exchange, except
    /// `NOSCRIPT` to the last command when `noscript_ok`.
    fn exchange(&self, commands: &[Vec<u8>], noscript_ok: bool) -> Result<Vec<Reply>, StoreError> {
        if let Some(cluster) = &self.cluster {
            let units = cluster::units(commands);
            let replies = cluster.borrow_mut().exchange(&units).map_err(|f| match f {
                cluster::Failure::Connect(node, e) => {
                    self.io_error_at(&format!("redis cluster node {node}"), &e, Phase::Connect)
                }
                cluster::Failure::Exchange(node, e) => {
                    self.io_error_at(&format!("redis cluster node {node}"), &e, Phase::Exchange)
                }
                cluster::Failure::Refused(node, words) => StoreError::unavailable(format!(
                    "redis cluster node {node}: {words}{}",
                    auth_hint(&words)
                )),
            })?;
            self.no_error_in(&replies, noscript_ok)?;
            return Ok(replies);
        }
        let mut slot = self.conn.borrow_mut();
        // A connection kept from an earlier request (FastCGI) may have been closed by the server
        // since: if it turns out gone, the commands are sent once more on a new one. Commands
        // lost so never ran, or, if the server died after running them, run once more: a
        // decision counted twice, never one not counted.
        let mut kept = slot.is_some();
        loop {
            let mut sent = Vec::new();
            if slot.is_none() {
                let s = &self.settings;
                let conn = Connection::open(&s.target, s.connect_timeout, s.read_timeout)
                    .map_err(|e| self.io_error(&e, Phase::Connect))?;
                *slot = Some(conn);
                sent.extend(resp::auth(s.username.as_deref(), s.password.as_ref()));
                if s.db != 0 {
                    sent.push(resp::encode(&[b"SELECT", s.db.to_string().as_bytes()]));
                }
            }
            let setup = sent.len();
            sent.extend_from_slice(commands);
            let conn = slot.as_mut().expect("connected above");
            let mut replies = match conn.pipeline(&sent) {
                Ok(r) => r,
                Err(e) if kept && connection_gone(&e) => {
                    kept = false;
                    *slot = None;
                    continue;
                }
                Err(e) => {
                    *slot = None;
                    return Err(self.io_error(&e, Phase::Exchange));
                }
            };
            if let Err(e) = self.no_error_in(&replies, noscript_ok) {
                *slot = None;
                return Err(e);
            }
            return Ok(replies.split_off(setup));
        }
    }

    /// The first error among `replies`, as a store failure naming the store. With `noscript_ok`,
    /// a `NOSCRIPT` answer to the last command is none: the script cache is empty (a new or
    /// flushed server), the caller sends the script itself, and the connection is fine.
    fn no_error_in(&self, replies: &[Reply], noscript_ok: bool) -> Result<(), StoreError> {
        let last = replies.len().saturating_sub(1);
        for (i, reply) in replies.iter().enumerate() {
            if let Reply::Error(e) = reply {
                if noscript_ok && i == last && e.starts_with("NOSCRIPT") {
                    break;
                }
                return Err(StoreError::unavailable(format!(
                    "{}: {e}{}",
                    self.at(),
                    auth_hint(e)
                )));
            }
        }
        Ok(())
    }

    /// Runs a Lua script by its SHA-1 (`EVALSHA`), so that its text crosses the wire and is
    /// hashed by the server only when the server's script cache lacks it (`NOSCRIPT`); `EVAL`
    /// then runs it and caches it for every later request, from any process.
    fn eval(&self, script: &str, sha1: &str, rest: &[&[u8]]) -> Result<Reply, StoreError> {
        let mut args: Vec<&[u8]> = Vec::with_capacity(rest.len() + 2);
        args.push(b"EVALSHA");
        args.push(sha1.as_bytes());
        args.extend_from_slice(rest);
        match self.call(resp::encode(&args))? {
            Reply::Error(e) if e.starts_with("NOSCRIPT") => {
                args[0] = b"EVAL";
                args[1] = script.as_bytes();
                match self.call(resp::encode(&args))? {
                    Reply::Error(e) => Err(StoreError::unavailable(format!("{}: {e}", self.at()))),
                    reply => Ok(reply),
                }
            }
            reply => Ok(reply),
        }
    }

    /// A reply that is not what the command gives, as the store failure it is.
    fn odd(&self, what: impl std::fmt::Display) -> StoreError {
        StoreError::unavailable(format!("{}: {what}", self.at()))
    }

    /// The server's time, in milliseconds.
    fn server_ms(&self) -> Result<u64, StoreError> {
        let reply = self.call(resp::encode(&[b"TIME"]))?;
        journal::ms_from_time(&reply).map_err(|e| self.odd(e))
    }

    /// Runs a transaction (`MULTI` … `EXEC`) in one round trip.
    fn transaction(&self, commands: &[Vec<u8>]) -> Result<(), StoreError> {
        self.committed(commands).map(drop)
    }

    /// Runs a transaction; `EXEC`'s reply once every command ran.
    fn committed(&self, commands: &[Vec<u8>]) -> Result<Reply, StoreError> {
        let mut replies = self.exchange(commands, false)?;
        let exec = replies.pop().ok_or_else(|| self.odd("no reply to EXEC"))?;
        journal::committed(&exec).map_err(|e| self.odd(e))?;
        Ok(exec)
    }

    /// The client rows of `hours` whose hashes hold something.
    fn client_rows(
        &self,
        hours: &[(u32, i64)],
        out: &mut Vec<usage::Row>,
    ) -> Result<(), StoreError> {
        let (whole, big): (Vec<_>, Vec<_>) = hours
            .iter()
            .partition(|(_, len)| *len <= journal::WHOLE_HASH);
        let commands: Vec<Vec<u8>> = whole
            .iter()
            .map(|(h, _)| {
                resp::encode(&[
                    b"HGETALL",
                    journal::clients_key(*h, self.cluster.is_some()).as_bytes(),
                ])
            })
            .collect();
        if !commands.is_empty() {
            for ((hour, _), reply) in whole.iter().zip(self.exchange(&commands, false)?) {
                let fields = journal::pairs(&reply).map_err(|e| self.odd(e))?;
                journal::client_rows(*hour, fields, out);
            }
        }
        for (hour, _) in big {
            // Too many for one reply: a page at a time.
            let key = journal::clients_key(hour, self.cluster.is_some());
            let mut cursor = b"0".to_vec();
            loop {
                let reply = self.call(resp::encode(&[
                    b"HSCAN",
                    key.as_bytes(),
                    &cursor,
                    b"COUNT",
                    b"5000",
                ]))?;
                let Reply::Array(Some(mut parts)) = reply else {
                    return Err(self.odd("HSCAN answered no page"));
                };
                let (Some(page), Some(Reply::Bulk(Some(next)))) = (parts.pop(), parts.pop()) else {
                    return Err(self.odd("HSCAN answered no page"));
                };
                let fields = journal::pairs(&page).map_err(|e| self.odd(e))?;
                journal::client_rows(hour, fields, out);
                if next == b"0" {
                    break;
                }
                cursor = next;
            }
        }
        Ok(())
    }

    fn io_error(&self, e: &io::Error, phase: Phase) -> StoreError {
        self.io_error_at(&self.at(), e, phase)
    }

    /// [`RedisStore::io_error`] at `place` (a cluster's node).
    fn io_error_at(&self, place: &str, e: &io::Error, phase: Phase) -> StoreError {
        let hint = match (e.kind(), phase) {
            (io::ErrorKind::TimedOut, Phase::Connect) => {
                " (timed out: see store.connect_timeout_ms)"
            }
            (io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut, Phase::Exchange) => {
                " (timed out: see store.read_timeout_ms)"
            }
            (io::ErrorKind::WouldBlock, Phase::Connect) => " (is the server hung?)",
            (io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound, _) => {
                " (is the server running?)"
            }
            _ => "",
        };
        if let Some(tls) = crate::store::tls::explain(e, "the host in store.url") {
            return StoreError::unavailable(format!("redis store at {}: {tls}", self.place()));
        }
        // The parser's reasons are terse: say whose they are.
        if e.kind() == io::ErrorKind::InvalidData {
            return StoreError::unavailable(format!(
                "{place}: the server sent something that is not the Redis protocol ({e})"
            ));
        }
        StoreError::unavailable(format!("{place}: {e}{hint}"))
    }
}

/// Where an I/O error happened: connecting (bounded by `store.connect_timeout_ms`) or sending
/// commands and reading replies (bounded by `store.read_timeout_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connect,
    Exchange,
}

/// What to check when the server refused the credentials.
fn auth_hint(e: &str) -> &'static str {
    if e.starts_with("NOAUTH") || e.starts_with("WRONGPASS") || e.contains("invalid password") {
        " (check store.password and store.username)"
    } else {
        ""
    }
}

/// A node as `HOST:PORT` (`[ADDRESS]:PORT` for IPv6), as a cluster names its nodes.
fn node_name(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Whether `e` says that a kept connection is gone (closed or reset by the server) rather than
/// slow: a timeout is not retried, its time is spent.
fn connection_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::NotConnected
    )
}

impl RedisStore {
    /// Runs [`REFUND_SCRIPT`]: each key's change, for a request admitted at `at_ms`, in one
    /// atomic step.
    fn change(&self, changes: Vec<(&Check<'_>, String)>, at_ms: u64) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        if self.cluster.is_some() {
            // One script per slot: the keys of one client together, each site-wide key alone.
            let mut by_slot: Vec<(u16, Vec<(&Check<'_>, String)>)> = Vec::new();
            for (c, change) in changes {
                let s = slot::slot_of(c.key.as_bytes());
                match by_slot.iter_mut().find(|(t, _)| *t == s) {
                    Some((_, list)) => list.push((c, change)),
                    None => by_slot.push((s, vec![(c, change)])),
                }
            }
            for (_, list) in by_slot {
                self.change_one_slot(list, at_ms)?;
            }
            return Ok(());
        }
        self.change_one_slot(changes, at_ms)
    }

    /// [`RedisStore::change`] of keys that share a slot (all of them on a single Redis).
    fn change_one_slot(
        &self,
        changes: Vec<(&Check<'_>, String)>,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        let count = changes.len().to_string();
        let at = at_ms.to_string();
        let mut args: Vec<&[u8]> = vec![count.as_bytes()];
        args.extend(changes.iter().map(|(c, _)| c.key.as_bytes()));
        args.push(at.as_bytes());
        args.extend(changes.iter().map(|(_, change)| change.as_bytes()));
        self.eval(REFUND_SCRIPT, REFUND_SCRIPT_SHA1, &args)
            .map(|_| ())
    }
}

impl RedisStore {
    /// Runs the decision script over `checks` (their keys as the store writes them), the
    /// first `own` the client's own, at the server's time or, given `at`, at that time.
    fn run_decide(
        &self,
        checks: &[Check<'_>],
        own: usize,
        size: Option<u64>,
        at: Option<u64>,
    ) -> Result<Decision, StoreError> {
        let reply = self.decide_reply(checks, own, size, at, false)?;
        decision_from(&reply, checks, own)
            .map_err(|e| StoreError::unavailable(format!("{}: {e}", self.at())))
    }

    /// The decision script's reply over `checks` (see [`RedisStore::run_decide`]). A
    /// `peek` adds, last, a key of the first key's slot with a limit of 0 and a window of
    /// 1 ms: the script then refuses whatever the others say, so it writes nothing, and tells
    /// every key's count and the longest wait among those that refuse (longer than 1 ms).
    fn decide_reply(
        &self,
        checks: &[Check<'_>],
        own: usize,
        size: Option<u64>,
        at: Option<u64>,
        peek: bool,
    ) -> Result<Reply, StoreError> {
        let peek_key = peek.then(|| {
            let first = checks.first().map_or(&b""[..], |c| c.key.as_bytes());
            format!(
                "resolve:~peek:{{{}}}",
                String::from_utf8_lossy(slot::hashed_part(first))
            )
        });
        let count = (checks.len() + usize::from(peek)).to_string();
        let mut argv: Vec<String> = Vec::with_capacity(checks.len() * 4 + 2);
        for c in checks {
            argv.push(
                match c.rule.algorithm {
                    Algorithm::Fixed => "f",
                    Algorithm::Sliding => "s",
                }
                .to_owned(),
            );
            argv.push(c.rule.limit.get().to_string());
            argv.push(c.rule.window_ms().to_string());
            argv.push(c.rule.unit.amount(size).to_string());
        }
        if peek {
            argv.extend(["f", "0", "1", "1"].map(str::to_owned));
        }
        argv.push((own.min(checks.len()) + usize::from(peek)).to_string());
        argv.extend(at.map(|ms| ms.to_string()));
        let mut args: Vec<&[u8]> = vec![count.as_bytes()];
        args.extend(checks.iter().map(|c| c.key.as_bytes()));
        args.extend(peek_key.iter().map(|k| k.as_bytes()));
        args.extend(argv.iter().map(|a| a.as_bytes()));
        match at {
            None => self.eval(SCRIPT, SCRIPT_SHA1, &args),
            Some(_) => self.eval(script_at(), SCRIPT_AT_SHA1, &args),
        }
    }
}

impl Counters for RedisStore {
    fn decide_sized(
        &self,
        checks: &[Check<'_>],
        own: usize,
        size: Option<u64>,
    ) -> Result<Decision, StoreError> {
        if checks.is_empty() {
            return Ok(Decision::no_checks());
        }
        if self.cluster.is_some() {
            return self.decide_in_steps(checks, own, size);
        }
        self.run_decide(checks, own, size, None)
    }

    fn refund(&self, checks: &[Check<'_>], at_ms: u64) -> Result<(), StoreError> {
        let written = self.written(checks);
        let checks = written.as_ref();
        // A rule of bytes keeps what it counted.
        let changes = checks
            .iter()
            .filter(|c| c.rule.unit == Unit::Requests)
            .map(|c| match c.rule.algorithm {
                Algorithm::Fixed => (c, "f".to_owned()),
                Algorithm::Sliding => (c, "s".to_owned()),
            });
        self.change(changes.collect(), at_ms)
    }

    fn charge(&self, checks: &[Check<'_>], at_ms: u64, size: u64) -> Result<(), StoreError> {
        let written = self.written(checks);
        let checks = written.as_ref();
        let changes = checks.iter().filter_map(|c| {
            let amount = match (c.rule.unit, c.rule.algorithm) {
                (Unit::Bytes, Algorithm::Fixed) => c.rule.unit.amount(Some(size)),
                _ => 0,
            };
            (amount > 0).then(|| (c, format!("+{amount}")))
        });
        self.change(changes.collect(), at_ms)
    }

    fn used(&self, checks: &[Check<'_>]) -> Result<Vec<u32>, StoreError> {
        if checks.is_empty() {
            return Ok(Vec::new());
        }
        let written = self.written(checks);
        let checks = written.as_ref();
        // The time and each key's type, then a read of the keys of their rule's type (a key of
        // the other type is one a decision would start afresh: it counts nothing).
        let mut commands = vec![resp::encode(&[b"TIME"])];
        commands.extend(
            checks
                .iter()
                .map(|c| resp::encode(&[b"TYPE", c.key.as_bytes()])),
        );
        let replies = self.exchange(&commands, false)?;
        let now = journal::ms_from_time(&replies[0]).map_err(|e| self.odd(e))?;
        let mut reads = Vec::new();
        let mut read_for = Vec::with_capacity(checks.len());
        for (c, kind) in checks.iter().zip(&replies[1..]) {
            let key = c.key.as_bytes();
            let read = match (c.rule.algorithm, kind) {
                (Algorithm::Fixed, Reply::Simple(t)) if t == "hash" => {
                    Some(resp::encode(&[b"HMGET", key, b"s", b"c"]))
                }
                // Records within the window ending now, as the script counts them.
                (Algorithm::Sliding, Reply::Simple(t)) if t == "zset" => {
                    let after = format!("({}", now.saturating_sub(c.rule.window_ms()));
                    Some(resp::encode(&[b"ZCOUNT", key, after.as_bytes(), b"+inf"]))
                }
                _ => None,
            };
            read_for.push(read.is_some().then_some(reads.len()));
            reads.extend(read);
        }
        let read = if reads.is_empty() {
            Vec::new()
        } else {
            self.exchange(&reads, false)?
        };
        let number = |r: &Reply| -> Option<u64> {
            match r {
                Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).parse().ok(),
                Reply::Int(n) => u64::try_from(*n).ok(),
                _ => None,
            }
        };
        let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Ok(checks
            .iter()
            .zip(read_for)
            .map(|(c, at)| match (c.rule.algorithm, at.map(|i| &read[i])) {
                (Algorithm::Fixed, Some(Reply::Array(Some(v)))) if v.len() == 2 => {
                    let counter = number(&v[0]).zip(number(&v[1])).map(|(s, n)| Counter {
                        start_ms: s,
                        window_ms: c.rule.window_ms(),
                        count: clamp(n),
                    });
                    limiter::used(c.rule, &State::Fixed(counter), now)
                }
                (Algorithm::Sliding, Some(r)) => number(r).map_or(0, clamp),
                _ => 0,
            })
            .collect())
    }
}

impl Cache for RedisStore {
    fn cache_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self.call(resp::encode(&[b"GET", key.as_bytes()]))? {
            Reply::Bulk(value) => Ok(value),
            other => Err(StoreError::unavailable(format!(
                "{}: GET answered {other:?}",
                self.at()
            ))),
        }
    }

    fn cache_claim(&self, key: &str, value: &[u8], ttl: Duration) -> Result<bool, StoreError> {
        let ms = ttl.as_millis().max(1).to_string();
        let reply = self.call(resp::encode(&[
            b"SET",
            key.as_bytes(),
            value,
            b"NX",
            b"PX",
            ms.as_bytes(),
        ]))?;
        Ok(matches!(reply, Reply::Simple(ref ok) if ok == "OK"))
    }

    fn cache_release(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        let script = b"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
        self.call(resp::encode(&[
            b"EVAL",
            script,
            b"1",
            key.as_bytes(),
            value,
        ]))
        .map(|_| ())
    }

    fn cache_put(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError> {
        let ms = ttl.as_millis().max(1).to_string();
        self.call(resp::encode(&[
            b"SET",
            key.as_bytes(),
            value,
            b"PX",
            ms.as_bytes(),
        ]))
        .map(|_| ())
    }
}

impl Journal for RedisStore {
    fn journal_add(&self, entry: &usage::Entry) -> Result<(), StoreError> {
        let commands = journal::add_commands(entry, self.cluster.is_some());
        if commands.is_empty() {
            return Ok(());
        }
        self.transaction(&commands)
    }

    fn journal_rows(&self, from_hour: u32, to_hour: u32) -> Result<Vec<usage::Row>, StoreError> {
        let now = usage::hour_of(self.server_ms()?);
        let hours = journal::hours_held(from_hour, to_hour, now);
        let mut out = Vec::new();
        let mut start = hours.start;
        while start < hours.end {
            let end = hours.end.min(start.saturating_add(journal::HOURS_AT_ONCE));
            let mut commands = Vec::new();
            for hour in start..end {
                commands.push(resp::encode(&[
                    b"HGETALL",
                    journal::totals_key(hour, self.cluster.is_some()).as_bytes(),
                ]));
                commands.push(resp::encode(&[
                    b"HLEN",
                    journal::clients_key(hour, self.cluster.is_some()).as_bytes(),
                ]));
            }
            let replies = self.exchange(&commands, false)?;
            let mut with_clients = Vec::new();
            for (hour, pair) in (start..end).zip(replies.chunks(2)) {
                let [totals, Reply::Int(len)] = pair else {
                    return Err(self.odd(format!("HLEN answered {pair:?}")));
                };
                for (name, count) in journal::pairs(totals).map_err(|e| self.odd(e))? {
                    out.push(usage::Row::Total { hour, name, count });
                }
                if *len > 0 {
                    with_clients.push((hour, *len));
                }
            }
            self.client_rows(&with_clients, &mut out)?;
            start = end;
        }
        Ok(out)
    }
}

impl Notes for RedisStore {
    fn journal_note(&self, note: &usage::Note) -> Result<(), StoreError> {
        let exec = self.committed(&journal::note_commands(note))?;
        let dropped = journal::notes_dropped(&exec).map_err(|e| self.odd(e))?;
        if !dropped.is_empty() {
            self.exchange(&dropped, false)?;
        }
        Ok(())
    }

    fn journal_notes(&self) -> Result<Vec<usage::Note>, StoreError> {
        let last = (usage::KEEP_NOTES - 1).to_string();
        let reply = self.call(resp::encode(&[
            b"LRANGE",
            journal::notes_key().as_bytes(),
            b"0",
            last.as_bytes(),
        ]))?;
        journal::notes_from(&reply).map_err(|e| self.odd(e))
    }
}

impl Upkeep for RedisStore {
    fn sweep(&self, _budget: Option<Duration>) -> Result<SweepReport, StoreError> {
        // Every key expires by itself.
        Ok(SweepReport {
            complete: true,
            ..SweepReport::default()
        })
    }

    fn probe(&self) -> Result<String, StoreError> {
        let reply = self.call(resp::encode(&[b"INFO", b"server"]))?;
        let version = match reply {
            Reply::Bulk(Some(text)) => String::from_utf8_lossy(&text)
                .lines()
                .find_map(|l| l.strip_prefix("redis_version:").map(str::to_owned))
                .unwrap_or_default(),
            _ => String::new(),
        };
        let tls = match &self.cluster {
            Some(cluster) => cluster.borrow().tls(),
            None => self.conn.borrow().as_ref().and_then(Connection::tls),
        };
        let tls = tls.map(|t| format!(", {t}")).unwrap_or_default();
        let Some(cluster) = &self.cluster else {
            return Ok(format!(
                "{} (server {version}, database {}{tls})",
                self.at(),
                self.settings.db
            ));
        };
        let info = self.call(resp::encode(&[b"CLUSTER", b"INFO"]))?;
        let text = match info {
            Reply::Bulk(Some(text)) => String::from_utf8_lossy(&text).into_owned(),
            other => return Err(self.odd(format!("CLUSTER INFO answered {other:?}"))),
        };
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .unwrap_or("?")
                .trim()
                .to_owned()
        };
        let masters: Vec<String> = cluster
            .borrow()
            .masters()
            .iter()
            .map(|(node, ranges, slots)| format!("{node} slots {ranges} ({slots})"))
            .collect();
        Ok(format!(
            "{} (server {version}{tls}; cluster_state {}, {} of 16384 slots served, {} nodes known; masters: {})",
            self.at(),
            field("cluster_state"),
            field("cluster_slots_ok"),
            field("cluster_known_nodes"),
            masters.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests;
