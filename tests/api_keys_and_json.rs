//! API keys and JSON answers under a real Apache: 401s, per-key limits, and every status's
//! JSON body checked against the shapes the README documents.

mod support;

use serde_json::{Value, json};
use support::config::{self, rule};
use support::urlenc::link_param;
use support::{HttpClient, Mode, Reply, Request, Response, Site, fire};

fn hash(key: &str) -> String {
    resolve::http::api_key::hash(key)
}

const KEY_ALPHA: &str = "alpha-3f9c1e7b2d";
const KEY_BETA: &str = "beta-8a7e6d5c4b";

fn keyed_site(label: &str) -> Site {
    Site::builder(label)
        .rules(vec![
            rule("ip", "ip", 1000, 60),
            rule("key", "api_key", 10, 60),
        ])
        .config(|cfg| {
            cfg["api_keys"] = json!({"require": true, "keys": [
                {"name": "alpha", "sha256": hash(KEY_ALPHA)},
                {"name": "beta", "sha256": hash(KEY_BETA)},
            ]});
        })
        .start()
}

fn target(i: usize) -> String {
    format!(
        "/cgi-bin/resolve?{}",
        link_param(&format!("https://example.com/f/{i}"))
    )
}

#[test]
fn keys_are_required_checked_and_limited_per_key() {
    let s = keyed_site("keys");
    let client = s.apache.client();

    let r = client.send(&Request::get(&target(0))).unwrap();
    assert_eq!(r.status, 401, "{}", r.everything());
    let challenge = r.header("WWW-Authenticate").unwrap_or_default();
    assert!(challenge.contains("header=\"X-API-Key\""), "{challenge}");

    let r = client
        .send(&Request::get(&target(0)).header("X-API-Key", "nope-0000"))
        .unwrap();
    assert_eq!(r.status, 401);
    assert_eq!(
        r.json()["code"],
        "unknown_api_key",
        "keyed requests get JSON"
    );
    assert_eq!(s.provider.calls(), 0);

    // alpha from two addresses at once: one quota of 10.
    let a = s.apache.addr();
    let results = fire(30, 8, |i| {
        let from = if i % 2 == 0 { "127.0.0.1" } else { "127.0.0.2" };
        HttpClient::new(a)
            .bind_source(from)
            .send(&Request::get(&target(i)).header("X-API-Key", KEY_ALPHA))
    });
    let ok = results
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|r| r.status == 200))
        .count();
    let limited: Vec<&Response> = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .filter(|r| r.status == 429)
        .collect();
    assert_eq!((ok, limited.len()), (10, 20));
    assert_eq!(limited[0].json()["rule"], "key");
    assert_eq!(s.provider.calls(), 10);

    // beta is unaffected.
    for i in 0..5 {
        let r = client
            .send(&Request::get(&target(i)).header("X-API-Key", KEY_BETA))
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.everything());
    }
    assert_eq!(s.provider.calls(), 15);

    s.apache.settle_log();
    let log = s.apache.error_log();
    for secret in [KEY_ALPHA, KEY_BETA, "nope-0000", config::TOKEN] {
        assert!(!log.contains(secret), "{secret} in the error log:\n{log}");
    }
    assert!(log.contains("unknown API key sha256:"), "{log}");
}

/// Checks a JSON answer against the documented shapes; returns the body.
fn check_shape(r: &Response, status: u16) -> Value {
    assert_eq!(r.status, status, "{}", r.everything());
    let body = r.json();
    let obj = body
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {body}"));
    if status == 200 {
        assert_eq!(r.header("Content-Type"), Some("application/json"));
        let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        assert_eq!(keys, ["download", "filename"], "{body}");
        assert!(
            body["download"]
                .as_str()
                .is_some_and(|d| d.starts_with("https://"))
        );
        assert!(body["filename"].is_string() || body["filename"].is_null());
        return body;
    }
    assert_eq!(r.header("Content-Type"), Some("application/problem+json"));
    let mut expected = vec!["code", "detail", "status", "title", "type"];
    if r.header("Retry-After").is_some() {
        expected.push("retry_after");
        assert_eq!(
            body["retry_after"]
                .as_u64()
                .map(|v| v.to_string())
                .as_deref(),
            r.header("Retry-After"),
            "{body}"
        );
    }
    if status == 429 {
        expected.push("rule");
        assert_eq!(
            body["type"],
            "https://iana.org/assignments/http-problem-types#quota-exceeded"
        );
    } else {
        assert_eq!(body["type"], "about:blank");
    }
    expected.sort_unstable();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, expected, "{body}");
    assert_eq!(body["status"], status);
    assert!(body["title"].as_str().is_some_and(|t| !t.is_empty()));
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.ends_with('.') && detail.len() > 10, "{detail:?}");
    assert!(
        body["code"]
            .as_str()
            .is_some_and(|c| c.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
    );
    body
}

