//! The words of every answer: the download link, a refusal or an error, as plain text, HTML or
//! JSON, with the rate-limit headers.

use crate::core::decision::Decision;
use crate::core::rule::{Rule, Unit};
use crate::http::footer::{Contact, Page};
use crate::http::negotiate::Format;
use crate::http::problem::{Kind, Offer, Problem};
use crate::http::request::ALLOWED_METHODS;
use crate::http::response::Response;
use crate::provider::resolved::Resolved;
use crate::support::decimal;
use crate::support::html::escape;

const TEXT: &str = "text/plain; charset=utf-8";
const HTML: &str = "text/html; charset=utf-8";
const JSON: &str = "application/json";
const PROBLEM_JSON: &str = "application/problem+json";

/// `RateLimit-Policy` and `RateLimit` (IETF httpapi draft 10) for the rules that decided. A
/// rule of bytes gives its quota and what is left in bytes, with the draft's quota unit
/// (`qu="content-bytes"`); a rule of requests leaves the unit to its default, requests.
pub fn limit_headers(rules: &[&Rule], decision: &Decision) -> [(&'static str, String); 2] {
    // Written piece by piece (a `format!` a rule and a join cost a refusal 4,000 instructions).
    let per = |r: &Rule| match r.unit {
        Unit::Requests => 1,
        Unit::Bytes => Unit::KIB,
    };
    let mut policy = String::with_capacity(40 * rules.len());
    for (i, r) in rules.iter().enumerate() {
        if i > 0 {
            policy.push_str(", ");
        }
        policy.push('"');
        policy.push_str(r.name.as_str());
        policy.push_str("\";q=");
        decimal::push(&mut policy, r.configured_limit());
        policy.push_str(";w=");
        decimal::push(&mut policy, r.window_secs.get().into());
        if r.unit == Unit::Bytes {
            policy.push_str(";qu=");
            policy.push_str(crate::http::allowance::BYTES_UNIT);
        }
    }
    let mut state = String::with_capacity(32 * rules.len());
    for (i, (r, s)) in rules.iter().zip(decision.statuses()).enumerate() {
        if i > 0 {
            state.push_str(", ");
        }
        state.push('"');
        state.push_str(r.name.as_str());
        state.push_str("\";r=");
        decimal::push(&mut state, u64::from(s.remaining) * per(r));
        state.push_str(";t=");
        decimal::push(&mut state, s.reset_secs().into());
    }
    [("RateLimit-Policy", policy), ("RateLimit", state)]
}

/// A wait in words, as the page says it too (public/app.js): seconds under two minutes, then
/// "about" minutes, hours (from two hours) or days (from two days), rounded up so that a
/// visitor who comes back at the time said is not refused again.
pub fn wait_words(secs: u32) -> String {
    let mut words = String::with_capacity(24);
    push_wait_words(&mut words, secs);
    words
}

/// [`wait_words`], added to `out`.
fn push_wait_words(out: &mut String, secs: u32) {
    let (about, unit) = match secs {
        0..=119 => (secs, "second"),
        120..=7199 => (secs.div_ceil(60), "minute"),
        7200..=172_799 => (secs.div_ceil(3600), "hour"),
        _ => (secs.div_ceil(86_400), "day"),
    };
    if secs >= 120 {
        out.push_str("about ");
    }
    decimal::push(out, about.into());
    out.push(' ');
    out.push_str(unit);
    if about != 1 {
        out.push('s');
    }
}

/// The sentence a refused client reads.
pub fn limited_sentence(retry_after: u32) -> String {
    let mut sentence = String::with_capacity(64);
    sentence.push_str("Too many requests: try again in ");
    push_wait_words(&mut sentence, retry_after);
    sentence.push('.');
    sentence
}

/// The sentence a client refused by a rule of bytes reads: the allowance in words (`20 GB`),
/// and when to come back.
pub fn limited_bytes_sentence(retry_after: u32, allowance: &str) -> String {
    format!(
        "Too many downloads: the {allowance} this site allows is used up; try again in {}.",
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

/// The answer for a resolved link. Several files (a folder, a multi-file link) are all given:
/// one URL a line as text, a `files` array beside the first file's fields in JSON, a list on
/// the page.
pub fn resolved(format: Format, r: &Resolved, frame: &Frame<'_>) -> Response {
    let files = r.all_files();
    match format {
        Format::Text => {
            let lines: String = files.iter().map(|f| format!("{}\n", f.download)).collect();
            Response::new(200, TEXT, lines)
        }
        Format::Json => {
            let mut body = serde_json::json!({"download": r.download, "filename": r.filename});
            if files.len() > 1 {
                body["files"] = files
                    .iter()
                    .map(|f| serde_json::json!({"download": f.download, "filename": f.filename}))
                    .collect();
            }
            Response::new(200, JSON, format!("{body}\n"))
        }
        Format::Html if files.len() > 1 => {
            let mut card = format!(
                "<p class=\"title\">Your download links are ready ({} files):</p>\n<ul>\n",
                files.len()
            );
            for f in &files {
                let name = f.filename.as_deref().unwrap_or(&f.download);
                card.push_str(&format!(
                    "<li><a href=\"{}\" rel=\"noreferrer\">{}</a></li>\n",
                    escape(&f.download),
                    escape(name)
                ));
            }
            card.push_str("</ul>\n");
            ready_page("Your download links are ready", &card, frame)
        }
        Format::Html => {
            // The heading says it is ready: the card holds the link alone.
            let name = match &r.filename {
                Some(name) => escape(name),
                None => link_text(&r.download),
            };
            let mut card = format!(
                "<p class=\"link\"><a href=\"{}\" rel=\"noreferrer\">{name}</a></p>\n",
                escape(&r.download),
            );
            if r.filename.is_some() {
                card.push_str(&format!(
                    "<p class=\"url\">{}</p>\n",
                    link_text(&r.download)
                ));
            }
            ready_page("Your download link is ready", &card, frame)
        }
    }
}

/// The page of one or more links that are ready: the card under its heading, sent with
/// `Referrer-Policy: no-referrer`.
fn ready_page(heading: &str, card: &str, frame: &Frame<'_>) -> Response {
    let body = page(heading, "ok", None, card, ("Another link", None), frame);
    html_page(200, body).header("Referrer-Policy", "no-referrer")
}

/// The answer for a link whose paid job is still under way at the provider: `202 Accepted`,
/// the progress in words, when to ask again (`Retry-After`; a page also refreshes itself with
/// `Refresh`, JavaScript or not) and where (`Location`: the same link, which joins the job).
pub fn pending(
    format: Format,
    progress: Option<&str>,
    retry_after: u32,
    location: &str,
    frame: &Frame<'_>,
) -> Response {
    let words = match progress {
        Some(p) => format!("The download service is preparing this file ({p})."),
        None => "The download service is preparing this file.".to_owned(),
    };
    let response = match format {
        Format::Text => Response::new(
            202,
            TEXT,
            format!("{words} Ask again in {retry_after} s.\n"),
        ),
        Format::Json => {
            let body = serde_json::json!({
                "status": "pending", "progress": progress, "retry_after": retry_after,
                "detail": format!("{words} Ask again in {retry_after} s."),
            });
            Response::new(202, JSON, format!("{body}\n"))
        }
        Format::Html => {
            let card = format!(
                "<p class=\"title\">{}</p>\n<p>This page asks again by itself every {retry_after} \
                 seconds; nothing more is paid for it.</p>\n",
                escape(&words)
            );
            let body = page(
                "Your file is being prepared",
                "ok",
                None,
                &card,
                ("Another link", None),
                frame,
            );
            // To the same link by GET: a page answered to a POST would otherwise ask the
            // program again without the link.
            html_page(202, body).header("Refresh", format!("{retry_after}; url={location}"))
        }
    };
    response
        .header("Retry-After", retry_after.to_string())
        .header("Location", location)
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

/// A web address as HTML text that lines break only after a `/` or a `?`: the parts between
/// them never wrap (`seg`, in the page's stylesheet), a `<wbr>` follows each `/` and `?`.
pub fn link_text(url: &str) -> String {
    let mut out = String::with_capacity(url.len() + 64);
    for part in url.split_inclusive(['/', '?']) {
        out.push_str("<span class=\"seg\">");
        out.push_str(&escape(part));
        out.push_str("</span>");
        if part.ends_with(['/', '?']) {
            out.push_str("<wbr>");
        }
    }
    out
}

/// The answer for any refusal or failure.
pub fn problem(format: Format, p: &Problem, frame: &Frame<'_>) -> Response {
    problem_for(format, p, frame, None)
}

/// [`problem`], with the link the visitor sent (when it was read) kept in the HTML page's
/// field, so that trying again is one click.
pub fn problem_for(format: Format, p: &Problem, frame: &Frame<'_>, link: Option<&str>) -> Response {
    let mut response = match format {
        Format::Text => {
            let mut body = String::with_capacity(p.detail.len() + 1);
            body.push_str(&p.detail);
            body.push('\n');
            if p.offer.is_some() {
                body.push_str(&offer_text(p));
            }
            Response::new(p.status, TEXT, body)
        }
        Format::Json => {
            let mut body = serde_json::json!({
                "type": p.type_uri(),
                "title": crate::http::response::reason(p.status),
                "status": p.status,
                "detail": p.detail,
                "code": p.code(),
            });
            if let Some(secs) = p.retry_after {
                body["retry_after"] = secs.into();
            }
            if let Some(rule) = &p.rule {
                body["rule"] = rule.as_ref().into();
            }
            if let Some(offer) = &p.offer {
                body["challenge"] = offer_json(offer);
            }
            Response::new(p.status, PROBLEM_JSON, format!("{body}\n"))
        }
        Format::Html => {
            let (title, kind) = match (p.status, p.kind) {
                (429, _) => ("Too many requests", "wait"),
                (_, Kind::NotConfigured) => ("This site is not set up yet", "error"),
                (500.., _) => ("Not available right now", "error"),
                _ => ("That did not work", "error"),
            };
            let card = format!("<p>{}</p>\n", escape(&p.detail));
            if let Some(offer) = &p.offer {
                challenge_page(p, offer, (title, kind), &card, link, frame)
            } else {
                let body = page(
                    title,
                    kind,
                    Some(p.code()),
                    &card,
                    ("Try again", link),
                    frame,
                );
                html_page(p.status, body)
            }
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

/// The challenge offered, in a JSON answer's `challenge` member.
fn offer_json(offer: &Offer) -> serde_json::Value {
    let mut member = serde_json::json!({
        "site_key": offer.site_key,
        "script_url": offer.script_url,
    });
    if let Some(action) = &offer.action {
        member["action"] = action.as_str().into();
    }
    member
}

/// The challenge offered, as lines of a plain-text answer (nothing when none is).
fn offer_text(p: &Problem) -> String {
    p.offer.as_ref().map_or(String::new(), |o| {
        format!(
            "challenge site key: {}\nchallenge script: {}\nsend the solved token as {}\n",
            o.site_key,
            o.script_url,
            crate::http::problem::TOKEN_FIELD
        )
    })
}

/// The answer page asking for the challenge: the form again with the widget inside it (the
/// widget adds its token to the form when solved), and a policy that lets the widget's script
/// and frame load from its origin alone.
fn challenge_page(
    p: &Problem,
    offer: &Offer,
    (title, kind): (&str, &str),
    card: &str,
    link: Option<&str>,
    frame: &Frame<'_>,
) -> Response {
    let action = offer
        .action
        .as_deref()
        .map_or(String::new(), |a| format!(" data-action=\"{}\"", escape(a)));
    let widget = format!(
        "<div class=\"challenge\"><div class=\"cf-turnstile\" data-sitekey=\"{}\"{action}></div></div>\n\
         <script src=\"{}\" async defer></script>\n",
        escape(&offer.site_key),
        escape(&offer.script_url)
    );
    let body = page_with(
        title,
        kind,
        Some(p.code()),
        card,
        ("Try again", link),
        frame,
        &widget,
    );
    let origin = offer.origin().unwrap_or_default();
    Response::new(p.status, HTML, body)
        .header(
            "Content-Security-Policy",
            format!(
                "{}; script-src {origin}; frame-src {origin}; connect-src {origin}",
                content_security_policy()
            ),
        )
        .header("X-Content-Type-Options", "nosniff")
}

/// An HTML answer page with the headers every one carries.
pub(crate) fn html_page(status: u16, body: String) -> Response {
    Response::new(status, HTML, body)
        .header("Content-Security-Policy", content_security_policy())
        .header("X-Content-Type-Options", "nosniff")
}

/// An answer page for visitors without JavaScript: the outcome as a card like the page's, the
/// form again to try another link (its label, and the link it holds, if any), and the
/// owner's footer.
pub(crate) fn page(
    title: &str,
    kind: &str,
    code: Option<&str>,
    card: &str,
    field: (&str, Option<&str>),
    frame: &Frame<'_>,
) -> String {
    page_with(title, kind, code, card, field, frame, "")
}

/// As [`page`], with `in_form` (HTML) inside the form after its row: a challenge's widget.
fn page_with(
    title: &str,
    kind: &str,
    code: Option<&str>,
    card: &str,
    (label, value): (&str, Option<&str>),
    frame: &Frame<'_>,
    in_form: &str,
) -> String {
    let value = value.map_or(String::new(), |v| format!(" value=\"{}\"", escape(v)));
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
         autocomplete=\"off\" autocapitalize=\"off\" spellcheck=\"false\" inputmode=\"url\"{value}>\n\
         <button id=\"submit\" type=\"submit\">Get link</button>\n</div>\n{in_form}</form>\n</main>\n{}\
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
mod tests;
