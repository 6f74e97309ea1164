//! A provider described as data: where to send the link and the token, and where the answer
//! keeps the download URL or the error. Interpreting an answer is pure; the HTTP call is in
//! `provider::http`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::provider::account::AccountCall;
use crate::provider::resolved::{FileLink, Resolved};
use crate::provider::{Failure, MissingValue, ProviderError, clean_text};
use crate::support::secret::Secret;
use crate::support::show;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    Get,
    Post,
}

/// Text with `{link}`, `{token}`, `{base}` and `{NAME}` (a value an earlier step extracted)
/// filled in when a request is made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct Template(pub String);

/// The values a provider call works with: the link, the token and what steps extracted.
pub type Vars = BTreeMap<String, String>;

impl Template {
    /// The names the template uses.
    pub fn names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        let mut rest = self.0.as_str();
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            match after.find('}') {
                Some(close) => {
                    out.push(&after[..close]);
                    rest = &after[close + 1..];
                }
                None => break,
            }
        }
        out
    }

    /// The text with every `{NAME}` replaced; a name with no value is an error.
    pub fn render(&self, vars: &Vars) -> Result<String, MissingValue> {
        let mut out = String::with_capacity(self.0.len());
        let mut rest = self.0.as_str();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let Some(close) = after.find('}') else {
                out.push_str(&rest[open..]);
                return Ok(out);
            };
            let name = &after[..close];
            let value = vars
                .get(name)
                .ok_or_else(|| MissingValue(name.to_owned()))?;
            out.push_str(value);
            rest = &after[close + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// A test on a JSON answer: the value at `pointer` equals `equals`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SuccessTest {
    pub pointer: String,
    pub equals: Value,
}

impl SuccessTest {
    fn holds(&self, v: &Value) -> bool {
        v.pointer(&self.pointer) == Some(&self.equals)
    }
}

/// Ask again until an answer says the work is done.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Poll {
    #[serde(rename = "interval_ms", serialize_with = "show::ms")]
    pub interval: Duration,
    /// Done when this holds.
    pub until: SuccessTest,
    /// Failed when this holds.
    pub fail: Option<SuccessTest>,
    /// Where the answer says how far the work is.
    pub progress: Option<Progress>,
}

/// How far a polled job is: the value at `pointer`, read as `unit`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Progress {
    pub pointer: String,
    pub unit: ProgressUnit,
}

/// What a progress value counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgressUnit {
    /// 0 to 1 of the work done.
    Fraction,
    /// 0 to 100 of the work done.
    Percent,
    /// Seconds of work left.
    SecondsLeft,
}

impl Progress {
    /// The progress in words, e.g. "40% done" or "about 45 s left".
    pub fn words(&self, v: &Value) -> Option<String> {
        let n = match v.pointer(&self.pointer)? {
            Value::Number(n) => n.as_f64()?,
            Value::String(s) => s.trim().parse::<f64>().ok()?,
            _ => return None,
        };
        if !n.is_finite() || n < 0.0 {
            return None;
        }
        Some(match self.unit {
            ProgressUnit::Fraction => format!("{:.0}% done", (n * 100.0).min(100.0)),
            ProgressUnit::Percent => format!("{:.0}% done", n.min(100.0)),
            ProgressUnit::SecondsLeft => format!("about {:.0} s left", n.min(86_400.0)),
        })
    }
}

/// Every file of a multi-file answer: the array at `list`, each element's download URL and
/// name at the pointers `download` and `filename` (relative to the element).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileList {
    pub list: String,
    pub download: String,
    pub filename: Option<String>,
}

/// The best of a list of choices (a streaming answer's qualities): the element of the array at
/// `list` with the greatest number at `by`, whose value at `take` is kept as `name`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Best {
    pub list: String,
    pub by: String,
    pub take: String,
    #[serde(rename = "as")]
    pub name: String,
}

