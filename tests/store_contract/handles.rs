//! Scenarios on store handles, as the program holds them: decisions of several rules, the
//! client's own rules first, what a refusal leaves, Retry-After, fixed and sliding windows at their edges, handles sharing one
//! store, the cache, refunds, sweeps, and a handle outliving its store's restart.
//!
//! Time: the memory and file handles run on a clock the test holds, so every edge is hit to
//! the millisecond and every Retry-After is exact. MySQL and Redis decide by their server's
//! clock, which is this machine's: a decision is bracketed by the clock read before and after
//! it, and each expectation allows exactly what that bracket allows (on an idle machine, one
//! value): a slow machine widens the bracket, it cannot make a test fail. Near an edge, where a
//! slow request may land on either side, either outcome is accepted if the bracket allows it.

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use resolve::config::default_key_template;
use resolve::core::decision::Decision;
use resolve::core::rule::{Algorithm, KeyKind, Rule, RuleName};
use resolve::store::roles::Backend;
use resolve::store::{Check, StoreErrorKind};

use crate::stores::StoreUnderTest;

pub fn rule(name: &str, algorithm: Algorithm, limit: u32, window_secs: u32) -> Rule {
    Rule {
        name: RuleName::new(name).expect("rule name"),
        key: KeyKind::Ip,
        algorithm,
        limit: NonZeroU32::new(limit).expect("limit"),
        window_secs: NonZeroU32::new(window_secs).expect("window"),
        unit: resolve::core::rule::Unit::Requests,
        key_template: default_key_template(KeyKind::Ip),
    }
}

fn global(name: &str, limit: u32, window_secs: u32) -> Rule {
    Rule {
        key: KeyKind::Global,
        key_template: default_key_template(KeyKind::Global),
        ..rule(name, Algorithm::Fixed, limit, window_secs)
    }
}

/// Every rule's check for the client `who`.
fn checks<'a>(rules: &'a [Rule], who: &str) -> Vec<Check<'a>> {
    rules
        .iter()
        .map(|rule| Check {
            rule,
            key: rule.key_for(who),
        })
        .collect()
}

/// Whole seconds until `until` from `at`, as Retry-After says it (at least 1).
fn secs(until: u64, at: u64) -> u32 {
    until.saturating_sub(at).div_ceil(1000).max(1) as u32
}

/// A decision, and the store's time bracketed: it was made at or after `before`, at or before
/// `after`.
struct Decided {
    decision: Decision,
    before: u64,
    after: u64,
    what: String,
}

