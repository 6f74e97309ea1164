//! The challenge before a paid call, run as Apache runs the binary (CGI variables, one process
//! per request), with a loopback stand-in for siteverify and the provider counting their calls:
//! a visitor who does not solve costs no provider call of any kind, a solved token gets the
//! link once and its replay is refused, the cookie remembers it for its own client only, each
//! `when` mode, siteverify down under each policy (logged), API keys never asked. The last
//! test goes through a real Apache.

mod support;

use serde_json::{Value, json};
use support::config::rule;
use support::siteverify::{SECRET, SITE_KEY, Siteverify, token};
use support::{Cgi, CgiOutput, Setup, Site};

const LINK: &str = "link=https%3A%2F%2Fhost.example%2Ff";
const HOST: &str = "resolve.test";

fn site(
    sv: &Siteverify,
    label: &str,
    when: &str,
    edit: impl FnOnce(&mut Value) + 'static,
) -> Setup {
    let section = sv.section(when);
    Setup::builder(label)
        .rules(vec![rule("ip", "ip", 1000, 60)])
        .config(move |cfg| {
            cfg["challenge"] = section;
            edit(cfg);
        })
        .write()
}

/// One GET from `remote` for JSON, with a token and a cookie when given.
fn ask(setup: &Setup, remote: &str, token: Option<&str>, cookie: Option<&str>) -> CgiOutput {
    let query = match token {
        Some(t) => format!("{LINK}&cf-turnstile-response={t}"),
        None => LINK.to_owned(),
    };
    let mut cgi = Cgi::new("GET", query)
        .var("REMOTE_ADDR", remote)
        .header("Host", HOST)
        .header("Accept", "application/json");
    if let Some(c) = cookie {
        cgi = cgi.header("Cookie", c);
    }
    let out = setup.run(cgi);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(SECRET) && !out.stderr.contains(SECRET),
        "the secret never shows:\n{}",
        out.describe()
    );
    out
}

/// The remembering cookie an answer sets (`name=value`).
fn cookie_of(out: &CgiOutput) -> String {
    let set = out
        .answer()
        .header("Set-Cookie")
        .unwrap_or_else(|| panic!("no cookie set:\n{}", out.describe()));
    set.split(';').next().unwrap().to_owned()
}

fn paid(setup: &Setup) -> usize {
    setup.provider.calls_to("POST", "/unrestrict")
}

#[test]
fn always_a_visitor_without_a_token_is_asked_and_costs_no_call() {
    let sv = Siteverify::start();
    let setup = site(&sv, "challenge-always", "always", |_| {});
    for _ in 0..3 {
        let out = ask(&setup, "192.0.2.10", None, None);
        let answer = out.answer();
        assert_eq!(answer.status, 403, "{}", out.describe());
        let body = answer.json();
        assert_eq!(body["code"], "challenge_required");
        assert_eq!(body["challenge"]["site_key"], SITE_KEY);
        assert_eq!(body["challenge"]["script_url"], sv.server.url("/api.js"));
        assert_eq!(body["challenge"]["action"], "resolve");
        // Asking for a challenge is not logged: a script would fill the log.
        assert!(!out.stderr.contains("challenge"), "{}", out.stderr);
    }
    // The plain-text answer names the site key too.
    let out = setup.run(
        Cgi::new("GET", LINK)
            .var("REMOTE_ADDR", "192.0.2.10")
            .header("Accept", "text/plain"),
    );
    assert_eq!(out.answer().status, 403);
    assert!(out.answer().text().contains(SITE_KEY), "{}", out.describe());
    // The HTML answer carries the widget, and its policy lets the widget's origin alone load.
    let out = setup.run(
        Cgi::new("GET", LINK)
            .var("REMOTE_ADDR", "192.0.2.10")
            .header("Accept", "text/html"),
    );
    let html = out.answer().text();
    assert!(html.contains("class=\"cf-turnstile\""), "{html}");
    let csp = out.answer().header("Content-Security-Policy").unwrap();
    let origin = sv.server.url("");
    let origin = origin.trim_end_matches('/');
    assert!(csp.contains(&format!("script-src {origin}")), "{csp}");
    assert_eq!(paid(&setup), 0, "no paid call");
    assert_eq!(setup.provider.calls(), 0, "no provider call of any kind");
    assert_eq!(sv.verifications(), 0, "nothing to verify");
}

