//! Tests of the block and allow lists, automatic blocks, shadow rules and untrusted networks,
//! one request at a time on a store in memory.

use std::cell::Cell;
use std::path::Path;
use std::time::Duration;

use crate::app::App;
use crate::app::controls::blocks;
use crate::config::Config;
use crate::core::clock::{Clock, FakeClock};
use crate::core::journal::{self, Figures};
use crate::http::request::Env;
use crate::provider::resolved::Resolved;
use crate::provider::{Meter, Provider, ProviderError};
use crate::store::journal::Journal;
use crate::store::memory::MemoryStore;
use crate::store::roles::Store;
use crate::support::log::MemoryLog;

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

fn config(text: &str) -> Config {
    Config::from_json(text, Path::new("/nonexistent")).unwrap()
}

/// When every bench starts: 2023-11-14T22:13:20Z.
const START_MS: u64 = 1_700_000_000_000;

/// A configuration, a store in memory and the requests' clock, which is the store's: it moves
/// only when a test moves it.
struct Bench {
    cfg: Config,
    store: MemoryStore<FakeClock>,
    /// The same store, as requests hold it.
    whole: Store,
    provider: Counting,
    log: MemoryLog,
}

impl Bench {
    fn new(cfg: &str) -> Bench {
        let store = MemoryStore::new(FakeClock::at(START_MS), Duration::ZERO);
        Bench {
            cfg: config(cfg),
            whole: store.as_store(),
            store,
            provider: Counting(Cell::new(0)),
            log: MemoryLog::default(),
        }
    }

    /// A rule of `limit` requests a minute per address, and a block of an hour for an address
    /// refused `refusals` times within ten minutes.
    fn auto_blocking(limit: u32, refusals: u32) -> Bench {
        Bench::new(&format!(
            r#"{{"rules": [{{"name": "ip", "key": "ip", "limit": {limit}, "window_secs": 60}}],
                "auto_block": {{"refusals": {refusals}, "window_secs": 600, "block_secs": 3600}}}}"#
        ))
    }

    fn app(&self) -> App<'_> {
        App {
            config: &self.cfg,
            store: &self.whole,
            provider: Some(&self.provider),
            others: &[],
            log: &self.log,
            clock: self.store.clock(),
            workers: None,
            site_check: None,
            turn: None,
        }
    }

    fn ask(&self, env: Env) -> u16 {
        self.app()
            .handle(&env, &mut std::io::empty())
            .response
            .status
    }

    fn clock(&self) -> &FakeClock {
        self.store.clock()
    }

    fn from(&self, addr: &str) -> u16 {
        self.ask(get(addr))
    }

    fn figures(&self) -> Figures {
        let now = journal::hour_of(self.clock().now_ms());
        let rows = self.store.journal_rows(now - 1, now + 2).unwrap();
        Figures::from_rows(&rows, now - 1, now + 2)
    }

    fn lines(&self, containing: &str) -> usize {
        self.log
            .lines
            .borrow()
            .iter()
            .filter(|l| l.contains(containing))
            .count()
    }
}

fn get(addr: &str) -> Env {
    Env::method("GET")
        .with("QUERY_STRING", "link=https%3A%2F%2Fhost.example%2Ff")
        .with("REMOTE_ADDR", addr)
}

#[test]
fn listed_addresses_and_ranges_get_403_before_anything_is_counted() {
    let b = Bench::new(
        r#"{"rules": [{"name": "ip", "key": "ip", "limit": 100, "window_secs": 60}],
            "block": ["192.0.2.7", "198.51.100.0/24", "2001:db8:bad::/48", "2001:db8:cafe::7"]}"#,
    );
    for addr in [
        "192.0.2.7",
        "198.51.100.200",
        "2001:db8:bad:1::9",
        "2001:db8:cafe::7",
        "::ffff:192.0.2.7",
    ] {
        for _ in 0..3 {
            assert_eq!(b.from(addr), 403, "{addr}");
        }
    }
    assert_eq!(b.provider.0.get(), 0, "nothing spent");
    // Four clients (the mapped address is 192.0.2.7): only their log throttles' keys.
    assert_eq!(b.store.key_count(), 4, "no counter");
    assert_eq!(b.from("192.0.2.8"), 200);
    assert_eq!(b.from("2001:db8:bad0::1"), 200);
    assert_eq!(b.from("2001:db8:cafe::8"), 200, "the address, not its /64");
    // One line per client per minute.
    assert_eq!(
        b.lines("blocked, it is in the configuration's block list"),
        4
    );
    assert_eq!(b.figures().blocked, 15);
    // The answer is one sentence, whatever the client accepts.
    let sentence = "Requests from your address are blocked on this service.";
    let answer = |accept: &str| {
        let env = get("2001:db8:cafe::7").with("HTTP_ACCEPT", accept);
        b.app().handle(&env, &mut std::io::empty()).response
    };
    let text = answer("text/plain");
    assert_eq!(text.status, 403);
    assert_eq!(String::from_utf8_lossy(&text.body), format!("{sentence}\n"));
    let json: serde_json::Value = serde_json::from_slice(&answer("application/json").body).unwrap();
    assert_eq!(
        (json["code"].as_str(), json["detail"].as_str()),
        (Some("blocked"), Some(sentence))
    );
}

