//! What the store's decision means for one request (or a refusal remembered in front of it,
//! standing for it): admitted with its limit headers, refused
//! by the visitor's rules (429) or the site's spend limits (503), or the store's failure
//! answered by `store.on_error`.

use crate::app::request::Asked;
use crate::app::{Admitted, App, Keepable, Tally, Verdict};
use crate::core::decision::Decision;
use crate::core::journal::{self, Event};
use crate::core::rule::{KeyKind, Rule};
use crate::http::negotiate::Format;
use crate::http::problem::{Kind, Problem};
use crate::http::render;
use crate::http::response::Response;
use crate::store::Check;
use crate::store::settings::OnError;
use crate::support::log::Level;

/// Whether a refusal found the client over one of its own rules counted by its own key: not a
/// site-wide rule, and not a key it shares with other new clients (a full store's folded key,
/// spent by others as much as by it). Only such a refusal is the client's to answer for.
pub(super) fn own_key_refused(
    rules: &[&Rule],
    statuses: &[crate::core::decision::RuleStatus],
) -> bool {
    rules
        .iter()
        .zip(statuses)
        .any(|(r, s)| r.key != KeyKind::Global && s.remaining == 0 && !s.shared)
}

impl App<'_> {
    /// A refusal of the client's own rules that the store's counters remember and that still
    /// holds; never when a solved challenge may let the client past its rules (`over_limit`:
    /// its extra links need the cache's word on the link).
    pub(super) fn recall(&self, asked: &Asked<'_>, own: &[Check<'_>]) -> Option<Decision> {
        if own.is_empty() || self.passes_over_limit(asked) {
            return None;
        }
        self.store.counters.recall_own(own, self.clock.now_ms())
    }

    /// What a 429 answered from the memory of refusals rested on, so that the same request
    /// repeated may be answered again without the way (`gateway::replay`); None for any other
    /// answer, and where the way does more than it can repeat: a challenge (which may let the
    /// client past its rules), `auto_block` (which counts every refusal), a journal that
    /// failed.
    pub(super) fn keepable(
        &self,
        tally: &Tally,
        response: &Response,
        journaled: Option<journal::Entry>,
    ) -> Option<Keepable> {
        let recalled = tally.recalled.as_ref()?;
        // Only where the memory is a file's (under CGI): a FastCGI process's is its own.
        let refusal = self.store.counters.recalled_from()?;
        if response.status != 429
            || self.config.challenge.is_some()
            || self.config.auto_block.is_some()
            || tally.events.iter().any(|e| {
                !matches!(
                    e,
                    Event::Request | Event::Refused(_) | Event::UntrustedNetwork(_)
                )
            })
        {
            return None;
        }
        let journal = if self.config.journal {
            Some(journaled?.line_after_hour())
        } else {
            None
        };
        Some(Keepable {
            refusal,
            waits: recalled.waits(),
            journal,
        })
    }

    /// Whether a refusal found the client over one of its own rules (its address's, its
    /// key's), not only over a site-wide one. A rule refuses exactly when none of its window is
    /// left; the statuses begin with the client's rules. (A function of `App`'s, so that
    /// app.rs names nothing of this file, which imports from it.)
    pub(super) fn over_own_limit(
        rules: &[&Rule],
        statuses: &[crate::core::decision::RuleStatus],
    ) -> bool {
        rules
            .iter()
            .zip(statuses)
            .any(|(r, s)| r.key != KeyKind::Global && s.remaining == 0)
    }

    /// What the store's decision means for this request: go on (with the limit headers and
    /// the time it was counted at, unless the store failed and the policy lets it through), or
    /// the refusal that ends it. `rules` are the client's; `all_rules` adds the spend rules.
    pub(super) fn verdict(
        &self,
        decided: Result<Decision, crate::store::StoreError>,
        rules: &[&Rule],
        all_rules: &[&Rule],
        format: Format,
        frame: &render::Frame<'_>,
        tally: &mut Tally,
    ) -> Verdict {
        match decided {
            Ok(decision @ Decision::Admit { at_ms, .. }) => {
                tally.add(Event::Admitted);
                Verdict::Admitted(Some(Admitted {
                    limit_headers: render::limit_headers(rules, &decision),
                    at_ms,
                }))
            }
            Ok(ref decision @ Decision::Refuse { rule, .. }) if rule >= rules.len() => {
                let retry_after_secs = decision.retry_after_secs().unwrap_or(1);
                // The site's own budget: nothing the visitor did.
                tally.add(Event::SpendRefused(all_rules[rule].name.as_str().into()));
                Verdict::SpendLimited(Problem::new(
                    503,
                    Kind::SpendLimit,
                    format!(
                        "The service has reached its limit for now. Please try again in {}.",
                        render::wait_words(retry_after_secs)
                    ),
                )
                .retry_after(retry_after_secs)
                .log(format!(
                    "site-wide limit {} reached ({} per {} s); refusing paid calls for {retry_after_secs} s",
                    all_rules[rule].name,
                    crate::app::sizes::spend_words(all_rules[rule]),
                    all_rules[rule].window_secs
                )))
            }
            Ok(
                ref decision @ Decision::Refuse {
                    rule, ref statuses, ..
                },
            ) => {
                let retry_after_secs = decision.retry_after_secs().unwrap_or(1);
                let by_client = own_key_refused(rules, statuses);
                tally.add(Event::Refused(all_rules[rule].name.as_str().into()));
                let mut p = Problem::new(
                    429,
                    Kind::RateLimited,
                    crate::app::sizes::limited_sentence(all_rules[rule], retry_after_secs),
                )
                .retry_after(retry_after_secs);
                p.rule = Some(all_rules[rule].name.as_str().into());
                let mut response = render::problem_for(format, &p, frame, tally.link.as_deref());
                response
                    .headers
                    .extend(render::limit_headers(rules, decision));
                Verdict::Refused {
                    response,
                    by_client,
                }
            }
            Err(e) => match self.config.store.on_error {
                OnError::Allow => {
                    tally.store_failed(&e);
                    tally.add(Event::Admitted);
                    self.log.line(
                        Level::Error,
                        &format!("store failed, answering anyway (store.on_error is allow): {e}"),
                    );
                    Verdict::Admitted(None)
                }
                OnError::Deny => {
                    tally.store_failed(&e);
                    Verdict::StoreDenied(
                        Problem::new(
                            503,
                            Kind::StoreUnavailable,
                            "The service is briefly unavailable. Please try again shortly.",
                        )
                        .retry_after(self.config.store.deny_retry_after_secs)
                        .log(format!(
                            "store failed, refusing (store.on_error is deny): {e}"
                        )),
                    )
                }
            },
        }
    }
}
