//! The fixed-window algorithm: given the stored counters of every rule's key and the time,
//! decide and say what to store. Pure: stores call it inside their atomic read-modify-write.
//!
//! A request counts 1 on a rule of requests, and its file's size on a rule of bytes
//! ([`Unit::amount`]): the size when it is known before the paid call (then the request is
//! admitted only if the whole file fits), else 0 (admitted while the count is below the
//! limit) and the size added after the answer ([`charged`]).

use crate::core::decision::{Decision, RuleStatus};
use crate::core::rule::{Algorithm, Rule, Unit};

/// The stored state of one key: a window that started at the key's first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// When the window started, in milliseconds since the Unix epoch.
    pub start_ms: u64,
    /// The window's length when it started, in milliseconds (kept so a sweep can tell when the
    /// key went stale without knowing the rules).
    pub window_ms: u64,
    /// Requests admitted in this window (kibibytes, for a rule of bytes).
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

/// What a request counts on `rule`: [`Unit::amount`] for a fixed window; a sliding window
/// keeps one record per request, so it counts requests only.
fn amount(rule: &Rule, size: Option<u64>) -> u32 {
    match rule.algorithm {
        Algorithm::Fixed => rule.unit.amount(size),
        Algorithm::Sliding => 1,
    }
}

fn standing(rule: &Rule, state: &State, size: Option<u64>, now_ms: u64) -> Standing {
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
            // A request fits while its amount does, and at least one unit is left (an amount
            // of 0, a size still unknown, is admitted only below the limit).
            let fits = used.saturating_add(amount(rule, size).max(1)) <= limit;
            // A file larger than the whole limit fits no window: it waits a whole one.
            let wait = if window.is_some() {
                reset_ms.max(1)
            } else {
                window_ms.max(1)
            };
            Standing {
                used,
                wait_ms: (!fits).then_some(wait),
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
    standing(rule, state, None, now_ms).used
}

/// A fixed window of `rule` after taking back one request admitted at `at_ms`: None when
/// that request is no longer in the window (the window ended, or the counter is at zero), and
/// on a rule of bytes, which keeps what it counted.
pub fn refunded(rule: &Rule, counter: Counter, at_ms: u64) -> Option<Counter> {
    let counts_requests = rule.unit == Unit::Requests;
    (counts_requests && counter.count > 0 && counter.start_ms <= at_ms && at_ms < counter.end_ms())
        .then(|| Counter {
            count: counter.count - 1,
            ..counter
        })
}

/// What a request admitted at `at_ms` whose file turned out to be `size` bytes adds to a
/// rule's fixed window after the answer: the size in kibibytes on a rule of bytes whose
/// window still holds the request, nothing (None) on any other. An increment, never a second
/// decision: the count may pass the limit, by at most this file, and the next request is
/// refused.
pub fn charged(rule: &Rule, counter: Counter, at_ms: u64, size: u64) -> Option<Counter> {
    let amount = match (rule.unit, rule.algorithm) {
        (Unit::Bytes, Algorithm::Fixed) => rule.unit.amount(Some(size)),
        _ => 0,
    };
    (amount > 0 && counter.start_ms <= at_ms && at_ms < counter.end_ms()).then(|| Counter {
        count: counter.count.saturating_add(amount),
        ..counter
    })
}

/// Whether [`charged`] can change any of `rules`: a rule of bytes among them.
pub fn charges_any(rules: &[&Rule]) -> bool {
    rules.iter().any(|r| r.unit == Unit::Bytes)
}

/// Decide one request whose first `own` rules are the client's own (the rest the site's: the
/// spend limits, the provider's rates). A request its own rules refuse is refused by them
/// alone: by the one that admits again last, for as long as every refusing one of them needs,
/// with statuses and writes for those rules only; the others are neither read nor counted, so
/// a store may decide the first `own` before it reads, or locks, the rest
/// ([`own_refusal`]). Otherwise every rule decides at once, as [`decide`]. With `own` the
/// number of rules (or more) this is [`decide`].
pub fn decide_own_first(rules: &[&Rule], states: &[State], own: usize, now_ms: u64) -> Outcome {
    decide_sized(rules, states, own, None, now_ms)
}

/// [`decide_own_first`] for a request whose file's size may be known before the paid call:
/// a rule of bytes counts it ([`Unit::amount`]).
pub fn decide_sized(
    rules: &[&Rule],
    states: &[State],
    own: usize,
    size: Option<u64>,
    now_ms: u64,
) -> Outcome {
    if own >= rules.len() {
        return decide_all(rules, states, size, now_ms);
    }
    own_refusal_sized(&rules[..own], &states[..own], size, now_ms)
        .unwrap_or_else(|| decide_all(rules, states, size, now_ms))
}

/// The refusal of a request by the client's own rules alone, when they refuse it: the first
/// step of [`decide_own_first`], for a store that reads the other rules' states only when
/// this is None. `states[i]` is what the store holds for `own_rules[i]`'s key.
pub fn own_refusal(own_rules: &[&Rule], own_states: &[State], now_ms: u64) -> Option<Outcome> {
    own_refusal_sized(own_rules, own_states, None, now_ms)
}

/// [`own_refusal`] for a request of a known size, as [`decide_sized`].
pub fn own_refusal_sized(
    own_rules: &[&Rule],
    own_states: &[State],
    size: Option<u64>,
    now_ms: u64,
) -> Option<Outcome> {
    let outcome = decide_all(own_rules, own_states, size, now_ms);
    (!outcome.decision.is_admit()).then_some(outcome)
}

/// Decide one request against every rule. `states[i]` is what the store holds for `rules[i]`'s
/// key. A request refused by any rule is counted by none; an admitted one by all.
pub fn decide(rules: &[&Rule], states: &[State], now_ms: u64) -> Outcome {
    decide_all(rules, states, None, now_ms)
}

/// [`decide`] for a request whose file's size may be known.
fn decide_all(rules: &[&Rule], states: &[State], size: Option<u64>, now_ms: u64) -> Outcome {
    debug_assert_eq!(rules.len(), states.len());
    let standings: Vec<Standing> = rules
        .iter()
        .zip(states)
        .map(|(rule, state)| standing(rule, state, size, now_ms))
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
        let amount = amount(rule, size);
        let remaining = rule
            .limit
            .get()
            .saturating_sub(s.used.saturating_add(amount));
        match rule.algorithm {
            Algorithm::Fixed => {
                let counter = match s.window {
                    Some(c) => Counter {
                        count: c.count.saturating_add(amount),
                        ..c
                    },
                    None => Counter {
                        start_ms: now_ms,
                        window_ms: rule.window_ms(),
                        count: amount,
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
mod tests;
