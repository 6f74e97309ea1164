//! The `providers` list: several services in the order they are asked, each what `provider`
//! holds, known by its preset's name or its own `name`, with site-wide `spend` limits of its
//! own. A preset given only its token is left to build at its first use, as `provider` is.

use serde_json::{Map, Value};

use crate::config::error::{ConfigError, err};
use crate::config::provider::site_rules::{raw_site_rules, site_rules};
use crate::config::provider::{deferred::parse_deferred, parse};
use crate::core::rule::{Rule, RuleName};
use crate::provider::described::ProviderSpec;

/// The longest name of a service: its rates are named after it, within a rule name's length.
const MAX_NAME: usize = 16;

/// One service of the list, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    /// How the owner's log, the figures and the errors name it.
    pub name: String,
    pub spec: ProviderSpec,
    /// Its published rates. The first service's keep their names; a later one's are named
    /// after it (`alldebrid-second`), so that each service's calls have counters of their own.
    pub rates: Vec<Rule>,
    /// The owner's limits on paid calls to this service only.
    pub spend: Vec<Rule>,
}

/// Reads the `providers` list. `deferred`: a preset given only its token is built at its first
/// use (one process, one request).
pub fn parse_list(list: Value, deferred: bool) -> Result<Vec<Service>, ConfigError> {
    let Value::Array(entries) = list else {
        return Err(err(
            "providers",
            "must be a list of providers, e.g. [{\"preset\": \"realdebrid\", \"token\": \"...\"}, {\"preset\": \"alldebrid\", \"token\": \"...\"}]",
        ));
    };
    if entries.is_empty() || entries.len() > 5 {
        return Err(err("providers", "must list 1 to 5 providers"));
    }
    let mut services: Vec<Service> = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let at = format!("providers[{i}]");
        let service = one(entry, &at, i == 0, deferred)?;
        if services.iter().any(|s| s.name == service.name) {
            return Err(err(
                format!("{at}.name"),
                format!(
                    "{:?} names two providers: give each entry of the same service its own \"name\", e.g. \"{}-2\"",
                    service.name, service.name
                ),
            ));
        }
        services.push(service);
    }
    Ok(services)
}

/// One entry: its `name` and `spend` taken out, the rest read as a `provider` section.
fn one(entry: Value, at: &str, first: bool, deferred: bool) -> Result<Service, ConfigError> {
    let Value::Object(mut section) = entry else {
        return Err(err(
            at,
            "must be an object, e.g. {\"preset\": \"realdebrid\", \"token\": \"...\"}",
        ));
    };
    let name = name(&mut section, at)?;
    let spend = match section.remove("spend") {
        None => Vec::new(),
        Some(v) => {
            let raw = raw_site_rules(v, "spend").map_err(|e| within(e, at))?;
            site_rules(&raw, "spend").map_err(|e| within(e, at))?
        }
    };
    let section = Value::Object(section);
    let (spec, rates) = if deferred {
        parse_deferred(section)
    } else {
        parse(section)
    }
    .map_err(|e| within(e, at))?;
    let rates = if first {
        rates
    } else {
        rates
            .into_iter()
            .map(|r| own_rate(r, &name, at))
            .collect::<Result<_, _>>()?
    };
    Ok(Service {
        name,
        spec,
        rates,
        spend,
    })
}

/// The entry's `name`, else its preset's (`echo` for the echo provider); a description written
/// by hand needs one.
fn name(section: &mut Map<String, Value>, at: &str) -> Result<String, ConfigError> {
    let name = match section.remove("name") {
        Some(Value::String(n)) => n,
        Some(_) => return Err(err(format!("{at}.name"), "must be text, e.g. \"backup\"")),
        None => match (section.get("preset"), section.get("kind")) {
            (Some(Value::String(p)), _) => p.clone(),
            (_, Some(Value::String(k))) if k == "echo" => "echo".to_owned(),
            _ => {
                return Err(err(
                    format!("{at}.name"),
                    "missing: a provider without a preset needs a \"name\", e.g. \"myservice\"",
                ));
            }
        },
    };
    let fits = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !fits {
        return Err(err(
            format!("{at}.name"),
            format!("must be 1 to {MAX_NAME} of a-z, 0-9, - and _, e.g. \"backup\""),
        ));
    }
    Ok(name)
}

