//! Rules of bytes and `max_file_bytes` through the binary, run directly as CGI with a file
//! store, against a stand-in of Real-Debrid's API answering with a file's size (`filesize`, as
//! its documentation of `unrestrict/link` gives it): each answer's size is counted against the
//! visitor's daily bytes, and once they are over, the next request is refused (429) without a
//! paid call; a file over `max_file_bytes` is refused (422 `too_large`), its answer kept back.

mod support;

use serde_json::{Value, json};
use support::config::{TOKEN, rule};
use support::system::{command, output_text};
use support::urlenc::link_param;
use support::{Cgi, CgiOutput, Provider, Reply, Setup, Site};

const RD_BASE: &str = "/rest/1.0";
const RD_CALL: &str = "/rest/1.0/unrestrict/link";

/// A Real-Debrid site on a fresh stand-in, with `rules`, without the free link check.
fn site(label: &str, rules: Vec<Value>) -> Setup {
    site_with(label, rules, json!(null))
}

/// A Real-Debrid site whose `link_check` is `check` (null: none; the preset's own otherwise).
fn site_with(label: &str, rules: Vec<Value>, check: Value) -> Setup {
    Site::builder(label)
        .provider(Provider::builder().routes_only().start())
        .provider_section(move |api| {
            // The account is not read here: the stand-in counts the paid calls only.
            let mut section = json!({"preset": "realdebrid", "token": TOKEN,
                                     "base_url": api.url(RD_BASE), "hosts": null,
                                     "account": null});
            if check.is_null() {
                section["link_check"] = check.clone();
            }
            section
        })
        .rules(rules)
        .write()
}

const RD_CHECK: &str = "/rest/1.0/unrestrict/check";

/// Real-Debrid's free check's answer for a file of `size` bytes (its documentation of
/// `unrestrict/check`: host, link, filename, filesize, supported).
fn checked(size: u64) -> Reply {
    Reply::ok(json!({
        "host": "hoster.example", "link": "https://hoster.example/big", "filename": "big.mkv",
        "filesize": size, "supported": 1
    }))
}

/// Paid calls the stand-in was sent (the free checks aside).
fn paid(site: &Setup) -> usize {
    site.provider.requests_to("POST", RD_CALL).len()
}

/// A Real-Debrid answer for a file of `size` bytes.
fn answer(size: u64) -> Reply {
    Reply::ok(json!({
        "id": "ABCDEF123", "filename": "big.mkv", "mimeType": "video/x-matroska",
        "filesize": size, "link": "https://hoster.example/big", "host": "hoster.example",
        "chunks": 16, "crc": 1, "download": "https://dl.example/d/big.mkv", "streamable": 1
    }))
}

fn ask(site: &Setup, link: &str, from: &str) -> CgiOutput {
    site.run(
        Cgi::new("GET", link_param(link))
            .var("REMOTE_ADDR", from)
            .header("Accept", "application/json"),
    )
}

fn status_code(out: &CgiOutput) -> (u16, String) {
    let a = out.answer();
    let body: Value = serde_json::from_slice(&a.body).unwrap_or_else(|e| {
        panic!("body is not JSON ({e})\n{}", out.describe());
    });
    (a.status, body["code"].as_str().unwrap_or("").to_owned())
}

/// Asserts the answer is 422 `too_large` for a 12.4 GB file on a site of 10 GB files, its
/// size in words; returns the body.
fn too_large_12_4_gb(out: &CgiOutput) -> String {
    assert_eq!(
        status_code(out),
        (422, "too_large".to_owned()),
        "{}",
        out.describe()
    );
    let body = String::from_utf8_lossy(&out.answer().body).into_owned();
    assert!(
        body.contains("This file is 12.4 GB; this site serves files up to 10 GB."),
        "{body}"
    );
    body
}

