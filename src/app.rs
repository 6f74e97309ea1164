//! One request from start to answer: read it, find the client, ask the store, and only when
//! every rule admits it call the provider. Being limited is an answer; nothing else runs.

use std::io::Read;

use crate::config::Config;
use crate::core::clock::Clock;
use crate::core::journal::Event;
use crate::core::rule::{KeyKind, Rule};
use crate::http::api_key::ClientKey;
use crate::http::negotiate::{self, Format};
use crate::http::problem::{Kind, LogKind, Problem};
use crate::http::render;
use crate::http::request::{self, Env, Method};
use crate::http::response::Response;
use crate::provider::job::Job;
use crate::provider::resolved::Resolved;
use crate::provider::{Failure, Provider};
use crate::store::Check;
use crate::store::cache::Cache;
use crate::store::roles::Store;
use crate::support::defaults;
use crate::support::log::{Level, Log};
use failures::{UNAVAILABLE, provider_problem};

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
}

/// Everything one request needs, borrowed from whoever runs it.
pub struct App<'a> {
    pub config: &'a Config,
    pub store: &'a Store,
    /// None when the configuration names no provider.
    pub provider: Option<&'a dyn Provider>,
    pub log: &'a dyn Log,
    /// The time of the request's blocks, automatic blocks and journal entry: the system's
    /// clock, or a test's.
    pub clock: &'a dyn Clock,
}

/// A request read and checked, before anything is counted.
struct Asked<'c> {
    method: Method,
    /// The client's address.
    address: std::net::IpAddr,
    /// The client's address as counted (an IPv6 address by its prefix).
    identity: String,
    key: Option<ClientKey<'c>>,
    link: String,
}

