//! Fuzz target: whole CGI requests through `App::handle`, with the memory store and the echo
//! provider, checking that every answer is a valid CGI answer and keeps the README's promises.
//!
//! Input: byte 0 holds flags (bits 0-1: which configuration of `CONFIGS`; bits 2-3: how many
//! times the request is sent, 1 to 4, so that limits are reached; bit 4: the store fails), byte 1
//! says which of the eight meta-variables of `VARS` are set (bit i for `VARS[i]`), and the rest
//! is split at NUL bytes into those eight values, in order, then the request body (which may
//! hold NUL bytes itself).

#![no_main]

use std::cell::{Cell, RefCell};
use std::io::Cursor;
use std::path::Path;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use resolve::app::App;
use resolve::config::Config;
use resolve::core::clock::FakeClock;
use resolve::core::decision::Decision;
use resolve::http::request::Env;
use resolve::net::form;
use resolve::provider::resolved::Resolved;
use resolve::provider::{EchoProvider, Meter, Provider, ProviderError};
use resolve::store::counters::Counters;
use resolve::store::memory::MemoryStore;
use resolve::store::{Check, StoreError};
use resolve::support::log::{Level, Log, format_line};

/// The meta-variables the input sets, in the order their values appear.
const VARS: [&str; 8] = [
    "REQUEST_METHOD",
    "QUERY_STRING",
    "CONTENT_TYPE",
    "CONTENT_LENGTH",
    "REMOTE_ADDR",
    "HTTP_ACCEPT",
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_API_KEY",
];

/// SHA-256 of the listed key `partner-key`.
const PARTNER_SHA256: &str = "346e50af211b5135824bb2bb58fe0f9e6df228adcf10c58a37fbc46b57baee74";

/// The configurations a request may run under: the plain one, one with keys, a cache, a
/// site-wide spend rule, trusted proxies and a small body limit, one that requires a key and
/// fails closed, and one with no provider.
fn configs() -> &'static [Config; 4] {
    static CONFIGS: OnceLock<[Config; 4]> = OnceLock::new();
    CONFIGS.get_or_init(|| {
        let texts = [
            r#"{"provider": {"kind": "echo"}, "cache": {"ttl_secs": 0},
                "rules": [{"name": "ip", "key": "ip", "limit": 2, "window_secs": 60}]}"#
                .to_owned(),
            format!(
                r#"{{"provider": {{"kind": "echo"}}, "cache": {{"ttl_secs": 60}},
                "rules": [{{"name": "ip", "key": "ip", "limit": 3, "window_secs": 60}},
                          {{"name": "key", "key": "api_key", "limit": 2, "window_secs": 60}}],
                "spend": [{{"name": "budget", "limit": 2, "window_secs": 3600}}],
                "client": {{"ipv6_prefix": 48,
                            "trusted_proxies": ["127.0.0.0/8", "::1", "10.0.0.0/8"],
                            "forwarded_header": "X-Forwarded-For"}},
                "api_keys": {{"keys": [{{"name": "partner", "sha256": "{PARTNER_SHA256}",
                    "rules": [{{"name": "partner", "key": "api_key", "limit": 1, "window_secs": 60}}]}}]}},
                "request": {{"max_body_bytes": 64}}}}"#
            ),
            format!(
                r#"{{"provider": {{"kind": "echo"}}, "cache": {{"ttl_secs": 0}},
                "store": {{"on_error": "deny", "deny_retry_after_secs": 7}},
                "rules": [{{"name": "ip", "key": "ip", "limit": 2, "window_secs": 1}}],
                "api_keys": {{"require": true,
                    "keys": [{{"name": "partner", "sha256": "{PARTNER_SHA256}"}}]}}}}"#
            ),
            r#"{"cache": {"ttl_secs": 0}}"#.to_owned(),
        ];
        texts.map(|t| {
            Config::from_json(&t, Path::new("/nonexistent/resolve"))
                .unwrap_or_else(|e| panic!("fuzz configuration is invalid: {e}\n{t}"))
        })
    })
}

