//! A limit: how many requests (or bytes of files) one key may take per window, and what the
//! key is.

use std::fmt;
use std::num::NonZeroU32;

use serde::Serialize;

use crate::core::key::KeyTemplate;

/// What a rule counts requests by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    /// The client's address (an IPv6 client by its prefix).
    Ip,
    /// One counter for the whole site.
    Global,
    /// The client's API key (requests without one are not counted by such a rule).
    ApiKey,
}

impl KeyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyKind::Ip => "ip",
            KeyKind::Global => "global",
            KeyKind::ApiKey => "api_key",
        }
    }

    pub fn parse(s: &str) -> Option<KeyKind> {
        match s {
            "ip" => Some(KeyKind::Ip),
            "global" => Some(KeyKind::Global),
            "api_key" => Some(KeyKind::ApiKey),
            _ => None,
        }
    }
}

/// How a rule counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// A window that starts at a key's first request and holds `limit` requests.
    Fixed,
    /// At most `limit` requests in any `window_secs` ending now (exact; one record per request).
    Sliding,
}

impl Algorithm {
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Fixed => "fixed",
            Algorithm::Sliding => "sliding",
        }
    }

    pub fn parse(s: &str) -> Option<Algorithm> {
        match s {
            "fixed" => Some(Algorithm::Fixed),
            "sliding" => Some(Algorithm::Sliding),
            _ => None,
        }
    }
}

/// What a rule counts: requests, or the bytes of the files they resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Each admitted request counts 1.
    Requests,
    /// Each resolved file counts its size, in whole kibibytes ([`Unit::KIB`] bytes) rounded up,
    /// so that a day of files fits the stores' 32-bit counts (up to 4 TiB per window).
    Bytes,
}

impl Unit {
    /// The bytes a bytes rule counts as one.
    pub const KIB: u64 = 1024;

    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Requests => "requests",
            Unit::Bytes => "bytes",
        }
    }

    pub fn parse(s: &str) -> Option<Unit> {
        match s {
            "requests" => Some(Unit::Requests),
            "bytes" => Some(Unit::Bytes),
            _ => None,
        }
    }

    /// What a request counts on a rule of this unit: 1 for requests; for bytes the file's
    /// size in kibibytes rounded up, or 0 while the size is not known yet (then the request is
    /// admitted only below the limit, and its size charged after the answer).
    pub fn amount(self, size: Option<u64>) -> u32 {
        match self {
            Unit::Requests => 1,
            Unit::Bytes => size.map_or(0, kib_up),
        }
    }
}

/// `bytes` in whole kibibytes, rounded up (at most `u32::MAX`).
pub fn kib_up(bytes: u64) -> u32 {
    u32::try_from(bytes.div_ceil(Unit::KIB)).unwrap_or(u32::MAX)
}

/// A rule's name: 1 to 32 of `a-z 0-9 _ -`, so it is safe in keys, headers and logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct RuleName(String);

impl RuleName {
    pub const MAX_LEN: usize = 32;

