//! The fixed-window algorithm: given the stored counters of every rule's key and the time,
//! decide and say what to store. Pure: stores call it inside their atomic read-modify-write.

use crate::decision::{Decision, RuleStatus};
use crate::rule::Rule;

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

/// The limiter's verdict plus the counters to store (`None`: leave that key as it is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub decision: Decision,
    pub writes: Vec<Option<Counter>>,
}

fn ceil_secs(ms: u64) -> u32 {
    u32::try_from(ms.div_ceil(1000)).unwrap_or(u32::MAX)
}

/// The window of `rule` that is running at `now_ms`, if any. A counter from a clock that has
/// since gone backwards stays in force rather than being reset.
fn running(rule: &Rule, stored: Option<Counter>, now_ms: u64) -> Option<Counter> {
    stored.filter(|c| now_ms < c.start_ms.saturating_add(rule.window_ms()))
}

/// Decide one request against every rule. `states[i]` is what the store holds for `rules[i]`'s
/// key. A request refused by any rule is counted by none; an admitted one by all.
pub fn decide(rules: &[&Rule], states: &[Option<Counter>], now_ms: u64) -> Outcome {
    debug_assert_eq!(rules.len(), states.len());
    let current: Vec<Option<Counter>> = rules
        .iter()
        .zip(states)
        .map(|(rule, stored)| running(rule, *stored, now_ms))
        .collect();

    // The refusing rule that admits again last decides the wait.
    let mut refusal: Option<(usize, u64)> = None;
    for (i, (rule, window)) in rules.iter().zip(&current).enumerate() {
        if let Some(c) = window
            && c.count >= rule.limit.get()
        {
            let wait_ms = c
                .start_ms
                .saturating_add(rule.window_ms())
                .saturating_sub(now_ms)
                .max(1);
            if refusal.is_none_or(|(_, longest)| wait_ms > longest) {
                refusal = Some((i, wait_ms));
            }
        }
    }

    if let Some((rule, wait_ms)) = refusal {
        let statuses = rules
            .iter()
            .zip(&current)
            .map(|(r, w)| status(r, *w, now_ms))
            .collect();
        return Outcome {
            decision: Decision::Refuse {
                rule,
                retry_after_secs: ceil_secs(wait_ms).max(1),
                statuses,
            },
            writes: vec![None; rules.len()],
        };
    }

    let writes: Vec<Option<Counter>> = rules
        .iter()
        .zip(&current)
        .map(|(rule, window)| {
            Some(match window {
                Some(c) => Counter {
                    count: c.count + 1,
                    ..*c
                },
                None => Counter {
                    start_ms: now_ms,
                    window_ms: rule.window_ms(),
                    count: 1,
                },
            })
        })
        .collect();
    let statuses = rules
        .iter()
        .zip(&writes)
        .map(|(r, w)| status(r, *w, now_ms))
        .collect();
    Outcome {
        decision: Decision::Admit { statuses },
        writes,
    }
}

