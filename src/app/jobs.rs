//! Long jobs: a link whose paid work is still under way at the provider when the request's
//! time is up is answered `202 Accepted` with its progress, and its job is kept in the store
//! under the link's key. Whoever asks for the same link again joins that job: it is polled at
//! most once per interval, by one call counted against the provider's rates but not as a paid
//! link, and without using up the visitor's limit. A job the provider reports failed gives the
//! paid link back to the spend limits.

use std::time::Duration;

use crate::app::{App, Paid, Tally, checks_for_global};
use crate::core::journal::Event;
use crate::http::negotiate::Format;
use crate::http::problem::Problem;
use crate::http::render;
use crate::http::response::Response;
use crate::provider::Provider;
use crate::provider::job::Job;
use crate::support::defaults;
use crate::support::log::Level;

impl App<'_> {
    /// Keeps a job under way for its link; false when the store cannot keep it.
    pub(super) fn keep_job(&self, link: &str, job: &Job) -> bool {
        let keep = Duration::from_secs(defaults::PROVIDER_JOB_KEEP_SECS);
        match self
            .store
            .cache
            .cache_put(&Job::key(link), &job.encode(), keep)
        {
            Ok(()) => true,
            Err(e) => {
                self.log.line(
                    Level::Warn,
                    &format!("keeping the provider's job for {link:?} failed: {e}"),
                );
                false
            }
        }
    }

    /// The answer for a link with a job under way: polled when its interval has passed,
    /// else its last progress. None when the link has no job.
    pub(super) fn join_job(
        &self,
        provider: &dyn Provider,
        link: &str,
        script_name: Option<&str>,
        format: Format,
        frame: &render::Frame<'_>,
        tally: &mut Tally,
    ) -> Option<Result<Response, Problem>> {
        // Only a provider that polls leaves jobs: the others cost no store read here.
        let polls = |spec: Option<&crate::provider::described::ProviderSpec>| {
            matches!(spec, Some(crate::provider::described::ProviderSpec::Http(h))
                if h.steps.iter().any(|s| s.poll.is_some()))
        };
        let services = &self.config.services;
        if !polls(self.config.provider.as_ref()) && !services.iter().any(|s| polls(Some(&s.spec))) {
            return None;
        }
        let key = Job::key(link);
        let stored = self.store.cache.cache_get(&key).ok()??;
        let job = Job::decode(&stored)?;
        // A job runs where it was started: a later service's is polled there, with its rates.
        let at = job.service;
        let (provider, meter, rates): (&dyn Provider, _, &[crate::core::rule::Rule]) = if at == 0 {
            (provider, self.meter(), self.provider_rates())
        } else {
            let service = services.get(at)?;
            let other = self.others.get(at - 1)?;
            (
                &**other,
                self.meter_for(&service.spec, &service.rates),
                &service.rates,
            )
        };
        let now = self.clock.now_ms();
        let next_poll = job
            .polled_at_ms
            .saturating_add(u64::from(job.poll_secs) * 1000);
        if now < next_poll {
            return Some(Ok(self.pending(&job, link, script_name, format, frame)));
        }
        // This request polls; others meanwhile answer from the job as it was.
        let mut polling = job.clone();
        polling.polled_at_ms = now;
        if !self.keep_job(link, &polling) {
            return None;
        }
        let answer = match &meter {
            Some(meter) => provider.resume(link, &job, meter),
            None => provider.resume(link, &job, &crate::provider::Unmetered),
        };
        if let Err(e) = &answer
            && e.failure != crate::provider::Failure::InProgress
        {
            tally.add(Event::ProviderFailure(e.failure.name()));
        }
        let rules: Vec<&crate::core::rule::Rule> = if services.len() < 2 {
            self.first_call_rules().collect()
        } else {
            // The owner's budget and the service's own spend (its rates keep what it was sent).
            self.config
                .budget()
                .iter()
                .chain(&services[at].spend)
                .collect()
        };
        let spend_checks = checks_for_global(&rules);
        let settled = self.settle_with(
            answer,
            link,
            (job.paid_at_ms, &spend_checks, rates),
            at,
            tally,
        );
        if !matches!(settled, Ok(Paid::Pending(_))) {
            let _ = self.store.cache.cache_release(&key, &polling.encode());
        }
        Some(match settled {
            Ok(Paid::Pending(next)) => Ok(self.pending(&next, link, script_name, format, frame)),
            Ok(Paid::Resolved(r)) => {
                if !self.config.cache_ttl.is_zero()
                    && let Err(e) = self.store.cache.cache_put(
                        &crate::provider::cache::key(link),
                        &crate::provider::cache::encode(&r),
                        self.config.cache_ttl,
                    )
                {
                    self.log
                        .line(Level::Warn, &format!("caching the answer failed: {e}"));
                }
                Ok(render::resolved(format, &r, frame))
            }
            Err(p) => Err(p),
        })
    }

    /// The 202 answer for a job under way: its progress, when and where to ask again (the
    /// program's path, `script_name`, with the link).
    pub(super) fn pending(
        &self,
        job: &Job,
        link: &str,
        script_name: Option<&str>,
        format: Format,
        frame: &render::Frame<'_>,
    ) -> Response {
        let script = script_name
            .filter(|s| {
                s.starts_with('/') && !s.contains(['?', '#']) && !s.contains(char::is_whitespace)
            })
            .unwrap_or("/");
        let location = format!("{script}?link={}", encode_component(link));
        self.log.line(
            Level::Notice,
            &format!(
                "provider job for {link:?} under way ({}): answered 202, asked again in {} s",
                job.progress.as_deref().unwrap_or("no progress given"),
                job.poll_secs
            ),
        );
        render::pending(
            format,
            job.progress.as_deref(),
            job.poll_secs,
            &location,
            frame,
        )
    }
}

/// `s` percent-encoded for a query value: unreserved characters kept, every other byte encoded.
fn encode_component(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_encoded_whole_in_the_query() {
        assert_eq!(
            encode_component("https://h.example/a b?x=1&y=é#f"),
            "https%3A%2F%2Fh.example%2Fa%20b%3Fx%3D1%26y%3D%C3%A9%23f"
        );
    }
}
