//! Tests of one request from start to answer, on a store in memory and a counting provider.

use super::*;
use crate::app::failures::UNAVAILABLE;
use crate::core::clock::{Clock, FakeClock, SystemClock};
use crate::core::journal;
use crate::http::request::Env;
use crate::provider::resolved::Resolved;
use crate::provider::{EchoProvider, Failure, Meter, ProviderError};
use crate::store::journal::Journal;
use crate::store::memory::MemoryStore;
use crate::store::notes::Notes;
use crate::support::log::MemoryLog;
use std::cell::Cell;
use std::path::Path;
use std::time::Duration;

/// Counts calls and answers as told.
struct Counting {
    calls: Cell<usize>,
    answer: Result<Resolved, ProviderError>,
}

impl Provider for Counting {
    fn resolve(&self, _: &str, _: &dyn Meter) -> Result<Resolved, ProviderError> {
        self.calls.set(self.calls.get() + 1);
        self.answer.clone()
    }
}

fn ok_provider() -> Counting {
    Counting {
        calls: Cell::new(0),
        answer: Ok(Resolved {
            size: None,
            download: "https://dl.example/f".into(),
            filename: Some("f.zip".into()),
            files: Vec::new(),
        }),
    }
}

/// A configuration for tests, the cache off unless the test turns it on.
fn config(text: &str) -> Config {
    let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
    if v.get("cache").is_none() {
        v["cache"] = serde_json::json!({"ttl_secs": 0});
    }
    Config::from_json(&v.to_string(), Path::new("/nonexistent")).unwrap()
}

/// A store in memory, running the same limiter; `set_failing` makes it fail on demand.
fn store() -> MemoryStore<FakeClock> {
    MemoryStore::new(FakeClock::at(1_000_000), Duration::ZERO)
}

fn get(addr: &str, query: &str) -> Env {
    Env::method("GET")
        .with("QUERY_STRING", query)
        .with("REMOTE_ADDR", addr)
}

const LINK: &str = "link=https%3A%2F%2Fhost.example%2Ff";

fn run(
    cfg: &Config,
    store: &MemoryStore<FakeClock>,
    provider: &dyn Provider,
    env: &Env,
) -> (Answer, MemoryLog) {
    answer_on(cfg, &store.as_store(), provider, &SystemClock, env)
}

/// The answer to `env` of a site on `store` (whatever is in front of it), with `clock` as the
/// program's, and what it logged.
fn answer_on(
    cfg: &Config,
    store: &crate::store::roles::Store,
    provider: &dyn Provider,
    clock: &dyn Clock,
    env: &Env,
) -> (Answer, MemoryLog) {
    let log = MemoryLog::default();
    let app = App {
        config: cfg,
        store,
        provider: Some(provider),
        others: &[],
        log: &log,
        clock,
        workers: None,
        site_check: None,
        turn: None,
    };
    let answer = app.handle(env, &mut std::io::empty());
    (answer, log)
}

/// The log's lines but the one saying the journal (on a failing store) could not be written.
fn not_journal(log: &MemoryLog) -> Vec<String> {
    let lines = log.lines.borrow();
    let journal = lines.iter().filter(|l| l.contains("usage journal")).count();
    assert!(journal <= 1, "{lines:?}");
    lines
        .iter()
        .filter(|l| !l.contains("usage journal"))
        .cloned()
        .collect()
}

/// The status of the answer to `env`.
fn status(cfg: &Config, store: &MemoryStore<FakeClock>, provider: &dyn Provider, env: &Env) -> u16 {
    run(cfg, store, provider, env).0.response.status
}

