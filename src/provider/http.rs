//! The provider call over HTTPS with ureq and rustls: the description's steps in order, polling
//! where it says so, all within the deadline. No request is ever sent twice: a call that may
//! have reached the provider may have been charged (polling asks about work already paid for).

use std::io::Read;
use std::time::{Duration, Instant};

use crate::net::lookup;
use crate::provider::account::AccountFacts;
use crate::provider::job::Job;
use crate::provider::resolved::{FileLink, Resolved};
use std::sync::Arc;

use crate::provider::described::LazySpec;
use crate::provider::spec::{HttpMethod, HttpSpec, Step, StepOutcome, Template, Vars};
use crate::provider::{
    Checked, Failure, Meter, MissingValue, Precheck, PrecheckError, Provider, ProviderError,
};
use crate::support::defaults;

pub struct HttpProvider {
    /// Built at the first call too: a refused request reads only its summary.
    spec: Arc<LazySpec>,
    /// Made at the first call: a CGI request that is refused never needs it.
    agent: std::sync::OnceLock<ureq::Agent>,
}

impl HttpProvider {
    pub fn new(spec: HttpSpec) -> HttpProvider {
        HttpProvider::shared(LazySpec::built(spec))
    }

    /// A provider of the configuration's description, built (if it is not yet) at the first
    /// call.
    pub fn shared(spec: Arc<LazySpec>) -> HttpProvider {
        HttpProvider {
            spec,
            agent: std::sync::OnceLock::new(),
        }
    }

    /// The description, or the failure of a call when it could not be built.
    fn built(&self) -> Result<&HttpSpec, ProviderError> {
        self.spec.spec().map_err(|why| {
            ProviderError::new(
                Failure::Unavailable,
                format!("the provider's description could not be built: {why}"),
            )
        })
    }

    fn agent(&self) -> &ureq::Agent {
        self.agent.get_or_init(|| {
            lookup::agent(
                ureq::Agent::config_builder()
                    .timeout_connect(Some(self.spec.connect_timeout))
                    .http_status_as_error(false)
                    .max_redirects(0)
                    // Never from the environment: under CGI a client could set HTTP_PROXY (httpoxy).
                    .proxy(None)
                    .user_agent(concat!("resolve/", env!("CARGO_PKG_VERSION")))
                    .build(),
            )
        })
    }