fn decide(
    sut: &dyn StoreUnderTest,
    store: &dyn Backend,
    checks: &[Check<'_>],
    what: &str,
) -> Decided {
    decide_own_first(sut, store, (checks, checks.len()), what)
}

/// A decision whose first `own` checks are the client's own rules.
fn decide_own_first(
    sut: &dyn StoreUnderTest,
    store: &dyn Backend,
    (checks, own): (&[Check<'_>], usize),
    what: &str,
) -> Decided {
    let before = sut.now_ms();
    let decision = store
        .decide_own_first(checks, own)
        .unwrap_or_else(|e| panic!("{}: {what}: {e}", sut.name()));
    Decided {
        decision,
        before,
        after: sut.now_ms(),
        what: format!("{}: {what}", sut.name()),
    }
}

impl Decided {
    /// Asserts an admission made within the bracket, with these numbers left per rule; returns
    /// its time.
    fn admitted(&self, remaining: &[u32]) -> u64 {
        let Decision::Admit { at_ms, statuses } = &self.decision else {
            panic!(
                "{}: expected an admission, got {:?}",
                self.what, self.decision
            );
        };
        assert!(
            (self.before..=self.after).contains(at_ms),
            "{}: admitted at {at_ms}, outside its call {}..={}",
            self.what,
            self.before,
            self.after
        );
        let left: Vec<u32> = statuses.iter().map(|s| s.remaining).collect();
        assert_eq!(left, remaining, "{}: remaining", self.what);
        *at_ms
    }

    /// Asserts a refusal by rule `rule` with a Retry-After that counts to `until` from the
    /// decision's time, and these numbers left per rule.
    fn refused(&self, rule: usize, until: u64, remaining: &[u32]) {
        let Decision::Refuse {
            rule: by, statuses, ..
        } = &self.decision
        else {
            panic!("{}: expected a refusal, got {:?}", self.what, self.decision);
        };
        let retry_after_secs = &self.decision.retry_after_secs().unwrap_or(0);
        assert_eq!(*by, rule, "{}: the refusing rule", self.what);
        let (lo, hi) = (secs(until, self.after), secs(until, self.before));
        assert!(
            (lo..=hi).contains(retry_after_secs),
            "{}: Retry-After {retry_after_secs}, but {} ms are left until {until}: expected {lo}..={hi}",
            self.what,
            until as i64 - self.before as i64,
        );
        let left: Vec<u32> = statuses.iter().map(|s| s.remaining).collect();
        assert_eq!(left, remaining, "{}: remaining", self.what);
    }

    /// At the edge `edge`, where a refusal by `rule` turns into an admission: a decision the
    /// bracket puts before the edge must be that refusal, one it puts at or after the edge
    /// that admission. Returns the admission's time.
    fn across(
        &self,
        rule: usize,
        edge: u64,
        refused_left: &[u32],
        admitted_left: &[u32],
    ) -> Option<u64> {
        if self.after < edge || !self.decision.is_admit() {
            assert!(
                self.before < edge,
                "{}: refused at or after the edge {edge}: {:?}",
                self.what,
                self.decision
            );
            self.refused(rule, edge, refused_left);
            return None;
        }
        let at = self.admitted(admitted_left);
        assert!(
            at >= edge,
            "{}: admitted at {at}, before the edge {edge}",
            self.what
        );
        Some(at)
    }

    fn reset_secs(&self) -> Vec<u32> {
        self.decision
            .statuses()
            .iter()
            .map(|s| s.reset_secs())
            .collect()
    }
}

/// Three rules on one request, each with its own key: per address, for the whole site, and a
/// short burst rule. Each counts its own; the one that refuses is the one that admits last.
pub fn several_rules_at_once(sut: &mut dyn StoreUnderTest) {
    let rules = [
        rule("ip", Algorithm::Fixed, 5, 600),
        global("site", 8, 600),
        rule("burst", Algorithm::Fixed, 3, 60),
    ];
    let store = sut.open(&rules);
    let (a, b, c) = (
        checks(&rules, "a"),
        checks(&rules, "b"),
        checks(&rules, "c"),
    );
    let first = decide(sut, &*store, &a, "a 1").admitted(&[4, 7, 2]);
    decide(sut, &*store, &a, "a 2").admitted(&[3, 6, 1]);
    decide(sut, &*store, &a, "a 3").admitted(&[2, 5, 0]);
    // a's burst is spent: refused by it alone, until its minute ends.
    decide(sut, &*store, &a, "a 4").refused(2, first + 60_000, &[2, 5, 0]);
    for (n, left) in [[4, 4, 2], [3, 3, 1], [2, 2, 0]].iter().enumerate() {
        decide(sut, &*store, &b, &format!("b {}", n + 1)).admitted(left);
    }
    decide(sut, &*store, &c, "c 1").admitted(&[4, 1, 2]);
    decide(sut, &*store, &c, "c 2").admitted(&[3, 0, 1]);
    // The site is spent: c is refused by it, until the site's window (opened by a) ends.
    decide(sut, &*store, &c, "c 3").refused(1, first + 600_000, &[3, 0, 1]);
    // Both the burst and the site refuse a: the wait is the longer one's.
    decide(sut, &*store, &a, "a 5").refused(1, first + 600_000, &[2, 0, 0]);
    for (key, count) in [
        ("resolve:ip:a", 3),
        ("resolve:site:*", 8),
        ("resolve:burst:a", 3),
        ("resolve:ip:c", 2),
        ("resolve:burst:c", 2),
    ] {
        assert_eq!(
            sut.counted(key, Algorithm::Fixed),
            count,
            "{}: {key}",
            sut.name()
        );
    }
}

/// The client's own rule first: a client over it is refused by it alone, with its own wait and
/// status only, though the site's rule (a spend limit) is spent too and would admit again
/// later; a client within its own rule meets the site's, every status told. The site's count
/// is what its two admissions made, whatever was refused.
pub fn own_rules_refuse_before_the_sites_are_read(sut: &mut dyn StoreUnderTest) {
    let rules = [
        rule("ip", Algorithm::Fixed, 1, 600),
        global("spend", 2, 3600),
    ];
    let store = sut.open(&rules);
    let (a, b, c) = (
        checks(&rules, "a"),
        checks(&rules, "b"),
        checks(&rules, "c"),
    );
    let first = decide_own_first(sut, &*store, (&a, 1), "a 1").admitted(&[0, 1]);
    let second = decide_own_first(sut, &*store, (&b, 1), "b 1").admitted(&[0, 0]);
    for n in 1..=3 {
        decide_own_first(sut, &*store, (&a, 1), &format!("a over its own {n}")).refused(
            0,
            first + 600_000,
            &[0],
        );
        decide_own_first(sut, &*store, (&b, 1), &format!("b over its own {n}")).refused(
            0,
            second + 600_000,
            &[0],
        );
    }
    // Every rule at once, as before: the site's rule admits again last, so it answers.
    decide(sut, &*store, &a, "a, every rule at once").refused(1, first + 3_600_000, &[0, 0]);
    // Within its own rule, the site's refuses.
    decide_own_first(sut, &*store, (&c, 1), "c 1").refused(1, first + 3_600_000, &[1, 0]);
    for (key, count) in [
        ("resolve:spend:*", 2),
        ("resolve:ip:a", 1),
        ("resolve:ip:b", 1),
        ("resolve:ip:c", 0),
    ] {
        assert_eq!(
            sut.counted(key, Algorithm::Fixed),
            count,
            "{}: {key}",
            sut.name()
        );
    }
}

/// A request refused by one rule is counted by none, for fixed and (where kept) sliding
/// windows: the other rule's count is where it was, and it admits exactly what it had left.
pub fn refused_requests_consume_nothing(sut: &mut dyn StoreUnderTest) {
    for algorithm in sut.algorithms() {
        let rules = [
            rule("minute", algorithm, 5, 600),
            rule("hour", Algorithm::Fixed, 3, 3600),
        ];
        let store = sut.open(&rules);
        let who = algorithm.as_str();
        let both = checks(&rules, who);
        let first = decide(sut, &*store, &both, "1").admitted(&[4, 2]);
        decide(sut, &*store, &both, "2").admitted(&[3, 1]);
        decide(sut, &*store, &both, "3").admitted(&[2, 0]);
        for n in 0..10 {
            decide(sut, &*store, &both, &format!("{who}: refused {n}")).refused(
                1,
                first + 3_600_000,
                &[2, 0],
            );
        }
        let minute = format!("resolve:minute:{who}");
        assert_eq!(
            sut.counted(&minute, algorithm),
            3,
            "{}: {minute}",
            sut.name()
        );
        assert_eq!(
            sut.counted(&format!("resolve:hour:{who}"), Algorithm::Fixed),
            3,
            "{}",
            sut.name()
        );
        // The minute rule alone still has two.
        let alone = checks(&rules[..1], who);
        decide(sut, &*store, &alone, "alone 1").admitted(&[1]);
        decide(sut, &*store, &alone, "alone 2").admitted(&[0]);
        decide(sut, &*store, &alone, "alone 3").refused(0, first + 600_000, &[0]);
    }
}

/// A fixed window starts at its key's first request and ends exactly `window` later; a
/// refusal's Retry-After is the wait until then, rounded up to whole seconds. The next window
/// starts at the first request after the end, not at the end.
pub fn retry_after_counts_to_the_end_of_the_window(sut: &mut dyn StoreUnderTest) {
    let rules = [rule("ip", Algorithm::Fixed, 2, 3)];
    let store = sut.open(&rules);
    let (x, y) = (checks(&rules, "x"), checks(&rules, "y"));
    let d = decide(sut, &*store, &x, "x 1");
    let x0 = d.admitted(&[1]);
    assert_eq!(d.reset_secs(), [3], "{}: a new window's reset", sut.name());
    decide(sut, &*store, &x, "x 2").admitted(&[0]);
    let y0 = decide(sut, &*store, &y, "y 1").admitted(&[1]);
    decide(sut, &*store, &y, "y 2").admitted(&[0]);
    // 2 s, 0.7 s and (with a held clock) 1 ms before the end: 2, 1 and 1 s to wait.
    let end = x0 + 3000;
    let mut x1 = None;
    for at in [x0 + 1000, x0 + 2300, sut.just_before(end)] {
        sut.wait_until(at);
        let d = decide(sut, &*store, &x, &format!("x at +{} ms", at - x0));
        x1 = d.across(0, end, &[0], &[1]);
        if x1.is_some() {
            break;
        }
    }
    // Exactly at the end: a new window.
    if x1.is_none() {
        sut.wait_until(end);
        decide(sut, &*store, &x, "x at the end").admitted(&[1]);
    }

    // y waits 1.5 s past its end: its new window runs 3 s from that request.
    sut.wait_until(y0 + 4500);
    let d = decide(sut, &*store, &y, "y past the end");
    let y1 = d.admitted(&[1]);
    assert_eq!(
        d.reset_secs(),
        [3],
        "{}: the new window's reset",
        sut.name()
    );
    decide(sut, &*store, &y, "y again").admitted(&[0]);
    decide(sut, &*store, &y, "y over").refused(0, y1 + 3000, &[0]);
}

/// A sliding window admits again exactly as its oldest request leaves it, one at a time,
/// where a fixed window would start afresh.
pub fn sliding_window_admits_again_as_requests_age_out(sut: &mut dyn StoreUnderTest) {
    if !sut.keeps_sliding() {
        return;
    }
    // Requests 2 s apart in a 6 s window: every refusal is 2 s from its edge.
    let rules = [rule("slide", Algorithm::Sliding, 3, 6)];
    let store = sut.open(&rules);
    let s = checks(&rules, "s");
    let d = decide(sut, &*store, &s, "a");
    let a = d.admitted(&[2]);
    assert_eq!(d.reset_secs(), [6], "{}", sut.name());
    sut.wait_until(a + 2000);
    let d = decide(sut, &*store, &s, "b");
    let b = d.admitted(&[1]);
    sut.wait_until(a + 4000);
    let c = decide(sut, &*store, &s, "c").admitted(&[0]);
    decide(sut, &*store, &s, "d: three within 6 s").refused(0, a + 6000, &[0]);
    sut.wait_until(sut.just_before(a + 6000));
    let d = decide(sut, &*store, &s, "just before a ages out");
    if d.across(0, a + 6000, &[0], &[0]).is_none() {
        sut.wait_until(a + 6000);
        decide(sut, &*store, &s, "as a ages out").admitted(&[0]);
    }
    // b and c are still in the window: room for exactly one, not three.
    decide(sut, &*store, &s, "right after").refused(0, b + 6000, &[0]);
    sut.wait_until(sut.past(b + 6000));
    decide(sut, &*store, &s, "as b ages out").admitted(&[0]);
    decide(sut, &*store, &s, "full again").refused(0, c + 6000, &[0]);
    // The store keeps the three requests in the window, not the ones that left.
    assert_eq!(
        sut.counted("resolve:slide:s", Algorithm::Sliding),
        3,
        "{}: records left",
        sut.name()
    );
}

/// Two handles (two server processes) on one backing store: one count, one cache.
pub fn two_handles_share_counts_and_cache(sut: &mut dyn StoreUnderTest) {
    for algorithm in sut.algorithms() {
        let rules = [rule("ip", algorithm, 4, 600)];
        let one = sut.open(&rules);
        let two = sut.open(&rules);
        let who = algorithm.as_str();
        let c = checks(&rules, who);
        let first = decide(sut, &*one, &c, "one 1").admitted(&[3]);
        decide(sut, &*two, &c, "two 1").admitted(&[2]);
        decide(sut, &*one, &c, "one 2").admitted(&[1]);
        let last = decide(sut, &*two, &c, "two 2").admitted(&[0]);
        decide(sut, &*one, &c, "one over").refused(0, first + 600_000, &[0]);
        decide(sut, &*two, &c, "two over").refused(0, first + 600_000, &[0]);
        // A refund through one is seen by the other.
        one.refund(&c, last).expect("refund");
        decide(sut, &*two, &c, "two after the refund").admitted(&[0]);
        decide(sut, &*one, &c, "one after that").refused(0, first + 600_000, &[0]);
        assert_eq!(
            sut.counted(&format!("resolve:ip:{who}"), algorithm),
            4,
            "{}",
            sut.name()
        );
    }
    let rules = [rule("ip", Algorithm::Fixed, 1, 60)];
    let (one, two) = (sut.open(&rules), sut.open(&rules));
    let key = "resolve:cache:shared";
    let long = Duration::from_secs(60);
    assert!(
        one.cache_claim(key, b"pending", long).unwrap(),
        "{}",
        sut.name()
    );
    assert!(
        !two.cache_claim(key, b"pending", long).unwrap(),
        "{}",
        sut.name()
    );
    assert_eq!(
        two.cache_get(key).unwrap().as_deref(),
        Some(&b"pending"[..])
    );
    one.cache_put(key, b"answer", long).unwrap();
    two.cache_release(key, b"pending").unwrap();
    assert_eq!(two.cache_get(key).unwrap().as_deref(), Some(&b"answer"[..]));
    assert_eq!(one.cache_get(key).unwrap().as_deref(), Some(&b"answer"[..]));
}

/// Get, put, claim and release, and entries that expire after their time to live.
pub fn cache_claims_releases_and_expires(sut: &mut dyn StoreUnderTest) {
    let store = sut.open(&[]);
    let name = sut.name();
    let key = "resolve:cache:test";
    let pending = b"resolve:pending";
    let long = Duration::from_secs(30);
    assert_eq!(store.cache_get(key).unwrap(), None, "{name}");
    assert!(
        store.cache_claim(key, pending, long).unwrap(),
        "{name}: first claim"
    );
    assert!(
        !store.cache_claim(key, pending, long).unwrap(),
        "{name}: second claim"
    );
    assert!(
        !store.cache_claim(key, b"another", long).unwrap(),
        "{name}: another claim"
    );
    assert_eq!(
        store.cache_get(key).unwrap().as_deref(),
        Some(&pending[..]),
        "{name}"
    );
    store.cache_release(key, b"another").unwrap();
    assert_eq!(
        store.cache_get(key).unwrap().as_deref(),
        Some(&pending[..]),
        "{name}: released by another value"
    );
    store.cache_release(key, pending).unwrap();
    assert_eq!(store.cache_get(key).unwrap(), None, "{name}: released");

    assert!(store.cache_claim(key, pending, long).unwrap(), "{name}");
    let ttl = 1500;
    let before = sut.now_ms();
    store
        .cache_put(key, b"answer", Duration::from_millis(ttl))
        .unwrap();
    let after = sut.now_ms();
    // Checked while the answer is surely live (a stalled test may find it expired).
    let live = || sut.now_ms() < before + ttl;
    store.cache_release(key, pending).unwrap();
    let got = store.cache_get(key).unwrap();
    if live() {
        assert_eq!(
            got.as_deref(),
            Some(&b"answer"[..]),
            "{name}: the answer stays"
        );
    }
    let claimed = store.cache_claim(key, pending, long).unwrap();
    if live() {
        assert!(!claimed, "{name}: answered");
    }
    sut.wait_until(sut.just_before(before + ttl));
    let got = store.cache_get(key).unwrap();
    if live() {
        assert!(got.is_some(), "{name}: before it expires");
    }
    sut.wait_until(sut.past(after + ttl));
    assert_eq!(store.cache_get(key).unwrap(), None, "{name}: expired");
    assert!(
        store.cache_claim(key, pending, long).unwrap(),
        "{name}: claim after expiry"
    );
}

/// A refund takes one request back from the window that admitted it, never from a later one,
/// and only once per request (fixed windows: one count; sliding: that request's record).
pub fn refunds_take_back_only_from_the_same_window(sut: &mut dyn StoreUnderTest) {
    let rules = [rule("fixed", Algorithm::Fixed, 5, 600)];
    let store = sut.open(&rules);
    let c = checks(&rules, "r");
    let mut ats = Vec::new();
    for n in 0..5u32 {
        ats.push(decide(sut, &*store, &c, &format!("{n}")).admitted(&[4 - n]));
    }
    let end = ats[0] + 600_000;
    decide(sut, &*store, &c, "at the limit").refused(0, end, &[0]);
    store.refund(&c, ats[4]).unwrap();
    decide(sut, &*store, &c, "one taken back").admitted(&[0]);
    decide(sut, &*store, &c, "full again").refused(0, end, &[0]);
    store.refund(&c, ats[0].saturating_sub(120_000)).unwrap();
    decide(sut, &*store, &c, "another window's refund is ignored").refused(0, end, &[0]);

    // In the next window, a refund of the last one's requests changes nothing.
    let rules = [rule("short", Algorithm::Fixed, 5, 2)];
    let store = sut.open(&rules);
    let c = checks(&rules, "r");
    let first = decide(sut, &*store, &c, "short 1").admitted(&[4]);
    let second = decide(sut, &*store, &c, "short 2").admitted(&[3]);
    sut.wait_until(sut.past(first + 2000));
    let next = decide(sut, &*store, &c, "next window").admitted(&[4]);
    store.refund(&c, second).unwrap();
    let d = decide(sut, &*store, &c, "after a stale refund");
    // (Unless the test stalled past this window too.)
    if d.after < next + 2000 {
        d.admitted(&[3]);
    }

    if !sut.keeps_sliding() {
        return;
    }
    let rules = [rule("slide", Algorithm::Sliding, 2, 600)];
    let store = sut.open(&rules);
    let c = checks(&rules, "r");
    let a = decide(sut, &*store, &c, "slide a").admitted(&[1]);
    // Each request at a time of its own: a refund names its request by its time.
    sut.wait_until(a + 500);
    decide(sut, &*store, &c, "slide b").admitted(&[0]);
    decide(sut, &*store, &c, "slide full").refused(0, a + 600_000, &[0]);
    store.refund(&c, a).unwrap();
    sut.wait_until(a + 1000);
    decide(sut, &*store, &c, "slide: a taken back").admitted(&[0]);
    // a's record is gone: refunding it again takes nothing.
    store.refund(&c, a).unwrap();
    let d = decide(sut, &*store, &c, "slide: a refunded twice");
    assert!(!d.decision.is_admit(), "{}: {:?}", d.what, d.decision);
    assert_eq!(
        sut.counted("resolve:slide:r", Algorithm::Sliding),
        2,
        "{}",
        sut.name()
    );
}

/// A sweep, or the store by itself, removes the keys of windows that ended; keys of running
/// windows stay, with their counts.
pub fn sweep_keeps_running_windows(sut: &mut dyn StoreUnderTest) {
    let mut rules = vec![
        rule("short", Algorithm::Fixed, 5, 1),
        rule("long", Algorithm::Fixed, 5, 600),
    ];
    if sut.keeps_sliding() {
        rules.push(rule("slide", Algorithm::Sliding, 5, 1));
    }
    let store = sut.open(&rules);
    let left: Vec<u32> = vec![4; rules.len()];
    let mut last = 0;
    for who in ["1", "2", "3"] {
        last = decide(sut, &*store, &checks(&rules, who), who).admitted(&left);
    }
    // Sweeps remove what ended more than the grace (none here) ago.
    sut.wait_until(sut.past(last + 1000) + 1);
    let report = store.sweep(None).expect("sweep");
    assert!(report.complete, "{}: {report:?}", sut.name());
    for who in ["1", "2", "3"] {
        for r in &rules {
            let key = r.key_for(who);
            let long = r.window_secs.get() == 600;
            assert_eq!(
                sut.holds(&key),
                long,
                "{}: {key} after the sweep",
                sut.name()
            );
        }
        assert_eq!(
            sut.counted(&format!("resolve:long:{who}"), Algorithm::Fixed),
            1,
            "{}",
            sut.name()
        );
    }
    let mut left = vec![4; rules.len()];
    left[1] = 3;
    decide(sut, &*store, &checks(&rules, "1"), "after the sweep").admitted(&left);
}

/// A handle whose store goes away fails (unavailable, within its bound, saying where) and,
/// once the store is back, works again by itself.
pub fn a_handle_recovers_when_its_store_returns(sut: &mut dyn StoreUnderTest) {
    let rules = [rule("ip", Algorithm::Fixed, 5, 600)];
    let store = sut.open(&rules);
    let c = checks(&rules, "k");
    decide(sut, &*store, &c, "1").admitted(&[4]);
    decide(sut, &*store, &c, "2").admitted(&[3]);
    sut.kill();
    let bound = sut.failure_bound(crate::stores::Timeouts::Short);
    let began = Instant::now();
    let e = store.decide(&c).expect_err("a decision without the store");
    let took = began.elapsed();
    eprintln!("{}: with the store gone: {e} ({took:?})", sut.name());
    assert_eq!(e.kind, StoreErrorKind::Unavailable, "{}: {e}", sut.name());
    assert!(took < bound, "{}: failed after {took:?}", sut.name());
    assert!(e.detail.contains(&sut.place()), "{}: {e}", sut.name());
    for secret in sut.secrets() {
        assert!(
            !e.detail.contains(&secret),
            "{}: a secret in {e}",
            sut.name()
        );
    }
    assert!(
        store.cache_get("resolve:cache:k").is_err(),
        "{}",
        sut.name()
    );
    sut.restart();
    let left = if sut.keeps_counts_across_restart() {
        2
    } else {
        4
    };
    decide(sut, &*store, &c, "the same handle after the restart").admitted(&[left]);
    store
        .probe()
        .unwrap_or_else(|e| panic!("{}: probe: {e}", sut.name()));
}
