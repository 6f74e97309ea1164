//! What the limiter decided for one request: admitted, or refused with the exact wait.

/// Where one rule stands after a decision, for the `RateLimit` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleStatus {
    /// Requests this key may still make in the current window.
    pub remaining: u32,
    /// Seconds until the current window ends (0 when the key has no window running).
    pub reset_secs: u32,
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
        /// Whole seconds until every refusing rule admits again (at least 1).
        retry_after_secs: u32,
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
}
