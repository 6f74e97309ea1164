//! Tests of the answers rendered for each format: statuses, headers, escaping, the pages.

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
        unit: crate::core::rule::Unit::Requests,
        // The default template of an `ip` rule, as the configuration gives it.
        key_template: crate::core::key::KeyTemplate::parse(
            crate::support::defaults::KEY_TEMPLATE_IP,
        )
        .unwrap(),
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
                shared: false,
            },
            RuleStatus {
                remaining: 470,
                reset_ms: 80_000_000,
                shared: false,
            },
        ],
    };
    let [policy, state] = limit_headers(&[&a, &b], &d);
    assert_eq!(policy.1, "\"minute\";q=30;w=60, \"day\";q=500;w=86400");
    assert_eq!(state.1, "\"minute\";r=0;t=42, \"day\";r=470;t=80000");
}

#[test]
fn a_rule_of_bytes_tells_its_quota_in_bytes_with_its_unit() {
    let mut bytes = rule("ip-bytes", 2929, 86400);
    bytes.unit = crate::core::rule::Unit::Bytes;
    let d = Decision::Admit {
        statuses: vec![RuleStatus {
            remaining: 975,
            reset_ms: 80_000_000,
            shared: false,
        }],
        at_ms: 0,
    };
    let [policy, state] = limit_headers(&[&bytes], &d);
    assert_eq!(
        policy.1,
        "\"ip-bytes\";q=2999296;w=86400;qu=\"content-bytes\""
    );
    assert_eq!(state.1, "\"ip-bytes\";r=998400;t=80000");
    assert_eq!(
        limited_bytes_sentence(3600, "3 MB"),
        "Too many downloads: the 3 MB this site allows is used up; try again in about 60 minutes."
    );
}

#[test]
fn waits_in_words() {
    let words = [
        (0, "0 seconds"),
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
    let mut p = Problem::new(429, Kind::RateLimited, limited_sentence(5)).retry_after(5);
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
        size: None,
        download: download.into(),
        filename: Some(filename.into()),
        files: Vec::new(),
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
    let not_allowed = Problem::new(405, Kind::MethodNotAllowed, "no");
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
    let p = Problem::new(429, Kind::RateLimited, limited_sentence(42)).retry_after(42);
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
        &Problem::new(503, Kind::NotConfigured, "Not set up."),
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
    assert!(body.contains("<a href=\"https://cdn.example/f/1\" rel=\"noreferrer\">file.zip</a>"));
    assert!(body.contains(&format!(
        "<p class=\"url\">{}</p>",
        link_text("https://cdn.example/f/1")
    )));
    assert!(body.contains("<label for=\"link\">Another link</label>"));
    assert_eq!(
        body.matches("ready").count(),
        2,
        "said once as the title and once as the heading: {body}"
    );
    assert!(
        !body.contains("value="),
        "the field is empty for another link"
    );
}

#[test]
fn links_break_only_after_a_slash_or_a_question_mark() {
    assert_eq!(
        link_text("https://a.example/x-y/f?id=1&b"),
        "<span class=\"seg\">https:/</span><wbr><span class=\"seg\">/</span><wbr>\
         <span class=\"seg\">a.example/</span><wbr><span class=\"seg\">x-y/</span><wbr>\
         <span class=\"seg\">f?</span><wbr><span class=\"seg\">id=1&amp;b</span>"
    );
    assert_eq!(link_text(""), "");
    assert!(
        STYLE.contains(".seg {\n  white-space: nowrap;"),
        "the style keeps parts whole"
    );
}

#[test]
fn a_refusal_keeps_the_link_in_the_field() {
    let p = Problem::new(429, Kind::RateLimited, limited_sentence(42)).retry_after(42);
    let link = "https://host.example/f?a=1&b=\"2\"";
    let body = html(problem_for(Format::Html, &p, &Frame::default(), Some(link)));
    assert!(
        body.contains(
            "inputmode=\"url\" value=\"https://host.example/f?a=1&amp;b=&quot;2&quot;\">"
        ),
        "{body}"
    );
    assert!(body.contains("<label for=\"link\">Try again</label>"));
    let body = html(problem(Format::Html, &p, &Frame::default()));
    assert!(!body.contains("value="), "{body}");
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
    let bad_link = Problem::new(400, Kind::BadLink, "No.");
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

#[test]
fn a_job_under_way_is_202_with_when_and_where_to_ask_again() {
    let at = "/cgi-bin/resolve?link=https%3A%2F%2Fh.example%2Ff";
    for format in [Format::Text, Format::Json, Format::Html] {
        let r = pending(format, Some("40% <done>"), 5, at, &Frame::default());
        assert_eq!(r.status, 202);
        assert_eq!(r.header_value("Retry-After"), Some("5"));
        assert_eq!(r.header_value("Location"), Some(at));
        let body = String::from_utf8(r.body).unwrap();
        assert!(body.contains("40% "), "{body}");
        if format == Format::Html {
            assert!(
                !body.contains("<done>") && body.contains("&lt;done&gt;"),
                "{body}"
            );
        }
    }
    let r = pending(Format::Html, None, 5, at, &Frame::default());
    assert_eq!(
        r.header_value("Refresh"),
        Some(format!("5; url={at}").as_str())
    );
    let v: serde_json::Value =
        serde_json::from_slice(&pending(Format::Json, None, 7, at, &Frame::default()).body)
            .unwrap();
    assert_eq!(
        (v["status"].as_str(), v["retry_after"].as_u64()),
        (Some("pending"), Some(7))
    );
}

#[test]
fn several_files_are_all_given_in_every_format() {
    use crate::provider::resolved::FileLink;
    let file = |d: &str, n: Option<&str>| FileLink {
        download: d.into(),
        filename: n.map(str::to_owned),
    };
    let r = Resolved {
        size: None,
        download: "https://dl.example/1".into(),
        filename: Some("one.bin".into()),
        files: vec![
            file("https://dl.example/1", Some("one.bin")),
            file("https://dl.example/2?a=<b>", None),
        ],
    };
    let text = resolved(Format::Text, &r, &Frame::default());
    assert_eq!(
        String::from_utf8(text.body).unwrap(),
        "https://dl.example/1\nhttps://dl.example/2?a=<b>\n"
    );
    let json = resolved(Format::Json, &r, &Frame::default());
    let v: serde_json::Value = serde_json::from_slice(&json.body).unwrap();
    assert_eq!(v["download"], "https://dl.example/1");
    assert_eq!(
        v["files"],
        serde_json::json!([
            {"download": "https://dl.example/1", "filename": "one.bin"},
            {"download": "https://dl.example/2?a=<b>", "filename": null}
        ])
    );
    let html = resolved(Format::Html, &r, &Frame::default());
    let body = String::from_utf8(html.body).unwrap();
    assert!(body.contains("(2 files)"), "{body}");
    assert!(body.contains(">one.bin</a></li>"), "{body}");
    assert!(body.contains("https://dl.example/2?a=&lt;b&gt;"), "{body}");
    assert!(!body.contains("<b>"), "{body}");
    let one = Resolved {
        size: None,
        files: Vec::new(),
        ..r
    };
    let v: serde_json::Value =
        serde_json::from_slice(&resolved(Format::Json, &one, &Frame::default()).body).unwrap();
    assert_eq!(v.get("files"), None, "one file: the answer as before");
}
