//! `admin`: the owner's dashboard, on when the section holds a password hash. The hash is a
//! secret of its own (it would let a guesser work offline): never shown. The dashboard keeps
//! its own secret in the data directory (`Config::data_dir`).

use serde::Serialize;

use crate::config::error::{ConfigError, err};
use crate::config::raw::RawAdmin;
use crate::core::rule::Rule;
use crate::support::defaults;
use crate::support::secret::Secret;

/// The dashboard's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Admin {
    /// Argon2id, in its standard PHC form (checked); masked wherever it is written.
    pub password_hash: Secret,
}

/// The section checked. `rules` and `spend` may not take the sign-in limit's name, dashboard
/// or not.
pub(crate) fn admin(
    raw: Option<RawAdmin>,
    rules: &[Rule],
    spend: &[Rule],
) -> Result<Option<Admin>, ConfigError> {
    check_reserved(rules, spend)?;
    let Some(raw) = raw else {
        return Ok(None);
    };
    let hash = raw.password_hash.ok_or_else(|| {
        err(
            "admin.password_hash",
            "is missing: make it with `resolve hash-password` (it reads the password on \
             standard input), or remove the admin section to keep the dashboard off",
        )
    })?;
    crate::support::password::check_hash(hash.trim())
        .map_err(|e| err("admin.password_hash", e.to_string()))?;
    Ok(Some(Admin {
        password_hash: Secret::new(hash.trim()),
    }))
}

/// The dashboard's sign-in limit counts in the same store as the rules: no rule may take its
/// name, whose keys it would share. The field is named only when one does.
fn check_reserved(rules: &[Rule], spend: &[Rule]) -> Result<(), ConfigError> {
    let taken = |r: &Rule| r.name.as_str().starts_with(defaults::ADMIN_SIGNIN_RULE);
    let field = match rules.iter().position(taken) {
        Some(i) => format!("rules[{i}].name"),
        None if spend.iter().any(taken) => "spend".to_owned(),
        None => return Ok(()),
    };
    Err(err(
        field,
        format!(
            "rule names that start with {:?} are kept for the dashboard's sign-in \
             limits: choose another",
            defaults::ADMIN_SIGNIN_RULE
        ),
    ))
}

#[cfg(test)]
mod tests {
    use crate::config::tests::parse;
    use std::path::Path;

    #[test]
    fn mistakes_name_the_field() {
        for (text, field) in [
            (r#"{"admin": {}}"#, "admin.password_hash"),
            (
                r#"{"admin": {"password_hash": "hunter2hunter2"}}"#,
                "admin.password_hash",
            ),
            (
                r#"{"rules": [{"name": "admin-signin", "key": "ip", "limit": 5, "window_secs": 60}]}"#,
                "rules[0].name",
            ),
            (
                r#"{"spend": [{"name": "admin-signin", "limit": 5, "window_secs": 60}]}"#,
                "spend",
            ),
            (
                r#"{"rules": [{"name": "admin-signin-site", "key": "global", "limit": 5, "window_secs": 60}]}"#,
                "rules[0].name",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.field, field, "{text}: {e}");
            assert!(e.message.len() > 10, "{e}");
        }
        // The password itself where its hash belongs: named, never quoted.
        let e = parse(r#"{"admin": {"password": "my dashboard password"}}"#).unwrap_err();
        assert!(e.message.contains("unknown field `password`"), "{e}");
        assert!(!e.to_string().contains("my dashboard password"), "{e}");
    }

    #[test]
    fn the_dashboard_is_on_with_a_hash_and_keeps_its_secret_in_the_data_directory() {
        let hash = crate::support::password::hash("twelve chars or more", &[1; 16]).unwrap();
        let c = parse(&format!(r#"{{"admin": {{"password_hash": "{hash}"}}}}"#)).unwrap();
        let admin = c.admin.as_ref().expect("on");
        assert_eq!(admin.password_hash.expose(), hash);
        assert_eq!(c.data_dir, Path::new("/home/u/resolve/ratelimit"));
        assert!(c.secrets().contains(&hash), "masked in logs");
        let shown = c.masked_json().to_string();
        assert!(
            shown.contains(r#""admin":{"password_hash":"***"}"#),
            "{shown}"
        );
        assert!(!shown.contains(&hash), "{shown}");
        // With a database store, beside the configuration all the same.
        let c = parse(&format!(
            r#"{{"admin": {{"password_hash": "{hash}"}},
                "store": {{"kind": "redis", "url": "redis://127.0.0.1:6379/0"}}}}"#
        ))
        .unwrap();
        assert_eq!(c.data_dir, Path::new("/home/u/resolve/ratelimit"));
        assert_eq!(parse("{}").unwrap().admin, None, "off by default");
        let e = parse(r#"{"admin": {"password_hash": "$argon2id$v=19$m=1024,t=1,p=1$MDEyMzQ1Njc4OWFiY2RlZg$aGFzaGhhc2hoYXNoaGFzaA"}}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("admin.password_hash (line 1, column 12): ")
                && e.message.contains("resolve hash-password"),
            "{e}"
        );
    }
}
