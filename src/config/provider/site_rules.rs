//! Site-wide limits on paid calls (`spend`, and a provider's `rate_limits`): each counts every
//! paid call of the whole site.

use serde::Deserialize;
use serde_json::Value;

use crate::config::error::{ConfigError, err};
use crate::config::rules::{
    bytes_limit_and_window, default_key_template, limit_and_window, rule_name, unit,
};
use std::num::NonZeroU32;

use crate::core::rule::{Algorithm, KeyKind, Rule, Unit};

/// A site-wide limit on calls to the provider.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSiteRule {
    name: String,
    /// A spend limit only: `"bytes"` counts the paid files' sizes.
    unit: Option<String>,
    limit: u64,
    window_secs: u64,
    /// A provider's rate only: the steps (from 1) whose calls it counts; every call without.
    steps: Option<Vec<usize>>,
}

impl RawSiteRule {
    /// A preset's rate, as its description writes it (read when the program was built).
    pub fn from_preset(rate: &crate::provider::presets::Rate) -> RawSiteRule {
        RawSiteRule {
            name: rate.name.to_owned(),
            unit: None,
            limit: rate.limit,
            window_secs: rate.window_secs,
            steps: rate.steps.map(<[usize]>::to_vec),
        }
    }
}

/// Parses site-wide rules (`spend`, `rate_limits`): they count paid calls for the whole site.
pub fn site_rules(list: &[RawSiteRule], field: &str) -> Result<Vec<Rule>, ConfigError> {
    let mut out: Vec<Rule> = Vec::new();
    for (i, r) in list.iter().enumerate() {
        let at = |f: &str| format!("{field}[{i}].{f}");
        if r.steps.is_some() && field == "spend" {
            return Err(err(
                at("steps"),
                "a spend limit counts paid links, not calls: \"steps\" belongs to provider.rate_limits",
            ));
        }
        if r.unit.is_some() && field != "spend" {
            return Err(err(
                at("unit"),
                "a provider's rate counts calls: \"unit\" belongs to spend limits and rules",
            ));
        }
        let name = rule_name(&r.name, &at, "\"day\"")?;
        let unit = unit(&at, r.unit.as_deref(), Algorithm::Fixed, None)?;
        let (limit, window_secs) = match unit {
            Unit::Requests => limit_and_window(&at, (r.limit, r.window_secs), "paid calls", "")?,
            Unit::Bytes => bytes_limit_and_window(&at, (r.limit, r.window_secs))?,
        };
        out.push(Rule {
            name,
            key: KeyKind::Global,
            algorithm: Algorithm::Fixed,
            limit,
            window_secs,
            unit,
            key_template: default_key_template(KeyKind::Global),
        });
    }
    Ok(out)
}

/// Which steps' calls each rate counts, in order, from 0; None: every call. `steps` is the
/// number of steps, which the numbers must name.
pub fn counted_steps(
    list: &[RawSiteRule],
    field: &str,
    steps: usize,
) -> Result<Vec<Option<Vec<usize>>>, ConfigError> {
    list.iter()
        .enumerate()
        .map(|(i, r)| match &r.steps {
            None => Ok(None),
            Some(numbers)
                if !numbers.is_empty() && numbers.iter().all(|n| (1..=steps).contains(n)) =>
            {
                Ok(Some(numbers.iter().map(|n| n - 1).collect()))
            }
            Some(_) => Err(err(
                format!("{field}[{i}].steps"),
                format!("lists the steps whose calls it counts, numbered 1 to {steps}"),
            )),
        })
        .collect()
}

/// The largest number of shorter windows a provider's rate is cut into on a store of fixed
/// windows only.
const MAX_PARTS: u32 = 12;