/// An allowed client, past its `ip` rule, against a global rule, an `api_key` rule and a spend
/// limit: each still refuses it, and each alone (the others are out of reach).
#[test]
fn allowed_clients_skip_ip_rules_but_not_the_others() {
    let allow = r#""allow": ["203.0.113.0/24", "2001:db8:1::/48", "192.0.2.200", "2001:db8:2::5"]"#;
    let ip = r#"{"name": "ip", "key": "ip", "limit": 2, "window_secs": 60}"#;
    let four =
        |b: &Bench, env: &dyn Fn() -> Env| -> Vec<u16> { (0..4).map(|_| b.ask(env())).collect() };

    let global = Bench::new(&format!(
        r#"{{"rules": [{ip}, {{"name": "all", "key": "global", "limit": 5, "window_secs": 60}}], {allow}}}"#
    ));
    assert_eq!(
        four(&global, &|| get("203.0.113.9")),
        [200; 4],
        "no ip limit for the office"
    );
    assert_eq!(global.from("2001:db8:1:2::1"), 200);
    assert_eq!(
        global.from("203.0.113.10"),
        429,
        "the site-wide limit holds"
    );
    assert_eq!(global.figures().refused["all"], 1);

    let per_key = Bench::new(&format!(
        r#"{{"rules": [{ip}, {{"name": "per-key", "key": "api_key", "limit": 3, "window_secs": 60}}], {allow}}}"#
    ));
    let keyed = || get("203.0.113.9").with("HTTP_X_API_KEY", "partner-key");
    assert_eq!(
        four(&per_key, &keyed),
        [200, 200, 200, 429],
        "the key's limit holds"
    );
    assert_eq!(per_key.figures().refused["per-key"], 1);
    assert_eq!(
        four(&per_key, &|| get("203.0.113.9")),
        [200; 4],
        "no ip limit without the key"
    );

    let spend = Bench::new(&format!(
        r#"{{"rules": [{ip}], "spend": [{{"name": "day", "limit": 5, "window_secs": 86400}}], {allow}}}"#
    ));
    let statuses: Vec<u16> = (0..6).map(|_| spend.from("203.0.113.9")).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 503], "the budget holds");
    assert_eq!(spend.provider.0.get(), 5);

    // Single addresses of both families are allowed, their neighbours are not.
    let b = Bench::new(&format!(r#"{{"rules": [{ip}], {allow}}}"#));
    for addr in ["192.0.2.200", "2001:db8:2::5"] {
        assert_eq!(four(&b, &|| get(addr)), [200; 4], "{addr}");
    }
    for addr in ["192.0.2.201", "2001:db8:2::6", "198.51.100.1"] {
        let statuses: Vec<u16> = (0..3).map(|_| b.from(addr)).collect();
        assert_eq!(statuses, [200, 200, 429], "{addr} keeps its ip limit");
    }
}

#[test]
fn blocks_in_the_store_refuse_until_they_end_or_are_lifted() {
    let b = Bench::new(r#"{}"#);
    let now = b.clock().now_ms();
    let block = |range: &str, until_ms| blocks::Block {
        range: crate::net::cidr::Cidr::parse(range).unwrap(),
        until_ms,
        reason: "scraper".into(),
        auto: false,
    };
    blocks::update(&b.store, None, now, |l| {
        let l = blocks::with(l, block("192.0.2.0/24", Some(now + 60_000)), now);
        (
            blocks::with(l, block("198.51.100.1", Some(now - 1)), now),
            (),
        )
    })
    .unwrap();
    assert_eq!(b.from("192.0.2.50"), 403);
    assert_eq!(b.from("198.51.100.1"), 200, "an ended block");
    assert_eq!(b.lines("by resolve block: scraper"), 1);
    blocks::update(&b.store, None, now, |l| {
        blocks::without(
            l,
            crate::net::cidr::Cidr::parse("192.0.2.0/24").unwrap(),
            now,
        )
    })
    .unwrap();
    assert_eq!(b.from("192.0.2.50"), 200, "lifted");
}

#[test]
fn auto_block_triggers_at_exactly_the_threshold() {
    let b = Bench::auto_blocking(2, 5);
    let statuses: Vec<u16> = (0..9).map(|_| b.from("192.0.2.9")).collect();
    // Two admitted, five refusals (the fifth blocks), then 403.
    assert_eq!(statuses, [200, 200, 429, 429, 429, 429, 429, 403, 403]);
    let list = blocks::read(&b.store).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].range.to_string(), "192.0.2.9/32");
    assert!(list[0].auto);
    assert_eq!(list[0].until_ms, Some(START_MS + 3_600_000));
    assert_eq!(
        b.lines("blocked 192.0.2.9 for 3600 s: 5 refusals within 600 s"),
        1
    );
    let f = b.figures();
    assert_eq!((f.auto_blocks, f.blocked), (1, 2));
    assert_eq!(f.refused["ip"], 5);
    assert_eq!(b.from("192.0.2.10"), 200, "others are not blocked");
}