#[test]
fn refused_requests_never_reach_the_provider() {
    let cfg = config(r#"{"rules": [{"name": "ip", "key": "ip", "limit": 3, "window_secs": 60}]}"#);
    let (s, p) = (store(), ok_provider());
    let statuses: Vec<u16> = (0..10)
        .map(|_| status(&cfg, &s, &p, &get("192.0.2.1", LINK)))
        .collect();
    assert_eq!(statuses, [200, 200, 200, 429, 429, 429, 429, 429, 429, 429]);
    assert_eq!(p.calls.get(), 3);
    let (a, log) = run(&cfg, &s, &p, &get("192.0.2.1", LINK));
    assert_eq!(a.response.header_value("Retry-After"), Some("60"));
    assert!(log.lines.borrow().is_empty(), "a 429 is not logged");
    // Another address has its own count; after the window the first is admitted again.
    assert_eq!(status(&cfg, &s, &p, &get("192.0.2.2", LINK)), 200);
    s.clock().advance_ms(60_000);
    assert_eq!(status(&cfg, &s, &p, &get("192.0.2.1", LINK)), 200);
    assert_eq!(p.calls.get(), 5);
}

#[test]
fn ipv6_addresses_in_one_prefix_share_a_count() {
    let cfg = config(r#"{"rules": [{"name": "ip", "key": "ip", "limit": 2, "window_secs": 60}]}"#);
    let (s, p) = (store(), ok_provider());
    for addr in ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::9"] {
        run(&cfg, &s, &p, &get(addr, LINK));
    }
    assert_eq!(p.calls.get(), 2);
    assert_eq!(status(&cfg, &s, &p, &get("2001:db8:1:3::1", LINK)), 200);
}

#[test]
fn head_is_counted_but_never_paid() {
    let cfg = config(r#"{"rules": [{"name": "ip", "key": "ip", "limit": 1, "window_secs": 60}]}"#);
    let (s, p) = (store(), ok_provider());
    let head = get("192.0.2.1", LINK).with("REQUEST_METHOD", "HEAD");
    let (a, _) = run(&cfg, &s, &p, &head);
    assert_eq!((a.response.status, a.head_only), (200, true));
    assert_eq!(p.calls.get(), 0);
    assert_eq!(status(&cfg, &s, &p, &head), 429);
}

#[test]
fn bad_input_is_refused_before_the_store_and_logged() {
    let cfg = config("{}");
    let (s, p) = (store(), ok_provider());
    s.set_failing(true); // would show up as a store log line if the store were asked
    for (env, status) in [
        (get("192.0.2.1", "link=ftp://x/y"), 400),
        (get("192.0.2.1", "nothing"), 400),
        (get("192.0.2.1", LINK).with("REQUEST_METHOD", "PUT"), 405),
        (Env::method("GET").with("QUERY_STRING", LINK), 400),
        (get("not-an-ip", LINK), 400),
    ] {
        let (a, log) = run(&cfg, &s, &p, &env);
        assert_eq!(a.response.status, status);
        let lines = not_journal(&log);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with(&format!("resolve: warn: {status} ")),
            "{lines:?}"
        );
    }
    assert_eq!(p.calls.get(), 0);
}

#[test]
fn short_bodies_are_refused() {
    let cfg = config("{}");
    let (s, p) = (store(), ok_provider());
    let env = Env::method("POST")
        .with("REMOTE_ADDR", "192.0.2.1")
        .with("CONTENT_TYPE", "application/x-www-form-urlencoded")
        .with("CONTENT_LENGTH", "100");
    let log = MemoryLog::default();
    let app = App {
        config: &cfg,
        store: &s.as_store(),
        provider: Some(&p),
        others: &[],
        log: &log,
        clock: &SystemClock,
        workers: None,
        site_check: None,
        turn: None,
    };
    let a = app.handle(&env, &mut &b"link=https://e.x/"[..]);
    assert_eq!(a.response.status, 400);
    let a = app.handle(
        &env.clone().with("CONTENT_LENGTH", "17"),
        &mut &b"link=https://e.x/and more"[..],
    );
    assert_eq!(a.response.status, 200, "reads exactly CONTENT_LENGTH bytes");
}

#[test]
fn store_failures_follow_the_policy() {
    let (s, p) = (store(), ok_provider());
    s.set_failing(true);
    let allow = config("{}");
    let (a, log) = run(&allow, &s, &p, &get("192.0.2.1", LINK));
    assert_eq!(a.response.status, 200);
    assert_eq!(p.calls.get(), 1);
    assert!(log.lines.borrow()[0].contains("told to fail"));
    let deny = config(r#"{"store": {"on_error": "deny", "deny_retry_after_secs": 12}}"#);
    let (a, log) = run(&deny, &s, &p, &get("192.0.2.1", LINK));
    assert_eq!(a.response.status, 503);
    assert_eq!(a.response.header_value("Retry-After"), Some("12"));
    assert_eq!(p.calls.get(), 1, "fail closed spends nothing");
    assert!(log.lines.borrow()[0].starts_with("resolve: error: 503"));
}

#[test]
fn without_a_provider_every_request_gets_503() {
    let cfg = config("{}");
    let s = store();
    let log = MemoryLog::default();
    let app = App {
        config: &cfg,
        store: &s.as_store(),
        provider: None,
        others: &[],
        log: &log,
        clock: &SystemClock,
        workers: None,
        site_check: None,
        turn: None,
    };
    let a = app.handle(&get("192.0.2.1", LINK), &mut std::io::empty());
    assert_eq!(a.response.status, 503);
    assert!(log.lines.borrow()[0].contains("no provider is configured"));
    assert!(s.key_count() == 0, "nothing counted");
}

#[test]
fn provider_failures_become_clear_answers() {
    let cfg = config("{}");
    let cases = [
        (Failure::Rejected, 422, "link_refused"),
        (Failure::Auth, 502, "provider_unavailable"),
        (Failure::ServerRefused, 502, "provider_unavailable"),
        (Failure::Plan, 502, "provider_unavailable"),
        (Failure::Quota, 503, "provider_unavailable"),
        (Failure::Retired, 502, "provider_unavailable"),
        (Failure::RateLimited, 503, "provider_busy"),
        (Failure::Unavailable, 502, "provider_unavailable"),
        (Failure::BadAnswer, 502, "provider_unavailable"),
        (Failure::Unreachable, 502, "provider_unavailable"),
        (Failure::Timeout, 504, "provider_timeout"),
    ];
    for (failure, status, code) in cases {
        let s = store();
        let mut e = ProviderError::new(failure, "test");
        e.advice = Some("do what the service asks".into());
        let p = Counting {
            calls: Cell::new(0),
            answer: Err(e),
        };
        let env = get("192.0.2.1", LINK).with("HTTP_ACCEPT", "application/json");
        let (a, log) = run(&cfg, &s, &p, &env);
        assert_eq!(a.response.status, status, "{failure:?}");
        let body: serde_json::Value = serde_json::from_slice(&a.response.body).unwrap();
        assert_eq!(body["code"], code);
        assert_eq!(log.lines.borrow().len(), 1);
        let line = &log.lines.borrow()[0];
        let owners = matches!(
            failure,
            Failure::Auth
                | Failure::ServerRefused
                | Failure::Plan
                | Failure::Quota
                | Failure::Retired
                | Failure::Unreachable
        );
        assert_eq!(line.contains("ACTION NEEDED"), owners, "{line}");
        if owners {
            assert_eq!(
                body["detail"], UNAVAILABLE,
                "a neutral sentence: {failure:?}"
            );
            assert!(line.contains("do what the service asks"), "{line}");
        }
        if failure == Failure::ServerRefused {
            assert!(line.contains("this server's address"), "{line}");
        }
    }
}

#[test]
fn every_owners_failure_says_what_to_do_without_the_providers_advice() {
    let cfg = config("{}");
    for (failure, what_to_do) in [
        (Failure::Auth, "check provider.token and the account"),
        (
            Failure::ServerRefused,
            "ask the provider how to allow calls from a server",
        ),
        (Failure::Plan, "renew or upgrade the plan"),
        (Failure::Quota, "wait for them to renew or top up"),
        (Failure::Retired, "upgrade resolve"),
        (
            Failure::Unreachable,
            "ask the host whether this account may make outgoing HTTPS",
        ),
    ] {
        let p = Counting {
            calls: Cell::new(0),
            answer: Err(ProviderError::new(failure, "Name does not resolve")),
        };
        let (_, log) = run(&cfg, &store(), &p, &get("192.0.2.1", LINK));
        let line = &log.lines.borrow()[0];
        assert!(line.contains("ACTION NEEDED: "), "{line}");
        assert!(line.contains(what_to_do), "{failure:?}: {line}");
    }
}

fn keyed_config() -> Config {
    let key = |k: &str| crate::http::api_key::hash(k);
    config(&format!(
        r#"{{"rules": [{{"name": "ip", "key": "ip", "limit": 100, "window_secs": 60}},
                       {{"name": "key", "key": "api_key", "limit": 3, "window_secs": 60}}],
            "api_keys": {{"require": true, "keys": [
                {{"name": "alpha", "sha256": "{}"}},
                {{"name": "beta", "sha256": "{}"}},
                {{"name": "gold", "sha256": "{}", "rules": [{{"name": "gold", "key": "api_key", "limit": 5, "window_secs": 60}}]}}]}}}}"#,
        key("key-alpha"),
        key("key-beta"),
        key("key-gold")
    ))
}

