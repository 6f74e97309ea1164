//! The owner's figures are exact: known traffic through Apache (admitted, refused by each rule,
//! cache hits, a provider failure of every class, a refund, a spend refusal, a bad request),
//! then `resolve stats --json`, the text form, the dashboard and `resolve report` compared
//! number by number, on every store. Yesterday's report reads the same traffic again, moved a
//! day back through the store's own `journal_add`: the program has no clock to move.
//!
//! Beside them: `--since` from the command line (tests/usage/since.rs), and a journal that
//! cannot be written changing no answer and logged once (tests/usage/failing.rs).

mod support;

#[path = "usage/dashboard.rs"]
mod dashboard;
#[path = "usage/failing.rs"]
mod failing;
#[path = "usage/since.rs"]
mod since;
#[path = "usage/yesterday.rs"]
mod yesterday;

use resolve::store::roles::Store;
use serde_json::{Value, json};
use std::os::unix::process::CommandExt;
use support::config::{TOKEN, http_provider, rule};
use support::delay_proxy::Mode as ProxyMode;

use support::system::{give_to_server_user, server_user};
use support::{DelayProxy, MariaDb, Provider, Redis, Reply, Request, Site, binary};

/// The dashboard's password in every site of these tests.
pub const PASSWORD: &str = "a password for the usage tests";

/// Every provider failure class the program knows that an answer of the provider makes, the
/// stand-in's link for it (`https://host.example/fail/CLASS`) and the status the visitor gets.
/// The fifteenth class, `unreachable`, is no answer at all: the proxy in front refuses the
/// connection.
pub const FAILURES: [(&str, u16); 14] = [
    ("dead_link", 422),
    ("unsupported", 422),
    ("password", 422),
    ("rejected", 422),
    ("temporary", 503),
    ("rate_limit", 503),
    ("quota", 503),
    ("auth", 502),
    ("unavailable", 502),
    ("bad_answer", 502),
    ("timeout", 504),
    ("secret_in_answer", 502),
    ("server_refused", 502),
    ("plan", 502),
];

/// The spend limit of a day in these sites: the paid calls of `drive` (two links, a failure of
/// each class, one more), so that its last paid link uses it up.
const SPEND: usize = FAILURES.len() + 3;

/// The stand-in's answer for the link `fail/CLASS`, in the words a provider would use.
fn failure_reply(class: &str) -> Option<Reply> {
    Some(match class {
        "dead_link" => Reply::json(404, json!({"error": "gone", "code": "DEAD"})),
        "unsupported" => Reply::json(400, json!({"error": "unknown host", "code": "NOHOST"})),
        "password" => Reply::json(400, json!({"error": "locked", "code": "PASSWORD"})),
        "rejected" => Reply::json(404, json!({"error": "file not found"})),
        "temporary" => Reply::json(503, json!({"error": "host down", "code": "HOSTDOWN"})),
        "rate_limit" => Reply::json(429, json!({"error": "slow down"})),
        "quota" => Reply::json(403, json!({"error": "no traffic left", "code": "QUOTA"})),
        "auth" => Reply::json(401, json!({"error": "bad token"})),
        "server_refused" => {
            Reply::json(403, json!({"error": "ip not allowed", "code": "NOSERVER"}))
        }
        "plan" => Reply::json(403, json!({"error": "not premium", "code": "NOTPREMIUM"})),
        "unavailable" => Reply::json(503, json!({"error": "down"})),
        "bad_answer" => Reply::raw(200, "text/html", "<h1>Maintenance</h1>"),
        "timeout" => Reply::Hang,
        "secret_in_answer" => Reply::ok(json!({
            "download": format!("https://cdn.test/file?key={TOKEN}"), "filename": "f"
        })),
        _ => return None,
    })
}

