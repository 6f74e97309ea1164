//! What is left of a visitor's allowance, in words: read back from the `RateLimit-Policy` and
//! `RateLimit` headers the decision already wrote (the limit, what is left, the window), so the
//! words never disagree with the headers. "12 of 30 left this minute"; for a rule of bytes
//! (given in bytes, `qu="content-bytes"`) "3.2 GB of 20 GB left today". Pure.

use crate::core::rule::Unit;

/// One rule's state as the headers say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Left {
    pub rule: String,
    /// In the rule's unit: requests, or bytes for a rule of bytes.
    pub limit: u64,
    pub remaining: u64,
    pub window_secs: u64,
    /// Seconds until the window frees room again.
    pub reset_secs: u64,
    /// A rule of bytes: its policy's quota unit is `content-bytes`.
    pub bytes: bool,
}

/// The quota unit of a rule of bytes in `RateLimit-Policy`.
pub const BYTES_UNIT: &str = "\"content-bytes\"";

/// `"name";k=v;k=v` items of a structured header list, as (name, parameters as written).
fn items(value: &str) -> Vec<(String, Vec<(String, String)>)> {
    value
        .split(',')
        .filter_map(|item| {
            let mut parts = item.trim().split(';');
            let name = parts.next()?.trim().trim_matches('"').to_owned();
            let params = parts
                .filter_map(|p| {
                    let (k, v) = p.trim().split_once('=')?;
                    Some((k.to_owned(), v.to_owned()))
                })
                .collect();
            (!name.is_empty()).then_some((name, params))
        })
        .collect()
}

fn param_text<'p>(params: &'p [(String, String)], key: &str) -> Option<&'p str> {
    params
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn param(params: &[(String, String)], key: &str) -> Option<u64> {
    param_text(params, key)?.parse().ok()
}

/// Each rule named in both headers (`policy`: `RateLimit-Policy`, `state`: `RateLimit`).
pub fn read(policy: &str, state: &str) -> Vec<Left> {
    let policies = items(policy);
    items(state)
        .into_iter()
        .filter_map(|(rule, now)| {
            let (_, p) = policies.iter().find(|(n, _)| *n == rule)?;
            Some(Left {
                limit: param(p, "q")?,
                window_secs: param(p, "w")?,
                remaining: param(&now, "r")?,
                reset_secs: param(&now, "t").unwrap_or(0),
                bytes: param_text(p, "qu") == Some(BYTES_UNIT),
                rule,
            })
        })
        .collect()
}

/// The states of several answers of one visitor as one: for each rule the least left (the
/// state after the last of them was counted).
pub fn merge(all: impl IntoIterator<Item = Left>) -> Vec<Left> {
    let mut merged: Vec<Left> = Vec::new();
    for left in all {
        match merged.iter_mut().find(|m| m.rule == left.rule) {
            Some(m) if left.remaining < m.remaining => *m = left,
            Some(_) => {}
            None => merged.push(left),
        }
    }
    merged
}

/// "this minute", "this hour", "today", or "in any 90 seconds".
pub fn window_words(secs: u64) -> String {
    match secs {
        60 => "this minute".into(),
        3600 => "this hour".into(),
        86_400 => "today".into(),
        604_800 => "this week".into(),
        s if s % 86_400 == 0 => format!("in any {} days", s / 86_400),
        s if s % 3600 == 0 => format!("in any {} hours", s / 3600),
        s if s % 60 == 0 => format!("in any {} minutes", s / 60),
        s => format!("in any {s} seconds"),
    }
}

/// The sentence a visitor reads: "12 of 30 left this minute", or in bytes for a rule of
/// bytes ("3.2 GB of 20 GB left today").
pub fn words(left: &Left, unit: Unit) -> String {
    let window = window_words(left.window_secs);
    match unit {
        Unit::Requests => format!("{} of {} left {window}", left.remaining, left.limit),
        Unit::Bytes => format!(
            "{} of {} left {window}",
            about(left.remaining),
            about(left.limit)
        ),
    }
}

/// `bytes` as [`bytes_words`] writes them, to the nearest tenth of their unit: a limit counted
/// in whole kibibytes (19,999,997,952 bytes for 20 GB) reads as the owner wrote it.
fn about(bytes: u64) -> String {
    let unit = [1_000_000_000_000u64, 1_000_000_000, 1_000_000, 1_000]
        .into_iter()
        .find(|u| bytes >= *u);
    bytes_words(bytes.saturating_add(unit.map_or(0, |u| u / 20)), false)
}

/// `bytes` in decimal units (kB, MB, GB, TB) with at most one decimal, rounded up (`up`) or
/// down: a file's size, a limit, what is left of one.
pub fn bytes_words(bytes: u64, up: bool) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000_000, "TB"),
        (1_000_000_000, "GB"),
        (1_000_000, "MB"),
        (1_000, "kB"),
    ];
    let Some(&(unit, name)) = UNITS.iter().find(|(unit, _)| bytes >= *unit) else {
        return format!("{bytes} bytes");
    };
    let tenth = unit / 10;
    let tenths = if up {
        bytes.div_ceil(tenth)
    } else {
        bytes / tenth
    };
    match tenths % 10 {
        0 => format!("{} {name}", tenths / 10),
        d => format!("{}.{d} {name}", tenths / 10),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_back_from_the_headers() {
        let left = read(
            "\"per-minute\";q=30;w=60, \"daily-bytes\";q=20000000000;w=86400;qu=\"content-bytes\"",
            "\"per-minute\";r=12;t=41, \"daily-bytes\";r=3200000000;t=80000",
        );
        assert_eq!(left.len(), 2);
        assert_eq!(
            left[0],
            Left {
                rule: "per-minute".into(),
                limit: 30,
                remaining: 12,
                window_secs: 60,
                reset_secs: 41,
                bytes: false
            }
        );
        assert!(left[1].bytes);
        assert_eq!(words(&left[0], Unit::Requests), "12 of 30 left this minute");
        assert_eq!(words(&left[1], Unit::Bytes), "3.2 GB of 20 GB left today");
        // A limit counted in whole kibibytes reads as written, at its start too.
        let kib = read(
            "\"b\";q=19999997952;w=86400;qu=\"content-bytes\"",
            "\"b\";r=19999997952;t=86400",
        );
        assert_eq!(words(&kib[0], Unit::Bytes), "20 GB of 20 GB left today");
        // A rule missing from either header is left out; nonsense is skipped.
        assert!(read("\"a\";q=1;w=60", "\"b\";r=0;t=1").is_empty());
        assert!(read("garbage", "\"a\";r=x").is_empty());
    }

    #[test]
    fn several_answers_leave_the_least() {
        let at = |remaining| Left {
            rule: "m".into(),
            limit: 30,
            remaining,
            window_secs: 60,
            reset_secs: 60,
            bytes: false,
        };
        let merged = merge([at(5), at(3), at(4)]);
        assert_eq!(merged, vec![at(3)]);
    }

    #[test]
    fn windows_in_words() {
        assert_eq!(window_words(3600), "this hour");
        assert_eq!(window_words(86_400), "today");
        assert_eq!(window_words(7200), "in any 2 hours");
        assert_eq!(window_words(90), "in any 90 seconds");
    }
}