/// One HTTP call of a provider.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Step {
    pub method: HttpMethod,
    pub url: Template,
    #[serde(serialize_with = "show::pairs")]
    pub headers: Vec<(String, Template)>,
    #[serde(serialize_with = "show::pairs")]
    pub query: Vec<(String, Template)>,
    /// Form fields of the body (POST).
    #[serde(serialize_with = "show::pairs")]
    pub form: Vec<(String, Template)>,
    /// Run only when this value was extracted by an earlier step.
    pub when: Option<String>,
    /// Skipped when this value was extracted by an earlier step.
    pub unless: Option<String>,
    /// Beyond a 2xx status, what the answer must hold to count as success.
    pub success: Option<SuccessTest>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// Values to keep: name, then JSON Pointers tried in order (the first found wins).
    #[serde(serialize_with = "show::pairs")]
    pub extract: Vec<(String, Vec<String>)>,
    /// Every file, when the answer holds a list of them.
    pub files: Option<FileList>,
    /// The best of several choices, kept as a value for a later step.
    pub best: Option<Best>,
    pub poll: Option<Poll>,
}

impl Step {
    /// Whether the step runs, given the values extracted so far.
    pub fn runs(&self, vars: &Vars) -> bool {
        self.when.as_ref().is_none_or(|w| vars.contains_key(w))
            && self.unless.as_ref().is_none_or(|u| !vars.contains_key(u))
    }
}

/// The provider's public list of the file hosts it supports: fetched (a free GET, without the
/// token) at most once a day, so that a link on another host is refused before paying.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HostList {
    /// Where the list is (`{base}` filled in).
    pub url: Template,
    /// JSON Pointers to arrays of domain names, joined.
    pub lists: Vec<String>,
}

/// The most domains a host list keeps.
pub const MAX_HOSTS: usize = 5000;

/// A list's pointer segment that stands for every element of the array before it: the
/// domains of a list of hosts, each with its own array (`/value/*/domains`).
pub const EACH: &str = "/*";

/// The strings of the array at `pointer`, where each [`EACH`] segment walks every element of
/// the array before it.
fn strings_at<'v>(v: &'v Value, pointer: &str, out: &mut Vec<&'v str>) {
    match pointer.split_once(EACH) {
        Some((head, rest)) if rest.is_empty() || rest.starts_with('/') => {
            for item in v
                .pointer(head)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                strings_at(item, rest, out);
            }
        }
        _ => out.extend(
            v.pointer(pointer)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str),
        ),
    }
}

impl HostList {
    /// The domains an answer lists: lower case, without a leading `www.`, at most
    /// [`MAX_HOSTS`]; empty when the answer holds none of the lists.
    pub fn domains_in(&self, v: &Value) -> Vec<String> {
        let mut found = Vec::new();
        for p in &self.lists {
            strings_at(v, p, &mut found);
        }
        let mut out: Vec<String> = found
            .into_iter()
            .map(|d| d.trim().trim_end_matches('.').to_ascii_lowercase())
            .map(|d| d.strip_prefix("www.").map(str::to_owned).unwrap_or(d))
            .filter(|d| {
                !d.is_empty()
                    && d.len() <= 253
                    && d.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out.truncate(MAX_HOSTS);
        out
    }
}

/// Whether `host` (a link's host) is one of `domains` (sorted) or under one of them.
pub fn host_listed(host: &str, domains: &[String]) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let mut rest = host.as_str();
    loop {
        if domains.binary_search_by(|d| d.as_str().cmp(rest)).is_ok() {
            return true;
        }
        match rest.split_once('.') {
            Some((_, parent)) if !parent.is_empty() => rest = parent,
            _ => return false,
        }
    }
}

/// A provider's free check of one link (Real-Debrid's `unrestrict/check`): the link posted in a
/// form, without the token; an answer with one of `dead_statuses` says the file cannot be had,
/// and `size` points at its size in bytes. Asked for an admitted link before the paid call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LinkCheck {
    /// Where the check is (`{base}` filled in).
    pub url: Template,
    /// The form field that carries the link.
    pub field: String,
    /// The HTTP statuses of an answer that finds the file dead.
    pub dead_statuses: Vec<u16>,
    pub size: Option<String>,
}