    pub fn new(s: &str) -> Option<RuleName> {
        let ok = !s.is_empty()
            && s.len() <= Self::MAX_LEN
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        ok.then(|| RuleName(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RuleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A limit: at most `limit` requests (or kibibytes, for a bytes rule) per `window_secs` for
/// each key, counted by `algorithm`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub name: RuleName,
    pub key: KeyKind,
    pub algorithm: Algorithm,
    /// In the rule's unit: requests, or kibibytes for a bytes rule.
    pub limit: NonZeroU32,
    pub window_secs: NonZeroU32,
    /// What it counts.
    pub unit: Unit,
    /// How its keys are written in the store.
    pub key_template: KeyTemplate,
}

impl Rule {
    /// A rule counting requests from its parts; None when the name is not a valid rule name, a number is 0 or
    /// the template does not parse.
    pub fn new(
        name: &str,
        key: KeyKind,
        algorithm: Algorithm,
        limit: u32,
        window_secs: u32,
        key_template: &str,
    ) -> Option<Rule> {
        Some(Rule {
            name: RuleName::new(name)?,
            key,
            algorithm,
            limit: NonZeroU32::new(limit)?,
            window_secs: NonZeroU32::new(window_secs)?,
            unit: Unit::Requests,
            key_template: KeyTemplate::parse(key_template).ok()?,
        })
    }

    /// The limit as the configuration writes it: requests, or bytes for a rule of bytes.
    pub fn configured_limit(&self) -> u64 {
        match self.unit {
            Unit::Requests => u64::from(self.limit.get()),
            Unit::Bytes => u64::from(self.limit.get()) * Unit::KIB,
        }
    }

    /// The limit in words, as `resolve check` says it: `30 requests` (`counted` names what a
    /// request is), or `20000000000 bytes of files`.
    pub fn limit_words(&self, counted: &str) -> String {
        match self.unit {
            Unit::Requests => format!("{} {counted}", self.limit),
            Unit::Bytes => format!("{} bytes of files", self.configured_limit()),
        }
    }

    pub fn window_ms(&self) -> u64 {
        u64::from(self.window_secs.get()) * 1000
    }

    /// The store key of this rule for one identity (the client's address for `ip` rules, its
    /// API key's id for `api_key` rules; nothing for `global` ones), as its template writes it:
    /// e.g. `resolve:ip:203.0.113.7`, `resolve:k:key:partner`, or `resolve:203.0.113.7`.
    pub fn key_for(&self, identity: &str) -> String {
        self.key_template.expand(self.name.as_str(), identity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names_are_restricted() {
        assert!(RuleName::new("ip").is_some());
        assert!(RuleName::new("per-day_2").is_some());
        for bad in ["", "IP", "a b", "a\"b", "a:b", "a\nb", &"x".repeat(33)] {
            assert!(RuleName::new(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn sizes_count_in_whole_kibibytes_rounded_up() {
        for (size, want) in [
            (None, 0),
            (Some(0), 0),
            (Some(1), 1),
            (Some(1024), 1),
            (Some(1025), 2),
            (Some(10_000_000_000), 9_765_625),
            (Some(u64::MAX), u32::MAX),
        ] {
            assert_eq!(Unit::Bytes.amount(size), want, "{size:?}");
            assert_eq!(Unit::Requests.amount(size), 1, "{size:?}");
        }
    }

    #[test]
    fn limits_say_their_unit() {
        let mut r = Rule::new("ip", KeyKind::Ip, Algorithm::Fixed, 30, 60, "r:{ip}").unwrap();
        assert_eq!(r.limit_words("requests"), "30 requests");
        r.unit = Unit::Bytes;
        assert_eq!(r.limit_words("requests"), "30720 bytes of files");
    }

    #[test]
    fn keys_are_written_by_the_template() {
        use crate::support::defaults::{
            KEY_TEMPLATE_API_KEY, KEY_TEMPLATE_GLOBAL, KEY_TEMPLATE_IP,
        };
        for (name, kind, template, who, key) in [
            (
                "ip",
                KeyKind::Ip,
                KEY_TEMPLATE_IP,
                "203.0.113.7",
                "resolve:ip:203.0.113.7",
            ),
            (
                "site",
                KeyKind::Global,
                KEY_TEMPLATE_GLOBAL,
                "",
                "resolve:site:*",
            ),
            (
                "k",
                KeyKind::ApiKey,
                KEY_TEMPLATE_API_KEY,
                "partner",
                "resolve:k:key:partner",
            ),
            (
                "ip",
                KeyKind::Ip,
                "resolve:{ip}",
                "203.0.113.7",
                "resolve:203.0.113.7",
            ),
        ] {
            let rule = Rule::new(name, kind, Algorithm::Fixed, 30, 60, template).unwrap();
            assert_eq!(rule.key_for(who), key, "{template}");
        }
    }
}
