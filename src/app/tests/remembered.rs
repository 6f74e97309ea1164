//! Tests of a refusal remembered in front of the store (`Counters::recall_own`): answered
//! without the store or the cache, never past its second, never when a solved challenge may let
//! the client past its rules. A store told to fail shows when it was asked.

use super::*;
use crate::store::refusals::RememberedRefusals;
use std::rc::Rc;

/// One request on `store` (the memory store `s` behind whatever is in front of it), with the
/// memory store's fake clock as the program's.
fn ask(
    cfg: &Config,
    s: &MemoryStore<FakeClock>,
    store: &crate::store::roles::Store,
    p: &dyn Provider,
    env: &Env,
) -> Answer {
    let log = MemoryLog::default();
    let app = App {
        config: cfg,
        store,
        provider: Some(p),
        others: &[],
        log: &log,
        clock: s.clock(),
        workers: None,
        site_check: None,
        turn: None,
    };
    app.handle(env, &mut std::io::empty())
}

const DENY: &str = r#"{"rules": [{"name": "ip", "key": "ip", "limit": 1, "window_secs": 60}],
    "cache": {"ttl_secs": 3600}, "store": {"on_error": "deny", "deny_retry_after_secs": 12}"#;

#[test]
fn a_refusal_remembered_is_answered_without_the_store_or_the_cache() {
    let dir = crate::support::temp::Dir::new("app", "remembered");
    let cfg = config(&format!("{DENY}}}"));
    let (s, p) = (store(), ok_provider());
    let store = s
        .as_store()
        .with_counters(|c| Rc::new(RememberedRefusals::new(c, &dir)));
    let status = |who: &str| ask(&cfg, &s, &store, &p, &get(who, LINK)).response.status;
    assert_eq!(status("192.0.2.1"), 200);
    assert_eq!(status("192.0.2.1"), 429);
    // The store (its counters and its cache alike) fails from now on, and the policy refuses:
    // a request that asks it is a 503.
    s.set_failing(true);
    s.clock().advance_ms(999);
    let a = ask(&cfg, &s, &store, &p, &get("192.0.2.1", LINK));
    assert_eq!(a.response.status, 429);
    assert_eq!(a.response.header_value("Retry-After"), Some("60"));
    assert_eq!(status("192.0.2.2"), 503, "another client asks the store");
    // A second after the refusal was asked, the store is asked again.
    s.clock().advance_ms(1);
    assert_eq!(status("192.0.2.1"), 503);
    assert_eq!(p.calls.get(), 1);
}

#[test]
fn without_the_memory_the_same_requests_ask_the_store() {
    let cfg = config(&format!("{DENY}}}"));
    let (s, p) = (store(), ok_provider());
    let store = s.as_store();
    let status = |who: &str| ask(&cfg, &s, &store, &p, &get(who, LINK)).response.status;
    assert_eq!((status("192.0.2.1"), status("192.0.2.1")), (200, 429));
    s.set_failing(true);
    assert_eq!(status("192.0.2.1"), 503);
}

#[test]
fn a_site_that_lets_a_solved_challenge_past_the_limit_asks_the_store() {
    let dir = crate::support::temp::Dir::new("app", "remembered-challenge");
    let cfg = config(&format!(
        r#"{DENY}, "challenge": {{"site_key": "a", "secret": "b", "when": "over_limit"}}}}"#
    ));
    let (s, p) = (store(), ok_provider());
    let store = s
        .as_store()
        .with_counters(|c| Rc::new(RememberedRefusals::new(c, &dir)));
    let status = |who: &str| ask(&cfg, &s, &store, &p, &get(who, LINK)).response.status;
    assert_eq!(status("192.0.2.1"), 200);
    assert_eq!(status("192.0.2.1"), 429);
    s.set_failing(true);
    assert_eq!(status("192.0.2.1"), 503);
}
