//! Site-wide limits on paid calls (`spend`, and a provider's `rate_limits`): each counts every
//! paid call of the whole site.

use serde::Deserialize;
use serde_json::Value;

use crate::config::error::{ConfigError, err};
use crate::config::rules::{default_key_template, limit_and_window, rule_name};
use crate::core::rule::{Algorithm, KeyKind, Rule};

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
        let name = rule_name(&r.name, &at, "\"day\"")?;
        let (limit, window_secs) =
            limit_and_window(&at, (r.limit, r.window_secs), "paid calls", "")?;
        out.push(Rule {
            name,
            key: KeyKind::Global,
            algorithm: Algorithm::Fixed,
            limit,
            window_secs,
            key_template: default_key_template(KeyKind::Global),
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
