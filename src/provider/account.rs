//! The owner's provider account as data: where a description asks about it (its `account`
//! section), the facts an answer gives (premium or not, premium until, fair use spent, host
//! quotas), a reading kept as a small JSON value (never the token), when it is due again,
//! and the `ACTION NEEDED` lines it gives. Pure: the call itself is made elsewhere.

use serde_json::{Map, Value, json};

use crate::core::calendar;
use crate::support::show;
use crate::support::text;

/// A day, in milliseconds: a good reading is asked for again after it.
pub const READ_EVERY_MS: u64 = 86_400_000;
/// An hour: a failed reading is tried again after it, at the earliest.
pub const RETRY_FAILED_MS: u64 = 3_600_000;
/// Premium ending within this many days is written as `ACTION NEEDED`.
pub const WARN_DAYS_LEFT: i64 = 7;
/// Fair use spent past this share is written as `ACTION NEEDED`.
pub const WARN_FAIR_USE: f64 = 0.8;
/// The most host quotas a reading keeps.
pub const MAX_HOST_QUOTAS: usize = 50;

/// What a fair-use value counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Share {
    /// 0 to 1 spent.
    UsedFraction,
    /// 0 to 100 spent.
    UsedPercent,
    /// 0 to 1 still left.
    LeftFraction,
}

impl Share {
    /// The unit's name in a description.
    pub fn from_name(name: &str) -> Option<Share> {
        match name {
            "used_fraction" => Some(Share::UsedFraction),
            "used_percent" => Some(Share::UsedPercent),
            "left_fraction" => Some(Share::LeftFraction),
            _ => None,
        }
    }
}

/// Where the fair use is in the answer, and what it counts.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FairUse {
    pub pointer: String,
    pub unit: Share,
}

/// A test on the account's answer: the value at `pointer` equals `equals` (as a step's
/// `success`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ValueTest {
    pub pointer: String,
    pub equals: Value,
}

impl ValueTest {
    pub fn holds(&self, v: &Value) -> bool {
        v.pointer(&self.pointer) == Some(&self.equals)
    }
}

/// The description's `account` section: one authenticated GET, and where its answer keeps
/// each fact. Every pointer is optional: a fact the answer does not give stays unknown.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AccountCall {
    /// Where the account is: a template (`{base}` and `{token}` filled in when it is read).
    pub url: String,
    /// Header name and template.
    #[serde(serialize_with = "show::pairs")]
    pub headers: Vec<(String, String)>,
    /// Beyond a 2xx status, what the answer must hold to be a reading.
    pub success: Option<ValueTest>,
    /// The account is premium when this holds (and not premium when the pointer is there
    /// and it does not).
    pub premium: Option<ValueTest>,
    /// When premium ends: seconds since 1970, or a date as text (`2026-12-11T10:00:00.000Z`).
    pub premium_until: Option<String>,
    /// Seconds of premium left.
    pub premium_seconds_left: Option<String>,
    pub fair_use: Option<FairUse>,
    /// An object of host name to what is left of its quota.
    pub host_quotas: Option<String>,
}

/// What one reading of the account says.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountFacts {
    pub premium: Option<bool>,
    pub premium_until_ms: Option<u64>,
    /// 0 to 1 of the fair use (or traffic) spent.
    pub fair_use_used: Option<f64>,
    /// Host name and what is left of its quota, as the provider wrote it.
    pub host_quotas: Vec<(String, String)>,
}

/// A reading kept: the facts, or why there are none, and when.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    Read { at_ms: u64, facts: AccountFacts },
    Failed { at_ms: u64, reason: String },
}

/// A spend limit scaled down past a share of fair use: unchanged while `used` (0 to 1 spent)
/// is at most `share`; past it, in proportion to the fair use left beyond the share:
/// `limit × (1 − used) / (1 − share)`, rounded down, at least 1. With a share of 0.8, a limit of
/// 100 is 50 at 90% spent and 1 at 100%.
pub fn tightened(limit: u32, used: f64, share: f64) -> u32 {
    // NaN compares false both ways: an unknown share or fair use changes nothing.
    let past = used > share && share < 1.0;
    if !past {
        return limit;
    }
    let left = ((1.0 - used.min(1.0)) / (1.0 - share)).clamp(0.0, 1.0);
    ((f64::from(limit) * left).floor() as u32).max(1)
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|n| n.is_finite())
}

