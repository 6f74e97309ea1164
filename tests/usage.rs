//! The owner's figures are exact: known traffic through Apache (admitted, refused by each rule,
//! cache hits, provider failures of each class, a spend refusal, a bad request), then
//! `resolve stats --json` and `resolve report` compared number by number, on every store.

mod support;

use serde_json::{Value, json};
use support::config::{TOKEN, rule};
use support::{MariaDb, Provider, Redis, Reply, Request, Site, binary};

/// The stand-in: `/ok-N` resolves, `/dead` is refused, `/auth` refuses the site's token,
/// `/busy` is a server error.
fn provider() -> Provider {
    Provider::start_with(Reply::with(|call| {
        let link = call.form("link").unwrap_or_default().to_owned();
        match link.rsplit('/').next().unwrap_or_default() {
            "dead" => Reply::json(404, json!({"error": "file not found"})),
            "auth" => Reply::json(401, json!({"error": "bad token"})),
            "busy" => Reply::json(503, json!({"error": "down"})),
            n => Reply::ok(json!({"download": format!("https://cdn.test/{n}"), "filename": "f"})),
        }
    }))
}

fn site(label: &str, store: Option<Value>) -> Site {
    let mut b = Site::builder(label)
        .provider(provider())
        .rules(vec![rule("ip", "ip", 4, 60), rule("all", "global", 12, 60)]);
    if let Some(store) = store {
        b = b.store(store);
    }
    b.config(|c| {
        c["spend"] = json!([{"name": "day", "limit": 6, "window_secs": 86400}]);
        c["cache"] = json!({"ttl_secs": 600});
        c["client"] = json!({"trusted_proxies": ["127.0.0.1"]});
    })
    .start()
}

/// One request from `client` for `link`; the status.
fn ask(site: &Site, client: &str, method: &str, link: &str) -> u16 {
    let target = format!(
        "/cgi-bin/resolve?link={}",
        support::urlenc::encode(&format!("https://host.example/{link}"))
    );
    let request = Request::new(method, &target)
        .header("Accept", "application/json")
        .header("X-Forwarded-For", client);
    site.client()
        .send(&request)
        .unwrap_or_else(|e| panic!("{method} {target}: {e}"))
        .status
}

/// The traffic whose figures every store must report.
fn drive(site: &Site) {
    let a = |c, link| ask(site, c, "GET", link);
    // 10.0.0.1: one paid call, three cache hits, two refused by `ip`.
    let statuses: Vec<u16> = (0..6).map(|_| a("10.0.0.1", "ok-1")).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 429, 429]);
    // 10.0.0.2: a dead link, the token refused, a server error, one resolved: four paid.
    assert_eq!(a("10.0.0.2", "dead"), 422);
    assert_eq!(a("10.0.0.2", "auth"), 502);
    assert_eq!(a("10.0.0.2", "busy"), 502);
    assert_eq!(a("10.0.0.2", "ok-2"), 200);
    // 10.0.0.3: the sixth paid call, then the budget refuses.
    assert_eq!(a("10.0.0.3", "ok-3"), 200);
    assert_eq!(a("10.0.0.3", "ok-4"), 503);
    // 10.0.0.4: not a link.
    let bad = site
        .client()
        .send(
            &Request::get("/cgi-bin/resolve?link=nope")
                .header("Accept", "application/json")
                .header("X-Forwarded-For", "10.0.0.4"),
        )
        .unwrap();
    assert_eq!(bad.status, 400);
    // 10.0.0.5: three HEADs, counted by the rules only (all: 12); 10.0.0.6 refused by `all`.
    for _ in 0..3 {
        assert_eq!(ask(site, "10.0.0.5", "HEAD", "ok-5"), 200);
    }
    assert_eq!(ask(site, "10.0.0.6", "HEAD", "ok-6"), 429);
    assert_eq!(
        site.provider.calls(),
        6,
        "six paid calls reached the stand-in"
    );
}