#[test]
fn every_status_has_the_documented_json_shape() {
    let s = Site::builder("shapes")
        .rules(vec![rule("ip", "ip", 8, 60)])
        .config(|cfg| {
            cfg["provider"]["timeout_ms"] = json!(1500);
            cfg["provider"]["connect_timeout_ms"] = json!(1000);
            cfg["provider"]["error_message"] = json!("/error");
        })
        .start();
    let json = |req: Request| req.header("Accept", "application/json");
    let client = s.apache.client();
    let send = |req: Request| client.send(&json(req)).unwrap();
    let mut seen = Vec::new();

    let r = send(Request::get(&target(1)));
    check_shape(&r, 200);
    seen.push(200);
    check_shape(
        &send(Request::get("/cgi-bin/resolve?link=ftp%3A%2F%2Fx")),
        400,
    );
    check_shape(&send(Request::new("PUT", &target(1))), 405);
    // mod_fcgid reads the body itself and always passes its length (here 0): no 411 there, and
    // a POST that is not a form gets 415.
    let no_length = match s.apache.mode() {
        Mode::Cgid => 411,
        Mode::Fcgid => 415,
    };
    check_shape(
        &send(
            Request::new("POST", "/cgi-bin/resolve")
                .header("Host", "x")
                .header("Connection", "close")
                .no_framing(),
        ),
        no_length,
    );
    check_shape(
        &send(Request::post_form("/cgi-bin/resolve", vec![b'a'; 9000])),
        413,
    );
    check_shape(
        &send(
            Request::new("POST", "/cgi-bin/resolve")
                .header("Content-Type", "text/plain")
                .body("link=x"),
        ),
        415,
    );
    s.provider
        .set_reply(Reply::json(400, r#"{"error": "File not found"}"#));
    let body = check_shape(&send(Request::get(&target(2))), 422);
    assert!(body["detail"].as_str().unwrap().contains("File not found"));
    s.provider
        .set_reply(Reply::json(401, r#"{"error": "bad_token"}"#));
    let body = check_shape(&send(Request::get(&target(3))), 502);
    assert!(
        !body.to_string().contains("bad_token"),
        "owner's problem stays in the log"
    );
    s.provider.set_reply(Reply::json(429, "{}"));
    check_shape(&send(Request::get(&target(4))), 503);
    s.provider.set_reply(Reply::Hang);
    let timed_out = send(Request::get(&target(5)));
    check_shape(&timed_out, 504);
    assert!(timed_out.program_took() < std::time::Duration::from_secs(5));
    s.provider.set_reply(Reply::Default);
    // 6 admitted so far (one per provider call, and the HEAD-free path): use up the rest.
    let mut last = send(Request::get(&target(6)));
    while last.status == 200 {
        last = send(Request::get(&target(7)));
    }
    check_shape(&last, 429);
    seen.extend([400, 405, no_length, 413, 415, 422, 502, 503, 504, 429]);

    // 401 and the "not configured" 503 need other configurations.
    let keyed = keyed_site("shapes-keyed");
    let r = keyed
        .apache
        .client()
        .send(&json(Request::get(&target(1))))
        .unwrap();
    check_shape(&r, 401);
    // Nothing but the store.
    let bare = Site::builder("shapes-bare")
        .config(|cfg| {
            cfg.as_object_mut()
                .expect("an object")
                .retain(|k, _| k == "store");
        })
        .start();
    let body = check_shape(
        &bare
            .apache
            .client()
            .send(&json(Request::get(&target(1))))
            .unwrap(),
        503,
    );
    assert_eq!(body["code"], "not_configured");
    seen.push(401);
    eprintln!("statuses checked: {seen:?}");
}