/// Milliseconds since 1970 of `2026-12-11`, `2026-12-11T10:00:00Z` or
/// `2026-12-11T10:00:00.000+01:00` (an offset is taken into account).
pub fn parse_date(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = |s: &str| -> Option<i64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let (y, m, d) = (
        digits(t.get(0..4)?)?,
        digits(t.get(5..7)?)?,
        digits(t.get(8..10)?)?,
    );
    if t.get(4..5)? != "-"
        || t.get(7..8)? != "-"
        || !(1..=12).contains(&m)
        || !(1..=31).contains(&d)
    {
        return None;
    }
    let mut secs = calendar::day_of_date(y, m as u32, d as u32) * 86_400;
    let rest = &t[10..];
    if let Some(time) = rest.strip_prefix('T').or_else(|| rest.strip_prefix(' ')) {
        let (h, mi, s) = (
            digits(time.get(0..2)?)?,
            digits(time.get(3..5)?)?,
            digits(time.get(6..8)?)?,
        );
        if h > 23 || mi > 59 || s > 60 {
            return None;
        }
        secs += h * 3600 + mi * 60 + s;
        let zone = time[8..].trim_start_matches(|c: char| c == '.' || c.is_ascii_digit());
        if let Some(sign @ ('+' | '-')) = zone.chars().next() {
            let oh = digits(zone.get(1..3)?)?;
            let om = digits(zone.get(3..).map(|z| z.trim_start_matches(':'))?).unwrap_or(0);
            let offset = oh * 3600 + om * 60;
            secs += if sign == '+' { -offset } else { offset };
        }
    }
    u64::try_from(secs).ok().map(|s| s * 1000)
}

impl AccountCall {
    /// The facts an answer gives, read at `now_ms`; None when it gives none of them.
    pub fn facts(&self, v: &Value, now_ms: u64) -> Option<AccountFacts> {
        let premium = self
            .premium
            .as_ref()
            .and_then(|t| v.pointer(&t.pointer).map(|found| *found == t.equals));
        let until = self
            .premium_until
            .as_ref()
            .and_then(|p| v.pointer(p))
            .and_then(|u| match u {
                Value::String(s) if s.trim().parse::<f64>().is_err() => parse_date(s),
                other => number(other)
                    .filter(|n| *n > 0.0)
                    .map(|n| (n as u64).saturating_mul(1000)),
            });
        let left = self
            .premium_seconds_left
            .as_ref()
            .and_then(|p| v.pointer(p))
            .and_then(number)
            .map(|n| now_ms.saturating_add((n.max(0.0) as u64).saturating_mul(1000)));
        let fair_use_used = self.fair_use.as_ref().and_then(|f| {
            let n = number(v.pointer(&f.pointer)?)?;
            let used = match f.unit {
                Share::UsedFraction => n,
                Share::UsedPercent => n / 100.0,
                Share::LeftFraction => 1.0 - n,
            };
            Some(used.clamp(0.0, 1.0))
        });
        let host_quotas = self
            .host_quotas
            .as_ref()
            .and_then(|p| v.pointer(p))
            .and_then(Value::as_object)
            .map(quotas)
            .unwrap_or_default();
        let facts = AccountFacts {
            premium,
            premium_until_ms: until.or(left).filter(|&ms| ms > 0),
            fair_use_used,
            host_quotas,
        };
        (facts.premium.is_some()
            || facts.premium_until_ms.is_some()
            || facts.fair_use_used.is_some()
            || !facts.host_quotas.is_empty())
        .then_some(facts)
    }
}

fn quotas(m: &Map<String, Value>) -> Vec<(String, String)> {
    m.iter()
        .filter_map(|(host, left)| {
            let left = match left {
                Value::Number(n) => n.to_string(),
                Value::String(s) => s.clone(),
                _ => return None,
            };
            Some((text::one_line(host, 80), text::one_line(&left, 40)))
        })
        .take(MAX_HOST_QUOTAS)
        .collect()
}

impl AccountFacts {
    /// Whole days of premium left at `now_ms` (0 on the last day, negative once ended).
    pub fn days_left(&self, now_ms: u64) -> Option<i64> {
        self.premium_until_ms
            .map(|until| (until as i64 - now_ms as i64).div_euclid(86_400_000))
    }

    /// The `ACTION NEEDED` lines this reading gives at `now_ms`: not premium, premium ending
    /// within [`WARN_DAYS_LEFT`] days, fair use past [`WARN_FAIR_USE`].
    pub fn warnings(&self, now_ms: u64) -> Vec<String> {
        let mut out = Vec::new();
        let ended = self.days_left(now_ms).is_some_and(|d| d < 0);
        if self.premium == Some(false) || ended {
            out.push(
                "ACTION NEEDED: the provider account is not premium: paid links fail until it is renewed; renew it on the provider's site"
                    .to_owned(),
            );
        } else if let Some(days) = self.days_left(now_ms).filter(|d| *d < WARN_DAYS_LEFT) {
            let until = calendar::date(self.premium_until_ms.unwrap_or(now_ms));
            let when = match days {
                0 => "today".to_owned(),
                1 => "tomorrow".to_owned(),
                n => format!("in {n} days"),
            };
            out.push(format!(
                "ACTION NEEDED: the provider account's premium ends {when} ({until}); renew it on the provider's site before then"
            ));
        }
        if let Some(used) = self.fair_use_used.filter(|u| *u > WARN_FAIR_USE) {
            out.push(format!(
                "ACTION NEEDED: the provider account's fair use is {:.0}% spent: links will be refused when it is all spent; it refills over time (see the account on the provider's site)",
                used * 100.0
            ));
        }
        out
    }
}

