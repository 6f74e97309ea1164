//! Wrong setup codes, budgeted by the site's limiter and store in two places, each 15 minutes
//! long: per client address (5) and per network (10: the IPv4 /24 or IPv6 /48 around it),
//! never for the whole site. The code is 80 random bits and works for an hour: without a
//! site-wide budget guessing it stays out of reach, while with one anybody holding a few
//! networks could keep the owner from setting the site up. Only wrong codes are counted, and
//! a right code is accepted whatever the budgets hold: past a budget a wrong code is answered
//! 429 and counted no further. Apart from the sign-in budgets ([`super::signin`]), which a
//! site without a password has no use for.

use crate::core::decision::Decision;
use crate::core::rule::{Algorithm, KeyKind, Rule};
use crate::store::counters::Counters;
use crate::store::{Check, StoreError};
use crate::support::defaults;

use super::signin::{Budget, Gate, Who};

/// The two limits on wrong setup codes.
#[derive(Debug, Clone)]
pub struct SetupBudgets {
    pub address: Rule,
    pub network: Rule,
}

impl Default for SetupBudgets {
    fn default() -> SetupBudgets {
        let rule = |name: &str, limit: u32| {
            Rule::new(
                name,
                KeyKind::Ip,
                Algorithm::Fixed,
                limit,
                defaults::ADMIN_SIGNIN_WINDOW_SECS,
                defaults::KEY_TEMPLATE_IP,
            )
            .expect("a valid rule")
        };
        SetupBudgets {
            address: rule(defaults::ADMIN_SETUP_RULE, defaults::ADMIN_SETUP_FAILURES),
            network: rule(
                defaults::ADMIN_SETUP_NETWORK_RULE,
                defaults::ADMIN_SETUP_NETWORK_FAILURES,
            ),
        }
    }
}

impl SetupBudgets {
    /// The limit of a budget (the address's, or the network's).
    pub fn limit(&self, budget: Budget) -> u32 {
        match budget {
            Budget::Network => self.network.limit.get(),
            _ => self.address.limit.get(),
        }
    }
}

/// Counts one wrong code from `who`, by its address and its network in one atomic step: past
/// either, nothing is counted and the gate is shut. `Gate::Open` tells the failure's number of
/// the address's budget.
pub fn count_wrong(
    store: &dyn Counters,
    budgets: &SetupBudgets,
    who: &Who,
) -> Result<Gate, StoreError> {
    let checks = [
        Check {
            rule: &budgets.address,
            key: budgets.address.key_for(&who.address),
        },
        Check {
            rule: &budgets.network,
            key: budgets.network.key_for(&who.network),
        },
    ];
    Ok(match store.decide(&checks)? {
        Decision::Admit { statuses, at_ms } => {
            let limit = budgets.address.limit.get();
            let remaining = statuses.first().map_or(0, |s| s.remaining);
            Gate::Open {
                at_ms,
                attempt: limit.saturating_sub(remaining),
                limit,
            }
        }
        refused @ Decision::Refuse { rule, .. } => Gate::Shut {
            retry_after_secs: refused.retry_after_secs().unwrap_or(1),
            budget: if rule == 0 {
                Budget::Address
            } else {
                Budget::Network
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::signin::tests::{from, store};

    fn open(g: &Gate) -> bool {
        matches!(g, Gate::Open { .. })
    }

    #[test]
    fn five_wrong_codes_an_address_then_it_waits_the_window() {
        let store = store();
        let budgets = SetupBudgets::default();
        let who = from("203.0.113.9");
        assert_eq!(
            budgets.address.key_for(&who.address),
            "resolve:admin-signin-setup:203.0.113.9"
        );
        for n in 1..=5 {
            assert!(matches!(
                count_wrong(&store, &budgets, &who).unwrap(),
                Gate::Open { attempt, limit: 5, .. } if attempt == n
            ));
        }
        let Gate::Shut {
            retry_after_secs,
            budget: Budget::Address,
        } = count_wrong(&store, &budgets, &who).unwrap()
        else {
            panic!("open")
        };
        assert!((1..=900).contains(&retry_after_secs));
        store.clock().advance_ms(900_000);
        assert!(open(&count_wrong(&store, &budgets, &who).unwrap()));
    }

    #[test]
    fn a_network_takes_ten_and_no_budget_is_the_whole_sites() {
        let store = store();
        let budgets = SetupBudgets::default();
        // Twelve /64s of one /48: ten are counted, then the /48 waits.
        let counted = (0..12)
            .filter(|i| {
                open(
                    &count_wrong(&store, &budgets, &from(&format!("2001:db8:7:{i:x}::1"))).unwrap(),
                )
            })
            .count();
        assert_eq!(counted, 10);
        assert!(matches!(
            count_wrong(&store, &budgets, &from("2001:db8:7:ff::1")).unwrap(),
            Gate::Shut {
                budget: Budget::Network,
                ..
            }
        ));
        // A hundred networks with ten wrong codes each: the next network is counted as the
        // first was.
        for net in 0..100 {
            for host in 0..10 {
                let who = from(&format!("10.{net}.0.{host}"));
                let _ = count_wrong(&store, &budgets, &who).unwrap();
            }
        }
        assert!(matches!(
            count_wrong(&store, &budgets, &from("192.0.2.1")).unwrap(),
            Gate::Open { attempt: 1, .. }
        ));
    }
}
