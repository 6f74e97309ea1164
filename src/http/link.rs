//! What counts as a link a visitor may submit: an absolute http(s) URL with a host, as the one
//! URL parser reads it. The link is passed on as the visitor wrote it.

use crate::net::url::{self, UrlError};
use crate::support::defaults;

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
    match url::parse(link, &["https", "http"]) {
        Ok(_) => Ok(link),
        Err(UrlError::Whitespace) => Err(LinkError::Whitespace),
        Err(UrlError::Scheme) => Err(LinkError::Scheme),
        Err(UrlError::NoHost) => Err(LinkError::NoHost),
        Err(UrlError::BadHost) => Err(LinkError::BadHost),
        Err(UrlError::BadPort) => Err(LinkError::BadPort),
    }
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
        let cases: &[(LinkError, &[&[u8]])] = &[
            (LinkError::Empty, &[b"", b"   "]),
            (LinkError::TooLong, &[long.as_bytes()]),
            (LinkError::NotUtf8, &[b"https://e.x/\xff"]),
            (
                LinkError::Whitespace,
                &[
                    b"https://e.x/a b",
                    b"https://e.x/\x01",
                    b"https://e.x/\r\nSet-Cookie: x",
                ],
            ),
            (
                LinkError::Scheme,
                &[
                    b"example.com/file",
                    b"ftp://example.com/file",
                    b"javascript:alert(1)",
                    b"file:///etc/passwd",
                    b"//example.com/x",
                    "https:/\u{e9}x".as_bytes(),
                    "http\u{1f600}s".as_bytes(),
                ],
            ),
            (
                LinkError::NoHost,
                &[b"https://", b"https:///path", b"https://user@/x"],
            ),
            (
                LinkError::BadHost,
                &[
                    b"https://exa_mple.com/",
                    b"https://a..b/",
                    b"https://[zz]/",
                    b"https://[::1/",
                ],
            ),
            (
                LinkError::BadPort,
                &[b"https://e.x:80a/", b"https://e.x:123456/"],
            ),
        ];
        for (want, inputs) in cases {
            for input in *inputs {
                assert_eq!(
                    validate(input),
                    Err(*want),
                    "{:?}",
                    String::from_utf8_lossy(input)
                );
            }
        }
    }
}
