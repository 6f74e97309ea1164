//! The Redis store: every decision is one Lua script, run atomically by the server, that reads
//! every rule's key, decides with the server's clock (`TIME`) and writes, so no two requests
//! interleave and no crash can leave half a decision behind. Every key written gets its expiry
//! in the same script (no INCR-then-EXPIRE gap): fixed windows expire when they end, sliding
//! records when the newest leaves the window. Nothing needs sweeping.

pub mod resp;
pub mod settings;

use std::cell::RefCell;
use std::io;
use std::time::Duration;

use crate::core::decision::{Decision, RuleStatus};
use crate::core::rule::Algorithm;
use crate::store::redis::settings::RedisSettings;
use crate::store::{Check, Store, StoreError, SweepReport};
use resp::{Connection, Reply};

/// The decision, as the limiter in `limiter.rs` makes it, in Lua. ARGV holds, per key, the
/// algorithm (`f` or `s`), the limit and the window in milliseconds. Returns
/// `{admitted, refusing rule (1-based), wait ms, now ms, used_1, reset_1, used_2, ...}`.
pub const SCRIPT: &str = include_str!("redis/decide.lua");

/// SHA-1 of [`SCRIPT`], as `EVALSHA` names it (tests/fastcgi.rs checks it against the server's
/// `SCRIPT LOAD`).
pub const SCRIPT_SHA1: &str = "c4985e20ee84d979e346524de690c5e6aeb5846a";

/// SHA-1 of [`REFUND_SCRIPT`].
pub const REFUND_SCRIPT_SHA1: &str = "23908142cdb00e4657fc12006f3bd64f94ba0488";

/// Takes back one request admitted at `ARGV[1]` (ms) from each key; `ARGV[1 + i]` is key i's
/// algorithm. A fixed window counts it only if it started no later (the same window).
pub const REFUND_SCRIPT: &str = include_str!("redis/refund.lua");

pub struct RedisStore {
    settings: RedisSettings,
    conn: RefCell<Option<Connection>>,
}

fn ceil_secs(ms: i64) -> u32 {
    u32::try_from(ms.max(0).div_euclid(1000) + i64::from(ms.rem_euclid(1000) > 0))
        .unwrap_or(u32::MAX)
}

