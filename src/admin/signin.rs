//! Failed sign-ins, budgeted by the site's own limiter and store in four places, each 15
//! minutes long: per client address (5), per network (10: the IPv4 /24 or IPv6 /48 around it),
//! for the whole site (30), and apart from those, per known browser (5: a browser that signed
//! in before carries a signed device cookie, OWASP's device-cookie pattern, and is counted only
//! by it, so strangers who use up the site's budget do not lock the owner out). Each attempt
//! is counted before the password is looked at, and a right one is given back (refunded): only
//! failures count, and an attempt past any budget is refused without its password being
//! checked at all.

use std::net::IpAddr;

use crate::core::decision::Decision;
use crate::core::rule::{Algorithm, KeyKind, Rule};
use crate::net::cidr;
use crate::store::counters::Counters;
use crate::store::{Check, StoreError};
use crate::support::defaults;

/// Which budget an attempt was counted by, or refused by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Address,
    Network,
    Site,
    Device,
}

impl Budget {
    /// Whose attempts the budget counts, for the visitor and the log.
    pub fn whose(self) -> &'static str {
        match self {
            Budget::Address => "your address",
            Budget::Network => "your network",
            Budget::Site => "anywhere",
            Budget::Device => "this browser",
        }
    }
}

/// The four limits on failed sign-ins.
#[derive(Debug, Clone)]
pub struct Budgets {
    pub address: Rule,
    pub network: Rule,
    pub site: Rule,
    pub device: Rule,
}

fn rule(name: &str, key: KeyKind, limit: u32, template: &str) -> Rule {
    Rule::new(
        name,
        key,
        Algorithm::Fixed,
        limit,
        defaults::ADMIN_SIGNIN_WINDOW_SECS,
        template,
    )
    .expect("a valid rule")
}

impl Default for Budgets {
    fn default() -> Budgets {
        Budgets {
            address: rule(
                defaults::ADMIN_SIGNIN_RULE,
                KeyKind::Ip,
                defaults::ADMIN_SIGNIN_FAILURES,
                defaults::KEY_TEMPLATE_IP,
            ),
            network: rule(
                defaults::ADMIN_SIGNIN_NETWORK_RULE,
                KeyKind::Ip,
                defaults::ADMIN_SIGNIN_NETWORK_FAILURES,
                defaults::KEY_TEMPLATE_IP,
            ),
            site: rule(
                defaults::ADMIN_SIGNIN_SITE_RULE,
                KeyKind::Global,
                defaults::ADMIN_SIGNIN_SITE_FAILURES,
                defaults::KEY_TEMPLATE_GLOBAL,
            ),
            device: rule(
                defaults::ADMIN_SIGNIN_DEVICE_RULE,
                KeyKind::Ip,
                defaults::ADMIN_SIGNIN_DEVICE_FAILURES,
                defaults::KEY_TEMPLATE_IP,
            ),
        }
    }
}

/// Who is trying: the address as rules count it (an IPv6 client by its prefix), the network
/// around the address, and the device cookie's nonce when the browser sent a valid one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who {
    pub address: String,
    pub network: String,
    pub device: Option<String>,
}

impl Who {
    /// `identity` is the address as the rules count it.
    pub fn new(ip: IpAddr, identity: String, device: Option<String>) -> Who {
        let ip = cidr::canonical(ip);
        let prefix = if ip.is_ipv4() {
            defaults::ADMIN_SIGNIN_NETWORK_V4_PREFIX
        } else {
            defaults::ADMIN_SIGNIN_NETWORK_V6_PREFIX
        };
        Who {
            address: identity,
            network: format!("{}/{prefix}", cidr::mask(ip, prefix)),
            device,
        }
    }
}

impl Budgets {
    /// The budgets an attempt from `who` is counted by, first the one its figures are told by.
    fn checks<'r>(&'r self, who: &Who) -> (Vec<Budget>, Vec<Check<'r>>) {
        let named = match &who.device {
            Some(nonce) => vec![(
                Budget::Device,
                Check {
                    rule: &self.device,
                    key: self.device.key_for(nonce),
                },
            )],
            None => vec![
                (
                    Budget::Address,
                    Check {
                        rule: &self.address,
                        key: self.address.key_for(&who.address),
                    },
                ),
                (
                    Budget::Network,
                    Check {
                        rule: &self.network,
                        key: self.network.key_for(&who.network),
                    },
                ),
                (
                    Budget::Site,
                    Check {
                        rule: &self.site,
                        key: self.site.key_for(""),
                    },
                ),
            ],
        };
        named.into_iter().unzip()
    }

    /// The limit of a budget.
    pub fn limit(&self, budget: Budget) -> u32 {
        match budget {
            Budget::Address => self.address.limit.get(),
            Budget::Network => self.network.limit.get(),
            Budget::Site => self.site.limit.get(),
            Budget::Device => self.device.limit.get(),
        }
    }
}

/// Whether someone may try a password now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// They may: this attempt is counted (at `at_ms`, which a refund names) as number `attempt`
    /// of the window's `limit` of the first budget that counts it (the address, or the device).
    Open {
        at_ms: u64,
        attempt: u32,
        limit: u32,
    },
    /// A budget is used up: again in this many seconds.
    Shut {
        retry_after_secs: u32,
        budget: Budget,
    },
}