#[test]
fn api_keys_are_required_checked_and_limited_per_key() {
    let cfg = keyed_config();
    let (s, p) = (store(), ok_provider());
    let (a, log) = run(&cfg, &s, &p, &get("192.0.2.1", LINK));
    assert_eq!(a.response.status, 401);
    assert!(
        a.response
            .header_value("WWW-Authenticate")
            .unwrap()
            .contains("X-API-Key")
    );
    assert!(log.lines.borrow()[0].contains("no X-API-Key header"));
    let (a, log) = run(
        &cfg,
        &s,
        &p,
        &get("192.0.2.1", LINK).with("HTTP_X_API_KEY", "key-wrong"),
    );
    assert_eq!(a.response.status, 401);
    let body: serde_json::Value = serde_json::from_slice(&a.response.body).unwrap();
    assert_eq!(body["code"], "unknown_api_key", "a keyed request gets JSON");
    assert!(!log.lines.borrow()[0].contains("key-wrong"));
    assert_eq!(p.calls.get(), 0);

    // alpha is limited to 3, from two addresses together; beta is unaffected.
    let with = |addr: &str, k: &str| get(addr, LINK).with("HTTP_X_API_KEY", k);
    let statuses: Vec<u16> = ["192.0.2.1", "192.0.2.2", "192.0.2.1", "192.0.2.2"]
        .iter()
        .map(|addr| status(&cfg, &s, &p, &with(addr, "key-alpha")))
        .collect();
    assert_eq!(statuses, [200, 200, 200, 429]);
    let (a, _) = run(&cfg, &s, &p, &with("192.0.2.2", "key-alpha"));
    let body: serde_json::Value = serde_json::from_slice(&a.response.body).unwrap();
    assert_eq!(
        (body["rule"].as_str(), body["status"].as_u64()),
        (Some("key"), Some(429))
    );
    assert_eq!(status(&cfg, &s, &p, &with("192.0.2.1", "key-beta")), 200);
    // gold has limits of its own.
    let gold: Vec<u16> = (0..6)
        .map(|_| status(&cfg, &s, &p, &with("192.0.2.3", "key-gold")))
        .collect();
    assert_eq!(gold, [200, 200, 200, 200, 200, 429]);
    assert_eq!(p.calls.get(), 3 + 1 + 5);
}

