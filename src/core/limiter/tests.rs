//! Tests of the limiter's decision, on a fake clock.

use super::*;
use crate::core::clock::{Clock, FakeClock};
use crate::core::rule::KeyKind;

fn rule(name: &str, limit: u32, window_secs: u32) -> Rule {
    Rule::new(
        name,
        KeyKind::Ip,
        Algorithm::Fixed,
        limit,
        window_secs,
        crate::support::defaults::KEY_TEMPLATE_IP,
    )
    .unwrap()
}

fn sliding(name: &str, limit: u32, window_secs: u32) -> Rule {
    Rule {
        algorithm: Algorithm::Sliding,
        ..rule(name, limit, window_secs)
    }
}

/// A store of one process: applies the outcome's writes, as a real store does atomically.
struct Memory {
    states: Vec<State>,
}

impl Memory {
    fn for_rules(rules: &[&Rule]) -> Self {
        Memory {
            states: rules
                .iter()
                .map(|r| match r.algorithm {
                    Algorithm::Fixed => State::Fixed(None),
                    Algorithm::Sliding => State::Sliding(Vec::new()),
                })
                .collect(),
        }
    }

    fn counter(&self, i: usize) -> Counter {
        match &self.states[i] {
            State::Fixed(Some(c)) => *c,
            other => panic!("{other:?}"),
        }
    }

    fn hit(&mut self, rules: &[&Rule], clock: &FakeClock) -> Decision {
        self.hit_own_first(rules, rules.len(), clock)
    }

    /// One request whose first `own` rules are the client's; the writes of a refusal by
    /// those alone cover only them.
    fn hit_own_first(&mut self, rules: &[&Rule], own: usize, clock: &FakeClock) -> Decision {
        let outcome = decide_own_first(rules, &self.states, own, clock.now_ms());
        for (state, write) in self.states.iter_mut().zip(outcome.writes) {
            match (state, write) {
                (_, Write::Keep) => {}
                (state, Write::Counter(c)) => *state = State::Fixed(Some(c)),
                (State::Sliding(times), Write::Append) => times.push(outcome.now_ms),
                (state, Write::Append) => panic!("append to {state:?}"),
            }
        }
        outcome.decision
    }
}

/// A refusal's rule and Retry-After; panics on an admission.
fn refused(d: Decision) -> (usize, u32) {
    match d {
        Decision::Refuse { rule, .. } => (rule, d.retry_after_secs().unwrap_or(0)),
        other => panic!("{other:?}"),
    }
}

/// Rules, the store of one process counting by them, and the clock of its requests.
struct Bench {
    rules: Vec<Rule>,
    store: Memory,
    clock: FakeClock,
}

impl Bench {
    /// `rules` (fixed windows or sliding), on a clock at `start_ms`.
    fn new(rules: Vec<Rule>, start_ms: u64) -> Bench {
        let store = Memory::for_rules(&rules.iter().collect::<Vec<_>>());
        Bench {
            rules,
            store,
            clock: FakeClock::at(start_ms),
        }
    }

    /// One request, now, under every rule.
    fn hit(&mut self) -> Decision {
        let rules: Vec<&Rule> = self.rules.iter().collect();
        self.store.hit(&rules, &self.clock)
    }

    /// One request at `ms` on the clock.
    fn hit_at(&mut self, ms: u64) -> Decision {
        self.clock.set_ms(ms);
        self.hit()
    }

    /// One request whose first `own` rules are the client's.
    fn hit_own_first(&mut self, own: usize) -> Decision {
        let rules: Vec<&Rule> = self.rules.iter().collect();
        self.store.hit_own_first(&rules, own, &self.clock)
    }
}

#[test]
fn admits_exactly_the_limit_then_refuses() {
    let mut b = Bench::new(vec![rule("ip", 30, 60)], 1_000_000);
    for i in 0..30 {
        let d = b.hit();
        assert!(d.is_admit(), "request {i}");
        assert_eq!(d.statuses()[0].remaining, 29 - i);
        b.clock.advance_ms(100);
    }
    let d = b.hit();
    assert!(!d.is_admit());
    assert_eq!(b.store.counter(0).count, 30);
}

#[test]
fn retry_after_is_the_exact_wait_rounded_up() {
    let mut b = Bench::new(vec![rule("ip", 1, 60)], 10_500);
    assert!(b.hit().is_admit());
    // 9.7 s later the window has 50.3 s left: 51 whole seconds.
    assert_eq!(refused(b.hit_at(10_500 + 9_700)), (0, 51));
    // Exactly on a second boundary: no rounding up.
    assert_eq!(refused(b.hit_at(10_500 + 58_500)), (0, 2));
    // One millisecond before the end the wait is still at least one second.
    assert_eq!(refused(b.hit_at(10_500 + 59_999)), (0, 1));
}