/// The stand-in: `fail/CLASS` fails as `failure_reply` says, anything else resolves.
fn provider() -> Provider {
    Provider::start_with(Reply::with(|call| {
        let link = call.form("link").unwrap_or_default().to_owned();
        let last = link.rsplit('/').next().unwrap_or_default();
        match link
            .contains("/fail/")
            .then(|| failure_reply(last))
            .flatten()
        {
            Some(reply) => reply,
            None => {
                Reply::ok(json!({"download": format!("https://cdn.test/{last}"), "filename": "f"}))
            }
        }
    }))
}

/// A site under test with the proxy between it and the stand-in.
pub struct Figured {
    pub site: Site,
    pub proxy: DelayProxy,
}

/// The site whose figures are checked: `ip` 4 and `all` 24 a minute, a spend limit of 17 a
/// day, the cache, the dashboard, and the stand-in behind a proxy (which can refuse
/// connections), with the error codes that make each class.
pub fn site(label: &str, store: Option<Value>) -> Figured {
    site_with(
        label,
        store,
        vec![
            rule("ip", "ip", 4, 60),
            rule("all", "global", SPEND as u64 + 7, 60),
        ],
    )
}

/// The same with these rules.
pub fn site_with(label: &str, store: Option<Value>, rules: Vec<Value>) -> Figured {
    let stand_in = provider();
    let proxy = DelayProxy::start(stand_in.addr());
    let url = format!("http://{}/unrestrict", proxy.addr());
    let hash = support::dashboard::password_hash(PASSWORD);
    let mut b = Site::builder(label)
        .provider(stand_in)
        .provider_section(move |_| {
            let mut p = http_provider(&url);
            p["error_code"] = json!("/code");
            p["error_message"] = json!("/error");
            p["errors"] = json!({
                "dead_link": ["DEAD"], "unsupported": ["NOHOST"], "password": ["PASSWORD"],
                "temporary": ["HOSTDOWN"], "quota": ["QUOTA"],
                "server_refused": ["NOSERVER"], "plan": ["NOTPREMIUM"]
            });
            p["connect_timeout_ms"] = json!(1000);
            p["timeout_ms"] = json!(1500);
            p
        })
        .rules(rules);
    if let Some(store) = store {
        b = b.store(store);
    }
    let site = b
        .config(move |c| {
            c["spend"] = json!([{"name": "day", "limit": SPEND, "window_secs": 86400}]);
            c["cache"] = json!({"ttl_secs": 600});
            c["client"] = json!({"trusted_proxies": ["127.0.0.1"]});
            c["admin"] = json!({ "password_hash": hash });
        })
        .start();
    // The site's account owns the directory of its configuration, as it owns its home: the
    // data directory of a MySQL or Redis store (`ratelimit/` beside the configuration) is
    // made there when first needed.
    give_to_server_user(site.dir.path());
    Figured { site, proxy }
}

/// One request from `client` for `https://host.example/LINK`; the status.
pub fn ask(site: &Site, client: &str, method: &str, link: &str) -> u16 {
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
fn drive(f: &Figured) {
    let site = &f.site;
    let a = |c: &str, link: &str| ask(site, c, "GET", link);
    // 10.0.0.1: one paid call, three cache hits, two refused by `ip`; 10.0.0.2: one paid call.
    let statuses: Vec<u16> = (0..6).map(|_| a("10.0.0.1", "ok-1")).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 429, 429]);
    assert_eq!(a("10.0.0.2", "ok-2"), 200);
    // A failure of each class, each from a client of its own: fourteen paid calls.
    for (i, (class, status)) in FAILURES.iter().enumerate() {
        let client = format!("10.0.1.{}", i + 1);
        assert_eq!(a(&client, &format!("fail/{class}")), *status, "{class}");
    }
    // No connection at all: not paid, and the spend limit gets its count back.
    f.proxy.set_mode(ProxyMode::Refuse);
    assert_eq!(a("10.0.1.99", "ok-unreachable"), 502);
    f.proxy.set_mode(ProxyMode::Forward);
    // 10.0.0.3: the seventeenth paid call, then the budget refuses.
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
    // 10.0.0.5: three HEADs, counted by the rules only (all: 24); 10.0.0.6 refused by `all`.
    for _ in 0..3 {
        assert_eq!(ask(site, "10.0.0.5", "HEAD", "ok-5"), 200);
    }
    assert_eq!(ask(site, "10.0.0.6", "HEAD", "ok-6"), 429);
    assert_eq!(
        site.provider.calls(),
        SPEND,
        "seventeen paid calls reached the stand-in"
    );
}

