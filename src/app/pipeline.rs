//! The request's way through the program, stage by stage, each a function from typed values to
//! typed values: read (once) → gate (blocks, allow list, a provider set up) → look up (the
//! cache) → decide (the limiter) → join (a job under way) → admit (or the refusal) → serve
//! (pre-checks, shadow rules, the cache or the provider) → answer (the limit headers) →
//! account (the journal). A refusal leaves the way where it is made, as an [`Exit`].

use std::io::Read;

use crate::app::challenge;
use crate::app::request::{Asked, Asking, Caller};
use crate::app::{Admitted, Answer, App, Claim, Lookup, Paid, Tally, Verdict};
use crate::core::decision::Decision;
use crate::core::journal::Event;
use crate::core::rule::Rule;
use crate::http::negotiate::Format;
use crate::http::problem::{Kind, LogKind, Problem};
use crate::http::render::{self, Frame};
use crate::http::request::{Env, Method};
use crate::http::response::Response;
use crate::provider::Provider;
use crate::provider::resolved::Resolved;
use crate::store::{Check, StoreError};
use crate::support::defaults;
use crate::support::log::Level;

/// How the request leaves the way before its end: with an answer made already (a 429, a job's
/// 202), or with a refusal that is logged and rendered.
enum Exit {
    Answer(Response),
    Refuse(Problem),
}

impl From<Problem> for Exit {
    fn from(p: Problem) -> Exit {
        Exit::Refuse(p)
    }
}

/// How the answer is written: the format asked for, the page around HTML, and the program's
/// path (where a job's 202 says to ask again).
struct Reply<'r> {
    format: Format,
    frame: Frame<'r>,
    script_name: Option<&'r str>,
}

/// Through the gate: the provider to call and the client's rules. A store that could not tell
/// who is blocked fails the decision too: its error goes straight to the failure policy,
/// without waiting out a second timeout.
struct Gated<'a> {
    provider: &'a dyn Provider,
    rules: Vec<&'a Rule>,
    blocks_failure: Option<StoreError>,
}

/// What is known before the store decides: a refusal remembered for the client, or what the
/// cache says about the link.
struct Looked<'a> {
    /// The client's own rules refused it a moment ago, and still do: the store is not asked
    /// ([`crate::store::counters::Counters::recall_own`]).
    remembered: Option<Decision>,
    /// The key of the link's cached answer, when the link is cached at all.
    cache_key: Option<String>,
    cached: Option<Resolved>,
    /// This request's claim on resolving the link: released when the way ends.
    _claim: Option<Claim<'a>>,
    /// A store that failed the cache read would fail the decision too, after another timeout:
    /// its error goes straight to the failure policy.
    failure: Option<StoreError>,
}

impl Looked<'_> {
    /// A remembered refusal, with nothing read from the cache.
    fn remembered(refusal: Decision) -> Self {
        Looked {
            remembered: Some(refusal),
            cache_key: None,
            cached: None,
            _claim: None,
            failure: None,
        }
    }
}

/// Counted by the limiter: what it decided, and what the stages after need of it.
struct Counted<'a> {
    gated: Gated<'a>,
    looked: Looked<'a>,
    /// A link paid for (not HEAD, not cached, a provider that costs something).
    paid: bool,
    /// The client's rules, then the spend rules when paid: what was counted.
    checks: Vec<Check<'a>>,
    /// The store answered the decision.
    store_up: bool,
    /// A rule of the client's own refused it (whatever else did too).
    over_own_limit: bool,
}

