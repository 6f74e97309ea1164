//! The words of every answer: the download link, a refusal or an error, as plain text, HTML or
//! JSON, with the rate-limit headers.

use crate::core::decision::Decision;
use crate::core::rule::Rule;
use crate::http::html::escape;
use crate::http::negotiate::Format;
use crate::http::problem::Problem;
use crate::http::request::ALLOWED_METHODS;
use crate::http::response::Response;
use crate::provider::resolved::Resolved;

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
        .map(|(r, s)| format!("\"{}\";r={};t={}", r.name, s.remaining, s.reset_secs))
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

/// A wait in words: seconds under two minutes, then minutes, then hours (rounded up).
pub fn wait_words(secs: u32) -> String {
    match secs {
        0..=119 => seconds(secs),
        120..=7199 => format!("{} minutes", secs.div_ceil(60)),
        _ => format!("{} hours", secs.div_ceil(3600)),
    }
}

/// The sentence a refused client reads.
pub fn limited_sentence(retry_after: u32) -> String {
    format!("Too many requests: try again in {}.", seconds(retry_after))
}

/// The answer for a resolved link.
pub fn resolved(format: Format, r: &Resolved) -> Response {
    match format {
        Format::Text => Response::new(200, TEXT, format!("{}\n", r.download)),
        Format::Json => {
            let body = serde_json::json!({"download": r.download, "filename": r.filename});
            Response::new(200, JSON, format!("{body}\n"))
        }
        Format::Html => {
            let name = r.filename.as_deref().unwrap_or(&r.download);
            let body = format!(
                "<p>Your download is ready:</p>\n<p class=\"result\"><a href=\"{}\" rel=\"noreferrer\">{}</a></p>\n",
                escape(&r.download),
                escape(name)
            );
            Response::new(200, HTML, page("Download ready", &body))
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
pub fn problem(format: Format, p: &Problem) -> Response {
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
            let body = format!(
                "<p class=\"error\" data-code=\"{}\">{}</p>\n",
                p.code,
                escape(&p.detail)
            );
            Response::new(
                p.status,
                HTML,
                page(crate::http::response::reason(p.status), &body),
            )
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

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<link rel=\"stylesheet\" href=\"../style.css\">\n</head>\n\
         <body>\n<main>\n<h1>{}</h1>\n{body}<p><a href=\"../\">Resolve another link</a></p>\n\
         </main>\n</body>\n</html>\n",
        escape(title),
        escape(title)
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
        }
    }

    #[test]
    fn rate_limit_headers_follow_the_draft() {
        let (a, b) = (rule("minute", 30, 60), rule("day", 500, 86400));
        let d = Decision::Refuse {
            rule: 0,
            retry_after_secs: 42,
            statuses: vec![
                RuleStatus {
                    remaining: 0,
                    reset_secs: 42,
                },
                RuleStatus {
                    remaining: 470,
                    reset_secs: 80000,
                },
            ],
        };
        let [policy, state] = limit_headers(&[&a, &b], &d);
        assert_eq!(policy.1, "\"minute\";q=30;w=60, \"day\";q=500;w=86400");
        assert_eq!(state.1, "\"minute\";r=0;t=42, \"day\";r=470;t=80000");
    }

    #[test]
    fn waits_in_words() {
        assert_eq!(wait_words(45), "45 seconds");
        assert_eq!(wait_words(121), "3 minutes");
        assert_eq!(wait_words(86_400), "24 hours");
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
        let r = problem(Format::Json, &p);
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

    #[test]
    fn html_is_escaped() {
        let r = resolved(
            Format::Html,
            &Resolved {
                download: "https://e.x/?a=\"><script>".into(),
                filename: Some("<b>x</b>".into()),
            },
        );
        let body = String::from_utf8(r.body).unwrap();
        assert!(
            !body.contains("<script>") && !body.contains("<b>"),
            "{body}"
        );
        assert!(body.contains("&lt;b&gt;x&lt;/b&gt;"));
    }

    #[test]
    fn method_not_allowed_says_what_is() {
        let r = problem(Format::Text, &Problem::new(405, "method_not_allowed", "no"));
        assert_eq!(r.header_value("Allow"), Some("GET, HEAD, POST"));
        assert_eq!(r.header_value("Cache-Control"), Some("no-store"));
    }
}
