//! One request from start to answer: read it, find the client, ask the store, and only when
//! every rule admits it call the provider. Being limited is an answer; nothing else runs. The
//! request's way, stage by stage, is in `pipeline`; this file holds what the stages share.

use crate::config::Config;
use crate::core::clock::Clock;
use crate::core::journal::Event;
use crate::core::rule::{KeyKind, Rule};
use crate::http::api_key::ClientKey;
use crate::http::problem::Problem;
use crate::http::response::Response;
use crate::provider::Provider;
use crate::provider::job::Job;
use crate::provider::resolved::Resolved;
use crate::store::Check;
use crate::store::cache::Cache;
use crate::store::roles::Store;
use crate::support::log::{Level, Log};

/// What the cache says about a link.
enum Lookup<'a> {
    Hit(Resolved),
    /// Not cached; with a claim when this request is the one to resolve it.
    Miss(Option<Claim<'a>>),
    Failed(crate::store::StoreError),
}

/// This request's claim on resolving a link: others wait for its answer. Released when
/// dropped, unless the answer replaced it.
struct Claim<'a> {
    store: &'a dyn Cache,
    key: String,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let _ = self
            .store
            .cache_release(&self.key, crate::provider::cache::PENDING);
    }
}

/// What a paid call gave: the answer, or a job still under way at the provider.
enum Paid {
    Resolved(Resolved),
    Pending(Job),
}

/// The answer to write, and whether the request was HEAD (no body then).
#[derive(Debug)]
pub struct Answer {
    pub response: Response,
    pub head_only: bool,
    /// Every rule admitted the request: once its answer is written, the owner's account may
    /// be read (never for a refused one).
    pub admitted: bool,
    /// A refusal answered from the memory of refusals, and what it rested on: the same request
    /// repeated may be given the same answer before the configuration is read
    /// (`gateway::replay`). None for every other answer.
    pub keep: Option<Keepable>,
}

impl Answer {
    /// An answer that keeps nothing for the request repeated.
    pub fn plain(response: Response, head_only: bool, admitted: bool) -> Answer {
        Answer {
            response,
            head_only,
            admitted,
            keep: None,
        }
    }
}

/// What a refusal answered from the memory of refusals rested on, beside the request and the
/// configuration: the slot recalled, the waits its answer says, and the journal's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keepable {
    pub refusal: crate::store::counters::RecalledSlot,
    pub waits: Vec<u32>,
    /// The journal's line for the request after its hour (`,[...]]` and the newline); None
    /// when the journal is off.
    pub journal: Option<Vec<u8>>,
}

/// Everything one request needs, borrowed from whoever runs it.
pub struct App<'a> {
    pub config: &'a Config,
    pub store: &'a Store,
    /// None when the configuration names no provider.
    pub provider: Option<&'a dyn Provider>,
    /// The services after the first, in the order of `config.services` (empty with one).
    pub others: &'a [Box<dyn Provider>],
    pub log: &'a dyn Log,
    /// The time of the request's blocks, automatic blocks and journal entry: the system's
    /// clock, or a test's.
    pub clock: &'a dyn Clock,
    /// What answers a request's several links on threads of their own, each with the site
    /// opened again (None: one after the other, on this thread, with this site).
    pub workers: Option<&'a dyn workers::Workers>,
    /// The site's own set-up, judged only where a request would be served ([`SiteCheck`]);
    /// None where nothing needs judging (a command, a test, a link's worker: its request was
    /// judged once for all its links).
    pub site_check: Option<SiteCheck<'a>>,
    /// This link's place in the order its request's links are counted in (None for a link
    /// alone): it is looked up and decided in its turn ([`workers::Turns`]).
    pub turn: Option<workers::Turn<'a>>,
}

/// Judges the site's own set-up for a request about to be served (where its settings lie:
/// `site::web_root`); `Some`: the 503 that answers instead. Asked on the way to an answer that
/// serves something, never for a request refused before it (a client over its own limit, a
/// blocked one, a bad request): the cheapest refusal walks no directory.
pub type SiteCheck<'a> = &'a dyn Fn(&Config) -> Option<Response>;

