//! The settings' challenge fields as edits of the configuration: the site key shown and
//! changed, the secret only ever written (a blank field keeps the one there, and it is never
//! shown back), the whole `challenge` section removed when the site key is emptied. Pure.

use serde_json::{Value, json};

use crate::config::json_text::Edit;
use crate::config::schema;

/// What a site key or secret from Cloudflare's dashboard is made of.
fn key_like(s: &str) -> bool {
    (1..=256).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
}

/// The edits the form's site key and secret make against `json`, or the form field that is
/// wrong and why.
pub fn edits(
    site_key: &str,
    secret: &str,
    json: &Value,
) -> Result<Vec<Edit<'static>>, (&'static str, String)> {
    let (site_key, secret) = (site_key.trim(), secret.trim());
    let section = schema::CHALLENGE.find(json, &[]).is_some();
    let now = schema::CHALLENGE_SITE_KEY
        .of(json)
        .as_str()
        .unwrap_or_default();
    let has_secret = schema::CHALLENGE_SECRET
        .of(json)
        .as_str()
        .is_some_and(|s| !s.trim().is_empty());
    if site_key.is_empty() {
        if !secret.is_empty() {
            return Err((
                "challenge_site_key",
                "a secret key needs its site key: copy both from Turnstile in the Cloudflare dashboard".into(),
            ));
        }
        return Ok(if section && !now.is_empty() {
            vec![Edit {
                path: schema::CHALLENGE.steps(),
                value: None,
            }]
        } else {
            Vec::new()
        });
    }
    if !key_like(site_key) {
        return Err((
            "challenge_site_key",
            "the site key is letters, digits and - _ . : as Turnstile shows it".into(),
        ));
    }
    if !secret.is_empty() && !key_like(secret) {
        return Err((
            "challenge_secret",
            "the secret key is letters, digits and - _ . : as Turnstile shows it".into(),
        ));
    }
    if secret.is_empty() && !has_secret {
        return Err((
            "challenge_secret",
            "the secret key is needed with a site key: copy it from Turnstile in the Cloudflare dashboard".into(),
        ));
    }
    if !section {
        return Ok(vec![Edit {
            path: schema::CHALLENGE.steps(),
            value: Some(json!({"site_key": site_key, "secret": secret})),
        }]);
    }
    let mut edits = Vec::new();
    if site_key != now {
        edits.push(Edit {
            path: schema::CHALLENGE_SITE_KEY.steps(),
            value: Some(json!(site_key)),
        });
    }
    if !secret.is_empty() {
        edits.push(Edit {
            path: schema::CHALLENGE_SECRET.steps(),
            value: Some(json!(secret)),
        });
    }
    Ok(edits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(text: &str, site_key: &str, secret: &str) -> Result<Value, &'static str> {
        let json: Value = serde_json::from_str(text).unwrap();
        let edits = edits(site_key, secret, &json).map_err(|(f, _)| f)?;
        let out = crate::config::json_text::apply(text, &edits).unwrap();
        Ok(serde_json::from_str(&out).unwrap())
    }

    #[test]
    fn the_site_key_is_set_the_secret_written_or_kept_the_section_removed() {
        let made = applied("{}", "0x4AAA", "0x4BBB").unwrap();
        assert_eq!(
            made["challenge"],
            json!({"site_key": "0x4AAA", "secret": "0x4BBB"})
        );
        let text = r#"{"challenge": {"site_key": "0x4AAA", "secret": "0x4BBB", "when": "always"}}"#;
        // A blank secret keeps the one there.
        let kept = applied(text, "0x4CCC", "").unwrap();
        assert_eq!(kept["challenge"]["site_key"], "0x4CCC");
        assert_eq!(kept["challenge"]["secret"], "0x4BBB");
        assert_eq!(kept["challenge"]["when"], "always");
        let new_secret = applied(text, "0x4AAA", "0x4DDD").unwrap();
        assert_eq!(new_secret["challenge"]["secret"], "0x4DDD");
        // The site key emptied: no challenge.
        assert!(applied(text, "", "").unwrap().get("challenge").is_none());
        assert_eq!(applied("{}", "", "").unwrap(), json!({}));
        // Mistakes name their field.
        assert_eq!(applied("{}", "0x4AAA", ""), Err("challenge_secret"));
        assert_eq!(applied("{}", "", "0x4BBB"), Err("challenge_site_key"));
        assert_eq!(applied("{}", "a b", "x"), Err("challenge_site_key"));
        assert_eq!(applied("{}", "ab", "<x>"), Err("challenge_secret"));
    }
}
