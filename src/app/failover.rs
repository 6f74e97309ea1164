//! Several services in turn: when the one asked refuses the server, the account or the call
//! for now, the same request asks the next, so that one refusing service does not take the
//! site down while another account would serve. A link the service finds at fault (dead,
//! needing a password, unsupported) goes no further. Each turn counts the owner's spend
//! limits (the site's and the service's own) and the service's rates before its call, and
//! gives back what it took when nothing was delivered; a success ends the turns, so a link is
//! paid for once.

use crate::app::meter::StoreMeter;
use crate::app::pay::record;
use crate::app::{Admitted, App, Paid, Tally};
use crate::core::decision::Decision;
use crate::core::journal::Event;
use crate::core::rule::Rule;
use crate::http::problem::{Kind, LogKind, Problem};
use crate::http::render;
use crate::provider::{Failure, Provider, ProviderError};
use crate::store::Check;
use crate::support::log::Level;

/// Whether a failure of one service sends the link to the next: the server's address, the
/// account (credentials, plan, quota), a retired endpoint or the service being down for now are
/// the service's matter, and another service may serve the link. A link at fault (dead, with a
/// password, on a host not supported, refused) or a call that may have been charged without an
/// answer (a timeout) stays with the answer it got.
pub(super) fn fails_over(failure: Failure) -> bool {
    matches!(
        failure,
        Failure::ServerRefused
            | Failure::Plan
            | Failure::Quota
            | Failure::Auth
            | Failure::Temporary
            | Failure::Retired
    )
}

/// The services in the order a link asks them: the one whose fresh host list names the link's
/// host first (`listed`), then the others in their order; all in order when none does.
pub(super) fn order(count: usize, listed: Option<usize>) -> Vec<usize> {
    let first = listed.filter(|i| *i < count);
    first
        .into_iter()
        .chain((0..count).filter(|i| Some(*i) != first))
        .collect()
}

/// What the owner's log says a service refused, in its words.
fn refusal(failure: Failure) -> &'static str {
    match failure {
        Failure::ServerRefused => "refused this server's address",
        Failure::Plan => "does not cover this on the account's plan",
        Failure::Quota => "has no quota left on the account",
        Failure::Auth => "refused the site's credentials",
        Failure::Retired => "retired an endpoint this version calls",
        Failure::Temporary => "is unavailable for now",
        _ => "failed",
    }
}

/// One service's turn: what it is called, how to call it, and the rules its calls count in.
struct Turn<'t> {
    name: &'t str,
    provider: &'t dyn Provider,
    meter: Option<StoreMeter<'t>>,
    rates: &'t [Rule],
}

