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
/// parameter; JSON-escaped; escaped as `{:?}` writes it; HTML-escaped; as hex; in base64 (the
/// standard and the URL alphabet, at each of the three offsets it can start at inside a longer
/// encoded text, such as `user:token` in a Basic header), when that is long enough to mean
/// it. [`mask`] and [`contains_any`] match them in any case. Longest first, so that masking one
/// form does not leave part of a longer one.
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
    out.push(crate::support::hex::lower(secret.as_bytes()));
    for alphabet in [BASE64, BASE64_URL] {
        for offset in 0..3 {
            let core = base64_core(secret.as_bytes(), offset, alphabet);
            if core.len() >= MIN_BASE64_CORE {
                out.push(core);
            }
        }
    }
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

/// `text` with each of `forms` (see [`all_forms`]) replaced by `***`, in any case.
pub fn mask<'a>(text: &'a str, forms: &[String]) -> Cow<'a, str> {
    let mut text = Cow::Borrowed(text);
    for f in forms.iter().filter(|f| !f.is_empty()) {
        let needle = f.to_ascii_lowercase();
        let lower = text.to_ascii_lowercase();
        if !lower.contains(&needle) {
            continue;
        }
        // ASCII lower-casing keeps every byte where it was: the places found in the lower-case
        // text are the places in the text.
        let mut out = String::with_capacity(text.len());
        let mut from = 0;
        for (at, _) in lower.match_indices(&needle) {
            if at < from {
                continue;
            }
            out.push_str(&text[from..at]);
            out.push_str(MASK);
            from = at + needle.len();
        }
        out.push_str(&text[from..]);
        text = Cow::Owned(out);
    }
    text
}

/// Whether `text` holds any of `forms`, in any case.
pub fn contains_any(text: &str, forms: &[String]) -> bool {
    let lower = text.to_ascii_lowercase();
    forms
        .iter()
        .any(|f| !f.is_empty() && lower.contains(&f.to_ascii_lowercase()))
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64_URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// Shortest base64 form worth masking: shorter ones would mask ordinary words.
const MIN_BASE64_CORE: usize = 8;

/// The base64 characters that `bytes` alone decide when they start `offset` bytes (0 to 2)
/// into the encoded data: those are the same whatever comes before and after.
fn base64_core(bytes: &[u8], offset: usize, alphabet: &[u8; 64]) -> String {
    let bits: Vec<bool> = std::iter::repeat_n(0u8, offset)
        .chain(bytes.iter().copied())
        .flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1 == 1))
        .collect();
    let first = (8 * offset).div_ceil(6);
    let last = bits.len() / 6;
    (first..last)
        .map(|i| {
            let v = bits[6 * i..6 * i + 6]
                .iter()
                .fold(0usize, |acc, &bit| (acc << 1) | usize::from(bit));
            char::from(alphabet[v])
        })
        .collect()
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
    }

    #[test]
    fn other_cases_hex_and_base64_are_masked() {
        let token = "Rd7kQ2xV9pLmZ3wT";
        let forms = all_forms(&[token.to_owned()]);
        let b64 = |text: &str, alphabet: &[u8; 64]| base64_core(text.as_bytes(), 0, alphabet);
        for shown in [
            token.to_uppercase(),
            token.to_lowercase(),
            crate::support::hex::lower(token.as_bytes()),
            crate::support::hex::lower(token.as_bytes()).to_uppercase(),
            // Alone, and inside longer encoded texts at each offset (a Basic header).
            b64(token, BASE64),
            b64(&format!("u:{token}"), BASE64),
            b64(&format!("us:{token}"), BASE64),
            b64(&format!("use:{token}"), BASE64),
            b64(&format!("ab:{token}"), BASE64_URL),
        ] {
            let text = format!("error: {shown} is not valid");
            let masked = mask(&text, &forms);
            assert!(masked.contains("***"), "{shown} not masked: {masked}");
            assert!(!contains_any(&masked, &forms), "{shown}: {masked}");
            assert!(contains_any(&text, &forms), "{shown}");
        }
        // The standard encoder's output, padded, as a provider would echo it.
        assert_eq!(b64("u:Rd7kQ2xV9pLmZ3wT", BASE64).len(), 24);
        assert!(mask("dTpSZDdrUTJ4VjlwTG1aM3dU", &forms).contains("***"));
        // Text around a match keeps its case; short tokens get no base64 forms.
        assert_eq!(
            mask("Before RD7KQ2XV9PLMZ3WT After", &forms),
            "Before *** After"
        );
        assert_eq!(
            super::forms("abc"),
            vec!["616263".to_owned(), "abc".to_owned()]
        );
        assert!(matches!(mask("nothing here", &forms), Cow::Borrowed(_)));
        // An alphanumeric token has its hex and base64 forms besides.
        assert!(super::forms("abc123").contains(&"abc123".to_owned()));
    }
}
