//! The paid call and what comes of it: the provider's answer, a job kept under way, or the
//! visitor's problem; a call that never reached the provider, and a job it reports failed,
//! give the spend limits their count back.

use crate::app::failures::{UNAVAILABLE, provider_problem};
use crate::app::meter::StoreMeter;
use crate::app::{Admitted, App, Paid, Tally};
use crate::core::journal::Event;
use crate::http::problem::{Kind, Problem};
use crate::provider::resolved::Resolved;
use crate::provider::{Failure, Provider};
use crate::store::Check;
use crate::support::log::Level;

/// The provider failure class of an answer refused because it holds the site's token.
const SECRET_IN_ANSWER: &str = "secret_in_answer";

impl App<'_> {
    /// The paid call. An answer holding a secret is refused; a failure that never reached the
    /// provider gives the spend rules their count back (nothing was spent).
    pub(super) fn pay(
        &self,
        provider: &dyn Provider,
        link: &str,
        admitted: Option<&Admitted>,
        spend_checks: &[Check<'_>],
        tally: &mut Tally,
    ) -> Result<Paid, Problem> {
        let answer = match self.meter() {
            Some(meter) => provider.resolve(link, &meter),
            None => provider.resolve(link, &crate::provider::Unmetered),
        };
        record(&answer, provider, tally);
        let paid_at_ms = admitted.map_or_else(|| self.clock.now_ms(), |a| a.at_ms);
        self.settle(answer, link, paid_at_ms, spend_checks, tally)
    }

    /// The provider's meter of calls, when it has rates to count them against.
    pub(super) fn meter(&self) -> Option<StoreMeter<'_>> {
        self.meter_for(self.config.provider.as_ref()?, self.provider_rates())
    }

    /// The meter of a service described by `spec`, counting against `rates` (its rates, in the
    /// order of its `rate_limits`).
    pub(super) fn meter_for<'m>(
        &'m self,
        spec: &'m crate::provider::described::ProviderSpec,
        rates: &'m [crate::core::rule::Rule],
    ) -> Option<StoreMeter<'m>> {
        match spec {
            crate::provider::described::ProviderSpec::Http(spec) => Some(StoreMeter {
                counters: &*self.store.counters,
                rates,
                spec,
                log: self.log,
            }),
            crate::provider::described::ProviderSpec::Echo => None,
        }
    }

    /// The first provider's rates: the leading rules of `spend`.
    pub(super) fn provider_rates(&self) -> &[crate::core::rule::Rule] {
        &self.config.spend[..self
            .config
            .provider_rate_limits
            .min(self.config.spend.len())]
    }

    /// What comes of a resolution (or of polling its job): the answer, a job kept under way,
    /// or the visitor's problem. A call that never reached the provider, and a job the
    /// provider reports failed, give the spend rules the link's count back (`paid_at_ms`).
    pub(super) fn settle(
        &self,
        answer: Result<Resolved, crate::provider::ProviderError>,
        link: &str,
        paid_at_ms: u64,
        spend_checks: &[Check<'_>],
        tally: &mut Tally,
    ) -> Result<Paid, Problem> {
        let rates = self.provider_rates();
        self.settle_with(answer, link, (paid_at_ms, spend_checks, rates), 0, tally)
    }

    /// As [`App::settle`], for service `service` of several (0, the first) whose rates are
    /// `rates`: a job under way is kept with its service, to be polled there.
    pub(super) fn settle_with(
        &self,
        answer: Result<Resolved, crate::provider::ProviderError>,
        link: &str,
        (paid_at_ms, spend_checks, rates): (u64, &[Check<'_>], &[crate::core::rule::Rule]),
        service: usize,
        tally: &mut Tally,
    ) -> Result<Paid, Problem> {
        match answer {
            // A provider that echoes the site's token into its answer must not hand it to the
            // visitor, nor into the cache: such an answer is refused. (Paid for: the call
            // reached the provider.)
            Ok(r) if r.holds_any(&crate::support::secret::all_forms(&self.config.secrets())) => {
                Err({
                    tally.add(Event::ProviderFailure(SECRET_IN_ANSWER));
                    Problem::new(502, Kind::ProviderUnavailable, UNAVAILABLE).log(format!(
                        "the provider's answer for {link:?} holds a secret of the configuration \
                     (the provider token, in some form), so it is never passed on or cached; \
                     ask the provider why its download links carry the account's token"
                    ))
                })
            }
            Ok(r) => Ok(Paid::Resolved(r)),
            Err(mut e) => {
                if let Some(mut job) = e.job.take().filter(|_| e.failure == Failure::InProgress) {
                    job.service = service;
                    job.paid_at_ms = paid_at_ms;
                    job.polled_at_ms = self.clock.now_ms();
                    if self.keep_job(link, &job) {
                        return Ok(Paid::Pending(*job));
                    }
                }
                // The provider's own words go to the visitor (422): never with a secret.
                let forms = crate::support::secret::all_forms(&self.config.secrets());
                for text in [&mut e.message, &mut e.code].into_iter().flatten() {
                    *text = crate::support::secret::mask(text, &forms).into_owned();
                }
                e.detail = crate::support::secret::mask(&e.detail, &forms).into_owned();
                // Nothing reached the provider: every count is given back. A job it reports
                // failed reached it: only the owner's spend limits get the paid link back, the
                // provider's rates keep the calls it was sent.
                let job_failed = e.job_failed;
                let given_back: Vec<Check<'_>> = spend_checks
                    .iter()
                    .filter(|c| !e.reached || !rates.iter().any(|r| std::ptr::eq(r, c.rule)))
                    .cloned()
                    .collect();
                if (!e.reached || job_failed) && !given_back.is_empty() {
                    match self.store.counters.refund(&given_back, paid_at_ms) {
                        Ok(()) => tally.add(Event::Refund),
                        Err(re) => self.log.line(
                            Level::Warn,
                            &format!("refunding an unspent call failed: {re}"),
                        ),
                    }
                }
                Err(provider_problem(&e, link))
            }
        }
    }
}

/// The journal's events of a paid call: paid when it reached the provider, and its failure.
pub(super) fn record(
    answer: &Result<Resolved, crate::provider::ProviderError>,
    provider: &dyn Provider,
    tally: &mut Tally,
) {
    match answer {
        Ok(_) if provider.pays() => tally.add(Event::Paid),
        Ok(_) => {}
        Err(e) => {
            if e.reached && provider.pays() {
                tally.add(Event::Paid);
            }
            if e.failure != Failure::InProgress {
                tally.add(Event::ProviderFailure(e.failure.name()));
            }
        }
    }
}
