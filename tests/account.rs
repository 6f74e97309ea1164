//! The owner's account, read once a day: the binary run directly as a CGI program (and as
//! `resolve report`) against a stand-in of Real-Debrid's API on loopback that counts calls.
//! An admitted request reads the account once, a second within the day does not, a refused
//! request never does, a failed reading waits an hour, and the token is in neither the kept
//! reading nor the log.

mod support;

use serde_json::{Value, json};
use support::config::{TOKEN, rule};
use support::system::{command, now_ms, output_text};
use support::urlenc::link_param;
use support::{Cgi, CgiOutput, Provider, Reply, Setup};

const USER: &str = "/rest/1.0/user";
const UNRESTRICT: &str = "/rest/1.0/unrestrict/link";
const LINK: &str = "https://rapidgator.net/file/abc";

/// A stand-in of Real-Debrid whose `GET /user` answers `user`.
fn realdebrid(user: Reply) -> Provider {
    let api = Provider::builder().routes_only().start();
    api.route(
        "POST",
        UNRESTRICT,
        Reply::ok(json!({"download": "https://dl.example/d/f.bin", "filename": "f.bin"})),
    );
    api.route("GET", USER, user);
    api
}

/// Real-Debrid's user schema for a premium account ending in `days` days (and a few hours).
fn premium_for(days: u64) -> Reply {
    let until = now_ms() / 1000 + days * 86_400 + 4 * 3600;
    Reply::ok(json!({
        "id": 7, "username": "owner", "email": "owner@example.org", "points": 10,
        "locale": "en", "avatar": "", "type": "premium", "premium": days * 86_400 + 4 * 3600,
        "expiration": iso(until),
    }))
}