#[test]
fn per_key_and_per_address_limits_apply_together() {
    let cfg = config(
        r#"{"rules": [{"name": "ip", "key": "ip", "limit": 2, "window_secs": 60},
                      {"name": "key", "key": "api_key", "limit": 100, "window_secs": 60}]}"#,
    );
    let (s, p) = (store(), ok_provider());
    // One address rotating keys is still one address.
    let statuses: Vec<u16> = ["k1", "k2", "k3"]
        .iter()
        .map(|k| {
            let env = get("192.0.2.9", LINK).with("HTTP_X_API_KEY", *k);
            status(&cfg, &s, &p, &env)
        })
        .collect();
    assert_eq!(statuses, [200, 200, 429]);
    // Without a key, api_key rules do not apply.
    assert_eq!(status(&cfg, &s, &p, &get("192.0.2.10", LINK)), 200);
}

#[test]
fn answers_follow_accept() {
    let cfg = config("{}");
    let (s, p) = (store(), ok_provider());
    let accepting = |accept: &str| get("192.0.2.1", LINK).with("HTTP_ACCEPT", accept);
    let json = run(&cfg, &s, &p, &accepting("application/json")).0;
    let v: serde_json::Value = serde_json::from_slice(&json.response.body).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"download": "https://dl.example/f", "filename": "f.zip"})
    );
    let html = run(&cfg, &s, &p, &accepting("text/html")).0;
    assert!(String::from_utf8_lossy(&html.response.body).contains("href=\"https://dl.example/f\""));
    let text = run(&cfg, &s, &EchoProvider, &get("192.0.2.1", LINK)).0;
    assert_eq!(text.response.body, b"https://host.example/f\n");
    assert_eq!(
        text.response.header_value("Cache-Control"),
        Some("no-store")
    );
}

