//! Where counters live: what every store speaks of (a check, a sweep's report) and its errors.
//! Below: the store's roles, each a small trait (the counters, the cache, the journal, its
//! notes, the upkeep, and the block list any cache holds), the store a site holds with a piece for each
//! role (`roles`), the backends that serve every role (files, MySQL, Redis, memory) and the
//! pieces a process puts in front of them (a spooled journal, a FastCGI process's memory, a
//! server's memory of refusals for every CGI process).

pub mod answers;
pub mod block_copy;
pub mod block_list;
pub mod cache;
pub mod counters;
pub mod fields;
pub mod file;
pub mod held;
pub mod journal;
#[cfg(any(test, feature = "memory-store"))]
pub mod memory;
pub mod mysql;
pub mod notes;
pub mod redis;
pub mod refusals;
pub mod roles;
pub mod settings;
pub mod spool;
pub mod tls;
pub mod upkeep;

use std::fmt;

use crate::core::rule::Rule;

/// One rule applied to one key, e.g. rule `ip` on `resolve:ip:203.0.113.7`.
#[derive(Debug, Clone)]
pub struct Check<'a> {
    pub rule: &'a Rule,
    pub key: String,
}

/// What names a request's checks: each rule (with its algorithm, unit, limit and window) and
/// key. A change of a rule names other checks, so that nothing remembered of the old ones
/// applies. Written without the formatting machinery: a refused request builds it.
pub(crate) fn checks_key(checks: &[Check<'_>]) -> String {
    let mut key = String::with_capacity(checks.len() * 80);
    for c in checks {
        let r = c.rule;
        for part in [r.name.as_str(), r.algorithm.as_str(), r.unit.as_str()] {
            key.push_str(part);
            key.push('\0');
        }
        for n in [r.limit.get(), r.window_secs.get()] {
            push_decimal(&mut key, n);
            key.push('\0');
        }
        key.push_str(&c.key);
        key.push('\u{1}');
    }
    key
}

/// `n` in decimal at the end of `out`.
fn push_decimal(out: &mut String, n: u32) {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[at..].iter().map(|&d| char::from(d)));
}

/// What a sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub scanned: u64,
    pub removed: u64,
    /// Damaged entries found and moved aside.
    pub damaged: u64,
    /// False when the time budget ran out before everything was looked at.
    pub complete: bool,
}

/// What kind of failure a store had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// The store could not be reached or written (missing directory, permissions, full disk).
    Unavailable,
    /// Stored data could not be read back.
    Corrupt,
}

/// A store failure, with a detail meant for the owner's log (never for the client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    pub kind: StoreErrorKind,
    pub detail: String,
}

impl StoreError {
    pub fn unavailable(detail: impl Into<String>) -> StoreError {
        StoreError {
            kind: StoreErrorKind::Unavailable,
            detail: detail.into(),
        }
    }

    pub fn corrupt(detail: impl Into<String>) -> StoreError {
        StoreError {
            kind: StoreErrorKind::Corrupt,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

impl std::error::Error for StoreError {}

#[cfg(test)]
mod tests {
    #[test]
    fn checks_are_named_by_every_part_of_their_rules_and_keys() {
        use crate::core::rule::{Algorithm, KeyKind, Rule};
        let rule = |limit, window| {
            let ip = crate::support::defaults::KEY_TEMPLATE_IP;
            Rule::new("ip", KeyKind::Ip, Algorithm::Fixed, limit, window, ip).unwrap()
        };
        let (a, b) = (rule(30, 60), rule(3, 600));
        let named = |r: &Rule, key: &str| {
            super::checks_key(&[super::Check {
                rule: r,
                key: key.into(),
            }])
        };
        assert_eq!(
            named(&a, "ip:1"),
            "ip\x00fixed\x00requests\x0030\x0060\x00ip:1\u{1}"
        );
        assert_eq!(
            named(&b, "ip:1"),
            "ip\x00fixed\x00requests\x003\x00600\x00ip:1\u{1}"
        );
        let max = rule(u32::MAX, 1);
        assert_eq!(
            named(&max, ""),
            "ip\x00fixed\x00requests\x004294967295\x001\x00\u{1}"
        );
    }

    use super::*;

    #[test]
    fn an_error_says_its_detail_and_keeps_its_kind() {
        let e = StoreError::unavailable("cannot open /data: permission denied");
        assert_eq!(e.to_string(), "cannot open /data: permission denied");
        assert_eq!(e.kind, StoreErrorKind::Unavailable);
        assert_eq!(
            StoreError::corrupt("bad record").kind,
            StoreErrorKind::Corrupt
        );
        let boxed: Box<dyn std::error::Error> = Box::new(e);
        assert!(boxed.source().is_none());
    }
}