fn command(site: &Site, args: &[&str]) -> String {
    let out = std::process::Command::new(binary())
        .args(args)
        .arg("--config")
        .arg(&site.config_path)
        .env_remove("RESOLVE_CONFIG")
        .output()
        .expect("run resolve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `resolve stats --json` once the journal holds `requests` requests. Under FastCGI a process
/// writes its entries up to a second later (about two when idle): the figures are read until
/// they are all there, and at most 20 s.
fn stats_of(site: &Site, requests: u64) -> Value {
    let started = std::time::Instant::now();
    loop {
        let text = command(site, &["stats", "--json"]);
        let s: Value = serde_json::from_str(&text).expect("stats --json is JSON");
        if s["requests"].as_u64() == Some(requests)
            || started.elapsed() > std::time::Duration::from_secs(20)
        {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

fn expect_figures(site: &Site) {
    let s = stats_of(site, 17);
    let n = |field: &str| {
        s[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field}: {s:#}"))
    };
    assert_eq!(n("requests"), 17, "{s:#}");
    assert_eq!(n("admitted"), 12, "{s:#}");
    assert_eq!(n("paid_calls"), 6, "{s:#}");
    assert_eq!(n("cache_hits"), 3, "{s:#}");
    assert_eq!(n("paid_calls_saved"), 3);
    assert_eq!(n("refunds"), 0);
    assert_eq!(s["refused"], json!({"ip": 2, "all": 1}));
    assert_eq!(n("refused_total"), 3);
    assert_eq!(s["spend_refused"], json!({"day": 1}));
    assert_eq!(
        s["provider_failures"],
        json!({"rejected": 1, "auth": 1, "unavailable": 1})
    );
    assert_eq!(s["bad_requests"], json!({"bad_link": 1}), "{s:#}");
    assert_eq!(
        s["spend"],
        json!([{"name": "day", "limit": 6, "window_secs": 86400, "used": 6, "left": 0}])
    );
    let top = s["top_clients"].as_array().unwrap();
    assert_eq!(
        top[..2],
        [
            json!({"client": "10.0.0.1", "admitted": 4, "refused": 2}),
            json!({"client": "10.0.0.6", "admitted": 0, "refused": 1}),
        ]
    );
    assert_eq!(top.len(), 5, "every client with a count: {top:?}");
    assert_eq!(
        s["top_admitted"][0],
        json!({"client": "10.0.0.1", "admitted": 4, "refused": 2})
    );
    let per_hour: u64 = s["paid_per_hour"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["paid_calls"].as_u64().unwrap())
        .sum();
    assert_eq!(per_hour, 6);
    assert_eq!(s["paid_per_hour"].as_array().unwrap().len(), 24);
    let notes = s["action_needed"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let note = notes[0]["text"].as_str().unwrap();
    assert!(note.starts_with("ACTION NEEDED"), "{note}");
    assert!(!s.to_string().contains(TOKEN), "no secret in the figures");

    // The same in words, for people.
    let words = command(site, &["stats", "--since", "7d"]);
    for expected in [
        "Paid calls:        6",
        "Cache hits:        3 (paid calls saved)",
        "Refused (429):     3 (all 1, ip 2)",
        "Spend refusals:    1 (day 1)",
        "day: 6 of 6 per day used, 0 left",
        "10.0.0.1",
        "ACTION NEEDED: the provider refused the site's credentials",
    ] {
        assert!(words.contains(expected), "{expected:?} in\n{words}");
    }
    // Yesterday (UTC) had nothing: the report says so, and stays silent for cron... unless a
    // spend limit is used up now, which it is.
    let report = command(site, &["report", "--only-problems"]);
    assert!(
        report.starts_with("WARNING: spend limit \"day\" is at 100% (6 of 6 per day used now)"),
        "{report}"
    );
    assert!(!report.contains(TOKEN));
}

#[test]
fn file_store_figures_are_exact() {
    let site = site("usage-file", None);
    drive(&site);
    expect_figures(&site);
}

#[test]
fn mysql_store_figures_are_exact() {
    let db = MariaDb::start();
    let site = site(
        "usage-mysql",
        Some(json!({"kind": "mysql", "url": db.url()})),
    );
    drive(&site);
    expect_figures(&site);
}

#[test]
fn redis_store_figures_are_exact() {
    let redis = Redis::start();
    let site = site(
        "usage-redis",
        Some(json!({"kind": "redis", "url": redis.url()})),
    );
    drive(&site);
    expect_figures(&site);
}

/// A day without problems: the report for cron prints nothing with `--only-problems`, and
/// the summary without it.
#[test]
fn a_quiet_day_sends_no_mail() {
    let site = Site::builder("usage-quiet")
        .config(|c| c["spend"] = json!([{"name": "day", "limit": 100, "window_secs": 86400}]))
        .start();
    assert_eq!(ask(&site, "10.0.0.1", "GET", "ok-1"), 200);
    assert_eq!(command(&site, &["report", "--only-problems"]), "");
    let report = command(&site, &["report"]);
    assert!(report.starts_with("resolve: the day of "), "{report}");
    assert!(report.contains("ACTION NEEDED events on "), "{report}");
    let stats = stats_of(&site, 1);
    assert_eq!(stats["paid_calls"], 1);
    assert_eq!(stats["spend"][0]["used"], 1);
}
