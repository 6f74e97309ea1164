//! The tokens of the providers not in use: choosing another provider in the settings keeps
//! the one it leaves (in `config.json.tokens` beside the configuration, mode 600, never shown),
//! and choosing a provider again with the token field empty takes its kept token back, so
//! that a secret the owner did not clear is never dropped. Pure: the file is `config_file`'s.

use serde_json::{Map, Value};

use super::settings_form::{Secrets, Values};
use crate::config::schema;

/// The token kept for `provider` in `kept` (the file's JSON), if any.
fn kept_for<'k>(kept: &'k Value, provider: &str) -> Option<&'k str> {
    kept[provider].as_str().filter(|t| !t.trim().is_empty())
}

/// The token the form means: the one typed, else, when it chooses another provider than
/// `json`'s, the one kept for it. True when it was taken from `kept`.
pub fn fill(values: &Values, secrets: &mut Secrets, json: &Value, kept: &Value) -> bool {
    let now = Values::of(json, "");
    if !secrets.token.trim().is_empty() || values.provider == now.provider {
        return false;
    }
    match kept_for(kept, &values.provider) {
        Some(token) => {
            secrets.token = token.to_owned();
            true
        }
        None => false,
    }
}

/// The file's JSON once the provider of `json` (the configuration before the save) was left
/// for `values.provider`: the token of the one left kept under its name, the one chosen no
/// longer kept (it is in the configuration again). None when nothing changes.
pub fn after_save(values: &Values, json: &Value, kept: &Value) -> Option<Value> {
    let left = schema::PROVIDER_PRESET.of(json).as_str();
    if left == Some(values.provider.as_str()) {
        return None;
    }
    let mut map = kept.as_object().cloned().unwrap_or_else(Map::new);
    let before = map.clone();
    if let Some(left) = left
        && let Some(token) = schema::PROVIDER_TOKEN
            .of(json)
            .as_str()
            .filter(|t| !t.is_empty())
    {
        map.insert(left.to_owned(), Value::String(token.to_owned()));
    }
    map.remove(&values.provider);
    (map != before).then_some(Value::Object(map))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values(provider: &str) -> Values {
        Values {
            provider: provider.into(),
            ..Values::default()
        }
    }

    #[test]
    fn a_provider_left_keeps_its_token_and_coming_back_takes_it() {
        let rd = json!({"provider": {"preset": "realdebrid", "token": "tok-RD"}});
        // To echo: the token is kept under its provider's name.
        let kept = after_save(&values("echo"), &rd, &Value::Null).expect("kept");
        assert_eq!(kept, json!({"realdebrid": "tok-RD"}));
        // Back to Real-Debrid with the field empty: the kept token is used, then no longer kept.
        let echo = json!({"provider": {"kind": "echo"}});
        let mut secrets = Secrets::default();
        assert!(fill(&values("realdebrid"), &mut secrets, &echo, &kept));
        assert_eq!(secrets.token, "tok-RD");
        assert_eq!(
            after_save(&values("realdebrid"), &echo, &kept),
            Some(json!({}))
        );
        // A token typed wins; the provider in use is never filled from the file.
        let mut typed = Secrets {
            token: "tok-NEW".into(),
            ..Secrets::default()
        };
        assert!(!fill(&values("realdebrid"), &mut typed, &echo, &kept));
        assert_eq!(typed.token, "tok-NEW");
        let mut same = Secrets::default();
        assert!(!fill(&values("realdebrid"), &mut same, &rd, &kept));
        assert!(same.token.is_empty());
        // From one preset to another: the one left is kept, the one chosen taken out.
        let both = json!({"alldebrid": "tok-AD"});
        assert_eq!(
            after_save(&values("alldebrid"), &rd, &both),
            Some(json!({"realdebrid": "tok-RD"}))
        );
    }
}