/// The library's memory store's counters, their decisions counted.
struct Counted {
    inner: Rc<dyn Counters>,
    decisions: Rc<Cell<usize>>,
}

impl Counters for Counted {
    fn decide_sized(
        &self,
        checks: &[Check<'_>],
        own: usize,
        size: Option<u64>,
    ) -> Result<Decision, StoreError> {
        self.decisions.set(self.decisions.get() + 1);
        self.inner.decide_sized(checks, own, size)
    }

    fn refund(&self, checks: &[Check<'_>], at_ms: u64) -> Result<(), StoreError> {
        self.inner.refund(checks, at_ms)
    }

    fn charge(&self, checks: &[Check<'_>], at_ms: u64, size: u64) -> Result<(), StoreError> {
        self.inner.charge(checks, at_ms, size)
    }

    fn used(&self, checks: &[Check<'_>]) -> Result<Vec<u32>, StoreError> {
        self.inner.used(checks)
    }
}

/// The echo provider, counted.
struct CountingEcho {
    calls: Cell<usize>,
}

impl Provider for CountingEcho {
    fn resolve(&self, link: &str, meter: &dyn Meter) -> Result<Resolved, ProviderError> {
        self.calls.set(self.calls.get() + 1);
        EchoProvider.resolve(link, meter)
    }
}

/// Keeps the log lines of one request.
#[derive(Default)]
struct Lines(RefCell<Vec<(Level, String)>>);

impl Log for Lines {
    fn line(&self, level: Level, message: &str) {
        self.0.borrow_mut().push((level, message.to_owned()));
    }
}

/// Statuses the README lists that a request can get with the echo provider.
const STATUSES: [u16; 10] = [200, 400, 401, 405, 411, 413, 415, 422, 429, 503];

/// Tags the HTML pages are made of: anything else came from the request.
const HTML_TAGS: [&str; 46] = [
    "!doctype", "!--", "html", "/html", "head", "/head", "meta", "title", "/title", "style",
    "/style", "body", "/body", "main", "/main", "h1", "/h1", "p", "/p", "a", "/a", "br", "strong",
    "/strong", "div", "/div", "span", "/span", "form", "/form", "label", "/label", "input",
    "button", "/button", "footer", "/footer", "link", "/link", "wbr", "ul", "/ul", "li", "/li",
    "ol", "/ol",
];

/// The parsed head of a CGI answer: the status and the header lines.
struct Written {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Written {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Checks that `out` is a CGI answer (RFC 3875 section 6) and splits it.
fn parse_cgi(out: &[u8]) -> Written {
    let end = out
        .windows(2)
        .position(|w| w == b"\n\n")
        .unwrap_or_else(|| panic!("no blank line after the headers: {out:?}"));
    let head = &out[..end];
    assert!(!head.contains(&b'\r'), "CR in the header section: {head:?}");
    let head = std::str::from_utf8(head).expect("the header section is not UTF-8");
    let mut lines = head.split('\n');
    let status_line = lines.next().unwrap_or_default();
    let rest = status_line
        .strip_prefix("Status: ")
        .unwrap_or_else(|| panic!("the first line is not a Status line: {status_line:?}"));
    let (code, reason) = rest
        .split_once(' ')
        .unwrap_or_else(|| panic!("no reason phrase: {status_line:?}"));
    assert!(
        code.len() == 3 && code.bytes().all(|b| b.is_ascii_digit()),
        "status is not 3 digits: {status_line:?}"
    );
    assert!(
        !reason.is_empty() && reason.bytes().all(|b| b == b' ' || b.is_ascii_graphic()),
        "bad reason phrase: {status_line:?}"
    );
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(": ")
            .unwrap_or_else(|| panic!("not a header line: {line:?}"));
        assert!(
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'),
            "bad header name: {line:?}"
        );
        assert!(
            value.bytes().all(|b| b == b' ' || b.is_ascii_graphic()),
            "header value is not printable ASCII on one line: {line:?}"
        );
        assert!(
            !name.eq_ignore_ascii_case("Status"),
            "a second Status: {line:?}"
        );
        headers.push((name.to_owned(), value.to_owned()));
    }
    Written {
        status: code.parse().expect("three digits"),
        headers,
        body: out[end + 2..].to_vec(),
    }
}

fn is_web_url(s: &str) -> bool {
    let lower = s.get(..8).unwrap_or(s).to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

/// Checks the body against its Content-Type.
fn check_body(w: &Written) {
    let ty = w.header("Content-Type").expect("no Content-Type");
    let text = std::str::from_utf8(&w.body).expect("the body is not UTF-8");
    if ty.contains("json") {
        let v: serde_json::Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("a JSON answer is not JSON ({e}): {text:?}"));
        if w.status == 200 && v["links"].is_array() {
            // Several links: each with its state, a ready one with its web download.
            for link in v["links"].as_array().into_iter().flatten() {
                let state = link["state"]
                    .as_str()
                    .expect("a listed link without its state");
                assert!(
                    ["ready", "pending", "refused", "failed", "not_tried"].contains(&state),
                    "a listed link's state: {text}"
                );
                if state == "ready" && link["files"].is_null() {
                    let download = link["download"].as_str().expect("a ready link's download");
                    assert!(is_web_url(download), "download is not a web URL: {text}");
                }
            }
        } else if w.status == 200 {
            let download = v["download"].as_str().expect("no download in a 200");
            assert!(is_web_url(download), "download is not a web URL: {text}");
        } else {
            assert_eq!(ty, "application/problem+json", "error JSON type");
            assert_eq!(v["status"], w.status, "JSON status differs: {text}");
            assert!(v["code"].is_string(), "no code: {text}");
            assert!(v["detail"].is_string(), "no detail: {text}");
            if let Some(retry) = w.header("Retry-After") {
                assert_eq!(v["retry_after"].to_string(), retry, "retry_after differs");
            }
        }
    } else if ty.starts_with("text/html") {
        for (i, _) in text.match_indices('<') {
            let tag: String = text[i + 1..]
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '>')
                .collect();
            assert!(
                HTML_TAGS.contains(&tag.to_ascii_lowercase().as_str()),
                "unexpected tag <{tag}> in the page: {text}"
            );
        }
    } else {
        assert_eq!(ty, "text/plain; charset=utf-8", "unknown Content-Type");
        assert!(text.ends_with('\n'), "text answer without a final newline");
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() == 1 {
            if w.status == 200 {
                assert!(is_web_url(text.trim_end()), "download is not a web URL");
            }
        } else {
            // Several links: the list, always 200, a line a link (`STATE LINK ...`, a ready
            // one's download last), then what is left of the allowance.
            assert_eq!(
                w.status, 200,
                "a text answer of several lines that is no list: {text}"
            );
            let states = ["ready ", "pending ", "refused ", "failed ", "not_tried "];
            assert!(
                states.iter().any(|s| lines[0].starts_with(s)),
                "a list that does not start with a link's state: {text}"
            );
            for line in &lines {
                assert!(
                    !line.is_empty() && !line.chars().any(char::is_control),
                    "a list line that is empty or holds a control character: {text}"
                );
                if let Some(rest) = line.strip_prefix("ready ") {
                    let download = rest.rsplit(' ').next().unwrap_or_default();
                    assert!(is_web_url(download), "a ready link's download: {line}");
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [flags, present, rest @ ..] = data else {
        return;
    };
    let config = &configs()[usize::from(flags & 3)];
    let times = 1 + usize::from((flags >> 2) & 3);
    let store_fails = flags & 0x10 != 0;

    let mut parts = rest.splitn(VARS.len() + 1, |&b| b == 0);
    let mut env = Env::new();
    for (i, name) in VARS.iter().enumerate() {
        let value = parts.next().unwrap_or_default();
        if present & (1 << i) != 0 {
            env.set(name, value);
        }
    }
    let body = parts.next().unwrap_or_default();
    // A request of several links (`links`, or `link` more than once, in the query or the body)
    // is asked as one request a link: as many decisions and calls as it has links at most.
    let carried = |source: &[u8]| {
        form::raw_values(source, "links")
            .iter()
            .map(|v| {
                v.split(|&b| b == b'\n').count()
                    + v.windows(3)
                        .filter(|w| w.eq_ignore_ascii_case(b"%0a"))
                        .count()
            })
            .sum::<usize>()
            + form::raw_values(source, "link").len()
    };
    let links = carried(env.get("QUERY_STRING").unwrap_or_default())
        .max(carried(body))
        .max(1);

    let memory = MemoryStore::new(FakeClock::at(1_700_000_000_000), Duration::ZERO);
    memory.set_failing(store_fails);
    let counted = Rc::new(Cell::new(0));
    let store = memory.as_store().with_counters(|inner| {
        Rc::new(Counted {
            inner,
            decisions: counted.clone(),
        })
    });
    let provider = CountingEcho {
        calls: Cell::new(0),
    };
    let secrets = config.secrets();
    for _ in 0..times {
        let log = Lines::default();
        let app = App {
            config,
            store: &store,
            provider: config.provider.as_ref().map(|_| &provider as &dyn Provider),
            others: &[],
            log: &log,
            clock: memory.clock(),
            workers: None,
            site_check: None,
            turn: None,
        };
        let (decisions, calls) = (counted.get(), provider.calls.get());
        let answer = app.handle(&env, &mut Cursor::new(body));
        let mut out = Vec::new();
        answer
            .response
            .write_cgi(&mut out, answer.head_only)
            .expect("writing to memory");
        let w = parse_cgi(&out);

        assert_eq!(w.status, answer.response.status);
        assert!(
            STATUSES.contains(&w.status),
            "status {} is not one the README lists for this case",
            w.status
        );
        assert_eq!(w.header("Cache-Control"), Some("no-store"));
        let decided = counted.get() - decisions;
        let called = provider.calls.get() - calls;
        assert!(
            decided <= links,
            "the store decided {decided} times for {links} links"
        );
        assert!(
            called <= links,
            "the provider was called {called} times for {links} links"
        );
        match w.status {
            // Bad input never reaches the store or the provider.
            400 | 401 | 405 | 411 | 413 | 415 => {
                assert_eq!(decided, 0, "a {} reached the store", w.status);
                assert_eq!(called, 0, "a {} reached the provider", w.status);
            }
            429 => {
                assert_eq!(called, 0, "a 429 reached the provider");
                let retry = w.header("Retry-After").expect("429 without Retry-After");
                assert!(
                    retry.parse::<u32>().is_ok_and(|s| s >= 1),
                    "Retry-After {retry:?}"
                );
                assert!(w.header("RateLimit").is_some(), "429 without RateLimit");
                assert!(w.header("RateLimit-Policy").is_some());
            }
            503 => assert!(w.header("Retry-After").is_some(), "503 without Retry-After"),
            _ => {}
        }
        if w.status == 405 {
            assert_eq!(w.header("Allow"), Some("GET, HEAD, POST"));
        }
        if w.status == 401 {
            assert!(
                w.header("WWW-Authenticate").is_some(),
                "401 without challenge"
            );
        }
        if answer.head_only {
            assert_eq!(called, 0, "a HEAD request called the provider");
            assert!(w.body.is_empty(), "a HEAD answer has a body");
        } else {
            check_body(&w);
        }
        if env.get("HTTP_X_API_KEY").is_some() {
            let ty = w.header("Content-Type").unwrap_or_default();
            assert!(ty.contains("json"), "a request with a key got {ty}");
        }
        for (level, message) in log.0.borrow().iter() {
            let line = format_line(*level, message, &secrets);
            assert!(
                line.ends_with('\n') && line.matches('\n').count() == 1,
                "a log line of several lines: {line:?}"
            );
        }
        memory.clock().advance_ms(700);
    }
});