/// Turns the script's answer into a decision.
pub fn decision_from(reply: &Reply, checks: &[Check<'_>]) -> Result<Decision, String> {
    let Reply::Array(Some(items)) = reply else {
        return Err(format!("the script answered {reply:?}"));
    };
    let ints: Vec<i64> = items
        .iter()
        .map(|i| match i {
            Reply::Int(v) => Ok(*v),
            other => Err(format!("the script answered {other:?} among numbers")),
        })
        .collect::<Result<_, _>>()?;
    if ints.len() != 4 + 2 * checks.len() {
        return Err(format!(
            "the script answered {} numbers for {} keys",
            ints.len(),
            checks.len()
        ));
    }
    let statuses = checks
        .iter()
        .enumerate()
        .map(|(i, c)| RuleStatus {
            remaining: c
                .rule
                .limit
                .get()
                .saturating_sub(u32::try_from(ints[4 + 2 * i]).unwrap_or(u32::MAX)),
            reset_secs: ceil_secs(ints[5 + 2 * i]),
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
        .filter(|r| *r < checks.len())
        .ok_or("the script named no refusing rule")?;
    Ok(Decision::Refuse {
        rule,
        retry_after_secs: ceil_secs(ints[2]).max(1),
        statuses,
    })
}

impl RedisStore {
    pub fn new(settings: RedisSettings) -> RedisStore {
        RedisStore {
            settings,
            conn: RefCell::new(None),
        }
    }

    fn place(&self) -> String {
        match &self.settings.target {
            resp::Target::Tcp { host, port } => format!("{host}:{port}"),
            resp::Target::Unix { socket: p } => format!("socket {}", p.display()),
        }
    }

    /// Sends `command` (opening and authenticating a connection first if needed, in the same
    /// write) and returns its reply. A connection that failed is dropped; the next call opens
    /// a new one, so the store recovers by itself when the server returns.
    fn call(&self, command: Vec<u8>) -> Result<Reply, StoreError> {
        let mut slot = self.conn.borrow_mut();
        // A connection kept from an earlier request (FastCGI) may have been closed by the server
        // since: if it turns out gone, the command is sent once more on a new one. A command
        // lost so never ran, or, if the server died after running it, runs once more: a
        // decision counted twice, never one not counted.
        let mut kept = slot.is_some();
        loop {
            let mut commands = Vec::new();
            if slot.is_none() {
                let s = &self.settings;
                let conn = Connection::open(&s.target, s.connect_timeout, s.read_timeout)
                    .map_err(|e| self.io_error(&e, Phase::Connect))?;
                *slot = Some(conn);
                if let Some(pass) = &s.password {
                    let mut args: Vec<&[u8]> = vec![b"AUTH"];
                    if let Some(user) = &s.username {
                        args.push(user.as_bytes());
                    }
                    args.push(pass.expose().as_bytes());
                    commands.push(resp::encode(&args));
                }
                if s.db != 0 {
                    commands.push(resp::encode(&[b"SELECT", s.db.to_string().as_bytes()]));
                }
            }
            commands.push(command.clone());
            let conn = slot.as_mut().expect("connected above");
            let replies = match conn.pipeline(&commands) {
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
            let last = replies.len() - 1;
            for (i, reply) in replies.iter().enumerate() {
                if let Reply::Error(e) = reply {
                    // The script cache is empty (a new or flushed server): the caller sends
                    // the script itself; the connection is fine.
                    if i == last && e.starts_with("NOSCRIPT") {
                        break;
                    }
                    *slot = None;
                    let hint = if e.starts_with("NOAUTH")
                        || e.starts_with("WRONGPASS")
                        || e.contains("invalid password")
                    {
                        " (check store.password and store.username)"
                    } else {
                        ""
                    };
                    return Err(StoreError::unavailable(format!(
                        "redis store at {}: {e}{hint}",
                        self.place()
                    )));
                }
            }
            return Ok(replies.into_iter().last().expect("one reply per command"));
        }
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
                    Reply::Error(e) => Err(StoreError::unavailable(format!(
                        "redis store at {}: {e}",
                        self.place()
                    ))),
                    reply => Ok(reply),
                }
            }
            reply => Ok(reply),
        }
    }

    fn io_error(&self, e: &io::Error, phase: Phase) -> StoreError {
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
        // The parser's reasons are terse: say whose they are.
        if e.kind() == io::ErrorKind::InvalidData {
            return StoreError::unavailable(format!(
                "redis store at {}: the server sent something that is not the Redis protocol ({e})",
                self.place()
            ));
        }
        StoreError::unavailable(format!("redis store at {}: {e}{hint}", self.place()))
    }
}

/// Where an I/O error happened: connecting (bounded by `store.connect_timeout_ms`) or sending
/// commands and reading replies (bounded by `store.read_timeout_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connect,
    Exchange,
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

impl Store for RedisStore {
    fn decide(&self, checks: &[Check<'_>]) -> Result<Decision, StoreError> {
        if checks.is_empty() {
            return Ok(Decision::no_checks());
        }
        let count = checks.len().to_string();
        let mut argv: Vec<String> = Vec::with_capacity(checks.len() * 3);
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
        }
        let mut args: Vec<&[u8]> = vec![count.as_bytes()];
        args.extend(checks.iter().map(|c| c.key.as_bytes()));
        args.extend(argv.iter().map(|a| a.as_bytes()));
        let reply = self.eval(SCRIPT, SCRIPT_SHA1, &args)?;
        decision_from(&reply, checks)
            .map_err(|e| StoreError::unavailable(format!("redis store at {}: {e}", self.place())))
    }

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
        Ok(format!(
            "redis store at {} (server {version}, database {})",
            self.place(),
            self.settings.db
        ))
    }
    fn refund(&self, checks: &[Check<'_>], at_ms: u64) -> Result<(), StoreError> {
        if checks.is_empty() {
            return Ok(());
        }
        let count = checks.len().to_string();
        let at = at_ms.to_string();
        let mut args: Vec<&[u8]> = vec![count.as_bytes()];
        args.extend(checks.iter().map(|c| c.key.as_bytes()));
        args.push(at.as_bytes());
        args.extend(checks.iter().map(|c| match c.rule.algorithm {
            Algorithm::Fixed => &b"f"[..],
            Algorithm::Sliding => &b"s"[..],
        }));
        self.eval(REFUND_SCRIPT, REFUND_SCRIPT_SHA1, &args)
            .map(|_| ())
    }

    fn cache_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self.call(resp::encode(&[b"GET", key.as_bytes()]))? {
            Reply::Bulk(value) => Ok(value),
            other => Err(StoreError::unavailable(format!(
                "redis store at {}: GET answered {other:?}",
                self.place()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::rule::{KeyKind, Rule};

    #[test]
    fn script_answers_become_decisions() {
        let rule = Rule::new(
            "ip",
            KeyKind::Ip,
            Algorithm::Fixed,
            30,
            60,
            crate::defaults::KEY_TEMPLATE_IP,
        )
        .unwrap();
        let checks = [Check {
            rule: &rule,
            key: "k".into(),
        }];
        let ints = |v: &[i64]| Reply::Array(Some(v.iter().map(|i| Reply::Int(*i)).collect()));
        assert_eq!(
            decision_from(&ints(&[1, 0, 0, 5, 3, 59_001]), &checks).unwrap(),
            Decision::Admit {
                statuses: vec![RuleStatus {
                    remaining: 27,
                    reset_secs: 60
                }],
                at_ms: 5
            }
        );
        assert_eq!(
            decision_from(&ints(&[0, 1, 41_500, 5, 30, 41_500]), &checks).unwrap(),
            Decision::Refuse {
                rule: 0,
                retry_after_secs: 42,
                statuses: vec![RuleStatus {
                    remaining: 0,
                    reset_secs: 42
                }]
            }
        );
        assert!(decision_from(&ints(&[0, 2, 1, 5, 30, 1]), &checks).is_err());
        assert!(decision_from(&ints(&[1, 0, 0]), &checks).is_err());
        assert!(decision_from(&Reply::Simple("OK".into()), &checks).is_err());
    }

    fn store_at(port: u16) -> RedisStore {
        let text = format!(
            r#"{{"store": {{"kind": "redis", "host": "127.0.0.1", "port": {port},
                "connect_timeout_ms": 1000, "read_timeout_ms": 200}}}}"#
        );
        let config =
            crate::config::Config::from_json(&text, std::path::Path::new("/nonexistent")).unwrap();
        let crate::store::settings::StoreKind::Redis(settings) = config.store.kind else {
            panic!("not a redis store");
        };
        RedisStore::new(*settings)
    }

    #[test]
    fn timeouts_name_the_setting_that_bounds_them() {
        let s = store_at(6379);
        let connect = io::Error::new(io::ErrorKind::TimedOut, "no connection within 1000 ms");
        assert_eq!(
            s.io_error(&connect, Phase::Connect).detail,
            "redis store at 127.0.0.1:6379: no connection within 1000 ms (timed out: see store.connect_timeout_ms)"
        );
        for kind in [io::ErrorKind::WouldBlock, io::ErrorKind::TimedOut] {
            let read = s.io_error(&io::Error::new(kind, "x"), Phase::Exchange);
            assert!(
                read.detail
                    .ends_with(" (timed out: see store.read_timeout_ms)"),
                "{}",
                read.detail
            );
        }
        let refused = s.io_error(
            &io::Error::from(io::ErrorKind::ConnectionRefused),
            Phase::Connect,
        );
        assert!(refused.detail.ends_with(" (is the server running?)"));
        let garbage = io::Error::new(io::ErrorKind::InvalidData, "unknown reply type");
        assert_eq!(
            s.io_error(&garbage, Phase::Exchange).detail,
            "redis store at 127.0.0.1:6379: the server sent something that is not the Redis protocol (unknown reply type)"
        );
    }

    #[test]
    fn a_reply_without_its_line_end_is_a_read_timeout() {
        let (target, server) = resp::answering(b"garbage without a line end");
        let resp::Target::Tcp { port, .. } = target else {
            unreachable!("a loopback port")
        };
        let s = store_at(port);
        let e = s.call(resp::encode(&[b"PING"])).unwrap_err();
        assert_eq!(
            e.detail,
            format!(
                "redis store at 127.0.0.1:{port}: no complete reply within 200 ms (timed out: see store.read_timeout_ms)"
            )
        );
        assert!(!e.detail.contains("os error"));
        drop(s);
        server.join().unwrap();
    }
}
