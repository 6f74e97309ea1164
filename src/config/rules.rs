//! The `rules` section: each limit checked (name, key, algorithm, limit, window), and whether
//! the chosen store can keep its algorithm.

use std::num::NonZeroU32;

use crate::config::error::{ConfigError, err};
use crate::config::raw::RawRule;
use crate::core::rule::{Algorithm, KeyKind, Rule, RuleName};
use crate::store::settings::StoreKind;

/// Longest window a rule may have: a year.
const MAX_WINDOW_SECS: u64 = 366 * 24 * 3600;

pub(crate) fn rules(list: Vec<RawRule>) -> Result<Vec<Rule>, ConfigError> {
    if list.len() > 16 {
        return Err(err("rules", "at most 16 rules"));
    }
    let mut out: Vec<Rule> = Vec::new();
    for (i, r) in list.into_iter().enumerate() {
        let at = |f: &str| format!("rules[{i}].{f}");
        let name = rule_name(&r.name, &at, "\"ip\" or \"per-day\"")?;
        if out.iter().any(|o| o.name == name) {
            return Err(err(
                at("name"),
                format!("{name:?} is used by another rule: names must differ"),
            ));
        }
        let key = KeyKind::parse(&r.key).ok_or_else(|| {
            err(at("key"), format!("{:?}: use \"ip\" (per client address), \"api_key\" (per API key) or \"global\" (one count for the whole site)", r.key))
        })?;
        let algorithm = match r.algorithm.as_deref() {
            None => Algorithm::Fixed,
            Some(a) => Algorithm::parse(a).ok_or_else(|| {
                err(at("algorithm"), format!("{a:?}: use \"fixed\" (a window from the first request) or \"sliding\" (any window ending now)"))
            })?,
        };
        let (limit, window) =
            limit_and_window(&at, (r.limit, r.window_secs), "requests", " (a year)")?;
        out.push(Rule {
            name,
            key,
            algorithm,
            limit,
            window_secs: window,
        });
    }
    Ok(out)
}

/// The site's rules: those enforced, and those in shadow mode (`"mode": "shadow"`), which count
/// and report what they would refuse without refusing anything.
pub(crate) fn site_rules(list: Vec<RawRule>) -> Result<(Vec<Rule>, Vec<Rule>), ConfigError> {
    let mut shadow = Vec::with_capacity(list.len());
    for (i, r) in list.iter().enumerate() {
        shadow.push(match r.mode.as_deref() {
            None | Some("enforce") => false,
            Some("shadow") => true,
            Some(other) => {
                return Err(err(
                    format!("rules[{i}].mode"),
                    format!("{other:?}: use \"enforce\" (the default: the rule refuses) or \"shadow\" (it only counts and reports what it would refuse)"),
                ));
            }
        });
    }
    let all = rules(list)?;
    let (shadowed, enforced): (Vec<_>, Vec<_>) =
        all.into_iter().zip(shadow).partition(|(_, shadow)| *shadow);
    Ok((
        enforced.into_iter().map(|(r, _)| r).collect(),
        shadowed.into_iter().map(|(r, _)| r).collect(),
    ))
}

/// A key's own rules: enforced only.
pub(crate) fn key_rules(list: Vec<RawRule>) -> Result<Vec<Rule>, ConfigError> {
    if let Some(i) = list.iter().position(|r| r.mode.is_some()) {
        return Err(err(
            format!("rules[{i}].mode"),
            "shadow rules are site rules only: move the rule to the top-level \"rules\"",
        ));
    }
    rules(list)
}

/// A rule's name; `at` names a field of the rule in messages, `example` ends the message.
pub(crate) fn rule_name(
    name: &str,
    at: &dyn Fn(&str) -> String,
    example: &str,
) -> Result<RuleName, ConfigError> {
    RuleName::new(name).ok_or_else(|| {
        err(
            at("name"),
            format!("must be 1 to 32 of a-z, 0-9, '_' and '-', e.g. {example}"),
        )
    })
}

/// A rule's limit, 1 or more `counted` (requests, paid calls) per window, and its window, a
/// second to a year (`window_note` follows the range in the message).
pub(crate) fn limit_and_window(
    at: &dyn Fn(&str) -> String,
    (limit, window_secs): (u64, u64),
    counted: &str,
    window_note: &str,
) -> Result<(NonZeroU32, NonZeroU32), ConfigError> {
    let limit = u32::try_from(limit)
        .ok()
        .and_then(NonZeroU32::new)
        .ok_or_else(|| {
            err(
                at("limit"),
                format!("must be 1 to 4294967295 {counted} per window"),
            )
        })?;
    let window = u32::try_from(window_secs)
        .ok()
        .filter(|w| u64::from(*w) <= MAX_WINDOW_SECS)
        .and_then(NonZeroU32::new)
        .ok_or_else(|| {
            err(
                at("window_secs"),
                format!("must be 1 to 31622400 seconds{window_note}"),
            )
        })?;
    Ok((limit, window))
}

/// Sliding windows need a store that keeps one record per request.
pub(crate) fn check_algorithms(rules: &[Rule], store: &StoreKind) -> Result<(), ConfigError> {
    if matches!(store, StoreKind::File { .. })
        && let Some(i) = rules.iter().position(|r| r.algorithm == Algorithm::Sliding)
    {
        return Err(err(
            format!("rules[{i}].algorithm"),
            "the file store keeps fixed windows only: use \"fixed\", or a mysql or redis store for \"sliding\"",
        ));
    }
    Ok(())
}
