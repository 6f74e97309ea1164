//! The challenge stage: whether this request must first show a solved challenge (`challenge.
//! when`), the token checked with siteverify once (a store-side mark refuses a replay before
//! any call), the remembering cookie; for `over_limit`, the extra links a solved challenge
//! gives a visitor past its own limit. A request that does not pass leaves before the store
//! counts it or any provider is asked.

use crate::app::request::Asked;
use crate::app::{App, Tally, Verdict};
use crate::challenge::siteverify::Siteverify;
use crate::challenge::{Checked, OnError, Settings, Verify, When};
use crate::core::journal::Event;
use crate::core::rule::Rule;
use crate::http::negotiate::Format;
use crate::http::problem::{Kind, Problem};
use crate::http::render::{self, Frame};
use crate::http::response::Response;
use crate::store::Check;
use crate::support::defaults;
use crate::support::log::Level;

/// What the challenge stage leaves for the answer.
#[derive(Debug, Default)]
pub(super) struct Passed {
    /// Solved with this request: the answer sets the remembering cookie.
    pub(super) solved_now: bool,
}

/// How a presented token fared.
enum Outcome {
    Solved,
    Refused(Problem),
    /// siteverify gave no verdict and the policy lets the request through.
    Let,
}

impl App<'_> {
    /// The settings when this request may be asked at all: a challenge configured, and no API
    /// key (programs with keys are never asked).
    fn challenge_for(&self, asked: &Asked<'_>) -> Option<&Settings> {
        self.config
            .challenge
            .as_deref()
            .filter(|_| asked.key.is_none())
    }

    /// A solved challenge may let this client past its own rules (`over_limit`).
    pub(super) fn passes_over_limit(&self, asked: &Asked<'_>) -> bool {
        self.challenge_for(asked)
            .is_some_and(|s| s.when == When::OverLimit)
    }

    /// Before anything is counted: for `always`, `new_clients` and `busy`, a request that
    /// needs a solved challenge and brings none (nor a remembering cookie) leaves with 403
    /// `challenge_required` (or 503 when siteverify is down and the policy refuses).
    pub(super) fn challenge_first(
        &self,
        asked: &Asked<'_>,
        tally: &mut Tally,
    ) -> Result<Passed, Problem> {
        let Some(settings) = self.challenge_for(asked) else {
            return Ok(Passed::default());
        };
        if settings.when == When::OverLimit || self.remembered(settings, asked) {
            return Ok(Passed::default());
        }
        let needed = match settings.when {
            When::Always => true,
            When::NewClients => !matches!(
                self.store.cache.cache_get(&seen_key(&asked.identity)),
                Ok(Some(_))
            ),
            When::Busy => self.busy(settings),
            When::OverLimit => false,
        };
        if !needed {
            return Ok(Passed::default());
        }
        match self.check_token(settings, asked, tally) {
            Outcome::Solved => Ok(Passed { solved_now: true }),
            Outcome::Let => Ok(Passed::default()),
            Outcome::Refused(p) => Err(p),
        }
    }

    /// Whether the site's spend has passed `busy_share` of one of its limits (the owner's
    /// budget, else every spend limit). A store that cannot tell counts as busy.
    fn busy(&self, settings: &Settings) -> bool {
        let rules: Vec<&Rule> = if self.config.budget().is_empty() {
            self.config.spend.iter().collect()
        } else {
            self.config.budget().iter().collect()
        };
        if rules.is_empty() {
            return false;
        }
        let checks: Vec<Check<'_>> = rules
            .iter()
            .map(|rule| Check {
                rule,
                key: rule.key_for(""),
            })
            .collect();
        match self.store.counters.used(&checks) {
            Ok(used) => rules
                .iter()
                .zip(used)
                .any(|(r, u)| f64::from(u) >= settings.busy_share * f64::from(r.limit.get())),
            Err(_) => true,
        }
    }

    /// A valid remembering cookie for this client.
    fn remembered(&self, settings: &Settings, asked: &Asked<'_>) -> bool {
        asked.presented.cookie.as_deref().is_some_and(|value| {
            crate::challenge::cookie::holds(
                settings.secret.expose(),
                &asked.identity,
                value,
                self.clock.now_ms() / 1000,
            )
        })
    }

    /// The token presented, checked: marked in the store first (a token seen before is refused
    /// without a call), then asked of siteverify.
    fn check_token(&self, settings: &Settings, asked: &Asked<'_>, tally: &mut Tally) -> Outcome {
        let offer = || settings.offer();
        let Some(token) = asked.presented.token.as_deref() else {
            tally.add(Event::Bad(Kind::ChallengeRequired.code().into()));
            return Outcome::Refused(
                Problem::new(
                    403,
                    Kind::ChallengeRequired,
                    "Please confirm you are a person, then ask again.",
                )
                .offer(offer()),
            );
        };
        let refused = |why: &str, tally: &mut Tally| {
            tally.add(Event::Bad(Kind::ChallengeRequired.code().into()));
            Outcome::Refused(
                Problem::new(
                    403,
                    Kind::ChallengeRequired,
                    "The check did not pass or has expired. Please confirm you are a person again.",
                )
                .offer(offer())
                .log(format!("challenge refused: {why}")),
            )
        };
        let mark = format!(
            "resolve:challenge-token:{}",
            crate::http::api_key::hash(token)
        );
        match self.store.cache.cache_claim(
            &mark,
            b"1",
            std::time::Duration::from_secs(defaults::CHALLENGE_TOKEN_MARK_SECS),
        ) {
            Ok(true) => {}
            Ok(false) => return refused("the token was used before", tally),
            // siteverify refuses a used token itself: go on, and say so.
            Err(e) => self.log.line(
                Level::Warn,
                &format!("challenge: the used-token mark could not be kept: {e}"),
            ),
        }
        let remote = asked.address.to_string();
        match Siteverify.verify(settings, token, &remote, &asked.presented.host) {
            Ok(Checked::Solved) => Outcome::Solved,
            Ok(Checked::Refused(why)) => refused(&why, tally),
            Err(e) => match settings.on_error {
                OnError::Deny => {
                    tally.add(Event::Bad(Kind::ChallengeUnavailable.code().into()));
                    Outcome::Refused(
                        Problem::new(
                            503,
                            Kind::ChallengeUnavailable,
                            "The check that you are a person is not available right now. Please try again shortly.",
                        )
                        .retry_after(defaults::CHALLENGE_DENY_RETRY_AFTER_SECS)
                        .log(format!(
                            "challenge not checked, refusing (challenge.on_error is deny): {e}"
                        )),
                    )
                }
                OnError::Allow => {
                    self.log.line(
                        Level::Error,
                        &format!(
                            "challenge not checked, answering anyway (challenge.on_error is allow): {e}"
                        ),
                    );
                    Outcome::Let
                }
            },
        }
    }

    /// `over_limit`: a visitor refused by its own rules who shows a solved challenge (now, or
    /// remembered) is counted by the extra allowance instead, with the spend limits of a paid
    /// link; one who shows none, while the allowance of this window is not spent, gets the
    /// 429 with the challenge offered. Anything else keeps its verdict.
    pub(super) fn over_limit<'a>(
        &'a self,
        asked: &Asked<'_>,
        (rules, verdict): (&mut Vec<&'a Rule>, Verdict),
        (checks, spend): (&mut Vec<Check<'a>>, Vec<&'a Rule>),
        (format, frame): (Format, &Frame<'_>),
        tally: &mut Tally,
    ) -> (Verdict, Passed) {
        let Some(settings) = self
            .challenge_for(asked)
            .filter(|s| s.when == When::OverLimit)
        else {
            return (verdict, Passed::default());
        };
        let Verdict::Refused {
            response,
            by_client: true,
        } = verdict
        else {
            return (verdict, Passed::default());
        };
        let extra = [Check {
            rule: &settings.extra,
            key: settings.extra.key_for(&asked.identity),
        }];
        let left = self
            .store
            .counters
            .used(&extra)
            .is_ok_and(|u| u.first().is_some_and(|u| *u < settings.extra.limit.get()));
        let keep = |response| Verdict::Refused {
            response,
            by_client: true,
        };
        if !left {
            return (keep(response), Passed::default());
        }
        let solved = if self.remembered(settings, asked) {
            Some(false)
        } else if asked.presented.token.is_some() {
            match self.check_token(settings, asked, tally) {
                Outcome::Solved => Some(true),
                Outcome::Let => Some(false),
                Outcome::Refused(p) => {
                    self.log.line(
                        Level::Warn,
                        &format!("{} {}: {p}", p.status, asked.identity),
                    );
                    None
                }
            }
        } else {
            None
        };
        let Some(solved_now) = solved else {
            return (
                keep(with_offer(response, settings, format, frame, tally)),
                Passed::default(),
            );
        };
        // Counted by the extra allowance and the spend limits, not by the rules that refused.
        let extra_rules: Vec<&'a Rule> = vec![&settings.extra];
        let all: Vec<&'a Rule> = extra_rules.iter().copied().chain(spend).collect();
        let new_checks = asked.checks(&all);
        let decided = self.store.counters.decide_own_first(&new_checks, 1);
        if matches!(decided, Ok(ref d) if !d.is_admit()) && !solved_now {
            return (keep(response), Passed::default());
        }
        tally.events.retain(|e| !matches!(e, Event::Refused(_)));
        let verdict = self.verdict(decided, &extra_rules, &all, format, frame, tally);
        *rules = extra_rules;
        *checks = new_checks;
        (verdict, Passed { solved_now })
    }

    /// After an admitted answer: the client is seen (`new_clients`), and a challenge solved now
    /// is remembered by its cookie.
    /// The `Cookie` header a request brings once the challenge it just solved is remembered:
    /// for the links of a paste, each asked as a request of its own after the challenge was
    /// asked once for them all. None when nothing was solved now.
    pub(super) fn solved_cookie(&self, asked: &Asked<'_>, passed: &Passed) -> Option<String> {
        let settings = self.challenge_for(asked).filter(|_| passed.solved_now)?;
        let expires = self.clock.now_ms() / 1000 + u64::from(settings.remember_secs);
        let value =
            crate::challenge::cookie::value(settings.secret.expose(), &asked.identity, expires);
        Some(format!("{}={value}", crate::challenge::cookie::NAME))
    }

    pub(super) fn challenge_after(
        &self,
        asked: &Asked<'_>,
        passed: &Passed,
        script_name: Option<&str>,
        mut response: Response,
    ) -> Response {
        let Some(settings) = self.challenge_for(asked) else {
            return response;
        };
        if settings.when == When::NewClients
            && let Err(e) = self.store.cache.cache_put(
                &seen_key(&asked.identity),
                b"1",
                std::time::Duration::from_secs(defaults::CHALLENGE_SEEN_SECS),
            )
        {
            self.log.line(
                Level::Warn,
                &format!("challenge: the client could not be marked as seen: {e}"),
            );
        }
        if passed.solved_now {
            let expires = self.clock.now_ms() / 1000 + u64::from(settings.remember_secs);
            let value =
                crate::challenge::cookie::value(settings.secret.expose(), &asked.identity, expires);
            response = response.header(
                "Set-Cookie",
                crate::challenge::cookie::set_cookie(
                    &value,
                    settings.remember_secs,
                    script_name.unwrap_or("/"),
                    asked.presented.https,
                ),
            );
        }
        response
    }
}

/// The store key that says a client had an admitted request within the last day.
fn seen_key(identity: &str) -> String {
    format!("resolve:challenge-seen:{identity}")
}

/// The 429 again, with the challenge offered: its wait, its rule and its limit headers kept.
fn with_offer(
    response: Response,
    settings: &Settings,
    format: Format,
    frame: &Frame<'_>,
    tally: &Tally,
) -> Response {
    let wait = response
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("Retry-After"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(1);
    let mut p = Problem::new(
        429,
        Kind::RateLimited,
        format!(
            "{} Or confirm you are a person for {} more now.",
            render::limited_sentence(wait),
            settings.extra.limit
        ),
    )
    .retry_after(wait)
    .offer(settings.offer());
    p.rule = tally.events.iter().find_map(|e| match e {
        Event::Refused(rule) => Some(rule.as_str().into()),
        _ => None,
    });
    let mut offered = render::problem_for(format, &p, frame, tally.link.as_deref());
    offered.headers.extend(
        response
            .headers
            .into_iter()
            .filter(|(n, _)| n.starts_with("RateLimit")),
    );
    offered
}
