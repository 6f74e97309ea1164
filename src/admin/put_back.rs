//! What putting the previous settings back changes, by the short names the dashboard's notice
//! lists: compared value by value, the `admin` section left out (a restore keeps it). Pure.

use serde_json::Value;

use super::settings_form::Values;
use crate::config::schema;

/// What putting `to` back in place of `from` changes, by the short names the dashboard's
/// notice lists (`settings_page::PUT_BACK`); the `admin` section is not compared (a restore
/// keeps it).
pub fn put_back(from: &Value, to: &Value) -> Vec<&'static str> {
    let (a, b) = (Values::of(from, ""), Values::of(to, ""));
    let mut put = Vec::new();
    for (name, x, y) in [
        ("provider", &a.provider, &b.provider),
        ("spend_day", &a.spend_day, &b.spend_day),
        ("spend_month", &a.spend_month, &b.spend_month),
        ("visitor_minute", &a.visitor_minute, &b.visitor_minute),
        ("visitor_day", &a.visitor_day, &b.visitor_day),
        (
            "visitor_bytes_day",
            &a.visitor_bytes_day,
            &b.visitor_bytes_day,
        ),
        ("max_file_bytes", &a.max_file_bytes, &b.max_file_bytes),
        ("max_links", &a.max_links, &b.max_links),
        ("origins", &a.origins, &b.origins),
        ("block", &a.block, &b.block),
        ("allow", &a.allow, &b.allow),
    ] {
        if x != y {
            put.push(name);
        }
    }
    if schema::PROVIDER_TOKEN.of(from) != schema::PROVIDER_TOKEN.of(to) {
        put.insert(usize::from(put.first() == Some(&"provider")), "token");
    }
    // What the form does not show: every section but those it shows whole, and the
    // `request` section without the one field of it the form shows.
    let rest = |json: &Value| {
        let mut map = json.as_object().cloned().unwrap_or_default();
        for shown in [
            schema::ADMIN,
            schema::PROVIDER,
            schema::SPEND,
            schema::RULES,
            schema::MAX_FILE_BYTES,
            schema::ALLOWED_ORIGINS,
            schema::BLOCK,
            schema::ALLOW,
        ] {
            map.remove(shown.section());
        }
        if let Some(Value::Object(request)) = map.get_mut(schema::REQUEST.section()) {
            request.remove(schema::REQUEST_MAX_LINKS.name());
            if request.is_empty() {
                map.remove(schema::REQUEST.section());
            }
        }
        map
    };
    if rest(from) != rest(to) || (put.is_empty() && strip_admin(from) != strip_admin(to)) {
        put.push("other");
    }
    put
}

/// `json` without its `admin` section.
fn strip_admin(json: &Value) -> Value {
    let mut json = json.clone();
    if let Some(map) = json.as_object_mut() {
        map.remove(schema::ADMIN.section());
    }
    json
}

#[cfg(test)]
mod tests {
    use super::put_back;

    #[test]
    fn a_restore_names_what_it_puts_back_and_never_the_password() {
        let now = serde_json::json!({
            "provider": {"preset": "realdebrid", "token": "a"},
            "spend": [{"name": "day", "limit": 50, "window_secs": 86400}],
            "admin": {"password_hash": "new"}
        });
        let before = serde_json::json!({
            "provider": {"kind": "echo"},
            "spend": [{"name": "day", "limit": 40, "window_secs": 86400}],
            "cache": {"ttl_secs": 60}
        });
        assert_eq!(
            put_back(&now, &before),
            ["provider", "token", "spend_day", "other"]
        );
        let mut same = now.clone();
        same["admin"]["password_hash"] = "old".into();
        assert!(put_back(&now, &same).is_empty());
    }

    /// The largest file and the links per request are named as the form names them, not as
    /// settings written by hand; the rest of `request` still is.
    #[test]
    fn the_fields_of_the_form_outside_the_limits_are_named_alone() {
        let now = serde_json::json!({"max_file_bytes": 1000, "request": {"max_links": 5}});
        let before = serde_json::json!({});
        assert_eq!(put_back(&now, &before), ["max_file_bytes", "max_links"]);
        let before = serde_json::json!({"request": {"max_links": 5, "max_body_bytes": 4096},
                                        "max_file_bytes": 1000});
        assert_eq!(put_back(&now, &before), ["other"]);
    }
}
