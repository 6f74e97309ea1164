//! The binary as a CGI program under a real Apache (event MPM + mod_cgid): rate limiting, provider calls, answers, secrecy.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::config::{TOKEN, rule};
use support::temp::files_under;
use support::urlenc::link_param;
use support::{HttpClient, Reply, Request, Response, Site, fire};

fn site(label: &str, rules: Vec<Value>) -> Site {
    Site::builder(label).rules(rules).start()
}

fn link(i: usize) -> String {
    format!("https://example.com/file/{i}")
}

fn target(i: usize) -> String {
    format!("/cgi-bin/resolve?{}", link_param(&link(i)))
}

fn get(client: &HttpClient, i: usize, accept: &str) -> Response {
    client
        .send(&Request::get(&target(i)).header("Accept", accept))
        .unwrap_or_else(|e| panic!("GET {}: {e}", target(i)))
}

/// The provider's last call asked for `link(i)`.
fn assert_last_asked(site: &Site, i: usize) {
    let last = site.provider.last_request().expect("a provider call");
    assert_eq!(last.param("link"), Some(link(i)), "{}", last.everything());
}

/// The answer is of this media type.
fn assert_type(r: &Response, media_type: &str) {
    assert!(
        r.header("Content-Type")
            .unwrap_or_default()
            .starts_with(media_type),
        "{}",
        r.everything()
    );
}

fn assert_no_store(r: &Response) {
    let cc = r.header("Cache-Control").unwrap_or_default();
    assert!(
        cc.contains("no-store"),
        "Cache-Control {cc:?} on\n{}",
        r.everything()
    );
}

/// Checks a 429 against the contract; returns its Retry-After.
fn check_429(r: &Response, limit: u64, window: u64) -> u64 {
    assert_eq!(r.status, 429, "{}", r.everything());
    let retry_after = r.retry_after();
    assert!(
        (1..=window).contains(&retry_after),
        "Retry-After {retry_after} not in 1..={window}"
    );
    assert_eq!(r.header_count("Retry-After"), 1);
    assert_eq!(
        r.header("RateLimit-Policy"),
        Some(format!("\"ip\";q={limit};w={window}").as_str()),
        "{}",
        r.everything()
    );
    let ratelimit = r
        .header("RateLimit")
        .unwrap_or_else(|| panic!("no RateLimit header:\n{}", r.everything()));
    let params: Vec<&str> = ratelimit.split(';').map(str::trim).collect();
    assert_eq!(params.first(), Some(&"\"ip\""), "RateLimit {ratelimit:?}");
    assert!(params.contains(&"r=0"), "RateLimit {ratelimit:?}");
    let t: u64 = params
        .iter()
        .find_map(|p| p.strip_prefix("t="))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("RateLimit {ratelimit:?} has no t=N"));
    assert!(
        (1..=retry_after).contains(&t),
        "RateLimit t={t} must be in 1..=Retry-After ({retry_after})"
    );
    assert_no_store(r);
    retry_after
}

