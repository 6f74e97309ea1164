//! `challenge`: the challenge asked before a paid call (Cloudflare Turnstile by default), its
//! keys, when it is asked and what happens when siteverify is down, checked into
//! [`crate::challenge::Settings`]. No section (or no site key and secret): no challenge.

use crate::challenge::{OnError, Settings, When};
use crate::config::error::{ConfigError, err};
use crate::config::raw::RawChallenge;
use crate::core::rule::{Algorithm, KeyKind, Rule};
use crate::support::defaults;
use crate::support::secret::Secret;

/// The name of the rule that counts the extra links a solved challenge gives (`over_limit`).
pub const EXTRA_RULE: &str = "challenge-extra";

/// Checks the `challenge` section. A section whose site key and secret are both empty (the
/// dashboard's settings before they are filled in) turns the challenge off.
pub(crate) fn challenge(raw: Option<Box<RawChallenge>>) -> Result<Option<Settings>, ConfigError> {
    let Some(raw) = raw.map(|b| *b) else {
        return Ok(None);
    };
    let site_key = raw.site_key.unwrap_or_default().trim().to_owned();
    let secret = raw.secret.unwrap_or_default().trim().to_owned();
    if site_key.is_empty() && secret.is_empty() {
        return Ok(None);
    }
    let key_like = |s: &str| {
        (1..=256).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
    };
    if !key_like(&site_key) {
        return Err(err(
            "challenge.site_key",
            "must be the widget's site key from the Cloudflare dashboard (Turnstile, your widget: \"Site Key\", e.g. \"0x4AAAAAAA…\"), letters, digits and - _ . : only",
        ));
    }
    if !key_like(&secret) {
        return Err(err(
            "challenge.secret",
            "must be the widget's secret key from the Cloudflare dashboard (Turnstile, your widget: \"Secret Key\"), letters, digits and - _ . : only",
        ));
    }
    let word = raw.when.as_deref().unwrap_or(defaults::CHALLENGE_WHEN);
    let when = When::from_word(word).ok_or_else(|| {
        err(
            "challenge.when",
            format!("{word:?} is not a mode: write \"always\", \"new_clients\", \"over_limit\" or \"busy\""),
        )
    })?;
    let verify_url = raw
        .verify_url
        .unwrap_or_else(|| defaults::CHALLENGE_VERIFY_URL.to_owned());
    crate::config::provider::urls::check_url("challenge.verify_url", &verify_url)?;
    let script_url = raw
        .script_url
        .unwrap_or_else(|| defaults::CHALLENGE_SCRIPT_URL.to_owned());
    crate::config::provider::urls::check_url("challenge.script_url", &script_url)?;
    if script_url.contains(['"', '<', '>', '\'', ' ']) {
        return Err(err(
            "challenge.script_url",
            "must be a plain address without quotes, spaces or < >",
        ));
    }
    let action = match raw.action {
        None => Some(defaults::CHALLENGE_ACTION.to_owned()),
        Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(a))
            if (1..=32).contains(&a.len())
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            Some(a)
        }
        Some(_) => {
            return Err(err(
                "challenge.action",
                "must be 1 to 32 letters, digits, - or _ (Turnstile's limit), or null for a service that answers no action",
            ));
        }
    };
    let mut hostnames = Vec::new();
    for (i, h) in raw.hostnames.unwrap_or_default().into_iter().enumerate() {
        let h = h.trim().to_ascii_lowercase();
        if h.is_empty()
            || h.len() > 253
            || !h
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        {
            return Err(err(
                format!("challenge.hostnames[{i}]"),
                "must be a host name as the browser shows it, e.g. \"www.example.com\" (no scheme, no port)",
            ));
        }
        hostnames.push(h);
    }
    let remember_secs = in_range(
        raw.remember_secs,
        defaults::CHALLENGE_REMEMBER_SECS.into(),
        60..=7 * 86400,
        "challenge.remember_secs",
        "must be 60 to 604800 seconds; 3600 remembers a solved challenge for an hour",
    )?;
    let extra = in_range(
        raw.extra,
        defaults::CHALLENGE_EXTRA.into(),
        1..=1000,
        "challenge.extra",
        "must be 1 to 1000 links: the few a solved challenge adds past a visitor's limit",
    )?;
    let extra_window_secs = in_range(
        raw.extra_window_secs,
        defaults::CHALLENGE_EXTRA_WINDOW_SECS.into(),
        60..=7 * 86400,
        "challenge.extra_window_secs",
        "must be 60 to 604800 seconds: how often the extra links may be had",
    )?;
    let extra = Rule::new(
        EXTRA_RULE,
        KeyKind::Ip,
        Algorithm::Fixed,
        extra,
        extra_window_secs,
        defaults::KEY_TEMPLATE_IP,
    )
    .expect("a valid rule");
    let busy_share = raw.busy_share.unwrap_or(defaults::CHALLENGE_BUSY_SHARE);
    if !(0.05..=1.0).contains(&busy_share) {
        return Err(err(
            "challenge.busy_share",
            "is a share of the spend limit, 0.05 to 1 (e.g. 0.8: visitors are asked past 80% spent)",
        ));
    }
    let on_error = match raw
        .on_error
        .as_deref()
        .unwrap_or(defaults::CHALLENGE_ON_ERROR)
    {
        "deny" => OnError::Deny,
        "allow" => OnError::Allow,
        other => {
            return Err(err(
                "challenge.on_error",
                format!(
                    "{other:?} is not a policy: write \"deny\" (refuse links while siteverify is down: no paid call unchecked) or \"allow\""
                ),
            ));
        }
    };
    let timeout_ms = raw.timeout_ms.unwrap_or(defaults::CHALLENGE_TIMEOUT_MS);
    if !(100..=20_000).contains(&timeout_ms) {
        return Err(err(
            "challenge.timeout_ms",
            "must be 100 to 20000 milliseconds; 5000 is plenty for siteverify",
        ));
    }
    Ok(Some(Settings {
        site_key,
        secret: Secret::new(secret),
        when,
        verify_url,
        script_url,
        action,
        hostnames,
        remember_secs,
        extra,
        busy_share,
        on_error,
        timeout_ms,
    }))
}