#[test]
fn rotating_addresses_cannot_flush_an_automatic_block() {
    let b = Bench::auto_blocking(1, 2);
    // The block that matters.
    for _ in 0..3 {
        b.from("192.0.2.9");
    }
    assert_eq!(b.from("192.0.2.9"), 403);
    // 505 /64s of one /48, each refused twice: the /48 is blocked after three of them, and
    // the list holds two blocks, not 506.
    let mut statuses = Vec::new();
    for i in 0..505u32 {
        let from = format!("2001:db8:7:{i:x}::1");
        for _ in 0..3 {
            statuses.push(b.from(&from));
        }
    }
    let list = blocks::read(&b.store).unwrap();
    assert_eq!(
        list.iter().map(|b| b.range.to_string()).collect::<Vec<_>>(),
        vec!["192.0.2.9/32", "2001:db8:7::/48"]
    );
    assert_eq!(b.from("192.0.2.9"), 403, "still blocked");
    assert_eq!(b.from("2001:db8:7:ffff::1"), 403, "the whole /48");
    assert!(statuses.iter().filter(|s| **s == 403).count() > 1_400);
    // Addresses of one /24 that each stay below the threshold (one refusal each): counted by
    // their network, which is blocked at four times the threshold.
    for i in 1..=8 {
        let from = format!("198.51.100.{i}");
        assert_eq!(b.from(&from), 200);
        assert_eq!(b.from(&from), 429);
    }
    assert_eq!(b.from("198.51.100.200"), 403);
    assert_eq!(
        b.lines("blocked 198.51.100.0/24 for 3600 s: 8 refusals of its addresses within 600 s"),
        1
    );
}

/// `auto_block` counts the refusals of the rules that count the client (`ip`, `api_key`), not
/// those of a busy site's `global` rules, which refuse everyone alike.
#[test]
fn auto_block_counts_refusals_by_the_clients_own_rules_only() {
    let auto = r#""auto_block": {"refusals": 3, "window_secs": 600, "block_secs": 3600}"#;
    let busy = Bench::new(&format!(
        r#"{{"rules": [{{"name": "ip", "key": "ip", "limit": 100, "window_secs": 60}},
                       {{"name": "site", "key": "global", "limit": 2, "window_secs": 60}}], {auto}}}"#
    ));
    let statuses: Vec<u16> = (0..10).map(|_| busy.from("192.0.2.1")).collect();
    assert_eq!(statuses, [200, 200, 429, 429, 429, 429, 429, 429, 429, 429]);
    for visitor in ["192.0.2.2", "2001:db8::1"] {
        let statuses: Vec<u16> = (0..5).map(|_| busy.from(visitor)).collect();
        assert_eq!(statuses, [429; 5], "{visitor} is not blocked");
    }
    assert!(blocks::read(&busy.store).unwrap().is_empty());
    let f = busy.figures();
    assert_eq!((f.auto_blocks, f.refused["site"]), (0, 18));

    // Refused by its ip rule and the site's at once (the site's, with the longer wait, is the
    // one named): a refusal of its own.
    let both = Bench::new(&format!(
        r#"{{"rules": [{{"name": "ip", "key": "ip", "limit": 2, "window_secs": 60}},
                       {{"name": "site", "key": "global", "limit": 3, "window_secs": 3600}}], {auto}}}"#
    ));
    let mut statuses: Vec<u16> = (0..4).map(|_| both.from("192.0.2.1")).collect();
    statuses.push(both.from("192.0.2.2"));
    statuses.extend((0..3).map(|_| both.from("192.0.2.1")));
    assert_eq!(statuses, [200, 200, 429, 429, 200, 429, 403, 403]);
    let f = both.figures();
    assert_eq!(
        (f.refused["ip"], f.refused["site"], f.auto_blocks),
        (2, 1, 1)
    );

    // An api_key rule counts the client too.
    let keyed = Bench::new(&format!(
        r#"{{"rules": [{{"name": "ip", "key": "ip", "limit": 100, "window_secs": 60}},
                       {{"name": "per-key", "key": "api_key", "limit": 1, "window_secs": 60}}], {auto}}}"#
    ));
    let statuses: Vec<u16> = (0..5)
        .map(|_| keyed.ask(get("192.0.2.9").with("HTTP_X_API_KEY", "partner-key")))
        .collect();
    assert_eq!(statuses, [200, 429, 429, 429, 403]);
    assert_eq!(
        blocks::read(&keyed.store).unwrap()[0].range.to_string(),
        "192.0.2.9/32"
    );
}

