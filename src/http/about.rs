//! `GET /cgi-bin/resolve?about=1`: what the page's script shows around the form (the owner's
//! footer, the program's version, whether the site is set up), which it cannot read from the
//! configuration file outside the web root. Answered before anything is counted: no store, no
//! provider, no secret (only the `page` section and the version), cacheable for a few minutes.

use crate::http::footer::Page;
use crate::http::request::Env;
use crate::http::response::Response;

/// The query string that asks for it, exactly.
pub const QUERY: &[u8] = b"about=1";
/// How long browsers may keep the answer (seconds): a changed footer shows within minutes.
pub const MAX_AGE_SECS: u32 = 300;

/// True for `GET` or `HEAD` with the query string `about=1` (and nothing else).
pub fn is_about(env: &Env) -> bool {
    env.get("QUERY_STRING") == Some(QUERY)
        && matches!(env.get("REQUEST_METHOD"), Some(b"GET" | b"HEAD"))
}

/// The answer: `{"version", "ready", "site_name"?, "contact"?, "contact_href"?, "terms_url"?}`.
/// `ready` is false when no provider is configured (every link would get 503 `not_configured`).
pub fn answer(page: &Page, ready: bool) -> Response {
    let mut body = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "ready": ready,
    });
    if let Some(name) = &page.site_name {
        body["site_name"] = name.as_str().into();
    }
    if let Some(contact) = &page.contact {
        body["contact"] = contact.text().into();
        body["contact_href"] = contact.href().into();
    }
    if let Some(terms) = &page.terms_url {
        body["terms_url"] = terms.as_str().into();
    }
    let mut response = Response::new(200, "application/json", format!("{body}\n"));
    for (name, value) in &mut response.headers {
        if *name == "Cache-Control" {
            *value = format!("public, max-age={MAX_AGE_SECS}");
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::footer::Contact;

    #[test]
    fn only_the_exact_query_asks() {
        let env = |method: &str, query: &str| Env::method(method).with("QUERY_STRING", query);
        assert!(is_about(&env("GET", "about=1")));
        assert!(is_about(&env("HEAD", "about=1")));
        for (method, query) in [
            ("POST", "about=1"),
            ("GET", "about=1&link=x"),
            ("GET", "link=https%3A%2F%2Fx.example%2F"),
            ("GET", ""),
        ] {
            assert!(!is_about(&env(method, query)), "{method} {query}");
        }
    }

    #[test]
    fn says_the_footer_and_the_version_and_nothing_else() {
        let page = Page {
            site_name: Some("Example Links".into()),
            contact: Some(Contact::Email("owner@example.com".into())),
            terms_url: None,
        };
        let r = answer(&page, true);
        assert_eq!(r.header_value("Cache-Control"), Some("public, max-age=300"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "version": env!("CARGO_PKG_VERSION"),
                "ready": true,
                "site_name": "Example Links",
                "contact": "owner@example.com",
                "contact_href": "mailto:owner@example.com",
            })
        );
        let bare: serde_json::Value =
            serde_json::from_slice(&answer(&Page::default(), false).body).unwrap();
        assert_eq!(
            bare,
            serde_json::json!({"version": env!("CARGO_PKG_VERSION"), "ready": false})
        );
    }
}