#[test]
fn about_is_answered_without_the_store_or_the_provider() {
    let cfg = config(
        r#"{"rules": [{"name": "ip", "key": "ip", "limit": 1, "window_secs": 60}],
            "page": {"site_name": "Example Links"}}"#,
    );
    let (s, p) = (store(), ok_provider());
    // A failing store would refuse anything that asked it.
    s.set_failing(true);
    for _ in 0..3 {
        let (answer, log) = run(&cfg, &s, &p, &get("192.0.2.7", "about=1"));
        assert_eq!(answer.response.status, 200);
        let body: serde_json::Value = serde_json::from_slice(&answer.response.body).unwrap();
        assert_eq!(body["site_name"], "Example Links");
        assert_eq!(body["ready"], true);
        assert!(log.lines.borrow().is_empty(), "{:?}", log.lines.borrow());
    }
    s.set_failing(false);
    assert_eq!(p.calls.get(), 0);
    // The one request of the minute is still there.
    let (answer, _) = run(&cfg, &s, &p, &get("192.0.2.7", LINK));
    assert_eq!(answer.response.status, 200);
}

/// The journal's figures of the current hours.
fn figures(s: &MemoryStore<FakeClock>) -> journal::Figures {
    let now = journal::hour_of(SystemClock.now_ms());
    let rows = s.journal_rows(now - 1, now + 2).unwrap();
    journal::Figures::from_rows(&rows, now - 1, now + 2)
}

#[test]
fn the_journal_counts_every_outcome_once() {
    let cfg = config(
        r#"{"rules": [{"name": "ip", "key": "ip", "limit": 3, "window_secs": 60},
                      {"name": "all", "key": "global", "limit": 5, "window_secs": 60}],
            "spend": [{"name": "day", "limit": 4, "window_secs": 86400}]}"#,
    );
    let (s, p) = (store(), ok_provider());
    let head = |addr| get(addr, LINK).with("REQUEST_METHOD", "HEAD");
    // a: 3 paid, 2 refused by `ip` (all: 3, day: 3).
    for _ in 0..5 {
        run(&cfg, &s, &p, &get("192.0.2.1", LINK));
    }
    // b: one paid (all: 4, day: 4), one refused by the budget, a HEAD counted (all: 5).
    assert_eq!(status(&cfg, &s, &p, &get("192.0.2.2", LINK)), 200);
    assert_eq!(status(&cfg, &s, &p, &get("192.0.2.2", LINK)), 503);
    assert_eq!(status(&cfg, &s, &p, &head("192.0.2.2")), 200);
    // c: a bad link. d: refused by `all`.
    assert_eq!(status(&cfg, &s, &p, &get("192.0.2.3", "link=nope")), 400);
    assert_eq!(status(&cfg, &s, &p, &head("192.0.2.4")), 429);
    assert_eq!(p.calls.get(), 4);

    let f = figures(&s);
    assert_eq!(f.requests, 10);
    assert_eq!(f.admitted, 5);
    assert_eq!(f.paid_calls, 4);
    assert_eq!(f.refused.get("ip"), Some(&2), "{f:?}");
    assert_eq!(f.refused.get("all"), Some(&1));
    assert_eq!(f.spend_refused.get("day"), Some(&1));
    assert_eq!(
        f.bad_requests.values().sum::<u64>(),
        1,
        "{:?}",
        f.bad_requests
    );
    let client = |addr: &str| {
        f.clients
            .iter()
            .find(|c| c.client == addr)
            .map(|c| (c.admitted, c.refused))
    };
    assert_eq!(client("192.0.2.1"), Some((3, 2)));
    assert_eq!(
        client("192.0.2.2"),
        Some((2, 0)),
        "a spend refusal is not the client's"
    );
    assert_eq!(client("192.0.2.3"), None, "a bad request is neither");
    assert_eq!(client("192.0.2.4"), Some((0, 1)));
}