#[test]
fn a_solved_token_gets_the_link_once_and_its_replay_is_refused() {
    let sv = Siteverify::start();
    let setup = site(&sv, "challenge-replay", "always", |_| {});
    let t = token(HOST, "n1");
    let out = ask(&setup, "192.0.2.11", Some(&t), None);
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    assert_eq!(paid(&setup), 1);
    assert_eq!(sv.verifications(), 1);
    let cookie = cookie_of(&out);
    assert!(
        out.answer()
            .header("Set-Cookie")
            .unwrap()
            .contains("HttpOnly")
    );
    // The same token again: refused by the store's mark before any call.
    let out = ask(&setup, "192.0.2.11", Some(&t), None);
    assert_eq!(out.answer().status, 403, "{}", out.describe());
    assert_eq!(out.answer().json()["code"], "challenge_required");
    assert!(out.stderr.contains("used before"), "{}", out.stderr);
    assert_eq!(sv.verifications(), 1, "no second siteverify call");
    assert_eq!(paid(&setup), 1, "no paid call for a replay");
    // The cookie remembers the solved challenge, for its own client only.
    let out = ask(&setup, "192.0.2.11", None, Some(&cookie));
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    let out = ask(&setup, "192.0.2.99", None, Some(&cookie));
    assert_eq!(
        out.answer().status,
        403,
        "another address: {}",
        out.describe()
    );
    // A token solved for another host, or one siteverify does not know: refused.
    let out = ask(
        &setup,
        "192.0.2.12",
        Some(&token("evil.example", "n2")),
        None,
    );
    assert_eq!(out.answer().status, 403);
    assert!(out.stderr.contains("another host"), "{}", out.stderr);
    let out = ask(&setup, "192.0.2.12", Some("made-up"), None);
    assert_eq!(out.answer().status, 403);
    assert_eq!(paid(&setup), 2);
}

