//! The `api_keys` section: the header keys arrive in, whether one is required, and the keys
//! accepted (stored as hashes), each with its own rules.

use crate::config::error::{ConfigError, err};
use crate::config::raw::RawApiKeys;
use crate::config::rules::{check_algorithms, key_rules};
use crate::core::rule::{KeyKind, RuleName};
use crate::http::api_key::{KeyPolicy, KnownKey};
use crate::store::settings::StoreKind;
use crate::support::defaults;

pub(crate) fn api_keys(
    raw: Option<RawApiKeys>,
    store: &StoreKind,
) -> Result<KeyPolicy, ConfigError> {
    let raw = raw.unwrap_or(RawApiKeys {
        header: None,
        require: None,
        keys: None,
    });
    let header = raw
        .header
        .unwrap_or_else(|| defaults::API_KEY_HEADER.to_owned());
    if header.eq_ignore_ascii_case("Authorization")
        || header.eq_ignore_ascii_case("Proxy-Authorization")
    {
        return Err(err(
            "api_keys.header",
            "Apache does not pass Authorization to CGI programs (without CGIPassAuth): use a header such as \"X-API-Key\"",
        ));
    }
    if !crate::http::request::is_header_name(&header) {
        return Err(err(
            "api_keys.header",
            "must be letters, digits and '-' (Apache drops headers with '_'), e.g. \"X-API-Key\"",
        ));
    }
    let mut keys: Vec<KnownKey> = Vec::new();
    for (i, k) in raw.keys.unwrap_or_default().into_iter().enumerate() {
        let at = |f: &str| format!("api_keys.keys[{i}].{f}");
        if RuleName::new(&k.name).is_none() {
            return Err(err(at("name"), "must be 1 to 32 of a-z, 0-9, '_' and '-'"));
        }
        if keys.iter().any(|o| o.name == k.name) {
            return Err(err(
                at("name"),
                format!("{:?} is used by another key", k.name),
            ));
        }
        let sha256 = k.sha256.to_ascii_lowercase();
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(err(
                at("sha256"),
                "must be the key's SHA-256 in hex (64 characters): `resolve hash-key` prints it; never write the key itself",
            ));
        }
        if keys.iter().any(|o| o.sha256 == sha256) {
            return Err(err(at("sha256"), "the same key is listed twice"));
        }
        let own = match k.rules {
            None => None,
            Some(list) => {
                // `rules[1].limit` of the list is `api_keys.keys[0].rules[1].limit` here.
                let within = |e: ConfigError| {
                    let field = e.field.strip_prefix("rules").unwrap_or(&e.field);
                    err(format!("{}{field}", at("rules")), e.message)
                };
                let parsed = key_rules(list).map_err(within)?;
                if let Some(j) = parsed.iter().position(|r| r.key != KeyKind::ApiKey) {
                    return Err(err(
                        format!("{}[{j}].key", at("rules")),
                        "a key's own rules count that key: use \"api_key\"",
                    ));
                }
                check_algorithms(&parsed, store).map_err(within)?;
                Some(parsed)
            }
        };
        keys.push(KnownKey {
            name: k.name,
            sha256,
            rules: own,
        });
    }
    Ok(KeyPolicy {
        header,
        require: raw.require.unwrap_or(false),
        keys,
    })
}
