//! The free pre-checks, asked only for a request the limiter admitted and that is about to be
//! paid for, so that a client over its limit costs none of them. A provider that publishes the
//! file hosts it supports has that list fetched (one free call, without the token) at most
//! once a day into the store, and a link on a host it does not name is refused (422) while the
//! list is fresh. A provider with a free check of one link (Real-Debrid's `unrestrict/check`)
//! has it asked, and a link it finds dead is refused (422); the size it gives is held against
//! `max_file_bytes` (422) and counted by the rules of bytes (429 when the file does not fit).
//! Every refusal gives every count of the request back: nothing paid, the visitor's limit not
//! used. Without a fresh list, or when the check fails, links go on as before: a pre-check
//! only ever saves a paid call, it never costs a visitor an answer.

use std::time::Duration;

use crate::app::failures::{DEAD_LINK, UNSUPPORTED_HOST};
use crate::app::{Admitted, App, Tally};
use crate::core::journal::Event;
use crate::core::key::Reserved;
use crate::http::problem::{Kind, Problem};
use crate::net::url::Host;
use crate::provider::Provider;
use crate::provider::described::ProviderSpec;
use crate::provider::spec::host_listed;
use crate::store::Check;
use crate::support::defaults;
use crate::support::log::Level;

/// Where the list is kept: among the cache's keys, never equal to a link's.
pub(super) const KEY: Reserved<'static> = Reserved::HostList;
/// Held by the one request that fetches the list.
const FETCHING: Reserved<'static> = Reserved::HostListFetching;

/// A fetch of the list, as kept: when, and the domains (None: that fetch failed).
pub(super) struct Kept {
    pub(super) fetched_at_ms: u64,
    pub(super) domains: Option<Vec<String>>,
}

impl Kept {
    fn encode(&self) -> Vec<u8> {
        serde_json::json!({"fetched_at_ms": self.fetched_at_ms, "domains": self.domains})
            .to_string()
            .into_bytes()
    }

    pub(super) fn decode(bytes: &[u8]) -> Option<Kept> {
        let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        let domains = match &v["domains"] {
            serde_json::Value::Null => None,
            list => {
                let mut d: Vec<String> = serde_json::from_value(list.clone()).ok()?;
                d.sort_unstable();
                Some(d)
            }
        };
        Some(Kept {
            fetched_at_ms: v["fetched_at_ms"].as_u64()?,
            domains,
        })
    }
}