#[test]
fn burst_of_300_from_one_address_admits_exactly_the_limit() {
    let site = site("burst", vec![rule("ip", "ip", 30, 60)]);
    let client = site.apache.client();
    let started = Instant::now();
    let results = fire(300, 32, |i| {
        client.send(&Request::get(&target(i)).header("Accept", "text/plain"))
    });
    eprintln!(
        "300 requests through Apache, 32 at a time: {:?}",
        started.elapsed()
    );
    let responses: Vec<Response> = results
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.unwrap_or_else(|e| panic!("request {i}: {e}")))
        .collect();
    let statuses: Vec<u16> = responses.iter().map(|r| r.status).collect();
    let ok: Vec<usize> = (0..300).filter(|&i| statuses[i] == 200).collect();
    let limited: Vec<usize> = (0..300).filter(|&i| statuses[i] == 429).collect();
    assert_eq!(
        ok.len() + limited.len(),
        300,
        "answers other than 200/429: {:?}",
        responses
            .iter()
            .filter(|r| r.status != 200 && r.status != 429)
            .map(Response::everything)
            .collect::<Vec<_>>()
    );
    assert_eq!(ok.len(), 30, "admitted");
    assert_eq!(limited.len(), 270, "refused");
    assert_eq!(site.provider.calls(), 30, "paid provider calls");

    // Each admitted answer is one of the stand-in's URLs, each exactly once.
    let got: BTreeSet<String> = ok.iter().map(|&i| responses[i].text()).collect();
    let expected: BTreeSet<String> = (1..=30)
        .map(|n| format!("https://cdn.test/file/{n}\n"))
        .collect();
    assert_eq!(got, expected);
    for &i in &ok {
        assert_no_store(&responses[i]);
        assert_type(&responses[i], "text/plain");
    }
    // The provider was asked exactly for the links of the admitted requests.
    let asked: BTreeSet<String> = site
        .provider
        .requests()
        .iter()
        .map(|r| r.param("link").expect("link sent to the provider"))
        .collect();
    let admitted: BTreeSet<String> = ok.iter().map(|&i| link(i)).collect();
    assert_eq!(asked, admitted);
    for &i in &limited {
        check_429(&responses[i], 30, 60);
        assert!(!responses[i].body.is_empty(), "429 without an explanation");
    }
}

#[test]
fn after_the_window_requests_are_admitted_again() {
    let window = 2;
    let limit = 3;
    let site = site("window", vec![rule("ip", "ip", limit, window)]);
    let client = site.apache.client();
    let mut admitted = 0;
    let mut retry_after = None;
    for i in 0..12 {
        let r = get(&client, i, "text/plain");
        match r.status {
            200 => admitted += 1,
            429 => {
                retry_after = Some(check_429(&r, limit, window));
                break;
            }
            _ => panic!("unexpected answer:\n{}", r.everything()),
        }
    }
    let retry_after = retry_after.expect("the limit was reached within 12 requests");
    assert!(
        (limit as usize..=2 * limit as usize).contains(&admitted),
        "{admitted} admitted before the first 429"
    );
    assert_eq!(site.provider.calls(), admitted);

    // Waiting as told is enough.
    std::thread::sleep(Duration::from_secs(retry_after) + Duration::from_millis(300));
    let r = get(&client, 100, "text/plain");
    assert_eq!(r.status, 200, "{}", r.everything());
    assert_eq!(site.provider.calls(), admitted + 1);
    assert_last_asked(&site, 100);

    // After two quiet windows the whole quota is back.
    std::thread::sleep(Duration::from_secs(2 * window) + Duration::from_millis(300));
    let before = site.provider.calls();
    for i in 200..200 + limit as usize {
        let r = get(&client, i, "text/plain");
        assert_eq!(r.status, 200, "{}", r.everything());
    }
    assert_eq!(site.provider.calls(), before + limit as usize);
}

#[test]
fn two_addresses_are_limited_independently() {
    let site = site("two-ips", vec![rule("ip", "ip", 3, 60)]);
    let a = site.apache.client().bind_source("127.0.0.1");
    let b = site.apache.client().bind_source("127.0.0.2");
    let results = fire(20, 8, |i| {
        let c = if i % 2 == 0 { &a } else { &b };
        c.send(&Request::get(&target(i)))
    });
    let responses: Vec<Response> = results.into_iter().map(|r| r.expect("answer")).collect();
    for (parity, name) in [(0, "127.0.0.1"), (1, "127.0.0.2")] {
        let mine: Vec<&Response> = responses
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == parity)
            .map(|(_, r)| r)
            .collect();
        let ok = mine.iter().filter(|r| r.status == 200).count();
        let limited = mine.iter().filter(|r| r.status == 429).count();
        assert_eq!((ok, limited), (3, 7), "answers to {name}");
    }
    assert_eq!(site.provider.calls(), 6);
    // A third address still has its whole quota; the first is still refused.
    let c = site.apache.client().bind_source("127.0.0.3");
    assert_eq!(get(&c, 100, "text/plain").status, 200);
    assert_eq!(get(&a, 101, "text/plain").status, 429);
    assert_eq!(site.provider.calls(), 7);
}

