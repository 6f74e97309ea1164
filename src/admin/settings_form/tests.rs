//! The forms' changes against hand-written files: only what differs is edited.

use super::*;
use crate::config::json_text::apply;

const STARTER: &str = crate::config::starter::TEXT;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

fn setup_values() -> Values {
    Values {
        provider: "realdebrid".into(),
        site: "https://Example.com/resolve/".into(),
        ..Values::of(&json(STARTER), "")
    }
}

fn secrets(token: &str, password: &str) -> Secrets {
    Secrets {
        code: String::new(),
        token: token.into(),
        password: password.into(),
        again: password.into(),
        current: String::new(),
        challenge_secret: String::new(),
    }
}

#[test]
fn the_starter_fills_the_form_with_its_safe_values() {
    let v = Values::of(&json(STARTER), "https://example.com");
    assert_eq!(v.provider, "echo");
    assert_eq!(
        (v.spend_day.as_str(), v.spend_month.as_str()),
        ("100", "1500")
    );
    assert_eq!(
        (v.visitor_minute.as_str(), v.visitor_day.as_str()),
        ("30", "300")
    );
    assert_eq!(v.origins, "");
}

#[test]
fn setup_writes_the_provider_the_origin_and_the_password_and_nothing_else() {
    let change = changes(
        Kind::Setup,
        &setup_values(),
        &secrets("tok-1", "twelve chars or more"),
        &json(STARTER),
    )
    .unwrap();
    assert_eq!(change.password.as_deref(), Some("twelve chars or more"));
    let text = apply(STARTER, &change.edits).unwrap();
    let v = json(&text);
    assert_eq!(
        v["provider"],
        json!({"preset": "realdebrid", "token": "tok-1"})
    );
    assert_eq!(v["allowed_origins"], json!(["https://example.com"]));
    assert_eq!(v["spend"], json(STARTER)["spend"]);
    assert_eq!(v["rules"], json(STARTER)["rules"]);
    // The lines the form did not touch are the starter's, byte for byte.
    for line in STARTER
        .lines()
        .filter(|l| !l.contains("provider") && !l.contains("allowed_origins"))
    {
        assert!(text.contains(line), "{line}\n{text}");
    }
}

#[test]
fn setup_refuses_what_is_missing_or_unsafe() {
    let mut v = setup_values();
    v.site = "not an address".into();
    v.spend_day = String::new();
    v.spend_month = String::new();
    v.visitor_day = "ten".into();
    let e = changes(Kind::Setup, &v, &secrets("", "short"), &json(STARTER)).unwrap_err();
    let fields: Vec<&str> = e.iter().map(|p| p.field).collect();
    for f in ["token", "visitor_day", "spend_day", "site", "password"] {
        assert!(fields.contains(&f), "{f} in {e:?}");
    }
    let mut s = secrets("t", "twelve chars or more");
    s.again = "twelve chars or more!".into();
    let e = changes(Kind::Setup, &setup_values(), &s, &json(STARTER)).unwrap_err();
    assert_eq!(e[0].field, "password");
    // The echo provider needs no token and no spend limit.
    let mut v = setup_values();
    v.provider = "echo".into();
    v.spend_day = String::new();
    v.spend_month = String::new();
    assert!(
        changes(
            Kind::Setup,
            &v,
            &secrets("", "twelve chars or more"),
            &json(STARTER)
        )
        .is_ok()
    );
}

#[test]
fn settings_change_only_what_differs_and_keep_the_token() {
    let text = r#"{"provider": {"preset": "alldebrid", "token": "kept", "x": 1},
 "spend": [{"name": "month", "limit": 9, "window_secs": 2592000}, {"name": "day", "limit": 3, "window_secs": 86400}],
 "rules": [{"name": "ip", "key": "ip", "limit": 5, "window_secs": 60}],
 "block": ["203.0.113.0/24"]}"#;
    let now = Values::of(&json(text), "");
    let none = changes(Kind::Settings, &now, &Secrets::default(), &json(text)).unwrap();
    assert!(none.edits.is_empty(), "{:?}", none.edits);
    assert_eq!(none.password, None, "a blank password keeps the one there");
    let mut v = now.clone();
    v.spend_month = String::new();
    v.spend_day = "4".into();
    v.visitor_day = "200".into();
    v.block = String::new();
    v.allow = "198.51.100.7\n".into();
    v.origins = "https://a.example\n\nhttps://b.example".into();
    let change = changes(Kind::Settings, &v, &Secrets::default(), &json(text)).unwrap();
    let out = json(&apply(text, &change.edits).unwrap());
    assert_eq!(
        out["provider"],
        json!({"preset": "alldebrid", "token": "kept", "x": 1})
    );
    assert_eq!(
        out["spend"],
        json!([{"name": "day", "limit": 4, "window_secs": 86400}])
    );
    assert_eq!(
        out["rules"][1],
        json!({"name": "ip-day", "key": "ip", "limit": 200, "window_secs": 86400})
    );
    assert_eq!(out["block"], json!([]));
    assert_eq!(out["allow"], json!(["198.51.100.7"]));
    assert_eq!(
        out["allowed_origins"],
        json!(["https://a.example", "https://b.example"])
    );
    // A new token replaces only the token.
    let change = changes(Kind::Settings, &now, &secrets("new", ""), &json(text)).unwrap();
    let out = json(&apply(text, &change.edits).unwrap());
    assert_eq!(
        out["provider"],
        json!({"preset": "alldebrid", "token": "new", "x": 1})
    );
    // A file with no rules keeps the default unwritten.
    let bare = r#"{"provider": {"kind": "echo"}}"#;
    let v = Values::of(&json(bare), "");
    assert!(
        changes(Kind::Settings, &v, &Secrets::default(), &json(bare))
            .unwrap()
            .edits
            .is_empty()
    );
}

