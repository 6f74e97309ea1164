//! The dashboard's HTML and the headers every one of its answers carries: the page's own look
//! (its stylesheet inlined, with the dashboard's rules after it), no script, a strict
//! Content-Security-Policy that allows that one style block by its hash, no caching, no framing.

use crate::config::Config;
use crate::http::footer::Page;
use crate::http::render::{STYLE, base64, footer};
use crate::http::response::Response;
use crate::support::html::escape;

const HTML: &str = "text/html; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// The dashboard's own rules, after the page's.
const ADMIN_STYLE: &str = include_str!("style.css");

/// The setup and settings forms' rules, after the dashboard's.
const SETTINGS_STYLE: &str = include_str!("settings.css");

/// What every dashboard page is framed with: where its forms post, and the owner's footer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Frame<'a> {
    /// The dashboard's path (`/cgi-bin/resolve/admin`), when the program's path is known.
    pub action: Option<&'a str>,
    pub page: Option<&'a Page>,
}

/// A sentence shown above a form: what happened.
#[derive(Debug, Clone, Copy)]
pub struct Notice<'a> {
    /// `error`, `wait` or `ok`: the card's colour, as on the public page.
    pub kind: &'a str,
    pub text: &'a str,
}

/// The style block's text, exactly as the page holds it between `<style>` and `</style>`.
fn style_block() -> String {
    format!("\n{STYLE}{ADMIN_STYLE}{SETTINGS_STYLE}")
}

/// The policy: nothing loads, no script runs, only the style block applies, forms post only to
/// this site, and no other site may frame the page.
pub fn content_security_policy() -> &'static str {
    static POLICY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    POLICY.get_or_init(|| {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(style_block().as_bytes());
        format!(
            "default-src 'none'; style-src 'sha256-{}'; form-action 'self'; base-uri 'none'; \
             frame-ancestors 'none'",
            base64(&digest)
        )
    })
}

/// The headers of every dashboard answer, whatever its status (`Cache-Control: no-store` comes
/// with every [`Response`]).
fn guarded(response: Response) -> Response {
    response
        .header("Content-Security-Policy", content_security_policy())
        .header("X-Frame-Options", "DENY")
        .header("Referrer-Policy", "no-referrer")
        .header("X-Content-Type-Options", "nosniff")
}

/// An HTML answer.
pub fn html(status: u16, body: String) -> Response {
    guarded(Response::new(status, HTML, body))
}

/// A plain-text answer (a refusal that needs no page).
pub fn text(status: u16, body: &str) -> Response {
    guarded(Response::new(status, TEXT, format!("{body}\n")))
}

/// The answer that sends the browser to the dashboard (after signing in or out), so that
/// reloading the page does not send the form again.
pub fn see_other(frame: &Frame<'_>) -> Response {
    let mut r = text(303, "See the dashboard.");
    r.headers
        .push(("Location", frame.action.unwrap_or("admin").to_owned()));
    r
}

/// A whole page: title, the main part's HTML (already escaped), the owner's footer. `narrow`
/// for a page that is only a form, as wide as the public page.
pub fn document(title: &str, main: &str, frame: &Frame<'_>, narrow: bool) -> String {
    let site = frame.page.and_then(|p| p.site_name.as_deref());
    let full_title = match site {
        Some(site) => format!("{} – {}", escape(title), escape(site)),
        None => escape(title),
    };
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n\
         <meta name=\"robots\" content=\"noindex, nofollow\">\n\
         <title>{full_title}</title>\n<style>{}</style>\n</head>\n<body>\n\
         <main class=\"admin{}\">\n{main}</main>\n{}<!-- resolve {} -->\n</body>\n</html>\n",
        style_block(),
        if narrow { " narrow" } else { "" },
        footer(frame.page),
        env!("CARGO_PKG_VERSION"),
    )
}

/// `method="post"` and the dashboard's address, for a form.
pub(super) fn form_attributes(frame: &Frame<'_>) -> String {
    let action = frame
        .action
        .map_or(String::new(), |a| format!(" action=\"{}\"", escape(a)));
    format!("method=\"post\"{action}")
}