/// A later service's rate, named after the service: `provider-minute` of `alldebrid` counts
/// as `alldebrid-minute`.
fn own_rate(rate: Rule, service: &str, at: &str) -> Result<Rule, ConfigError> {
    let short = rate
        .name
        .as_str()
        .strip_prefix("provider-")
        .unwrap_or(rate.name.as_str());
    let name = RuleName::new(&format!("{service}-{short}")).ok_or_else(|| {
        err(
            format!("{at}.name"),
            format!(
                "is too long for the name of its rate {:?}: choose a shorter name",
                rate.name.as_str()
            ),
        )
    })?;
    Ok(Rule { name, ..rate })
}

/// An error of the entry's section, named at the entry: `provider.token` of the second entry
/// is `providers[1].token`.
fn within(mut e: ConfigError, at: &str) -> ConfigError {
    e.field = match e.field.strip_prefix("provider") {
        Some(rest) if rest.is_empty() || rest.starts_with(['.', '[']) => format!("{at}{rest}"),
        _ => format!("{at}.{}", e.field),
    };
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(list: Value) -> Vec<String> {
        parse_list(list, true)
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect()
    }

    #[test]
    fn entries_are_known_by_their_preset_or_their_name() {
        assert_eq!(
            names(json!([
                {"preset": "realdebrid", "token": "A"},
                {"preset": "alldebrid", "token": "B"},
                {"preset": "alldebrid", "token": "C", "name": "ad-2"},
                {"kind": "echo"},
            ])),
            ["realdebrid", "alldebrid", "ad-2", "echo"]
        );
    }

    #[test]
    fn two_entries_of_one_name_and_bad_entries_are_refused() {
        let field = |list: Value| parse_list(list, true).unwrap_err().field;
        assert_eq!(
            field(
                json!([{"preset": "alldebrid", "token": "A"}, {"preset": "alldebrid", "token": "B"}])
            ),
            "providers[1].name"
        );
        assert_eq!(field(json!([])), "providers");
        assert_eq!(field(json!({"preset": "alldebrid"})), "providers");
        assert_eq!(field(json!(["realdebrid"])), "providers[0]");
        assert_eq!(
            field(json!([{"kind": "http", "url": "https://a.example/u", "download": "/d"}])),
            "providers[0].name"
        );
        assert_eq!(
            field(json!([{"preset": "realdebrid", "token": "A", "name": "Real Debrid"}])),
            "providers[0].name"
        );
        assert_eq!(
            field(
                json!([{"preset": "realdebrid", "token": "A"}, {"preset": "alldebrid", "token": ""}])
            ),
            "providers[1].token"
        );
        assert_eq!(
            field(json!([{"preset": "realdebrid", "token": "A",
                "spend": [{"name": "rd-day", "limit": 0, "window_secs": 60}]}])),
            "providers[0].spend[0].limit"
        );
    }

    #[test]
    fn each_entry_has_its_spend_and_a_later_ones_rates_are_named_after_it() {
        let list = parse_list(
            json!([
                {"preset": "realdebrid", "token": "A",
                 "spend": [{"name": "rd-day", "limit": 100, "window_secs": 86400}]},
                {"preset": "alldebrid", "token": "B"},
            ]),
            true,
        )
        .unwrap();
        let rule_names = |rules: &[Rule]| -> Vec<String> {
            rules.iter().map(|r| r.name.as_str().to_owned()).collect()
        };
        assert_eq!(rule_names(&list[0].spend), ["rd-day"]);
        assert_eq!(rule_names(&list[0].rates), ["provider-minute"]);
        assert!(list[1].spend.is_empty());
        assert_eq!(
            rule_names(&list[1].rates),
            ["alldebrid-second", "alldebrid-minute"]
        );
        let ProviderSpec::Http(h) = &list[1].spec else {
            panic!("not an HTTP provider");
        };
        assert!(!h.is_built(), "built before its first use");
    }
}