fn status(rule: &Rule, window: Option<Counter>, now_ms: u64) -> RuleStatus {
    match window {
        Some(c) => RuleStatus {
            remaining: rule.limit.get().saturating_sub(c.count),
            reset_secs: ceil_secs(
                c.start_ms
                    .saturating_add(rule.window_ms())
                    .saturating_sub(now_ms),
            ),
        },
        None => RuleStatus {
            remaining: rule.limit.get(),
            reset_secs: 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, FakeClock};
    use crate::rule::{KeyKind, RuleName};
    use std::num::NonZeroU32;

    fn rule(name: &str, limit: u32, window_secs: u32) -> Rule {
        Rule {
            name: RuleName::new(name).unwrap(),
            key: KeyKind::Ip,
            limit: NonZeroU32::new(limit).unwrap(),
            window_secs: NonZeroU32::new(window_secs).unwrap(),
        }
    }

    /// A store of one process: applies the outcome's writes, as a real store does atomically.
    struct Memory {
        states: Vec<Option<Counter>>,
    }

    impl Memory {
        fn new(n: usize) -> Self {
            Memory {
                states: vec![None; n],
            }
        }

        fn hit(&mut self, rules: &[&Rule], clock: &FakeClock) -> Decision {
            let outcome = decide(rules, &self.states, clock.now_ms());
            for (slot, write) in self.states.iter_mut().zip(outcome.writes) {
                if let Some(c) = write {
                    *slot = Some(c);
                }
            }
            outcome.decision
        }
    }

    #[test]
    fn admits_exactly_the_limit_then_refuses() {
        let r = rule("ip", 30, 60);
        let clock = FakeClock::at(1_000_000);
        let mut store = Memory::new(1);
        for i in 0..30 {
            let d = store.hit(&[&r], &clock);
            assert!(d.is_admit(), "request {i}");
            assert_eq!(d.statuses()[0].remaining, 29 - i);
            clock.advance_ms(100);
        }
        let d = store.hit(&[&r], &clock);
        assert!(!d.is_admit());
        assert_eq!(store.states[0].unwrap().count, 30);
    }

    #[test]
    fn retry_after_is_the_exact_wait_rounded_up() {
        let r = rule("ip", 1, 60);
        let clock = FakeClock::at(10_500);
        let mut store = Memory::new(1);
        assert!(store.hit(&[&r], &clock).is_admit());
        // 9.7 s later the window has 50.3 s left: 51 whole seconds.
        clock.advance_ms(9_700);
        match store.hit(&[&r], &clock) {
            Decision::Refuse {
                retry_after_secs, ..
            } => assert_eq!(retry_after_secs, 51),
            other => panic!("{other:?}"),
        }
        // Exactly on a second boundary: no rounding up.
        clock.set_ms(10_500 + 58_500);
        match store.hit(&[&r], &clock) {
            Decision::Refuse {
                retry_after_secs, ..
            } => assert_eq!(retry_after_secs, 2),
            other => panic!("{other:?}"),
        }
        // One millisecond before the end the wait is still at least one second.
        clock.set_ms(10_500 + 59_999);
        match store.hit(&[&r], &clock) {
            Decision::Refuse {
                retry_after_secs, ..
            } => assert_eq!(retry_after_secs, 1),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_window_ends_exactly_at_start_plus_length() {
        let r = rule("ip", 2, 10);
        let clock = FakeClock::at(5_000);
        let mut store = Memory::new(1);
        assert!(store.hit(&[&r], &clock).is_admit());
        clock.advance_ms(3_000);
        assert!(store.hit(&[&r], &clock).is_admit());
        clock.set_ms(5_000 + 9_999);
        assert!(!store.hit(&[&r], &clock).is_admit());
        clock.set_ms(5_000 + 10_000);
        assert!(store.hit(&[&r], &clock).is_admit());
        // The new window starts at that request, not at the old window's end plus a multiple.
        assert_eq!(store.states[0].unwrap().start_ms, 15_000);
        assert_eq!(store.states[0].unwrap().count, 1);
    }

    #[test]
    fn a_refused_request_consumes_from_no_rule() {
        let minute = rule("minute", 5, 60);
        let hour = rule("hour", 3, 3600);
        let clock = FakeClock::at(0);
        let mut store = Memory::new(2);
        for _ in 0..3 {
            assert!(store.hit(&[&minute, &hour], &clock).is_admit());
        }
        for _ in 0..10 {
            match store.hit(&[&minute, &hour], &clock) {
                Decision::Refuse {
                    rule,
                    retry_after_secs,
                    statuses,
                } => {
                    assert_eq!(rule, 1);
                    assert_eq!(retry_after_secs, 3600);
                    assert_eq!(statuses[0].remaining, 2);
                    assert_eq!(statuses[1].remaining, 0);
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(store.states[0].unwrap().count, 3, "minute rule untouched");
        assert_eq!(store.states[1].unwrap().count, 3, "hour rule untouched");
    }

    #[test]
    fn with_several_refusing_rules_the_wait_is_the_longest() {
        let a = rule("a", 1, 10);
        let b = rule("b", 1, 100);
        let clock = FakeClock::at(0);
        let mut store = Memory::new(2);
        assert!(store.hit(&[&a, &b], &clock).is_admit());
        clock.advance_ms(1_000);
        match store.hit(&[&a, &b], &clock) {
            Decision::Refuse {
                rule,
                retry_after_secs,
                ..
            } => assert_eq!((rule, retry_after_secs), (1, 99)),
            other => panic!("{other:?}"),
        }
        // After a's window ends, b alone still refuses; after b's, both admit.
        clock.set_ms(10_000);
        match store.hit(&[&a, &b], &clock) {
            Decision::Refuse {
                rule,
                retry_after_secs,
                ..
            } => assert_eq!((rule, retry_after_secs), (1, 90)),
            other => panic!("{other:?}"),
        }
        clock.set_ms(100_000);
        assert!(store.hit(&[&a, &b], &clock).is_admit());
    }

    #[test]
    fn a_clock_that_goes_backwards_does_not_reset_the_window() {
        let r = rule("ip", 1, 60);
        let clock = FakeClock::at(100_000);
        let mut store = Memory::new(1);
        assert!(store.hit(&[&r], &clock).is_admit());
        clock.set_ms(90_000);
        match store.hit(&[&r], &clock) {
            Decision::Refuse {
                retry_after_secs, ..
            } => assert_eq!(retry_after_secs, 70),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_shorter_configured_window_applies_to_a_stored_counter() {
        let long = rule("ip", 1, 3600);
        let clock = FakeClock::at(0);
        let mut store = Memory::new(1);
        assert!(store.hit(&[&long], &clock).is_admit());
        let short = rule("ip", 1, 60);
        clock.set_ms(60_000);
        assert!(store.hit(&[&short], &clock).is_admit());
    }

    #[test]
    fn statuses_report_remaining_and_reset() {
        let r = rule("ip", 3, 60);
        let clock = FakeClock::at(0);
        let mut store = Memory::new(1);
        let d = store.hit(&[&r], &clock);
        assert_eq!(
            d.statuses(),
            &[RuleStatus {
                remaining: 2,
                reset_secs: 60
            }]
        );
        clock.advance_ms(20_001);
        let d = store.hit(&[&r], &clock);
        assert_eq!(
            d.statuses(),
            &[RuleStatus {
                remaining: 1,
                reset_secs: 40
            }]
        );
    }

    #[test]
    fn no_rules_admit_everything() {
        let outcome = decide(&[], &[], 0);
        assert!(outcome.decision.is_admit());
        assert!(outcome.writes.is_empty());
    }
}
