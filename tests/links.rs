//! Several links in one request, through the binary run directly as CGI with a file store and
//! a provider stand-in that counts the paid calls: the `links` field and `link` repeated, each
//! link counted as a request of its own, duplicates served once, a bad link refused alone, a
//! cached link free, `request.max_links`, one link answered as one link always was, the list
//! as JSON and as text, the links served a few at once, and no link started that could not
//! end within the time of one request.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::config::rule;
use support::urlenc::encode;
use support::{Cgi, CgiOutput, Provider, Reply, Setup, Site};

fn site(label: &str, rules: Vec<Value>) -> Setup {
    site_with(label, rules, Provider::start(), |_| {})
}

fn site_with(
    label: &str,
    rules: Vec<Value>,
    provider: Provider,
    edit: impl FnOnce(&mut Value) + 'static,
) -> Setup {
    Site::builder(label)
        .provider(provider)
        .rules(rules)
        .config(edit)
        .write()
}

/// A POST of `links` (one a line) from `from`, answered as `accept`.
fn paste(site: &Setup, links: &[&str], from: &str, accept: &str) -> CgiOutput {
    site.run(
        Cgi::new("POST", "")
            .var("REMOTE_ADDR", from)
            .header("Accept", accept)
            .form(format!("links={}", encode(&links.join("\n"))))
            .timeout(Duration::from_secs(90)),
    )
}

fn json_of(out: &CgiOutput) -> Value {
    serde_json::from_slice(&out.answer().body)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", out.describe()))
}

fn states(answer: &Value) -> Vec<String> {
    answer["links"]
        .as_array()
        .unwrap_or_else(|| panic!("no list: {answer}"))
        .iter()
        .map(|l| l["state"].as_str().unwrap_or("?").to_owned())
        .collect()
}

fn parts(n: usize) -> Vec<String> {
    (1..=n)
        .map(|i| format!("https://hoster.example/f/file.part{i:02}.rar"))
        .collect()
}

#[test]
fn ten_part_links_with_five_left_give_five_links_and_five_waits_as_json_and_text() {
    let s = site("links-parts", vec![rule("per-minute", "ip", 5, 60)]);
    let parts = parts(10);
    let links: Vec<&str> = parts.iter().map(String::as_str).collect();
    let out = paste(&s, &links, "192.0.2.10", "application/json");
    let a = json_of(&out);
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    let st = states(&a);
    assert_eq!(st[..5], ["ready"; 5], "{a}");
    assert_eq!(st[5..], ["refused"; 5], "{a}");
    for l in &a["links"].as_array().unwrap()[5..] {
        assert_eq!(l["status"], 429, "{l}");
        assert!(
            l["retry_after"]
                .as_u64()
                .is_some_and(|w| (1..=60).contains(&w)),
            "{l}"
        );
    }
    assert_eq!(a["counts"]["ready"], 5);
    assert_eq!(a["allowance"][0]["words"], "0 of 5 left this minute");
    assert_eq!(s.provider.calls(), 5, "paid calls");
    assert!(
        out.answer()
            .header("RateLimit")
            .is_some_and(|v| v.contains("r=0")),
        "{}",
        out.describe()
    );

    // The same as text, from another address: a line per link, then what is left.
    let out = paste(&s, &links[..3], "192.0.2.11", "text/plain");
    let text = out.answer().text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[0]
            .starts_with("ready https://hoster.example/f/file.part01.rar https://cdn.test/file/"),
        "{text}"
    );
    assert_eq!(lines[3], "2 of 5 left this minute.", "{text}");
}

#[test]
fn link_repeated_is_a_list_too_each_link_once_a_bad_one_refused_alone() {
    let s = site("links-repeated", vec![rule("per-minute", "ip", 10, 60)]);
    let query = [
        "https://hoster.example/a",
        "ftp://hoster.example/b",
        "https://hoster.example/a",
        "https://hoster.example/c",
    ]
    .iter()
    .map(|l| format!("link={}", encode(l)))
    .collect::<Vec<_>>()
    .join("&");
    let out = s.run(
        Cgi::new("GET", &query)
            .var("REMOTE_ADDR", "192.0.2.20")
            .header("Accept", "application/json"),
    );
    let a = json_of(&out);
    assert_eq!(states(&a), ["ready", "refused", "ready"], "{a}");
    assert_eq!(a["links"][1]["code"], "bad_link", "{a}");
    assert_eq!(a["links"][1]["status"], 400, "{a}");
    assert_eq!(
        s.provider.calls(),
        2,
        "the duplicate is served once, the bad link never"
    );
}

