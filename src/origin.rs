//! Which pages may use the endpoint: an allow-list of origins, so that other sites cannot spend
//! the owner's money from their own pages. Browsers send `Origin` on cross-site requests made
//! by scripts and forms (and `Referer` on most others); programs send neither and are left to
//! the rate limits and API keys: the check only binds browsers, which is what it is for.

use crate::problem::Problem;

/// `scheme://host[:port]` in lower case, from an Origin or Referer value.
pub fn origin_of(value: &str) -> Option<String> {
    let value = value.trim();
    let (scheme, rest) = value.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?.to_ascii_lowercase();
    let authority = authority.rsplit('@').next()?;
    let default_port = if scheme == "https" { ":443" } else { ":80" };
    let authority = authority.strip_suffix(default_port).unwrap_or(authority);
    if authority.is_empty()
        || !authority
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c))
    {
        return None;
    }
    Some(format!("{scheme}://{authority}"))
}

/// Checks a request's `Origin` (or, without one, its `Referer`) against `allowed` (normalised
/// origins). An empty list allows everything; a request naming neither is allowed.
pub fn check(
    allowed: &[String],
    origin: Option<&[u8]>,
    referer: Option<&[u8]>,
) -> Result<(), Problem> {
    if allowed.is_empty() {
        return Ok(());
    }
    let (header, value) = match (origin, referer) {
        (Some(o), _) => ("Origin", o),
        (None, Some(r)) => ("Referer", r),
        (None, None) => return Ok(()),
    };
    let text = String::from_utf8_lossy(value);
    match origin_of(&text) {
        Some(o) if allowed.contains(&o) => Ok(()),
        found => Err(Problem::new(
            403,
            "origin_not_allowed",
            "This service can only be used from its own site.",
        )
        .log(format!(
            "refused a request from another site ({header} {})",
            found.unwrap_or_else(|| "unreadable".to_owned())
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(check(&allowed, Some(b"https://mysite.example"), None).is_ok());
        assert!(check(&allowed, None, Some(b"https://mysite.example/index.html")).is_ok());
        assert!(check(&allowed, None, None).is_ok(), "programs send neither");
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
            let e = check(&allowed, o, r).unwrap_err();
            assert_eq!((e.status, e.code), (403, "origin_not_allowed"));
        }
        assert!(
            check(&[], Some(b"https://evil.example"), None).is_ok(),
            "no list: off"
        );
    }
}
