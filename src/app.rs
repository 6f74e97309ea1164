//! One request from start to answer: read it, find the client, ask the store, and only when
//! every rule admits it call the provider. Being limited is an answer; nothing else runs.

use std::io::Read;
use std::time::{Duration, Instant};

use crate::config::{Config, OnError};
use crate::decision::Decision;
use crate::defaults;
use crate::log::{Level, Log};
use crate::negotiate::{self, Format};
use crate::problem::Problem;
use crate::provider::{Failure, Provider, ProviderError};
use crate::render;
use crate::request::{self, Env, Method};
use crate::response::Response;
use crate::rule::{KeyKind, Rule};
use crate::store::{Check, Store};

/// How often a request waiting for another's answer to the same link looks again.
const CLAIM_POLL: Duration = Duration::from_millis(100);

/// What the cache says about a link.
enum Lookup<'a> {
    Hit(crate::render::Resolved),
    /// Not cached; with a claim when this request is the one to resolve it.
    Miss(Option<Claim<'a>>),
    Failed(crate::store::StoreError),
}

/// This request's claim on resolving a link: others wait for its answer. Released when
/// dropped, unless the answer replaced it.
struct Claim<'a> {
    store: &'a dyn Store,
    key: String,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let _ = self.store.cache_release(&self.key, crate::cache::PENDING);
    }
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
    pub store: &'a dyn Store,
    /// None when the configuration names no provider.
    pub provider: Option<&'a dyn Provider>,
    pub log: &'a dyn Log,
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
            &crate::api_key::hash(key.trim())[..16]
        ),
        None => addr,
    }
}

