//! What counts as a link a visitor may submit: an absolute http(s) URL with a host.

use crate::defaults;

/// Why a submitted link was refused; `Display` is the sentence shown to the visitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkError {
    Empty,
    TooLong,
    NotUtf8,
    Whitespace,
    Scheme,
    NoHost,
    BadHost,
    BadPort,
}

impl std::fmt::Display for LinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LinkError::Empty => "Paste a link first.",
            LinkError::TooLong => "That link is too long (at most 2048 characters).",
            LinkError::NotUtf8 => "That link contains bytes that are not text.",
            LinkError::Whitespace => "A link cannot contain spaces or control characters.",
            LinkError::Scheme => "The link must start with http:// or https://.",
            LinkError::NoHost => "The link has no host name after http(s)://.",
            LinkError::BadHost => "The link's host name is not valid.",
            LinkError::BadPort => "The link's port is not valid.",
        })
    }
}

/// Checks a decoded link and returns it without surrounding white space.
pub fn validate(decoded: &[u8]) -> Result<&str, LinkError> {
    let text = std::str::from_utf8(decoded).map_err(|_| LinkError::NotUtf8)?;
    let link = text.trim_matches(|c: char| c.is_ascii_whitespace());
    if link.is_empty() {
        return Err(LinkError::Empty);
    }
    if link.len() > defaults::MAX_LINK_BYTES {
        return Err(LinkError::TooLong);
    }
    if link.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(LinkError::Whitespace);
    }
    let rest = strip_scheme(link).ok_or(LinkError::Scheme)?;
    let authority = rest.split(['/', '?', '#', '\\']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let (host, port) = split_port(host_port)?;
    if host.is_empty() {
        return Err(LinkError::NoHost);
    }
    if !valid_host(host) {
        return Err(LinkError::BadHost);
    }
    if let Some(p) = port
        && !(p.is_empty() || (p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())))
    {
        return Err(LinkError::BadPort);
    }
    Ok(link)
}

fn strip_scheme(link: &str) -> Option<&str> {
    for scheme in ["https://", "http://"] {
        // Bytes, not a str slice: a multi-byte character may straddle the scheme's length.
        if link
            .as_bytes()
            .get(..scheme.len())
            .is_some_and(|b| b.eq_ignore_ascii_case(scheme.as_bytes()))
        {
            return Some(&link[scheme.len()..]);
        }
    }
    None
}

fn split_port(host_port: &str) -> Result<(&str, Option<&str>), LinkError> {
    if let Some(rest) = host_port.strip_prefix('[') {
        let (v6, after) = rest.split_once(']').ok_or(LinkError::BadHost)?;
        if v6.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(LinkError::BadHost);
        }
        return match after {
            "" => Ok((host_port, None)),
            _ => match after.strip_prefix(':') {
                Some(p) => Ok((&host_port[..v6.len() + 2], Some(p))),
                None => Err(LinkError::BadHost),
            },
        };
    }
    Ok(match host_port.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (host_port, None),
    })
}

fn valid_host(host: &str) -> bool {
    if host.starts_with('[') {
        return true; // checked by split_port
    }
    host.len() <= 253
        && !host.starts_with('.')
        && !host.contains("..")
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || !c.is_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_links() {
        for ok in [
            "https://example.com/file.zip",
            "http://example.com",
            "HTTPS://Example.COM:8443/a?b=c#d",
            "https://user:pw@host.example/x",
            "https://[2001:db8::1]:8080/f",
            "https://[::1]/f",
            "https://bücher.example/x",
            "https://1fichier.com/?abc123",
        ] {
            assert_eq!(validate(ok.as_bytes()), Ok(ok), "{ok}");
        }
        assert_eq!(validate(b"  https://e.x/a\n"), Ok("https://e.x/a"));
    }

    #[test]
    fn refuses_everything_else() {
        let long = format!("https://e.x/{}", "a".repeat(2048));
        let cases: &[(&[u8], LinkError)] = &[
            (b"", LinkError::Empty),
            (b"   ", LinkError::Empty),
            (long.as_bytes(), LinkError::TooLong),
            (b"https://e.x/\xff", LinkError::NotUtf8),
            (b"https://e.x/a b", LinkError::Whitespace),
            (b"https://e.x/\x01", LinkError::Whitespace),
            (b"https://e.x/\r\nSet-Cookie: x", LinkError::Whitespace),
            (b"example.com/file", LinkError::Scheme),
            (b"ftp://example.com/file", LinkError::Scheme),
            (b"javascript:alert(1)", LinkError::Scheme),
            (b"file:///etc/passwd", LinkError::Scheme),
            (b"//example.com/x", LinkError::Scheme),
            ("https:/\u{e9}x".as_bytes(), LinkError::Scheme),
            ("http\u{1f600}s".as_bytes(), LinkError::Scheme),
            (b"https://", LinkError::NoHost),
            (b"https:///path", LinkError::NoHost),
            (b"https://user@/x", LinkError::NoHost),
            (b"https://exa_mple.com/", LinkError::BadHost),
            (b"https://a..b/", LinkError::BadHost),
            (b"https://[zz]/", LinkError::BadHost),
            (b"https://[::1/", LinkError::BadHost),
            (b"https://e.x:80a/", LinkError::BadPort),
            (b"https://e.x:123456/", LinkError::BadPort),
        ];
        for (input, want) in cases {
            assert_eq!(
                validate(input),
                Err(*want),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }
}
