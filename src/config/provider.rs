//! The `provider` section of the configuration: a preset, a list of steps, or the one-call
//! shorthand, checked into a `ProviderSpec` plus the site-wide rules that protect the
//! provider account (its published request rate).

mod account;
pub mod deferred;
pub mod list;
pub(crate) mod raw;
mod shorthand;
pub mod site_rules;
mod steps;
pub(crate) mod urls;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::config::error::{ConfigError, err};
use crate::core::rule::Rule;
use crate::provider::Failure;
use crate::provider::described::{LazySpec, ProviderSpec};
use crate::provider::presets;
use crate::provider::spec::{HostList, HttpMethod, HttpSpec, LinkCheck, Step, Template};
use crate::support::defaults;
use crate::support::secret::Secret;
use raw::{RawHosts, RawLinkCheck, RawProvider};
use shorthand::shorthand;
use site_rules::site_rules;
use steps::{steps, token_by_name};
use urls::{check_step_url, check_url};

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
    let (spec, rate_rules) = http(user)?;
    Ok((ProviderSpec::Http(LazySpec::built(spec)), rate_rules))
}

/// The description of an HTTP provider from the owner's section, a preset under it.
fn http(user: Map<String, Value>) -> Result<(HttpSpec, Vec<Rule>), ConfigError> {
    let (preset, merged) = with_preset(user)?;
    let secrets = crate::config::redact::secret_values(&merged);
    let mut raw: RawProvider = serde_json::from_value(merged).map_err(|e| {
        // serde quotes the offending value, which may be a secret in the wrong place: the value
        // is cut out, and the secrets are masked in every form as well.
        let message = crate::config::redact::without_quoted_value(&e.to_string());
        let message =
            crate::support::secret::mask(&message, &crate::support::secret::all_forms(&secrets));
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
    remote(&raw, &mut steps)?;
    if let Some(token) = &raw.token {
        token_by_name(&mut steps, token);
    }
    // Class name to the provider's codes in that class.
    let errors = by_class(
        "provider.errors",
        raw.errors.take(),
        "codes are strings or numbers",
        |code| match code {
            Value::String(s) => Some(s),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        },
    )?;
    // Class name to words of the provider's messages in that class, matched in lower case.
    let error_messages = by_class(
        "provider.error_messages",
        raw.error_messages.take(),
        "each entry is a few words of the provider's message, e.g. \"not logged in\"",
        |words| {
            let words = words.trim().to_lowercase();
            (!words.is_empty() && !crate::support::text::has_control(&words)).then_some(words)
        },
    )?;
    // Class name to HTTP error statuses (400 to 599) in that class.
    let statuses = by_class(
        "provider.statuses",
        raw.statuses.take(),
        "statuses are HTTP error statuses, 400 to 599",
        |status| (400..=599).contains(&status).then_some(status),
    )?;
    let generic_codes = generic_codes(raw.generic_codes.take())?;
    let advice = advice(raw.advice.take())?;
    let hosts = host_list(raw.hosts.take(), raw.base_url.is_some())?;
    let link_check = link_check(raw.link_check.take(), raw.base_url.is_some())?;
    let account = account::account(raw.account.take(), raw.base_url.is_some())?;
    let (connect_ms, timeout_ms, deadline_ms) =
        timeouts(raw.connect_timeout_ms, raw.timeout_ms, raw.deadline_ms)?;
    let rate_list = raw.rate_limits.as_deref().unwrap_or_default();
    let rate_rules = site_rules(rate_list, "provider.rate_limits")?;
    let rate_steps = site_rules::counted_steps(rate_list, "provider.rate_limits", steps.len())?;
    Ok((
        HttpSpec {
            preset,
            base_url: raw.base_url,
            token: raw.token.map(Secret::new),
            steps,
            errors,
            error_messages,
            statuses,
            generic_codes,
            advice,
            rate_steps,
            hosts,
            link_check,
            account,
            connect_timeout: Duration::from_millis(connect_ms),
            timeout: Duration::from_millis(timeout_ms),
            deadline: Duration::from_millis(deadline_ms),
        },
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

/// A map of class name to a list (`errors`, `error_messages`, `statuses`): each entry as
/// `entry` reads it, with its class; an entry it cannot read (None) is the error `why` at
/// `FIELD.CLASS`.
fn by_class<T, U>(
    field: &str,
    raw: Option<BTreeMap<String, Vec<T>>>,
    why: &str,
    entry: impl Fn(T) -> Option<U>,
) -> Result<Vec<(U, Failure)>, ConfigError> {
    let mut out = Vec::new();
    for (name, list) in raw.unwrap_or_default() {
        let failure = class(field, &name)?;
        for item in list {
            let Some(read) = entry(item) else {
                return Err(err(format!("{field}.{name}"), why));
            };
            out.push((read, failure));
        }
    }
    Ok(out)
}

/// `generic_codes`: the provider's catch-all codes (strings or numbers), which yield to what
/// an error status means.
fn generic_codes(raw: Option<Vec<Value>>) -> Result<Vec<String>, ConfigError> {
    raw.unwrap_or_default()
        .into_iter()
        .map(|code| match code {
            Value::String(s) if !s.is_empty() => Ok(s),
            Value::Number(n) => Ok(n.to_string()),
            _ => Err(err(
                "provider.generic_codes",
                "codes are strings or numbers: the provider's catch-all codes, e.g. \"GENERIC\"",
            )),
        })
        .collect()
}

/// A class name of the `errors` map (and of `error_messages`, `statuses`, `advice`).
fn class(field: &str, name: &str) -> Result<Failure, ConfigError> {
    Failure::CLASSES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .ok_or_else(|| {
            let names: Vec<&str> = Failure::CLASSES.iter().map(|(n, _)| *n).collect();
            err(
                format!("{field}.{name}"),
                format!("is not an error class: use {}", names.join(", ")),
            )
        })
}

/// The `advice` map: class name to what the owner can do, one line.
fn advice(raw: Option<BTreeMap<String, String>>) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for (name, text) in raw.unwrap_or_default() {
        class("provider.advice", &name)?;
        if text.trim().is_empty() || crate::support::text::has_control(&text) || text.len() > 1000 {
            return Err(err(
                format!("provider.advice.{name}"),
                "is one line of at most 1000 characters telling the owner what to do",
            ));
        }
        out.push((name, text.trim().to_owned()));
    }
    Ok(out)
}

/// The URL of a free call made without the token or the link in it (`{base}` only).
fn public_url(field: &str, url: String, has_base: bool) -> Result<Template, ConfigError> {
    let url = Template(url);
    let known: Vec<String> = if has_base {
        vec!["base".into()]
    } else {
        Vec::new()
    };
    steps::check_names(field, &url, &known)?;
    check_step_url(field, &url.0)?;
    Ok(url)
}

/// `link_check`: where the free check of one link is, the form field of the link, and the
/// statuses of a dead link.
fn link_check(raw: Option<RawLinkCheck>, has_base: bool) -> Result<Option<LinkCheck>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let url = public_url("provider.link_check.url", raw.url, has_base)?;
    if raw.field.is_empty()
        || raw
            .field
            .chars()
            .any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(err(
            "provider.link_check.field",
            "names the form field that carries the link, e.g. \"link\"",
        ));
    }
    if raw.dead_statuses.is_empty()
        || raw.dead_statuses.len() > 5
        || raw.dead_statuses.iter().any(|s| !(400..=599).contains(s))
    {
        return Err(err(
            "provider.link_check.dead_statuses",
            "lists 1 to 5 HTTP error statuses (400 to 599) that mean the file cannot be had",
        ));
    }
    if let Some(p) = raw.size.as_deref().filter(|p| !p.starts_with('/')) {
        return Err(err(
            "provider.link_check.size",
            format!("{p:?}: a JSON Pointer to the file's size in bytes, e.g. \"/filesize\""),
        ));
    }
    Ok(Some(LinkCheck {
        url,
        field: raw.field,
        dead_statuses: raw.dead_statuses,
        size: raw.size,
    }))
}

/// `hosts`: where the public list of supported hosts is, and the arrays of domains in it.
fn host_list(raw: Option<RawHosts>, has_base: bool) -> Result<Option<HostList>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let url = public_url("provider.hosts.url", raw.url, has_base)?;
    if raw.lists.is_empty() || raw.lists.len() > 5 {
        return Err(err(
            "provider.hosts.lists",
            "names 1 to 5 JSON Pointers to arrays of domain names",
        ));
    }
    for p in &raw.lists {
        steps::pointer("provider.hosts.lists", Some(p.clone()))?;
    }
    Ok(Some(HostList {
        url,
        lists: raw.lists,
    }))
}

/// `remote: true` adds the description's `remote_form` fields to the first call (Real-Debrid:
/// `remote=1`, remote traffic, which the service allows from servers).
fn remote(raw: &RawProvider, steps: &mut [Step]) -> Result<(), ConfigError> {
    if raw.remote != Some(true) {
        return Ok(());
    }
    let Some(form) = raw.remote_form.as_ref().filter(|f| !f.is_empty()) else {
        return Err(err(
            "provider.remote",
            "this provider has no remote mode (\"remote_form\" names the fields it sends): remove \"remote\"",
        ));
    };
    let Some(first) = steps.first_mut().filter(|s| s.method == HttpMethod::Post) else {
        return Err(err(
            "provider.remote",
            "the first call must be a POST to carry the remote fields",
        ));
    };
    for (k, v) in form {
        if v.contains(['{', '}']) || crate::support::text::has_control(v) {
            return Err(err(
                format!("provider.remote_form.{k}"),
                "holds plain text, no {placeholder}",
            ));
        }
        first.form.retain(|(name, _)| name != k);
        first.form.push((k.clone(), Template(v.clone())));
    }
    Ok(())
}

/// Connect, per-call and whole-resolution time limits, in milliseconds.
fn timeouts(
    connect_ms: Option<u64>,
    timeout_ms: Option<u64>,
    deadline_ms: Option<u64>,
) -> Result<(u64, u64, u64), ConfigError> {
    let connect_ms = connect_ms.unwrap_or(defaults::PROVIDER_CONNECT_TIMEOUT_MS);
    let timeout_ms = timeout_ms.unwrap_or(defaults::PROVIDER_TIMEOUT_MS);
    let deadline_ms = deadline_ms.unwrap_or(defaults::PROVIDER_DEADLINE_MS.max(timeout_ms));
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
    // Every preset's documented answers, interpreted: tests/answers.rs.
    mod answers;

    use super::*;
    use crate::provider::spec::Vars;
    use steps::named_in_text;

    fn http(section: &str) -> HttpSpec {
        match parse(serde_json::from_str(section).unwrap()).unwrap().0 {
            ProviderSpec::Http(h) => h.spec().unwrap().clone(),
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
    fn catch_all_codes_are_strings_or_numbers() {
        let h = http(r#"{"preset": "realdebrid", "token": "t", "generic_codes": [-1, "GENERIC"]}"#);
        assert_eq!(h.generic_codes, ["-1", "GENERIC"]);
        for bad in ["[true]", "[\"\"]", "[{}]"] {
            let section =
                format!(r#"{{"preset": "alldebrid", "token": "t", "generic_codes": {bad}}}"#);
            let e = parse(serde_json::from_str(&section).unwrap()).unwrap_err();
            assert_eq!(e.field, "provider.generic_codes", "{bad}");
        }
    }

    #[test]
    fn a_rate_may_count_one_steps_calls() {
        let h = http(r#"{"preset": "torbox", "token": "t0k3n-a1b2c3"}"#);
        assert_eq!(h.rate_steps, [None, Some(vec![0]), Some(vec![0])]);
        assert!(
            h.rate_counts(0, 1) && h.rate_counts(0, 2),
            "300 a minute: every call"
        );
        assert!(
            h.rate_counts(1, 0) && !h.rate_counts(1, 1),
            "creations: the first step"
        );
        for steps in ["[0]", "[4]", "[]"] {
            let section = format!(
                r#"{{"preset": "torbox", "token": "t", "rate_limits": [{{"name": "c", "limit": 1, "window_secs": 60, "steps": {steps}}}]}}"#
            );
            let e = parse(serde_json::from_str(&section).unwrap()).unwrap_err();
            assert_eq!(e.field, "provider.rate_limits[0].steps", "{steps}");
        }
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
