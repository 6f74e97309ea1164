//! The provider call over HTTPS with ureq and rustls. One attempt only: a request that may have
//! reached the provider may have been charged, so it is never sent twice.

use std::io::Read;

use crate::defaults;
use crate::provider::{Failure, HttpMethod, HttpSpec, Place, Provider, ProviderError};
use crate::render::Resolved;

pub struct HttpProvider {
    spec: HttpSpec,
    agent: ureq::Agent,
}

impl HttpProvider {
    pub fn new(spec: HttpSpec) -> HttpProvider {
        let config = ureq::Agent::config_builder()
            .timeout_connect(Some(spec.connect_timeout))
            .timeout_global(Some(spec.timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            // Never from the environment: under CGI a client could set HTTP_PROXY (httpoxy).
            .proxy(None)
            .user_agent(concat!("resolve/", env!("CARGO_PKG_VERSION")))
            .build();
        HttpProvider {
            spec,
            agent: config.into(),
        }
    }

    fn call(&self, link: &str) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let spec = &self.spec;
        let token = spec.token.as_ref().map(|t| t.expose()).unwrap_or_default();
        let mut query: Vec<(&str, &str)> = Vec::new();
        let mut form: Vec<(&str, &str)> = Vec::new();
        let mut header: Option<(&str, String)> = None;
        for (place, value) in [(&spec.link, link)]
            .into_iter()
            .chain(spec.auth.as_ref().map(|p| (p, token)))
        {
            match place {
                Place::Query(name) => query.push((name, value)),
                Place::Form(name) => form.push((name, value)),
                Place::Header { name, prefix } => header = Some((name, format!("{prefix}{value}"))),
            }
        }
        match spec.method {
            HttpMethod::Get => {
                let mut req = self.agent.get(&spec.url).query_pairs(query);
                if let Some((name, value)) = &header {
                    req = req.header(*name, value);
                }
                req.call()
            }
            HttpMethod::Post => {
                let mut req = self.agent.post(&spec.url).query_pairs(query);
                if let Some((name, value)) = &header {
                    req = req.header(*name, value);
                }
                req.send_form(form)
            }
        }
    }
}

fn failure_of(e: &ureq::Error) -> Failure {
    match e {
        ureq::Error::Timeout(ureq::Timeout::Connect | ureq::Timeout::Resolve) => {
            Failure::Unreachable
        }
        ureq::Error::Timeout(_) => Failure::Timeout,
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => Failure::Unreachable,
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            Failure::Unreachable
        }
        _ => Failure::BadAnswer,
    }
}

impl Provider for HttpProvider {
    fn resolve(&self, link: &str) -> Result<Resolved, ProviderError> {
        let mut response = self.call(link).map_err(|e| {
            // ureq's message can quote the URL, which may carry the token: the logger masks
            // secrets, and the kind alone decides the answer.
            ProviderError::new(failure_of(&e), format!("the provider call failed: {e}"))
        })?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u32>().ok());
        let mut body = Vec::new();
        let read = response
            .body_mut()
            .as_reader()
            .take(defaults::PROVIDER_MAX_ANSWER_BYTES)
            .read_to_end(&mut body);
        if let Err(e) = read {
            let failure = if e.kind() == std::io::ErrorKind::TimedOut {
                Failure::Timeout
            } else {
                Failure::BadAnswer
            };
            let timed_out = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<ureq::Error>())
                .is_some_and(|u| matches!(u, ureq::Error::Timeout(_)));
            let failure = if timed_out { Failure::Timeout } else { failure };
            return Err(ProviderError::new(
                failure,
                format!("reading the provider's answer failed: {e}"),
            ));
        }
        self.spec.interpret(status, retry_after, &body)
    }
}
