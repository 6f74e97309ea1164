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
    use std::cell::Cell;

    use crate::app::App;
    use crate::core::clock::FakeClock;
    use crate::http::request::Env;
    use crate::provider::resolved::Resolved;
    use crate::provider::{Meter, Provider, ProviderError};
    use crate::store::memory::MemoryStore;
    use crate::store::roles::Store;
    use crate::support::log::MemoryLog;

    /// A provider that answers every link with itself, counting its calls.
    struct Counting(Cell<usize>);

    impl Provider for Counting {
        fn resolve(&self, link: &str, _: &dyn Meter) -> Result<Resolved, ProviderError> {
            self.0.set(self.0.get() + 1);
            Ok(Resolved {
                size: None,
                download: link.to_owned(),
                filename: None,
                files: Vec::new(),
            })
        }
    }

    /// When the bench starts: 2023-11-14T22:13:20Z.
    const START_MS: u64 = 1_700_000_000_000;

    /// A configuration, a store in memory and the requests' clock, which is the store's: it
    /// moves only when the test moves it; requests answered by the request service.
    struct Bench {
        cfg: Config,
        store: MemoryStore<FakeClock>,
        whole: Store,
        provider: Counting,
        log: MemoryLog,
    }

    impl Bench {
        fn new(cfg: &str) -> Bench {
            let store = MemoryStore::new(FakeClock::at(START_MS), Duration::ZERO);
            Bench {
                cfg: Config::from_json(cfg, Path::new("/nonexistent")).unwrap(),
                whole: store.as_store(),
                store,
                provider: Counting(Cell::new(0)),
                log: MemoryLog::default(),
            }
        }

        fn clock(&self) -> &FakeClock {
            self.store.clock()
        }

        /// The status of a request for a link from `addr`.
        fn from(&self, addr: &str) -> u16 {
            let app = App {
                config: &self.cfg,
                store: &self.whole,
                provider: Some(&self.provider),
                others: &[],
                log: &self.log,
                clock: self.store.clock(),
                workers: None,
                site_check: None,
                turn: None,
            };
            let env = Env::method("GET")
                .with("QUERY_STRING", "link=https%3A%2F%2Fhost.example%2Ff")
                .with("REMOTE_ADDR", addr);
            app.handle(&env, &mut std::io::empty()).response.status
        }
    }

    #[test]
    fn a_block_for_24h_holds_to_its_last_millisecond_and_blocks_lists_its_end_and_reason() {
        const DAY_MS: u64 = 24 * 3_600_000;
        let b = Bench::new(
            r#"{"rules": [{"name": "ip", "key": "ip", "limit": 100, "window_secs": 60}]}"#,
        );
        let command = |verb, target, duration, reason| {
            let asked = Asked {
                duration,
                reason,
                wide: false,
            };
            command(&b.store, None, b.clock(), verb, target, &asked).unwrap()
        };
        let listing = || listing(&b.store, &b.cfg, b.clock()).unwrap();
        assert_eq!(
            command("block", "192.0.2.0/24", Some("24h"), Some("scraper")),
            "blocked 192.0.2.0/24 until 2023-11-15T22:13:20Z (UTC)"
        );
        assert_eq!(
            command("block", "2001:db8::7", None, None),
            "blocked 2001:db8::7/128 until `resolve unblock 2001:db8::7/128`"
        );
        let listed = listing();
        let lines: Vec<&str> = listed.lines().collect();
        assert_eq!(
            lines[..2],
            [
                format!(
                    "{:<43} until 2023-11-15T22:13:20Z resolve block: scraper",
                    "192.0.2.0/24"
                ),
                format!(
                    "{:<43} {:<26} resolve block: blocked by the owner",
                    "2001:db8::7/128", "until unblocked"
                ),
            ],
            "{listed}"
        );
        b.clock().set_ms(START_MS + DAY_MS - 1);
        assert_eq!(b.from("192.0.2.9"), 403, "a millisecond before its end");
        assert!(listing().contains("192.0.2.0/24"));
        b.clock().set_ms(START_MS + DAY_MS);
        assert_eq!(b.from("192.0.2.9"), 200, "ended at 24 h");
        assert!(!listing().contains("192.0.2.0/24"), "{}", listing());
        assert_eq!(b.from("2001:db8::7"), 403, "no end");
        assert_eq!(b.from("2001:db8::8"), 200, "one address, not its /64");
    }

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
