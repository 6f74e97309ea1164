//! Tests of a refusal remembered in front of the store (`Counters::recall_own`): answered
//! without the store or the cache, never past its second, never when a solved challenge may let
//! the client past its rules. A store told to fail shows when it was asked.

use super::*;
use crate::store::refusals::RememberedRefusals;
use std::rc::Rc;

const DENY: &str = r#"{"rules": [{"name": "ip", "key": "ip", "limit": 1, "window_secs": 60}],
    "cache": {"ttl_secs": 3600}, "store": {"on_error": "deny", "deny_retry_after_secs": 12}"#;

/// A site of `DENY` (and `extra` fields) on the memory store, with the memory of refusals in
/// front of it or not, its first client admitted once and refused once, the store failing
/// from then on.
struct Case {
    cfg: Config,
    s: MemoryStore<FakeClock>,
    store: crate::store::roles::Store,
    p: Counting,
    _dir: crate::support::temp::Dir,
}

impl Case {
    fn new(extra: &str, remembering: bool) -> Case {
        let dir = crate::support::temp::Dir::new("app", "remembered");
        let (s, p) = (store(), ok_provider());
        let mut store = s.as_store();
        if remembering {
            store = store.with_counters(|c| Rc::new(RememberedRefusals::new(c, &dir)));
        }
        let case = Case {
            cfg: config(&format!("{DENY}{extra}}}")),
            s,
            store,
            p,
            _dir: dir,
        };
        assert_eq!(case.status("192.0.2.1"), 200);
        assert_eq!(case.status("192.0.2.1"), 429);
        // The store (its counters and its cache alike) fails from now on, and the policy
        // refuses: a request that asks it is a 503.
        case.s.set_failing(true);
        case
    }

    /// The answer to `who`, on the memory store's fake clock.
    fn answer(&self, who: &str) -> Answer {
        let env = get(who, LINK);
        answer_on(&self.cfg, &self.store, &self.p, self.s.clock(), &env).0
    }

    fn status(&self, who: &str) -> u16 {
        self.answer(who).response.status
    }
}

#[test]
fn a_refusal_remembered_is_answered_without_the_store_or_the_cache() {
    let case = Case::new("", true);
    case.s.clock().advance_ms(999);
    let a = case.answer("192.0.2.1");
    assert_eq!(a.response.status, 429);
    assert_eq!(a.response.header_value("Retry-After"), Some("60"));
    assert_eq!(
        case.status("192.0.2.2"),
        503,
        "another client asks the store"
    );
    // A second after the refusal was asked, the store is asked again.
    case.s.clock().advance_ms(1);
    assert_eq!(case.status("192.0.2.1"), 503);
    assert_eq!(case.p.calls.get(), 1);
}

#[test]
fn without_the_memory_the_same_requests_ask_the_store() {
    let case = Case::new("", false);
    assert_eq!(case.status("192.0.2.1"), 503);
}

#[test]
fn a_site_that_lets_a_solved_challenge_past_the_limit_asks_the_store() {
    let over_limit = r#", "challenge": {"site_key": "a", "secret": "b", "when": "over_limit"}"#;
    let case = Case::new(over_limit, true);
    assert_eq!(case.status("192.0.2.1"), 503);
}