#[test]
fn config_errors_point_at_a_form_field() {
    assert_eq!(field_of("provider.token"), "provider");
    assert_eq!(field_of("spend[1].limit"), "spend_day");
    assert_eq!(field_of("block[0]"), "block");
    assert_eq!(field_of("line 3 column 4"), "file");
}

#[test]
fn what_shuts_everyone_out_is_confirmed_apart_and_only_what_is_new() {
    let file = serde_json::json!({
        "rules": [{"name": "ip", "key": "ip", "limit": 20, "window_secs": 60}],
        "block": ["10.0.0.0/8"]
    });
    let mut values = Values::of(&file, "");
    let me: std::net::IpAddr = "203.0.113.7".parse().unwrap();
    // Written by hand before: not asked about again.
    assert_eq!(to_confirm(&values, &file, Some(me)), Confirm::default());
    values.block = "10.0.0.0/8\n0.0.0.0/0\n203.0.113.0/24".into();
    values.allow = "::/0".into();
    values.visitor_minute = String::new();
    let confirm = to_confirm(&values, &file, Some(me));
    let fields: Vec<&str> = confirm.concerns.iter().map(|(f, _)| *f).collect();
    assert_eq!(fields, ["block", "block", "allow", "visitor_minute"]);
    assert_eq!(
        confirm.key(),
        "block:0.0.0.0/0 block:203.0.113.0/24 allow:::/0 visitor_minute:no"
    );
    assert!(!confirm.confirmed_by(&values));
    values.confirm = confirm.key();
    assert!(confirm.confirmed_by(&values));
    values.confirm = "block:0.0.0.0/0".into();
    assert!(!confirm.confirmed_by(&values), "another set of concerns");
}

#[test]
fn a_list_of_providers_is_left_alone_by_the_settings() {
    let text = r#"{"providers": [{"preset": "realdebrid", "token": "a"}, {"preset": "alldebrid", "token": "b"}],
 "spend": [{"name": "day", "limit": 3, "window_secs": 86400}]}"#;
    let mut v = Values::of(&json(text), "");
    v.spend_day = "4".into();
    let change = changes(Kind::Settings, &v, &secrets("new", ""), &json(text)).unwrap();
    let out = json(&apply(text, &change.edits).unwrap());
    assert_eq!(out["providers"], json(text)["providers"]);
    assert!(out.get("provider").is_none(), "{out}");
    assert_eq!(out["spend"][0]["limit"], 4);
}

#[test]
fn a_rule_of_bytes_and_the_largest_file_are_edited_apart_from_the_requests() {
    let text = r#"{"provider": {"kind": "echo"},
 "rules": [{"name": "ip", "key": "ip", "limit": 5, "window_secs": 60},
           {"name": "ip-bytes", "key": "ip", "unit": "bytes", "limit": 3000000, "window_secs": 86400}]}"#;
    let now = Values::of(&json(text), "");
    assert_eq!(
        (now.visitor_day.as_str(), now.visitor_bytes_day.as_str()),
        ("", "3000000"),
        "a rule of bytes is not the requests per day"
    );
    assert_eq!(now.max_file_bytes, "");
    let mut v = now.clone();
    v.visitor_bytes_day = "20000000000".into();
    v.visitor_day = "200".into();
    v.max_file_bytes = "10000000000".into();
    let change = changes(Kind::Settings, &v, &Secrets::default(), &json(text)).unwrap();
    let out = json(&apply(text, &change.edits).unwrap());
    assert_eq!(
        out["rules"],
        json!([{"name": "ip", "key": "ip", "limit": 5, "window_secs": 60},
               {"name": "ip-bytes", "key": "ip", "unit": "bytes", "limit": 20_000_000_000u64,
                "window_secs": 86400},
               {"name": "ip-day", "key": "ip", "limit": 200, "window_secs": 86400}])
    );
    assert_eq!(out["max_file_bytes"], 10_000_000_000u64);
    // Emptied: the rule of bytes and the largest file go, the rest stays.
    let mut v = Values::of(&out, "");
    v.visitor_bytes_day = String::new();
    v.max_file_bytes = String::new();
    let change = changes(Kind::Settings, &v, &Secrets::default(), &out).unwrap();
    let text = out.to_string();
    let back = json(&apply(&text, &change.edits).unwrap());
    assert!(back.get("max_file_bytes").is_none(), "{back}");
    assert_eq!(back["rules"].as_array().map(Vec::len), Some(2), "{back}");
    // A new rule of bytes is written with its unit.
    let bare = r#"{"provider": {"kind": "echo"}, "rules": []}"#;
    let mut v = Values::of(&json(bare), "");
    v.visitor_bytes_day = "5000000".into();
    let change = changes(Kind::Settings, &v, &Secrets::default(), &json(bare)).unwrap();
    let out = json(&apply(bare, &change.edits).unwrap());
    assert_eq!(
        out["rules"],
        json!([{"name": "ip-bytes", "key": "ip", "limit": 5_000_000, "window_secs": 86400,
                "unit": "bytes"}])
    );
    let mut v = Values::of(&json(bare), "");
    v.max_file_bytes = "ten".into();
    let problems = changes(Kind::Settings, &v, &Secrets::default(), &json(bare)).unwrap_err();
    assert!(
        problems.iter().any(|p| p.field == "max_file_bytes"),
        "{problems:?}"
    );
    assert_eq!(field_of("max_file_bytes"), "max_file_bytes");
}