fn notice_card(notice: Option<Notice<'_>>) -> String {
    notice.map_or(String::new(), |n| {
        format!(
            "<div class=\"result\" role=\"alert\"><div class=\"card {}\"><p>{}</p></div></div>\n",
            escape(n.kind),
            escape(n.text)
        )
    })
}

/// The sign-in page: the password, sent by POST with the form's token.
pub fn sign_in(frame: &Frame<'_>, token: &str, notice: Option<Notice<'_>>) -> String {
    let main = format!(
        "<h1>Sign in to the dashboard</h1>\n\
         <p class=\"intro\">The owner's view of this site: paid calls, refusals, and the \
         configuration check.</p>\n\
         {}\
         <form class=\"again\" {}>\n\
         <input type=\"hidden\" name=\"action\" value=\"signin\">\n\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\n\
         <label for=\"password\">Password</label>\n<div class=\"row\">\n\
         <input id=\"password\" name=\"password\" type=\"password\" required \
         autocomplete=\"current-password\" autocapitalize=\"off\" spellcheck=\"false\">\n\
         <button id=\"submit\" type=\"submit\">Sign in</button>\n</div>\n</form>\n",
        notice_card(notice),
        form_attributes(frame),
        escape(token),
    );
    document("Sign in", &main, frame, true)
}

/// The dashboard page: its heading with the sign-out forms (this browser, every browser), then `sections` (already HTML).
pub fn dashboard(frame: &Frame<'_>, sign_out_token: &str, sections: &str) -> String {
    let main = format!(
        "<div class=\"top\">\n<h1>Dashboard</h1>\n\
         <form {}>\n\
         <input type=\"hidden\" name=\"action\" value=\"signout\">\n\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\n\
         <button id=\"sign-out\" type=\"submit\">Sign out</button>\n</form>\n\
         <form {}>\n\
         <input type=\"hidden\" name=\"action\" value=\"signout-all\">\n\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\n\
         <button id=\"sign-out-all\" type=\"submit\">Sign out everywhere</button>\n</form>\n\
         </div>\n{sections}",
        form_attributes(frame),
        escape(sign_out_token),
        form_attributes(frame),
        escape(sign_out_token),
    );
    document("Dashboard", &main, frame, false)
}

/// A refusal page with a way back: the sentence, and a link to the dashboard (or its sign-in).
pub fn refusal(frame: &Frame<'_>, title: &str, notice: Notice<'_>) -> String {
    let back = frame.action.unwrap_or("admin");
    let main = format!(
        "<h1>{}</h1>\n{}<p class=\"again\"><a href=\"{}\">Back to the dashboard</a></p>\n",
        escape(title),
        notice_card(Some(notice)),
        escape(back)
    );
    document(title, &main, frame, true)
}

/// The warnings shown at the top of the dashboard, before any figure: a paid provider with an
/// empty `allowed_origins` (what it means, and the line that fixes it, with `origin`, this
/// site's own address as the browser sent it, when known).
pub fn warnings(config: &Config, origin: Option<&str>) -> String {
    if !crate::usage::readiness::open_to_other_sites(config) {
        return String::new();
    }
    let example = match origin {
        Some(origin) => format!("\"allowed_origins\": [\"{origin}\"]"),
        None => {
            "\"allowed_origins\": [\"https://www.example.com\", \"https://example.com\"]".to_owned()
        }
    };
    format!(
        "<div class=\"result\" id=\"open-origins\"><div class=\"card wait\">\n\
         <p class=\"title\">Any other site can spend your paid calls</p>\n\
         <p><code>allowed_origins</code> is empty, so the site answers requests sent from any \
         other site's page: a page elsewhere can make its visitors' browsers send links here, \
         and each one is a paid call on your provider account.</p>\n\
         <p>To fix it, list the addresses of the pages that use this site in \
         <code>~/resolve/config.json</code>, as scheme and host, for example \
         <code>{}</code>. Requests from other sites' pages then get 403 before anything is \
         counted or spent.</p>\n</div></div>\n",
        escape(&example)
    )
}

