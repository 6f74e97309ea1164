//! The fixed-window algorithm: given the stored counters of every rule's key and the time,
//! decide and say what to store. Pure: stores call it inside their atomic read-modify-write.

use crate::core::decision::{Decision, RuleStatus};
use crate::core::rule::{Algorithm, Rule};

/// The stored state of one key: a window that started at the key's first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// When the window started, in milliseconds since the Unix epoch.
    pub start_ms: u64,
    /// The window's length when it started, in milliseconds (kept so a sweep can tell when the
    /// key went stale without knowing the rules).
    pub window_ms: u64,
    /// Requests admitted in this window.
    pub count: u32,
}

impl Counter {
    /// When this window ends.
    pub fn end_ms(&self) -> u64 {
        self.start_ms.saturating_add(self.window_ms)
    }
}

/// What a store holds for one rule's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// A fixed window's counter (None: no window yet).
    Fixed(Option<Counter>),
    /// A sliding window's record: when each admitted request was made, in milliseconds, in
    /// any order. Older entries may be included; they are ignored.
    Sliding(Vec<u64>),
}

/// What a store must do to one key after a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Nothing.
    Keep,
    /// Store this counter.
    Counter(Counter),
    /// Record a request at the decision's time (and drop records older than the window).
    Append,
}

/// The limiter's verdict and what to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub decision: Decision,
    /// The time the decision was made at.
    pub now_ms: u64,
    pub writes: Vec<Write>,
}

/// The window of `rule` that is running at `now_ms`, if any. A counter from a clock that has
/// since gone backwards stays in force rather than being reset.
fn running(rule: &Rule, stored: Option<Counter>, now_ms: u64) -> Option<Counter> {
    stored.filter(|c| now_ms < c.start_ms.saturating_add(rule.window_ms()))
}

/// One rule's view of the request before deciding.
struct Standing {
    /// Requests already counted in the current window.
    used: u32,
    /// Milliseconds until one more request fits, when it does not fit now.
    wait_ms: Option<u64>,
    /// Milliseconds until the window (fixed) or the oldest record (sliding) expires.
    reset_ms: u64,
    /// The running fixed window, if any.
    window: Option<Counter>,
}

fn standing(rule: &Rule, state: &State, now_ms: u64) -> Standing {
    let limit = rule.limit.get();
    let window_ms = rule.window_ms();
    match state {
        State::Fixed(stored) => {
            let window = running(rule, *stored, now_ms);
            let (used, end) = match window {
                Some(c) => (c.count, c.start_ms.saturating_add(window_ms)),
                None => (0, now_ms),
            };
            let reset_ms = end.saturating_sub(now_ms);
            Standing {
                used,
                wait_ms: (used >= limit).then_some(reset_ms.max(1)),
                reset_ms,
                window,
            }
        }
        State::Sliding(times) => {
            // A record counts while it is within the last `window_ms`, now included.
            let mut live: Vec<u64> = times
                .iter()
                .copied()
                .filter(|t| t.saturating_add(window_ms) > now_ms)
                .collect();
            live.sort_unstable();
            let used = u32::try_from(live.len()).unwrap_or(u32::MAX);
            let expiry = |t: u64| t.saturating_add(window_ms).saturating_sub(now_ms);
            // Over the limit, one more fits once the record `used - limit` places from the
            // oldest has aged out.
            let wait_ms = (used >= limit).then(|| {
                let index = (used - limit) as usize;
                expiry(live[index]).max(1)
            });
            Standing {
                used,
                wait_ms,
                reset_ms: live.first().map_or(0, |t| expiry(*t)),
                window: None,
            }
        }
    }
}

/// Requests `state` counts for `rule` at `now_ms`: what `resolve stats` shows as used.
pub fn used(rule: &Rule, state: &State, now_ms: u64) -> u32 {
    standing(rule, state, now_ms).used
}

/// A fixed window after taking back one request admitted at `at_ms`: None when that request
/// is no longer in the window (the window ended, or the counter is at zero).
pub fn refunded(counter: Counter, at_ms: u64) -> Option<Counter> {
    (counter.count > 0 && counter.start_ms <= at_ms && at_ms < counter.end_ms()).then(|| Counter {
        count: counter.count - 1,
        ..counter
    })
}

/// Decide one request against every rule. `states[i]` is what the store holds for `rules[i]`'s
/// key. A request refused by any rule is counted by none; an admitted one by all.
pub fn decide(rules: &[&Rule], states: &[State], now_ms: u64) -> Outcome {
    debug_assert_eq!(rules.len(), states.len());
    let standings: Vec<Standing> = rules
        .iter()
        .zip(states)
        .map(|(rule, state)| standing(rule, state, now_ms))
        .collect();

    // The refusing rule that admits again last decides the wait.
    let mut refusal: Option<(usize, u64)> = None;
    for (i, s) in standings.iter().enumerate() {
        if let Some(wait) = s.wait_ms
            && refusal.is_none_or(|(_, longest)| wait > longest)
        {
            refusal = Some((i, wait));
        }
    }

    if let Some((rule, wait_ms)) = refusal {
        let statuses = rules
            .iter()
            .zip(&standings)
            .map(|(r, s)| RuleStatus {
                remaining: r.limit.get().saturating_sub(s.used),
                reset_ms: s.reset_ms,
                shared: false,
            })
            .collect();
        return Outcome {
            decision: Decision::Refuse {
                rule,
                wait_ms,
                statuses,
            },
            now_ms,
            writes: vec![Write::Keep; rules.len()],
        };
    }

    let mut writes = Vec::with_capacity(rules.len());
    let mut statuses = Vec::with_capacity(rules.len());
    for (rule, s) in rules.iter().zip(&standings) {
        let remaining = rule.limit.get().saturating_sub(s.used.saturating_add(1));
        match rule.algorithm {
            Algorithm::Fixed => {
                let counter = match s.window {
                    Some(c) => Counter {
                        count: c.count + 1,
                        ..c
                    },
                    None => Counter {
                        start_ms: now_ms,
                        window_ms: rule.window_ms(),
                        count: 1,
                    },
                };
                writes.push(Write::Counter(counter));
                statuses.push(RuleStatus {
                    remaining,
                    reset_ms: counter.end_ms().saturating_sub(now_ms),
                    shared: false,
                });
            }
            Algorithm::Sliding => {
                writes.push(Write::Append);
                let reset_ms = if s.used == 0 {
                    rule.window_ms()
                } else {
                    s.reset_ms
                };
                statuses.push(RuleStatus {
                    remaining,
                    reset_ms,
                    shared: false,
                });
            }
        }
    }
    Outcome {
        decision: Decision::Admit {
            statuses,
            at_ms: now_ms,
        },
        now_ms,
        writes,
    }
}

#[cfg(test)]
mod tests {
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
            let outcome = decide(rules, &self.states, clock.now_ms());
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
        assert_eq!(refunded(c, 5_000).map(|c| c.count), Some(2));
        assert_eq!(refunded(c, 61_000), None, "after the window");
        assert_eq!(refunded(c, 500), None, "before the window");
        assert_eq!(refunded(Counter { count: 0, ..c }, 5_000), None);
    }

    #[test]
    fn no_rules_admit_everything() {
        let outcome = decide(&[], &[], 0);
        assert!(outcome.decision.is_admit());
        assert!(outcome.writes.is_empty());
    }
}
