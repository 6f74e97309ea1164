//! Keeping secrets out of messages about a configuration file: the values that hold secrets in
//! its JSON, and serde's messages without the value they quote. Used before the file is
//! checked, so it depends on nothing else in the configuration.

use serde_json::Value;

/// A serde message without the value it quotes: "invalid type: integer `20240917`, expected a
/// string" becomes "invalid type: integer, expected a string". Other messages (syntax errors,
/// unknown or missing fields) quote only the file's grammar or field names and stay as they are.
pub(crate) fn without_quoted_value(message: &str) -> String {
    for lead in ["invalid type: ", "invalid value: ", "invalid length "] {
        let Some(at) = message.find(lead) else {
            continue;
        };
        let rest = &message[at + lead.len()..];
        let Some(quote) = rest.find(['`', '"']) else {
            continue;
        };
        let Some(end) = rest.rfind(", expected") else {
            continue;
        };
        if quote < end {
            let kind = rest[..quote].trim_end();
            return format!("{}{lead}{kind}{}", &message[..at], &rest[end..]);
        }
    }
    message.to_owned()
}

/// Every string under a key that holds secrets (`token`, `password`, `url`, `password_hash`), anywhere in a
/// configuration's JSON, so error messages about a malformed file can mask them.
pub(crate) fn secret_strings(text: &str) -> Vec<String> {
    serde_json::from_str::<Value>(text)
        .map(|v| secret_values(&v))
        .unwrap_or_default()
}

/// Every string under a `token`, `password`, `url` or `password_hash` key in `v`.
pub(crate) fn secret_values(v: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    match v {
                        Value::String(s)
                            if matches!(
                                k.as_str(),
                                "token" | "password" | "url" | "password_hash"
                            ) && !s.is_empty() =>
                        {
                            out.push(s.clone());
                        }
                        other => walk(other, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out
}
