//! The `rules` section: each limit checked (name, key, algorithm, unit, limit, window, key
//! template), and whether the chosen store can keep its algorithm.

use std::num::NonZeroU32;
use std::sync::OnceLock;

use crate::config::error::{ConfigError, err};
use crate::config::raw::RawRule;
use crate::core::key::{KeyTemplate, Placeholder, RESERVED_PREFIXES};
use crate::core::rule::{Algorithm, KeyKind, Rule, RuleName, Unit};
use crate::store::mysql::schema::KEY_COLUMN_LEN;
use crate::store::settings::StoreKind;
use crate::support::defaults;

/// Longest window a rule may have: a year.
const MAX_WINDOW_SECS: u64 = 366 * 24 * 3600;

/// The rules of `list`; `taken` are rules of other lists counted in the same store (the spend
/// limits), whose keys no rule of the list may make either.
pub(crate) fn rules(list: Vec<RawRule>, taken: &[Rule]) -> Result<Vec<Rule>, ConfigError> {
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
        let unit = unit(&at, r.unit.as_deref(), algorithm, r.mode.as_deref())?;
        let (limit, window) = match unit {
            Unit::Requests => {
                limit_and_window(&at, (r.limit, r.window_secs), "requests", " (a year)")?
            }
            Unit::Bytes => bytes_limit_and_window(&at, (r.limit, r.window_secs))?,
        };
        let key_template = match &r.key_template {
            None => default_key_template(key),
            Some(text) => key_template(text, key, &name, &at("key_template"))?,
        };
        // Identities written as marks no address or key holds: equal keys, equal templates.
        // Two rules on one key would each prune, expire or count it by their own window and
        // algorithm (and a request counted by both would be recorded twice): no store can keep
        // both exact, so each rule counts under keys of its own.
        // The rules before this one are `out`, in order.
        let same = |o: &Rule| {
            key_template.same_key(
                (name.as_str(), mark(key)),
                &o.key_template,
                (o.name.as_str(), mark(o.key)),
            )
        };
        let other = match out.iter().position(same) {
            Some(j) => Some(format!("rules[{j}]")),
            None => taken
                .iter()
                .position(same)
                .map(|j| format!("the spend limit {:?}", taken[j].name.as_str())),
        };
        if let Some(other) = other {
            return Err(err(
                at("key_template"),
                format!(
                    "makes the same keys as {other}: add {{rule}} or other text, so that each rule counts on its own"
                ),
            ));
        }
        out.push(Rule {
            name,
            key,
            algorithm,
            limit,
            window_secs: window,
            unit,
            key_template,
        });
    }
    Ok(out)
}

/// A mark no address or key holds, one for each kind of key: two rules make the same keys
/// exactly when their keys for their marks are the same.
fn mark(kind: KeyKind) -> &'static str {
    match kind {
        KeyKind::Ip => "\0ip",
        KeyKind::ApiKey => "\0api_key",
        KeyKind::Global => "\0global",
    }
}

/// The site's rules: those enforced, and those in shadow mode (`"mode": "shadow"`), which count
/// and report what they would refuse without refusing anything.
pub(crate) fn site_rules(
    list: Vec<RawRule>,
    spend: &[Rule],
) -> Result<(Vec<Rule>, Vec<Rule>), ConfigError> {
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
    let all = rules(list, spend)?;
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
    rules(list, &[])
}

/// How the keys of a rule that counts by `kind` are written when it names no template: each
/// default parsed once in the process and shared by every rule that uses it.
pub fn default_key_template(kind: KeyKind) -> KeyTemplate {
    static PARSED: [OnceLock<KeyTemplate>; 3] = [const { OnceLock::new() }; 3];
    let (i, text) = match kind {
        KeyKind::Ip => (0, defaults::KEY_TEMPLATE_IP),
        KeyKind::ApiKey => (1, defaults::KEY_TEMPLATE_API_KEY),
        KeyKind::Global => (2, defaults::KEY_TEMPLATE_GLOBAL),
    };
    KeyTemplate::shared(
        PARSED[i].get_or_init(|| KeyTemplate::parse_static(text).expect("valid default template")),
    )
}