#[test]
fn provider_token_never_leaks() {
    let site = Site::builder("secret")
        .rules(vec![rule("ip", "ip", 12, 60)])
        .config(|cfg| {
            cfg["provider"]["timeout_ms"] = 1500.into();
            cfg["provider"]["connect_timeout_ms"] = 1000.into();
        })
        .start();
    site.apache.settle_log();
    let log_at_start = site.apache.error_log();
    let client = site.apache.client();
    let mut responses = Vec::new();
    let mut send = |req: Request| {
        let r = client.send(&req).expect("answer");
        responses.push(r.clone());
        r
    };
    let json = "application/json";
    let ok = send(Request::get(&target(1)).header("Accept", "text/plain"));
    assert_eq!(ok.status, 200, "{}", ok.everything());
    send(Request::get(&target(2)).header("Accept", json));
    send(Request::post_form("/cgi-bin/resolve", link_param(&link(3))).header("Accept", json));
    send(Request::head(&target(4)));
    let calls_ok = site.provider.calls();
    assert_eq!(calls_ok, 3);
    for r in site.provider.requests() {
        assert_eq!(
            r.header("Authorization"),
            Some(format!("Bearer {TOKEN}").as_str()),
            "the provider must receive the token: {}",
            r.everything()
        );
    }

    // Provider failures: its answers must not be turned into a leak either.
    let failures = [
        Reply::json(
            401,
            r#"{"error": "bad token", "error_code": "AUTH_BAD_TOKEN"}"#,
        ),
        Reply::raw(500, "text/html", "<h1>oops</h1>"),
        Reply::json(200, r#"{"nothing": "here"}"#),
        Reply::Hang,
    ];
    for (n, reply) in failures.into_iter().enumerate() {
        site.provider.set_reply(reply);
        for accept in ["text/plain", json] {
            let r = send(Request::get(&target(10 + 2 * n)).header("Accept", accept));
            assert!(
                r.status >= 400 && r.status != 429,
                "provider failure answered as\n{}",
                r.everything()
            );
        }
    }
    site.provider.set_reply(Reply::Default);

    // Bad input and refusals.
    send(Request::get("/cgi-bin/resolve?link=ftp%3A%2F%2Fx").header("Accept", json));
    send(Request::get("/cgi-bin/resolve").header("Accept", "text/html"));
    send(Request::new("PUT", "/cgi-bin/resolve").header("Accept", json));
    send(Request::get(&target(5)).header("Accept", "text/plain;q=0.5, application/json"));
    send(Request::get(&format!(
        "/cgi-bin/resolve?{}",
        link_param(&format!("https://example.com/{}", "a".repeat(3000)))
    )));
    let mut saw_429 = false;
    for i in 0..20 {
        let accept = if i % 2 == 0 { json } else { "text/html" };
        if send(Request::get(&target(100 + i)).header("Accept", accept)).status == 429 {
            saw_429 = true;
            if accept == json {
                break;
            }
        }
    }
    assert!(saw_429, "the limit of 12 was never reached");

    site.apache.settle_log();
    let log = site.apache.error_log();
    assert!(
        log.len() > log_at_start.len(),
        "the binary logged nothing about provider failures or bad input"
    );
    for r in &responses {
        let all = r.everything();
        assert!(!all.contains(TOKEN), "token in an answer:\n{all}");
        assert!(
            !all.contains("SECRET"),
            "part of the token in an answer:\n{all}"
        );
    }
    assert!(!log.contains("SECRET"), "token in the error_log:\n{log}");
    for entry in files_under(&site.data) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("SECRET"),
            "token in the data dir: {}",
            entry.display()
        );
    }
}