/// Counts one attempt from `who` against every budget that applies, in one atomic step: past
/// any of them, nothing is counted and the gate is shut.
pub fn gate(store: &dyn Counters, budgets: &Budgets, who: &Who) -> Result<Gate, StoreError> {
    let (named, checks) = budgets.checks(who);
    Ok(match store.decide(&checks)? {
        Decision::Admit { statuses, at_ms } => {
            let limit = named.first().map_or(0, |b| budgets.limit(*b));
            let remaining = statuses.first().map_or(0, |s| s.remaining);
            Gate::Open {
                at_ms,
                attempt: limit.saturating_sub(remaining),
                limit,
            }
        }
        refused @ Decision::Refuse { rule, .. } => Gate::Shut {
            retry_after_secs: refused.retry_after_secs().unwrap_or(1),
            budget: named.get(rule).copied().unwrap_or(Budget::Site),
        },
    })
}

/// Gives back the attempt counted at `at_ms`: the password was right (or was not checked).
pub fn passed(
    store: &dyn Counters,
    budgets: &Budgets,
    who: &Who,
    at_ms: u64,
) -> Result<(), StoreError> {
    store.refund(&budgets.checks(who).1, at_ms)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::core::clock::FakeClock;
    use crate::store::memory::MemoryStore;

    /// A store on a fake clock, for the budgets' tests (the setup's too).
    pub(in crate::admin) fn store() -> MemoryStore<FakeClock> {
        MemoryStore::new(FakeClock::at(1_000_000), std::time::Duration::ZERO)
    }

    /// A visitor from `addr`, identified as the client would be (an IPv6 address by its /64).
    pub(in crate::admin) fn from(addr: &str) -> Who {
        let ip: IpAddr = addr.parse().unwrap();
        let identity = match ip {
            IpAddr::V4(_) => addr.to_owned(),
            IpAddr::V6(_) => format!("{}/64", cidr::mask(ip, 64)),
        };
        Who::new(ip, identity, None)
    }

    fn open(g: Gate) -> bool {
        matches!(g, Gate::Open { .. })
    }

    #[test]
    fn five_failures_then_shut_and_a_right_password_costs_nothing() {
        let store = store();
        let budgets = Budgets::default();
        let who = from("203.0.113.9");
        assert_eq!(who.network, "203.0.113.0/24");
        assert_eq!(
            budgets.address.key_for(&who.address),
            "resolve:admin-signin:203.0.113.9"
        );
        // A right password: counted, then given back, any number of times.
        for _ in 0..40 {
            let Gate::Open { at_ms, attempt, .. } = gate(&store, &budgets, &who).unwrap() else {
                panic!("shut")
            };
            assert_eq!(attempt, 1);
            passed(&store, &budgets, &who, at_ms).unwrap();
        }
        // Five wrong ones are let through, the sixth is not.
        for n in 1..=5 {
            assert!(matches!(
                gate(&store, &budgets, &who).unwrap(),
                Gate::Open { attempt, limit: 5, .. } if attempt == n
            ));
        }
        let Gate::Shut {
            retry_after_secs,
            budget: Budget::Address,
        } = gate(&store, &budgets, &who).unwrap()
        else {
            panic!("open")
        };
        assert!((1..=900).contains(&retry_after_secs));
        // Fifteen minutes on, the address may try again.
        store.clock().advance_ms(900_000);
        assert!(matches!(
            gate(&store, &budgets, &who).unwrap(),
            Gate::Open { attempt: 1, .. }
        ));
    }

    #[test]
    fn a_network_gets_ten_failures_whatever_the_number_of_its_addresses() {
        let store = store();
        let budgets = Budgets::default();
        // Twelve /64s of one /48: ten are let through, then the /48 is shut.
        let sixty_fours: Vec<Who> = (0..12)
            .map(|i| from(&format!("2001:db8:7:{i:x}::1")))
            .collect();
        assert_eq!(sixty_fours[3].network, "2001:db8:7::/48");
        assert_eq!(sixty_fours[3].address, "2001:db8:7:3::/64");
        let passed: Vec<bool> = sixty_fours
            .iter()
            .map(|w| open(gate(&store, &budgets, w).unwrap()))
            .collect();
        assert_eq!(passed.iter().filter(|p| **p).count(), 10, "{passed:?}");
        assert!(matches!(
            gate(&store, &budgets, &from("2001:db8:7:ff::1")).unwrap(),
            Gate::Shut {
                budget: Budget::Network,
                ..
            }
        ));
        // The same for twelve addresses of one IPv4 /24.
        let counted = (1..=12)
            .filter(|i| open(gate(&store, &budgets, &from(&format!("198.51.100.{i}"))).unwrap()))
            .count();
        assert_eq!(counted, 10);
        // Another /48 is not affected.
        assert!(open(
            gate(&store, &budgets, &from("2001:db8:8::1")).unwrap()
        ));
    }

    #[test]
    fn the_site_takes_thirty_failures_from_strangers_but_a_known_browser_keeps_its_own() {
        let store = store();
        let budgets = Budgets::default();
        // Forty unrelated addresses: thirty attempts are counted, then nobody's.
        let counted = (0..40)
            .filter(|i| open(gate(&store, &budgets, &from(&format!("10.{i}.0.1"))).unwrap()))
            .count();
        assert_eq!(counted, 30);
        let Gate::Shut { budget, .. } = gate(&store, &budgets, &from("192.0.2.1")).unwrap() else {
            panic!("open")
        };
        assert_eq!(budget, Budget::Site);
        // The owner's browser, with its device cookie, from any address: five of its own.
        let mut owner = from("10.0.0.1");
        owner.device = Some("00112233445566778899aabbccddeeff".into());
        for n in 1..=5 {
            assert!(matches!(
                gate(&store, &budgets, &owner).unwrap(),
                Gate::Open { attempt, limit: 5, .. } if attempt == n
            ));
        }
        assert!(matches!(
            gate(&store, &budgets, &owner).unwrap(),
            Gate::Shut {
                budget: Budget::Device,
                ..
            }
        ));
    }
}