impl App<'_> {
    /// The paid call, asked of each service in turn while the one asked fails over: `listed`
    /// (the service whose host list names the link's host) first, then the others in order.
    /// With one service, [`App::pay`] as it is. `spend_checks`: the spend rules the admission
    /// counted (the owner's budget).
    pub(super) fn pay_in_turn(
        &self,
        first: &dyn Provider,
        link: &str,
        (admitted, listed): (Option<&Admitted>, Option<usize>),
        spend_checks: &[Check<'_>],
        tally: &mut Tally,
    ) -> Result<Paid, Problem> {
        let services = &self.config.services;
        if services.len() < 2 || self.others.len() + 1 != services.len() {
            return self.pay(first, link, admitted, spend_checks, tally);
        }
        let order = order(services.len(), listed);
        // The admission counted the owner's budget for the first service's call: a link
        // routed to another gives it back, and each of its turns takes its own. Every turn
        // takes its service's rates and spend itself, so that a service at its limit passes
        // the link on.
        let admission_holds = order[0] == 0;
        if !admission_holds {
            self.give_back_spend(spend_checks, admitted);
        }
        let mut last: Option<Problem> = None;
        // A service's own spend used up is a refusal only when no other service serves the
        // link: counted once the turns are over without an answer.
        let mut spend_refused: Vec<Event> = Vec::new();
        for (at, &i) in order.iter().enumerate() {
            let service = &services[i];
            let rates: &[Rule] = if i == 0 {
                self.provider_rates()
            } else {
                &service.rates
            };
            let turn = Turn {
                name: &service.name,
                provider: if i == 0 { first } else { &*self.others[i - 1] },
                meter: self.meter_for(&service.spec, rates),
                rates,
            };
            let next = order.get(at + 1).map(|n| services[*n].name.as_str());
            // The first turn's site-wide counts were taken by the admission; a later turn takes
            // its own: the site's budget, the rates of its first call, and its own spend.
            let held_by_admission = at == 0 && admission_holds;
            let first_call = self.first_call_of(&turn, held_by_admission);
            let own: Vec<Check<'_>> = first_call
                .into_iter()
                .chain(&service.spend)
                .map(|rule| Check {
                    rule,
                    key: rule.key_for(""),
                })
                .collect();
            let taken_at_ms = self.clock.now_ms();
            if let Err(p) = self.take(&own, turn.name, next, &mut spend_refused) {
                if held_by_admission {
                    self.give_back_spend(spend_checks, admitted);
                }
                last = Some(p);
                continue;
            }
            let held: Vec<Check<'_>> = if held_by_admission {
                spend_checks.iter().cloned().chain(own).collect()
            } else {
                own
            };
            let held_at_ms = if held_by_admission {
                admitted_at(admitted, taken_at_ms)
            } else {
                taken_at_ms
            };
            let answer = match &turn.meter {
                Some(meter) => turn.provider.resolve(link, meter),
                None => turn.provider.resolve(link, &crate::provider::Unmetered),
            };
            record(&answer, turn.provider, tally);
            record_service(&answer, turn.name, tally);
            match answer {
                Err(e) if fails_over(e.failure) && next.is_some() => {
                    self.turn_failed(&e, &turn, (&held, held_at_ms), next, tally);
                    // The owner must still act on this service (its address, its account):
                    // the line is kept for the report as when it was the answer.
                    let p = crate::app::failures::provider_problem(&e, link);
                    if p.log_kind == LogKind::ActionNeeded {
                        self.note(p.log.as_deref().unwrap_or(&p.detail));
                    }
                    last = Some(p);
                }
                answer => {
                    let served = answer.is_ok() || answer.as_ref().is_err_and(|e| e.job.is_some());
                    let settled =
                        self.settle_with(answer, link, (held_at_ms, &held, turn.rates), i, tally);
                    if settled.is_ok() && served {
                        tally.served_by = Some(service.name.clone());
                    } else {
                        tally.events.append(&mut spend_refused);
                    }
                    return settled;
                }
            }
        }
        tally.events.append(&mut spend_refused);
        Err(last.unwrap_or_else(|| {
            Problem::new(
                503,
                Kind::ProviderUnavailable,
                crate::app::failures::UNAVAILABLE,
            )
        }))
    }

    /// The site-wide rules a turn's first call counts in beyond what the admission counted:
    /// each of its service's rates that counts the first step's calls, and the owner's budget
    /// unless the admission holds it for this turn.
    fn first_call_of<'r>(&'r self, turn: &Turn<'r>, held_by_admission: bool) -> Vec<&'r Rule> {
        let counts = |i: usize| turn.meter.as_ref().is_none_or(|m| m.spec.rate_counts(i, 0));
        let rates = turn
            .rates
            .iter()
            .enumerate()
            .filter(|(i, _)| counts(*i))
            .map(|(_, r)| r);
        if held_by_admission {
            return rates.collect();
        }
        self.config.budget().iter().chain(rates).collect()
    }

    /// Counts a turn's own rules; a refusal (a limit of this service, or the site's, used up)
    /// is the turn's answer, logged with the service asked instead; its journal event goes to
    /// `spend_refused`, counted should no service serve the link.
    fn take(
        &self,
        own: &[Check<'_>],
        name: &str,
        next: Option<&str>,
        spend_refused: &mut Vec<Event>,
    ) -> Result<(), Problem> {
        if own.is_empty() {
            return Ok(());
        }
        match self.store.counters.decide(own) {
            Ok(Decision::Admit { .. }) => Ok(()),
            Ok(d @ Decision::Refuse { rule, .. }) => {
                let rule = own[rule].rule;
                let wait = d.retry_after_secs().unwrap_or(1);
                spend_refused.push(Event::SpendRefused(rule.name.as_str().into()));
                let instead = next.map_or_else(String::new, |n| format!("; asked {n} instead"));
                self.log.line(
                    Level::Warn,
                    &format!(
                        "{name}: limit {} reached ({} per {} s){instead}",
                        rule.name,
                        crate::app::sizes::spend_words(rule),
                        rule.window_secs
                    ),
                );
                Err(Problem::new(
                    503,
                    Kind::SpendLimit,
                    format!(
                        "The service has reached its limit for now. Please try again in {}.",
                        render::wait_words(wait)
                    ),
                )
                .retry_after(wait)
                .log(format!(
                    "{name}: limit {} reached ({} per {} s); refusing paid calls for {wait} s",
                    rule.name,
                    crate::app::sizes::spend_words(rule),
                    rule.window_secs
                )))
            }
            // A store that cannot count lets the call go, as the meter does.
            Err(e) => {
                self.log.line(
                    Level::Warn,
                    &format!("counting a paid call to {name} failed, made anyway: {e}"),
                );
                Ok(())
            }
        }
    }

    /// A turn that fails over: nothing was delivered, so the owner's spend limits get the link
    /// back; the service's rates keep the calls it was sent (all of them when none reached
    /// it). The owner's log says which service refused, why, and which is asked instead.
    fn turn_failed(
        &self,
        e: &ProviderError,
        turn: &Turn<'_>,
        (held, held_at_ms): (&[Check<'_>], u64),
        next: Option<&str>,
        tally: &mut Tally,
    ) {
        let back: Vec<Check<'_>> = held
            .iter()
            .filter(|c| !e.reached || !turn.rates.iter().any(|r| std::ptr::eq(r, c.rule)))
            .cloned()
            .collect();
        if !back.is_empty() {
            match self.store.counters.refund(&back, held_at_ms) {
                Ok(()) if !e.reached => tally.add(Event::Refund),
                Ok(()) => {}
                Err(re) => self.log.line(
                    Level::Warn,
                    &format!("giving back the spend of a refused call failed: {re}"),
                ),
            }
        }
        let code = e
            .code
            .as_deref()
            .map(|c| format!(" ({})", crate::support::text::one_line(c, 64)))
            .unwrap_or_default();
        self.log.line(
            Level::Warn,
            &format!(
                "{} {}{code}; asked {} instead",
                turn.name,
                refusal(e.failure),
                next.unwrap_or("no other")
            ),
        );
    }

    /// Gives the admission's spend counts back for a first turn that was never called (none
    /// when the store failed the admission: nothing was counted).
    fn give_back_spend(&self, spend_checks: &[Check<'_>], admitted: Option<&Admitted>) {
        let Some(admitted) = admitted.filter(|_| !spend_checks.is_empty()) else {
            return;
        };
        if let Err(e) = self.store.counters.refund(spend_checks, admitted.at_ms) {
            self.log.line(
                Level::Warn,
                &format!("giving back the spend of a call not made failed: {e}"),
            );
        }
    }
}

/// The journal's figures of one service's turn: a call that reached it, and its failure.
fn record_service(
    answer: &Result<crate::provider::resolved::Resolved, ProviderError>,
    name: &str,
    tally: &mut Tally,
) {
    match answer {
        Ok(_) => tally.add(Event::ServiceCall(name.to_owned())),
        Err(e) => {
            if e.reached {
                tally.add(Event::ServiceCall(name.to_owned()));
            }
            if e.failure != Failure::InProgress {
                tally.add(Event::ServiceFailure(name.to_owned(), e.failure.name()));
            }
        }
    }
}

/// When the admission counted the request, or `now` when it counted nothing.
fn admitted_at(admitted: Option<&Admitted>, now_ms: u64) -> u64 {
    admitted.map_or(now_ms, |a| a.at_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_services_matter_fails_over_and_the_links_does_not() {
        for (name, failure) in Failure::CLASSES {
            let expected = matches!(
                name,
                "auth" | "server_refused" | "plan" | "quota" | "retired" | "temporary"
            );
            assert_eq!(fails_over(failure), expected, "{name}");
        }
        for failure in [
            Failure::DeadLink,
            Failure::Password,
            Failure::Unsupported,
            Failure::Rejected,
            Failure::Timeout,
            Failure::BadAnswer,
            Failure::InProgress,
        ] {
            assert!(!fails_over(failure), "{failure:?}");
        }
    }

    #[test]
    fn a_listing_service_goes_first_the_others_keep_their_order() {
        assert_eq!(order(3, None), [0, 1, 2]);
        assert_eq!(order(3, Some(0)), [0, 1, 2]);
        assert_eq!(order(3, Some(1)), [1, 0, 2]);
        assert_eq!(order(3, Some(2)), [2, 0, 1]);
        assert_eq!(order(2, Some(7)), [0, 1]);
        assert_eq!(order(1, None), [0]);
    }

    #[test]
    fn the_log_names_what_was_refused() {
        assert_eq!(
            refusal(Failure::ServerRefused),
            "refused this server's address"
        );
        assert_eq!(refusal(Failure::Quota), "has no quota left on the account");
    }
}
