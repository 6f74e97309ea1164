//! Whether a dashboard form was sent from the dashboard's own pages, by the headers browsers
//! add to every POST: `Origin` must be this host (over http or https), else `Sec-Fetch-Site`
//! must be `same-origin`. The dashboard's pages say `Referrer-Policy: no-referrer`, under which
//! browsers send `Origin: null` even from the page itself: a null origin is judged by
//! `Sec-Fetch-Site` alone, and refused without it. A request with neither header comes from a
//! program or a very old browser and is left to the form's token, which every POST needs
//! anyway. Pure.

use crate::http::origin::origin_of;
use crate::http::request::Env;

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
pub fn check(env: &Env) -> Result<(), String> {
    let fetch_site = env.header("Sec-Fetch-Site").map(<[u8]>::trim_ascii);
    let null = env
        .header("Origin")
        .is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"null"));
    if null && fetch_site.is_none() {
        return Err("Origin null, no Sec-Fetch-Site".into());
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
            (found, _) => Err(format!(
                "Origin {}",
                found.as_deref().unwrap_or("unreadable or null")
            )),
        };
    }
    match fetch_site {
        None => Ok(()),
        Some(v) if v.eq_ignore_ascii_case(b"same-origin") => Ok(()),
        Some(v) => Err(format!(
            "Sec-Fetch-Site {}",
            if v.eq_ignore_ascii_case(b"cross-site") {
                "cross-site"
            } else if v.eq_ignore_ascii_case(b"same-site") {
                "same-site"
            } else if v.eq_ignore_ascii_case(b"none") {
                "none"
            } else {
                "unreadable"
            }
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
            let e = check(&post(&bad)).unwrap_err();
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
}