    fn call(
        &self,
        step: &Step,
        vars: &Vars,
        timeout: Duration,
    ) -> Result<Result<ureq::http::Response<ureq::Body>, ureq::Error>, MissingValue> {
        let render = |list: &[(String, crate::provider::spec::Template)]| {
            list.iter()
                .map(|(k, t)| t.render(vars).map(|v| (k.clone(), v)))
                .collect::<Result<Vec<_>, _>>()
        };
        let url = step.url.render(vars)?;
        let headers = render(&step.headers)?;
        let query = render(&step.query)?;
        let form = render(&step.form)?;
        Ok(match step.method {
            HttpMethod::Get => prepared(self.agent().get(&url), &query, &headers, timeout).call(),
            HttpMethod::Post => prepared(self.agent().post(&url), &query, &headers, timeout)
                .send_form(form.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        })
    }

    /// Runs one step, polling until done: the files of a list answer, if any. `reached` says
    /// whether an earlier call connected.
    fn run_step(
        &self,
        (index, step): (usize, &Step),
        vars: &mut Vars,
        deadline: Instant,
        reached: &mut bool,
        meter: &dyn Meter,
    ) -> Result<Vec<FileLink>, ProviderError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(mark(
                    ProviderError::new(
                        Failure::Timeout,
                        "the provider did not finish in time (provider.deadline_ms)",
                    ),
                    *reached,
                ));
            }
            // The first call of a link was counted when the request was admitted.
            if *reached {
                meter.another_call(index)?;
            }
            let timeout = left.min(self.spec.timeout);
            let response = self.call(step, vars, timeout).map_err(|e| {
                ProviderError::new(
                    Failure::BadAnswer,
                    format!("the description cannot build the call: {e}"),
                )
            })?;
            let mut response = response.map_err(|e| {
                // ureq's message can quote the URL, which may carry the token: the logger masks
                // secrets, and the kind alone decides the answer.
                mark(
                    ProviderError::new(failure_of(&e), format!("the provider call failed: {e}")),
                    *reached,
                )
            })?;
            *reached = true;
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u32>().ok());
            let mut body = Vec::new();
            if let Err(e) = response
                .body_mut()
                .as_reader()
                .take(defaults::PROVIDER_MAX_ANSWER_BYTES)
                .read_to_end(&mut body)
            {
                let timed_out = e.kind() == std::io::ErrorKind::TimedOut
                    || e.get_ref()
                        .and_then(|inner| inner.downcast_ref::<ureq::Error>())
                        .is_some_and(|u| matches!(u, ureq::Error::Timeout(_)));
                let failure = if timed_out {
                    Failure::Timeout
                } else {
                    Failure::BadAnswer
                };
                return Err(ProviderError::new(
                    failure,
                    format!("reading the provider's answer failed: {e}"),
                ));
            }
            match self.spec.interpret(step, status, retry_after, &body)? {
                StepOutcome::Done(found, files) => {
                    vars.extend(found);
                    return Ok(files);
                }
                StepOutcome::Again(progress) => {
                    let interval = step
                        .poll
                        .as_ref()
                        .map_or(Duration::from_secs(1), |p| p.interval);
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left <= interval {
                        // Paid for and under way: kept, so that asking again polls this job.
                        let poll_secs = u32::try_from(interval.as_secs().max(1)).unwrap_or(60);
                        let mut e = ProviderError::new(
                            Failure::InProgress,
                            "the provider was still working when the deadline came (provider.deadline_ms): the job is kept",
                        );
                        e.retry_after = Some(poll_secs);
                        e.job = Some(Box::new(Job::new(index, vars, progress, poll_secs)));
                        return Err(e);
                    }
                    std::thread::sleep(interval);
                }
            }
        }
    }
}

/// A request of either method with a step's query, headers and time limit.
fn prepared<B>(
    req: ureq::RequestBuilder<B>,
    query: &[(String, String)],
    headers: &[(String, String)],
    timeout: Duration,
) -> ureq::RequestBuilder<B> {
    let mut req = req.query_pairs(query.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    for (k, v) in headers {
        req = req.header(k, v);
    }
    req.config().timeout_global(Some(timeout)).build()
}

/// Records whether anything reached the provider before this failure.
fn mark(mut e: ProviderError, reached_before: bool) -> ProviderError {
    e.reached = reached_before || e.failure != Failure::Unreachable;
    e
}

/// How a call that got no answer failed. Only errors that happen before a request can be sent
/// (the name lookup, the connection) are `Unreachable`: nothing reached the provider, so
/// nothing was charged and the spend limits get the call back.
fn failure_of(e: &ureq::Error) -> Failure {
    match e {
        ureq::Error::Timeout(ureq::Timeout::Connect | ureq::Timeout::Resolve) => {
            Failure::Unreachable
        }
        ureq::Error::Timeout(_) => Failure::Timeout,
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => Failure::Unreachable,
        ureq::Error::Io(io) if never_connected(io) => Failure::Unreachable,
        _ => Failure::BadAnswer,
    }
}

/// Text the standard library gives a failed name lookup (getaddrinfo), whose kind has no
/// stable name to match.
const LOOKUP_FAILED: &str = "failed to lookup address information";

/// True for an I/O error of the name lookup or of the connection itself.
fn never_connected(io: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        io.kind(),
        K::ConnectionRefused
            | K::NetworkUnreachable
            | K::HostUnreachable
            | K::NetworkDown
            | K::AddrNotAvailable
    ) || io.to_string().starts_with(LOOKUP_FAILED)
}

