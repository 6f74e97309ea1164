//! Fuzz target: `Config::from_json` on arbitrary text, and the masking of secrets. Every
//! secret in the input (a string under a `token` or `password` key, and the password in a
//! `url`'s user information) is replaced by a unique marker and the text parsed again: the
//! marker must then appear neither in the masked JSON that `resolve check` prints, nor in the
//! configuration's Debug form, nor in an error message. A marker can only get there from the
//! secret's own field, so a hit is a leak and never a coincidence of two equal strings.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use resolve::config::Config;
use serde_json::Value;

const BASE: &str = "/srv/site/resolve";

/// What every marker starts with.
const MARKER_STEM: &str = "qzxMARK";

/// Marker `i`: letters and digits only, so that it is a valid value wherever a secret is.
fn marker(i: usize) -> String {
    format!("{MARKER_STEM}{i}Xzq")
}

/// The password part of a URL's user information (`scheme://user:PASSWORD@host...`), as a
/// byte range, if it has a non-empty one.
fn url_password(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://")? + 3;
    let authority_end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    let at = start + url[start..authority_end].rfind('@')?;
    let colon = start + url[start..at].find(':')?;
    (colon + 1 < at).then_some((colon + 1, at))
}

/// Replaces every secret in `v` by a marker; returns how many.
fn mark(v: &mut Value, count: &mut usize) {
    match v {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                match (k.as_str(), &mut *v) {
                    ("token" | "password", Value::String(s)) if !s.is_empty() => {
                        *s = marker(*count);
                        *count += 1;
                    }
                    ("url", Value::String(s)) => {
                        if let Some((from, to)) = url_password(s) {
                            s.replace_range(from..to, &marker(*count));
                            *count += 1;
                        }
                    }
                    (_, other) => mark(other, count),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| mark(i, count)),
        _ => {}
    }
}

fn assert_no_marker(text: &str, markers: usize, what: &str, input: &str) {
    for i in 0..markers {
        let m = marker(i);
        assert!(
            !text.contains(&m),
            "a secret ({m}) shows in {what}:\n{text}\ninput with markers:\n{input}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let base = Path::new(BASE);
    match Config::from_json(text, base) {
        Ok(config) => {
            // What a parsed configuration says about itself must be well-formed.
            let masked = config.masked_json();
            assert!(masked.is_object());
            let _ = config.secrets();
            // A configuration printed by `check` reads back as the same configuration only for
            // the file store without secrets; at least it must be valid JSON text.
            serde_json::to_string(&masked).expect("masked JSON serializes");
        }
        Err(e) => {
            assert!(!e.field.is_empty(), "an error without a field: {e:?}");
            assert!(!e.message.is_empty(), "an error without a message: {e:?}");
        }
    }

    // The fuzzer learns the marker from the comparisons below and copies it into inputs: in
    // such an input, a marker found in the output may come from anywhere.
    if text.contains(MARKER_STEM) {
        return;
    }
    let Ok(mut value) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let mut markers = 0;
    mark(&mut value, &mut markers);
    if markers == 0 {
        return;
    }
    let marked = value.to_string();
    match Config::from_json(&marked, base) {
        Ok(config) => {
            let masked = config.masked_json().to_string();
            assert_no_marker(&masked, markers, "the masked JSON", &marked);
            assert_no_marker(&format!("{config:?}"), markers, "Debug", &marked);
        }
        Err(e) => {
            assert_no_marker(&e.field, markers, "an error's field", &marked);
            assert_no_marker(&e.message, markers, "an error message", &marked);
        }
    }
});