impl Reading {
    pub fn at_ms(&self) -> u64 {
        match self {
            Reading::Read { at_ms, .. } | Reading::Failed { at_ms, .. } => *at_ms,
        }
    }

    /// Whether the account should be read again at `now_ms`: a day after a reading, an hour
    /// after a failure (a clock set back counts as due).
    pub fn due(&self, now_ms: u64) -> bool {
        let wait = match self {
            Reading::Read { .. } => READ_EVERY_MS,
            Reading::Failed { .. } => RETRY_FAILED_MS,
        };
        now_ms < self.at_ms() || now_ms - self.at_ms() >= wait
    }

    /// The lines an owner is told; none for a failed reading (its reason is shown apart).
    pub fn warnings(&self, now_ms: u64) -> Vec<String> {
        match self {
            Reading::Read { facts, .. } => facts.warnings(now_ms),
            Reading::Failed { .. } => Vec::new(),
        }
    }

    /// The reading in one line for the report: premium until, days left, fair use, host
    /// quotas, when read; or why it could not be read.
    pub fn summary(&self, now_ms: u64) -> String {
        match self {
            Reading::Failed { at_ms, reason } => {
                format!("could not be read ({}): {reason}", calendar::iso(*at_ms))
            }
            Reading::Read { at_ms, facts } => {
                let mut parts = Vec::new();
                match (facts.premium, facts.premium_until_ms) {
                    (Some(false), _) => parts.push("not premium".to_owned()),
                    (_, Some(until)) => parts.push(format!(
                        "premium until {} ({} days left)",
                        calendar::date(until),
                        facts.days_left(now_ms).unwrap_or(0).max(0)
                    )),
                    (Some(true), None) => parts.push("premium".to_owned()),
                    (None, None) => {}
                }
                if let Some(used) = facts.fair_use_used {
                    parts.push(format!("fair use {:.0}% spent", used * 100.0));
                }
                if !facts.host_quotas.is_empty() {
                    let quotas: Vec<String> = facts
                        .host_quotas
                        .iter()
                        .map(|(h, l)| format!("{h} {l}"))
                        .collect();
                    parts.push(format!("host quotas left: {}", quotas.join(", ")));
                }
                parts.push(format!("read {}", calendar::iso(*at_ms)));
                parts.join(", ")
            }
        }
    }

    /// The reading as kept in the data directory.
    pub fn to_json(&self) -> Value {
        match self {
            Reading::Read { at_ms, facts } => json!({
                "read_at": calendar::iso(*at_ms),
                "read_at_ms": at_ms,
                "premium": facts.premium,
                "premium_until": facts.premium_until_ms.map(calendar::iso),
                "premium_until_ms": facts.premium_until_ms,
                "fair_use_used": facts.fair_use_used,
                "host_quotas": facts.host_quotas.iter()
                    .map(|(h, l)| json!({"host": h, "left": l})).collect::<Vec<_>>(),
            }),
            Reading::Failed { at_ms, reason } => json!({
                "read_at": calendar::iso(*at_ms),
                "read_at_ms": at_ms,
                "failed": reason,
            }),
        }
    }

    /// A kept reading read back; None when it is not one.
    pub fn from_json(v: &Value) -> Option<Reading> {
        let at_ms = v.get("read_at_ms")?.as_u64()?;
        if let Some(reason) = v.get("failed").and_then(Value::as_str) {
            return Some(Reading::Failed {
                at_ms,
                reason: reason.to_owned(),
            });
        }
        let host_quotas = v
            .get("host_quotas")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|q| {
                Some((
                    q.get("host")?.as_str()?.to_owned(),
                    q.get("left")?.as_str()?.to_owned(),
                ))
            })
            .take(MAX_HOST_QUOTAS)
            .collect();
        Some(Reading::Read {
            at_ms,
            facts: AccountFacts {
                premium: v.get("premium").and_then(Value::as_bool),
                premium_until_ms: v.get("premium_until_ms").and_then(Value::as_u64),
                fair_use_used: v
                    .get("fair_use_used")
                    .and_then(Value::as_f64)
                    .map(|u| u.clamp(0.0, 1.0)),
                host_quotas,
            },
        })
    }
}

#[cfg(test)]
mod tests;
