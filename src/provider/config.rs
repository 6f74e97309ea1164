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

/// True when the URL's host is this machine, where plain http cannot be overheard.
fn loopback_host(rest: &str) -> bool {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Checks a URL (or a base URL) is https, or http to this machine.
fn check_url(field: &str, url: &str) -> Result<(), ConfigError> {
    let lower = url.to_ascii_lowercase();
    let ok = if let Some(rest) = lower.strip_prefix("https://") {
        !rest.is_empty()
    } else if let Some(rest) = lower.strip_prefix("http://") {
        if !loopback_host(rest) {
            return Err(err(
                field,
                "use https:// (plain http would send the token unencrypted; it is accepted only for a provider on this machine)",
            ));
        }
        true
    } else {
        false
    };
    if !ok || url.chars().any(|c| c.is_whitespace() || c.is_control()) || url.contains('#') {
        return Err(err(field, format!("{url:?} is not an https:// URL")));
    }
    Ok(())
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
    let merged = Value::Object(merged);
    let secrets = crate::config::redact::secret_values(&merged);
    let mut raw: RawProvider = serde_json::from_value(merged).map_err(|e| {
        // serde quotes the offending value, which may be a secret in the wrong place: the value
        // is cut out, and the secrets are masked in every form as well.
        let message = crate::config::redact::without_quoted_value(&e.to_string());
        let message = crate::secret::mask(&message, &crate::secret::all_forms(&secrets));
        err("provider", format!("{message} (see README: Providers)"))
    })?;
    match raw.kind.as_deref() {
        None if preset.is_some() => {}
        Some("http") => {}
        None => {
            return Err(err(
                "provider.kind",
                "missing: use \"preset\" (realdebrid, alldebrid, premiumize, debridlink, torbox), \"kind\": \"http\" for another JSON API, or \"kind\": \"echo\" to try the site",
            ));
        }
        Some(other) => {
            return Err(err(
                "provider.kind",
                format!(
                    "{other:?} is not a provider kind: use \"http\" for a JSON API or \"echo\" to try the site without spending anything"
                ),
            ));
        }
    }
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
    let mut known: Vec<String> = vec!["link".into()];
    if raw.token.is_some() {
        known.push("token".into());
    }
    if raw.base_url.is_some() {
        known.push("base".into());
    }
    let mut steps = Vec::new();
    let mut extracts_download = false;
    for (i, s) in raw_steps.into_iter().enumerate() {
        let at = |f: &str| format!("provider.steps[{i}].{f}");
        let m = method(&at("method"), s.method.as_deref())?;
        let url = Template(s.url);
        check_names(&at("url"), &url, &known)?;
        // `{base}` was checked as base_url; anything else must start with the scheme and host.
        if !url.0.starts_with("{base}") {
            check_url(&at("url"), url.0.split('{').next().unwrap_or_default())?;
        }
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
        let headers = templates(&at("headers"), s.headers, &known, true)?;
        let query = templates(&at("query"), s.query, &known, false)?;
        let form = templates(&at("form"), s.form, &known, false)?;
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
            extracts_download |= name == "download";
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
    if !extracts_download {
        return Err(err(
            "provider.steps",
            "no step extracts \"download\": name the JSON Pointer of the download URL",
        ));
    }
    let mut errors = Vec::new();
    for (class, codes) in raw.errors.unwrap_or_default() {
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
    if raw.token.as_deref() == Some("") {
        return Err(err(
            "provider.token",
            "is empty: put the provider's API token here",
        ));
    }
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

/// The provider as JSON for `check`, the token masked.
pub fn describe(spec: &ProviderSpec) -> Value {
    let h = match spec {
        ProviderSpec::Echo => return serde_json::json!({"kind": "echo"}),
        ProviderSpec::Http(h) => h,
    };
    let pairs = |list: &[(String, Template)]| -> Value {
        list.iter()
            .map(|(k, t)| (k.clone(), Value::String(t.0.clone())))
            .collect::<Map<_, _>>()
            .into()
    };
    let test = |t: &SuccessTest| serde_json::json!({"pointer": t.pointer, "equals": t.equals});
    let steps: Vec<Value> = h
        .steps
        .iter()
        .map(|s| {
            serde_json::json!({
                "method": match s.method { HttpMethod::Get => "GET", HttpMethod::Post => "POST" },
                "url": s.url.0,
                "headers": pairs(&s.headers),
                "query": pairs(&s.query),
                "form": pairs(&s.form),
                "when": s.when,
                "success": s.success.as_ref().map(test),
                "error_code": s.error_code,
                "error_message": s.error_message,
                "extract": s.extract.iter().map(|(n, p)| (n.clone(), serde_json::json!(p))).collect::<Map<_, _>>(),
                "poll": s.poll.as_ref().map(|p| serde_json::json!({
                    "interval_ms": p.interval.as_millis() as u64,
                    "until": test(&p.until),
                    "fail": p.fail.as_ref().map(test),
                })),
            })
        })
        .collect();
    let mut errors: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (code, f) in &h.errors {
        errors.entry(f.name()).or_default().push(code);
    }
    let mut v = serde_json::json!({
        "kind": "http",
        "preset": h.preset,
        "base_url": h.base_url,
        "token": h.token.as_ref().map(|_| "***"),
        "steps": steps,
        "errors": errors,
        "connect_timeout_ms": h.connect_timeout.as_millis() as u64,
        "timeout_ms": h.timeout.as_millis() as u64,
        "deadline_ms": h.deadline.as_millis() as u64,
    });
    // A token written into a header by hand instead of {token} is masked too.
    if let Some(t) = &h.token
        && !t.expose().is_empty()
    {
        let text = v.to_string().replace(t.expose(), "***");
        v = serde_json::from_str(&text).unwrap_or(v);
    }
    v
}
