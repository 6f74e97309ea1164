//! Changes to the configuration's JSON text made where they belong, byte for byte: a value set,
//! added or taken out at a path, and everything else of the owner's file (its order, spacing,
//! other fields) left exactly as written. Pure: text in, text out.

use serde_json::Value;

/// One step of a path: a member of an object, or an item of a list (an index one past the
/// last appends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// A path from a list of steps written as text: numbers are indexes, anything else names.
pub fn path(steps: &[&str]) -> Vec<Step> {
    steps
        .iter()
        .map(|s| match s.parse::<usize>() {
            Ok(i) => Step::Index(i),
            Err(_) => Step::Key((*s).to_owned()),
        })
        .collect()
}

/// A change: the value at a path set (added where missing), or taken out (`None`).
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    pub path: Vec<Step>,
    pub value: Option<Value>,
}

/// Applies the edits in order to `text`, a JSON object.
pub fn apply(text: &str, edits: &[Edit]) -> Result<String, String> {
    let mut text = text.to_owned();
    for edit in edits {
        text = match &edit.value {
            Some(v) => set(&text, &edit.path, v)?,
            None => remove(&text, &edit.path)?,
        };
    }
    Ok(text)
}

/// A member of an object or an item of a list, by its byte spans.
#[derive(Debug, Clone, Copy)]
struct Item {
    /// Where the member's name (or the item) starts.
    start: usize,
    value_start: usize,
    value_end: usize,
}

/// The text with the value at `path` set to `value`: replaced where it is, added at the end of
/// its object (or list) where it is not, with the objects on the way made as needed.
pub fn set(text: &str, path: &[Step], value: &Value) -> Result<String, String> {
    check(text)?;
    let b = text.as_bytes();
    let mut at = skip_ws(b, 0);
    for (depth, step) in path.iter().enumerate() {
        let (items, names) = children(b, at)?;
        let found = position(&items, &names, step);
        match found {
            Some(i) => at = items[i].value_start,
            None => {
                if matches!(step, Step::Index(i) if *i != items.len()) {
                    return Err(format!("no item {step:?} in the list"));
                }
                let rest = nested(&path[depth + 1..], value)?;
                return Ok(insert(text, at, &items, step, &rest));
            }
        }
    }
    let end = value_end(b, at)?;
    let written = write(value, &line_indent(text, at));
    Ok(format!("{}{written}{}", &text[..at], &text[end..]))
}

/// The text without the value at `path` (and its name and comma); a path that is not there
/// leaves the text as it is.
pub fn remove(text: &str, path: &[Step]) -> Result<String, String> {
    check(text)?;
    let Some((last, parents)) = path.split_last() else {
        return Err("the whole file cannot be taken out".into());
    };
    let b = text.as_bytes();
    let mut at = skip_ws(b, 0);
    for step in parents {
        let (items, names) = children(b, at)?;
        let found = position(&items, &names, step);
        match found {
            Some(i) => at = items[i].value_start,
            None => return Ok(text.to_owned()),
        }
    }
    let (items, names) = children(b, at)?;
    let found = position(&items, &names, last);
    let Some(i) = found else {
        return Ok(text.to_owned());
    };
    let (from, to) = if i > 0 {
        (items[i - 1].value_end, items[i].value_end)
    } else if let Some(next) = items.get(1) {
        (items[0].start, next.start)
    } else {
        (items[0].start, items[0].value_end)
    };
    Ok(format!("{}{}", &text[..from], &text[to..]))
}

/// Where `step` stands among a value's children (`names`: an object's keys, in order).
fn position(items: &[Item], names: &[String], step: &Step) -> Option<usize> {
    match step {
        Step::Key(k) => names.iter().position(|n| n == k),
        Step::Index(i) => (*i < items.len()).then_some(*i),
    }
}

fn check(text: &str) -> Result<(), String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(_)) => Ok(()),
        Ok(_) => Err("the file is not one JSON object".into()),
        Err(e) => Err(format!("the file is not JSON: {e}")),
    }
}

/// `value` wrapped in the objects the rest of a path names (a path's missing part).
fn nested(rest: &[Step], value: &Value) -> Result<Value, String> {
    let mut v = value.clone();
    for step in rest.iter().rev() {
        v = match step {
            Step::Key(k) => {
                let mut m = serde_json::Map::new();
                m.insert(k.clone(), v);
                Value::Object(m)
            }
            Step::Index(0) => Value::Array(vec![v]),
            Step::Index(_) => return Err("no such item in a list that is not there".into()),
        };
    }
    Ok(v)
}