#[test]
fn a_visitor_over_its_daily_bytes_is_refused_without_a_paid_call() {
    // 3 MB a day per address (2929 KiB counted); each file 2 MB (1954 KiB).
    let site = site(
        "bytes-day",
        vec![
            rule("ip", "ip", 1000, 60),
            json!({"name": "ip-bytes", "key": "ip", "unit": "bytes", "limit": 3_000_000,
                   "window_secs": 86400}),
        ],
    );
    let api = &site.provider;
    api.route("POST", RD_CALL, answer(2_000_000));
    let visitor = "203.0.113.10";
    // The first file fits; the second is admitted below the limit and charged after its
    // answer, past it (one file over, the bound of a size known only from the answer).
    for i in 0..2 {
        let out = ask(&site, &format!("https://hoster.example/f/{i}"), visitor);
        assert_eq!(out.answer().status, 200, "{}", out.describe());
    }
    assert_eq!(api.calls(), 2);
    // Over: refused with the rule's own wait, before any paid call.
    let out = ask(&site, "https://hoster.example/f/2", visitor);
    assert_eq!(
        status_code(&out),
        (429, "rate_limited".to_owned()),
        "{}",
        out.describe()
    );
    let wait = out.answer().retry_after();
    assert!((86_000..=86_400).contains(&wait), "Retry-After {wait}");
    assert_eq!(api.calls(), 2, "no paid call for a visitor over its bytes");
    // The visitor reads the allowance in bytes, in words; the headers give the quota and
    // what is left in bytes, with the draft's unit (2929 KiB counted).
    let body = String::from_utf8_lossy(&out.answer().body).into_owned();
    assert!(
        body.contains("Too many downloads: the 3 MB this site allows is used up"),
        "{body}"
    );
    assert!(!body.contains("KiB") && !body.contains("2929"), "{body}");
    let policy = out
        .answer()
        .header("RateLimit-Policy")
        .unwrap_or("")
        .to_owned();
    assert!(
        policy.contains("\"ip-bytes\";q=2999296;w=86400;qu=\"content-bytes\""),
        "{policy}"
    );
    let state = out.answer().header("RateLimit").unwrap_or("").to_owned();
    assert!(state.contains("\"ip-bytes\";r=0;"), "{state}");
    // Another visitor has its own bytes.
    let out = ask(&site, "https://hoster.example/f/3", "203.0.113.11");
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    assert_eq!(api.calls(), 3);

    // The journal counted the bytes served, per day and per client.
    let mut cmd = command(&["stats", "--json"]);
    cmd.arg("--config").arg(&site.config_path);
    let out = cmd.output().expect("run resolve stats");
    assert!(out.status.success(), "{}", output_text(&out));
    let stats: Value = serde_json::from_slice(&out.stdout).expect("stats JSON");
    assert_eq!(stats["bytes"], 6_000_000, "{stats}");
    let today = stats["per_day"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(today["bytes"], 6_000_000, "{today}");
    assert_eq!(
        stats["top_bytes"],
        json!([
            {"client": visitor, "bytes": 4_000_000, "admitted": 2},
            {"client": "203.0.113.11", "bytes": 2_000_000, "admitted": 1},
        ])
    );
    let mut cmd = command(&["stats"]);
    cmd.arg("--config").arg(&site.config_path);
    let text =
        String::from_utf8_lossy(&cmd.output().expect("run resolve stats").stdout).into_owned();
    assert!(text.contains("Bytes served:      6000000 (6 MB"), "{text}");
    assert!(text.contains("Top clients by bytes served:"), "{text}");
}

#[test]
fn an_answer_without_a_size_counts_no_bytes() {
    let site = site(
        "bytes-unknown",
        vec![
            json!({"name": "ip-bytes", "key": "ip", "unit": "bytes", "limit": 1_000_000,
                    "window_secs": 86400}),
        ],
    );
    let api = &site.provider;
    // "filesize": 0 is Real-Debrid's word for a size it does not know.
    api.route("POST", RD_CALL, answer(0));
    for i in 0..3 {
        let out = ask(
            &site,
            &format!("https://hoster.example/u/{i}"),
            "203.0.113.20",
        );
        assert_eq!(out.answer().status, 200, "{}", out.describe());
    }
    assert_eq!(api.calls(), 3);
}

#[test]
fn a_file_over_max_file_bytes_is_refused_and_its_answer_kept_back() {
    let setup = site("too-large", vec![rule("ip", "ip", 1000, 60)]);
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(&setup.config_path).unwrap()).unwrap();
    cfg["max_file_bytes"] = json!(10_000_000_000u64);
    setup.write_config(&cfg);
    let api = &setup.provider;
    api.route("POST", RD_CALL, answer(12_400_000_000));
    let out = ask(&setup, "https://hoster.example/huge", "203.0.113.30");
    let body = too_large_12_4_gb(&out);
    assert!(
        !body.contains("dl.example"),
        "the download link is kept back: {body}"
    );
    assert!(
        out.stderr.contains("12400000000 bytes") && out.stderr.contains("not handed out"),
        "{}",
        out.stderr
    );
    setup.provider.route("POST", RD_CALL, answer(9_000_000_000));
    let out = ask(&setup, "https://hoster.example/fits", "203.0.113.30");
    assert_eq!(out.answer().status, 200, "{}", out.describe());
}

