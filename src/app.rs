//! One request from start to answer: read it, find the client, ask the store, and only when
//! every rule admits it call the provider. Being limited is an answer; nothing else runs.

use std::io::Read;

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
use crate::rule::KeyKind;
use crate::store::{Check, Store};

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

/// The client as written in log lines.
fn who(env: &Env) -> String {
    String::from_utf8_lossy(env.get("REMOTE_ADDR").unwrap_or(b"-")).into_owned()
}

impl App<'_> {
    /// Answers one request. `body` is the request body (standard input under CGI); at most the
    /// announced CONTENT_LENGTH is read from it, and nothing when the request is refused first.
    pub fn handle(&self, env: &Env, body: &mut dyn Read) -> Answer {
        let format = negotiate::from_accept(env.header("Accept"));
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
                            who(env),
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
        let checks: Vec<Check<'_>> = self
            .config
            .rules
            .iter()
            .map(|rule| Check {
                rule,
                key: rule.key_for(match rule.key {
                    KeyKind::Ip => &identity,
                    KeyKind::Global => "",
                }),
            })
            .collect();
        let rules: Vec<_> = self.config.rules.iter().collect();
        let limit_headers = match self.store.decide(&checks) {
            Ok(decision @ Decision::Admit { .. }) => Some(render::limit_headers(&rules, &decision)),
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
                p.rule = Some(self.config.rules[rule].name.to_string());
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
                    None
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
        } else {
            let resolved = provider
                .resolve(&link)
                .map_err(|e| provider_problem(&e, &link))?;
            render::resolved(format, &resolved)
        };
        if let Some(headers) = limit_headers {
            response.headers.extend(headers);
        }
        Ok(response)
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

fn provider_problem(e: &ProviderError, link: &str) -> Problem {
    let log = format!("provider call for {link:?} failed: {e}");
    match e.failure {
        Failure::Rejected => {
            let detail = match &e.message {
                Some(m) => format!("The provider could not resolve this link: {m}"),
                None => "The provider could not resolve this link (it may be dead, or its host unsupported).".to_owned(),
            };
            Problem::new(422, "link_refused", detail).log(log)
        }
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
        Failure::Auth => Problem::new(
            502,
            "provider_unavailable",
            "The download service is not available right now. Please try again later.",
        )
        .log(format!(
            "ACTION NEEDED: the provider refused the site's credentials; check provider.token and the account: {log}"
        )),
        Failure::Unavailable | Failure::BadAnswer | Failure::Unreachable => Problem::new(
            502,
            "provider_unavailable",
            "The download service is not available right now. Please try again later.",
        )
        .log(log),
    }
}