/// The text with a new member (or item) added at the end of the object (or list) at `at`, on
/// its own line like the last one when that one is on a line of its own.
fn insert(text: &str, at: usize, items: &[Item], step: &Step, value: &Value) -> String {
    let close = value_end(text.as_bytes(), at).map_or(at + 1, |end| end - 1);
    let name = match step {
        Step::Key(k) => format!("{}: ", Value::String(k.clone())),
        Step::Index(_) => String::new(),
    };
    if let Some(last) = items.last() {
        let own_line = text[..last.start]
            .rsplit('\n')
            .next()
            .unwrap_or("")
            .trim()
            .is_empty();
        let indent = line_indent(text, last.start);
        let sep = if own_line {
            format!(",\n{indent}")
        } else {
            ", ".to_owned()
        };
        return format!(
            "{}{sep}{name}{}{}",
            &text[..last.value_end],
            write(value, &indent),
            &text[last.value_end..]
        );
    }
    let outer = line_indent(text, at);
    let inner = format!("{outer}  ");
    if text[..at].trim().is_empty() || text[at..close].contains('\n') {
        format!(
            "{}\n{inner}{name}{}\n{outer}{}",
            &text[..at + 1],
            write(value, &inner),
            &text[close..]
        )
    } else {
        format!(
            "{}{name}{}{}",
            &text[..at + 1],
            write(value, &inner),
            &text[close..]
        )
    }
}

/// The spaces that open the line `at` is on.
fn line_indent(text: &str, at: usize) -> String {
    let line = text[..at].rsplit('\n').next().unwrap_or("");
    line.chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// A value as JSON: on one line when short, else pretty, its lines after the first indented to
/// stand under the line it starts on.
fn write(value: &Value, indent: &str) -> String {
    let flat = value.to_string();
    if flat.len() <= 72 {
        return flat;
    }
    let pretty = serde_json::to_string_pretty(value).unwrap_or(flat);
    pretty.replace('\n', &format!("\n{indent}"))
}

/// The members (with their names) or items of the object or list whose first byte is at `at`.
fn children(b: &[u8], at: usize) -> Result<(Vec<Item>, Vec<String>), String> {
    let (close, object) = match b.get(at) {
        Some(b'{') => (b'}', true),
        Some(b'[') => (b']', false),
        _ => return Err("the path goes through a value that is not an object or a list".into()),
    };
    let mut items = Vec::new();
    let mut names = Vec::new();
    let mut i = skip_ws(b, at + 1);
    if b.get(i) == Some(&close) {
        return Ok((items, names));
    }
    loop {
        let start = i;
        if object {
            let end = value_end(b, i)?;
            let name: String = serde_json::from_slice(&b[i..end])
                .map_err(|e| format!("a name that is not text: {e}"))?;
            names.push(name);
            i = skip_ws(b, end);
            if b.get(i) != Some(&b':') {
                return Err("a name without a value".into());
            }
            i = skip_ws(b, i + 1);
        }
        let value_start = i;
        let value_end = value_end(b, i)?;
        items.push(Item {
            start,
            value_start,
            value_end,
        });
        i = skip_ws(b, value_end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(c) if *c == close => return Ok((items, names)),
            _ => return Err("a list or object that does not close".into()),
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// Where the value starting at `at` ends (one past its last byte).
fn value_end(b: &[u8], at: usize) -> Result<usize, String> {
    match b.get(at) {
        Some(b'"') => {
            let mut i = at + 1;
            while let Some(c) = b.get(i) {
                match c {
                    b'\\' => i += 2,
                    b'"' => return Ok(i + 1),
                    _ => i += 1,
                }
            }
            Err("a text that does not end".into())
        }
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = at;
            while let Some(c) = b.get(i) {
                match c {
                    b'"' => {
                        i = value_end(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            Err("a list or object that does not close".into())
        }
        Some(_) => {
            let mut i = at;
            while let Some(c) = b.get(i) {
                if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                    break;
                }
                i += 1;
            }
            Ok(i)
        }
        None => Err("a value is missing".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