/// A JSON HTTP API described as data: one or more steps. The last values called `download`
/// and `filename` are the answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HttpSpec {
    /// The preset it came from, if any.
    pub preset: Option<String>,
    /// Filled in as `{base}`.
    pub base_url: Option<String>,
    pub token: Option<Secret>,
    pub steps: Vec<Step>,
    /// The provider's error codes, by the class they belong to.
    #[serde(serialize_with = "errors_by_class")]
    pub errors: Vec<(String, Failure)>,
    /// Words (in lower case) that class an error message when no code does: for providers
    /// that report some errors in words only.
    #[serde(serialize_with = "errors_by_class")]
    pub error_messages: Vec<(String, Failure)>,
    /// HTTP statuses that mean a class of their own for this provider (e.g. 503 for "too many
    /// requests"), when no code in the answer says more.
    #[serde(serialize_with = "statuses_by_class")]
    pub statuses: Vec<(u16, Failure)>,
    /// The provider's catch-all codes ("something went wrong"): such a code says less than an
    /// error status, so the status decides, by `statuses` or by what it means in HTTP.
    pub generic_codes: Vec<String>,
    /// What the owner can do, by class: written after `ACTION NEEDED` in the log line.
    #[serde(serialize_with = "show::pairs")]
    pub advice: Vec<(String, String)>,
    /// For each of the provider's `rate_limits`, in order, the steps (from 0) whose calls it
    /// counts; None: every call. Printed with each rate (`"steps"`, from 1), not here.
    #[serde(skip)]
    pub rate_steps: Vec<Option<Vec<usize>>>,
    /// The public list of supported hosts, if the provider has one.
    pub hosts: Option<HostList>,
    /// The free check of one link, if the provider has one.
    pub link_check: Option<LinkCheck>,
    /// Where the owner's account is read, once a day, if the provider says.
    pub account: Option<AccountCall>,
    #[serde(rename = "connect_timeout_ms", serialize_with = "show::ms")]
    pub connect_timeout: Duration,
    /// Time for each call.
    #[serde(rename = "timeout_ms", serialize_with = "show::ms")]
    pub timeout: Duration,
    /// Time for all the calls of one resolution, polling included.
    #[serde(rename = "deadline_ms", serialize_with = "show::ms")]
    pub deadline: Duration,
}

/// The provider's error codes grouped by class, as the configuration's `errors` map writes them.
fn errors_by_class<S: serde::Serializer>(
    errors: &[(String, Failure)],
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut by_class: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (code, f) in errors {
        by_class.entry(f.name()).or_default().push(code);
    }
    serde::Serialize::serialize(&by_class, s)
}

/// The statuses with a class of their own, grouped by class.
fn statuses_by_class<S: serde::Serializer>(
    statuses: &[(u16, Failure)],
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut by_class: BTreeMap<&str, Vec<u16>> = BTreeMap::new();
    for (status, f) in statuses {
        by_class.entry(f.name()).or_default().push(*status);
    }
    serde::Serialize::serialize(&by_class, s)
}

/// The detail of a job the provider reports failed: paid for, and given back.
pub const WORK_FAILED: &str = "the provider reported that the work failed";

/// What one answer to a step means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    /// Done: these values (and, for a multi-file answer, these files) were extracted.
    Done(Vars, Vec<FileLink>),
    /// A polling step's work is not finished: ask again after the interval. The progress, in
    /// words, when the answer says it.
    Again(Option<String>),
}

impl HttpSpec {
    /// The values a resolution starts with.
    pub fn start_vars(&self, link: &str) -> Vars {
        let mut vars = Vars::new();
        vars.insert("link".into(), link.to_owned());
        if let Some(t) = &self.token {
            vars.insert("token".into(), t.expose().to_owned());
        }
        if let Some(b) = &self.base_url {
            vars.insert("base".into(), b.trim_end_matches('/').to_owned());
        }
        vars
    }

