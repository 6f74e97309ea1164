//! The one URL parser: every URL the program reads (a visitor's link, an `Origin` or `Referer`,
//! the provider's address, the MySQL and Redis URLs, a link's cache key) is parsed here, by the
//! `url` crate (the WHATWG URL Standard browsers follow), behind strict checks that refuse what
//! a browser would quietly repair: white space and control characters, a missing `//`, an empty
//! host, a malformed port or host.
//!
//! Every question about a URL is answered from the parsed form, never from the text: the host
//! is what comes after the last `@` of the authority, so `http://localhost:80@evil.example/`
//! is a URL of `evil.example` (with a user name), not of this machine.

use std::fmt;
use std::net::IpAddr;

/// Why a text is not a URL the program accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlError {
    /// Spaces or control characters anywhere in it.
    Whitespace,
    /// Not `SCHEME://` with one of the schemes asked for.
    Scheme,
    /// Nothing where the host should be.
    NoHost,
    /// A host name or address that is not valid.
    BadHost,
    /// A port that is not a number from 0 to 65535.
    BadPort,
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UrlError::Whitespace => "it contains spaces or control characters",
            UrlError::Scheme => "it does not start with a scheme it may have, followed by ://",
            UrlError::NoHost => "it names no host",
            UrlError::BadHost => "its host is not a valid name or address",
            UrlError::BadPort => "its port is not a number from 0 to 65535",
        })
    }
}

/// A host as parsed: a name (lower case, international names in their `xn--` form) or an
/// address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host<'a> {
    Name(&'a str),
    Ip(IpAddr),
}

/// A URL that passed the checks: absolute, one of the schemes asked for, with a valid host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url(::url::Url);

/// Parses `text` as a URL of one of `schemes` (lower case, e.g. `["https", "http"]`).
pub fn parse(text: &str, schemes: &[&str]) -> Result<Url, UrlError> {
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UrlError::Whitespace);
    }
    // `SCHEME://` as written: the standard would also take `https:host` or `https:/host`.
    let after = schemes
        .iter()
        .find_map(|s| {
            let prefix = text.as_bytes().get(..s.len() + 3)?;
            (prefix[..s.len()].eq_ignore_ascii_case(s.as_bytes()) && &prefix[s.len()..] == b"://")
                .then(|| &text[s.len() + 3..])
        })
        .ok_or(UrlError::Scheme)?;
    // The standard skips any number of slashes before a host (`https:///x` is host `x`).
    if after.is_empty() || after.starts_with(['/', '\\']) {
        return Err(UrlError::NoHost);
    }
    let url = ::url::Url::parse(text).map_err(|e| match e {
        ::url::ParseError::EmptyHost => UrlError::NoHost,
        ::url::ParseError::InvalidPort => UrlError::BadPort,
        _ => UrlError::BadHost,
    })?;
    let ok = match url.host() {
        None => return Err(UrlError::NoHost),
        Some(::url::Host::Domain("")) => return Err(UrlError::NoHost),
        Some(::url::Host::Domain(name)) => is_host_name(name),
        Some(::url::Host::Ipv4(_) | ::url::Host::Ipv6(_)) => true,
    };
    if !ok {
        return Err(UrlError::BadHost);
    }
    Ok(Url(url))
}

/// Parses `text` as a URL of a local socket, `SCHEME://[USER[:PASSWORD]@]/absolute/path[?query]`:
/// a URL with no host, only a path. The standard has no such form with a user and password,
/// so the parser is given the same URL with the host `localhost` in the empty place, and the
/// host is then ignored: only the credentials, the path and the query are read.
pub fn parse_socket(text: &str, scheme: &str) -> Result<Url, UrlError> {
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UrlError::Whitespace);
    }
    let prefix = format!("{scheme}://");
    let after = text
        .get(..prefix.len())
        .filter(|p| p.eq_ignore_ascii_case(&prefix))
        .map(|_| &text[prefix.len()..])
        .ok_or(UrlError::Scheme)?;
    let path_at = after.find('/').ok_or(UrlError::NoHost)?;
    let (authority, path) = after.split_at(path_at);
    if !(authority.is_empty() || authority.ends_with('@')) {
        // A host before the path: not a socket's URL.
        return Err(UrlError::BadHost);
    }
    let url = ::url::Url::parse(&format!("{prefix}{authority}localhost{path}"))
        .map_err(|_| UrlError::BadHost)?;
    Ok(Url(url))
}

/// A host name of letters, digits, `-` and `.` (after IDNA), in labels that are not empty.
fn is_host_name(name: &str) -> bool {
    name.len() <= 253
        && !name.starts_with('.')
        && !name.contains("..")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
}