/// Counted and let through: the limit headers to send and the time it was counted at.
struct Admitted {
    limit_headers: [(&'static str, String); 2],
    at_ms: u64,
}

/// What the decision means: go on (None when the store failed and the policy is to answer
/// anyway), or this 429 and nothing else; `by_client` when a rule counting this client (its
/// address or its key) refused it by the client's own key, not only a site-wide or shared one.
enum Verdict {
    Admitted(Option<Admitted>),
    Refused { response: Response, by_client: bool },
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

/// Each rule applied to the key it counts this request by.
fn checks<'r>(rules: &[&'r Rule], asked: &Asked<'_>) -> Vec<Check<'r>> {
    rules
        .iter()
        .map(|rule| Check {
            rule,
            key: rule.key_for(match rule.key {
                KeyKind::Ip => &asked.identity,
                KeyKind::Global => "",
                KeyKind::ApiKey => asked.key.as_ref().map_or("", |k| k.id.as_str()),
            }),
        })
        .collect()
}

/// The client as written in log lines: its address, and its key's id (never the key).
fn who(env: &Env, key_header: &str) -> String {
    let addr = String::from_utf8_lossy(env.get("REMOTE_ADDR").unwrap_or(b"-")).into_owned();
    match env
        .header(key_header)
        .and_then(|k| std::str::from_utf8(k).ok())
    {
        Some(key) => format!(
            "{addr} key=sha256:{}",
            &crate::http::api_key::hash(key.trim())[..16]
        ),
        None => addr,
    }
}

impl App<'_> {
    /// Answers one request. `body` is the request body (standard input under CGI); at most the
    /// announced CONTENT_LENGTH is read from it, and nothing when the request is refused first.
    pub fn handle(&self, env: &Env, body: &mut dyn Read) -> Answer {
        self.store.upkeep.begin_request();
        let key_header = &self.config.api_keys.header;
        // Programs identify themselves with a key: they get JSON whatever they accept.
        let format = if env.header(key_header).is_some() {
            Format::Json
        } else {
            negotiate::from_accept(env.header("Accept"))
        };
        let head_only = env.get("REQUEST_METHOD") == Some(b"HEAD");
        // The page's footer and version: answered before anything is read or counted.
        if crate::http::about::is_about(env) {
            return Answer {
                response: crate::http::about::answer(&self.config.page, self.provider.is_some()),
                head_only,
            };
        }
        let frame = render::Frame::new(env.text("SCRIPT_NAME"), Some(&self.config.page));
        let mut tally = Tally::default();
        tally.add(Event::Request);
        let response = match self.respond(env, body, format, &frame, &mut tally) {
            Ok(r) => r,
            Err(p) => {
                let level = if p.status >= 500 {
                    Level::Error
                } else {
                    Level::Warn
                };
                let said = p.log.as_deref().unwrap_or(&p.detail);
                // Blocked clients are logged by the guard, at most once a minute each.
                if p.status != 429 && p.kind != Kind::Blocked {
                    self.log.line(
                        level,
                        &format!("{} {}: {said}", p.status, who(env, key_header)),
                    );
                }
                if p.log_kind == LogKind::ActionNeeded {
                    self.note(said);
                }
                render::problem_for(format, &p, &frame, tally.link.as_deref())
            }
        };
        self.journal(&tally);
        Answer {
            response,
            head_only,
        }
    }

    /// The request's way through: who asks and for what, whether the rules admit it, and only
    /// then the cache or the paid call.
    fn respond(
        &self,
        env: &Env,
        body: &mut dyn Read,
        format: Format,
        frame: &render::Frame<'_>,
        tally: &mut Tally,
    ) -> Result<Response, Problem> {
        let asked = self
            .read_request(env, body)
            .inspect_err(|p| tally.add(Event::Bad(p.code().into())))?;
        tally.client = Some(asked.identity.clone());
        tally.link = Some(asked.link.clone());
        if let Some(network) = self.config.client.untrusted_network(asked.address) {
            tally.add(Event::UntrustedNetwork(network.name()));
        }
        // A store that cannot tell who is blocked fails the decision too: its error goes
        // straight to the failure policy, without waiting out a second timeout.
        let blocks_failure = match self.refuse_blocked(&asked, tally) {
            Ok(Some(p)) => return Err(p),
            Ok(None) => None,
            Err(e) => Some(e),
        };
        let Some(provider) = self.provider else {
            tally.add(Event::Bad(Kind::NotConfigured.code().into()));
            return Err(Problem::new(
                503,
                Kind::NotConfigured,
                "This service is not set up yet. Please try again later.",
            )
            .retry_after(defaults::NOT_CONFIGURED_RETRY_AFTER_SECS)
            .log("no provider is configured: set \"provider\" in the configuration file (run `resolve check`)"));
        };
        let head_only = asked.method == Method::Head;
        let rules = self.unless_allowed(&asked, self.client_rules(asked.key.as_ref()));
        // A cached answer costs nothing: the client's rules count it, the spend rules do not.
        // A provider that costs nothing (the echo provider) is neither cached nor counted as
        // paid, nor against the spend limits.
        let cache_key = (!self.config.cache_ttl.is_zero() && !head_only && provider.pays())
            .then(|| crate::provider::cache::key(&asked.link));
        // A store that failed the cache read would fail the decision too, after another
        // timeout: its error goes straight to the failure policy.
        let lookup = cache_key
            .as_deref()
            .filter(|_| blocks_failure.is_none())
            .map(|k| self.look_up(k));
        let (cached, cache_failure, _claim) = match lookup {
            None => (None, None, None),
            Some(Lookup::Hit(r)) => (Some(r), None, None),
            Some(Lookup::Miss(claim)) => (None, None, claim),
            Some(Lookup::Failed(e)) => (None, Some(e), None),
        };
        let paid = !head_only && cached.is_none() && provider.pays();
        let all_rules: Vec<&Rule> = rules
            .iter()
            .copied()
            .chain(self.first_call_rules().filter(|_| paid))
            .collect();
        let checks = checks(&all_rules, &asked);
        let decided = match blocks_failure.or(cache_failure) {
            Some(e) => Err(e),
            None => self.store.counters.decide(&checks),
        };
        let store_up = decided.is_ok();
        // A client over one of its own rules is refused at once, whatever else refused it.
        let over_own_limit = decided
            .as_ref()
            .is_ok_and(|d| !d.is_admit() && Self::over_own_limit(&rules, d.statuses()));
        let verdict = self.verdict(decided, &rules, &all_rules, format, frame, tally);
        // A link whose paid job is under way joins it (a request that waited for another one
        // resolving the same link too): no new paid call, and the request counted by nothing.
        // Asked only once the visitor's own rules let the request through, so that a client
        // over its limit costs no job read; the site's limits do not stop a poll.
        let may_join = match &verdict {
            Ok(Verdict::Admitted(_) | Verdict::Refused { .. }) => true,
            Err(p) => p.kind == Kind::SpendLimit,
        };
        if may_join
            && store_up
            && !over_own_limit
            && !head_only
            && cached.is_none()
            && let Some(answer) = self.join_job(provider, &asked.link, env, format, frame, tally)
        {
            match &verdict {
                Ok(Verdict::Admitted(admitted)) => {
                    self.give_back(&checks, admitted.as_ref(), tally);
                }
                // Refused by a site-wide rule, which counted nothing: not a refusal after all.
                _ => tally
                    .events
                    .retain(|e| !matches!(e, Event::Refused(_) | Event::SpendRefused(_))),
            }
            return answer;
        }
        let admitted = match verdict? {
            Verdict::Admitted(admitted) => admitted,
            Verdict::Refused {
                response,
                by_client,
            } => {
                // A busy site refuses everyone by its global rules, a full store new clients by
                // keys they share: no reason to block anyone.
                if by_client {
                    self.count_refusal(&asked, tally);
                }
                return Ok(response);
            }
        };
        // Free checks before paying: a host the provider does not list, a link it finds dead.
        if paid
            && let Some(p) = self.refuse_before_paying(
                provider,
                &asked.link,
                store_up,
                (&checks, admitted.as_ref()),
                tally,
            )
        {
            return Err(p);
        }
        self.shadow(&asked, tally);

        let mut response = if head_only {
            render::counted(format)
        } else if let Some(resolved) = cached {
            tally.add(Event::CacheHit);
            render::resolved(format, &resolved, frame).header("X-Resolve-Cache", "hit")
        } else {
            let spend_checks = &checks[rules.len()..];
            let resolved = match self.pay(
                provider,
                &asked.link,
                admitted.as_ref(),
                spend_checks,
                tally,
            )? {
                Paid::Resolved(r) => r,
                Paid::Pending(job) => {
                    return Ok(self.pending(&job, &asked.link, env, format, frame));
                }
            };
            if let Some(k) = cache_key.as_ref().filter(|_| store_up)
                && let Err(e) = self.store.cache.cache_put(
                    k,
                    &crate::provider::cache::encode(&resolved),
                    self.config.cache_ttl,
                )
            {
                self.log
                    .line(Level::Warn, &format!("caching the answer failed: {e}"));
            }
            let answer = render::resolved(format, &resolved, frame);
            if cache_key.is_some() {
                answer.header("X-Resolve-Cache", "miss")
            } else {
                answer
            }
        };
        if let Some(admitted) = admitted {
            response.headers.extend(admitted.limit_headers);
        }
        Ok(response)
    }

    /// Who is asking and for what: the method and body checked, the page's origin allowed, the
    /// API key checked, the client's address found and the link read. Nothing is counted yet.
    fn read_request<'c>(&'c self, env: &Env, body: &mut dyn Read) -> Result<Asked<'c>, Problem> {
        let head = request::parse_head(env, self.config.max_body_bytes)?;
        crate::http::origin::check(
            &self.config.allowed_origins,
            env.header("Origin"),
            env.header("Referer"),
            env.header("Sec-Fetch-Site"),
        )?;
        let key = self
            .config
            .api_keys
            .check(env.header(&self.config.api_keys.header))?;
        let address = crate::http::identity::client_address_in(
            &self.config.client,
            &self.config.forwarded_header,
            env,
        )
        .map_err(|e| {
            Problem::new(
                400,
                Kind::UnknownClient,
                "The server could not tell who is asking.",
            )
            .log(format!("REMOTE_ADDR is {e:?}: the web server must set it"))
        })?;
        let body = read_body(body, head.body_len)?;
        let link = request::parse_link(&head, env, &body)?;
        Ok(Asked {
            method: head.method,
            address,
            identity: self.config.client.identity(address),
            key,
            link,
        })
    }

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

    /// The spend rules a link's first call counts in: the owner's, and each of the provider's
    /// rates that counts the first step's calls.
    fn first_call_rules(&self) -> impl Iterator<Item = &Rule> {
        let spec = match self.config.provider.as_ref() {
            Some(crate::provider::spec::ProviderSpec::Http(h)) => Some(&**h),
            _ => None,
        };
        let rates = self.config.provider_rate_limits;
        self.config
            .spend
            .iter()
            .enumerate()
            .filter(move |(i, _)| *i >= rates || spec.is_none_or(|h| h.rate_counts(*i, 0)))
            .map(|(_, r)| r)
    }

    /// The paid call. An answer holding a secret is refused; a failure that never reached the
    /// provider gives the spend rules their count back (nothing was spent).
    fn pay(
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
        match &answer {
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
        let paid_at_ms = admitted.map_or_else(|| self.clock.now_ms(), |a| a.at_ms);
        self.settle(answer, link, paid_at_ms, spend_checks, tally)
    }

    /// The provider's meter of calls, when it has rates to count them against.
    fn meter(&self) -> Option<meter::StoreMeter<'_>> {
        match self.config.provider.as_ref() {
            Some(crate::provider::spec::ProviderSpec::Http(spec)) => Some(meter::StoreMeter {
                counters: &*self.store.counters,
                rates: &self.config.spend[..self
                    .config
                    .provider_rate_limits
                    .min(self.config.spend.len())],
                spec,
                log: self.log,
            }),
            _ => None,
        }
    }

    /// What comes of a resolution (or of polling its job): the answer, a job kept under way,
    /// or the visitor's problem. A call that never reached the provider, and a job the
    /// provider reports failed, give the spend rules the link's count back (`paid_at_ms`).
    fn settle(
        &self,
        answer: Result<Resolved, crate::provider::ProviderError>,
        link: &str,
        paid_at_ms: u64,
        spend_checks: &[Check<'_>],
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
                let rates = &self.config.spend[..self
                    .config
                    .provider_rate_limits
                    .min(self.config.spend.len())];
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

fn read_body(input: &mut dyn Read, len: u64) -> Result<Vec<u8>, Problem> {
    let mut body = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    let read = input.take(len).read_to_end(&mut body);
    match read {
        Ok(n) if n as u64 == len => Ok(body),
        Ok(n) => Err(
            Problem::new(400, Kind::ShortBody, "The form arrived incomplete.")
                .log(format!("body ended after {n} of {len} bytes")),
        ),
        Err(e) => Err(
            Problem::new(400, Kind::ShortBody, "The form arrived incomplete.")
                .log(format!("reading the body failed: {e}")),
        ),
    }
}

/// The provider failure class of an answer refused because it holds the site's token.
const SECRET_IN_ANSWER: &str = "secret_in_answer";

pub mod controls;
mod failures;
mod hosts;
mod jobs;
mod lookup;
mod meter;
#[cfg(test)]
mod tests;
mod usage;
mod verdict;