    /// The class of an error: by its code, else by words of its message.
    fn classify(&self, code: Option<&str>, message: Option<&str>) -> Option<Failure> {
        let by_code =
            code.and_then(|code| self.errors.iter().find(|(c, _)| c == code).map(|(_, f)| *f));
        by_code.or_else(|| {
            let message = message?.to_lowercase();
            self.error_messages
                .iter()
                .find(|(words, _)| message.contains(words.as_str()))
                .map(|(_, f)| *f)
        })
    }

    /// Whether the provider's `rate`-th rate limit counts the calls of step `step`.
    pub fn rate_counts(&self, rate: usize, step: usize) -> bool {
        self.rate_steps
            .get(rate)
            .is_none_or(|s| s.as_ref().is_none_or(|steps| steps.contains(&step)))
    }

    /// The owner's advice for a class, if the description gives one.
    pub fn advice_for(&self, failure: Failure) -> Option<&str> {
        self.advice
            .iter()
            .find(|(class, _)| class == failure.name())
            .map(|(_, text)| text.as_str())
    }

    /// The class an HTTP status stands for, for this provider.
    fn status_class(&self, status: u16) -> Option<Failure> {
        self.statuses
            .iter()
            .find(|(s, _)| *s == status)
            .map(|(_, f)| *f)
    }

    /// Reads one step's answer: status, the Retry-After it carried, and the body.
    pub fn interpret(
        &self,
        step: &Step,
        status: u16,
        retry_after: Option<u32>,
        body: &[u8],
    ) -> Result<StepOutcome, ProviderError> {
        let json: Option<Value> = serde_json::from_slice(body).ok();
        let error = |failure: Failure, detail: &str| {
            let v = json.as_ref();
            let code = v.and_then(|v| text_at(v, step.error_code.as_deref()));
            let message = v.and_then(|v| text_at(v, step.error_message.as_deref()));
            // A known error code (or message) says more than the HTTP status (a 503 may well
            // carry "host unavailable", a 403 "quota used up"); the provider's own meaning of a
            // status comes next. A catch-all code says less than an error status: there the
            // status decides (AllDebrid's 503 with GENERIC is "too many requests").
            let by_status = self.status_class(status).filter(|_| status >= 400);
            let catch_all = status >= 400
                && code
                    .as_deref()
                    .is_some_and(|c| self.generic_codes.iter().any(|g| g == c));
            let classified = match failure {
                Failure::BadAnswer | Failure::Timeout => None,
                _ if catch_all => by_status,
                _ => self
                    .classify(code.as_deref(), message.as_deref())
                    .or(by_status),
            };
            let detail = match classified {
                Some(c) if c != failure => format!("the provider reported {}", c.name()),
                _ => detail.to_owned(),
            };
            let failure = classified.unwrap_or(failure);
            ProviderError {
                failure,
                reached: true,
                status: Some(status),
                code,
                message,
                retry_after,
                detail,
                advice: self.advice_for(failure).map(str::to_owned),
                job: None,
                job_failed: false,
            }
        };
        match status {
            200..=299 => {}
            401 | 403 => {
                return Err(error(
                    Failure::Auth,
                    "the provider refused the site's credentials",
                ));
            }
            429 => {
                return Err(error(
                    Failure::RateLimited,
                    "the provider asks the site to slow down",
                ));
            }
            300..=399 => {
                return Err(error(
                    Failure::BadAnswer,
                    "the provider answered with a redirect",
                ));
            }
            400..=499 => return Err(error(Failure::Rejected, "the provider refused the link")),
            _ => {
                return Err(error(
                    Failure::Unavailable,
                    "the provider had a server error",
                ));
            }
        }
        let Some(v) = json.as_ref() else {
            return Err(error(
                Failure::BadAnswer,
                "the provider's answer is not JSON",
            ));
        };
        if let Some(test) = &step.success
            && !test.holds(v)
        {
            return Err(error(Failure::Rejected, "the provider reported an error"));
        }
        if let Some(poll) = &step.poll {
            if poll.fail.as_ref().is_some_and(|f| f.holds(v)) {
                // Unless the answer names another class (then it is that failure).
                let mut e = error(Failure::Rejected, WORK_FAILED);
                e.job_failed = e.failure == Failure::Rejected;
                return Err(e);
            }
            if !poll.until.holds(v) {
                return Ok(StepOutcome::Again(
                    poll.progress.as_ref().and_then(|p| p.words(v)),
                ));
            }
        }
        let mut vars = Vars::new();
        for (name, pointers) in &step.extract {
            if let Some(text) = pointers.iter().find_map(|p| value_at(v, p)) {
                vars.insert(name.clone(), text);
            }
        }
        if let Some(best) = &step.best
            && let Some(choice) = best_of(v, best)
        {
            vars.insert(best.name.clone(), choice);
        }
        let files = step.files.as_ref().map_or(Vec::new(), |f| files_in(v, f));
        Ok(StepOutcome::Done(vars, files))
    }

