//! Tests of the JSON text scanner: where a field is written, and edits that keep the rest.

use super::*;
use serde_json::json;

// Where a field is written.

const TEXT: &str = r#"{
  "provider": {"preset": "realdebrid", "token": "x\"y"},
  "rules": [
    {"name": "ip", "key": "ip", "limit": 5, "window_secs": 60},
    {"name": "day", "key": "ip",
     "limit": 0, "window_secs": 86400}
  ],
  "store": {"kind": "mysq", "steps": [[1, 2], {"url": "u"}]}
}"#;

#[test]
fn finds_keys_and_list_elements() {
    assert_eq!(of_field(TEXT, "provider"), Some((2, 3)));
    assert_eq!(of_field(TEXT, "provider.token"), Some((2, 40)));
    assert_eq!(of_field(TEXT, "rules[1]"), Some((5, 5)));
    assert_eq!(of_field(TEXT, "rules[1].limit"), Some((6, 6)));
    assert_eq!(of_field(TEXT, "rules[0].name"), Some((4, 6)));
    assert_eq!(of_field(TEXT, "store.kind"), Some((8, 13)));
    assert_eq!(of_field(TEXT, "store.steps[1].url"), Some((8, 48)));
}

#[test]
fn what_is_not_there_is_not_found() {
    for field in [
        "nothing",
        "rules[2]",
        "rules[0].nothing",
        "store.kind.deeper",
        "line 3 column 7",
        "rules[x]",
        "",
    ] {
        assert_eq!(of_field(TEXT, field), None, "{field}");
    }
    assert_eq!(of_field("not json", "a"), None);
    assert_eq!(of_field("{\"a\": [1, 2", "a[5]"), None);
}

// Edits.

/// A path from a list of steps written as text: numbers are indexes, anything else names.
fn path<'a>(steps: &[&'a str]) -> Vec<Step<'a>> {
    steps
        .iter()
        .map(|s| match s.parse::<usize>() {
            Ok(i) => Step::Index(i),
            Err(_) => Step::Key(s),
        })
        .collect()
}

const HAND: &str = r#"{
  "store": {"kind": "file", "dir": "ratelimit", "on_error": "allow"},
  "provider": {
    "preset": "realdebrid",
    "token": "old-token"
  },
  "page": {"site_name": "Ann’s links \"{[,\\"},
  "rules": [
    {"name": "ip", "key": "ip", "limit": 30, "window_secs": 60}
  ],
  "zeta":   [1,2 ,3]
}
"#;

fn edit(text: &str, steps: &[&str], value: Option<Value>) -> String {
    apply(
        text,
        &[Edit {
            path: path(steps),
            value,
        }],
    )
    .unwrap()
}

fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn a_value_set_changes_only_its_own_bytes() {
    let out = edit(HAND, &["provider", "token"], Some(json!("new-token")));
    assert_eq!(out, HAND.replace("\"old-token\"", "\"new-token\""));
    let out = edit(HAND, &["rules", "0", "limit"], Some(json!(12)));
    assert_eq!(out, HAND.replace("\"limit\": 30", "\"limit\": 12"));
}