/// True for an absolute http(s) URL: the only kind of download link passed on.
pub fn is_web_url(s: &str) -> bool {
    has_web_scheme(s) && s.len() <= 8192 && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// True for an absolute http(s) URL by its scheme alone: the test for a download link a
/// provider returns, which is passed on as the provider wrote it.
pub fn has_web_scheme(text: &str) -> bool {
    ["https://", "http://"].iter().any(|s| {
        text.as_bytes()
            .get(..s.len())
            .is_some_and(|b| b.eq_ignore_ascii_case(s.as_bytes()))
    })
}

impl Url {
    /// The scheme, in lower case.
    pub fn scheme(&self) -> &str {
        self.0.scheme()
    }

    /// The host, as parsed.
    pub fn host(&self) -> Host<'_> {
        match self.0.host() {
            Some(::url::Host::Ipv4(a)) => Host::Ip(IpAddr::V4(a)),
            Some(::url::Host::Ipv6(a)) => Host::Ip(IpAddr::V6(a)),
            Some(::url::Host::Domain(d)) => Host::Name(d),
            None => Host::Name(""),
        }
    }

    /// The host as text: a name, an IPv4 address, or an IPv6 address without brackets.
    pub fn host_text(&self) -> String {
        match self.host() {
            Host::Name(n) => n.to_owned(),
            Host::Ip(ip) => ip.to_string(),
        }
    }

    /// True when the host is this machine: a loopback address or `localhost`, as parsed.
    pub fn is_on_this_machine(&self) -> bool {
        match self.host() {
            Host::Ip(ip) => ip.is_loopback(),
            Host::Name(n) => n == "localhost",
        }
    }

    /// The port written in the URL, if any (a scheme's default port is not kept).
    pub fn port(&self) -> Option<u16> {
        self.0.port()
    }

    /// The user name, percent-decoded (empty when there is none).
    pub fn username(&self) -> Option<String> {
        decode(self.0.username())
    }

    /// The password, percent-decoded.
    pub fn password(&self) -> Option<String> {
        self.0.password().and_then(decode)
    }

    /// True when the URL holds a user name or a password.
    pub fn has_credentials(&self) -> bool {
        !self.0.username().is_empty() || self.0.password().is_some()
    }

    /// The path, as written (percent-encoded).
    pub fn path(&self) -> &str {
        self.0.path()
    }

    /// The query's `name=value` pairs, decoded.
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        self.0.query_pairs().into_owned().collect()
    }

    /// True when the URL has a `#fragment`.
    pub fn has_fragment(&self) -> bool {
        self.0.fragment().is_some()
    }

    /// `scheme://host[:port]`, the port left out when it is the scheme's default: how browsers
    /// write an `Origin`.
    pub fn origin(&self) -> String {
        self.0.origin().ascii_serialization()
    }

    /// The URL in its standard form without the fragment: the same resource written
    /// differently (case of the scheme and host, a default port, dot segments) gives one text.
    pub fn normalised(&self) -> String {
        let mut u = self.0.clone();
        u.set_fragment(None);
        u.into()
    }

    /// The URL with its password (if any) replaced by the mask, for showing.
    pub fn masked(&self) -> String {
        let mut u = self.0.clone();
        if u.password().is_some() {
            let _ = u.set_password(Some(crate::support::secret::MASK));
        }
        u.into()
    }
}

