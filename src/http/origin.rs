//! Which pages may use the endpoint: an allow-list of origins, so that other sites cannot spend
//! the owner's money from their own pages. Browsers send `Origin` on cross-site requests made
//! by scripts and forms, `Referer` on most others, and `Sec-Fetch-Site` on all of them (even
//! when a page's `Referrer-Policy: no-referrer` strips the other two). Programs send none of
//! them, or what they like, and are left to the rate limits and API keys: the check only binds
//! browsers, which is what it is for.

use crate::http::problem::{Kind, Problem};

/// `scheme://host[:port]` in lower case, from an Origin or Referer value.
pub fn origin_of(value: &str) -> Option<String> {
    let value = value.trim();
    plain_origin(value).or_else(|| {
        crate::net::url::parse(value, &["https", "http"])
            .ok()
            .map(|u| u.origin())
    })
}

/// The origin of a URL written plainly (`https://www.example.com`, `http://localhost:8080/x`),
/// read without the URL parser: the configuration's `allowed_origins` are read at every start,
/// and the parser (with its IDNA tables) is most of that. None for anything else (upper case,
/// a number for a host, an IDNA label, a user name, an empty port, ...), which the parser reads;
/// where this gives an origin, it is the parser's (a test compares them).
pub(crate) fn plain_origin(value: &str) -> Option<String> {
    let (scheme, default_port, rest) = if let Some(rest) = value.strip_prefix("https://") {
        ("https", 443, rest)
    } else {
        ("http", 80, value.strip_prefix("http://")?)
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    if rest[authority_end..]
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return None;
    }
    let authority = &rest[..authority_end];
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    if !plain_host(host.as_bytes()) {
        return None;
    }
    let port = match port {
        None => None,
        Some(p) if p.is_empty() || p.len() > 5 || p.starts_with('0') => return None,
        Some(p) => Some(p.parse::<u16>().ok()?).filter(|p| *p != default_port),
    };
    Some(match port {
        Some(p) => format!("{scheme}://{host}:{p}"),
        // `scheme://host` is how `value` begins.
        None => value[..value.len() - rest.len() + host.len()].to_owned(),
    })
}

/// Whether `host` is written plainly: at most 253 bytes of labels that are not empty, hold
/// only a-z, 0-9 and '-' and are no IDNA label (`xn--`), the last not a number (decimal, or hex
/// after 0x: the parser reads such a host as an IPv4 address). One pass, no splitting: the
/// configuration's origins are read at every start.
fn plain_host(host: &[u8]) -> bool {
    if host.len() > 253 {
        return false;
    }
    let mut start = 0;
    for end in 0..=host.len() {
        match host.get(end) {
            Some(b'.') | None => {
                let label = &host[start..end];
                if label.is_empty() || label.starts_with(b"xn--") {
                    return false;
                }
                start = end + 1;
            }
            Some(b) if b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' => {}
            Some(_) => return false,
        }
    }
    let last = &host[host.iter().rposition(|b| *b == b'.').map_or(0, |i| i + 1)..];
    let numeric = last.iter().all(u8::is_ascii_digit)
        || last
            .strip_prefix(b"0x")
            .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
    !numeric
}

/// Checks a request's `Origin` (or, without one, its `Referer`) against `allowed` (normalised
/// origins). An empty list allows everything.
///
/// A request naming neither is judged by `Sec-Fetch-Site`, which browsers send on every
/// request: `cross-site` (another site's page) and `same-site` (a sibling subdomain, which is
/// another site here) are refused, as is any value browsers do not send; `same-origin` (a page
/// next to the endpoint), `none` (typed, bookmarked) and no header at all (programs, older
/// browsers) are allowed. With an allowed `Origin` or `Referer`, the page is known and
/// `Sec-Fetch-Site` does not matter (the endpoint may live on another host than the pages).
pub fn check(
    allowed: &[String],
    origin: Option<&[u8]>,
    referer: Option<&[u8]>,
    fetch_site: Option<&[u8]>,
) -> Result<(), Problem> {
    if allowed.is_empty() {
        return Ok(());
    }
    let (header, value) = match (origin, referer) {
        (Some(o), _) => ("Origin", o),
        (None, Some(r)) => ("Referer", r),
        (None, None) => return check_fetch_site(fetch_site),
    };
    let text = String::from_utf8_lossy(value);
    match origin_of(&text) {
        Some(o) if allowed.contains(&o) => Ok(()),
        found => Err(refused(format!(
            "{header} {}",
            found.unwrap_or_else(|| "unreadable".to_owned())
        ))),
    }
}

/// The request's page as `Sec-Fetch-Site` tells it, for a request without Origin or Referer.
fn check_fetch_site(fetch_site: Option<&[u8]>) -> Result<(), Problem> {
    let Some(value) = fetch_site else {
        return Ok(());
    };
    let value = value.trim_ascii();
    if value.eq_ignore_ascii_case(b"same-origin") || value.eq_ignore_ascii_case(b"none") {
        return Ok(());
    }
    let shown = if value.eq_ignore_ascii_case(b"cross-site") {
        "cross-site"
    } else if value.eq_ignore_ascii_case(b"same-site") {
        "same-site"
    } else {
        "unreadable"
    };
    Err(refused(format!(
        "Sec-Fetch-Site {shown}, no Origin or Referer"
    )))
}