/// `2026-12-11T20:00:00.000Z` for seconds since 1970.
fn iso(secs: u64) -> String {
    // The date by the same arithmetic as a civil calendar: days since 1970 to y-m-d.
    let days = (secs / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.000Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn site(label: &str, api: Provider, limit: u64) -> Setup {
    Setup::builder(label)
        .provider(api)
        .provider_section(|api| {
            json!({"preset": "realdebrid", "token": TOKEN, "base_url": api.url("/rest/1.0"),
                   "hosts": null, "link_check": null})
        })
        .rules(vec![rule("ip", "ip", limit, 3600)])
        .write()
}

fn ask(site: &Setup, from: &str) -> CgiOutput {
    site.run(
        Cgi::new("GET", link_param(LINK))
            .var("REMOTE_ADDR", from)
            .header("Accept", "application/json"),
    )
}

fn kept(site: &Setup) -> Option<(String, Value)> {
    let text = std::fs::read_to_string(site.data.join("account.json")).ok()?;
    let v = serde_json::from_str(&text).expect("the kept reading is JSON");
    Some((text, v))
}

#[test]
fn an_admitted_request_reads_the_account_once_a_day() {
    let site = site("account-once", realdebrid(premium_for(4)), 100);
    let first = ask(&site, "127.0.0.2");
    assert_eq!(first.answer().status, 200, "{}", first.describe());
    assert_eq!(site.provider.calls_to("GET", USER), 1);
    let call = &site.provider.requests_to("GET", USER)[0];
    assert_eq!(
        call.header("Authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    let (text, v) = kept(&site).expect("the reading is kept");
    assert_eq!(v["premium"], true, "{text}");
    assert!(v["premium_until"].as_str().is_some(), "{text}");
    assert!(!text.contains(TOKEN), "{text}");
    assert!(
        first
            .stderr
            .contains("ACTION NEEDED: the provider account's premium ends in 4 days"),
        "{}",
        first.describe()
    );
    assert!(!first.stderr.contains(TOKEN), "{}", first.describe());

    let second = ask(&site, "127.0.0.3");
    assert_eq!(second.answer().status, 200, "{}", second.describe());
    assert_eq!(
        site.provider.calls_to("GET", USER),
        1,
        "read once within the day"
    );
    assert_eq!(site.provider.calls_to("POST", UNRESTRICT), 2);

    // The daily report says so, from the kept reading, without reading it again.
    let out = command(&["report", "--only-problems", "--config"])
        .arg(&site.config_path)
        .output()
        .expect("run resolve report");
    let report = output_text(&out);
    assert!(out.status.success(), "{report}");
    assert!(
        report.starts_with("ACTION NEEDED: the provider account's premium ends in 4 days"),
        "{report}"
    );
    assert!(
        report.contains("Provider account: premium until "),
        "{report}"
    );
    assert!(!report.contains(TOKEN), "{report}");
    assert_eq!(site.provider.calls_to("GET", USER), 1);
}

#[test]
fn a_refused_request_never_reads_the_account() {
    let site = site("account-refused", realdebrid(premium_for(30)), 1);
    assert_eq!(ask(&site, "127.0.0.2").answer().status, 200);
    assert_eq!(site.provider.calls_to("GET", USER), 1);
    // The reading gone (due again), the client over its limit: refused, nothing read.
    std::fs::remove_file(site.data.join("account.json")).unwrap();
    let refused = ask(&site, "127.0.0.2");
    assert_eq!(refused.answer().status, 429, "{}", refused.describe());
    assert_eq!(site.provider.calls_to("GET", USER), 1);
    assert!(kept(&site).is_none());
    // A premium a month away is nothing to act on.
    assert!(
        !refused.stderr.contains("ACTION NEEDED"),
        "{}",
        refused.describe()
    );
}

#[test]
fn a_failed_reading_is_kept_with_its_reason_and_waits_an_hour() {
    let site = site(
        "account-failed",
        realdebrid(Reply::json(
            401,
            json!({"error": "bad_token", "error_code": 8}),
        )),
        100,
    );
    let first = ask(&site, "127.0.0.2");
    assert_eq!(first.answer().status, 200, "{}", first.describe());
    let (text, v) = kept(&site).expect("the failure is kept");
    assert_eq!(v["failed"], "the account call answered HTTP 401", "{text}");
    assert!(
        first
            .stderr
            .contains("the provider account could not be read: the account call answered HTTP 401"),
        "{}",
        first.describe()
    );
    assert_eq!(ask(&site, "127.0.0.3").answer().status, 200);
    assert_eq!(
        site.provider.calls_to("GET", USER),
        1,
        "not again within the hour"
    );
    let out = command(&["report", "--only-problems", "--config"])
        .arg(&site.config_path)
        .output()
        .expect("run resolve report");
    let report = output_text(&out);
    assert!(
        report.starts_with("WARNING: the provider account could not be read ("),
        "{report}"
    );
}

/// A stand-in of Premiumize whose account has spent 90% of its fair use.
fn premiumize() -> Provider {
    let api = Provider::builder().routes_only().start();
    api.route(
        "POST",
        "/api/transfer/directdl",
        Reply::ok(
            json!({"status": "success", "location": "https://dl.example/d/f.bin",
                         "filename": "f.bin", "filesize": 10}),
        ),
    );
    api.route(
        "GET",
        "/api/account/info",
        Reply::ok(json!({"status": "success", "customer_id": "1",
                         "premium_until": now_ms() / 1000 + 90 * 86_400,
                         "limit_used": 0.9, "space_used": 0})),
    );
    api
}

/// Three links from three clients against a spend limit of 4 a day: all paid, or the third
/// refused when the limit tightens past 80% of fair use (to 2 at 90% spent).
fn paid_of_three(tighten: Option<f64>) -> (Setup, Vec<u16>) {
    let site = Setup::builder("account-tighten")
        .provider(premiumize())
        .provider_section(|api| {
            json!({"preset": "premiumize", "token": TOKEN, "base_url": api.url("/api"),
                   "hosts": null})
        })
        .config(move |cfg| {
            cfg["spend"] = json!([{"name": "day", "limit": 4, "window_secs": 86400}]);
            if let Some(share) = tighten {
                cfg["account"] = json!({"tighten_spend_above": share});
            }
        })
        .write();
    let statuses = (2..5)
        .map(|n| ask(&site, &format!("127.0.0.{n}")).answer().status)
        .collect();
    (site, statuses)
}

#[test]
fn spend_limits_tighten_past_the_fair_use_share_only_when_asked() {
    let (site, statuses) = paid_of_three(None);
    assert_eq!(statuses, [200, 200, 200]);
    assert_eq!(site.provider.calls_to("POST", "/api/transfer/directdl"), 3);
    assert_eq!(site.provider.calls_to("GET", "/api/account/info"), 1);

    let (site, statuses) = paid_of_three(Some(0.8));
    assert_eq!(statuses, [200, 200, 503]);
    assert_eq!(site.provider.calls_to("POST", "/api/transfer/directdl"), 2);
    let third = ask(&site, "127.0.0.9");
    assert_eq!(third.answer().status, 503, "{}", third.describe());
    assert!(
        third
            .stderr
            .contains("site-wide limit day tightened to 2 paid calls per 86400 s"),
        "{}",
        third.describe()
    );
    assert_eq!(site.provider.calls_to("POST", "/api/transfer/directdl"), 2);
}

#[test]
fn without_an_account_section_nothing_is_read_or_written() {
    let site = Setup::builder("account-off")
        .provider(realdebrid(premium_for(2)))
        .provider_section(|api| {
            json!({"preset": "realdebrid", "token": TOKEN, "base_url": api.url("/rest/1.0"),
                   "hosts": null, "link_check": null, "account": null})
        })
        .write();
    let answer = ask(&site, "127.0.0.2");
    assert_eq!(answer.answer().status, 200, "{}", answer.describe());
    assert_eq!(site.provider.calls_to("GET", USER), 0);
    assert!(!site.data.join("account.json").exists());
    assert!(!site.data.join("account.lock").exists());
    assert!(!answer.stderr.contains("account"), "{}", answer.describe());
}

/// AllDebrid's `GET /v4/user` answer for an account that is not premium (the fields its
/// preset reads: `isPremium`, `premiumUntil`, `limitedHostersQuotas`).
fn alldebrid_free() -> Reply {
    Reply::ok(json!({"status": "success", "data": {"user": {
        "username": "owner", "email": "owner@example.org", "isPremium": false,
        "isSubscribed": false, "isTrial": false, "premiumUntil": 0, "lang": "en",
        "preferedDomain": "com", "fidelityPoints": 0,
        "limitedHostersQuotas": {"rapidgator": 5000}
    }}}))
}

/// With several services, an admitted request reads each one's account once, each kept apart;
/// the report, the JSON figures and the log name the service of each line.
#[test]
fn with_several_services_each_account_is_read_and_kept_apart() {
    let second = Provider::builder().routes_only().start();
    second.route("GET", "/v4/user", alldebrid_free());
    let second_entry = json!({"preset": "alldebrid", "token": TOKEN, "base_url": second.url(""),
                              "hosts": null, "link_check": null});
    let site = Setup::builder("account-services")
        .provider(realdebrid(premium_for(4)))
        .provider_section(move |api| {
            json!([{"preset": "realdebrid", "token": TOKEN, "base_url": api.url("/rest/1.0"),
                    "hosts": null, "link_check": null}, second_entry])
        })
        .config(|cfg| {
            let list = cfg["provider"].take();
            let map = cfg.as_object_mut().expect("an object");
            map.remove("provider");
            map.insert("providers".into(), list);
        })
        .rules(vec![rule("ip", "ip", 100, 3600)])
        .write();
    let first = ask(&site, "127.0.0.2");
    assert_eq!(first.answer().status, 200, "{}", first.describe());
    assert_eq!(site.provider.calls_to("GET", USER), 1);
    assert_eq!(
        second.calls_to("GET", "/v4/user"),
        1,
        "the second's account too"
    );
    let (_, first_kept) = kept(&site).expect("the first's reading");
    assert_eq!(first_kept["premium"], true);
    let text = std::fs::read_to_string(site.data.join("account-alldebrid.json"))
        .expect("the second's reading, apart");
    let v: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(v["premium"], false, "{text}");
    assert!(!text.contains(TOKEN), "{text}");
    for line in [
        "ACTION NEEDED: the realdebrid account's premium ends in 4 days",
        "ACTION NEEDED: the alldebrid account is not premium",
    ] {
        assert!(first.stderr.contains(line), "{line}\n{}", first.describe());
    }
    // Read once a day each.
    let again = ask(&site, "127.0.0.3");
    assert_eq!(again.answer().status, 200, "{}", again.describe());
    assert_eq!(site.provider.calls_to("GET", USER), 1);
    assert_eq!(second.calls_to("GET", "/v4/user"), 1);

    let out = command(&["report", "--config"])
        .arg(&site.config_path)
        .output()
        .expect("run resolve report");
    let report = output_text(&out);
    assert!(out.status.success(), "{report}");
    for line in [
        "ACTION NEEDED: the realdebrid account's premium ends in 4 days",
        "ACTION NEEDED: the alldebrid account is not premium",
        "Provider account (realdebrid): premium until ",
        "Provider account (alldebrid): not premium",
    ] {
        assert!(report.contains(line), "{line}\n{report}");
    }
    let out = command(&["stats", "--json", "--config"])
        .arg(&site.config_path)
        .output()
        .expect("run resolve stats");
    let stats: Value = serde_json::from_slice(&out.stdout).expect("stats JSON");
    assert_eq!(
        stats["accounts"]["realdebrid"]["premium"], true,
        "{stats:#}"
    );
    assert_eq!(
        stats["accounts"]["alldebrid"]["premium"], false,
        "{stats:#}"
    );
    assert_eq!(
        stats["accounts"]["alldebrid"]["host_quotas"],
        json!([{"host": "rapidgator", "left": "5000"}]),
        "{stats:#}"
    );
}

/// A stand-in of Debrid-Link: a link resolved by `POST /downloader/add`, and an account
/// (`GET /account/infos`) with `premium_left` seconds of premium, in the form its clients read.
fn debridlink(premium_left: u64) -> Provider {
    let api = Provider::builder().routes_only().start();
    api.route(
        "POST",
        "/api/v2/downloader/add",
        Reply::ok(
            json!({"success": true, "value": {"id": "1", "name": "f.bin", "size": 10,
                         "downloadUrl": "https://dl.example/d/f.bin"}}),
        ),
    );
    api.route(
        "GET",
        "/api/v2/account/infos",
        Reply::ok(
            json!({"success": true, "value": {"username": "owner", "accountType": 1,
                         "premiumLeft": premium_left, "registerDate": 1_700_000_000}}),
        ),
    );
    api
}

#[test]
fn debridlinks_account_is_read_from_the_seconds_of_premium_left() {
    let site = Setup::builder("account-debridlink")
        .provider(debridlink(3 * 86_400 + 600))
        .provider_section(|api| {
            json!({"preset": "debridlink", "token": TOKEN, "base_url": api.url("/api/v2"),
                   "hosts": null})
        })
        .rules(vec![rule("ip", "ip", 100, 3600)])
        .write();
    let first = ask(&site, "127.0.0.2");
    assert_eq!(first.answer().status, 200, "{}", first.describe());
    assert_eq!(site.provider.calls_to("GET", "/api/v2/account/infos"), 1);
    let call = &site.provider.requests_to("GET", "/api/v2/account/infos")[0];
    assert_eq!(
        call.header("Authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    let (text, v) = kept(&site).expect("the reading is kept");
    let until = v["premium_until_ms"].as_u64().expect("premium_until_ms");
    let expected = now_ms() + (3 * 86_400 + 600) * 1000;
    assert!(until.abs_diff(expected) < 120_000, "{text}");
    assert!(!text.contains(TOKEN), "{text}");
    assert!(
        first
            .stderr
            .contains("ACTION NEEDED: the provider account's premium ends in 3 days"),
        "{}",
        first.describe()
    );
    assert!(!first.stderr.contains(TOKEN), "{}", first.describe());
}