#[test]
fn a_missing_member_is_added_after_the_last_in_the_files_own_style() {
    let out = edit(
        HAND,
        &["admin", "password_hash"],
        Some(json!("$argon2id$x")),
    );
    assert!(out.starts_with(HAND.trim_end().trim_end_matches('}').trim_end()));
    assert!(
        out.ends_with(
            "  \"zeta\":   [1,2 ,3],\n  \"admin\": {\"password_hash\":\"$argon2id$x\"}\n}\n"
        ),
        "{out}"
    );
    let v = parsed(&out);
    assert_eq!(v["admin"]["password_hash"], "$argon2id$x");
    // On one line, in the line's style.
    let out = edit(HAND, &["store", "sweep_one_in"], Some(json!(50)));
    assert!(
        out.contains(r#""on_error": "allow", "sweep_one_in": 50}"#),
        "{out}"
    );
    // An item appended to a list.
    let out = edit(HAND, &["rules", "1"], Some(json!({"name": "d"})));
    assert!(
        out.contains("\"window_secs\": 60},\n    {\"name\":\"d\"}\n  ],"),
        "{out}"
    );
    assert!(
        apply(
            HAND,
            &[Edit {
                path: path(&["rules", "5"]),
                value: Some(json!(1))
            }]
        )
        .is_err()
    );
}

#[test]
fn the_order_of_the_owners_fields_is_kept() {
    let out = edit(
        HAND,
        &["allowed_origins"],
        Some(json!(["https://a.example"])),
    );
    let order: Vec<String> = parsed(&out).as_object().unwrap().keys().cloned().collect();
    // (serde_json's map sorts names; the text's order is what counts.)
    let at = |name: &str| out.find(&format!("\"{name}\":")).unwrap();
    assert!(at("store") < at("provider") && at("provider") < at("page"));
    assert!(at("zeta") < at("allowed_origins"));
    assert_eq!(order.len(), 6);
}

#[test]
fn removing_takes_the_comma_with_it() {
    let out = edit(HAND, &["page"], None);
    assert_eq!(parsed(&out).get("page"), None);
    assert!(out.contains("\n  },\n  \"rules\""), "{out}");
    let out = edit(HAND, &["store"], None);
    assert!(out.starts_with("{\n  \"provider\""), "{out}");
    let out = edit(HAND, &["zeta", "1"], None);
    assert_eq!(parsed(&out)["zeta"], json!([1, 3]));
    let out = edit(
        &edit(HAND, &["rules", "0"], None),
        &["rules", "0"],
        Some(json!(1)),
    );
    assert_eq!(parsed(&out)["rules"], json!([1]));
    // Not there: nothing changes.
    assert_eq!(edit(HAND, &["nothing", "here"], None), HAND);
}

#[test]
fn a_new_file_and_odd_texts() {
    let out = edit("{}", &["provider"], Some(json!({"kind": "echo"})));
    assert_eq!(parsed(&out), json!({"provider": {"kind": "echo"}}));
    let out = edit("{ }", &["a"], Some(json!(1)));
    assert_eq!(parsed(&out), json!({"a": 1}));
    let out = edit("{\n}\n", &["a"], Some(json!(1)));
    assert_eq!(out, "{\n  \"a\": 1\n}\n");
    let long = json!({"preset": "alldebrid", "token": "x".repeat(80)});
    let out = edit(HAND, &["provider"], Some(long.clone()));
    assert_eq!(parsed(&out)["provider"], long);
    assert!(out.contains("\n    \"token\""), "{out}");
    for bad in ["", "[1]", "{\"a\":", "nul"] {
        assert!(
            apply(
                bad,
                &[Edit {
                    path: path(&["a"]),
                    value: Some(json!(1))
                }]
            )
            .is_err()
        );
    }
    // Nothing panics on any path through any text.
    for text in [
        HAND,
        "{\"a\": [[], {}, \"\\\"\"]}",
        "{\"a\": {\"b\": null}}",
    ] {
        for steps in [
            &["a", "0", "b"][..],
            &["a", "b", "c"],
            &["zeta", "x"],
            &["a", "2"],
        ] {
            let _ = set(text, &path(steps), &json!(1));
            let _ = remove(text, &path(steps));
        }
    }
}

#[test]
fn a_name_in_a_list_or_an_index_in_an_object_is_refused_not_written() {
    // Written, either would break the file: `"x": 1` inside a list, a bare value in an object.
    for steps in [&["zeta", "x"][..], &["store", "3"], &["rules", "0", "1"]] {
        let e = set(HAND, &path(steps), &json!(1)).unwrap_err();
        assert_eq!(e, EditError::WrongStep, "{steps:?}");
        assert_eq!(remove(HAND, &path(steps)).unwrap(), HAND, "{steps:?}");
    }
    // An index into an object is not its nth member.
    assert_eq!(of_field(TEXT, "store[0]"), None);
    let e = set(HAND, &path(&["rules", "0", "limit", "x"]), &json!(1)).unwrap_err();
    assert_eq!(e, EditError::NotContainer);
    assert_eq!(
        e.to_string(),
        "the path goes through a value that is not an object or a list"
    );
    let e = set("[1]", &path(&["a"]), &json!(1)).unwrap_err();
    assert_eq!(e.to_string(), "the file is not one JSON object");
}
