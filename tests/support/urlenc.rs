//! Percent-encoding for building requests and decoding what the provider stand-in received.

/// Percent-encode every byte except RFC 3986 unreserved characters.
pub fn encode(s: &str) -> String {
    encode_bytes(s.as_bytes())
}

pub fn encode_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `link=<encoded>` for a query string or a form body.
pub fn link_param(link: &str) -> String {
    format!("link={}", encode(link))
}

/// Decode one `application/x-www-form-urlencoded` component ('+' is a space).
/// `None` on malformed percent-escapes.
pub fn form_decode(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(out)
}

/// Decode a whole form body or query string into (name, value) pairs (lossy UTF-8).
pub fn form_pairs(s: &str) -> Vec<(String, String)> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let dec = |x: &str| {
                String::from_utf8_lossy(&form_decode(x).unwrap_or_else(|| x.as_bytes().to_vec()))
                    .into_owned()
            };
            (dec(k), dec(v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let link = "https://example.com/a b+c?x=1&y=%";
        let pairs = form_pairs(&link_param(link));
        assert_eq!(pairs, vec![("link".to_string(), link.to_string())]);
        assert_eq!(form_decode("%zz"), None);
        assert_eq!(form_decode("a+b"), Some(b"a b".to_vec()));
    }
}
