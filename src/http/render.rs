//! The words of every answer: the download link, a refusal or an error, as plain text, HTML or
//! JSON, with the rate-limit headers.

use crate::core::decision::Decision;
use crate::core::rule::Rule;
use crate::http::footer::{Contact, Page};
use crate::http::negotiate::Format;
use crate::http::problem::Problem;
use crate::http::request::ALLOWED_METHODS;
use crate::http::response::Response;
use crate::provider::resolved::Resolved;
use crate::support::html::escape;

const TEXT: &str = "text/plain; charset=utf-8";
const HTML: &str = "text/html; charset=utf-8";
const JSON: &str = "application/json";
const PROBLEM_JSON: &str = "application/problem+json";

/// `RateLimit-Policy` and `RateLimit` (IETF httpapi draft 10) for the rules that decided.
pub fn limit_headers(rules: &[&Rule], decision: &Decision) -> [(&'static str, String); 2] {
    let policy = rules
        .iter()
        .map(|r| format!("\"{}\";q={};w={}", r.name, r.limit, r.window_secs))
        .collect::<Vec<_>>()
        .join(", ");
    let state = rules
        .iter()
        .zip(decision.statuses())
        .map(|(r, s)| format!("\"{}\";r={};t={}", r.name, s.remaining, s.reset_secs()))
        .collect::<Vec<_>>()
        .join(", ");
    [("RateLimit-Policy", policy), ("RateLimit", state)]
}

fn seconds(n: u32) -> String {
    if n == 1 {
        "1 second".to_owned()
    } else {
        format!("{n} seconds")
    }
}

/// A wait in words, as the page says it too (public/app.js): seconds under two minutes, then
/// "about" minutes, hours (from two hours) or days (from two days), rounded up so that a
/// visitor who comes back at the time said is not refused again.
pub fn wait_words(secs: u32) -> String {
    match secs {
        0..=119 => seconds(secs),
        120..=7199 => format!("about {} minutes", secs.div_ceil(60)),
        7200..=172_799 => format!("about {} hours", secs.div_ceil(3600)),
        _ => format!("about {} days", secs.div_ceil(86_400)),
    }
}

/// The sentence a refused client reads.
pub fn limited_sentence(retry_after: u32) -> String {
    format!(
        "Too many requests: try again in {}.",
        wait_words(retry_after)
    )
}

/// What surrounds an HTML answer: where its form posts, and the owner's footer. The program
/// does not know where the page is installed, so its HTML answers stand alone: the page's own
/// stylesheet inline, a form that posts to the program itself, the footer from the
/// configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct Frame<'a> {
    /// The program's own path (CGI `SCRIPT_NAME`), when it is a plain absolute path; without
    /// it the form posts to the address the answer came from, which is the program too.
    pub action: Option<&'a str>,
    pub page: Option<&'a Page>,
}

impl<'a> Frame<'a> {
    pub fn new(script_name: Option<&'a str>, page: Option<&'a Page>) -> Frame<'a> {
        Frame {
            action: script_name.filter(|s| is_plain_path(s)),
            page,
        }
    }
}

/// `/cgi-bin/resolve` and the like: an absolute path of URL-safe characters, not `//host`.
fn is_plain_path(s: &str) -> bool {
    s.starts_with('/')
        && !s.starts_with("//")
        && s.len() <= 256
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-._~%".contains(&b))
}

/// The answer for a resolved link.
pub fn resolved(format: Format, r: &Resolved, frame: &Frame<'_>) -> Response {
    match format {
        Format::Text => Response::new(200, TEXT, format!("{}\n", r.download)),
        Format::Json => {
            let body = serde_json::json!({"download": r.download, "filename": r.filename});
            Response::new(200, JSON, format!("{body}\n"))
        }
        Format::Html => {
            let name = r.filename.as_deref().unwrap_or(&r.download);
            let mut card = format!(
                "<p class=\"title\">Your download link is ready:</p>\n\
                 <p><a href=\"{}\" rel=\"noreferrer\">{}</a></p>\n",
                escape(&r.download),
                escape(name)
            );
            if r.filename.is_some() {
                card.push_str(&format!("<p class=\"url\">{}</p>\n", escape(&r.download)));
            }
            let body = page(
                "Your download link is ready",
                "ok",
                None,
                &card,
                "Another link",
                frame,
            );
            html_page(200, body).header("Referrer-Policy", "no-referrer")
        }
    }
}