/// A provider's published rate as a rule that never admits more than `limit` calls in any
/// `window_secs`, however the calls fall. With a store that keeps one record per call (MySQL,
/// Redis) that is the sliding window itself. A store of fixed windows (the file store) starts a
/// window at its first call, so up to twice the limit passes around a window's edge; there the
/// window is cut into `k` parts, each admitting `limit / (k + 1)`: any span of `window_secs`
/// meets at most `k + 1` of them (they do not overlap, and each lasts `window_secs / k`). The `k`
/// chosen (a divisor of the window, at most [`MAX_PARTS`]) lets the most calls through in a
/// steady stream; a limit of 1 stays as it is (its windows begin at calls a window apart).
pub fn never_over(rule: &Rule, sliding: bool) -> Rule {
    if sliding {
        return Rule {
            algorithm: Algorithm::Sliding,
            ..rule.clone()
        };
    }
    let (limit, window) = (rule.limit.get(), rule.window_secs.get());
    let best = (1..=MAX_PARTS.min(window))
        .filter(|k| window.is_multiple_of(*k) && limit / (k + 1) >= 1)
        .max_by_key(|k| {
            (
                u64::from(limit / (k + 1)) * u64::from(*k),
                std::cmp::Reverse(*k),
            )
        });
    match best {
        Some(k) => Rule {
            algorithm: Algorithm::Fixed,
            limit: NonZeroU32::new(limit / (k + 1)).expect("at least 1"),
            window_secs: NonZeroU32::new(window / k).expect("a divisor"),
            ..rule.clone()
        },
        None => rule.clone(),
    }
}

/// Raw `spend` list of the configuration.
pub fn raw_site_rules(v: Value, field: &str) -> Result<Vec<RawSiteRule>, ConfigError> {
    serde_json::from_value(v).map_err(|e| list_error(&e.to_string(), field))
}

/// [`raw_site_rules`] of the list's JSON text, read straight into its rules (no `Value` in
/// between), with the same messages.
pub fn raw_site_rules_in(text: &str, field: &str) -> Result<Vec<RawSiteRule>, ConfigError> {
    serde_json::from_str(text).map_err(|e| {
        // Where in the list's own text is of no use: the error names the field.
        let shown = e.to_string();
        let place = format!(" at line {} column {}", e.line(), e.column());
        list_error(shown.strip_suffix(&place).unwrap_or(&shown), field)
    })
}

