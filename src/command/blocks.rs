//! `resolve block`, `resolve unblock` and `resolve blocks`: the owner's temporary blocks from
//! the command line (the list itself is the request service's, see
//! `crate::app::controls::blocks`).

use std::path::Path;
use std::time::Duration;

use crate::app::controls::blocks::{Block, FOREVER, clean_reason, read, update, with, without};
use crate::app::controls::reach::{self, List};
use crate::config::Config;
use crate::core::calendar;
use crate::core::clock::Clock;
use crate::net::cidr::Cidr;
use crate::store::StoreError;
use crate::store::cache::Cache;

/// `--for 24h`: a duration of seconds, minutes, hours or days (`90s`, `30m`, `24h`, `7d`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let err = || format!("--for {text:?} is not a duration: write e.g. 90s, 30m, 24h or 7d");
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let n: u64 = number.parse().map_err(|_| err())?;
    let secs = match unit {
        "s" => n,
        "m" => n.checked_mul(60).ok_or_else(err)?,
        "h" => n.checked_mul(3600).ok_or_else(err)?,
        "d" => n.checked_mul(86_400).ok_or_else(err)?,
        _ => return Err(err()),
    };
    if secs == 0 || secs > FOREVER.as_secs() {
        return Err(err());
    }
    Ok(Duration::from_secs(secs))
}

/// What `resolve block` was asked besides the range.
#[derive(Debug, Default, Clone, Copy)]
pub struct Asked<'a> {
    /// `--for`: how long (none: until unblocked).
    pub duration: Option<&'a str>,
    /// `--reason`.
    pub reason: Option<&'a str>,
    /// `--wide`: the owner means a range wider than the dashboard may block.
    pub wide: bool,
}

/// `resolve block` and `resolve unblock` at the time `clock` tells: the line to print, or what
/// went wrong. A block the dashboard would not take (wider than its limit, every address) is
/// refused unless `--wide` says it is meant, the same rule the dashboard's settings apply.
pub fn command(
    store: &dyn Cache,
    copy: Option<&Path>,
    clock: &dyn Clock,
    verb: &str,
    target: &str,
    asked: &Asked<'_>,
) -> Result<String, String> {
    let range = Cidr::parse(target).ok_or_else(|| {
        format!("{target:?} is not an address or range: write e.g. 203.0.113.7, 203.0.113.0/24 or 2001:db8::/48")
    })?;
    let now = clock.now_ms();
    let failed = |e: StoreError| format!("the store could not be changed: {e}");
    if verb == "unblock" {
        let had = update(store, copy, now, |list| without(list, range, now)).map_err(failed)?;
        return Ok(if had {
            format!("unblocked {range}")
        } else {
            format!("{range} was not blocked (`resolve blocks` lists the blocks)")
        });
    }
    if !asked.wide
        && let Some(concern) = reach::judge(List::Block, &range, None)
    {
        return Err(format!(
            "not blocked: {}. To block it all the same: resolve block {range} --wide",
            concern.describe()
        ));
    }
    let until_ms = asked
        .duration
        .map(parse_duration)
        .transpose()?
        .map(|d| now.saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)));
    let block = Block {
        range,
        until_ms,
        reason: clean_reason(asked.reason.unwrap_or("blocked by the owner")),
        auto: false,
    };
    update(store, copy, now, |list| (with(list, block, now), ())).map_err(failed)?;
    Ok(match until_ms {
        Some(ms) => format!("blocked {range} until {} (UTC)", calendar::iso(ms)),
        None => format!("blocked {range} until `resolve unblock {range}`"),
    })
}

/// `resolve blocks`: the store's blocks in force at the time `clock` tells, then the
/// configuration's lists.
pub fn listing(store: &dyn Cache, config: &Config, clock: &dyn Clock) -> Result<String, String> {
    let now = clock.now_ms();
    let list = read(store).map_err(|e| format!("the store could not be read: {e}"))?;
    let live: Vec<&Block> = list.iter().filter(|b| b.live_at(now)).collect();
    let mut out = String::new();
    if live.is_empty() {
        out.push_str("No blocks in the store.\n");
    }
    for b in live {
        let until = b.until_ms.map_or("until unblocked".to_owned(), |ms| {
            format!("until {}", calendar::iso(ms))
        });
        let by = if b.auto {
            "auto_block"
        } else {
            "resolve block"
        };
        out.push_str(&format!(
            "{:<43} {until:<26} {by}: {}\n",
            b.range.to_string(),
            b.reason
        ));
    }
    let count = |set: &crate::net::addr_set::AddrSet| set.ranges().len();
    out.push_str(&format!(
        "The configuration also blocks {} and allows {} addresses or ranges (\"block\", \"allow\").\n",
        count(&config.block),
        count(&config.allow)
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        for bad in ["", "0h", "h", "24", "1w", "-1d", "99999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