#[test]
fn with_the_free_check_a_file_that_does_not_fit_is_refused_before_paying() {
    // The preset's own check (`unrestrict/check`) gives the size before the paid call.
    let site = site_with(
        "bytes-checked",
        vec![
            rule("ip", "ip", 1000, 60),
            json!({"name": "ip-bytes", "key": "ip", "unit": "bytes", "limit": 5_000_000,
                   "window_secs": 86400}),
        ],
        json!("preset"),
    );
    let api = &site.provider;
    api.route("POST", RD_CHECK, checked(2_000_000));
    api.route("POST", RD_CALL, answer(2_000_000));
    let visitor = "203.0.113.40";
    // 4882 KiB counted: two files of 1954 KiB fit, a third does not (exact: counted before).
    for i in 0..2 {
        let out = ask(&site, &format!("https://hoster.example/c/{i}"), visitor);
        assert_eq!(out.answer().status, 200, "{}", out.describe());
    }
    assert_eq!(paid(&site), 2);
    let out = ask(&site, "https://hoster.example/c/2", visitor);
    assert_eq!(
        status_code(&out),
        (429, "rate_limited".to_owned()),
        "{}",
        out.describe()
    );
    assert!(out.answer().retry_after() > 86_000, "{}", out.describe());
    assert_eq!(paid(&site), 2, "refused before any paid call");
    // A smaller file still fits what is left (974 KiB).
    api.route("POST", RD_CHECK, checked(900_000));
    let out = ask(&site, "https://hoster.example/c/3", visitor);
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    assert_eq!(paid(&site), 3);
    // Its answer says 2 MB: the size counted before stands, nothing is charged twice.
    let out = ask(&site, "https://hoster.example/c/4", visitor);
    assert_eq!(status_code(&out).0, 429, "{}", out.describe());
    assert_eq!(paid(&site), 3);
}

#[test]
fn with_the_free_check_a_too_large_file_is_refused_before_paying() {
    let site = site_with(
        "too-large-checked",
        vec![rule("ip", "ip", 2, 60)],
        json!("preset"),
    );
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(&site.config_path).unwrap()).unwrap();
    cfg["max_file_bytes"] = json!(10_000_000_000u64);
    site.write_config(&cfg);
    let api = &site.provider;
    api.route("POST", RD_CHECK, checked(12_400_000_000));
    api.route("POST", RD_CALL, answer(12_400_000_000));
    for i in 0..3 {
        let out = ask(
            &site,
            &format!("https://hoster.example/t/{i}"),
            "203.0.113.50",
        );
        too_large_12_4_gb(&out);
        assert!(
            out.stderr.contains("refused before any paid call"),
            "{}",
            out.stderr
        );
    }
    // No paid call, and the visitor's limit (2 a minute) given back each time.
    assert_eq!(paid(&site), 0);
}

/// A visitor refused again and again by its own rule of bytes before paying (the free check
/// gave a size over what is left) reaches `auto_block` as with any refusal of its own.
#[test]
fn refusals_of_a_visitors_bytes_before_paying_count_towards_auto_block() {
    let site = Site::builder("bytes-auto-block")
        .provider(Provider::builder().routes_only().start())
        .provider_section(|api| {
            json!({"preset": "realdebrid", "token": TOKEN, "base_url": api.url(RD_BASE),
                   "hosts": null, "account": null})
        })
        .rules(vec![
            rule("ip", "ip", 1000, 60),
            json!({"name": "ip-bytes", "key": "ip", "unit": "bytes", "limit": 1_000_000,
                   "window_secs": 86400}),
        ])
        .config(|c| {
            c["auto_block"] = json!({"refusals": 3, "window_secs": 600, "block_secs": 3600});
        })
        .write();
    let api = &site.provider;
    // Each file is 2 MB: over the visitor's 1 MB a day, known before paying.
    api.route("POST", RD_CHECK, checked(2_000_000));
    api.route("POST", RD_CALL, answer(2_000_000));
    let visitor = "203.0.113.70";
    for i in 0..3 {
        let out = ask(&site, &format!("https://hoster.example/a/{i}"), visitor);
        assert_eq!(
            status_code(&out),
            (429, "rate_limited".to_owned()),
            "{}",
            out.describe()
        );
    }
    assert_eq!(paid(&site), 0, "refused before any paid call");
    let out = ask(&site, "https://hoster.example/a/3", visitor);
    assert_eq!(out.answer().status, 403, "blocked: {}", out.describe());
    let text = {
        let mut cmd = command(&["stats", "--json"]);
        cmd.arg("--config").arg(&site.config_path);
        let out = cmd.output().expect("run the binary");
        assert!(out.status.success(), "{}", output_text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let s: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(s["auto_blocks"], 1, "{s:#}");
}