/// A refusal page ([`refusal`]) with an error card, as the answer with its `status`.
pub fn refused(frame: &Frame<'_>, status: u16, title: &str, text: &str) -> Response {
    html(
        status,
        refusal(
            frame,
            title,
            Notice {
                kind: "error",
                text,
            },
        ),
    )
}

/// Where `resolve check`'s report turns to the effective configuration.
const EFFECTIVE: &str = "effective configuration (secrets masked):\n";

/// The configuration check's report, as `resolve check` prints it (secrets already masked):
/// the findings, then the effective configuration, folded.
pub fn report_section(report: &str, ready: bool) -> String {
    let (findings, effective) = report.split_once(EFFECTIVE).unwrap_or((report, ""));
    let folded = if effective.trim().is_empty() {
        String::new()
    } else {
        format!(
            "<details>\n<summary>The effective configuration (secrets masked)</summary>\n\
             <pre class=\"report\">{}</pre>\n</details>\n",
            escape(effective.trim_end())
        )
    };
    format!(
        "<section aria-labelledby=\"check\">\n<h2 id=\"check\">Configuration check</h2>\n\
         <p>{}</p>\n<pre class=\"report\">{}</pre>\n{folded}</section>\n",
        if ready {
            "Ready: the site can answer requests."
        } else {
            "Not ready: fix the lines marked FAIL."
        },
        escape(findings.trim_end())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(r: &Response) -> String {
        String::from_utf8(r.body.clone()).unwrap()
    }

    #[test]
    fn every_answer_carries_the_guards() {
        for r in [
            html(200, sign_in(&Frame::default(), "t", None)),
            text(404, "Not found."),
            see_other(&Frame::default()),
        ] {
            for (name, value) in [
                ("Cache-Control", "no-store"),
                ("X-Frame-Options", "DENY"),
                ("Referrer-Policy", "no-referrer"),
                ("X-Content-Type-Options", "nosniff"),
            ] {
                assert_eq!(r.header_value(name), Some(value), "{name} on {}", r.status);
            }
            let csp = r.header_value("Content-Security-Policy").unwrap();
            for part in [
                "default-src 'none'",
                "style-src 'sha256-",
                "form-action 'self'",
                "frame-ancestors 'none'",
            ] {
                assert!(csp.contains(part), "{csp}");
            }
        }
    }

    #[test]
    fn the_style_block_is_the_one_the_policy_allows() {
        use sha2::{Digest, Sha256};
        let page = body(&html(200, sign_in(&Frame::default(), "t", None)));
        let style = &page[page.find("<style>").unwrap() + 7..page.find("</style>").unwrap()];
        let hash = base64(&Sha256::digest(style.as_bytes()));
        assert!(content_security_policy().contains(&format!("'sha256-{hash}'")));
        assert!(
            style.contains("--focus") && style.contains(".figures"),
            "both stylesheets"
        );
        assert!(
            !page.contains("<script") && !page.contains(" style=\""),
            "{page}"
        );
    }

    #[test]
    fn the_sign_in_form_posts_the_password_with_its_token() {
        let frame = Frame {
            action: Some("/cgi-bin/resolve/admin"),
            page: None,
        };
        let page = sign_in(
            &frame,
            "abc\"def",
            Some(Notice {
                kind: "error",
                text: "Wrong <password>.",
            }),
        );
        assert!(
            page.contains(
                "<form class=\"again\" method=\"post\" action=\"/cgi-bin/resolve/admin\">"
            ),
            "{page}"
        );
        assert!(
            page.contains("name=\"csrf\" value=\"abc&quot;def\""),
            "{page}"
        );
        assert!(page.contains("type=\"password\""), "{page}");
        assert!(
            page.contains("<label for=\"password\">Password</label>"),
            "{page}"
        );
        assert!(page.contains("Wrong &lt;password&gt;."), "{page}");
        assert_eq!(
            see_other(&frame).header_value("Location"),
            Some("/cgi-bin/resolve/admin")
        );
        assert_eq!(
            see_other(&Frame::default()).header_value("Location"),
            Some("admin")
        );
    }
}
