//! The `provider` section of the configuration: a preset, a list of steps, or the one-call
//! shorthand, checked into a `ProviderSpec` plus the site-wide rules that protect the
//! provider account (its published request rate).

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::config::error::ConfigError;
use crate::core::rule::{Algorithm, KeyKind, Rule, RuleName};
use crate::defaults;
use crate::provider::Failure;
use crate::provider::presets;
use crate::provider::spec::{
    HttpMethod, HttpSpec, Poll, ProviderSpec, Step, SuccessTest, Template,
};
use crate::secret::Secret;

fn err(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.into(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    kind: Option<String>,
    /// Read before merging; kept so that the field is known.
    #[serde(rename = "preset")]
    _preset: Option<String>,
    base_url: Option<String>,
    token: Option<String>,
    steps: Option<Vec<RawStep>>,
    errors: Option<BTreeMap<String, Vec<Value>>>,
    rate_limits: Option<Vec<RawSiteRule>>,
    connect_timeout_ms: Option<u64>,
    timeout_ms: Option<u64>,
    deadline_ms: Option<u64>,
    // The one-call shorthand.
    url: Option<String>,
    method: Option<String>,
    auth: Option<RawPlace>,
    link: Option<RawPlace>,
    download: Option<String>,
    filename: Option<String>,
    success: Option<RawTest>,
    error_message: Option<String>,
    error_code: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlace {
    header: Option<String>,
    prefix: Option<String>,
    query: Option<String>,
    form: Option<String>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct RawTest {
    pointer: String,
    equals: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPoll {
    interval_ms: u64,
    until: RawTest,
    fail: Option<RawTest>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    method: Option<String>,
    url: String,
    headers: Option<BTreeMap<String, String>>,
    query: Option<BTreeMap<String, String>>,
    form: Option<BTreeMap<String, String>>,
    when: Option<String>,
    success: Option<RawTest>,
    error_code: Option<String>,
    error_message: Option<String>,
    extract: Option<BTreeMap<String, Value>>,
    poll: Option<RawPoll>,
}

/// A site-wide limit on calls to the provider.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSiteRule {
    name: String,
    limit: u64,
    window_secs: u64,
}

/// Parses site-wide rules (`spend`, `rate_limits`): they count paid calls for the whole site.
pub fn site_rules(list: &[RawSiteRule], field: &str) -> Result<Vec<Rule>, ConfigError> {
    let mut out: Vec<Rule> = Vec::new();
    for (i, r) in list.iter().enumerate() {
        let at = |f: &str| format!("{field}[{i}].{f}");
        let name = RuleName::new(&r.name).ok_or_else(|| {
            err(
                at("name"),
                "must be 1 to 32 of a-z, 0-9, '_' and '-', e.g. \"day\"",
            )
        })?;
        let limit = u32::try_from(r.limit)
            .ok()
            .and_then(NonZeroU32::new)
            .ok_or_else(|| err(at("limit"), "must be 1 to 4294967295 paid calls per window"))?;
        let window_secs = u32::try_from(r.window_secs)
            .ok()
            .filter(|w| *w <= 366 * 24 * 3600)
            .and_then(NonZeroU32::new)
            .ok_or_else(|| err(at("window_secs"), "must be 1 to 31622400 seconds"))?;
        out.push(Rule {
            name,
            key: KeyKind::Global,
            algorithm: Algorithm::Fixed,
            limit,
            window_secs,
        });
    }
    Ok(out)
}

/// Raw `spend` list of the configuration.
pub fn raw_site_rules(v: Value, field: &str) -> Result<Vec<RawSiteRule>, ConfigError> {
    serde_json::from_value(v).map_err(|e| {
        let e = crate::config::redact::without_quoted_value(&e.to_string());
        err(
            field,
            format!("{e}; write [{{\"name\": \"day\", \"limit\": 500, \"window_secs\": 86400}}]"),
        )
    })
}

fn is_header_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Checks the start of a provider URL (or a base URL): https, or plain http to this machine,
/// where it cannot be overheard; no user name or password; no fragment.
fn check_url(field: &str, url: &str) -> Result<(), ConfigError> {
    let parsed = crate::http::url::parse(url, &["https", "http"])
        .map_err(|e| err(field, format!("{url:?} is not an https:// URL: {e}")))?;
    if parsed.has_credentials() {
        return Err(err(
            field,
            "must not hold a user name or password before the host: the token goes in \"token\" (and a header or form field that uses {token})",
        ));
    }
    if parsed.has_fragment() {
        return Err(err(field, format!("{url:?} must not hold a #fragment")));
    }
    if parsed.scheme() == "http" && !(parsed.is_on_this_machine() && written_plainly(url, &parsed))
    {
        return Err(err(
            field,
            "use https:// (plain http would send the token unencrypted; it is accepted only for a provider on this machine: localhost, 127.0.0.1 or [::1])",
        ));
    }
    Ok(())
}

/// A step's URL template: `{base}` (checked as `base_url`) followed by a path or query, or a
/// URL whose scheme and host are written out before any placeholder. A placeholder never
/// reaches the host: `{base}@evil.example` or `http://localhost{x}` could name another one.
fn check_step_url(field: &str, template: &str) -> Result<(), ConfigError> {
    if let Some(rest) = template.strip_prefix("{base}") {
        if rest.is_empty() || rest.starts_with(['/', '?']) {
            return Ok(());
        }
        return Err(err(
            field,
            "after {base} comes the path, starting with '/' (e.g. \"{base}/unrestrict/link\")",
        ));
    }
    let written = template.split('{').next().unwrap_or_default();
    check_url(field, written)?;
    let authority_ends = written
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains(['/', '?']));
    if written.len() < template.len() && !authority_ends {
        return Err(err(
            field,
            "write the host out in full before any {placeholder}, followed by '/' (e.g. \"https://api.example.com/{name}\")",
        ));
    }
    Ok(())
}

/// True when the URL starts with its host as the parser reads it, so that any other program
/// reading the text (the HTTP client among them) finds the same host: `http://127.0.0.1/`,
/// not `http://0x7f.1/` or `http://%6cocalhost/`.
fn written_plainly(text: &str, parsed: &crate::http::url::Url) -> bool {
    let origin = parsed.origin();
    text.get(..origin.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(&origin))
        && matches!(
            text.as_bytes().get(origin.len()),
            None | Some(b'/' | b'?' | b':')
        )
}

fn method(field: &str, m: Option<&str>) -> Result<HttpMethod, ConfigError> {
    match m.unwrap_or("POST") {
        m if m.eq_ignore_ascii_case("POST") => Ok(HttpMethod::Post),
        m if m.eq_ignore_ascii_case("GET") => Ok(HttpMethod::Get),
        m => Err(err(field, format!("{m:?}: use \"POST\" or \"GET\""))),
    }
}

fn is_pointer(s: &str) -> bool {
    s.is_empty() || s.starts_with('/')
}

fn pointer(field: &str, p: Option<String>) -> Result<Option<String>, ConfigError> {
    match p {
        Some(p) if !is_pointer(&p) => Err(err(
            field,
            format!("{p:?} is not a JSON Pointer: write it like \"/data/link\""),
        )),
        other => Ok(other),
    }
}

fn test(field: &str, t: Option<RawTest>) -> Result<Option<SuccessTest>, ConfigError> {
    match t {
        None => Ok(None),
        Some(t) => {
            pointer(&format!("{field}.pointer"), Some(t.pointer.clone()))?;
            Ok(Some(SuccessTest {
                pointer: t.pointer,
                equals: t.equals,
            }))
        }
    }
}

/// Turns the one-call shorthand into a step.
fn shorthand(raw: &mut RawProvider) -> Result<RawStep, ConfigError> {
    let url = raw.url.take().ok_or_else(|| {
        err(
            "provider.url",
            "missing: the provider's API endpoint, e.g. \"https://api.real-debrid.com/rest/1.0/unrestrict/link\" (or use \"preset\")",
        )
    })?;
    check_url("provider.url", &url)?;
    let m = method("provider.method", raw.method.as_deref())?;
    let mut headers = BTreeMap::new();
    let mut query = BTreeMap::new();
    let mut form = BTreeMap::new();
    let mut put = |place: RawPlace, field: &str, value: &str| -> Result<(), ConfigError> {
        let chosen = [
            place.header.is_some(),
            place.query.is_some(),
            place.form.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if chosen != 1 {
            return Err(err(
                field,
                "name exactly one of \"header\", \"query\" or \"form\", e.g. {\"form\": \"link\"}",
            ));
        }
        if place.prefix.is_some() && place.header.is_none() {
            return Err(err(format!("{field}.prefix"), "only goes with \"header\""));
        }
        if let Some(h) = place.header {
            if !is_header_name(&h) {
                return Err(err(
                    format!("{field}.header"),
                    "must be a header name of letters, digits and '-', e.g. \"Authorization\"",
                ));
            }
            headers.insert(h, format!("{}{value}", place.prefix.unwrap_or_default()));
        } else if let Some(q) = place.query {
            query.insert(q, value.to_owned());
        } else if let Some(f) = place.form {
            if m == HttpMethod::Get {
                return Err(err(
                    format!("{field}.form"),
                    "a GET request has no form body: use {\"query\": ...} or set \"method\": \"POST\"",
                ));
            }
            form.insert(f, value.to_owned());
        }
        Ok(())
    };
    match (raw.auth.take(), raw.token.is_some()) {
        (Some(a), true) => put(a, "provider.auth", "{token}")?,
        (Some(_), false) => {
            return Err(err(
                "provider.token",
                "missing: \"auth\" says where the token goes, so put the provider's API token in \"token\"",
            ));
        }
        (None, true) => put(
            RawPlace {
                header: Some("Authorization".into()),
                prefix: Some("Bearer ".into()),
                query: None,
                form: None,
            },
            "provider.auth",
            "{token}",
        )?,
        (None, false) => {}
    }
    let link = raw.link.take().unwrap_or(RawPlace {
        header: None,
        prefix: None,
        query: (m == HttpMethod::Get).then(|| "link".to_owned()),
        form: (m == HttpMethod::Post).then(|| "link".to_owned()),
    });
    if link.header.is_some() {
        return Err(err(
            "provider.link",
            "the link goes in a \"form\" field or the \"query\", not a header",
        ));
    }
    put(link, "provider.link", "{link}")?;
    let download = raw.download.take().ok_or_else(|| {
        err(
            "provider.download",
            "missing: the JSON Pointer to the download URL in the answer, e.g. \"/download\"",
        )
    })?;
    pointer("provider.download", Some(download.clone()))?;
    let mut extract = BTreeMap::new();
    extract.insert("download".to_owned(), Value::String(download));
    if let Some(f) = raw.filename.take() {
        pointer("provider.filename", Some(f.clone()))?;
        extract.insert("filename".to_owned(), Value::String(f));
    }
    Ok(RawStep {
        method: raw.method.take(),
        url,
        headers: Some(headers),
        query: Some(query),
        form: Some(form),
        when: None,
        success: raw.success.take(),
        error_code: raw.error_code.take(),
        error_message: raw.error_message.take(),
        extract: Some(extract),
        poll: None,
    })
}

fn templates(
    field: &str,
    map: Option<BTreeMap<String, String>>,
    known: &[String],
    headers: bool,
) -> Result<Vec<(String, Template)>, ConfigError> {
    let mut out = Vec::new();
    for (name, value) in map.unwrap_or_default() {
        if headers && !is_header_name(&name) {
            return Err(err(
                format!("{field}.{name}"),
                "is not a header name (letters, digits and '-')",
            ));
        }
        if value.chars().any(|c| c.is_control()) {
            return Err(err(
                format!("{field}.{name}"),
                "cannot contain control characters",
            ));
        }
        let t = Template(value);
        check_names(&format!("{field}.{name}"), &t, known)?;
        out.push((name, t));
    }
    Ok(out)
}

fn check_names(field: &str, t: &Template, known: &[String]) -> Result<(), ConfigError> {
    for name in t.names() {
        if !known.iter().any(|k| k == name) {
            return Err(err(
                field,
                format!(
                    "uses {{{name}}}, which nothing provides: use {{link}}, {{token}}, {{base}} or a value an earlier step extracts"
                ),
            ));
        }
    }
    Ok(())
}

/// Parses the `provider` section. Returns the provider and its site-wide rate rules.
pub fn parse(section: Value) -> Result<(ProviderSpec, Vec<Rule>), ConfigError> {
    let Value::Object(user) = section else {
        return Err(err(
            "provider",
            "must be an object, e.g. {\"preset\": \"realdebrid\", \"token\": \"...\"}",
        ));
    };
    if user.get("kind").and_then(Value::as_str) == Some("echo") {
        if user.len() > 1 {
            return Err(err("provider", "the echo provider takes no other fields"));
        }
        return Ok((ProviderSpec::Echo, Vec::new()));
    }
    let (preset, merged) = with_preset(user)?;
    let secrets = crate::config::redact::secret_values(&merged);
    let mut raw: RawProvider = serde_json::from_value(merged).map_err(|e| {
        // serde quotes the offending value, which may be a secret in the wrong place: the value
        // is cut out, and the secrets are masked in every form as well.
        let message = crate::config::redact::without_quoted_value(&e.to_string());
        let message = crate::secret::mask(&message, &crate::secret::all_forms(&secrets));
        err("provider", format!("{message} (see README: Providers)"))
    })?;
    check_kind(raw.kind.as_deref(), preset.is_some())?;
    let shorthand_used =
        raw.url.is_some() || raw.download.is_some() || raw.auth.is_some() || raw.link.is_some();
    let raw_steps = match raw.steps.take() {
        Some(_) if shorthand_used && preset.is_none() => {
            return Err(err(
                "provider.steps",
                "give either \"steps\" or the one-call fields (url, download, ...), not both",
            ));
        }
        Some(steps) => steps,
        None => vec![shorthand(&mut raw)?],
    };
    if raw_steps.is_empty() || raw_steps.len() > 5 {
        return Err(err("provider.steps", "must hold 1 to 5 steps"));
    }
    if let Some(b) = &raw.base_url {
        check_url("provider.base_url", b)?;
    }
    if raw.token.as_deref() == Some("") {
        return Err(err(
            "provider.token",
            "is empty: put the provider's API token here",
        ));
    }
    let mut known: Vec<String> = vec!["link".into()];
    if raw.token.is_some() {
        known.push("token".into());
    }
    if raw.base_url.is_some() {
        known.push("base".into());
    }
    let mut steps = steps(raw_steps, &mut known)?;
    if !known.iter().any(|k| k == "download") {
        return Err(err(
            "provider.steps",
            "no step extracts \"download\": name the JSON Pointer of the download URL",
        ));
    }
    if let Some(token) = &raw.token {
        token_by_name(&mut steps, token);
    }
    let errors = errors(raw.errors.take())?;
    let (connect_ms, timeout_ms, deadline_ms) = timeouts(&raw)?;
    let rate_rules = site_rules(
        raw.rate_limits.as_deref().unwrap_or_default(),
        "provider.rate_limits",
    )?;
    Ok((
        ProviderSpec::Http(Box::new(HttpSpec {
            preset,
            base_url: raw.base_url,
            token: raw.token.map(Secret::new),
            steps,
            errors,
            connect_timeout: Duration::from_millis(connect_ms),
            timeout: Duration::from_millis(timeout_ms),
            deadline: Duration::from_millis(deadline_ms),
        })),
        rate_rules,
    ))
}

/// The preset named in the section (if any) as the base, the owner's fields over it.
fn with_preset(user: Map<String, Value>) -> Result<(Option<String>, Value), ConfigError> {
    // A preset is the base; the owner's fields replace its fields.
    let preset = match user.get("preset") {
        None => None,
        Some(Value::String(name)) => Some(name.clone()),
        Some(_) => return Err(err("provider.preset", "must be a preset name")),
    };
    let mut merged: Map<String, Value> = match &preset {
        None => Map::new(),
        Some(name) => {
            let text = presets::description(name).ok_or_else(|| {
                err(
                    "provider.preset",
                    format!(
                        "{name:?} is not a preset: use one of {}",
                        presets::NAMES.join(", ")
                    ),
                )
            })?;
            match serde_json::from_str(text) {
                Ok(Value::Object(m)) => m,
                _ => return Err(err("provider.preset", "the preset's description is broken")),
            }
        }
    };
    for (k, v) in user {
        merged.insert(k, v);
    }
    Ok((preset, Value::Object(merged)))
}

/// `kind`: "http", or nothing beside a preset ("echo" was handled before).
fn check_kind(kind: Option<&str>, has_preset: bool) -> Result<(), ConfigError> {
    match kind {
        None if has_preset => Ok(()),
        Some("http") => Ok(()),
        None => Err(err(
            "provider.kind",
            "missing: use \"preset\" (realdebrid, alldebrid, premiumize, debridlink, torbox), \"kind\": \"http\" for another JSON API, or \"kind\": \"echo\" to try the site",
        )),
        Some(other) => Err(err(
            "provider.kind",
            format!(
                "{other:?} is not a provider kind: use \"http\" for a JSON API or \"echo\" to try the site without spending anything"
            ),
        )),
    }
}

/// The steps, checked in order: each may use the values `known` before it, and adds what it
/// extracts to them.
fn steps(raw_steps: Vec<RawStep>, known: &mut Vec<String>) -> Result<Vec<Step>, ConfigError> {
    let mut steps = Vec::new();
    for (i, s) in raw_steps.into_iter().enumerate() {
        let at = |f: &str| format!("provider.steps[{i}].{f}");
        let m = method(&at("method"), s.method.as_deref())?;
        let url = Template(s.url);
        check_names(&at("url"), &url, known)?;
        check_step_url(&at("url"), &url.0)?;
        if m == HttpMethod::Get && s.form.as_ref().is_some_and(|f| !f.is_empty()) {
            return Err(err(
                at("form"),
                "a GET request has no form body: use \"query\"",
            ));
        }
        if let Some(w) = &s.when
            && !known.contains(w)
        {
            return Err(err(
                at("when"),
                format!("{w:?} is not extracted by an earlier step"),
            ));
        }
        let headers = templates(&at("headers"), s.headers, known, true)?;
        let query = templates(&at("query"), s.query, known, false)?;
        let form = templates(&at("form"), s.form, known, false)?;
        let mut extract = Vec::new();
        for (name, v) in s.extract.unwrap_or_default() {
            let pointers: Vec<String> = match v {
                Value::String(p) => vec![p],
                Value::Array(list) => list
                    .into_iter()
                    .filter_map(|p| p.as_str().map(str::to_owned))
                    .collect(),
                _ => Vec::new(),
            };
            if pointers.is_empty() || !pointers.iter().all(|p| is_pointer(p)) {
                return Err(err(
                    at(&format!("extract.{name}")),
                    "must be a JSON Pointer like \"/data/link\", or a list of them",
                ));
            }
            if RuleName::new(&name).is_none() {
                return Err(err(
                    at("extract"),
                    format!("{name:?}: names are a-z, 0-9, '_' and '-'"),
                ));
            }
            known.push(name.clone());
            extract.push((name, pointers));
        }
        let poll = match s.poll {
            None => None,
            Some(p) => {
                if !(100..=60_000).contains(&p.interval_ms) {
                    return Err(err(at("poll.interval_ms"), "must be 100 to 60000"));
                }
                Some(Poll {
                    interval: Duration::from_millis(p.interval_ms),
                    until: test(&at("poll.until"), Some(p.until))?.expect("given"),
                    fail: test(&at("poll.fail"), p.fail)?,
                })
            }
        };
        steps.push(Step {
            method: m,
            url,
            headers,
            query,
            form,
            when: s.when,
            success: test(&at("success"), s.success)?,
            error_code: pointer(&at("error_code"), s.error_code)?,
            error_message: pointer(&at("error_message"), s.error_message)?,
            extract,
            poll,
        });
    }
    Ok(steps)
}

/// A token written into a template by hand, instead of as `{token}`, becomes `{token}`: the
/// request sent is the same (templates are filled in as they are, nothing encoded), and the
/// token then lives only in the `Secret`, which is never shown.
fn token_by_name(steps: &mut [Step], token: &str) {
    // A token that could be read as part of a placeholder is left as written.
    if token.is_empty() || token.contains(['{', '}']) {
        return;
    }
    for step in steps {
        let templates = std::iter::once(&mut step.url).chain(
            step.headers
                .iter_mut()
                .chain(step.query.iter_mut())
                .chain(step.form.iter_mut())
                .map(|(_, t)| t),
        );
        for t in templates {
            t.0 = named_in_text(&t.0, token);
        }
    }
}

/// `template` with `token` replaced by `{token}` in its text, placeholders left as they are.
fn named_in_text(template: &str, token: &str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    loop {
        let (text, placeholder) = match rest.find('{') {
            Some(open) => match rest[open..].find('}') {
                Some(close) => (&rest[..open], &rest[open..=open + close]),
                None => (rest, ""),
            },
            None => (rest, ""),
        };
        out.push_str(&text.replace(token, "{token}"));
        out.push_str(placeholder);
        rest = &rest[text.len() + placeholder.len()..];
        if rest.is_empty() {
            return out;
        }
    }
}

/// The `errors` map: class name to the provider's codes in that class.
fn errors(
    raw: Option<BTreeMap<String, Vec<Value>>>,
) -> Result<Vec<(String, Failure)>, ConfigError> {
    let mut errors = Vec::new();
    for (class, codes) in raw.unwrap_or_default() {
        let failure = Failure::CLASSES
            .iter()
            .find(|(n, _)| *n == class)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                let names: Vec<&str> = Failure::CLASSES.iter().map(|(n, _)| *n).collect();
                err(
                    format!("provider.errors.{class}"),
                    format!("is not an error class: use {}", names.join(", ")),
                )
            })?;
        for code in codes {
            let code = match code {
                Value::String(s) => s,
                Value::Number(n) => n.to_string(),
                _ => {
                    return Err(err(
                        format!("provider.errors.{class}"),
                        "codes are strings or numbers",
                    ));
                }
            };
            errors.push((code, failure));
        }
    }
    Ok(errors)
}

/// Connect, per-call and whole-resolution time limits, in milliseconds.
fn timeouts(raw: &RawProvider) -> Result<(u64, u64, u64), ConfigError> {
    let connect_ms = raw
        .connect_timeout_ms
        .unwrap_or(defaults::PROVIDER_CONNECT_TIMEOUT_MS);
    let timeout_ms = raw.timeout_ms.unwrap_or(defaults::PROVIDER_TIMEOUT_MS);
    let deadline_ms = raw
        .deadline_ms
        .unwrap_or(defaults::PROVIDER_DEADLINE_MS.max(timeout_ms));
    if !(1..=30_000).contains(&connect_ms) {
        return Err(err(
            "provider.connect_timeout_ms",
            "must be 1 to 30000 (milliseconds)",
        ));
    }
    if !(1..=55_000).contains(&timeout_ms) || timeout_ms < connect_ms {
        return Err(err(
            "provider.timeout_ms",
            "must be 1 to 55000 (milliseconds), at least connect_timeout_ms, and under Apache's 60 s Timeout",
        ));
    }
    if !(timeout_ms..=55_000).contains(&deadline_ms) {
        return Err(err(
            "provider.deadline_ms",
            "must be at least timeout_ms and at most 55000 (all the calls of one link, polling included, under Apache's 60 s Timeout)",
        ));
    }
    Ok((connect_ms, timeout_ms, deadline_ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::spec::Vars;

    fn http(section: &str) -> HttpSpec {
        match parse(serde_json::from_str(section).unwrap()).unwrap().0 {
            ProviderSpec::Http(h) => *h,
            ProviderSpec::Echo => panic!("echo"),
        }
    }

    #[test]
    fn a_token_written_by_hand_is_held_only_as_the_secret() {
        let h = http(
            r#"{"kind": "http", "token": "k-55aa", "steps": [{"url": "https://api.example/u?k=k-55aa",
                "headers": {"Authorization": "Bearer k-55aa"}, "form": {"link": "{link}"},
                "extract": {"download": "/d"}}]}"#,
        );
        let step = &h.steps[0];
        assert_eq!(step.url.0, "https://api.example/u?k={token}");
        assert_eq!(step.headers[0].1.0, "Bearer {token}");
        let vars: Vars = [("token", "k-55aa"), ("link", "L")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into();
        assert_eq!(
            step.headers[0].1.render(&vars).unwrap(),
            "Bearer k-55aa",
            "the request sent is unchanged"
        );
        let shown = serde_json::to_string(&h).unwrap();
        assert!(!shown.contains("k-55aa"), "{shown}");
    }

    #[test]
    fn placeholders_are_never_rewritten() {
        assert_eq!(named_in_text("{link}link{x", "link"), "{link}{token}{x");
        assert_eq!(named_in_text("a{link}b", "in"), "a{link}b");
        assert_eq!(named_in_text("", "t"), "");
    }

    fn one_call(url: &str) -> Result<(ProviderSpec, Vec<Rule>), ConfigError> {
        let section = serde_json::json!({"kind": "http", "url": url, "token": "t0k3n-a1b2c3", "download": "/d"});
        parse(section)
    }

    #[test]
    fn plain_http_only_to_a_host_that_is_this_machine_as_parsed() {
        for url in [
            "http://localhost/x",
            "http://localhost:9000/x",
            "http://127.0.0.1:9000/x",
            "http://[::1]:80/x",
            "HTTP://LOCALHOST/x",
            "http://127.0.0.1",
        ] {
            assert!(one_call(url).is_ok(), "{url}: {:?}", one_call(url).err());
        }
        for url in [
            // The host is what follows the last '@': these name evil.example.
            "http://localhost:80@evil.example/unlock",
            "http://[::1]@evil.example/x",
            "http://127.0.0.1@evil.example/x",
            "http://localhost@evil.example/x",
            "http://localhost:@evil.example/x",
            "http://u:p@localhost@evil.example/x",
            "http://localhost%40@evil.example/x",
            "http://localhost%3A80@evil.example/x",
            "http://[::1]%40@evil.example/x",
            // Other hosts that look like this machine.
            "http://localhost.evil.example/x",
            "http://localhost./x",
            "http://127.0.0.1.nip.io/x",
            "http://evil.example/localhost",
            "http://evil.example?@localhost/",
            "http://evil.example#@localhost/",
            "http://evil.example\\@localhost/",
            "http://[::ffff:127.0.0.1]/x",
            "http://0.0.0.0/x",
            // This machine spelled so that another parser could read another host.
            "http://0x7f.1/x",
            "http://2130706433/x",
            "http://%6c%6fcalhost/x",
            "http://127.1/x",
            // User names and passwords have no place here, even on this machine.
            "http://user@localhost/x",
            "https://user:pw@api.example/x",
            // No host, odd schemes, white space.
            "http:///localhost/x",
            "http:localhost/x",
            "http:/localhost/x",
            "http://localhost /x",
            "ftp://localhost/x",
        ] {
            let e = one_call(url).expect_err(url);
            assert_eq!(e.field, "provider.url", "{url}");
        }
    }

    #[test]
    fn a_placeholder_never_reaches_the_host() {
        let with_steps = |base: &str, url: &str| {
            parse(
                serde_json::json!({"kind": "http", "base_url": base, "token": "t0k3n-a1b2c3",
                "steps": [{"url": url, "extract": {"download": "/d"}}]}),
            )
        };
        assert!(with_steps("http://localhost:9000", "{base}/x").is_ok());
        assert!(with_steps("https://api.example", "{base}?a={link}").is_ok());
        assert!(with_steps("https://api.example", "https://api.example/{link}").is_ok());
        for url in [
            "{base}@evil.example/x",
            "{base}.evil.example/x",
            "{base}:8080@evil.example/x",
            "http://localhost{link}/x",
            "https://api.example{link}",
            "http://{link}/x",
            "{link}",
        ] {
            let e = with_steps("http://localhost:9000", url).expect_err(url);
            assert_eq!(e.field, "provider.steps[0].url", "{url}");
        }
        let e = with_steps("http://localhost:80@evil.example", "{base}/x").unwrap_err();
        assert_eq!(e.field, "provider.base_url");
    }
}