/// A rule's `key_template`: placeholders it knows, the one of its key kind, text before it (the
/// prefix sweeps look for), no key that could be one of resolve's own, and keys that fit the
/// store's key column.
fn key_template(
    text: &str,
    kind: KeyKind,
    rule: &RuleName,
    field: &str,
) -> Result<KeyTemplate, ConfigError> {
    let example = match kind {
        KeyKind::Ip => "\"resolve:{ip}\"",
        KeyKind::ApiKey => "\"login:{api_key}\"",
        KeyKind::Global => "\"resolve:{rule}\"",
    };
    let template = KeyTemplate::parse(text).map_err(|e| {
        err(
            field,
            format!("{e}: write text with {{ip}}, {{api_key}} or {{rule}} in it, e.g. {example}"),
        )
    })?;
    let own = match kind {
        KeyKind::Ip => Some(Placeholder::Ip),
        KeyKind::ApiKey => Some(Placeholder::ApiKey),
        KeyKind::Global => None,
    };
    if let Some(other) = [Placeholder::Ip, Placeholder::ApiKey]
        .into_iter()
        .find(|p| Some(*p) != own && template.uses(*p))
    {
        let counts = match kind {
            KeyKind::Ip => "counts by address: use {ip}",
            KeyKind::ApiKey => "counts by API key: use {api_key}",
            KeyKind::Global => "counts the whole site: remove it",
        };
        return Err(err(
            field,
            format!(
                "has {}, but the rule {counts}, e.g. {example}",
                other.written()
            ),
        ));
    }
    if let Some(own) = own
        && !template.uses(own)
    {
        return Err(err(
            field,
            format!(
                "has no {}: every client would share one count; add it, e.g. {example} (or use \"key\": \"global\")",
                own.written()
            ),
        ));
    }
    if template.prefix(rule.as_str()).is_empty() {
        return Err(err(
            field,
            format!(
                "starts with a placeholder: begin with text, e.g. {example}; sweeps delete only rows whose keys start with it"
            ),
        ));
    }
    if let Some(reserved) = RESERVED_PREFIXES
        .into_iter()
        .find(|p| template.can_start_with(rule.as_str(), p))
    {
        return Err(err(
            field,
            format!(
                "can make keys that start with {reserved:?}, which resolve keeps for its own records (the block list, cached answers, the usage journal, counts of refusals and sign-ins): begin it with other text, e.g. {example}"
            ),
        ));
    }
    let longest = template.longest_key(rule.as_str());
    if longest > KEY_COLUMN_LEN {
        return Err(err(
            field,
            format!(
                "makes keys of up to {longest} characters, but the store's key column holds {KEY_COLUMN_LEN}: shorten its text"
            ),
        ));
    }
    Ok(template)
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

/// A rule's unit: requests unless `"unit": "bytes"`, which counts the files' sizes, on a fixed
/// window (one record per request cannot hold sizes) and enforced (a shadow rule counts
/// requests only).
pub(crate) fn unit(
    at: &dyn Fn(&str) -> String,
    unit: Option<&str>,
    algorithm: Algorithm,
    mode: Option<&str>,
) -> Result<Unit, ConfigError> {
    let unit = match unit {
        None => return Ok(Unit::Requests),
        Some(u) => Unit::parse(u).ok_or_else(|| {
            err(
                at("unit"),
                format!("{u:?}: use \"requests\" (the default: each request counts 1) or \"bytes\" (each file counts its size)"),
            )
        })?,
    };
    if unit == Unit::Bytes && algorithm == Algorithm::Sliding {
        return Err(err(
            at("unit"),
            "a rule of bytes counts on a fixed window: remove \"algorithm\": \"sliding\"",
        ));
    }
    if unit == Unit::Bytes && mode == Some("shadow") {
        return Err(err(
            at("unit"),
            "a shadow rule counts requests: remove \"unit\" or \"mode\"",
        ));
    }
    Ok(unit)
}

/// The smallest limit of a rule of bytes: 1 MB (a smaller one would refuse nearly every file).
pub(crate) const MIN_BYTES_LIMIT: u64 = 1_000_000;

/// A rule of bytes' limit, 1 MB to 4 TiB, counted in whole kibibytes (rounded down), and its
/// window, as [`limit_and_window`].
pub(crate) fn bytes_limit_and_window(
    at: &dyn Fn(&str) -> String,
    (limit, window_secs): (u64, u64),
) -> Result<(NonZeroU32, NonZeroU32), ConfigError> {
    let max = u64::from(u32::MAX) * Unit::KIB;
    if !(MIN_BYTES_LIMIT..=max).contains(&limit) {
        return Err(err(
            at("limit"),
            format!(
                "a rule of bytes takes a limit in bytes, {MIN_BYTES_LIMIT} (1 MB) to {max} (4 TiB) per window, e.g. 20000000000 for 20 GB"
            ),
        ));
    }
    let (_, window) = limit_and_window(at, (1, window_secs), "bytes", " (a year)")?;
    let kib = u32::try_from(limit / Unit::KIB).expect("at most u32::MAX KiB");
    Ok((NonZeroU32::new(kib).expect("1 MB is 976 KiB"), window))
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

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    fn rules(rules: &str) -> Result<Config, crate::config::error::ConfigError> {
        Config::from_json(&format!(r#"{{"rules": {rules}}}"#), Path::new("/"))
    }

    #[test]
    fn a_rule_may_count_bytes() {
        use crate::core::rule::Unit;
        let c = rules(
            r#"[{"name": "ip", "key": "ip", "limit": 30, "window_secs": 60},
                {"name": "ip-bytes", "key": "ip", "unit": "bytes", "limit": 20000000000, "window_secs": 86400},
                {"name": "k", "key": "api_key", "unit": "requests", "limit": 5, "window_secs": 60},
                {"name": "site", "key": "global", "unit": "bytes", "limit": 1000000, "window_secs": 60}]"#,
        )
        .unwrap();
        let units: Vec<_> = c.rules.iter().map(|r| (r.unit, r.limit.get())).collect();
        // Bytes are counted in whole kibibytes, the limit rounded down.
        assert_eq!(
            units,
            [
                (Unit::Requests, 30),
                (Unit::Bytes, 19_531_250),
                (Unit::Requests, 5),
                (Unit::Bytes, 976)
            ]
        );
        assert_eq!(c.rules[1].configured_limit(), 20_000_000_000 / 1024 * 1024);
        for (rule, field, says) in [
            (r#""unit": "octets", "limit": 1000000"#, "unit", "\"bytes\""),
            (
                r#""unit": "bytes", "limit": 999999"#,
                "limit",
                "1000000 (1 MB)",
            ),
            (
                r#""unit": "bytes", "limit": 4398046511105"#,
                "limit",
                "(4 TiB)",
            ),
            (
                r#""unit": "bytes", "algorithm": "sliding", "limit": 1000000"#,
                "unit",
                "fixed window",
            ),
            (
                r#""unit": "bytes", "mode": "shadow", "limit": 1000000"#,
                "unit",
                "shadow rule",
            ),
        ] {
            let e = rules(&format!(
                r#"[{{"name": "r", "key": "ip", {rule}, "window_secs": 60}}]"#
            ))
            .unwrap_err();
            assert_eq!(e.field, format!("rules[0].{field}"), "{rule}");
            assert!(e.message.contains(says), "{rule}: {}", e.message);
        }
        // A spend limit may count bytes; a provider's rate counts calls.
        let c = Config::from_json(
            r#"{"spend": [{"name": "day", "unit": "bytes", "limit": 2000000, "window_secs": 86400}]}"#,
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(c.budget()[0].unit, Unit::Bytes);
        let e = Config::from_json(
            r#"{"spend": [{"name": "day", "unit": "bytes", "limit": 5, "window_secs": 86400}]}"#,
            Path::new("/"),
        )
        .unwrap_err();
        assert_eq!(e.field, "spend[0].limit");
        // The largest file served: at least 1 MB.
        let max =
            |v: u64| Config::from_json(&format!(r#"{{"max_file_bytes": {v}}}"#), Path::new("/"));
        assert_eq!(
            max(10_000_000_000).unwrap().max_file_bytes,
            Some(10_000_000_000)
        );
        let e = max(999_999).unwrap_err();
        assert_eq!(e.field, "max_file_bytes");
        assert!(e.message.contains("10000000000 for 10 GB"), "{}", e.message);
        assert_eq!(
            Config::from_json("{}", Path::new("/"))
                .unwrap()
                .max_file_bytes,
            None
        );
    }

    #[test]
    fn templates_write_the_keys_another_program_writes() {
        let c = rules(
            r#"[{"name": "ip", "key": "ip", "limit": 30, "window_secs": 60, "key_template": "resolve:{ip}"},
                {"name": "day", "key": "ip", "limit": 300, "window_secs": 86400},
                {"name": "k", "key": "api_key", "limit": 5, "window_secs": 60, "key_template": "login:{api_key}"},
                {"name": "site", "key": "global", "limit": 900, "window_secs": 60, "key_template": "all:{rule}"}]"#,
        )
        .unwrap();
        let keys: Vec<String> = c.rules.iter().map(|r| r.key_for("42")).collect();
        assert_eq!(
            keys,
            ["resolve:42", "resolve:day:42", "login:42", "all:site"]
        );
        assert_eq!(c.masked_json()["rules"][0]["key_template"], "resolve:{ip}");
        assert_eq!(
            c.masked_json()["rules"][1]["key_template"],
            "resolve:{rule}:{ip}"
        );
    }

    #[test]
    fn template_mistakes_say_what_to_write() {
        let one = |kind: &str, template: &str| {
            rules(&format!(
                r#"[{{"name": "r", "key": "{kind}", "limit": 1, "window_secs": 1, "key_template": {template:?}}}]"#
            ))
            .unwrap_err()
        };
        for (kind, template, says) in [
            ("ip", "resolve:{addr}", "{addr} is not a placeholder"),
            ("ip", "resolve:{ip", "brace"),
            ("ip", "resolve: {ip}", "printable ASCII"),
            ("ip", "resolve:", "has no {ip}"),
            (
                "ip",
                "resolve:{api_key}",
                "has {api_key}, but the rule counts by address",
            ),
            (
                "api_key",
                "login:{ip}",
                "has {ip}, but the rule counts by API key",
            ),
            ("global", "all:{ip}", "counts the whole site: remove it"),
            ("ip", "{ip}:resolve", "begin with text"),
            ("ip", "resolve:~{ip}", "start with \"resolve:~\""),
            ("ip", "resolve:~{rule}:{ip}", "start with \"resolve:~\""),
            ("ip", "resolve:cache:{ip}", "start with \"resolve:cache:\""),
            (
                "ip",
                "resolve:journal:{ip}",
                "start with \"resolve:journal:\"",
            ),
            (
                "ip",
                "resolve:admin-signin:{ip}",
                "start with \"resolve:admin-signin:\"",
            ),
            (
                "api_key",
                "resolve:{api_key}:x",
                "start with \"resolve:cache:\"",
            ),
            ("global", "resolve:~blocks", "start with \"resolve:~\""),
            (
                "ip",
                &format!("{}{{ip}}", "x".repeat(149)),
                "up to 192 characters",
            ),
        ] {
            let e = one(kind, template);
            assert_eq!(e.field, "rules[0].key_template", "{template}");
            assert_eq!(
                e.at.map(|(line, _)| line),
                Some(1),
                "{template}: found in the file"
            );
            assert!(e.message.contains(says), "{template}: {}", e.message);
            assert!(
                e.message.contains("e.g. \"") || e.message.contains("shorten"),
                "{}",
                e.message
            );
        }
        let longest = format!("{}{{ip}}", "x".repeat(148));
        rules(&format!(
            r#"[{{"name": "r", "key": "ip", "limit": 1, "window_secs": 1, "key_template": "{longest}"}}]"#
        ))
        .unwrap();
        let e = rules(
            r#"[{"name": "a", "key": "ip", "limit": 1, "window_secs": 1, "key_template": "resolve:{ip}"},
                {"name": "b", "key": "ip", "limit": 9, "window_secs": 9, "key_template": "resolve:{ip}"}]"#,
        )
        .unwrap_err();
        assert_eq!(e.field, "rules[1].key_template");
        assert!(
            e.message.contains("the same keys as rules[0]"),
            "{}",
            e.message
        );
        // Text of resolve's own keys that no address or key id could follow is fine.
        rules(
            r#"[{"name": "a", "key": "ip", "limit": 1, "window_secs": 1, "key_template": "resolve:{ip}"},
                {"name": "b", "key": "api_key", "limit": 9, "window_secs": 9, "key_template": "resolve:{api_key}"},
                {"name": "cache", "key": "ip", "limit": 9, "window_secs": 9}]"#,
        )
        .unwrap();
        // A shadow rule is counted in the same store; so are spend limits (`resolve:NAME:*`).
        let e = rules(
            r#"[{"name": "a", "key": "ip", "limit": 1, "window_secs": 1, "key_template": "resolve:{ip}"},
                {"name": "b", "key": "ip", "algorithm": "sliding", "limit": 9, "window_secs": 9,
                 "key_template": "resolve:{ip}", "mode": "shadow"}]"#,
        )
        .unwrap_err();
        assert_eq!(e.field, "rules[1].key_template");
        let e = Config::from_json(
            r#"{"spend": [{"name": "day", "limit": 100, "window_secs": 86400}],
                "rules": [{"name": "all", "key": "global", "limit": 9, "window_secs": 60,
                           "key_template": "resolve:day:*"}]}"#,
            Path::new("/"),
        )
        .unwrap_err();
        assert_eq!(e.field, "rules[0].key_template");
        assert!(
            e.message
                .contains("the same keys as the spend limit \"day\": add {rule}"),
            "{}",
            e.message
        );
        // With the rule's name in them, or counting by something else, keys differ.
        rules(
            r#"[{"name": "a", "key": "ip", "limit": 1, "window_secs": 1, "key_template": "r:{rule}:{ip}"},
                {"name": "b", "key": "ip", "limit": 9, "window_secs": 9, "key_template": "r:{rule}:{ip}"},
                {"name": "c", "key": "api_key", "limit": 9, "window_secs": 9, "key_template": "r:a:{api_key}"}]"#,
        )
        .unwrap();
    }

    #[test]
    fn a_keys_own_rules_take_templates_too() {
        let c = Config::from_json(
            r#"{"api_keys": {"keys": [{"name": "42", "sha256": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                "rules": [{"name": "own", "key": "api_key", "limit": 1, "window_secs": 1, "key_template": "login:{api_key}"}]}]}}"#,
            Path::new("/"),
        )
        .unwrap();
        let own = &c.api_keys.keys[0].rules.as_ref().unwrap()[0];
        assert_eq!(own.key_for("42"), "login:42");
        let e = Config::from_json(
            r#"{"api_keys": {"keys": [{"name": "42", "sha256": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                "rules": [{"name": "own", "key": "api_key", "limit": 1, "window_secs": 1, "key_template": "login:{ip}"}]}]}}"#,
            Path::new("/"),
        )
        .unwrap_err();
        assert_eq!(e.field, "api_keys.keys[0].rules[0].key_template");
    }
}