#[test]
fn a_replay_is_refused_by_siteverify_too_when_the_store_lost_its_mark() {
    let sv = Siteverify::start();
    let setup = site(&sv, "challenge-replay-service", "always", |_| {});
    let t = token(HOST, "n1");
    assert_eq!(
        ask(&setup, "192.0.2.13", Some(&t), None).answer().status,
        200
    );
    // The store's mark gone (a new data directory), the service still refuses the token.
    let data = std::fs::read_dir(&setup.data).unwrap();
    for entry in data {
        let path = entry.unwrap().path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    let out = ask(&setup, "192.0.2.13", Some(&t), None);
    assert_eq!(out.answer().status, 403, "{}", out.describe());
    assert!(
        out.stderr.contains("timeout-or-duplicate"),
        "{}",
        out.stderr
    );
    assert_eq!(sv.verifications(), 2);
    assert_eq!(paid(&setup), 1);
}

#[test]
fn siteverify_down_follows_the_policy_and_is_logged() {
    let sv = Siteverify::start();
    let closed = format!("http://127.0.0.1:{}/siteverify", support::free_port());
    let down = closed.clone();
    let setup = site(&sv, "challenge-down", "always", move |cfg| {
        cfg["challenge"]["verify_url"] = json!(down);
    });
    let out = ask(&setup, "192.0.2.14", Some(&token(HOST, "d1")), None);
    assert_eq!(out.answer().status, 503, "{}", out.describe());
    assert_eq!(out.answer().json()["code"], "challenge_unavailable");
    assert!(out.answer().header("Retry-After").is_some());
    assert!(
        out.stderr
            .contains("challenge not checked, refusing (challenge.on_error is deny)"),
        "{}",
        out.stderr
    );
    assert_eq!(setup.provider.calls(), 0);
    setup.edit_config(|cfg| cfg["challenge"]["on_error"] = json!("allow"));
    let out = ask(&setup, "192.0.2.14", Some(&token(HOST, "d2")), None);
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    assert!(
        out.stderr
            .contains("challenge not checked, answering anyway (challenge.on_error is allow)"),
        "{}",
        out.stderr
    );
    assert!(
        out.answer().header("Set-Cookie").is_none(),
        "nothing remembered"
    );
    assert_eq!(paid(&setup), 1);
}

#[test]
fn programs_with_api_keys_are_never_asked() {
    use sha2::{Digest, Sha256};
    let sv = Siteverify::start();
    let hash: String = Sha256::digest(b"k-alpha")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let setup = site(&sv, "challenge-keys", "always", move |cfg| {
        cfg["api_keys"] = json!({"keys": [{"name": "alpha", "sha256": hash}]});
    });
    for _ in 0..2 {
        let out = setup.run(
            Cgi::new("GET", LINK)
                .var("REMOTE_ADDR", "192.0.2.15")
                .header("X-API-Key", "k-alpha"),
        );
        assert_eq!(out.answer().status, 200, "{}", out.describe());
    }
    assert_eq!(sv.verifications(), 0);
    assert_eq!(paid(&setup), 2);
}

#[test]
fn new_clients_are_asked_and_a_client_seen_today_is_not() {
    let sv = Siteverify::start();
    let setup = site(&sv, "challenge-new", "new_clients", |_| {});
    assert_eq!(ask(&setup, "192.0.2.16", None, None).answer().status, 403);
    let out = ask(&setup, "192.0.2.16", Some(&token(HOST, "c1")), None);
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    // Seen within the day: no cookie, no token, still answered.
    assert_eq!(ask(&setup, "192.0.2.16", None, None).answer().status, 200);
    // Another address is new.
    assert_eq!(ask(&setup, "192.0.2.17", None, None).answer().status, 403);
    assert_eq!(paid(&setup), 2);
    assert_eq!(sv.verifications(), 1);
}

#[test]
fn over_limit_a_solved_challenge_gives_the_extra_links_once_a_script_gets_the_429() {
    let sv = Siteverify::start();
    let section = sv.section("over_limit");
    let setup = Setup::builder("challenge-over")
        .rules(vec![rule("ip", "ip", 1, 60)])
        .config(move |cfg| {
            cfg["challenge"] = section;
            cfg["challenge"]["extra"] = json!(2);
        })
        .write();
    assert_eq!(ask(&setup, "192.0.2.18", None, None).answer().status, 200);
    // Over its limit: the 429, offering the challenge.
    let out = ask(&setup, "192.0.2.18", None, None);
    assert_eq!(out.answer().status, 429, "{}", out.describe());
    let body = out.answer().json();
    assert_eq!(body["code"], "rate_limited");
    assert_eq!(body["challenge"]["site_key"], SITE_KEY);
    assert!(out.answer().header("Retry-After").is_some());
    assert_eq!(paid(&setup), 1);
    // Solved: the extra links, the first with the token, the second with the cookie.
    let out = ask(&setup, "192.0.2.18", Some(&token(HOST, "o1")), None);
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    let cookie = cookie_of(&out);
    let out = ask(&setup, "192.0.2.18", None, Some(&cookie));
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    // The extra links spent: the plain 429, no challenge offered.
    let out = ask(&setup, "192.0.2.18", None, Some(&cookie));
    assert_eq!(out.answer().status, 429, "{}", out.describe());
    assert!(out.answer().json().get("challenge").is_none());
    assert_eq!(paid(&setup), 3);
    // A script that never solves only ever gets the 429.
    assert_eq!(ask(&setup, "192.0.2.19", None, None).answer().status, 200);
    for _ in 0..3 {
        assert_eq!(ask(&setup, "192.0.2.19", None, None).answer().status, 429);
    }
    assert_eq!(paid(&setup), 4);
    assert_eq!(sv.verifications(), 1);
}

#[test]
fn busy_asks_once_the_spend_passes_its_share() {
    let sv = Siteverify::start();
    let section = sv.section("busy");
    let setup = Setup::builder("challenge-busy")
        .rules(vec![rule("ip", "ip", 1000, 60)])
        .config(move |cfg| {
            cfg["challenge"] = section;
            cfg["challenge"]["busy_share"] = json!(0.5);
            cfg["spend"] = json!([{"name": "budget", "limit": 4, "window_secs": 3600}]);
        })
        .write();
    assert_eq!(ask(&setup, "192.0.2.20", None, None).answer().status, 200);
    assert_eq!(ask(&setup, "192.0.2.21", None, None).answer().status, 200);
    // 2 of 4 spent: half, and visitors are asked.
    let out = ask(&setup, "192.0.2.22", None, None);
    assert_eq!(out.answer().status, 403, "{}", out.describe());
    assert_eq!(paid(&setup), 2);
    let out = ask(&setup, "192.0.2.22", Some(&token(HOST, "b1")), None);
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    assert_eq!(paid(&setup), 3);
}

#[test]
#[cfg_attr(not(feature = "servers"), ignore = "needs Apache")]
fn through_apache_a_script_that_does_not_solve_gets_no_paid_call() {
    let sv = Siteverify::start();
    let section = sv.section("always");
    let site = Site::builder("challenge-apache")
        .config(move |cfg| cfg["challenge"] = section)
        .start();
    for _ in 0..5 {
        let r = site.get(&format!("/cgi-bin/resolve?{LINK}"), "application/json");
        assert_eq!(r.status, 403, "{}", r.everything());
        assert_eq!(r.json()["challenge"]["site_key"], SITE_KEY);
    }
    // A made-up token: refused by siteverify, still no paid call.
    let r = site.get(
        &format!("/cgi-bin/resolve?{LINK}&cf-turnstile-response=pass-not"),
        "application/json",
    );
    assert_eq!(r.status, 403);
    assert_eq!(site.provider.calls(), 0);
    // Solved for Apache's host (127.0.0.1): the link.
    let r = site.get(
        &format!(
            "/cgi-bin/resolve?{LINK}&cf-turnstile-response={}",
            token("127.0.0.1", "a1")
        ),
        "application/json",
    );
    assert_eq!(r.status, 200, "{}", r.everything());
    assert_eq!(site.provider.calls_to("POST", "/unrestrict"), 1);
}

/// The same story on a store: a new client asked, its token good once (the store's mark
/// refuses the replay before siteverify is asked), the client seen afterwards, and
/// `over_limit`'s extra links counted exactly.
fn on_store(label: &str, store: Value) {
    let sv = Siteverify::start();
    let section = sv.section("new_clients");
    let store_new = store.clone();
    let setup = Setup::builder(label)
        .rules(vec![rule("ip", "ip", 1000, 60)])
        .store(store_new)
        .config(move |cfg| cfg["challenge"] = section)
        .write();
    let t = token(HOST, &format!("{label}-1"));
    assert_eq!(ask(&setup, "198.51.100.1", None, None).answer().status, 403);
    assert_eq!(
        ask(&setup, "198.51.100.1", Some(&t), None).answer().status,
        200
    );
    let replay = ask(&setup, "198.51.100.2", Some(&t), None);
    assert_eq!(replay.answer().status, 403, "{}", replay.describe());
    assert!(replay.stderr.contains("used before"), "{}", replay.stderr);
    assert_eq!(sv.verifications(), 1, "the store refused the replay");
    assert_eq!(ask(&setup, "198.51.100.1", None, None).answer().status, 200);
    assert_eq!(paid(&setup), 2);

    let section = sv.section("over_limit");
    let over = Setup::builder(&format!("{label}-over"))
        .rules(vec![rule("ip", "ip", 1, 60)])
        .store(store)
        .config(move |cfg| {
            cfg["challenge"] = section;
            cfg["challenge"]["extra"] = json!(3);
        })
        .write();
    let remote = "198.51.100.3";
    assert_eq!(ask(&over, remote, None, None).answer().status, 200);
    let out = ask(
        &over,
        remote,
        Some(&token(HOST, &format!("{label}-2"))),
        None,
    );
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    let cookie = cookie_of(&out);
    for _ in 0..2 {
        assert_eq!(ask(&over, remote, None, Some(&cookie)).answer().status, 200);
    }
    // 1 by the rule and exactly 3 extra.
    let out = ask(&over, remote, None, Some(&cookie));
    assert_eq!(out.answer().status, 429, "{}", out.describe());
    assert_eq!(paid(&over), 4);
}

#[test]
fn exact_on_the_file_store() {
    let sv_dir = support::TempDir::new("challenge-file-store");
    let data = sv_dir.server_dir("data");
    on_store("challenge-file", json!({"kind": "file", "dir": data}));
}

#[test]
#[cfg_attr(not(feature = "servers"), ignore = "needs MariaDB")]
fn exact_on_mysql() {
    let db = support::MariaDb::start();
    on_store(
        "challenge-mysql",
        json!({"kind": "mysql", "url": db.url(), "read_timeout_ms": 20000, "on_error": "deny"}),
    );
}

#[test]
#[cfg_attr(not(feature = "servers"), ignore = "needs Redis")]
fn exact_on_redis() {
    let redis = support::Redis::start();
    on_store(
        "challenge-redis",
        json!({"kind": "redis", "url": redis.url(), "read_timeout_ms": 20000, "on_error": "deny"}),
    );
}

#[test]
#[cfg_attr(not(feature = "servers"), ignore = "needs Apache")]
fn through_apache_over_limit_gives_the_extra_links_once() {
    let sv = Siteverify::start();
    let section = sv.section("over_limit");
    let site = Site::builder("challenge-apache-over")
        .rules(vec![rule("ip", "ip", 1, 60)])
        .config(move |cfg| {
            cfg["challenge"] = section;
            cfg["challenge"]["extra"] = json!(1);
        })
        .start();
    let target = format!("/cgi-bin/resolve?{LINK}");
    assert_eq!(site.get(&target, "application/json").status, 200);
    let r = site.get(&target, "application/json");
    assert_eq!(r.status, 429, "{}", r.everything());
    assert_eq!(r.json()["challenge"]["site_key"], SITE_KEY);
    let solved = format!(
        "{target}&cf-turnstile-response={}",
        token("127.0.0.1", "x1")
    );
    let r = site.get(&solved, "application/json");
    assert_eq!(r.status, 200, "{}", r.everything());
    // The one extra link spent: the plain 429, nothing offered, nothing paid.
    let r = site.get(&target, "application/json");
    assert_eq!(r.status, 429, "{}", r.everything());
    assert!(r.json().get("challenge").is_none(), "{}", r.everything());
    assert_eq!(site.provider.calls_to("POST", "/unrestrict"), 2);
}

/// A link whose job outlasts the request: the 202 that says it is under way remembers the
/// solved challenge, so the page asking again without a token joins the job instead of
/// meeting the challenge; one job paid for.
#[test]
fn a_long_jobs_202_remembers_the_solved_challenge() {
    use support::provider::Reply;
    let sv = Siteverify::start();
    let section = sv.section("always");
    let setup = Setup::builder("challenge-job")
        .rules(vec![rule("ip", "ip", 1000, 60)])
        .provider_section(|api| {
            json!({
                "kind": "http", "token": "t0k3n-job", "base_url": api.url("/api"),
                "connect_timeout_ms": 500, "timeout_ms": 1000, "deadline_ms": 1200,
                "steps": [
                    {"method": "POST", "url": "{base}/create", "form": {"link": "{link}"},
                     "extract": {"id": "/id"}},
                    {"method": "GET", "url": "{base}/status", "query": {"id": "{id}"},
                     "poll": {"interval_ms": 500, "until": {"pointer": "/done", "equals": true}},
                     "extract": {"download": "/link", "filename": "/name"}}
                ]
            })
        })
        .config(move |cfg| cfg["challenge"] = section)
        .write();
    let api = &setup.provider;
    api.route("POST", "/api/create", Reply::ok(json!({"id": 9})));
    api.route("GET", "/api/status", Reply::ok(json!({"done": false})));
    let out = ask(&setup, "192.0.2.30", Some(&token(HOST, "j1")), None);
    assert_eq!(out.answer().status, 202, "{}", out.describe());
    let cookie = cookie_of(&out);
    api.route(
        "GET",
        "/api/status",
        Reply::ok(json!({"done": true, "link": "https://cdn.test/j", "name": "j.bin"})),
    );
    // Asked again as the page does, without a token: the job, not the challenge.
    let out = ask(&setup, "192.0.2.30", None, Some(&cookie));
    assert!(
        [200, 202].contains(&out.answer().status),
        "{}",
        out.describe()
    );
    assert_eq!(api.calls_to("POST", "/api/create"), 1, "one job paid for");
    // Without the cookie the same client is asked again (`always`).
    let out = ask(&setup, "192.0.2.30", None, None);
    assert_eq!(out.answer().status, 403, "{}", out.describe());
    assert_eq!(sv.verifications(), 1);
}

/// Several links in one paste: the challenge is asked once for them all (nothing paid before
/// it is solved), one solved token serves every link (each asked as a request of its own, which
/// carry the remembering cookie, not the token, good for one request), and the answer sets the
/// cookie for what comes next.
#[test]
fn a_paste_of_several_links_is_challenged_once_and_one_token_serves_them_all() {
    let sv = Siteverify::start();
    let setup = site(&sv, "challenge-links", "always", |_| {});
    let links = ["a", "b", "c"]
        .map(|n| format!("https://host.example/file.part{n}.rar"))
        .join("\n");
    let paste = |token: Option<&str>, cookie: Option<&str>| {
        let mut body = format!("links={}", support::urlenc::encode(&links));
        if let Some(t) = token {
            body.push_str(&format!("&cf-turnstile-response={t}"));
        }
        let mut cgi = Cgi::new("POST", "")
            .var("REMOTE_ADDR", "192.0.2.40")
            .header("Host", HOST)
            .header("Accept", "application/json")
            .form(body);
        if let Some(c) = cookie {
            cgi = cgi.header("Cookie", c);
        }
        setup.run(cgi)
    };
    let out = paste(None, None);
    assert_eq!(out.answer().status, 403, "{}", out.describe());
    assert_eq!(out.answer().json()["code"], "challenge_required");
    assert_eq!(
        setup.provider.calls(),
        0,
        "nothing asked before the challenge"
    );
    let out = paste(Some(&token(HOST, "links-1")), None);
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    let list = out.answer().json();
    let states: Vec<&str> = list["links"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .map(|l| l["state"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(states, ["ready", "ready", "ready"], "{list}");
    assert_eq!(sv.verifications(), 1, "one token, checked once");
    assert_eq!(paid(&setup), 3);
    // The cookie set remembers it: the next paste is not asked again.
    let cookie = cookie_of(&out);
    let out = paste(None, Some(&cookie));
    assert_eq!(out.answer().status, 200, "{}", out.describe());
    assert_eq!(sv.verifications(), 1);
}