#[test]
fn the_journal_counts_cache_hits_failures_refunds_and_keeps_action_notes() {
    let mut cfg = config(
        r#"{"cache": {"ttl_secs": 600}, "spend": [{"name": "day", "limit": 9, "window_secs": 86400}]}"#,
    );
    cfg.provider_rate_limits = 0;
    let (s, p) = (store(), ok_provider());
    run(&cfg, &s, &p, &get("192.0.2.1", LINK));
    run(&cfg, &s, &p, &get("192.0.2.2", LINK));
    assert_eq!(p.calls.get(), 1);
    for (failure, link) in [
        (Failure::Unreachable, "link=https%3A%2F%2Fh.example%2F1"),
        (Failure::Timeout, "link=https%3A%2F%2Fh.example%2F2"),
        (Failure::Auth, "link=https%3A%2F%2Fh.example%2F3"),
    ] {
        let failing = Counting {
            calls: Cell::new(0),
            answer: Err(ProviderError::new(failure, "test")),
        };
        run(&cfg, &s, &failing, &get("192.0.2.3", link));
    }
    let f = figures(&s);
    assert_eq!(f.cache_hits, 1);
    assert_eq!(
        f.paid_calls, 3,
        "the first call, the timeout and the auth failure"
    );
    assert_eq!(f.refunds, 1, "the unreachable call");
    assert_eq!(f.provider_failures.get("unreachable"), Some(&1));
    assert_eq!(f.provider_failures.get("timeout"), Some(&1));
    assert_eq!(f.provider_failures.get("auth"), Some(&1));
    let notes = s.journal_notes().unwrap();
    assert_eq!(
        notes.len(),
        2,
        "the unreachable provider and the auth failure"
    );
    assert!(
        notes.iter().all(|n| n.text.starts_with("ACTION NEEDED")),
        "{notes:?}"
    );
    // The spend limit's use, read as `resolve stats` reads it (its key for no client): the
    // first call, the timeout and the auth failure; the unreachable call gave its back.
    let budget = cfg.budget();
    let checks: Vec<crate::store::Check<'_>> = budget
        .iter()
        .map(|rule| crate::store::Check {
            rule,
            key: rule.key_for(""),
        })
        .collect();
    let used = s.as_store().counters.used(&checks).unwrap();
    assert_eq!(used[0], 3);
}

#[test]
fn without_the_journal_nothing_is_kept() {
    let cfg = config(r#"{"journal": false}"#);
    let (s, p) = (store(), ok_provider());
    assert_eq!(status(&cfg, &s, &p, &get("192.0.2.1", LINK)), 200);
    let f = figures(&s);
    assert_eq!((f.requests, f.paid_calls), (0, 0));
    assert!(f.clients.is_empty());
    assert!(config("{}").journal, "on unless turned off");
}

mod origins;
mod paying;
mod prechecks;
mod remembered;