impl App<'_> {
    /// Answers one request. `body` is the request body (standard input under CGI); at most the
    /// announced CONTENT_LENGTH is read from it, and nothing when the request is refused first.
    pub fn handle(&self, env: &Env, body: &mut dyn Read) -> Answer {
        let key_header = &self.config.api_keys.header;
        // Programs identify themselves with a key: they get JSON whatever they accept.
        let format = if env.header(key_header).is_some() {
            Format::Json
        } else {
            negotiate::from_accept(env.header("Accept"))
        };
        let head_only = env.get("REQUEST_METHOD") == Some(b"HEAD");
        let response = match self.respond(env, body, format) {
            Ok(r) => r,
            Err(p) => {
                let level = if p.status >= 500 {
                    Level::Error
                } else {
                    Level::Warn
                };
                if p.status != 429 {
                    self.log.line(
                        level,
                        &format!(
                            "{} {}: {}",
                            p.status,
                            who(env, key_header),
                            p.log.as_deref().unwrap_or(&p.detail)
                        ),
                    );
                }
                render::problem(format, &p)
            }
        };
        Answer {
            response,
            head_only,
        }
    }

    fn respond(&self, env: &Env, body: &mut dyn Read, format: Format) -> Result<Response, Problem> {
        let head = request::parse_head(env, self.config.max_body_bytes)?;
        crate::origin::check(
            &self.config.allowed_origins,
            env.header("Origin"),
            env.header("Referer"),
            env.header("Sec-Fetch-Site"),
        )?;
        let key = self
            .config
            .api_keys
            .check(env.header(&self.config.api_keys.header))?;
        let forwarded = env
            .header(&self.config.forwarded_header)
            .and_then(|v| std::str::from_utf8(v).ok());
        let address = self
            .config
            .client
            .client_address(env.text("REMOTE_ADDR"), forwarded)
            .map_err(|e| {
                Problem::new(
                    400,
                    "unknown_client",
                    "The server could not tell who is asking.",
                )
                .log(format!("REMOTE_ADDR is {e:?}: the web server must set it"))
            })?;
        let body = read_body(body, head.body_len)?;
        let link = request::parse_link(&head, env, &body)?;

        let Some(provider) = self.provider else {
            return Err(Problem::new(
                503,
                "not_configured",
                "This service is not set up yet. Please try again later.",
            )
            .retry_after(defaults::NOT_CONFIGURED_RETRY_AFTER_SECS)
            .log("no provider is configured: set \"provider\" in the configuration file (run `resolve check`)"));
        };

        let identity = self.config.client.identity(address);
        // A listed key with rules of its own counts by those instead of the `api_key` rules.
        let own_rules = key
            .as_ref()
            .and_then(|k| k.known)
            .and_then(|k| k.rules.as_deref());
        let rules: Vec<&Rule> = self
            .config
            .rules
            .iter()
            .filter(|r| r.key != KeyKind::ApiKey || (key.is_some() && own_rules.is_none()))
            .chain(own_rules.into_iter().flatten())
            .collect();
        // A cached answer costs nothing: the client's rules count it, the spend rules do not.
        let cache_key = (!self.config.cache_ttl.is_zero() && head.method != Method::Head)
            .then(|| crate::cache::key(&link));
        // A store that failed the cache read would fail the decision too, after another
        // timeout: its error goes straight to the failure policy.
        let (cached, cache_failure, _claim) = match cache_key.as_deref().map(|k| self.look_up(k)) {
            None => (None, None, None),
            Some(Lookup::Hit(r)) => (Some(r), None, None),
            Some(Lookup::Miss(claim)) => (None, None, claim),
            Some(Lookup::Failed(e)) => (None, Some(e), None),
        };
        let paid = head.method != Method::Head && cached.is_none();
        let client_rules = rules.len();
        let all_rules: Vec<&Rule> = rules
            .iter()
            .copied()
            .chain(self.config.spend.iter().filter(|_| paid))
            .collect();
        let checks: Vec<Check<'_>> = all_rules
            .iter()
            .map(|rule| Check {
                rule,
                key: rule.key_for(match rule.key {
                    KeyKind::Ip => &identity,
                    KeyKind::Global => "",
                    KeyKind::ApiKey => key.as_ref().map_or("", |k| k.id.as_str()),
                }),
            })
            .collect();
        let decided = match cache_failure {
            Some(e) => Err(e),
            None => self.store.decide(&checks),
        };
        let store_up = decided.is_ok();
        let (limit_headers, admitted_at) = match decided {
            Ok(decision @ Decision::Admit { at_ms, .. }) => {
                (Some(render::limit_headers(&rules, &decision)), Some(at_ms))
            }
            Ok(Decision::Refuse {
                rule,
                retry_after_secs,
                ..
            }) if rule >= client_rules => {
                // The site's own budget: nothing the visitor did.
                return Err(Problem::new(
                    503,
                    "spend_limit",
                    format!(
                        "The service has reached its limit for now. Please try again in {}.",
                        render::wait_words(retry_after_secs)
                    ),
                )
                .retry_after(retry_after_secs)
                .log(format!(
                    "site-wide limit {} reached ({} paid calls per {} s); refusing paid calls for {retry_after_secs} s",
                    all_rules[rule].name, all_rules[rule].limit, all_rules[rule].window_secs
                )));
            }
            Ok(
                ref decision @ Decision::Refuse {
                    rule,
                    retry_after_secs,
                    ..
                },
            ) => {
                let mut p = Problem::new(
                    429,
                    "rate_limited",
                    render::limited_sentence(retry_after_secs),
                )
                .retry_after(retry_after_secs);
                p.rule = Some(all_rules[rule].name.as_str().into());
                let mut response = render::problem(format, &p);
                response
                    .headers
                    .extend(render::limit_headers(&rules, decision));
                return Ok(response);
            }
            Err(e) => match self.config.store.on_error {
                OnError::Allow => {
                    self.log.line(
                        Level::Error,
                        &format!("store failed, answering anyway (store.on_error is allow): {e}"),
                    );
                    (None, None)
                }
                OnError::Deny => {
                    return Err(Problem::new(
                        503,
                        "store_unavailable",
                        "The service is briefly unavailable. Please try again shortly.",
                    )
                    .retry_after(self.config.store.deny_retry_after_secs)
                    .log(format!(
                        "store failed, refusing (store.on_error is deny): {e}"
                    )));
                }
            },
        };

        let mut response = if head.method == Method::Head {
            render::counted(format)
        } else if let Some(resolved) = cached {
            render::resolved(format, &resolved).header("X-Resolve-Cache", "hit")
        } else {
            let resolved = match provider.resolve(&link) {
                // A provider that echoes the site's token into its answer must not hand it to
                // the visitor, nor into the cache: such an answer is refused. (Paid for: the
                // call reached the provider.)
                Ok(r) if r.holds_any(&crate::secret::all_forms(&self.config.secrets())) => {
                    return Err(Problem::new(502, "provider_unavailable", UNAVAILABLE).log(format!(
                        "the provider's answer for {link:?} holds a secret of the configuration \
                         (the provider token, in some form), so it is never passed on or cached; \
                         ask the provider why its download links carry the account's token"
                    )));
                }
                Ok(r) => r,
                Err(mut e) => {
                    // The provider's own words go to the visitor (422): never with a secret.
                    let forms = crate::secret::all_forms(&self.config.secrets());
                    for text in [&mut e.message, &mut e.code].into_iter().flatten() {
                        *text = crate::secret::mask(text, &forms).into_owned();
                    }
                    e.detail = crate::secret::mask(&e.detail, &forms).into_owned();
                    if !e.reached
                        && let Some(at) = admitted_at
                    {
                        // Nothing reached the provider, so nothing was spent: give it back.
                        if let Err(re) = self.store.refund(&checks[client_rules..], at) {
                            self.log.line(
                                Level::Warn,
                                &format!("refunding an unspent call failed: {re}"),
                            );
                        }
                    }
                    return Err(provider_problem(&e, &link));
                }
            };
            if let Some(k) = cache_key.as_ref().filter(|_| store_up)
                && let Err(e) =
                    self.store
                        .cache_put(k, &crate::cache::encode(&resolved), self.config.cache_ttl)
            {
                self.log
                    .line(Level::Warn, &format!("caching the answer failed: {e}"));
            }
            let answer = render::resolved(format, &resolved);
            if cache_key.is_some() {
                answer.header("X-Resolve-Cache", "miss")
            } else {
                answer
            }
        };
        if let Some(headers) = limit_headers {
            response.headers.extend(headers);
        }
        Ok(response)
    }

    /// Finds a link's cached answer. When another request is resolving the same link, waits for
    /// its answer (so a link asked twice at once is paid once); when none is, claims the link
    /// for this request.
    fn look_up(&self, key: &str) -> Lookup<'_> {
        let deadline = match self.config.provider.as_ref() {
            Some(crate::provider::ProviderSpec::Http(h)) => h.deadline,
            _ => Duration::from_millis(defaults::PROVIDER_DEADLINE_MS),
        };
        let give_up = Instant::now() + deadline;
        loop {
            match self.store.cache_get(key) {
                Err(e) => return Lookup::Failed(e),
                Ok(Some(bytes)) if bytes == crate::cache::PENDING => {
                    if Instant::now() >= give_up {
                        return Lookup::Miss(None);
                    }
                    std::thread::sleep(CLAIM_POLL);
                }
                Ok(Some(bytes)) => {
                    return match crate::cache::decode(&bytes) {
                        Some(r) => Lookup::Hit(r),
                        None => Lookup::Miss(None),
                    };
                }
                // A claim outlives the resolution it covers by a little, in case its owner dies.
                Ok(None) => match self.store.cache_claim(
                    key,
                    crate::cache::PENDING,
                    deadline + CLAIM_POLL * 10,
                ) {
                    Ok(true) => {
                        return Lookup::Miss(Some(Claim {
                            store: self.store,
                            key: key.to_owned(),
                        }));
                    }
                    Ok(false) => {}
                    Err(e) => return Lookup::Failed(e),
                },
            }
        }
    }

    /// Sweeps the store once in `store.sweep_one_in` calls, within the configured budget.
    pub fn maybe_sweep(&self) {
        let every = self.config.store.sweep_one_in;
        if every == 0 || !crate::random::one_in(every) {
            return;
        }
        if let Err(e) = self.store.sweep(Some(self.config.store.sweep_budget)) {
            self.log.line(Level::Warn, &format!("sweep failed: {e}"));
        }
    }
}