impl App<'_> {
    /// The pre-checks of an admitted link about to be paid for: a refusal, with every count of
    /// the request given back, or whether the rules of bytes already counted the file's size
    /// (then it is not charged again after the answer). `store_up`: the host list is read from
    /// the store only when it answered the decision.
    pub(super) fn refuse_before_paying(
        &self,
        provider: &dyn Provider,
        link: &str,
        store_up: bool,
        (checks, admitted): (&[Check<'_>], Option<&Admitted>),
        tally: &mut Tally,
    ) -> Result<bool, Problem> {
        if let Some((refused, rule)) = self.past_tightened_spend(checks) {
            tally.add(Event::SpendRefused(rule));
            self.give_back(checks, admitted, tally);
            return Err(refused);
        }
        let mut size = None;
        let refused = store_up
            .then(|| self.refuse_unlisted_host(provider, link))
            .flatten()
            .or_else(|| self.refuse_dead_link(provider, link, &mut size))
            .or_else(|| self.too_large(link, size, false));
        let refused = match refused {
            Some(p) => p,
            None => match self.count_size_before(checks, admitted, size) {
                Ok(counted) => return Ok(counted),
                Err(p) => p,
            },
        };
        match &refused.rule {
            Some(rule) => tally.add(Event::Refused(rule.to_string())),
            None => tally.add(Event::Bad(refused.code().into())),
        }
        self.give_back(checks, admitted, tally);
        Err(refused)
    }

    /// Gives back every count an admitted request took, for a request that ends up costing
    /// nothing: the journal then counts it as never admitted, as before the decision.
    pub(super) fn give_back(
        &self,
        checks: &[Check<'_>],
        admitted: Option<&Admitted>,
        tally: &mut Tally,
    ) {
        let Some(admitted) = admitted else {
            return;
        };
        tally.events.retain(|e| *e != Event::Admitted);
        if let Err(e) = self.store.counters.refund(checks, admitted.at_ms) {
            self.log.line(
                Level::Warn,
                &format!("giving back the counts of a request refused before paying failed: {e}"),
            );
        }
    }

    /// A refusal for a link whose host the provider's fresh host list does not name. With
    /// several services none refuses alone: the link is routed instead ([`App::routed`]).
    fn refuse_unlisted_host(&self, provider: &dyn Provider, link: &str) -> Option<Problem> {
        if self.config.services.len() > 1 {
            return None;
        }
        let listed = matches!(
            self.config.provider.as_ref(),
            Some(ProviderSpec::Http(h)) if h.hosts.is_some()
        );
        if !listed {
            return None;
        }
        let now = self.clock.now_ms();
        let kept = self.kept_list(provider, (KEY.key(), FETCHING.key()), now)?;
        let domains = kept.domains?;
        let host = link_host(link)?;
        if host_listed(&host, &domains) {
            return None;
        }
        Some(
            Problem::new(422, Kind::UnsupportedHost, UNSUPPORTED_HOST).log(
                format!(
                    "the provider's host list (fetched {}) does not name {host:?}: {link:?} refused before any paid call",
                    crate::core::calendar::iso(kept.fetched_at_ms)
                ),
            ),
        )
    }

    /// With several services, the first (in their order) whose fresh host list names the
    /// link's host; None when none does (no list, none fresh, or none naming it): the link then
    /// asks the services in their order. `first` is the first service's provider.
    pub(super) fn routed(&self, first: &dyn Provider, link: &str) -> Option<usize> {
        let services = &self.config.services;
        if services.len() < 2 || self.others.len() + 1 != services.len() {
            return None;
        }
        let host = link_host(link)?;
        let now = self.clock.now_ms();
        services.iter().enumerate().position(|(i, service)| {
            let lists = matches!(&service.spec, ProviderSpec::Http(h) if h.hosts.is_some());
            if !lists {
                return false;
            }
            let (provider, keys): (&dyn Provider, _) = if i == 0 {
                (first, (KEY.key(), FETCHING.key()))
            } else {
                (
                    &*self.others[i - 1],
                    (
                        Reserved::ServiceHostList(&service.name).key(),
                        Reserved::ServiceHostListFetching(&service.name).key(),
                    ),
                )
            };
            self.kept_list(provider, keys, now)
                .and_then(|k| k.domains)
                .is_some_and(|d| host_listed(&host, &d))
        })
    }

    /// A fresh list kept under `key`, else one fetched now (when no other request is fetching
    /// it: `fetching` held meanwhile). None: no list to go by now.
    fn kept_list(
        &self,
        provider: &dyn Provider,
        (key, fetching): (
            std::borrow::Cow<'static, str>,
            std::borrow::Cow<'static, str>,
        ),
        now: u64,
    ) -> Option<Kept> {
        let max_age_ms = defaults::PROVIDER_HOSTS_MAX_AGE_SECS * 1000;
        let kept = self
            .store
            .cache
            .cache_get(&key)
            .ok()
            .flatten()
            .and_then(|b| Kept::decode(&b))
            .filter(|k| now.saturating_sub(k.fetched_at_ms) < max_age_ms);
        match kept {
            Some(k) => Some(k),
            None => self.fetch_host_list(provider, (&key, &fetching), now),
        }
    }

    /// Fetches the list when no other request is fetching it, and keeps the outcome for a day
    /// (a failure too: the list is asked for at most once a day). None: not fetched now.
    fn fetch_host_list(
        &self,
        provider: &dyn Provider,
        (key, fetching): (&str, &str),
        now: u64,
    ) -> Option<Kept> {
        if self
            .store
            .cache
            .cache_claim(fetching, b"1", Duration::from_secs(60))
            .ok()?
            .eq(&false)
        {
            return None;
        }
        let fetched = provider.host_list()?;
        if let Err(e) = &fetched {
            self.log.line(
                Level::Warn,
                &format!(
                    "{e}; links are not checked against the provider's host list until it is fetched again, in a day"
                ),
            );
        }
        let kept = Kept {
            fetched_at_ms: now,
            domains: fetched.ok(),
        };
        let keep = Duration::from_secs(defaults::PROVIDER_HOSTS_MAX_AGE_SECS * 2);
        if let Err(e) = self.store.cache.cache_put(key, &kept.encode(), keep) {
            self.log.line(
                Level::Warn,
                &format!("keeping the provider's host list failed: {e}"),
            );
        }
        let _ = self.store.cache.cache_release(fetching, b"1");
        Some(kept)
    }
}

/// The host name of a link (None for an address or a link that does not parse).
fn link_host(link: &str) -> Option<String> {
    let url = crate::net::url::parse(link, &["https", "http"]).ok()?;
    match url.host() {
        Host::Name(host) => Some(host.to_owned()),
        _ => None,
    }
}

/// A refusal for a link the provider's free link check finds dead; None when it has no check,
/// finds the file (its size into `size`, when the check gives it), or cannot tell (logged:
/// the link goes on to the paid call).
impl App<'_> {
    /// The first free link check that answers, of each service in order (with one service,
    /// its own): a link found dead is refused before any paid call, else the size it gives is
    /// kept. A check that fails lets the next service's try; none leaves the link unchecked.
    fn refuse_dead_link(
        &self,
        first: &dyn Provider,
        link: &str,
        size: &mut Option<u64>,
    ) -> Option<Problem> {
        let services = &self.config.services;
        let others: &[Box<dyn Provider>] = if self.others.len() + 1 == services.len() {
            self.others
        } else {
            &[]
        };
        let each = std::iter::once((first, 0)).chain(others.iter().map(|o| &**o).zip(1..));
        for (provider, at) in each {
            let whose = match services.get(at).filter(|_| services.len() > 1) {
                Some(s) => format!("{}'s", s.name),
                None => "the provider's".to_owned(),
            };
            match provider.check_link(link) {
                None => continue,
                Some(Ok(c)) if c.dead => {
                    return Some(Problem::new(422, Kind::DeadLink, DEAD_LINK).log(format!(
                        "{whose} free link check finds {link:?} dead: refused before any paid call"
                    )));
                }
                Some(Ok(c)) => {
                    *size = c.size;
                    return None;
                }
                Some(Err(e)) => {
                    self.log
                        .line(Level::Warn, &format!("{e}; {link:?} goes on unchecked"));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_list_round_trips_sorted_and_a_failed_fetch_is_kept_too() {
        let k = Kept {
            fetched_at_ms: 5,
            domains: Some(vec!["b.example".into(), "a.example".into()]),
        };
        let back = Kept::decode(&k.encode()).unwrap();
        assert_eq!(back.fetched_at_ms, 5);
        assert_eq!(back.domains.unwrap(), ["a.example", "b.example"]);
        let failed = Kept {
            fetched_at_ms: 6,
            domains: None,
        };
        assert!(Kept::decode(&failed.encode()).unwrap().domains.is_none());
        assert!(Kept::decode(b"junk").is_none());
    }
}