#[test]
fn a_cached_link_costs_nothing() {
    let s = site_with(
        "links-cached",
        vec![rule("per-minute", "ip", 10, 60)],
        Provider::start(),
        |c| c["cache"] = json!({"ttl_secs": 600}),
    );
    let first = ["https://hoster.example/1", "https://hoster.example/2"];
    assert_eq!(
        states(&json_of(&paste(
            &s,
            &first,
            "192.0.2.30",
            "application/json"
        ))),
        ["ready", "ready"]
    );
    assert_eq!(s.provider.calls(), 2);
    let again = [first[0], first[1], "https://hoster.example/3"];
    let a = json_of(&paste(&s, &again, "192.0.2.31", "application/json"));
    assert_eq!(states(&a), ["ready", "ready", "ready"], "{a}");
    assert_eq!(
        (
            a["links"][0]["cache"].as_str(),
            a["links"][2]["cache"].as_str()
        ),
        (Some("hit"), Some("miss")),
        "{a}"
    );
    assert_eq!(s.provider.calls(), 3, "only the new link is paid for");
}

#[test]
fn more_links_than_max_links_are_refused_before_anything_is_counted() {
    let s = site_with(
        "links-max",
        vec![rule("per-minute", "ip", 10, 60)],
        Provider::start(),
        |c| c["request"] = json!({"max_links": 3}),
    );
    let parts = parts(4);
    let links: Vec<&str> = parts.iter().map(String::as_str).collect();
    let out = paste(&s, &links, "192.0.2.40", "application/json");
    let a = json_of(&out);
    assert_eq!(
        (out.answer().status, a["code"].as_str()),
        (400, Some("too_many_links")),
        "{a}"
    );
    assert!(
        a["detail"].as_str().unwrap_or("").contains("at most 3"),
        "{a}"
    );
    assert_eq!(s.provider.calls(), 0);
    // Three are served; nothing was counted by the refused list.
    let a = json_of(&paste(&s, &links[..3], "192.0.2.40", "application/json"));
    assert_eq!(
        a["allowance"][0]["words"], "7 of 10 left this minute",
        "{a}"
    );
}

#[test]
fn one_link_in_the_links_field_is_answered_as_one_link() {
    let s = site("links-one", vec![rule("per-minute", "ip", 10, 60)]);
    let out = paste(
        &s,
        &["https://hoster.example/x", "https://hoster.example/x"],
        "192.0.2.50",
        "application/json",
    );
    let a = json_of(&out);
    assert_eq!(out.answer().status, 200);
    assert!(
        a["download"]
            .as_str()
            .is_some_and(|d| d.starts_with("https://cdn.test/file/")),
        "{a}"
    );
    assert!(a.get("links").is_none(), "{a}");
}

#[test]
fn links_are_served_four_at_a_time() {
    let provider = Provider::start_with(Reply::Default.after(Duration::from_millis(1500)));
    let s = site_with(
        "links-parallel",
        vec![rule("per-minute", "ip", 20, 60)],
        provider,
        |_| {},
    );
    let parts = parts(8);
    let links: Vec<&str> = parts.iter().map(String::as_str).collect();
    let out = paste(&s, &links, "192.0.2.60", "application/json");
    let a = json_of(&out);
    assert_eq!(states(&a), ["ready"; 8], "{a}");
    let took = out.answer().program_took();
    eprintln!("8 links of 1.5 s each, 4 at once: {} ms", took.as_millis());
    // One after the other would take 12 s; four at a time, two rounds of 1.5 s.
    assert!(took >= Duration::from_millis(2900), "{took:?}");
    assert!(took < Duration::from_secs(8), "{took:?}");
    assert_eq!(s.provider.calls(), 8);
}

#[test]
fn no_link_starts_that_could_not_end_in_time() {
    // A provider's deadline as long as one request may take: only the first round starts.
    let provider = Provider::start_with(Reply::Default.after(Duration::from_millis(300)));
    let s = site_with(
        "links-budget",
        vec![rule("per-minute", "ip", 20, 60)],
        provider,
        |c| c["provider"]["deadline_ms"] = json!(55_000),
    );
    let parts = parts(6);
    let links: Vec<&str> = parts.iter().map(String::as_str).collect();
    let a = json_of(&paste(&s, &links, "192.0.2.70", "application/json"));
    assert_eq!(
        states(&a),
        ["ready", "ready", "ready", "ready", "not_tried", "not_tried"],
        "{a}"
    );
    assert_eq!(a["links"][4]["code"], "not_tried");
    assert_eq!(s.provider.calls(), 4);
    assert_eq!(
        a["allowance"][0]["words"], "16 of 20 left this minute",
        "nothing counted for them: {a}"
    );
}

