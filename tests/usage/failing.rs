//! A usage journal that cannot be written changes no answer. The same traffic (admitted, cache
//! hits, 429s of both rules, HEADs, a spend refusal, provider failures that keep `ACTION
//! NEEDED` notes, a sweep at every request) goes to a site whose journal works and to one whose
//! journal fails; both get the same statuses and make the same provider calls, and the failing
//! one logs "the usage journal could not be written" exactly once, however many requests met
//! the failure within the minute.
//!
//! The file store's journal fails with its `journal/` directory replaced by a file. The Redis
//! store's fails with its journal keys holding strings, where the journal adds to hashes; its
//! data directory (`ratelimit/` beside the configuration, where the log keeps the time of its
//! last line) does not exist yet, as on a new installation, and is made by the first failure.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::config::rule;
use crate::support::redis::Resp;
use crate::support::system::now_ms;
use crate::support::{Redis, Site};
use crate::{Figured, ask, site_with};
use resolve::core::journal::hour_of;

/// The line a journal failure logs.
const FAILED: &str = "the usage journal could not be written";

/// Windows of an hour, so that both runs see the same windows however long they take.
fn rules() -> Vec<Value> {
    vec![rule("ip", "ip", 4, 3600), rule("all", "global", 40, 3600)]
}

/// Sends the traffic; the statuses, and the calls that reached the stand-in.
fn traffic(f: &Figured) -> (Vec<u16>, usize) {
    let site = &f.site;
    let mut statuses = vec![
        ask(site, "10.0.3.1", "GET", "fail/auth"),
        ask(site, "10.0.3.1", "GET", "fail/quota"),
    ];
    for i in 0..150 {
        let client = format!("10.0.3.{}", i % 11 + 2);
        let method = if i % 5 == 4 { "HEAD" } else { "GET" };
        statuses.push(ask(site, &client, method, &format!("ok-{}", i % 17)));
    }
    (statuses, site.provider.calls())
}

/// The journal's failure lines, once the failing journal was tried: a FastCGI process writes
/// its entries up to a second after its requests (about two when idle).
fn journal_lines(site: &Site, failing: bool) -> usize {
    if failing {
        site.apache.wait_for_log(FAILED, Duration::from_secs(20));
    }
    site.apache.settle_log();
    site.apache.error_log().matches(FAILED).count()
}

/// The store section with a sweep at every request, so that sweeps meet the failure too.
fn sweeping(mut store: Value) -> Value {
    store["sweep_one_in"] = json!(1);
    store
}

/// Runs the traffic through a working site and through one that `break_journal` broke before
/// its first request; the failing site, for more checks.
fn compare(
    label: &str,
    working: Value,
    failing: Value,
    break_journal: impl FnOnce(&Figured),
) -> Figured {
    let good = site_with(&format!("{label}-works"), Some(sweeping(working)), rules());
    let (statuses, calls) = traffic(&good);
    assert_eq!(
        journal_lines(&good.site, false),
        0,
        "{}",
        good.site.apache.error_log()
    );
    let s = crate::stats_of(&good.site, statuses.len() as u64);
    assert_eq!(
        s["requests"],
        statuses.len(),
        "the working journal counted every request"
    );
    for (what, field) in [
        ("cache hits", &s["cache_hits"]),
        ("429s of `ip`", &s["refused"]["ip"]),
        ("429s of `all`", &s["refused"]["all"]),
        ("spend refusals", &s["spend_refused"]["day"]),
        (
            "provider failures that keep a note",
            &s["provider_failures"]["auth"],
        ),
    ] {
        assert!(field.as_u64() > Some(0), "the traffic has {what}: {s:#}");
    }

    let bad = site_with(&format!("{label}-fails"), Some(sweeping(failing)), rules());
    break_journal(&bad);
    let started = now_ms();
    assert_eq!(traffic(&bad), (statuses, calls), "the same answers");
    let log = bad.site.apache.error_log();
    assert_eq!(journal_lines(&bad.site, true), 1, "{log}");
    assert!(
        now_ms() - started < 60_000,
        "the requests took more than the minute between two lines: run again"
    );
    bad
}

#[test]
fn a_file_store_journal_that_cannot_be_written_changes_no_answer() {
    let stores = crate::support::TempDir::new("usage-failing-stores");
    let dir = |name: &str| json!({"kind": "file", "dir": stores.server_dir(name)});
    let (working, failing) = (dir("works"), dir("fails"));
    let journal = std::path::PathBuf::from(failing["dir"].as_str().unwrap()).join("journal");
    let bad = compare("usage-failing-file", working, failing, |_| {
        std::fs::write(&journal, "a file where the journal's directory should be").unwrap();
    });
    assert!(journal.is_file(), "the file was left alone");
    let log = bad.site.apache.error_log();
    assert!(!log.contains("sweep failed"), "{log}");
}

#[test]
fn a_redis_journal_that_cannot_be_written_changes_no_answer() {
    let (works, fails) = (Redis::start(), Redis::start());
    let url = |r: &Redis| json!({"kind": "redis", "url": r.url()});
    let bad = compare("usage-failing-redis", url(&works), url(&fails), |f| {
        assert!(
            !f.site.dir.join("ratelimit").exists(),
            "no data directory yet"
        );
        let now = hour_of(now_ms());
        for hour in now.saturating_sub(1)..=now + 1 {
            for kind in ["totals", "clients"] {
                let key = format!("resolve:journal:{kind}:{hour}");
                assert!(!fails.cmd(&["SET", &key, "not a hash"]).is_error());
            }
        }
        assert!(
            !fails
                .cmd(&["SET", "resolve:journal:notes", "not a list"])
                .is_error()
        );
    });
    // The keys broken are of the kinds the working journal wrote.
    let Resp::Array(Some(keys)) = works.cmd(&["KEYS", "resolve:journal:*"]) else {
        panic!("KEYS")
    };
    let mut kinds: Vec<(String, String)> = keys
        .iter()
        .map(|k| {
            let k = k.as_text().unwrap();
            let kind = k.rsplit_once(':').map_or(k.as_str(), |(kind, _)| kind);
            let kind = kind
                .trim_end_matches(|c: char| c.is_ascii_digit())
                .to_owned();
            let of = works.cmd(&["TYPE", &k]).as_text().unwrap();
            (kind, of)
        })
        .collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            ("resolve:journal".into(), "list".into()),
            ("resolve:journal:clients".into(), "hash".into()),
            ("resolve:journal:totals".into(), "hash".into()),
        ]
    );
    assert!(
        bad.site.dir.join("ratelimit").is_dir(),
        "the data directory was made for the log's time stamp"
    );
}
