//! The `provider` section read for one request: a preset given only its token (and perhaps a
//! base URL), the usual case, is checked as far as the owner wrote it and built at its first
//! use, so that a refused request never reads the preset's steps, error tables and advice.

use serde_json::Value;

use crate::config::error::ConfigError;
use crate::config::provider::site_rules::{RawSiteRule, counted_steps, site_rules};
use crate::config::provider::{http, parse, timeouts, urls::check_url};
use crate::core::rule::Rule;
use crate::provider::described::{LazySpec, ProviderSpec, Summary};
use crate::provider::presets;
use crate::provider::spec::HttpSpec;
use crate::support::secret::Secret;

/// The fields an owner may give a preset for it to be built later: text, each of them.
const LATER: [&str; 3] = ["preset", "token", "base_url"];

/// As [`parse`], but a preset given nothing beyond `token` and `base_url` is built at its
/// first use; any other section is built now. What is checked now is what the owner wrote:
/// the preset's own description is checked by the tests (every preset builds).
pub fn parse_deferred(section: Value) -> Result<(ProviderSpec, Vec<Rule>), ConfigError> {
    let Some((name, needed)) = later(&section) else {
        return parse(section);
    };
    if let Some(base) = section.get("base_url").and_then(Value::as_str) {
        check_url("provider.base_url", base)?;
    }
    let rates: Vec<RawSiteRule> = needed
        .rate_limits
        .iter()
        .map(RawSiteRule::from_preset)
        .collect();
    let rate_rules = site_rules(&rates, "provider.rate_limits")?;
    let rate_steps = counted_steps(&rates, "provider.rate_limits", needed.steps)?;
    let (_, _, deadline_ms) = timeouts(
        needed.connect_timeout_ms,
        needed.timeout_ms,
        needed.deadline_ms,
    )?;
    let summary = Summary {
        preset: Some(name.to_owned()),
        token: section
            .get("token")
            .and_then(Value::as_str)
            .map(|t| Secret::new(t.to_owned())),
        rate_steps,
        deadline: std::time::Duration::from_millis(deadline_ms),
    };
    Ok((
        ProviderSpec::Http(LazySpec::deferred(summary, section, build)),
        rate_rules,
    ))
}

/// The preset's name and what a request needs of it when the section may be built later: a
/// known preset, and nothing but non-empty text in the fields of [`LATER`].
fn later(section: &Value) -> Option<(&str, &'static presets::Needs)> {
    let user = section.as_object()?;
    let plain = user
        .iter()
        .all(|(k, v)| LATER.contains(&k.as_str()) && v.as_str().is_some_and(|s| !s.is_empty()));
    let name = user.get("preset")?.as_str()?;
    Some((name, presets::needs(name)?)).filter(|_| plain)
}

/// Builds the description of a section [`parse_deferred`] left for later.
fn build(section: Value) -> Result<HttpSpec, String> {
    match section {
        Value::Object(user) => http(user).map(|(spec, _)| spec).map_err(|e| e.to_string()),
        _ => Err("the provider section is not an object".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(section: Value) -> ((ProviderSpec, Vec<Rule>), (ProviderSpec, Vec<Rule>)) {
        (
            parse(section.clone()).unwrap(),
            parse_deferred(section).unwrap(),
        )
    }

    #[test]
    fn every_preset_left_for_later_builds_what_reading_it_at_once_gives() {
        for name in presets::NAMES {
            for section in [
                serde_json::json!({"preset": name, "token": "T0KEN-0123456789"}),
                serde_json::json!({"preset": name, "token": "T0KEN-0123456789",
                    "base_url": "http://127.0.0.1:9/api"}),
            ] {
                let ((now, now_rates), (later, later_rates)) = both(section);
                let (ProviderSpec::Http(now), ProviderSpec::Http(later)) = (now, later) else {
                    panic!("{name}: not an HTTP provider");
                };
                assert!(!later.is_built(), "{name}: built before its first use");
                assert_eq!(now_rates, later_rates, "{name}");
                assert_eq!(now.rate_steps, later.rate_steps, "{name}");
                assert_eq!(now.deadline, later.deadline, "{name}");
                assert_eq!(now.token, later.token, "{name}");
                assert_eq!(now.preset, later.preset, "{name}");
                assert_eq!(now.spec().unwrap(), later.spec().unwrap(), "{name}");
                assert!(later.is_built());
            }
        }
    }

    #[test]
    fn a_section_with_more_than_a_token_and_a_base_is_built_at_once() {
        for section in [
            serde_json::json!({"preset": "realdebrid", "token": "T", "remote": true}),
            serde_json::json!({"preset": "realdebrid", "token": "T", "timeout_ms": 9000}),
            serde_json::json!({"kind": "http", "token": "T", "url": "https://api.example/u",
                "link": {"form": "link"}, "download": "/d"}),
        ] {
            let (ProviderSpec::Http(h), _) = parse_deferred(section.clone()).unwrap() else {
                panic!("not an HTTP provider");
            };
            assert!(h.is_built(), "{section}");
        }
        assert!(matches!(
            parse_deferred(serde_json::json!({"kind": "echo"}))
                .unwrap()
                .0,
            ProviderSpec::Echo
        ));
    }

    #[test]
    fn what_the_owner_wrote_is_checked_as_it_is_read() {
        let message = |section: Value| parse_deferred(section).unwrap_err().to_string();
        // The same messages as when the section is built at once.
        for section in [
            serde_json::json!({"preset": "realdebrid", "token": ""}),
            serde_json::json!({"preset": "realdebrid", "token": 5}),
            serde_json::json!({"preset": "nope", "token": "T"}),
            serde_json::json!({"preset": "realdebrid", "token": "T", "base_url": "ftp://x"}),
            serde_json::json!({"preset": "realdebrid", "token": "T", "tokne": "T"}),
        ] {
            assert_eq!(
                message(section.clone()),
                parse(section.clone()).unwrap_err().to_string(),
                "{section}"
            );
        }
    }
}