/// The answer to a HEAD request that was admitted: no body, and no paid call behind it.
pub fn counted(format: Format) -> Response {
    let ty = match format {
        Format::Text => TEXT,
        Format::Html => HTML,
        Format::Json => JSON,
    };
    Response::new(200, ty, Vec::new())
}

/// The answer for any refusal or failure.
pub fn problem(format: Format, p: &Problem, frame: &Frame<'_>) -> Response {
    let mut response = match format {
        Format::Text => Response::new(p.status, TEXT, format!("{}\n", p.detail)),
        Format::Json => {
            let mut body = serde_json::json!({
                "type": p.type_uri(),
                "title": crate::http::response::reason(p.status),
                "status": p.status,
                "detail": p.detail,
                "code": p.code,
            });
            if let Some(secs) = p.retry_after {
                body["retry_after"] = secs.into();
            }
            if let Some(rule) = &p.rule {
                body["rule"] = rule.as_ref().into();
            }
            Response::new(p.status, PROBLEM_JSON, format!("{body}\n"))
        }
        Format::Html => {
            let (title, kind) = match (p.status, p.code) {
                (429, _) => ("Too many requests", "wait"),
                (_, "not_configured") => ("This site is not set up yet", "error"),
                (500.., _) => ("Not available right now", "error"),
                _ => ("That did not work", "error"),
            };
            let card = format!("<p>{}</p>\n", escape(&p.detail));
            let body = page(title, kind, Some(p.code), &card, "Try again", frame);
            html_page(p.status, body)
        }
    };
    if let Some(secs) = p.retry_after {
        response = response.header("Retry-After", secs.to_string());
    }
    if let Some(challenge) = &p.challenge {
        response = response.header("WWW-Authenticate", challenge.to_string());
    }
    if p.status == 405 {
        response = response.header("Allow", ALLOWED_METHODS);
    }
    response
}

/// The page's stylesheet, inlined: the answer pages look like the page wherever it is installed.
pub const STYLE: &str = include_str!("../../public/style.css");

/// The answer pages' `Content-Security-Policy`: nothing loads, no script runs, the one style
/// block (by its hash) applies, the form posts only to this site, no other site frames it.
fn content_security_policy() -> &'static str {
    static POLICY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    POLICY.get_or_init(|| {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(format!("\n{STYLE}").as_bytes());
        format!(
            "default-src 'none'; style-src 'sha256-{}'; form-action 'self'; base-uri 'none'; \
             frame-ancestors 'none'",
            base64(&digest)
        )
    })
}

/// Standard base64 with padding (RFC 4648 section 4).
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// An HTML answer page with the headers every one carries.
fn html_page(status: u16, body: String) -> Response {
    Response::new(status, HTML, body)
        .header("Content-Security-Policy", content_security_policy())
        .header("X-Content-Type-Options", "nosniff")
}

/// An answer page for visitors without JavaScript: the outcome as a card like the page's, the
/// form again (empty) to try another link, and the owner's footer.
fn page(
    title: &str,
    kind: &str,
    code: Option<&str>,
    card: &str,
    label: &str,
    frame: &Frame<'_>,
) -> String {
    let site = frame.page.and_then(|p| p.site_name.as_deref());
    let full_title = match site {
        Some(site) => format!("{} – {}", escape(title), escape(site)),
        None => escape(title),
    };
    let code = code.map_or(String::new(), |c| format!(" data-code=\"{}\"", escape(c)));
    let action = frame
        .action
        .map_or(String::new(), |a| format!(" action=\"{}\"", escape(a)));
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n\
         <meta name=\"robots\" content=\"noindex\">\n\
         <title>{full_title}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<main>\n\
         <h1>{}</h1>\n\
         <div class=\"result\"><div class=\"card {kind}\"{code}>\n{card}</div></div>\n\
         <form class=\"again\" method=\"post\"{action}>\n\
         <label for=\"link\">{}</label>\n<div class=\"row\">\n\
         <input id=\"link\" name=\"link\" type=\"url\" required placeholder=\"https://…\" \
         autocomplete=\"off\" autocapitalize=\"off\" spellcheck=\"false\" inputmode=\"url\">\n\
         <button id=\"submit\" type=\"submit\">Get link</button>\n</div>\n</form>\n</main>\n{}\
         <!-- resolve {} -->\n</body>\n</html>\n",
        escape(title),
        escape(label),
        footer(frame.page),
        env!("CARGO_PKG_VERSION"),
    )
}