#[test]
fn json_text_and_html_answers() {
    let site = site("answers", vec![rule("ip", "ip", 2, 60)]);
    let json = "application/json";

    // 200 as JSON.
    let c = site.apache.client().bind_source("127.0.0.11");
    let r = get(&c, 1, json);
    assert_eq!(r.status, 200, "{}", r.everything());
    assert_type(&r, "application/json");
    assert_no_store(&r);
    assert_eq!(
        r.json(),
        serde_json::json!({"download": "https://cdn.test/file/1", "filename": "file.bin"})
    );

    // 200 as HTML, from a form POST (the URL appears in the page).
    let r = c
        .send(
            &Request::post_form("/cgi-bin/resolve", link_param(&link(2)))
                .header("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"),
        )
        .expect("answer");
    assert_eq!(r.status, 200, "{}", r.everything());
    assert_type(&r, "text/html");
    assert!(r.text().contains("https://cdn.test/file/2"), "{}", r.text());
    assert_last_asked(&site, 2);

    // 429 as problem+json.
    let r = get(&c, 3, json);
    let retry_after = check_429(&r, 2, 60);
    assert_type(&r, "application/problem+json");
    let body = r.json();
    assert_eq!(
        body["type"],
        "https://iana.org/assignments/http-problem-types#quota-exceeded"
    );
    assert_eq!(body["title"], "Too Many Requests");
    assert_eq!(body["status"], 429);
    assert_eq!(body["code"], "rate_limited");
    assert_eq!(body["rule"], "ip");
    assert_eq!(body["retry_after"], retry_after);
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
    // 429 as text: one sentence naming the wait.
    let r = get(&c, 4, "text/plain");
    let retry_after = check_429(&r, 2, 60);
    assert_type(&r, "text/plain");
    assert!(
        r.text().contains(&retry_after.to_string()),
        "429 text does not say how long to wait: {:?}",
        r.text()
    );
    assert_eq!(site.provider.calls(), 2);
}

#[test]
fn head_is_counted_has_no_body_and_never_calls_the_provider() {
    let site = site("head", vec![rule("ip", "ip", 2, 60)]);
    let c = site.apache.client();
    for i in 0..2 {
        let r = c.send(&Request::head(&target(i))).expect("answer");
        assert_eq!(r.status, 200, "{}", r.everything());
        assert!(
            r.body.is_empty(),
            "HEAD answered with a body: {:?}",
            r.text()
        );
    }
    let r = c.send(&Request::head(&target(2))).expect("answer");
    check_429(&r, 2, 60);
    assert!(
        r.body.is_empty(),
        "HEAD answered with a body: {:?}",
        r.text()
    );
    // The two HEADs used the quota.
    let r = get(&c, 3, "text/plain");
    check_429(&r, 2, 60);
    assert_eq!(site.provider.calls(), 0);
}

#[test]
fn other_methods_get_405_with_allow() {
    let site = site("methods", vec![rule("ip", "ip", 30, 60)]);
    let c = site.apache.client();
    let mut fails = Vec::new();
    for method in ["PUT", "DELETE", "OPTIONS", "PATCH", "FOO"] {
        // Without a body, and with one (the program must still get its answer out).
        for body in ["", "link=https%3A%2F%2Fexample.com%2F"] {
            let what = format!("{method} with {} body bytes", body.len());
            let req = Request::new(method, &target(1))
                .header("Accept", "application/json")
                .body(body);
            let r = match c.send(&req) {
                Ok(r) => r,
                Err(e) => {
                    fails.push(format!("{what}: no valid HTTP answer: {e}"));
                    continue;
                }
            };
            let allow: Vec<String> = r
                .header("Allow")
                .unwrap_or_default()
                .split(',')
                .map(|m| m.trim().to_string())
                .collect();
            let json: Option<Value> = serde_json::from_slice(&r.body).ok();
            let ok = r.status == 405
                && allow == ["GET", "HEAD", "POST"]
                && json
                    .as_ref()
                    .is_some_and(|j| j["status"] == 405 && j["code"] == "method_not_allowed");
            if !ok {
                fails.push(format!("{what}:\n{}", r.everything()));
            }
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n\n"));
    assert_eq!(site.provider.calls(), 0);
}
