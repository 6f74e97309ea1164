//! Site-wide limits on paid calls (`spend`, and a provider's `rate_limits`): each counts every
//! paid call of the whole site.

use std::num::NonZeroU32;

use serde::Deserialize;
use serde_json::Value;

use crate::config::error::{ConfigError, err};
use crate::core::rule::{Algorithm, KeyKind, Rule, RuleName};

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