/// Percent-decoded text, None when empty or not UTF-8 once decoded.
fn decode(s: &str) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    crate::net::form::percent_decode(s.as_bytes())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEB: &[&str] = &["https", "http"];

    #[test]
    fn the_host_is_what_follows_the_last_at_sign() {
        for (text, host) in [
            ("http://localhost:80@evil.example/unlock", "evil.example"),
            ("http://[::1]@evil.example/x", "evil.example"),
            ("http://127.0.0.1@evil.example/", "evil.example"),
            ("http://localhost@evil.example:80/", "evil.example"),
            ("http://a:b@localhost@evil.example/", "evil.example"),
            ("http://localhost%40@evil.example/", "evil.example"),
            ("http://localhost%2F@evil.example/", "evil.example"),
            ("http://localhost%3A80@evil.example/", "evil.example"),
            ("http://user:pw@EVIL.example/", "evil.example"),
        ] {
            let u = parse(text, WEB).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(u.host_text(), host, "{text}");
            assert!(!u.is_on_this_machine(), "{text}");
            assert!(u.has_credentials(), "{text}");
        }
    }

    #[test]
    fn this_machine_is_a_loopback_address_or_localhost() {
        for text in [
            "http://localhost/x",
            "http://LOCALHOST:9000/x",
            "http://127.0.0.1:9000/x",
            "http://127.8.9.10/x",
            "http://[::1]:80/x",
            "http://[0:0:0:0:0:0:0:1]/x",
        ] {
            assert!(parse(text, WEB).unwrap().is_on_this_machine(), "{text}");
        }
        for text in [
            "http://localhost.evil.example/",
            "http://localhost./",
            "http://evil.localhost.example/",
            "http://127.0.0.1.nip.io/",
            "http://[::ffff:7f00:1]/",
            "http://[::2]/",
            "http://0.0.0.0/",
            "http://evil.example/localhost",
            "http://evil.example?localhost",
            "http://evil.example#@localhost",
        ] {
            assert!(!parse(text, WEB).unwrap().is_on_this_machine(), "{text}");
        }
    }

    #[test]
    fn strictness_the_standard_does_not_have() {
        for (text, want) in [
            ("https:///x", UrlError::NoHost),
            ("https://", UrlError::NoHost),
            ("https:/\\x", UrlError::Scheme),
            ("https:\\\\evil.example/", UrlError::Scheme),
            ("https:evil.example", UrlError::Scheme),
            ("//evil.example/", UrlError::Scheme),
            ("https://\\evil.example/", UrlError::NoHost),
            ("https://ev il.example/", UrlError::Whitespace),
            ("https://evil.example/\t", UrlError::Whitespace),
            ("https://evil.example\n.x/", UrlError::Whitespace),
            ("https://user@/x", UrlError::NoHost),
            ("https://exa_mple.com/", UrlError::BadHost),
            ("https://a..b/", UrlError::BadHost),
            ("https://[zz]/", UrlError::BadHost),
            ("https://[::1/", UrlError::BadHost),
            ("https://e.x:80a/", UrlError::BadPort),
            ("https://e.x:123456/", UrlError::BadPort),
            ("ftp://e.x/", UrlError::Scheme),
        ] {
            assert_eq!(parse(text, WEB), Err(want), "{text}");
        }
    }

    #[test]
    fn numeric_and_encoded_hosts_are_read_as_the_standard_reads_them() {
        // Whatever the spelling, the answer comes from the parsed address.
        assert!(parse("http://0x7f.1/", WEB).unwrap().is_on_this_machine());
        assert!(
            parse("http://2130706433/", WEB)
                .unwrap()
                .is_on_this_machine()
        );
        assert!(
            parse("http://%6c%6fcalhost/", WEB)
                .unwrap()
                .is_on_this_machine()
        );
        assert_eq!(
            parse("https://B\u{fc}cher.example/x", WEB)
                .unwrap()
                .host_text(),
            "xn--bcher-kva.example"
        );
    }

    #[test]
    fn parts_and_forms() {
        let u = parse(
            "HTTPS://u%40x:p%3Aw@Host.Example:443/a/../b?x=1&y=%20#frag",
            WEB,
        )
        .unwrap();
        assert_eq!(u.scheme(), "https");
        assert_eq!(u.username().as_deref(), Some("u@x"));
        assert_eq!(u.password().as_deref(), Some("p:w"));
        assert_eq!(u.port(), None);
        assert_eq!(u.path(), "/b");
        assert_eq!(
            u.query_pairs(),
            vec![("x".into(), "1".into()), ("y".into(), " ".into())]
        );
        assert_eq!(u.origin(), "https://host.example");
        assert_eq!(
            u.normalised(),
            "https://u%40x:p%3Aw@host.example/b?x=1&y=%20"
        );
        assert_eq!(
            u.masked(),
            "https://u%40x:***@host.example/b?x=1&y=%20#frag"
        );
        let r = parse("redis://:pw@[::1]:6380/2", &["redis"]).unwrap();
        assert_eq!(r.host(), Host::Ip("::1".parse().unwrap()));
        assert_eq!(r.port(), Some(6380));
        assert_eq!(r.username(), None);
        assert_eq!(r.password().as_deref(), Some("pw"));
    }

    #[test]
    fn web_scheme_by_prefix() {
        assert!(has_web_scheme("HTTPS://x"));
        assert!(has_web_scheme("http://x y"));
        assert!(!has_web_scheme("javascript:x"));
        assert!(!has_web_scheme("http\u{e9}://x"));
    }

    #[test]
    fn socket_urls_have_a_path_and_no_host() {
        let u = parse_socket("unix://app:p%40w@/run/redis.sock?db=3", "unix").unwrap();
        assert_eq!(u.username().as_deref(), Some("app"));
        assert_eq!(u.password().as_deref(), Some("p@w"));
        assert_eq!(u.path(), "/run/redis.sock");
        assert_eq!(u.query_pairs(), vec![("db".into(), "3".into())]);
        let u = parse_socket("unix:///run/a@/b.sock", "unix").unwrap();
        assert_eq!((u.username(), u.path()), (None, "/run/a@/b.sock"));
        assert_eq!(
            parse_socket("unix://relative.sock", "unix"),
            Err(UrlError::NoHost)
        );
        assert_eq!(
            parse_socket("unix://host/x.sock", "unix"),
            Err(UrlError::BadHost)
        );
        assert_eq!(
            parse_socket("redis:///x.sock", "unix"),
            Err(UrlError::Scheme)
        );
    }
}
