//! Tests of pages of other sites: refused before anything is counted, by `Origin` or, with no
//! referrer sent, by the browser's fetch metadata.

use super::*;

#[test]
fn other_sites_pages_are_refused_before_anything_is_counted() {
    let cfg = config(r#"{"allowed_origins": ["https://mysite.example"]}"#);
    let (s, p) = (store(), ok_provider());
    let from = |origin: &str| get("192.0.2.1", LINK).with("HTTP_ORIGIN", origin);
    let (a, log) = run(&cfg, &s, &p, &from("https://evil.example"));
    assert_eq!(a.response.status, 403);
    assert!(log.lines.borrow()[0].contains("Origin https://evil.example"));
    assert!(s.key_count() == 0);
    assert_eq!(status(&cfg, &s, &p, &from("https://mysite.example")), 200);
    assert_eq!(status(&cfg, &s, &p, &get("192.0.2.1", LINK)), 200);
    assert_eq!(p.calls.get(), 2);
}

#[test]
fn no_referrer_pages_of_other_sites_are_refused_by_fetch_metadata() {
    let cfg = config(r#"{"allowed_origins": ["https://mysite.example"]}"#);
    let (s, p) = (store(), ok_provider());
    let fetched = |site: &str| {
        get("192.0.2.1", LINK)
            .with("HTTP_SEC_FETCH_SITE", site)
            .with("HTTP_SEC_FETCH_MODE", "no-cors")
            .with("HTTP_SEC_FETCH_DEST", "image")
            .with("HTTP_ACCEPT", "application/json")
    };
    // Another site's <img> or link under Referrer-Policy: no-referrer, and a sibling
    // subdomain's: refused before the store or the provider, even a failing store.
    s.set_failing(true);
    for site in ["cross-site", "same-site"] {
        let (a, log) = run(&cfg, &s, &p, &fetched(site));
        assert_eq!(a.response.status, 403, "{site}");
        let v: serde_json::Value = serde_json::from_slice(&a.response.body).unwrap();
        assert_eq!(v["code"], "origin_not_allowed");
        assert_eq!(a.response.header_value("RateLimit"), None);
        let lines = not_journal(&log);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains(&format!(
                "refused a request from another site (Sec-Fetch-Site {site}, no Origin or Referer)"
            )),
            "{}",
            lines[0]
        );
    }
    assert!(s.key_count() == 0);
    assert_eq!(p.calls.get(), 0);
    s.set_failing(false);
    // Typed or bookmarked, a page next to the endpoint, and an allowed page whatever the
    // header says.
    for env in [
        fetched("none"),
        fetched("same-origin"),
        fetched("cross-site").with("HTTP_ORIGIN", "https://mysite.example"),
        fetched("same-site").with("HTTP_REFERER", "https://mysite.example/tools/"),
    ] {
        assert_eq!(status(&cfg, &s, &p, &env), 200);
    }
    assert_eq!(p.calls.get(), 4);
    // Without the list, the header is not looked at.
    let open = config("{}");
    assert_eq!(status(&open, &s, &p, &fetched("cross-site")), 200);
}