/// The error of a list of site rules serde could not read (`message`, its value cut out).
fn list_error(message: &str, field: &str) -> ConfigError {
    let e = crate::config::redact::without_quoted_value(message);
    err(
        field,
        format!("{e}; write [{{\"name\": \"day\", \"limit\": 500, \"window_secs\": 86400}}]"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::decision::Decision;
    use crate::core::limiter::{State, Write, decide};

    fn rule(limit: u32, window_secs: u32) -> Rule {
        Rule::new(
            "provider-minute",
            KeyKind::Global,
            Algorithm::Fixed,
            limit,
            window_secs,
            crate::support::defaults::KEY_TEMPLATE_GLOBAL,
        )
        .unwrap()
    }

    /// Offers a call at each of `times` (ms) to `r` as a store of one key would, and returns
    /// the times admitted.
    fn admitted(r: &Rule, times: &[u64]) -> Vec<u64> {
        let mut state = match r.algorithm {
            Algorithm::Fixed => State::Fixed(None),
            Algorithm::Sliding => State::Sliding(Vec::new()),
        };
        let mut out = Vec::new();
        for &t in times {
            let outcome = decide(&[r], std::slice::from_ref(&state), t);
            match (&mut state, outcome.writes[0]) {
                (_, Write::Keep) => {}
                (s, Write::Counter(c)) => *s = State::Fixed(Some(c)),
                (State::Sliding(v), Write::Append) => v.push(t),
                (s, Write::Append) => panic!("append to {s:?}"),
            }
            if matches!(outcome.decision, Decision::Admit { .. }) {
                out.push(t);
            }
        }
        out
    }

    /// The most admitted times within any span of `window_ms`.
    fn busiest(times: &[u64], window_ms: u64) -> usize {
        (0..times.len())
            .map(|i| {
                times[i..]
                    .iter()
                    .take_while(|t| **t < times[i] + window_ms)
                    .count()
            })
            .max()
            .unwrap_or(0)
    }

    /// Calls at pseudo-random times, bursts included (a fixed seed: the same run every time).
    fn arrivals(n: usize, spread_ms: u64, seed: u64) -> Vec<u64> {
        let mut x = seed;
        let mut t = 1_000_000;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                t += if x.is_multiple_of(5) {
                    0
                } else {
                    x % spread_ms
                };
                t
            })
            .collect()
    }

    #[test]
    fn a_list_read_from_its_text_is_refused_as_from_its_value() {
        for text in [
            "5",
            "{}",
            r#"[{"name": "day"}]"#,
            r#"[{"name": "day", "limit": "500", "window_secs": 60}]"#,
            r#"[{"name": "day", "limit": -1, "window_secs": 60}]"#,
            r#"[{"name": "day", "limit": 1.5, "window_secs": 60}]"#,
            r#"[{"name": "day", "limit": 1e30, "window_secs": 60}]"#,
            r#"[{"name": "day", "limit": 5, "window_secs": 60, "every": 2}]"#,
            r#"[{"name": 7, "limit": 5, "window_secs": 60}]"#,
            r#"[{"name": "day", "limit": 5, "window_secs": 60, "steps": "all"}]"#,
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            let from_value = raw_site_rules(value, "spend").err().unwrap();
            let from_text = raw_site_rules_in(text, "spend").err().unwrap();
            assert_eq!(from_text.to_string(), from_value.to_string(), "{text}");
            assert!(!from_text.to_string().contains("line 1"), "{text}");
        }
        let read = raw_site_rules_in(r#"[{"name": "day", "limit": 5, "window_secs": 60}]"#, "x");
        assert_eq!(site_rules(&read.unwrap(), "spend").unwrap().len(), 1);
    }

    #[test]
    fn a_fixed_window_alone_lets_twice_the_rate_through_at_its_edge() {
        let r = rule(250, 60);
        let edge = 1_000_000 + 60_000;
        let times: Vec<u64> = (0..250)
            .map(|_| edge - 1)
            .chain((0..250).map(|_| edge))
            .collect();
        assert_eq!(admitted(&r, &[1_000_000]).len(), 1);
        let mut all = vec![1_000_000];
        all.extend(&times);
        assert!(
            busiest(&admitted(&r, &all), 60_000) > 250,
            "the fault this mends"
        );
    }

    #[test]
    fn the_rules_made_never_admit_more_than_the_rate_in_any_window() {
        for (limit, window) in [
            (250, 60),
            (12, 1),
            (600, 60),
            (300, 60),
            (60, 3600),
            (10, 60),
            (5, 60),
            (2, 7),
            (1, 60),
        ] {
            let published = rule(limit, window);
            let window_ms = u64::from(window) * 1000;
            for sliding in [false, true] {
                let made = never_over(&published, sliding);
                assert_eq!(made.name, published.name);
                for seed in 1..=4 {
                    let times = arrivals(1200, window_ms / u64::from(limit).max(1) * 2, seed);
                    let got = admitted(&made, &times);
                    assert!(
                        busiest(&got, window_ms) <= limit as usize,
                        "{limit}/{window}s sliding={sliding} seed={seed}: {made:?}"
                    );
                    assert!(!got.is_empty());
                }
            }
        }
    }

    #[test]
    fn the_cut_keeps_most_of_the_rate() {
        let cut = |l, w| {
            let r = never_over(&rule(l, w), false);
            (r.limit.get(), r.window_secs.get())
        };
        assert_eq!(cut(250, 60), (19, 5), "228 a minute of 250");
        assert_eq!(cut(600, 60), (46, 5));
        assert_eq!(cut(12, 1), (6, 1));
        assert_eq!(cut(60, 3600), (6, 400), "54 an hour of 60");
        assert_eq!(cut(10, 60), (2, 15));
        assert_eq!(cut(1, 60), (1, 60));
        let sliding = never_over(&rule(250, 60), true);
        assert_eq!(
            (
                sliding.algorithm,
                sliding.limit.get(),
                sliding.window_secs.get()
            ),
            (Algorithm::Sliding, 250, 60)
        );
    }
}