impl App<'_> {
    /// Answers one request. `body` is the request body (standard input under CGI); at most the
    /// announced CONTENT_LENGTH is read from it, and nothing when the request is refused first.
    pub fn handle(&self, env: &Env, body: &mut dyn Read) -> Answer {
        self.store.upkeep.begin_request();
        let request = self.read(env, body);
        let head_only = request.head_only;
        // The page's facts and the host list serve something: the site's set-up is judged
        // first. So it is on a site without a provider, which refuses everyone anyway: settings
        // moved under the web root leave the defaults in force, and that is what the owner
        // must be told.
        if (self.provider.is_none() || matches!(request.asking, Asking::About | Asking::Hosts))
            && let Some(response) = self.site_refusal(&mut Tally::default())
        {
            return Answer::plain(response, head_only, false);
        }
        let asked = match request.asking {
            Asking::About => {
                let about = crate::http::about::answer(&self.config.page, self.provider.is_some());
                return Answer::plain(about, head_only, false);
            }
            Asking::Hosts => {
                return Answer::plain(self.supported(), head_only, false);
            }
            Asking::Link(asked) => asked,
        };
        let reply = Reply {
            format: request.format,
            frame: Frame::new(request.script_name, Some(&self.config.page)),
            script_name: request.script_name,
        };
        // Several links: each asked as a request of its own, journaled as such. A blocked
        // client and the challenge are answered once for them all, before any link is asked:
        // the token of a solved challenge is good for one request, so the links carry the
        // cookie that remembers it instead.
        if let Ok(asked) = &asked
            && !asked.links.is_empty()
        {
            let mut tally = Tally {
                client: Some(asked.identity.clone()),
                ..Tally::default()
            };
            let passed = self
                .gate(asked, &mut tally)
                .and_then(|_| self.challenge_first(asked, &mut tally));
            let passed = match passed {
                Ok(passed) => passed,
                Err(p) => {
                    tally.add(Event::Request);
                    let response = self.refused(&p, &request.caller, &reply, &tally);
                    self.journal(&tally);
                    return Answer::plain(response, head_only, false);
                }
            };
            // Judged once for all the links, before any is counted.
            if let Some(response) = self.site_refusal(&mut tally) {
                tally.add(Event::Request);
                self.journal(&tally);
                return Answer::plain(response, head_only, false);
            }
            let remembered;
            let env = match self.solved_cookie(asked, &passed) {
                Some(cookie) => {
                    remembered = env.clone().with("HTTP_COOKIE", cookie);
                    &remembered
                }
                None => env,
            };
            let (response, admitted) = self.several(
                env,
                &asked.links,
                (reply.format, &reply.frame, head_only),
                self.workers,
            );
            return Answer::plain(
                self.challenge_after(asked, &passed, reply.script_name, response),
                head_only,
                admitted,
            );
        }
        let mut tally = Tally::default();
        tally.add(Event::Request);
        let response = match self.way(asked, &reply, &mut tally) {
            Ok(response) | Err(Exit::Answer(response)) => response,
            Err(Exit::Refuse(p)) => self.refused(&p, &request.caller, &reply, &tally),
        };
        let journaled = self.journal(&tally);
        let keep = self.keepable(&tally, &response, journaled);
        Answer {
            response,
            head_only,
            // A discriminant test, no call: a refused request runs nothing more.
            admitted: tally.events.iter().any(|e| matches!(e, Event::Admitted)),
            keep,
        }
    }

    /// The way from the request read to its answer.
    fn way(
        &self,
        asked: Result<Asked<'_>, Problem>,
        reply: &Reply<'_>,
        tally: &mut Tally,
    ) -> Result<Response, Exit> {
        // Leaves: what the read found wrong (400, 401, 403 another site's page, 405, 411, 413,
        // 415), before anything is counted.
        let asked = asked.inspect_err(|p| tally.add(Event::Bad(p.code().into())))?;
        tally.client = Some(asked.identity.clone());
        tally.link = Some(asked.link.clone());
        // Leaves: a blocked client (403), a site without a provider (503).
        let gated = self.gate(&asked, tally)?;
        // Leaves: a challenge to solve first (403), or siteverify down while the policy
        // refuses (503): nothing counted, no provider asked.
        let passed = self.challenge_first(&asked, tally)?;
        // One of several links: looked up and counted in its turn, after the links pasted
        // before it (the provider's call still runs beside theirs).
        if let Some(turn) = &self.turn {
            turn.wait(self.turn_limit());
        }
        // A refusal remembered for the client stands for the store's, the cache unread.
        let own = asked.checks(&gated.rules);
        let looked = match self.recall(&asked, &own) {
            Some(refusal) => Looked::remembered(refusal),
            None => self.look_up_link(&asked, &gated),
        };
        // Counted in one step of the store; the verdict is acted on below.
        let (counted, verdict) = self.decide(&asked, (gated, own), looked, reply, tally);
        // `over_limit`: a solved challenge's extra links instead of the 429, or the 429
        // offering the challenge.
        let (counted, verdict, extra) = self.extra_links(&asked, counted, verdict, reply, tally);
        if let Some(turn) = &self.turn {
            turn.done();
        }
        let solved = challenge::Passed {
            solved_now: passed.solved_now || extra.solved_now,
        };
        // Leaves: the site's set-up refused (settings under the web root: 503), judged only
        // here, for a request that goes on; what it was counted is given back. A client over
        // its own limit has its 429 without it.
        if !counted.over_own_limit
            && let Some(response) = self.site_refusal(tally)
        {
            if let Verdict::Admitted(admitted) = &verdict {
                self.give_back(&counted.checks, admitted.as_ref(), tally);
            }
            tally
                .events
                .retain(|e| !matches!(e, Event::Refused(_) | Event::SpendRefused(_)));
            return Err(Exit::Answer(response));
        }
        // A job's answer (202 while it is under way) remembers the challenge too: the page
        // asks again for the same link without a token.
        let remembered = |exit| match exit {
            Exit::Answer(r) if r.status < 300 => {
                Exit::Answer(self.challenge_after(&asked, &solved, reply.script_name, r))
            }
            other => other,
        };
        // Leaves: a job under way for the link answers instead (202, or the job's end).
        self.join(&asked, &counted, &verdict, reply, tally)
            .map_err(remembered)?;
        // Leaves: refused by a limit, 429 by the client's rules, 503 by the site's spend
        // limits or a failed store.
        let admitted = self.admit(&asked, verdict, tally)?;
        // Leaves: a pre-check's 422, the provider's failure, a job just started (202).
        let response = self
            .serve(&asked, &counted, admitted.as_ref(), reply, tally)
            .map_err(remembered)?;
        let response = with_limit_headers(response, admitted);
        Ok(self.challenge_after(&asked, &solved, reply.script_name, response))
    }

    /// The 503 of a site whose set-up is refused ([`crate::app::SiteCheck`]), counted as
    /// such; None when it is sound or nothing judges it.
    fn site_refusal(&self, tally: &mut Tally) -> Option<Response> {
        let response = self.site_check.and_then(|check| check(self.config))?;
        tally.add(Event::Bad(Kind::NotConfigured.code().into()));
        Some(response)
    }

    /// `over_limit`: the verdict again when a visitor over its own rules shows a solved
    /// challenge (counted by the extra allowance then), or its 429 offering one.
    fn extra_links<'a>(
        &'a self,
        asked: &Asked<'_>,
        mut counted: Counted<'a>,
        verdict: Verdict,
        reply: &Reply<'_>,
        tally: &mut Tally,
    ) -> (Counted<'a>, Verdict, challenge::Passed) {
        let spend: Vec<&Rule> = self.first_call_rules().filter(|_| counted.paid).collect();
        let (verdict, passed) = self.over_limit(
            asked,
            (&mut counted.gated.rules, verdict),
            (&mut counted.checks, spend),
            (reply.format, &reply.frame),
            tally,
        );
        if matches!(verdict, Verdict::Admitted(_)) {
            counted.over_own_limit = false;
        }
        (counted, verdict, passed)
    }

    /// Refuses a blocked client (403) and, without a provider, everyone (503); else the
    /// client's rules, without the `ip` ones for an allowed address.
    fn gate<'a>(&'a self, asked: &Asked<'a>, tally: &mut Tally) -> Result<Gated<'a>, Problem> {
        if let Some(network) = self.config.client.untrusted_network(asked.address) {
            tally.add(Event::UntrustedNetwork(network.name()));
        }
        let blocks_failure = match self.refuse_blocked(asked, tally) {
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
        let rules = self.unless_allowed(asked, self.client_rules(asked.key.as_ref()));
        Ok(Gated {
            provider,
            rules,
            blocks_failure,
        })
    }

    /// The link's cached answer, or this request's claim to resolve it. A cached answer costs
    /// nothing: the client's rules count it, the spend rules do not. A provider that costs
    /// nothing (the echo provider) is neither cached nor counted as paid.
    fn look_up_link<'a>(&'a self, asked: &Asked<'_>, gated: &Gated<'_>) -> Looked<'a> {
        let cache_key = (!self.config.cache_ttl.is_zero()
            && asked.method != Method::Head
            && gated.provider.pays())
        .then(|| crate::provider::cache::key(&asked.link));
        let lookup = cache_key
            .as_deref()
            .filter(|_| gated.blocks_failure.is_none())
            .map(|k| self.look_up(k));
        let (cached, failure, claim) = match lookup {
            None => (None, None, None),
            Some(Lookup::Hit(r)) => (Some(r), None, None),
            Some(Lookup::Miss(claim)) => (None, None, claim),
            Some(Lookup::Failed(e)) => (None, Some(e), None),
        };
        Looked {
            remembered: None,
            cache_key,
            cached,
            _claim: claim,
            failure,
        }
    }

    /// Counts the request against every rule in one step of the store (the spend rules too
    /// when the link is to be paid for), and what that means for it. The client's own rules
    /// decide first: a client over them is refused by them alone (429 with their wait, even
    /// when the site's spend limit is reached too), the site-wide counters left unread. With
    /// `gated` come the client's own checks, made once before the recall.
    fn decide<'a>(
        &'a self,
        asked: &Asked<'_>,
        (mut gated, mut checks): (Gated<'a>, Vec<Check<'a>>),
        mut looked: Looked<'a>,
        reply: &Reply<'_>,
        tally: &mut Tally,
    ) -> (Counted<'a>, Verdict) {
        let paid = asked.method != Method::Head && looked.cached.is_none() && gated.provider.pays();
        let spend: Vec<&Rule> = self.first_call_rules().filter(|_| paid).collect();
        let all_rules: Vec<&Rule> = gated.rules.iter().chain(&spend).copied().collect();
        let own = checks.len();
        checks.extend(asked.checks(&spend));
        let decided = match (
            looked.remembered.take(),
            gated.blocks_failure.take().or(looked.failure.take()),
        ) {
            (Some(refusal), _) => Ok(tally.recalled.insert(refusal).clone()),
            (None, Some(e)) => Err(e),
            (None, None) => {
                let asked_ms = self.clock.now_ms();
                let decided = self.store.counters.decide_own_first(&checks, own);
                // Remembered: a refusal by the client's own rules alone (its statuses theirs).
                if let Ok(refusal @ Decision::Refuse { statuses, .. }) = &decided
                    && (own > 0 && statuses.len() == own)
                {
                    (self.store.counters).remember_own(&checks[..own], asked_ms, refusal);
                }
                decided
            }
        };
        let store_up = decided.is_ok();
        let over_own_limit = decided
            .as_ref()
            .is_ok_and(|d| !d.is_admit() && Self::over_own_limit(&gated.rules, d.statuses()));
        let verdict = self.verdict(
            decided,
            &gated.rules,
            &all_rules,
            reply.format,
            &reply.frame,
            tally,
        );
        let counted = Counted {
            gated,
            looked,
            paid,
            checks,
            store_up,
            over_own_limit,
        };
        (counted, verdict)
    }

    /// A link whose paid job is under way joins it (a request that waited for another one
    /// resolving the same link too): no new paid call, and the request counted by nothing.
    /// Asked only once the visitor's own rules let the request through, so that a client over
    /// its limit costs no job read; the site's limits do not stop a poll. The job's answer
    /// leaves the way.
    fn join(
        &self,
        asked: &Asked<'_>,
        counted: &Counted<'_>,
        verdict: &Verdict,
        reply: &Reply<'_>,
        tally: &mut Tally,
    ) -> Result<(), Exit> {
        let may_join = !matches!(verdict, Verdict::StoreDenied(_));
        if !(may_join
            && counted.store_up
            && !counted.over_own_limit
            && asked.method != Method::Head
            && counted.looked.cached.is_none())
        {
            return Ok(());
        }
        let Some(answer) = self.join_job(
            counted.gated.provider,
            &asked.link,
            reply.script_name,
            reply.format,
            &reply.frame,
            tally,
        ) else {
            return Ok(());
        };
        match verdict {
            Verdict::Admitted(admitted) => {
                self.give_back(&counted.checks, admitted.as_ref(), tally);
            }
            // Refused by a site-wide rule, which counted nothing: not a refusal after all.
            _ => tally
                .events
                .retain(|e| !matches!(e, Event::Refused(_) | Event::SpendRefused(_))),
        }
        Err(match answer {
            Ok(response) => Exit::Answer(response),
            Err(p) => Exit::Refuse(p),
        })
    }

    /// Admitted, or the refusal leaves the way: a 429 by the client's own rules counts towards
    /// `auto_block` (a busy site refuses everyone by its global rules, a full store new
    /// clients by keys they share: no reason to block anyone for those).
    fn admit(
        &self,
        asked: &Asked<'_>,
        verdict: Verdict,
        tally: &mut Tally,
    ) -> Result<Option<Admitted>, Exit> {
        match verdict {
            Verdict::Admitted(admitted) => Ok(admitted),
            Verdict::Refused {
                response,
                by_client,
            } => {
                if by_client {
                    self.count_refusal(asked, tally);
                }
                Err(Exit::Answer(response))
            }
            Verdict::SpendLimited(p) | Verdict::StoreDenied(p) => Err(Exit::Refuse(p)),
        }
    }

    /// The admitted request served: the free pre-checks before paying (a host the provider
    /// does not list, a link it finds dead), the shadow rules, then the answer: counted only
    /// (HEAD), cached, or paid for and cached. A job still under way leaves with its 202.
    fn serve(
        &self,
        asked: &Asked<'_>,
        counted: &Counted<'_>,
        admitted: Option<&Admitted>,
        reply: &Reply<'_>,
        tally: &mut Tally,
    ) -> Result<Response, Exit> {
        let provider = counted.gated.provider;
        let sized_before = counted.paid
            && self
                .refuse_before_paying(
                    provider,
                    &asked.link,
                    counted.store_up,
                    (&counted.checks, admitted),
                    tally,
                )
                .inspect_err(|p| {
                    self.count_own_bytes_refusal(asked, &counted.gated.rules, p, tally)
                })?;
        self.shadow(asked, tally);
        if asked.method == Method::Head {
            return Ok(render::counted(reply.format));
        }
        if let Some(resolved) = &counted.looked.cached {
            tally.add(Event::CacheHit);
            return Ok(render::resolved(reply.format, resolved, &reply.frame)
                .header("X-Resolve-Cache", "hit"));
        }
        let spend_checks = &counted.checks[counted.gated.rules.len()..];
        // With several services, the one whose fresh host list names the link's host first.
        let listed = counted
            .store_up
            .then(|| self.routed(provider, &asked.link))
            .flatten();
        let paid = self.pay_in_turn(
            provider,
            &asked.link,
            (admitted, listed),
            spend_checks,
            tally,
        );
        let resolved = match paid? {
            Paid::Resolved(r) => r,
            Paid::Pending(job) => {
                return Err(Exit::Answer(self.pending(
                    &job,
                    &asked.link,
                    reply.script_name,
                    reply.format,
                    &reply.frame,
                )));
            }
        };
        if let Some(p) = self.too_large(&asked.link, resolved.size, provider.pays()) {
            tally.add(Event::Bad(p.code().into()));
            return Err(p.into());
        }
        if !sized_before {
            self.charge_size(&counted.checks, admitted, resolved.size);
        }
        if let Some(size) = resolved.size {
            tally.add(Event::Bytes(size));
            if let Some(name) = tally.served_by.take() {
                tally.add(Event::ServiceBytes(name, size));
            }
        }
        let cache_key = counted.looked.cache_key.as_ref();
        if let Some(k) = cache_key.filter(|_| counted.store_up)
            && let Err(e) = self.store.cache.cache_put(
                k,
                &crate::provider::cache::encode(&resolved),
                self.config.cache_ttl,
            )
        {
            self.log
                .line(Level::Warn, &format!("caching the answer failed: {e}"));
        }
        let answer = render::resolved(reply.format, &resolved, &reply.frame);
        Ok(if cache_key.is_some() {
            answer.header("X-Resolve-Cache", "miss")
        } else {
            answer
        })
    }

    /// A refusal's answer, and its line in the owner's log (a blocked client's is logged by
    /// the gate, at most once a minute each; a 429 not at all); a line asking the owner to act
    /// is kept as a note.
    fn refused(
        &self,
        p: &Problem,
        caller: &Caller<'_>,
        reply: &Reply<'_>,
        tally: &Tally,
    ) -> Response {
        let level = if p.status >= 500 {
            Level::Error
        } else {
            Level::Warn
        };
        let said = p.log.as_deref().unwrap_or(&p.detail);
        // A challenge asked for is not logged (a script's every request would be); one
        // refused after a token was checked is.
        let quiet = p.kind == Kind::ChallengeRequired && p.log.is_none();
        if p.status != 429 && p.kind != Kind::Blocked && !quiet {
            self.log
                .line(level, &format!("{} {caller}: {said}", p.status));
        }
        if p.log_kind == LogKind::ActionNeeded {
            self.note(said);
        }
        render::problem_for(reply.format, p, &reply.frame, tally.link.as_deref())
    }
}

/// The answer with the limit headers of an admitted request (none when the store failed and
/// the policy answered anyway).
fn with_limit_headers(mut response: Response, admitted: Option<Admitted>) -> Response {
    if let Some(admitted) = admitted {
        response.headers.extend(admitted.limit_headers);
    }
    response
}