/// Counted and let through: the limit headers to send and the time it was counted at.
struct Admitted {
    limit_headers: [(&'static str, String); 2],
    at_ms: u64,
}

/// What the decision means for the request: go on, or the answer that ends it.
enum Verdict {
    /// Counted and let through (None: the store failed and the policy is to answer anyway).
    Admitted(Option<Admitted>),
    /// This 429 and nothing else; `by_client` when a rule counting this client (its address or
    /// its key) refused it by the client's own key, not only a site-wide or shared one.
    Refused { response: Response, by_client: bool },
    /// The site's own budget of paid calls is spent for now (503): nothing the visitor did.
    SpendLimited(Problem),
    /// The store failed and the policy is to refuse (503).
    StoreDenied(Problem),
}

/// What the journal will count of this request: what happened, and to which client.
#[derive(Debug, Default)]
struct Tally {
    events: Vec<Event>,
    client: Option<String>,
    /// The link asked for, once read: an HTML refusal keeps it in the form's field.
    link: Option<String>,
    /// The store could not be reached for this request: the journal is not tried (it would
    /// wait out another timeout and log a second line for the same fault).
    store_down: bool,
    /// With several services: the one that served the link (its bytes are counted to it).
    served_by: Option<String>,
    /// The refusal the memory of refusals answered for the store, as it was answered.
    recalled: Option<crate::core::decision::Decision>,
}

impl Tally {
    fn add(&mut self, event: Event) {
        self.events.push(event);
    }

    /// The store failed the decision: counted when its data was damaged (the journal is kept
    /// apart and may well be written), not when it could not be reached.
    fn store_failed(&mut self, e: &crate::store::StoreError) {
        match e.kind {
            crate::store::StoreErrorKind::Corrupt => self.add(Event::StoreFailed),
            crate::store::StoreErrorKind::Unavailable => self.store_down = true,
        }
    }
}

/// Site-wide rules (the spend limits and the provider's rates) as checks of their one key.
fn checks_for_global<'r>(rules: &[&'r Rule]) -> Vec<Check<'r>> {
    rules
        .iter()
        .filter(|r| r.key == KeyKind::Global)
        .map(|rule| Check {
            rule,
            key: rule.key_for(""),
        })
        .collect()
}

impl App<'_> {
    /// The client's rules: the configuration's, where a listed key with rules of its own counts
    /// by those instead of the `api_key` rules.
    fn client_rules<'c>(&'c self, key: Option<&ClientKey<'c>>) -> Vec<&'c Rule> {
        let own_rules = key.and_then(|k| k.known).and_then(|k| k.rules.as_deref());
        self.config
            .rules
            .iter()
            .filter(|r| r.key != KeyKind::ApiKey || (key.is_some() && own_rules.is_none()))
            .chain(own_rules.into_iter().flatten())
            .collect()
    }

    /// The spend rules a link's admission counts for its first call: the owner's, and each of
    /// the provider's rates that counts the first step's calls. With several services, the
    /// owner's only: each service's rates are counted by its own turn, the first's too, so
    /// that a first service at its rate passes the link to the next instead of refusing it
    /// ([`failover`]).
    fn first_call_rules(&self) -> impl Iterator<Item = &Rule> {
        let spec = match self.config.provider.as_ref() {
            Some(crate::provider::described::ProviderSpec::Http(h)) => Some(&**h),
            _ => None,
        };
        let rates = self.config.provider_rate_limits;
        let several = self.config.services.len() > 1;
        self.config
            .spend
            .iter()
            .enumerate()
            .filter(move |(i, _)| {
                *i >= rates || (!several && spec.is_none_or(|h| h.rate_counts(*i, 0)))
            })
            .map(|(_, r)| r)
    }

    /// Sweeps the store once in `store.sweep_one_in` calls, within the configured budget;
    /// true when it did.
    pub fn maybe_sweep(&self) -> bool {
        let every = self.config.store.sweep_one_in;
        if every == 0 || !crate::support::random::one_in(every) {
            return false;
        }
        if let Err(e) = self
            .store
            .upkeep
            .sweep(Some(self.config.store.sweep_budget))
        {
            self.log.line(Level::Warn, &format!("sweep failed: {e}"));
        }
        true
    }
}

pub mod account;
mod challenge;
pub mod controls;
mod failover;
mod failures;
mod hosts;
mod jobs;
mod links;
mod lookup;
mod meter;
mod pay;
mod pipeline;
mod request;
pub mod sizes;
mod supported;
#[cfg(test)]
mod tests;
mod usage;
mod verdict;
pub mod workers;