    /// The answer, once every step ran: the download value or the files of a list, and `filesize`.
    pub fn finish(&self, vars: &Vars, files: Vec<FileLink>) -> Result<Resolved, ProviderError> {
        let size = crate::provider::resolved::size_from(vars.get("filesize"));
        if vars.get("download").is_none()
            && let Some(first) = files.first()
        {
            return Ok(Resolved {
                size,
                download: first.download.clone(),
                filename: first.filename.clone(),
                files: if files.len() > 1 { files } else { Vec::new() },
            });
        }
        match vars.get("download") {
            Some(url) if crate::net::url::is_web_url(url) => Ok(Resolved {
                size,
                download: url.clone(),
                filename: vars.get("filename").cloned(),
                files: if files.len() > 1 { files } else { Vec::new() },
            }),
            Some(_) => Err(ProviderError::new(
                Failure::BadAnswer,
                "the download value is not an http(s) URL",
            )),
            None => Err(ProviderError::new(
                Failure::Rejected,
                "the answer has no download URL (and no error the description knows)",
            )),
        }
    }
}

/// The most files one answer may give.
const MAX_FILES: usize = 200;

/// The files of a list answer: each element with an http(s) download URL, in order.
fn files_in(v: &Value, list: &FileList) -> Vec<FileLink> {
    let Some(Value::Array(items)) = v.pointer(&list.list) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| {
            let download =
                value_at(item, &list.download).filter(|d| crate::net::url::is_web_url(d))?;
            let filename = list
                .filename
                .as_deref()
                .and_then(|p| text_at(item, Some(p)));
            Some(FileLink { download, filename })
        })
        .take(MAX_FILES)
        .collect()
}

/// The value at `take` of the element with the greatest number at `by` (a number, or text that
/// reads as one, such as a quality "1080"); the first element when none has a number.
fn best_of(v: &Value, best: &Best) -> Option<String> {
    let Some(Value::Array(items)) = v.pointer(&best.list) else {
        return None;
    };
    let rank = |item: &Value| match item.pointer(&best.by) {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().trim_end_matches('p').parse::<f64>().ok(),
        _ => None,
    };
    let mut chosen: Option<(&Value, Option<f64>)> = None;
    for item in items {
        let r = rank(item);
        let better = match chosen {
            None => true,
            Some((_, best_rank)) => r.is_some_and(|r| best_rank.is_none_or(|b| r > b)),
        };
        if better {
            chosen = Some((item, r));
        }
    }
    value_at(chosen?.0, &best.take)
}

/// The value at `pointer` as text: a string, number or boolean (not an object or array).
fn value_at(v: &Value, pointer: &str) -> Option<String> {
    let text = match v.pointer(pointer)? {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => return None,
    };
    (!text.is_empty() && text.len() <= 8192).then_some(text)
}

/// The value at `pointer`, cleaned for a message or a log.
fn text_at(v: &Value, pointer: Option<&str>) -> Option<String> {
    let cleaned = clean_text(&value_at(v, pointer?)?);
    (!cleaned.is_empty()).then_some(cleaned)
}

#[cfg(test)]
mod tests;