/// The owner's footer: site name, contact and terms link, those that are set.
pub fn footer(page: Option<&Page>) -> String {
    let Some(page) = page.filter(|p| !p.is_empty()) else {
        return String::new();
    };
    let mut parts = Vec::new();
    if let Some(name) = &page.site_name {
        parts.push(format!("<span class=\"site-name\">{}</span>", escape(name)));
    }
    if let Some(contact) = &page.contact {
        let text = match contact {
            Contact::Email(address) => format!("Contact: {}", escape(address)),
            Contact::Url(_) => "Contact".to_owned(),
        };
        parts.push(format!(
            "<a class=\"contact\" href=\"{}\">{text}</a>",
            escape(&contact.href())
        ));
    }
    if let Some(terms) = &page.terms_url {
        parts.push(format!(
            "<a class=\"terms\" href=\"{}\">Terms of use</a>",
            escape(terms)
        ));
    }
    format!(
        "<footer class=\"site-footer\">\n<p>{}</p>\n</footer>\n",
        parts.join(" <span aria-hidden=\"true\">·</span> ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::decision::RuleStatus;
    use crate::core::rule::{KeyKind, RuleName};
    use std::num::NonZeroU32;

    fn rule(name: &str, limit: u32, window: u32) -> Rule {
        Rule {
            name: RuleName::new(name).unwrap(),
            key: KeyKind::Ip,
            algorithm: crate::core::rule::Algorithm::Fixed,
            limit: NonZeroU32::new(limit).unwrap(),
            window_secs: NonZeroU32::new(window).unwrap(),
            key_template: crate::config::default_key_template(KeyKind::Ip),
        }
    }

    #[test]
    fn rate_limit_headers_follow_the_draft() {
        let (a, b) = (rule("minute", 30, 60), rule("day", 500, 86400));
        let d = Decision::Refuse {
            rule: 0,
            wait_ms: 41_001,
            statuses: vec![
                RuleStatus {
                    remaining: 0,
                    reset_ms: 41_001,
                },
                RuleStatus {
                    remaining: 470,
                    reset_ms: 80_000_000,
                },
            ],
        };
        let [policy, state] = limit_headers(&[&a, &b], &d);
        assert_eq!(policy.1, "\"minute\";q=30;w=60, \"day\";q=500;w=86400");
        assert_eq!(state.1, "\"minute\";r=0;t=42, \"day\";r=470;t=80000");
    }

    #[test]
    fn waits_in_words() {
        let words = [
            (1, "1 second"),
            (45, "45 seconds"),
            (119, "119 seconds"),
            (121, "about 3 minutes"),
            (7199, "about 120 minutes"),
            (7200, "about 2 hours"),
            (79_000, "about 22 hours"),
            (172_800, "about 2 days"),
        ];
        for (secs, said) in words {
            assert_eq!(wait_words(secs), said);
        }
    }

    #[test]
    fn sentences() {
        assert_eq!(
            limited_sentence(1),
            "Too many requests: try again in 1 second."
        );
        assert_eq!(
            limited_sentence(42),
            "Too many requests: try again in 42 seconds."
        );
    }

    #[test]
    fn json_problem_shape() {
        let mut p = Problem::new(429, "rate_limited", limited_sentence(5)).retry_after(5);
        p.rule = Some("ip".into());
        let r = problem(Format::Json, &p, &Frame::default());
        assert_eq!(r.header_value("Content-Type"), Some(PROBLEM_JSON));
        assert_eq!(r.header_value("Retry-After"), Some("5"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["status"], 429);
        assert_eq!(v["code"], "rate_limited");
        assert_eq!(v["retry_after"], 5);
        assert_eq!(v["rule"], "ip");
        assert_eq!(
            v["type"],
            "https://iana.org/assignments/http-problem-types#quota-exceeded"
        );
    }

    /// The HTML answer for a link resolved to `download`, named `filename`.
    fn download_page(download: &str, filename: &str, frame: &Frame<'_>) -> Response {
        let link = Resolved {
            download: download.into(),
            filename: Some(filename.into()),
        };
        resolved(Format::Html, &link, frame)
    }

    #[test]
    fn html_is_escaped() {
        let r = download_page("https://e.x/?a=\"><script>", "<b>x</b>", &Frame::default());
        let body = String::from_utf8(r.body).unwrap();
        assert!(
            !body.contains("<script>") && !body.contains("<b>"),
            "{body}"
        );
        assert!(body.contains("&lt;b&gt;x&lt;/b&gt;"));
    }

    #[test]
    fn method_not_allowed_says_what_is() {
        let not_allowed = Problem::new(405, "method_not_allowed", "no");
        let r = problem(Format::Text, &not_allowed, &Frame::default());
        assert_eq!(r.header_value("Allow"), Some("GET, HEAD, POST"));
        assert_eq!(r.header_value("Cache-Control"), Some("no-store"));
    }

    fn html(r: Response) -> String {
        String::from_utf8(r.body).unwrap()
    }

    #[test]
    fn answer_pages_stand_alone_with_the_form_and_the_footer() {
        let page = Page {
            site_name: Some("Links & <Co>".into()),
            contact: Some(Contact::Email("owner@example.com".into())),
            terms_url: Some("https://example.com/terms?a=1&b=2".into()),
        };
        let frame = Frame::new(Some("/tools/cgi-bin/resolve"), Some(&page));
        let p = Problem::new(429, "rate_limited", limited_sentence(42)).retry_after(42);
        let body = html(problem(Format::Html, &p, &frame));
        assert!(body.contains("<h1>Too many requests</h1>"), "{body}");
        let version = format!("<!-- resolve {} -->", env!("CARGO_PKG_VERSION"));
        for part in [
            "<title>Too many requests – Links &amp; &lt;Co&gt;</title>",
            "class=\"card wait\" data-code=\"rate_limited\"",
            "Too many requests: try again in 42 seconds.",
            "method=\"post\" action=\"/tools/cgi-bin/resolve\"",
            "name=\"link\"",
            // The page's style, inline.
            "<style>",
            "--focus",
            "href=\"mailto:owner@example.com\">Contact: owner@example.com</a>",
            "href=\"https://example.com/terms?a=1&amp;b=2\">Terms of use</a>",
            &version,
        ] {
            assert!(body.contains(part), "{part:?} in\n{body}");
        }
        // No outside assets.
        assert!(
            !body.contains("<link") && !body.contains("<script"),
            "{body}"
        );

        let unset = html(problem(
            Format::Html,
            &Problem::new(503, "not_configured", "Not set up."),
            &Frame::new(None, None),
        ));
        assert!(
            unset.contains("<h1>This site is not set up yet</h1>"),
            "{unset}"
        );
        assert!(
            unset.contains("<form class=\"again\" method=\"post\">"),
            "{unset}"
        );
        assert!(!unset.contains("<footer"), "{unset}");
    }

    #[test]
    fn only_a_plain_path_becomes_the_action() {
        for (name, action) in [
            (Some("/cgi-bin/resolve"), Some("/cgi-bin/resolve")),
            (
                Some("/~user/cgi-bin/resolve.cgi"),
                Some("/~user/cgi-bin/resolve.cgi"),
            ),
            (Some("//evil.example/x"), None),
            (Some("/a\"onmouseover=\"x"), None),
            (Some("relative/resolve"), None),
            (None, None),
        ] {
            assert_eq!(Frame::new(name, None).action, action, "{name:?}");
        }
    }

    #[test]
    fn the_download_page_shows_the_name_and_the_address() {
        let frame = Frame::new(Some("/cgi-bin/resolve"), None);
        let r = download_page("https://cdn.example/f/1", "file.zip", &frame);
        assert_eq!(r.header_value("Referrer-Policy"), Some("no-referrer"));
        let body = html(r);
        assert!(
            body.contains("<h1>Your download link is ready</h1>"),
            "{body}"
        );
        assert!(
            body.contains("<a href=\"https://cdn.example/f/1\" rel=\"noreferrer\">file.zip</a>")
        );
        assert!(body.contains("<p class=\"url\">https://cdn.example/f/1</p>"));
        assert!(body.contains("<label for=\"link\">Another link</label>"));
    }

    #[test]
    fn base64_as_the_rfc_says() {
        for (text, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(text.as_bytes()), encoded, "{text}");
        }
    }

    #[test]
    fn answer_pages_allow_their_own_style_and_nothing_else() {
        let bad_link = Problem::new(400, "bad_link", "No.");
        let r = problem(Format::Html, &bad_link, &Frame::default());
        let policy = r
            .header_value("Content-Security-Policy")
            .unwrap()
            .to_owned();
        assert!(
            policy.starts_with("default-src 'none'; style-src 'sha256-"),
            "{policy}"
        );
        assert!(policy.contains("form-action 'self'"), "{policy}");
        let body = html(r);
        let style = &body[body.find("<style>").unwrap() + 7..body.find("</style>").unwrap()];
        use sha2::{Digest, Sha256};
        let hash = base64(&Sha256::digest(style.as_bytes()));
        assert!(policy.contains(&format!("'sha256-{hash}'")), "{policy}");
    }
}
