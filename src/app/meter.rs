//! The provider's published rates, counted call by call: a link's first call is counted when
//! the request is admitted, every further one (the next step, each poll) here, before it is
//! made, in the same atomic step the stores use for every decision.

use crate::core::decision::Decision;
use crate::core::rule::Rule;
use crate::provider::spec::HttpSpec;
use crate::provider::{Failure, Meter, ProviderError};
use crate::store::Check;
use crate::store::counters::Counters;
use crate::support::log::{Level, Log};

/// Counts a link's further calls against the provider's rates.
pub(super) struct StoreMeter<'a> {
    pub(super) counters: &'a dyn Counters,
    /// The provider's rate rules, in the order of its `rate_limits`.
    pub(super) rates: &'a [Rule],
    pub(super) spec: &'a HttpSpec,
    pub(super) log: &'a dyn Log,
}

impl Meter for StoreMeter<'_> {
    fn another_call(&self, step: usize) -> Result<(), ProviderError> {
        let checks: Vec<Check<'_>> = self
            .rates
            .iter()
            .enumerate()
            .filter(|(i, _)| self.spec.rate_counts(*i, step))
            .map(|(_, rule)| Check {
                rule,
                key: rule.key_for(""),
            })
            .collect();
        if checks.is_empty() {
            return Ok(());
        }
        match self.counters.decide(&checks) {
            Ok(Decision::Admit { .. }) => Ok(()),
            Ok(d @ Decision::Refuse { rule, .. }) => {
                let mut e = ProviderError::new(
                    Failure::RateLimited,
                    format!(
                        "the provider's rate {} is used up for now: the next call (step {}) was not made",
                        checks[rule].rule.name,
                        step + 1
                    ),
                );
                e.retry_after = d.retry_after_secs();
                Err(e)
            }
            // A link already paid for is not abandoned because the store failed to count.
            Err(e) => {
                self.log.line(
                    Level::Warn,
                    &format!("counting a provider call failed, made anyway: {e}"),
                );
                Ok(())
            }
        }
    }
}