#[test]
fn a_shadow_rule_refuses_nothing_and_reports_what_it_would_have() {
    let b = Bench::new(
        r#"{"rules": [{"name": "ip", "key": "ip", "limit": 100, "window_secs": 60},
                      {"name": "tight", "key": "ip", "limit": 10, "window_secs": 60, "mode": "shadow"}]}"#,
    );
    let app = b.app();
    let mut remaining = Vec::new();
    for _ in 0..50 {
        let a = app.handle(&get("192.0.2.1"), &mut std::io::empty());
        assert_eq!(a.response.status, 200);
        remaining.push(
            a.response
                .header_value("RateLimit")
                .unwrap_or("")
                .to_owned(),
        );
    }
    assert_eq!(b.provider.0.get(), 50, "nothing refused");
    assert!(
        remaining.iter().all(|h| !h.contains("tight")),
        "no header of the shadow rule: {remaining:?}"
    );
    assert!(
        remaining[49].contains("r=50"),
        "the enforced rule counts alone: {}",
        remaining[49]
    );
    let f = b.figures();
    assert_eq!(f.would_refuse["tight"], 40);
    assert!(f.refused.is_empty());
    assert_eq!(b.lines("shadow rule tight would have refused 192.0.2.1"), 1);
    // Another client has its own count.
    assert_eq!(b.from("192.0.2.2"), 200);
    assert_eq!(b.figures().would_refuse["tight"], 40);
}

#[test]
fn cloudflare_edges_are_clients_of_their_own_until_trusted() {
    let untrusted =
        Bench::new(r#"{"rules": [{"name": "ip", "key": "ip", "limit": 2, "window_secs": 60}]}"#);
    let edge = |b: &Bench, visitor: &str| {
        b.ask(get("173.245.48.1").with("HTTP_CF_CONNECTING_IP", visitor))
    };
    let statuses: Vec<u16> = ["203.0.113.1", "203.0.113.2", "203.0.113.3"]
        .iter()
        .map(|v| edge(&untrusted, v))
        .collect();
    assert_eq!(
        statuses,
        [200, 200, 429],
        "every visitor shares the edge's count"
    );
    assert_eq!(untrusted.figures().untrusted_networks["cloudflare"], 3);

    let trusted = Bench::new(
        r#"{"rules": [{"name": "ip", "key": "ip", "limit": 2, "window_secs": 60}],
            "client": {"trusted_proxies": ["cloudflare"]}}"#,
    );
    for visitor in ["203.0.113.1", "203.0.113.2", "203.0.113.3"] {
        assert_eq!(edge(&trusted, visitor), 200, "{visitor}");
    }
    // A forged header from elsewhere is ignored.
    let forged =
        |b: &Bench| b.ask(get("198.51.100.9").with("HTTP_CF_CONNECTING_IP", "203.0.113.50"));
    let statuses: Vec<u16> = (0..3).map(|_| forged(&trusted)).collect();
    assert_eq!(statuses, [200, 200, 429]);
    let f = trusted.figures();
    assert!(f.untrusted_networks.is_empty());
    assert!(f.clients.iter().any(|c| c.client == "198.51.100.9"));
    assert!(!f.clients.iter().any(|c| c.client == "203.0.113.50"));
}