fn in_range(
    value: Option<u64>,
    default: u64,
    range: std::ops::RangeInclusive<u64>,
    field: &str,
    fix: &str,
) -> Result<u32, ConfigError> {
    let v = value.unwrap_or(default);
    if range.contains(&v) {
        Ok(u32::try_from(v).expect("ranges fit u32"))
    } else {
        Err(err(field, fix))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn checked(section: &str) -> Result<Config, crate::config::ConfigError> {
        Config::from_json(
            &format!(r#"{{"challenge": {section}}}"#),
            std::path::Path::new("/tmp"),
        )
    }

    #[test]
    fn defaults_and_mistakes() {
        let c = checked(r#"{"site_key": "0x4AAA", "secret": "0x4BBB"}"#).unwrap();
        let s = c.challenge.unwrap();
        assert_eq!(s.when, crate::challenge::When::NewClients);
        assert_eq!(s.verify_url, crate::support::defaults::CHALLENGE_VERIFY_URL);
        assert_eq!(s.on_error, crate::challenge::OnError::Deny);
        assert_eq!(s.action.as_deref(), Some("resolve"));
        assert!(
            checked(r#"{"site_key": "", "secret": ""}"#)
                .unwrap()
                .challenge
                .is_none()
        );
        let busy = checked(r#"{"site_key": "a", "secret": "b", "when": "busy"}"#).unwrap_err();
        assert_eq!(busy.field, "challenge.when");
        assert!(busy.message.contains("spend"), "{busy:?}");
        for (section, field) in [
            (r#"{"site_key": "a"}"#, "challenge.secret"),
            (r#"{"secret": "a"}"#, "challenge.site_key"),
            (
                r#"{"site_key": "a", "secret": "b", "when": "sometimes"}"#,
                "challenge.when",
            ),
            (
                r#"{"site_key": "a", "secret": "b", "verify_url": "http://example.com/"}"#,
                "challenge.verify_url",
            ),
            (
                r#"{"site_key": "a", "secret": "b", "busy_share": 2}"#,
                "challenge.busy_share",
            ),
            (
                r#"{"site_key": "a", "secret": "b", "on_error": "maybe"}"#,
                "challenge.on_error",
            ),
            (
                r#"{"site_key": "a", "secret": "b", "remember_secs": 1}"#,
                "challenge.remember_secs",
            ),
            (
                r#"{"site_key": "a", "secret": "b", "extra": 0}"#,
                "challenge.extra",
            ),
            (
                r#"{"site_key": "a", "secret": "b", "action": "a b"}"#,
                "challenge.action",
            ),
            (
                r#"{"site_key": "a", "secret": "b", "hostnames": ["https://x"]}"#,
                "challenge.hostnames[0]",
            ),
        ] {
            let e = checked(section).unwrap_err();
            assert_eq!(e.field, field, "{section}");
        }
        // Plain http only on this machine (a test's stand-in).
        let local = checked(
            r#"{"site_key": "a", "secret": "b", "verify_url": "http://127.0.0.1:9/v", "action": null}"#,
        )
        .unwrap();
        assert_eq!(local.challenge.unwrap().action, None);
    }
}