fn read_body(input: &mut dyn Read, len: u64) -> Result<Vec<u8>, Problem> {
    let mut body = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    let read = input.take(len).read_to_end(&mut body);
    match read {
        Ok(n) if n as u64 == len => Ok(body),
        Ok(n) => Err(
            Problem::new(400, "short_body", "The form arrived incomplete.")
                .log(format!("body ended after {n} of {len} bytes")),
        ),
        Err(e) => Err(
            Problem::new(400, "short_body", "The form arrived incomplete.")
                .log(format!("reading the body failed: {e}")),
        ),
    }
}

const UNAVAILABLE: &str =
    "The download service is not available right now. Please try again later.";

fn provider_problem(e: &ProviderError, link: &str) -> Problem {
    let log = format!("provider call for {link:?} failed: {e}");
    let refused =
        |code: &'static str, detail: &str| Problem::new(422, code, detail).log(log.clone());
    match e.failure {
        Failure::Rejected => {
            let detail = match &e.message {
                Some(m) if m.ends_with(['.', '!', '?']) => {
                    format!("The provider could not resolve this link: {m}")
                }
                Some(m) => format!("The provider could not resolve this link: {m}."),
                None => "The provider could not resolve this link (it may be dead, or its host unsupported).".to_owned(),
            };
            Problem::new(422, "link_refused", detail).log(log)
        }
        Failure::Unsupported => refused("unsupported_host", "This file host is not supported."),
        Failure::DeadLink => refused("dead_link", "This file is no longer available: the link is dead."),
        Failure::Password => refused("password_required", "This file is protected by a password."),
        Failure::Temporary => Problem::new(
            503,
            "host_unavailable",
            "The file host is unavailable for now. Please try again later.",
        )
        .retry_after(e.retry_after.unwrap_or(defaults::PROVIDER_TEMPORARY_RETRY_AFTER_SECS))
        .log(log),
        Failure::RateLimited => Problem::new(
            503,
            "provider_busy",
            "The download service is busy. Please try again shortly.",
        )
        .retry_after(e.retry_after.unwrap_or(defaults::PROVIDER_BUSY_RETRY_AFTER_SECS))
        .log(log),
        Failure::Timeout => Problem::new(
            504,
            "provider_timeout",
            "The download service took too long to answer. Please try again.",
        )
        .log(log),
        Failure::Auth => Problem::new(502, "provider_unavailable", UNAVAILABLE).log(format!(
            "ACTION NEEDED: the provider refused the site's credentials; check provider.token and the account: {log}"
        )),
        Failure::Quota => Problem::new(503, "provider_unavailable", UNAVAILABLE)
            .retry_after(defaults::PROVIDER_QUOTA_RETRY_AFTER_SECS)
            .log(format!(
                "ACTION NEEDED: the provider account has no quota left (traffic, links or fair use): {log}"
            )),
        Failure::Unavailable | Failure::BadAnswer | Failure::Unreachable => {
            Problem::new(502, "provider_unavailable", UNAVAILABLE).log(log)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use crate::log::MemoryLog;
    use crate::memory_store::MemoryStore;
    use crate::provider::EchoProvider;
    use crate::render::Resolved;
    use std::cell::Cell;
    use std::path::Path;
    use std::time::Duration;

    /// Counts calls and answers as told.
    struct Counting {
        calls: Cell<usize>,
        answer: Result<Resolved, ProviderError>,
    }

    impl Provider for Counting {
        fn resolve(&self, _: &str) -> Result<Resolved, ProviderError> {
            self.calls.set(self.calls.get() + 1);
            self.answer.clone()
        }
    }

    fn ok_provider() -> Counting {
        Counting {
            calls: Cell::new(0),
            answer: Ok(Resolved {
                download: "https://dl.example/f".into(),
                filename: Some("f.zip".into()),
            }),
        }
    }

    /// A configuration for tests, the cache off unless the test turns it on.
    fn config(text: &str) -> Config {
        let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
        if v.get("cache").is_none() {
            v["cache"] = serde_json::json!({"ttl_secs": 0});
        }
        Config::from_json(&v.to_string(), Path::new("/nonexistent")).unwrap()
    }

    /// A store in memory, running the same limiter; `set_failing` makes it fail on demand.
    fn store() -> MemoryStore<FakeClock> {
        MemoryStore::new(FakeClock::at(1_000_000), Duration::ZERO)
    }

    fn get(addr: &str, query: &str) -> Env {
        Env::new()
            .with("REQUEST_METHOD", "GET")
            .with("QUERY_STRING", query)
            .with("REMOTE_ADDR", addr)
    }

    const LINK: &str = "link=https%3A%2F%2Fhost.example%2Ff";

    fn run(
        cfg: &Config,
        store: &MemoryStore<FakeClock>,
        provider: &dyn Provider,
        env: &Env,
    ) -> (Answer, MemoryLog) {
        let log = MemoryLog::default();
        let app = App {
            config: cfg,
            store,
            provider: Some(provider),
            log: &log,
        };
        let answer = app.handle(env, &mut std::io::empty());
        (answer, log)
    }

    #[test]
    fn refused_requests_never_reach_the_provider() {
        let cfg =
            config(r#"{"rules": [{"name": "ip", "key": "ip", "limit": 3, "window_secs": 60}]}"#);
        let (s, p) = (store(), ok_provider());
        let statuses: Vec<u16> = (0..10)
            .map(|_| run(&cfg, &s, &p, &get("192.0.2.1", LINK)).0.response.status)
            .collect();
        assert_eq!(statuses, [200, 200, 200, 429, 429, 429, 429, 429, 429, 429]);
        assert_eq!(p.calls.get(), 3);
        let (a, log) = run(&cfg, &s, &p, &get("192.0.2.1", LINK));
        assert_eq!(a.response.header_value("Retry-After"), Some("60"));
        assert!(log.lines.borrow().is_empty(), "a 429 is not logged");
        // Another address has its own count; after the window the first is admitted again.
        assert_eq!(
            run(&cfg, &s, &p, &get("192.0.2.2", LINK)).0.response.status,
            200
        );
        s.clock().advance_ms(60_000);
        assert_eq!(
            run(&cfg, &s, &p, &get("192.0.2.1", LINK)).0.response.status,
            200
        );
        assert_eq!(p.calls.get(), 5);
    }

    #[test]
    fn ipv6_addresses_in_one_prefix_share_a_count() {
        let cfg =
            config(r#"{"rules": [{"name": "ip", "key": "ip", "limit": 2, "window_secs": 60}]}"#);
        let (s, p) = (store(), ok_provider());
        for addr in ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::9"] {
            run(&cfg, &s, &p, &get(addr, LINK));
        }
        assert_eq!(p.calls.get(), 2);
        assert_eq!(
            run(&cfg, &s, &p, &get("2001:db8:1:3::1", LINK))
                .0
                .response
                .status,
            200
        );
    }

    #[test]
    fn head_is_counted_but_never_paid() {
        let cfg =
            config(r#"{"rules": [{"name": "ip", "key": "ip", "limit": 1, "window_secs": 60}]}"#);
        let (s, p) = (store(), ok_provider());
        let head = get("192.0.2.1", LINK).with("REQUEST_METHOD", "HEAD");
        let (a, _) = run(&cfg, &s, &p, &head);
        assert_eq!((a.response.status, a.head_only), (200, true));
        assert_eq!(p.calls.get(), 0);
        assert_eq!(run(&cfg, &s, &p, &head).0.response.status, 429);
    }

    #[test]
    fn bad_input_is_refused_before_the_store_and_logged() {
        let cfg = config("{}");
        let (s, p) = (store(), ok_provider());
        s.set_failing(true); // would show up as a store log line if the store were asked
        for (env, status) in [
            (get("192.0.2.1", "link=ftp://x/y"), 400),
            (get("192.0.2.1", "nothing"), 400),
            (get("192.0.2.1", LINK).with("REQUEST_METHOD", "PUT"), 405),
            (
                Env::new()
                    .with("REQUEST_METHOD", "GET")
                    .with("QUERY_STRING", LINK),
                400,
            ),
            (get("not-an-ip", LINK), 400),
        ] {
            let (a, log) = run(&cfg, &s, &p, &env);
            assert_eq!(a.response.status, status);
            let lines = log.lines.borrow();
            assert_eq!(lines.len(), 1, "{lines:?}");
            assert!(
                lines[0].starts_with(&format!("resolve: warn: {status} ")),
                "{lines:?}"
            );
        }
        assert_eq!(p.calls.get(), 0);
    }

    #[test]
    fn short_bodies_are_refused() {
        let cfg = config("{}");
        let (s, p) = (store(), ok_provider());
        let env = Env::new()
            .with("REQUEST_METHOD", "POST")
            .with("REMOTE_ADDR", "192.0.2.1")
            .with("CONTENT_TYPE", "application/x-www-form-urlencoded")
            .with("CONTENT_LENGTH", "100");
        let log = MemoryLog::default();
        let app = App {
            config: &cfg,
            store: &s,
            provider: Some(&p),
            log: &log,
        };
        let a = app.handle(&env, &mut &b"link=https://e.x/"[..]);
        assert_eq!(a.response.status, 400);
        let a = app.handle(
            &env.clone().with("CONTENT_LENGTH", "17"),
            &mut &b"link=https://e.x/and more"[..],
        );
        assert_eq!(a.response.status, 200, "reads exactly CONTENT_LENGTH bytes");
    }

    #[test]
    fn store_failures_follow_the_policy() {
        let (s, p) = (store(), ok_provider());
        s.set_failing(true);
        let allow = config("{}");
        let (a, log) = run(&allow, &s, &p, &get("192.0.2.1", LINK));
        assert_eq!(a.response.status, 200);
        assert_eq!(p.calls.get(), 1);
        assert!(log.lines.borrow()[0].contains("told to fail"));
        let deny = config(r#"{"store": {"on_error": "deny", "deny_retry_after_secs": 12}}"#);
        let (a, log) = run(&deny, &s, &p, &get("192.0.2.1", LINK));
        assert_eq!(a.response.status, 503);
        assert_eq!(a.response.header_value("Retry-After"), Some("12"));
        assert_eq!(p.calls.get(), 1, "fail closed spends nothing");
        assert!(log.lines.borrow()[0].starts_with("resolve: error: 503"));
    }

    #[test]
    fn without_a_provider_every_request_gets_503() {
        let cfg = config("{}");
        let s = store();
        let log = MemoryLog::default();
        let app = App {
            config: &cfg,
            store: &s,
            provider: None,
            log: &log,
        };
        let a = app.handle(&get("192.0.2.1", LINK), &mut std::io::empty());
        assert_eq!(a.response.status, 503);
        assert!(log.lines.borrow()[0].contains("no provider is configured"));
        assert!(s.key_count() == 0, "nothing counted");
    }

    #[test]
    fn provider_failures_become_clear_answers() {
        let cfg = config("{}");
        let cases = [
            (Failure::Rejected, 422, "link_refused"),
            (Failure::Auth, 502, "provider_unavailable"),
            (Failure::RateLimited, 503, "provider_busy"),
            (Failure::Unavailable, 502, "provider_unavailable"),
            (Failure::BadAnswer, 502, "provider_unavailable"),
            (Failure::Unreachable, 502, "provider_unavailable"),
            (Failure::Timeout, 504, "provider_timeout"),
        ];
        for (failure, status, code) in cases {
            let s = store();
            let p = Counting {
                calls: Cell::new(0),
                answer: Err(ProviderError::new(failure, "test")),
            };
            let env = get("192.0.2.1", LINK).with("HTTP_ACCEPT", "application/json");
            let (a, log) = run(&cfg, &s, &p, &env);
            assert_eq!(a.response.status, status, "{failure:?}");
            let body: serde_json::Value = serde_json::from_slice(&a.response.body).unwrap();
            assert_eq!(body["code"], code);
            assert_eq!(log.lines.borrow().len(), 1);
            if failure == Failure::Auth {
                assert!(log.lines.borrow()[0].contains("ACTION NEEDED"));
                assert!(!body["detail"].as_str().unwrap().contains("credentials"));
            }
        }
    }

    fn keyed_config() -> Config {
        let key = |k: &str| crate::api_key::hash(k);
        config(&format!(
            r#"{{"rules": [{{"name": "ip", "key": "ip", "limit": 100, "window_secs": 60}},
                           {{"name": "key", "key": "api_key", "limit": 3, "window_secs": 60}}],
                "api_keys": {{"require": true, "keys": [
                    {{"name": "alpha", "sha256": "{}"}},
                    {{"name": "beta", "sha256": "{}"}},
                    {{"name": "gold", "sha256": "{}", "rules": [{{"name": "gold", "key": "api_key", "limit": 5, "window_secs": 60}}]}}]}}}}"#,
            key("key-alpha"),
            key("key-beta"),
            key("key-gold")
        ))
    }

    #[test]
    fn api_keys_are_required_checked_and_limited_per_key() {
        let cfg = keyed_config();
        let (s, p) = (store(), ok_provider());
        let (a, log) = run(&cfg, &s, &p, &get("192.0.2.1", LINK));
        assert_eq!(a.response.status, 401);
        assert!(
            a.response
                .header_value("WWW-Authenticate")
                .unwrap()
                .contains("X-API-Key")
        );
        assert!(log.lines.borrow()[0].contains("no X-API-Key header"));
        let (a, log) = run(
            &cfg,
            &s,
            &p,
            &get("192.0.2.1", LINK).with("HTTP_X_API_KEY", "key-wrong"),
        );
        assert_eq!(a.response.status, 401);
        let body: serde_json::Value = serde_json::from_slice(&a.response.body).unwrap();
        assert_eq!(body["code"], "unknown_api_key", "a keyed request gets JSON");
        assert!(!log.lines.borrow()[0].contains("key-wrong"));
        assert_eq!(p.calls.get(), 0);

        // alpha is limited to 3, from two addresses together; beta is unaffected.
        let with = |addr: &str, k: &str| get(addr, LINK).with("HTTP_X_API_KEY", k);
        let statuses: Vec<u16> = ["192.0.2.1", "192.0.2.2", "192.0.2.1", "192.0.2.2"]
            .iter()
            .map(|addr| {
                run(&cfg, &s, &p, &with(addr, "key-alpha"))
                    .0
                    .response
                    .status
            })
            .collect();
        assert_eq!(statuses, [200, 200, 200, 429]);
        let (a, _) = run(&cfg, &s, &p, &with("192.0.2.2", "key-alpha"));
        let body: serde_json::Value = serde_json::from_slice(&a.response.body).unwrap();
        assert_eq!(
            (body["rule"].as_str(), body["status"].as_u64()),
            (Some("key"), Some(429))
        );
        assert_eq!(
            run(&cfg, &s, &p, &with("192.0.2.1", "key-beta"))
                .0
                .response
                .status,
            200
        );
        // gold has limits of its own.
        let gold: Vec<u16> = (0..6)
            .map(|_| {
                run(&cfg, &s, &p, &with("192.0.2.3", "key-gold"))
                    .0
                    .response
                    .status
            })
            .collect();
        assert_eq!(gold, [200, 200, 200, 200, 200, 429]);
        assert_eq!(p.calls.get(), 3 + 1 + 5);
    }

    #[test]
    fn per_key_and_per_address_limits_apply_together() {
        let cfg = config(
            r#"{"rules": [{"name": "ip", "key": "ip", "limit": 2, "window_secs": 60},
                          {"name": "key", "key": "api_key", "limit": 100, "window_secs": 60}]}"#,
        );
        let (s, p) = (store(), ok_provider());
        // One address rotating keys is still one address.
        let statuses: Vec<u16> = ["k1", "k2", "k3"]
            .iter()
            .map(|k| {
                let env = get("192.0.2.9", LINK).with("HTTP_X_API_KEY", *k);
                run(&cfg, &s, &p, &env).0.response.status
            })
            .collect();
        assert_eq!(statuses, [200, 200, 429]);
        // Without a key, api_key rules do not apply.
        assert_eq!(
            run(&cfg, &s, &p, &get("192.0.2.10", LINK))
                .0
                .response
                .status,
            200
        );
    }

    #[test]
    fn other_sites_pages_are_refused_before_anything_is_counted() {
        let cfg = config(r#"{"allowed_origins": ["https://mysite.example"]}"#);
        let (s, p) = (store(), ok_provider());
        let from = |origin: &str| get("192.0.2.1", LINK).with("HTTP_ORIGIN", origin);
        let (a, log) = run(&cfg, &s, &p, &from("https://evil.example"));
        assert_eq!(a.response.status, 403);
        assert!(log.lines.borrow()[0].contains("Origin https://evil.example"));
        assert!(s.key_count() == 0);
        assert_eq!(
            run(&cfg, &s, &p, &from("https://mysite.example"))
                .0
                .response
                .status,
            200
        );
        assert_eq!(
            run(&cfg, &s, &p, &get("192.0.2.1", LINK)).0.response.status,
            200
        );
        assert_eq!(p.calls.get(), 2);
    }

    #[test]
    fn no_referrer_pages_of_other_sites_are_refused_by_fetch_metadata() {
        let cfg = config(r#"{"allowed_origins": ["https://mysite.example"]}"#);
        let (s, p) = (store(), ok_provider());
        let fetched = |site: &str| {
            get("192.0.2.1", LINK)
                .with("HTTP_SEC_FETCH_SITE", site)
                .with("HTTP_SEC_FETCH_MODE", "no-cors")
                .with("HTTP_SEC_FETCH_DEST", "image")
                .with("HTTP_ACCEPT", "application/json")
        };
        // Another site's <img> or link under Referrer-Policy: no-referrer, and a sibling
        // subdomain's: refused before the store or the provider, even a failing store.
        s.set_failing(true);
        for site in ["cross-site", "same-site"] {
            let (a, log) = run(&cfg, &s, &p, &fetched(site));
            assert_eq!(a.response.status, 403, "{site}");
            let v: serde_json::Value = serde_json::from_slice(&a.response.body).unwrap();
            assert_eq!(v["code"], "origin_not_allowed");
            assert_eq!(a.response.header_value("RateLimit"), None);
            let lines = log.lines.borrow();
            assert_eq!(lines.len(), 1, "{lines:?}");
            assert!(
                lines[0].contains(&format!(
                    "refused a request from another site (Sec-Fetch-Site {site}, no Origin or Referer)"
                )),
                "{}",
                lines[0]
            );
        }
        assert!(s.key_count() == 0);
        assert_eq!(p.calls.get(), 0);
        s.set_failing(false);
        // Typed or bookmarked, a page next to the endpoint, and an allowed page whatever the
        // header says.
        for env in [
            fetched("none"),
            fetched("same-origin"),
            fetched("cross-site").with("HTTP_ORIGIN", "https://mysite.example"),
            fetched("same-site").with("HTTP_REFERER", "https://mysite.example/tools/"),
        ] {
            assert_eq!(run(&cfg, &s, &p, &env).0.response.status, 200);
        }
        assert_eq!(p.calls.get(), 4);
        // Without the list, the header is not looked at.
        let open = config("{}");
        assert_eq!(
            run(&open, &s, &p, &fetched("cross-site")).0.response.status,
            200
        );
    }

    #[test]
    fn answers_follow_accept() {
        let cfg = config("{}");
        let (s, p) = (store(), ok_provider());
        let json = run(
            &cfg,
            &s,
            &p,
            &get("192.0.2.1", LINK).with("HTTP_ACCEPT", "application/json"),
        )
        .0;
        let v: serde_json::Value = serde_json::from_slice(&json.response.body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"download": "https://dl.example/f", "filename": "f.zip"})
        );
        let html = run(
            &cfg,
            &s,
            &p,
            &get("192.0.2.1", LINK).with("HTTP_ACCEPT", "text/html"),
        )
        .0;
        assert!(
            String::from_utf8_lossy(&html.response.body).contains("href=\"https://dl.example/f\"")
        );
        let text = run(&cfg, &s, &EchoProvider, &get("192.0.2.1", LINK)).0;
        assert_eq!(text.response.body, b"https://host.example/f\n");
        assert_eq!(
            text.response.header_value("Cache-Control"),
            Some("no-store")
        );
    }
}
