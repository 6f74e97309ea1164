//! Failed sign-ins, limited per client address by the site's own limiter and store: 5 in 15
//! minutes, under the key `resolve:admin-signin:ADDRESS`. Each attempt is counted before the
//! password is looked at, and a right one is given back (refunded): only failures count, and an
//! address that used up its attempts is refused without its password being checked at all.

use crate::core::decision::Decision;
use crate::core::rule::{Algorithm, KeyKind, Rule};
use crate::store::counters::Counters;
use crate::store::{Check, StoreError};
use crate::support::defaults;

/// The limit on failed sign-ins.
pub fn rule() -> Rule {
    Rule::new(
        defaults::ADMIN_SIGNIN_RULE,
        KeyKind::Ip,
        Algorithm::Fixed,
        defaults::ADMIN_SIGNIN_FAILURES,
        defaults::ADMIN_SIGNIN_WINDOW_SECS,
        defaults::KEY_TEMPLATE_IP,
    )
    .expect("a valid rule")
}

/// Whether an address may try a password now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// It may: this attempt is counted (at `at_ms`, which a refund names) as number `attempt`
    /// of the window's `limit`.
    Open {
        at_ms: u64,
        attempt: u32,
        limit: u32,
    },
    /// It used up its attempts: again in this many seconds.
    Shut { retry_after_secs: u32 },
}

/// Counts one attempt from `identity` (the client's address as rules count it).
pub fn gate(store: &dyn Counters, rule: &Rule, identity: &str) -> Result<Gate, StoreError> {
    let check = [Check {
        rule,
        key: rule.key_for(identity),
    }];
    Ok(match store.decide(&check)? {
        Decision::Admit { statuses, at_ms } => {
            let limit = rule.limit.get();
            let remaining = statuses.first().map_or(0, |s| s.remaining);
            Gate::Open {
                at_ms,
                attempt: limit.saturating_sub(remaining),
                limit,
            }
        }
        refused @ Decision::Refuse { .. } => Gate::Shut {
            retry_after_secs: refused.retry_after_secs().unwrap_or(1),
        },
    })
}

/// Gives back the attempt counted at `at_ms`: the password was right.
pub fn passed(
    store: &dyn Counters,
    rule: &Rule,
    identity: &str,
    at_ms: u64,
) -> Result<(), StoreError> {
    let check = [Check {
        rule,
        key: rule.key_for(identity),
    }];
    store.refund(&check, at_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::FakeClock;
    use crate::store::memory::MemoryStore;

    #[test]
    fn five_failures_then_shut_and_a_right_password_costs_nothing() {
        let store = MemoryStore::new(FakeClock::at(1_000_000), std::time::Duration::ZERO);
        let rule = rule();
        assert_eq!(
            rule.key_for("203.0.113.9"),
            "resolve:admin-signin:203.0.113.9"
        );
        // A right password: counted, then given back, any number of times.
        for _ in 0..10 {
            let Gate::Open { at_ms, attempt, .. } = gate(&store, &rule, "203.0.113.9").unwrap()
            else {
                panic!("shut")
            };
            assert_eq!(attempt, 1);
            passed(&store, &rule, "203.0.113.9", at_ms).unwrap();
        }
        // Five wrong ones are let through, the sixth is not.
        for n in 1..=5 {
            assert!(matches!(
                gate(&store, &rule, "203.0.113.9").unwrap(),
                Gate::Open { attempt, limit: 5, .. } if attempt == n
            ));
        }
        let Gate::Shut { retry_after_secs } = gate(&store, &rule, "203.0.113.9").unwrap() else {
            panic!("open")
        };
        assert!((1..=900).contains(&retry_after_secs));
        // Another address is not affected; fifteen minutes on, the first may try again.
        assert!(matches!(
            gate(&store, &rule, "203.0.113.10").unwrap(),
            Gate::Open { .. }
        ));
        store.clock().advance_ms(900_000);
        assert!(matches!(
            gate(&store, &rule, "203.0.113.9").unwrap(),
            Gate::Open { attempt: 1, .. }
        ));
    }
}
