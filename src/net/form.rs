//! `application/x-www-form-urlencoded` decoding, for query strings and POST bodies.

/// Why a parameter's value could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormError {
    /// A `%` not followed by two hex digits.
    BadPercent,
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes `+` to a space and `%XX` to its byte. The result may not be UTF-8.
pub fn decode(input: &[u8]) -> Result<Vec<u8>, FormError> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = input.get(i + 1).copied().and_then(hex);
                let lo = input.get(i + 2).copied().and_then(hex);
                match (hi, lo) {
                    (Some(h), Some(l)) => out.push(h << 4 | l),
                    _ => return Err(FormError::BadPercent),
                }
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    Ok(out)
}

/// Decodes `%XX` only (as in URLs, where `+` is itself).
pub fn percent_decode(input: &[u8]) -> Result<Vec<u8>, FormError> {
    let mut out = Vec::with_capacity(input.len());
    for (i, part) in input.split(|&b| b == b'+').enumerate() {
        if i > 0 {
            out.push(b'+');
        }
        out.extend(decode(part)?);
    }
    Ok(out)
}

/// Encodes `value` for a form or query string: every byte but the unreserved ones (`A-Z a-z
/// 0-9 - . _ ~`) as `%XX`, so that [`decode`] gives it back exactly.
pub fn encode(value: &[u8]) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for &b in value {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The raw (still encoded) values of every parameter called `name`, in order. Pairs whose name
/// does not decode are skipped: they cannot be the parameter asked for.
pub fn raw_values<'a>(input: &'a [u8], name: &str) -> Vec<&'a [u8]> {
    input
        .split(|&b| b == b'&' || b == b';')
        .filter(|pair| !pair.is_empty())
        .filter_map(|pair| {
            let (k, v) = match pair.iter().position(|&b| b == b'=') {
                Some(eq) => (&pair[..eq], &pair[eq + 1..]),
                None => (pair, &pair[pair.len()..]),
            };
            (decode(k).ok()?.as_slice() == name.as_bytes()).then_some(v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_is_decoded_back_exactly() {
        for value in [&b"https://e.x/a b?c=d&e=f+g#h"[..], b"\xff\x00%", b""] {
            assert_eq!(decode(encode(value).as_bytes()).unwrap(), value);
        }
        assert_eq!(encode(b"a b/~"), "a%20b%2F~");
    }

    #[test]
    fn decodes_plus_and_percent() {
        assert_eq!(decode(b"a+b%20c%2Bd").unwrap(), b"a b c+d");
        assert_eq!(decode(b"%e2%9C%93").unwrap(), "\u{2713}".as_bytes());
        assert_eq!(decode(b"").unwrap(), b"");
        assert_eq!(decode(b"%ff%fe").unwrap(), [0xff, 0xfe]);
    }

    #[test]
    fn percent_decoding_keeps_plus() {
        assert_eq!(percent_decode(b"a+b%2B%20").unwrap(), b"a+b+ ");
        assert!(percent_decode(b"%g0").is_err());
    }

    #[test]
    fn rejects_broken_percent_escapes() {
        for bad in [&b"%"[..], b"%e", b"%zz", b"abc%4", b"%%41", b"%+1"] {
            assert_eq!(decode(bad), Err(FormError::BadPercent), "{bad:?}");
        }
    }

    #[test]
    fn finds_every_value_of_a_parameter() {
        let q = b"a=1&link=x&&link=&b;link%3Dx=2&lin%6B=y&link";
        assert_eq!(raw_values(q, "link"), vec![&b"x"[..], b"", b"y", b""]);
        assert!(raw_values(b"", "link").is_empty());
        assert!(raw_values(b"%zz=1&=2&&&", "link").is_empty());
        assert_eq!(raw_values(b"link=a=b", "link"), vec![&b"a=b"[..]]);
    }
}