impl HttpProvider {
    /// The steps from `first` on, with the values so far; `reached` when a call was made
    /// before (every further call is then counted by `meter`).
    fn run_from(
        &self,
        first: usize,
        mut vars: Vars,
        mut reached: bool,
        meter: &dyn Meter,
    ) -> Result<Resolved, ProviderError> {
        let deadline = Instant::now() + self.spec.deadline;
        let mut files = Vec::new();
        for (index, step) in self.spec.steps.iter().enumerate().skip(first) {
            if index > first && !step.runs(&vars) {
                continue;
            }
            let found = self.run_step((index, step), &mut vars, deadline, &mut reached, meter)?;
            if !found.is_empty() {
                files = found;
            }
        }
        self.spec.finish(&vars, files)
    }
}

impl HttpProvider {
    /// `{base}`, the one value a free call's URL may name.
    fn base_vars(&self) -> Vars {
        let mut vars = Vars::new();
        if let Some(b) = &self.spec.base_url {
            vars.insert("base".into(), b.trim_end_matches('/').to_owned());
        }
        vars
    }
}

impl Provider for HttpProvider {
    fn link_dead(&self, link: &str) -> Option<Result<bool, PrecheckError>> {
        self.check_link(link).map(|r| r.map(|c| c.dead))
    }

    fn check_link(&self, link: &str) -> Option<Result<Checked, PrecheckError>> {
        let check = self.spec.spec().ok()?.link_check.as_ref()?;
        Some((|| {
            let url = check.url.render(&self.base_vars())?;
            // Public: sent without the token.
            let mut response = self
                .agent()
                .post(&url)
                .config()
                .timeout_global(Some(self.spec.timeout))
                .build()
                .send_form([(check.field.as_str(), link)])
                .map_err(|e| PrecheckError::Call(Precheck::LinkCheck, Box::new(e)))?;
            let status = response.status().as_u16();
            let dead = match status {
                s if check.dead_statuses.contains(&s) => true,
                200..=299 => false,
                s => return Err(PrecheckError::Status(Precheck::LinkCheck, s)),
            };
            // The size, when the check gives one: an answer that cannot be read has none.
            let size = check.size.as_deref().filter(|_| !dead).and_then(|pointer| {
                let mut body = Vec::new();
                (response.body_mut().as_reader())
                    .take(defaults::PROVIDER_MAX_ANSWER_BYTES)
                    .read_to_end(&mut body)
                    .ok()?;
                let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
                v.pointer(pointer)?.as_u64().filter(|n| *n > 0)
            });
            Ok(Checked { dead, size })
        })())
    }

    fn host_list(&self) -> Option<Result<Vec<String>, PrecheckError>> {
        let list = self.spec.spec().ok()?.hosts.as_ref()?;
        Some((|| {
            let url = list.url.render(&self.base_vars())?;
            // Public: sent without the token.
            let mut response = self
                .agent()
                .get(&url)
                .config()
                .timeout_global(Some(self.spec.timeout))
                .build()
                .call()
                .map_err(|e| PrecheckError::Call(Precheck::HostList, Box::new(e)))?;
            let status = response.status().as_u16();
            if status != 200 {
                return Err(PrecheckError::Status(Precheck::HostList, status));
            }
            let mut body = Vec::new();
            response
                .body_mut()
                .as_reader()
                .take(defaults::PROVIDER_MAX_ANSWER_BYTES)
                .read_to_end(&mut body)
                .map_err(PrecheckError::Read)?;
            let v: serde_json::Value =
                serde_json::from_slice(&body).map_err(|_| PrecheckError::NotJson)?;
            let domains = list.domains_in(&v);
            if domains.is_empty() {
                return Err(PrecheckError::NoDomain);
            }
            Ok(domains)
        })())
    }