#[test]
fn the_window_ends_exactly_at_start_plus_length() {
    let mut b = Bench::new(vec![rule("ip", 2, 10)], 5_000);
    assert!(b.hit().is_admit());
    assert!(b.hit_at(5_000 + 3_000).is_admit());
    assert!(!b.hit_at(5_000 + 9_999).is_admit());
    assert!(b.hit_at(5_000 + 10_000).is_admit());
    // The new window starts at that request, not at the old window's end plus a multiple.
    assert_eq!(b.store.counter(0).start_ms, 15_000);
    assert_eq!(b.store.counter(0).count, 1);
}

#[test]
fn a_refused_request_consumes_from_no_rule() {
    let mut b = Bench::new(vec![rule("minute", 5, 60), rule("hour", 3, 3600)], 0);
    for _ in 0..3 {
        assert!(b.hit().is_admit());
    }
    for _ in 0..10 {
        match b.hit() {
            Decision::Refuse {
                rule,
                wait_ms,
                statuses,
            } => {
                assert_eq!(rule, 1);
                assert_eq!(wait_ms, 3_600_000);
                assert_eq!(statuses[0].remaining, 2);
                assert_eq!(statuses[1].remaining, 0);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(b.store.counter(0).count, 3, "minute rule untouched");
    assert_eq!(b.store.counter(1).count, 3, "hour rule untouched");
}

#[test]
fn with_several_refusing_rules_the_wait_is_the_longest() {
    let mut b = Bench::new(vec![rule("a", 1, 10), rule("b", 1, 100)], 0);
    assert!(b.hit().is_admit());
    assert_eq!(refused(b.hit_at(1_000)), (1, 99));
    // After a's window ends, b alone still refuses; after b's, both admit.
    assert_eq!(refused(b.hit_at(10_000)), (1, 90));
    assert!(b.hit_at(100_000).is_admit());
}

#[test]
fn a_clock_that_goes_backwards_does_not_reset_the_window() {
    let mut b = Bench::new(vec![rule("ip", 1, 60)], 100_000);
    assert!(b.hit().is_admit());
    assert_eq!(refused(b.hit_at(90_000)), (0, 70));
}

#[test]
fn a_shorter_configured_window_applies_to_a_stored_counter() {
    let mut b = Bench::new(vec![rule("ip", 1, 3600)], 0);
    assert!(b.hit().is_admit());
    // The configuration now says a minute.
    b.rules[0] = rule("ip", 1, 60);
    assert!(b.hit_at(60_000).is_admit());
}

#[test]
fn statuses_report_remaining_and_reset() {
    let mut b = Bench::new(vec![rule("ip", 3, 60)], 0);
    assert_eq!(
        b.hit().statuses(),
        &[RuleStatus {
            remaining: 2,
            reset_ms: 60_000,
            shared: false
        }]
    );
    assert_eq!(
        b.hit_at(20_001).statuses(),
        &[RuleStatus {
            remaining: 1,
            reset_ms: 39_999,
            shared: false
        }]
    );
}

#[test]
fn sliding_admits_again_exactly_as_old_requests_age_out() {
    let mut b = Bench::new(vec![sliding("ip", 3, 10)], 100_000);
    // Requests at 0 s, 2 s and 5 s (relative): the fourth at 6 s is refused until the
    // first leaves the window at 10 s.
    for at in [0, 2_000, 5_000] {
        assert!(b.hit_at(100_000 + at).is_admit());
    }
    match b.hit_at(106_000) {
        Decision::Refuse {
            wait_ms, statuses, ..
        } => {
            assert_eq!(wait_ms, 4_000);
            assert_eq!(statuses[0].remaining, 0);
        }
        other => panic!("{other:?}"),
    }
    assert!(!b.hit_at(109_999).is_admit());
    assert!(
        b.hit_at(110_000).is_admit(),
        "the first request has aged out"
    );
    // Now 2 s, 5 s and 10 s are in the window: the next fits at 12 s.
    assert_eq!(refused(b.hit_at(111_500)), (0, 1));
    assert!(b.hit_at(112_000).is_admit());
}

#[test]
fn sliding_never_admits_more_than_the_limit_in_any_window() {
    let mut b = Bench::new(vec![sliding("ip", 5, 10)], 0);
    let mut admitted = Vec::new();
    // A request every 700 ms for a minute.
    for step in 0..86u64 {
        if b.hit_at(step * 700).is_admit() {
            admitted.push(step * 700);
        }
    }
    for (i, t) in admitted.iter().enumerate() {
        let in_window = admitted[i..].iter().filter(|u| **u < t + 10_000).count();
        assert!(in_window <= 5, "{in_window} admitted within 10 s of {t}");
    }
    // And it is not stingy: 5 per 10 s over 60 s is about 30.
    assert!(admitted.len() >= 29, "{}", admitted.len());
}

#[test]
fn sliding_counts_foreign_records_beyond_the_limit() {
    // Another program wrote more records than the limit: wait for enough to age out.
    let r = sliding("ip", 2, 10);
    let state = State::Sliding(vec![1_000, 2_000, 3_000, 4_000, 500]);
    let outcome = decide(&[&r], &[state], 5_000);
    assert_eq!(
        refused(outcome.decision),
        (0, 8),
        "the fourth-oldest leaves at 13 s"
    );
}

#[test]
fn fixed_and_sliding_rules_together() {
    let mut b = Bench::new(vec![rule("minute", 10, 60), sliding("burst", 2, 5)], 0);
    assert!(b.hit().is_admit());
    assert!(b.hit().is_admit());
    assert!(!b.hit().is_admit());
    assert_eq!(
        b.store.counter(0).count,
        2,
        "refused by burst: minute untouched"
    );
    assert!(b.hit_at(5_000).is_admit());
}

#[test]
fn refunds_take_back_only_from_the_same_window() {
    let c = Counter {
        start_ms: 1_000,
        window_ms: 60_000,
        count: 3,
    };
    let r = rule("ip", 9, 60);
    assert_eq!(refunded(&r, c, 5_000).map(|c| c.count), Some(2));
    assert_eq!(refunded(&r, c, 61_000), None, "after the window");
    assert_eq!(refunded(&r, c, 500), None, "before the window");
    assert_eq!(refunded(&r, Counter { count: 0, ..c }, 5_000), None);
    // A rule of bytes keeps what it counted.
    assert_eq!(refunded(&bytes_rule("b", 9, 60), c, 5_000), None);
}

/// The client's `ip` (1 a minute) and `burst` (1 in 10 s), then the site's `day` (2 a day).
fn own_then_site() -> Bench {
    Bench::new(
        vec![
            rule("ip", 1, 60),
            rule("burst", 1, 10),
            rule("day", 2, 86_400),
        ],
        0,
    )
}

#[test]
fn a_client_over_its_own_rules_is_refused_by_them_alone() {
    let mut b = own_then_site();
    assert!(b.hit_own_first(2).is_admit());
    // Another client spends the rest of the day: the site's rule refuses from now on.
    b.store.states[2] = State::Fixed(Some(Counter {
        start_ms: 0,
        window_ms: 86_400_000,
        count: 2,
    }));
    b.clock.set_ms(4_000);
    // Every rule at once names the day, which admits again last.
    let rules: Vec<&Rule> = b.rules.iter().collect();
    let all = decide(&rules, &b.store.states, 4_000);
    assert_eq!(refused(all.decision), (2, 86_396));
    // The client's own rules alone: `ip` admits again last of the two that refuse, and
    // the wait is until both do. Only they are reported, nothing is written.
    let outcome = decide_own_first(&rules, &b.store.states, 2, 4_000);
    assert_eq!(outcome.writes, [Write::Keep, Write::Keep]);
    match &outcome.decision {
        Decision::Refuse {
            rule,
            wait_ms,
            statuses,
        } => {
            assert_eq!((*rule, *wait_ms), (0, 56_000));
            assert_eq!(
                *statuses,
                [
                    RuleStatus {
                        remaining: 0,
                        reset_ms: 56_000,
                        shared: false
                    },
                    RuleStatus {
                        remaining: 0,
                        reset_ms: 6_000,
                        shared: false
                    },
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    // Decided before the site's state is read, as a store does.
    let first = own_refusal(&rules[..2], &b.store.states[..2], 4_000).unwrap();
    assert_eq!(first, outcome);
    assert_eq!(refused(b.hit_own_first(2)), (0, 56));
    assert_eq!(b.store.counter(2).count, 2, "the site's rule untouched");
}

#[test]
fn a_client_within_its_own_rules_is_decided_by_every_rule() {
    let mut b = own_then_site();
    assert!(b.hit_own_first(2).is_admit());
    assert_eq!(
        b.store.counter(2).count,
        1,
        "an admission counts by every rule"
    );
    b.clock.set_ms(60_000);
    assert!(b.hit_own_first(2).is_admit());
    // Within its own rules, over the site's: refused by the site's rule, every status told
    // (a spend limit's refusal, as before).
    b.clock.set_ms(120_000);
    let rules: Vec<&Rule> = b.rules.iter().collect();
    assert_eq!(
        own_refusal(&rules[..2], &b.store.states[..2], 120_000),
        None
    );
    let outcome = decide_own_first(&rules, &b.store.states, 2, 120_000);
    assert_eq!(outcome, decide(&rules, &b.store.states, 120_000));
    assert_eq!(refused(outcome.decision.clone()), (2, 86_280));
    assert_eq!(outcome.decision.statuses().len(), 3);
    assert_eq!(b.hit_own_first(2), outcome.decision);
    assert_eq!(b.store.counter(0).count, 1, "nothing counted");
}

#[test]
fn with_every_rule_the_clients_it_is_the_decision_of_all_at_once() {
    // The same requests decided both ways, step by step alike: `own` the number of rules
    // (or more), and none (the site's rules only).
    for own in [0, 3, 4] {
        let mut by_all = own_then_site();
        let mut own_first = own_then_site();
        for at in [
            0, 1, 5_000, 10_000, 59_999, 60_000, 70_000, 130_000, 86_400_000,
        ] {
            by_all.clock.set_ms(at);
            own_first.clock.set_ms(at);
            assert_eq!(
                by_all.hit(),
                own_first.hit_own_first(own),
                "own {own}, at {at}"
            );
        }
        assert_eq!(by_all.store.states, own_first.store.states);
    }
}

#[test]
fn no_rules_admit_everything() {
    let outcome = decide(&[], &[], 0);
    assert!(outcome.decision.is_admit());
    assert!(outcome.writes.is_empty());
}

fn bytes_rule(name: &str, limit_kib: u32, window_secs: u32) -> Rule {
    Rule {
        unit: crate::core::rule::Unit::Bytes,
        ..rule(name, limit_kib, window_secs)
    }
}

/// One request of a file of `size` bytes (None: not known before the paid call), applied.
fn hit_sized(store: &mut Memory, rules: &[&Rule], size: Option<u64>, now_ms: u64) -> Decision {
    let outcome = decide_sized(rules, &store.states, rules.len(), size, now_ms);
    for (state, write) in store.states.iter_mut().zip(outcome.writes) {
        if let Write::Counter(c) = write {
            *state = State::Fixed(Some(c));
        }
    }
    outcome.decision
}

#[test]
fn a_known_size_is_admitted_only_when_the_whole_file_fits() {
    let bytes = bytes_rule("ip-bytes", 100, 60);
    let calls = rule("ip", 30, 60);
    let rules = [&bytes, &calls];
    let mut store = Memory::for_rules(&rules);
    let t = 1_000_000;
    // 60 KiB, then 40 KiB: exactly the limit; the requests rule counts 1 each.
    assert!(hit_sized(&mut store, &rules, Some(60 * 1024), t).is_admit());
    assert!(hit_sized(&mut store, &rules, Some(40 * 1024 - 5), t + 1).is_admit());
    assert_eq!((store.counter(0).count, store.counter(1).count), (100, 2));
    // One byte more does not fit; neither does a size not known yet (nothing is left).
    for size in [Some(1), None] {
        let d = hit_sized(&mut store, &rules, size, t + 2);
        assert_eq!(refused(d), (0, 60), "{size:?}");
    }
    assert_eq!((store.counter(0).count, store.counter(1).count), (100, 2));
    // The window ends: a new one holds the next file.
    assert!(hit_sized(&mut store, &rules, Some(1), t + 60_000).is_admit());
    assert_eq!(store.counter(0).count, 1);
}

#[test]
fn a_file_larger_than_the_limit_waits_a_whole_window() {
    let bytes = bytes_rule("ip-bytes", 100, 60);
    let mut store = Memory::for_rules(&[&bytes]);
    let d = hit_sized(&mut store, &[&bytes], Some(101 * 1024), 5_000);
    assert_eq!(refused(d), (0, 60));
    assert_eq!(store.states[0], State::Fixed(None));
}

#[test]
fn an_unknown_size_is_admitted_below_the_limit_and_charged_after() {
    let bytes = bytes_rule("ip-bytes", 100, 60);
    let rules = [&bytes];
    let mut store = Memory::for_rules(&rules);
    let t = 1_000_000;
    // Admitted with nothing counted: the window starts at the request.
    assert!(hit_sized(&mut store, &rules, None, t).is_admit());
    let started = store.counter(0);
    assert_eq!((started.start_ms, started.count), (t, 0));
    // The answer says 150 KiB: charged whole, past the limit; the next request is refused.
    let after = charged(&bytes, started, t, 150 * 1024).unwrap();
    assert_eq!(after.count, 150);
    store.states[0] = State::Fixed(Some(after));
    assert_eq!(refused(hit_sized(&mut store, &rules, None, t + 1)), (0, 60));
    // A charge for a request of an ended window, or on a rule of requests, changes nothing.
    assert_eq!(charged(&bytes, after, t + 60_000, 1), None);
    assert_eq!(charged(&rule("ip", 9, 60), after, t, 1024), None);
    assert_eq!(charged(&bytes, after, t - 1, 1024), None);
    assert!(charges_any(&[&rule("ip", 9, 60), &bytes]));
    assert!(!charges_any(&[&rule("ip", 9, 60)]));
}