#[test]
fn the_links_per_request_are_set_cleared_and_bounded() {
    let text = r#"{"provider": {"kind": "echo"}, "request": {"max_body_bytes": 4096}}"#;
    let now = Values::of(&json(text), "");
    assert_eq!(now.max_links, "", "not written: the default, shown empty");
    let mut v = now.clone();
    v.max_links = " 5 ".into();
    let change = changes(Kind::Settings, &v, &Secrets::default(), &json(text)).unwrap();
    let out = json(&apply(text, &change.edits).unwrap());
    assert_eq!(
        out["request"],
        json!({"max_body_bytes": 4096, "max_links": 5}),
        "{out}"
    );
    assert_eq!(Values::of(&out, "").max_links, "5");
    // The same value again: nothing to write.
    let again = Values::of(&out, "");
    let change = changes(Kind::Settings, &again, &Secrets::default(), &out).unwrap();
    assert!(change.edits.is_empty(), "{:?}", change.edits);
    // Emptied: the field goes, the rest of the section stays.
    let mut v = Values::of(&out, "");
    v.max_links = String::new();
    let change = changes(Kind::Settings, &v, &Secrets::default(), &out).unwrap();
    let back = json(&apply(&out.to_string(), &change.edits).unwrap());
    assert_eq!(back["request"], json!({"max_body_bytes": 4096}), "{back}");
    // Outside what the configuration accepts: said at the field, nothing written.
    for wrong in ["0", "101", "five", "-1", "2.5"] {
        let mut v = Values::of(&json(text), "");
        v.max_links = wrong.into();
        let problems = changes(Kind::Settings, &v, &Secrets::default(), &json(text)).unwrap_err();
        assert!(
            problems
                .iter()
                .any(|p| p.field == "max_links" && p.text.contains("1 to 100")),
            "{wrong}: {problems:?}"
        );
    }
    // The largest accepted is one the configuration takes.
    let mut v = Values::of(&json(text), "");
    v.max_links = "100".into();
    let change = changes(Kind::Settings, &v, &Secrets::default(), &json(text)).unwrap();
    let out = apply(text, &change.edits).unwrap();
    let config = crate::config::Config::from_json(&out, std::path::Path::new("/tmp")).unwrap();
    assert_eq!(config.max_links, 100);
    assert_eq!(field_of("request.max_links"), "max_links");
}

#[test]
fn the_challenge_keys_need_the_password_and_the_secret_is_never_a_value() {
    let json = json(STARTER);
    let mut v = Values::of(&json, "");
    assert_eq!(v.challenge_site_key, "");
    v.challenge_site_key = "0x4AAA".into();
    let mut s = secrets("", "");
    s.password.clear();
    s.again.clear();
    s.challenge_secret = "0x4BBB".into();
    let change = changes(Kind::Settings, &v, &s, &json).unwrap();
    assert!(change.needs_password(), "{change:?}");
    let with = serde_json::json!({"challenge": {"site_key": "0x4AAA", "secret": "0x4BBB"}});
    let shown = Values::of(&with, "");
    assert_eq!(shown.challenge_site_key, "0x4AAA");
    assert!(!format!("{shown:?}").contains("0x4BBB"));
    // Without a secret in the file or the form: the form says which field.
    s.challenge_secret.clear();
    let problems = changes(Kind::Settings, &v, &s, &json).unwrap_err();
    assert!(
        problems.iter().any(|p| p.field == "challenge_secret"),
        "{problems:?}"
    );
}
