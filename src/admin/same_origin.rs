//! Whether a dashboard form was sent from the dashboard's own pages, by the headers browsers
//! add to every POST: `Origin` must be this host (over http or https), else `Sec-Fetch-Site`
//! must be `same-origin`. The dashboard's pages say `Referrer-Policy: no-referrer`, under which
//! browsers send `Origin: null` even from the page itself: a null origin is judged by
//! `Sec-Fetch-Site` alone, and refused without it. A request with neither header comes from a
//! program or a very old browser and is left to the form's token, which every POST needs
//! anyway. Pure.

use std::fmt;

use crate::http::origin::origin_of;
use crate::http::request::Env;

/// The header that showed a form came from another site, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OtherSite {
    /// `Origin: null` without `Sec-Fetch-Site` to judge it by.
    NullOrigin,
    /// Another origin (None: unreadable).
    Origin(Option<String>),
    /// `Sec-Fetch-Site` other than `same-origin`: its value, or `unreadable`.
    FetchSite(&'static str),
}

impl fmt::Display for OtherSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OtherSite::NullOrigin => f.write_str("Origin null, no Sec-Fetch-Site"),
            OtherSite::Origin(found) => write!(
                f,
                "Origin {}",
                found.as_deref().unwrap_or("unreadable or null")
            ),
            OtherSite::FetchSite(value) => write!(f, "Sec-Fetch-Site {value}"),
        }
    }
}

impl std::error::Error for OtherSite {}

/// The host the browser asked for (`Host`, else the server's name and port).
fn own_host(env: &Env) -> Option<String> {
    if let Some(host) = env.text("HTTP_HOST").filter(|h| !h.is_empty()) {
        return Some(host.to_owned());
    }
    let name = env.text("SERVER_NAME")?;
    Some(match env.text("SERVER_PORT") {
        Some(port) if port != "80" && port != "443" => format!("{name}:{port}"),
        _ => name.to_owned(),
    })
}

/// Ok when the request's page is the dashboard's own site; the header that said otherwise
/// (for the log) when not.
pub fn check(env: &Env) -> Result<(), OtherSite> {
    let fetch_site = env.header("Sec-Fetch-Site").map(<[u8]>::trim_ascii);
    let null = env
        .header("Origin")
        .is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"null"));
    if null && fetch_site.is_none() {
        return Err(OtherSite::NullOrigin);
    }
    if let Some(value) = env.header("Origin").filter(|_| !null) {
        let text = String::from_utf8_lossy(value);
        let found = origin_of(&text);
        let ours = own_host(env).map(|host| {
            [
                origin_of(&format!("https://{host}")),
                origin_of(&format!("http://{host}")),
            ]
        });
        return match (found, ours) {
            (Some(o), Some(ours)) if ours.iter().any(|x| x.as_deref() == Some(o.as_str())) => {
                Ok(())
            }
            (found, _) => Err(OtherSite::Origin(found)),
        };
    }
    match fetch_site {
        None => Ok(()),
        Some(v) if v.eq_ignore_ascii_case(b"same-origin") => Ok(()),
        Some(v) => Err(OtherSite::FetchSite(
            if v.eq_ignore_ascii_case(b"cross-site") {
                "cross-site"
            } else if v.eq_ignore_ascii_case(b"same-site") {
                "same-site"
            } else if v.eq_ignore_ascii_case(b"none") {
                "none"
            } else {
                "unreadable"
            },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(headers: &[(&str, &str)]) -> Env {
        let mut env = Env::new().with("HTTP_HOST", "mysite.example");
        for (k, v) in headers {
            env.set(k, *v);
        }
        env
    }

    #[test]
    fn only_the_dashboards_own_site_may_post() {
        for ok in [
            vec![],
            vec![("HTTP_ORIGIN", "https://mysite.example")],
            vec![("HTTP_ORIGIN", "http://MySite.example")],
            vec![("HTTP_ORIGIN", "https://mysite.example:443")],
            vec![("HTTP_SEC_FETCH_SITE", "same-origin")],
            vec![
                ("HTTP_ORIGIN", "https://mysite.example"),
                ("HTTP_SEC_FETCH_SITE", "same-origin"),
            ],
            // What a browser sends from a page whose policy is no-referrer.
            vec![
                ("HTTP_ORIGIN", "null"),
                ("HTTP_SEC_FETCH_SITE", "same-origin"),
            ],
        ] {
            assert_eq!(check(&post(&ok)), Ok(()), "{ok:?}");
        }
        for (bad, says) in [
            (
                vec![("HTTP_ORIGIN", "https://evil.example")],
                "Origin https://evil.example",
            ),
            (
                vec![("HTTP_ORIGIN", "https://mysite.example.evil.example")],
                "Origin",
            ),
            (
                vec![("HTTP_ORIGIN", "https://mysite.example:8443")],
                "Origin",
            ),
            (
                vec![("HTTP_ORIGIN", "null")],
                "Origin null, no Sec-Fetch-Site",
            ),
            (
                vec![
                    ("HTTP_ORIGIN", "null"),
                    ("HTTP_SEC_FETCH_SITE", "cross-site"),
                ],
                "cross-site",
            ),
            (vec![("HTTP_SEC_FETCH_SITE", "cross-site")], "cross-site"),
            (vec![("HTTP_SEC_FETCH_SITE", "same-site")], "same-site"),
            (vec![("HTTP_SEC_FETCH_SITE", "none")], "none"),
            (vec![("HTTP_SEC_FETCH_SITE", "\u{7f}")], "unreadable"),
        ] {
            let e = check(&post(&bad)).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
        // Without a Host header, the server's name and port.
        let env = Env::new()
            .with("SERVER_NAME", "mysite.example")
            .with("SERVER_PORT", "8080")
            .with("HTTP_ORIGIN", "http://mysite.example:8080");
        assert_eq!(check(&env), Ok(()));
        let env = Env::new().with("HTTP_ORIGIN", "https://mysite.example");
        assert!(check(&env).is_err(), "no host to compare with");
    }

    #[test]
    fn the_header_is_named_as_the_log_said_it() {
        let refused = |headers: &[(&str, &str)]| check(&post(headers)).unwrap_err();
        let e = refused(&[("HTTP_ORIGIN", "https://evil.example")]);
        assert_eq!(
            e,
            OtherSite::Origin(Some("https://evil.example".to_owned()))
        );
        assert_eq!(e.to_string(), "Origin https://evil.example");
        assert_eq!(
            OtherSite::Origin(None).to_string(),
            "Origin unreadable or null"
        );
        let e = refused(&[("HTTP_ORIGIN", "null")]);
        assert_eq!(e.to_string(), "Origin null, no Sec-Fetch-Site");
        let e = refused(&[("HTTP_SEC_FETCH_SITE", "cross-site")]);
        assert_eq!(e, OtherSite::FetchSite("cross-site"));
        assert_eq!(e.to_string(), "Sec-Fetch-Site cross-site");
        assert!(std::error::Error::source(&e).is_none());
    }
}