    fn account(&self, now_ms: u64) -> Option<Result<AccountFacts, String>> {
        let spec = self.spec.spec().ok()?;
        let call = spec.account.as_ref()?;
        Some((|| {
            let vars = spec.start_vars("");
            let render = |t: &str| Template(t.to_owned()).render(&vars);
            let url = render(&call.url).map_err(|e| e.to_string())?;
            let headers = call
                .headers
                .iter()
                .map(|(k, t)| render(t).map(|v| (k.clone(), v)))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let mut response = prepared(self.agent().get(&url), &[], &headers, spec.timeout)
                .call()
                .map_err(|e| format!("the account call could not be made: {e}"))?;
            let status = response.status().as_u16();
            if !(200..300).contains(&status) {
                return Err(format!("the account call answered HTTP {status}"));
            }
            let mut body = Vec::new();
            response
                .body_mut()
                .as_reader()
                .take(defaults::PROVIDER_MAX_ANSWER_BYTES)
                .read_to_end(&mut body)
                .map_err(|e| format!("reading the account's answer failed: {e}"))?;
            let v: serde_json::Value = serde_json::from_slice(&body)
                .map_err(|_| "the account's answer is not JSON".to_owned())?;
            if let Some(t) = call.success.as_ref().filter(|t| !t.holds(&v)) {
                return Err(format!(
                    "the account's answer does not hold {} = {}",
                    t.pointer, t.equals
                ));
            }
            call.facts(&v, now_ms)
                .ok_or_else(|| "the account's answer holds none of the facts described".to_owned())
        })())
    }

    fn resolve(&self, link: &str, meter: &dyn Meter) -> Result<Resolved, ProviderError> {
        self.run_from(0, self.built()?.start_vars(link), false, meter)
    }

    fn resume(&self, link: &str, job: &Job, meter: &dyn Meter) -> Result<Resolved, ProviderError> {
        if self
            .built()?
            .steps
            .get(job.step)
            .is_none_or(|s| s.poll.is_none())
        {
            return Err(ProviderError::new(
                Failure::Unavailable,
                "the kept job does not match the provider's steps (the configuration changed)",
            ));
        }
        let mut vars = self.spec.start_vars(link);
        vars.extend(job.vars.clone());
        self.run_from(job.step, vars, true, meter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error as IoError, ErrorKind};

    #[test]
    fn failures_before_any_request_are_unreachable_and_the_rest_are_not() {
        let io = |e: IoError| ureq::Error::Io(e);
        let unreachable = [
            ureq::Error::HostNotFound,
            ureq::Error::ConnectionFailed,
            ureq::Error::Timeout(ureq::Timeout::Resolve),
            ureq::Error::Timeout(ureq::Timeout::Connect),
            io(IoError::from(ErrorKind::ConnectionRefused)),
            io(IoError::from(ErrorKind::NetworkUnreachable)),
            io(IoError::from(ErrorKind::HostUnreachable)),
            // The form a failed lookup takes (std's getaddrinfo error, as ureq passes it on).
            io(IoError::other(
                "failed to lookup address information: Name or service not known",
            )),
            io(IoError::other(
                "failed to lookup address information: Temporary failure in name resolution",
            )),
        ];
        for e in &unreachable {
            assert_eq!(failure_of(e), Failure::Unreachable, "{e}");
        }
        let maybe_sent = [
            io(IoError::from(ErrorKind::ConnectionReset)),
            io(IoError::from(ErrorKind::BrokenPipe)),
            io(IoError::from(ErrorKind::UnexpectedEof)),
            io(IoError::other("the lookup failed later")),
        ];
        for e in &maybe_sent {
            assert_eq!(failure_of(e), Failure::BadAnswer, "{e}");
        }
        assert_eq!(
            failure_of(&ureq::Error::Timeout(ureq::Timeout::Global)),
            Failure::Timeout
        );
    }

    #[test]
    fn a_real_failed_lookup_reads_as_the_text_matched() {
        // The standard library's own error for a name that cannot exist (RFC 6761 `.invalid`):
        // when the machine answers at all, the text is the one `never_connected` looks for.
        use std::net::ToSocketAddrs;
        if let Err(e) = "resolve-test.invalid:443".to_socket_addrs() {
            assert!(never_connected(&e), "{e}");
        }
    }
}
