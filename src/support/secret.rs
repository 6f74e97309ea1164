//! A value that must never be shown: provider tokens and passwords. Debug and Display mask it;
//! only the adapter that sends it reads it.

use std::borrow::Cow;
use std::fmt;
use std::fmt::Write as _;

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

/// Written out as the mask: whatever holds a secret can be serialised without showing it.
impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(MASK)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The text to mask in place of a secret.
pub const MASK: &str = "***";

/// Every form in which `secret` can reach text the program writes: as it is; percent-encoded
/// (upper- and lower-case hex, a space as `+` or `%20`), as a provider echoes a query or form
/// parameter; JSON-escaped; escaped as `{:?}` writes it; HTML-escaped. Longest first, so that
/// masking one form does not leave part of a longer one.
pub fn forms(secret: &str) -> Vec<String> {
    if secret.is_empty() {
        return Vec::new();
    }
    let mut out = vec![secret.to_owned()];
    for (upper, space) in [(true, "+"), (false, "+"), (true, "%20"), (false, "%20")] {
        out.push(percent_encode(secret, upper, space));
    }
    out.push(
        serde_json::to_string(secret)
            .map_or_else(|_| secret.to_owned(), |q| q[1..q.len() - 1].to_owned()),
    );
    out.push(secret.escape_debug().to_string());
    // As the HTML pages write text.
    out.push(crate::support::html::escape(secret));
    out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    out.dedup();
    out
}

/// Every form of every one of `secrets`, longest first, for [`mask`].
pub fn all_forms(secrets: &[String]) -> Vec<String> {
    let mut out: Vec<String> = secrets.iter().flat_map(|s| forms(s)).collect();
    out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    out.dedup();
    out
}

/// `text` with each of `forms` (see [`all_forms`]) replaced by `***`.
pub fn mask<'a>(text: &'a str, forms: &[String]) -> Cow<'a, str> {
    let mut text = Cow::Borrowed(text);
    for f in forms.iter().filter(|f| !f.is_empty()) {
        if text.contains(f.as_str()) {
            text = Cow::Owned(text.replace(f.as_str(), MASK));
        }
    }
    text
}

/// Whether `text` holds any of `forms`.
pub fn contains_any(text: &str, forms: &[String]) -> bool {
    forms
        .iter()
        .any(|f| !f.is_empty() && text.contains(f.as_str()))
}

fn percent_encode(s: &str, upper: bool, space: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push_str(space),
            _ if upper => {
                let _ = write!(out, "%{b:02X}");
            }
            _ => {
                let _ = write!(out, "%{b:02x}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_formatted() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "*** \"***\"");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn every_form_is_masked() {
        let token = "tok/EN+1 \"q\"<&>'\\";
        let forms = all_forms(&[token.to_owned(), String::new()]);
        for shown in [
            token.to_owned(),
            "tok%2FEN%2B1+%22q%22%3C%26%3E%27%5C".to_owned(),
            "tok%2fEN%2b1%20%22q%22%3c%26%3e%27%5c".to_owned(),
            serde_json::to_string(token).unwrap(),
            format!("{token:?}"),
            "tok/EN+1 &quot;q&quot;&lt;&amp;&gt;&#39;\\".to_owned(),
        ] {
            let text = format!("before {shown} after");
            let masked = mask(&text, &forms);
            assert!(masked.contains("***"), "{shown} not masked: {masked}");
            assert!(!contains_any(&masked, &forms), "{shown}: {masked}");
            assert!(!masked.contains("EN"), "{shown}: {masked}");
        }
        // Plain text is borrowed, not copied.
        assert!(matches!(mask("nothing here", &forms), Cow::Borrowed(_)));
        // An alphanumeric token has one form.
        assert_eq!(super::forms("abc123"), vec!["abc123".to_owned()]);
    }
}