fn refused(what: String) -> Problem {
    Problem::new(
        403,
        Kind::OriginNotAllowed,
        "This service can only be used from its own site.",
    )
    .log(format!("refused a request from another site ({what})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plainly_written_origin_is_read_as_the_url_parser_reads_it() {
        let parsed = |v: &str| {
            crate::net::url::parse(v, &["https", "http"])
                .ok()
                .map(|u| u.origin())
        };
        // Read without the parser, and as it reads them.
        for v in [
            "https://example.com",
            "https://www.example.com/",
            "http://localhost:8080/page?x=1#top",
            "https://a-b.example.co.uk:443/x",
            "http://example.com:80",
            "https://sub.example.com:8443",
            "https://1example.com",
            "https://example.0xg",
            "https://-x.example",
        ] {
            assert!(plain_origin(v).is_some(), "{v}");
            assert_eq!(plain_origin(v), parsed(v), "{v}");
        }
        // Left to the parser (what it makes of them may differ, or it refuses them).
        for v in [
            "https://Example.com",
            "HTTPS://example.com",
            "https://127.0.0.1",
            "https://example.1",
            "https://example.0x1f",
            "https://xn--bcher-kva.example",
            "https://bücher.example",
            "https://example.com.",
            "https://user@example.com",
            "https://example.com:",
            "https://example.com:0443",
            "https://example.com:65536",
            "https://example..com",
            "https://example.com?x",
            "https://example.com/a b",
            "https://",
            "ftp://example.com",
            "https://[::1]:8080",
        ] {
            assert_eq!(plain_origin(v), None, "{v}");
            assert_eq!(origin_of(v), parsed(v), "{v}");
        }
    }

    #[test]
    fn origins_are_normalised() {
        assert_eq!(
            origin_of("https://Example.com").as_deref(),
            Some("https://example.com")
        );
        assert_eq!(
            origin_of("https://example.com:443/page?x").as_deref(),
            Some("https://example.com")
        );
        assert_eq!(
            origin_of("http://example.com:8080/").as_deref(),
            Some("http://example.com:8080")
        );
        assert_eq!(origin_of("null"), None);
        assert_eq!(origin_of("file:///x"), None);
        assert_eq!(origin_of("https://ex ample.com"), None);
    }

    #[test]
    fn only_listed_sites_pass() {
        let allowed = vec!["https://mysite.example".to_owned()];
        assert!(check(&allowed, Some(b"https://mysite.example"), None, None).is_ok());
        assert!(
            check(
                &allowed,
                None,
                Some(b"https://mysite.example/index.html"),
                None
            )
            .is_ok()
        );
        assert!(
            check(&allowed, None, None, None).is_ok(),
            "programs send neither"
        );
        for (o, r) in [
            (Some(&b"https://evil.example"[..]), None),
            (Some(b"null"), None),
            (Some(b"https://mysite.example.evil.example"), None),
            (None, Some(&b"https://evil.example/page"[..])),
            (
                Some(b"https://evil.example"),
                Some(&b"https://mysite.example/"[..]),
            ),
        ] {
            let e = check(&allowed, o, r, None).unwrap_err();
            assert_eq!((e.status, e.code()), (403, "origin_not_allowed"));
        }
        assert!(
            check(&[], Some(b"https://evil.example"), None, None).is_ok(),
            "no list: off"
        );
    }

    #[test]
    fn without_origin_or_referer_fetch_metadata_decides() {
        let allowed = vec!["https://mysite.example".to_owned()];
        let site = |v: &'static str| Some(v.as_bytes());
        // Another site's <img> or link under Referrer-Policy: no-referrer, a sibling subdomain,
        // and values no browser sends.
        for v in [
            "cross-site",
            "same-site",
            "Cross-Site",
            " cross-site ",
            "",
            "bogus",
        ] {
            let e = check(&allowed, None, None, site(v)).unwrap_err();
            assert_eq!((e.status, e.code()), (403, "origin_not_allowed"), "{v:?}");
            let log = e.log.unwrap();
            assert!(
                log.starts_with("refused a request from another site (Sec-Fetch-Site "),
                "{log}"
            );
        }
        let e = check(&allowed, None, None, site("cross-site")).unwrap_err();
        assert_eq!(
            e.log.as_deref(),
            Some(
                "refused a request from another site (Sec-Fetch-Site cross-site, no Origin or Referer)"
            )
        );
        let e = check(&allowed, None, None, Some(b"x\r\nforged")).unwrap_err();
        assert!(e.log.unwrap().contains("Sec-Fetch-Site unreadable"));
        // A page next to the endpoint, a typed URL or bookmark, programs and older browsers.
        for f in [site("same-origin"), site("none"), None] {
            assert!(check(&allowed, None, None, f).is_ok(), "{f:?}");
        }
        // An allowed page is known whatever Sec-Fetch-Site says (the endpoint may be on
        // another host than the pages); a refused one stays refused.
        for f in [site("cross-site"), site("same-site"), site("same-origin")] {
            assert!(check(&allowed, Some(b"https://mysite.example"), None, f).is_ok());
            assert!(check(&allowed, None, Some(b"https://mysite.example/p"), f).is_ok());
            assert!(check(&allowed, Some(b"https://evil.example"), None, f).is_err());
            assert!(check(&allowed, None, Some(b"https://www.mysite.example/"), f).is_err());
        }
        // No list: off.
        assert!(check(&[], None, None, site("cross-site")).is_ok());
    }
}