/// `resolve ARGS --config` the site's configuration: its standard output, or a panic with its
/// standard error.
pub fn command(site: &support::Setup, args: &[&str]) -> String {
    let out = run(site, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `resolve ARGS --config` the site's configuration, whatever comes of it: run by the account
/// the site's requests run as (the server's when the tests run as root), as its owner would,
/// so that the files it makes in the file store are the site's own.
pub fn run(site: &support::Setup, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(binary());
    command
        .args(args)
        .arg("--config")
        .arg(&site.config_path)
        .env_remove("RESOLVE_CONFIG");
    if let Some(u) = server_user() {
        command.uid(u.uid).gid(u.gid);
    }
    command.output().expect("run resolve")
}

/// The site's store, opened through the library as the program opens it. What `change` does
/// through it is done by this process; the files it leaves in the data directory are given to
/// the site's account afterwards, as if the site had made them.
pub fn through_the_store<T>(site: &support::Setup, change: impl FnOnce(&Store) -> T) -> T {
    let text = std::fs::read_to_string(&site.config_path).expect("the configuration");
    let base = site.config_path.parent().expect("its directory");
    let config = resolve::config::Config::from_json(&text, base).expect("a valid configuration");
    let out = change(&resolve::site::open::from_config(
        &config,
        &resolve::support::log::Context::default(),
    ));
    for path in support::temp::entries_under(&site.data) {
        give_to_server_user(&path);
    }
    out
}

/// `resolve stats --json` (the last 24 hours).
pub fn stats_json(site: &support::Setup) -> Value {
    serde_json::from_str(&command(site, &["stats", "--json"])).expect("stats --json is JSON")
}

/// `resolve stats --json` once the journal holds `requests` requests. Under FastCGI a process
/// writes its entries up to a second later (about two when idle): the figures are read until
/// they are all there, and at most 20 s.
pub fn stats_of(site: &support::Setup, requests: u64) -> Value {
    let started = std::time::Instant::now();
    loop {
        let s = stats_json(site);
        if s["requests"].as_u64() == Some(requests)
            || started.elapsed() > std::time::Duration::from_secs(20)
        {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

fn expect_figures(site: &Site) {
    let s = stats_of(site, 29);
    let n = |field: &str| {
        s[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field}: {s:#}"))
    };
    assert_eq!(n("requests"), 29, "{s:#}");
    assert_eq!(n("admitted"), 24, "{s:#}");
    assert_eq!(n("paid_calls"), 17, "{s:#}");
    assert_eq!(n("cache_hits"), 3, "{s:#}");
    assert_eq!(n("paid_calls_saved"), 3);
    assert_eq!(n("refunds"), 1, "the refused connection was refunded");
    assert_eq!(s["refused"], json!({"ip": 2, "all": 1}));
    assert_eq!(n("refused_total"), 3);
    assert_eq!(s["spend_refused"], json!({"day": 1}));
    let mut failures: serde_json::Map<String, Value> = FAILURES
        .iter()
        .map(|(class, _)| ((*class).to_owned(), json!(1)))
        .collect();
    failures.insert("unreachable".into(), json!(1));
    assert_eq!(s["provider_failures"], Value::Object(failures), "{s:#}");
    assert_eq!(s["bad_requests"], json!({"bad_link": 1}), "{s:#}");
    assert_eq!(
        s["spend"],
        json!([{"name": "day", "limit": 17, "window_secs": 86400, "used": 17, "left": 0}])
    );
    let top = s["top_clients"].as_array().unwrap();
    assert_eq!(
        top[..4],
        [
            json!({"client": "10.0.0.1", "admitted": 4, "refused": 2}),
            json!({"client": "10.0.0.6", "admitted": 0, "refused": 1}),
            json!({"client": "10.0.0.5", "admitted": 3, "refused": 0}),
            json!({"client": "10.0.0.2", "admitted": 1, "refused": 0}),
        ]
    );
    assert_eq!(top.len(), 10, "the top ten of 20 clients: {top:?}");
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
    assert_eq!(per_hour, 17);
    assert_eq!(s["paid_per_hour"].as_array().unwrap().len(), 24);
    // The same by day: the day or two the last 24 hours touch add up to the period.
    let days = s["per_day"].as_array().unwrap();
    for field in [
        "requests",
        "admitted",
        "paid_calls",
        "cache_hits",
        "refunds",
    ] {
        let sum: u64 = days.iter().map(|d| d[field].as_u64().unwrap()).sum();
        assert_eq!(sum, n(field), "{field} by day: {days:?}");
    }
    let notes = s["action_needed"].as_array().unwrap();
    let texts: Vec<&str> = notes.iter().map(|n| n["text"].as_str().unwrap()).collect();
    assert_eq!(texts.len(), 5, "{texts:?}");
    // Newest first: the provider not reached, the plan, the server's address, the
    // credentials, the quota.
    assert!(texts[0].starts_with("ACTION NEEDED: the provider could not be reached"));
    assert!(texts[1].starts_with("ACTION NEEDED: the provider account's plan does not cover"));
    assert!(texts[2].starts_with("ACTION NEEDED: the provider refuses calls from this server's"));
    assert!(texts[3].starts_with("ACTION NEEDED: the provider refused the site's credentials"));
    assert!(texts[4].starts_with("ACTION NEEDED: the provider account has no quota left"));
    assert!(!s.to_string().contains(TOKEN), "no secret in the figures");

    // The same in words, for people.
    let words = command(site, &["stats", "--since", "7d"]);
    for expected in [
        "Paid calls:        17",
        "Cache hits:        3 (paid calls saved)",
        "Refunds:           1 (calls that never reached the provider)",
        "Refused (429):     3 (all 1, ip 2)",
        "Spend refusals:    1 (day 1)",
        "Provider failures: 15 (auth 1, bad_answer 1, dead_link 1, password 1, plan 1, quota 1, \
         rate_limit 1, rejected 1, secret_in_answer 1, server_refused 1, temporary 1, timeout 1, \
         unavailable 1, unreachable 1, unsupported 1)",
        "day: 17 of 17 per day used, 0 left",
        "10.0.0.1",
        "ACTION NEEDED: the provider refused the site's credentials",
        "Per day (UTC):",
    ] {
        assert!(words.contains(expected), "{expected:?} in\n{words}");
    }
    assert!(!words.contains(TOKEN));
}

/// Everything an owner is shown, for the traffic of `drive`.
fn expect_everything(f: &Figured) {
    expect_figures(&f.site);
    dashboard::expect_the_figures_of_stats(&f.site);
    yesterday::expect_the_report_of(&f.site);
}

/// `drive`'s traffic on a site with a store of `kind` at `url` (None: the file store), then
/// everything shown.
fn figures_are_exact(kind: &str, url: Option<String>) {
    let store = url.map(|url| json!({"kind": kind, "url": url}));
    let f = site(&format!("usage-{kind}"), store);
    drive(&f);
    expect_everything(&f);
}

/// The sum of an object's counts.
pub fn sum(counts: &Value) -> u64 {
    counts
        .as_object()
        .expect("an object")
        .values()
        .map(|n| n.as_u64().expect("a count"))
        .sum()
}

#[test]
fn file_store_figures_are_exact() {
    figures_are_exact("file", None);
}

#[test]
fn mysql_store_figures_are_exact() {
    let db = MariaDb::start();
    figures_are_exact("mysql", Some(db.url()));
}

#[test]
fn redis_store_figures_are_exact() {
    let redis = Redis::start();
    figures_are_exact("redis", Some(redis.url()));
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