/// AllDebrid's public host list (docs.alldebrid.com, "Hosts": `GET /v4/hosts/domains`).
const AD_DOMAINS: &str = "/v4/hosts/domains";
const AD_UNLOCK: &str = "/v4.1/link/unlock";

#[test]
fn the_supported_hosts_come_from_the_kept_list_and_cost_no_call() {
    let s = Site::builder("links-hosts")
        .provider(Provider::builder().routes_only().start())
        .provider_section(|api| {
            json!({"preset": "alldebrid", "token": support::config::TOKEN, "base_url": api.url(""),
                   "link_check": null, "account": null,
                   "hosts": {"url": "{base}/v4/hosts/domains", "lists": ["/data/hosts", "/data/streams"]}})
        })
        .rules(vec![
            rule("per-minute", "ip", 1, 60),
            json!({"name": "daily-bytes", "key": "ip", "unit": "bytes", "limit": 20_000_000_000u64, "window_secs": 86400}),
        ])
        .write();
    let api = &s.provider;
    api.route(
        "GET",
        AD_DOMAINS,
        Reply::ok(json!({"status": "success", "data": {
            "hosts": ["rapidgator.net", "mega.nz"], "streams": ["youtube.com"]
        }})),
    );
    api.route(
        "POST",
        AD_UNLOCK,
        Reply::ok(json!({"status": "success", "data": {"link": "https://a1.debrid.it/dl/x/f.zip", "filename": "f.zip"}})),
    );
    let hosts = |from: &str| {
        let out = s.run(Cgi::new("GET", "hosts=1").var("REMOTE_ADDR", from));
        assert_eq!(out.answer().status, 200, "{}", out.describe());
        (
            out.answer().header("Cache-Control").map(str::to_owned),
            json_of(&out),
        )
    };
    // No list kept yet: none is fetched for this question.
    let (cache, a) = hosts("192.0.2.80");
    assert_eq!(a["hosts"], json!([]), "{a}");
    assert_ne!(
        cache.as_deref(),
        Some("public, max-age=300"),
        "an empty list is not kept"
    );
    assert_eq!(a["fetched_at"], Value::Null);
    assert_eq!(api.calls(), 0, "asking costs no call of any kind");
    assert_eq!(
        a["rules"],
        json!([{"name": "per-minute", "unit": "requests", "limit": 1, "window_secs": 60},
               {"name": "daily-bytes", "unit": "bytes", "limit": 20_000_000_000u64, "window_secs": 86400}])
    );
    // A link paid for fetches the list before paying, as it always did; then it is listed.
    let out = s.run(
        Cgi::new(
            "GET",
            support::urlenc::link_param("https://mega.nz/file/abc"),
        )
        .var("REMOTE_ADDR", "192.0.2.80")
        .header("Accept", "application/json"),
    );
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    let calls = api.calls();
    let (cache, a) = hosts("192.0.2.80");
    assert_eq!(cache.as_deref(), Some("public, max-age=300"));
    assert_eq!(
        a["hosts"],
        json!(["mega.nz", "rapidgator.net", "youtube.com"]),
        "{a}"
    );
    assert!(
        a["fetched_at"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{a}"
    );
    // The visitor is over the limit now: still answered, still no call, nothing counted.
    for _ in 0..3 {
        hosts("192.0.2.80");
    }
    assert_eq!(api.calls(), calls);
}

/// A provider whose paid work may outlast the request: `create` starts a job, `status` is
/// polled (500 ms apart, 1.2 s in all) until `done`.
fn job_provider(api: &Provider) -> Value {
    json!({
        "kind": "http", "token": "t0k3n-job", "base_url": api.url("/api"),
        "connect_timeout_ms": 500, "timeout_ms": 1000, "deadline_ms": 1200,
        "steps": [
            {"method": "POST", "url": "{base}/create", "form": {"link": "{link}"},
             "extract": {"id": "/id"}},
            {"method": "GET", "url": "{base}/status", "query": {"id": "{id}"},
             "poll": {"interval_ms": 500, "until": {"pointer": "/done", "equals": true},
                      "progress": {"pointer": "/progress", "unit": "fraction"}},
             "extract": {"download": "/link", "filename": "/name"}}
        ]
    })
}

#[test]
fn a_long_job_is_pending_for_its_own_link_only_and_is_joined_when_asked_again() {
    let api = Provider::builder().routes_only().start();
    api.route(
        "POST",
        "/api/create",
        Reply::with(|c| {
            let slow = c.form("link").is_some_and(|l| l.ends_with("/slow"));
            Reply::ok(json!({"id": if slow { 2 } else { 1 }}))
        }),
    );
    api.route(
        "GET",
        "/api/status",
        Reply::with(|c| match c.query("id") {
            Some("1") => Reply::ok(
                json!({"done": true, "link": "https://dl.example/fast", "name": "fast.bin"}),
            ),
            _ => Reply::ok(json!({"done": false, "progress": 0.4})),
        }),
    );
    let s = site_with(
        "links-job",
        vec![rule("per-minute", "ip", 10, 60)],
        api,
        |_| {},
    );
    let section = job_provider(&s.provider);
    s.edit_config(move |c| c["provider"] = section);
    let out = paste(
        &s,
        &["https://hoster.example/fast", "https://hoster.example/slow"],
        "192.0.2.90",
        "application/json",
    );
    let a = json_of(&out);
    assert_eq!(states(&a), ["ready", "pending"], "{a}");
    assert_eq!(a["links"][0]["download"], "https://dl.example/fast");
    let pending = &a["links"][1];
    assert_eq!(pending["status"], 202, "{a}");
    assert!(
        pending["retry_after"].as_u64().is_some_and(|s| s >= 1),
        "{a}"
    );
    let poll = pending["poll"]
        .as_str()
        .expect("where to ask again")
        .to_owned();
    let query = poll.split_once('?').expect("a query").1.to_owned();
    assert_eq!(
        query,
        format!("link={}", encode("https://hoster.example/slow"))
    );
    assert_eq!(s.provider.calls_to("POST", "/api/create"), 2);
    // Asked again at its own address: the same job, nothing more paid; then its link.
    let again = |expect: u16| {
        let out = s.run(
            Cgi::new("GET", &query)
                .var("REMOTE_ADDR", "192.0.2.90")
                .header("Accept", "application/json"),
        );
        assert_eq!(out.answer().status, expect, "{}", out.describe());
        json_of(&out)
    };
    again(202);
    s.provider.route(
        "GET",
        "/api/status",
        Reply::ok(json!({"done": true, "link": "https://dl.example/slow", "name": "slow.bin"})),
    );
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(again(200)["download"], "https://dl.example/slow");
    assert_eq!(
        s.provider.calls_to("POST", "/api/create"),
        2,
        "joined, never paid again"
    );
}

#[test]
fn the_sites_spend_limit_and_a_rule_of_bytes_count_each_link_too() {
    let s = site_with(
        "links-spend",
        vec![
            rule("per-minute", "ip", 20, 60),
            json!({"name": "daily-bytes", "key": "ip", "unit": "bytes", "limit": 20_000_000_000u64, "window_secs": 86400}),
        ],
        Provider::start(),
        |c| c["spend"] = json!([{"name": "site-day", "limit": 3, "window_secs": 86400}]),
    );
    let parts = parts(5);
    let links: Vec<&str> = parts.iter().map(String::as_str).collect();
    let a = json_of(&paste(&s, &links, "192.0.2.100", "application/json"));
    let entries = a["links"].as_array().expect("a list");
    let ready = entries.iter().filter(|l| l["state"] == "ready").count();
    let spent: Vec<&Value> = entries
        .iter()
        .filter(|l| l["code"] == "spend_limit")
        .collect();
    assert_eq!((ready, spent.len()), (3, 2), "{a}");
    for l in &spent {
        assert_eq!(
            (l["state"].as_str(), l["status"].as_u64()),
            (Some("refused"), Some(503)),
            "{l}"
        );
        assert!(l["retry_after"].as_u64().is_some_and(|w| w > 0), "{l}");
    }
    assert_eq!(s.provider.calls(), 3, "the site's limit holds link by link");
    let words: Vec<&str> = a["allowance"]
        .as_array()
        .expect("allowance")
        .iter()
        .filter_map(|r| r["words"].as_str())
        .collect();
    assert!(words.contains(&"20 GB of 20 GB left today"), "{a}");
}
