//! What the limiter decided for one request: admitted, or refused with the exact wait.

/// Whole seconds, rounded up, in `ms`: what headers say of a wait.
pub fn ceil_secs(ms: u64) -> u32 {
    u32::try_from(ms.div_ceil(1000)).unwrap_or(u32::MAX)
}

/// Where one rule stands after a decision, for the `RateLimit` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleStatus {
    /// Requests this key may still make in the current window.
    pub remaining: u32,
    /// Milliseconds until the current window ends (0 when the key has no window running).
    pub reset_ms: u64,
    /// The key counted others too: the store was full and counted this client by a key it
    /// shares with other new clients (the file store's folded keys), not by its own.
    pub shared: bool,
}

impl RuleStatus {
    /// Seconds until the current window ends, rounded up.
    pub fn reset_secs(&self) -> u32 {
        ceil_secs(self.reset_ms)
    }
}

/// The answer of the limiter. Being refused is a decision, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Every rule admitted the request; it was counted by each, at `at_ms` by the store's
    /// clock (what a refund names).
    Admit {
        statuses: Vec<RuleStatus>,
        at_ms: u64,
    },
    /// At least one rule refused; nothing was counted by any rule.
    Refuse {
        /// Index of the refusing rule that admits again last.
        rule: usize,
        /// Milliseconds until every refusing rule admits again.
        wait_ms: u64,
        /// One per rule decided, in order: every rule, or only the client's own when they
        /// refused the request by themselves (`limiter::decide_own_first`), the site's rules
        /// then unread.
        statuses: Vec<RuleStatus>,
    },
}

impl Decision {
    /// The decision on a request no rule applies to: admitted, counted nowhere.
    pub fn no_checks() -> Decision {
        Decision::Admit {
            statuses: Vec::new(),
            at_ms: 0,
        }
    }

    pub fn is_admit(&self) -> bool {
        matches!(self, Decision::Admit { .. })
    }

    pub fn statuses(&self) -> &[RuleStatus] {
        match self {
            Decision::Admit { statuses, .. } | Decision::Refuse { statuses, .. } => statuses,
        }
    }

    /// For a refusal, the whole seconds to wait (rounded up, at least 1): `Retry-After`.
    pub fn retry_after_secs(&self) -> Option<u32> {
        match self {
            Decision::Refuse { wait_ms, .. } => Some(ceil_secs(*wait_ms).max(1)),
            Decision::Admit { .. } => None,
        }
    }

    /// Every wait the answer to this decision says, in whole seconds: the retry's (a refusal's)
    /// and each rule's reset. Two refusals with the same rules, counts and waits are answered
    /// with the same bytes.
    pub fn waits(&self) -> Vec<u32> {
        self.retry_after_secs()
            .into_iter()
            .chain(self.statuses().iter().map(RuleStatus::reset_secs))
            .collect()
    }

    /// The same refusal `elapsed_ms` later, when nothing was counted or taken back in between:
    /// every wait shorter by that much. None for an admission, and from the moment the wait is
    /// over or any rule's window ends (its status would change then).
    pub fn refusal_later(&self, elapsed_ms: u64) -> Option<Decision> {
        match self {
            Decision::Refuse {
                rule,
                wait_ms,
                statuses,
            } if elapsed_ms < *wait_ms
                && statuses
                    .iter()
                    .all(|s| s.reset_ms == 0 || elapsed_ms < s.reset_ms) =>
            {
                Some(Decision::Refuse {
                    rule: *rule,
                    wait_ms: wait_ms - elapsed_ms,
                    statuses: statuses
                        .iter()
                        .map(|s| RuleStatus {
                            remaining: s.remaining,
                            reset_ms: s.reset_ms.saturating_sub(elapsed_ms),
                            shared: s.shared,
                        })
                        .collect(),
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(wait_ms: u64) -> Decision {
        Decision::Refuse {
            rule: 1,
            wait_ms,
            statuses: vec![
                RuleStatus {
                    remaining: 4,
                    reset_ms: 5000,
                    shared: false,
                },
                RuleStatus {
                    remaining: 0,
                    reset_ms: wait_ms,
                    shared: false,
                },
            ],
        }
    }

    #[test]
    fn retry_after_is_the_wait_rounded_up_and_never_zero() {
        assert_eq!(refusal(1).retry_after_secs(), Some(1));
        assert_eq!(refusal(1000).retry_after_secs(), Some(1));
        assert_eq!(refusal(1001).retry_after_secs(), Some(2));
        assert_eq!(refusal(0).retry_after_secs(), Some(1));
        assert_eq!(Decision::no_checks().retry_after_secs(), None);
    }

    #[test]
    fn a_refusal_later_waits_less_until_it_is_over() {
        let later = refusal(2500).refusal_later(1000).unwrap();
        assert_eq!(
            later,
            Decision::Refuse {
                rule: 1,
                wait_ms: 1500,
                statuses: vec![
                    RuleStatus {
                        remaining: 4,
                        reset_ms: 4000,
                        shared: false
                    },
                    RuleStatus {
                        remaining: 0,
                        reset_ms: 1500,
                        shared: false
                    },
                ],
            }
        );
        assert_eq!(later.retry_after_secs(), Some(2));
        let last = refusal(2500).refusal_later(2499).unwrap();
        assert_eq!(last.retry_after_secs(), Some(1));
        assert_eq!(refusal(2500).refusal_later(2500), None);
        assert_eq!(Decision::no_checks().refusal_later(0), None);
    }

    #[test]
    fn a_refusal_is_over_when_another_rules_window_ends() {
        // The first rule's window ends after 5 s: its remaining count would change then.
        let long = refusal(9000);
        assert!(long.refusal_later(4999).is_some());
        assert_eq!(long.refusal_later(5000), None);
    }
}
