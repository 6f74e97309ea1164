//! The owner's dashboard at `/cgi-bin/resolve/admin` through a real Apache (mod_cgid, or
//! mod_fcgid under RESOLVE_TEST_APACHE_MODE=fcgid): signing in, a wrong password, the lock-out
//! after 5 failures, changed and expired cookies, a cookie replayed after sign-out, CSRF on the
//! sign-in and sign-out forms, no data without a cookie, and the guarding headers on every
//! answer.

mod support;

use std::time::Duration;

use resolve::admin::session::{self, FORM_COOKIE, SESSION_COOKIE};
use resolve::admin::token::Keys;
use serde_json::json;
use support::dashboard::{
    Browser, DATA, TARGET, assert_guarded, assert_no_data, assert_sign_in_form, hidden,
};
use support::{Request, Site};

const PASSWORD: &str = "correct horse battery staple";

fn hash() -> String {
    support::dashboard::password_hash(PASSWORD)
}

fn site(label: &str) -> Site {
    let hash = hash();
    Site::builder(label)
        .config(move |c| c["admin"] = json!({ "password_hash": hash }))
        .start()
}

#[test]
fn the_right_password_shows_the_dashboard_and_signing_out_ends_it() {
    let site = site("admin-signin");
    // Known traffic first: two paid calls.
    for i in 0..2 {
        let r = site.get(
            &format!("/cgi-bin/resolve?link=https%3A%2F%2Fexample.com%2Ff{i}"),
            "text/plain",
        );
        assert_eq!(r.status, 200, "{}", r.everything());
    }
    let mut browser = Browser::new(&site);
    let r = browser.sign_in(PASSWORD);
    assert_eq!(r.status, 303, "{}", r.everything());
    assert_eq!(r.header("Location"), Some(TARGET));
    assert!(browser.cookie(SESSION_COOKIE).is_some());
    let page = browser.get();
    assert_eq!(page.status, 200, "{}", page.everything());
    for data in DATA {
        assert!(page.text().contains(data), "{data}:\n{}", page.everything());
    }
    for figure in [
        "<dt>Paid calls</dt><dd>2</dd>",
        "<dt>Requests</dt><dd>2</dd>",
        "<dt>Admitted</dt><dd>2</dd>",
        "2 paid calls in this period",
        "<rect class=\"column\"",
    ] {
        assert!(page.text().contains(figure), "{figure}:\n{}", page.text());
    }
    assert!(
        !page.everything().contains(support::config::TOKEN),
        "the provider token is masked"
    );
    assert!(!page.everything().contains(&hash()), "the hash is masked");
    // Looking at the dashboard counted nothing: the figures are the same.
    assert!(browser.get().text().contains("<dt>Requests</dt><dd>2</dd>"));

    // Signing out: only with the page's token.
    let token = hidden(&page.text(), "csrf");
    let r = browser.post("action=signout");
    assert_eq!(r.status, 403, "{}", r.everything());
    assert!(
        r.text().contains("you are still signed in"),
        "{}",
        r.everything()
    );
    let r = browser.post("action=signout&csrf=0123456789abcdef");
    assert_eq!(r.status, 403, "{}", r.everything());
    assert!(browser.get().text().contains(DATA[0]), "still signed in");
    let copied = browser
        .cookie(SESSION_COOKIE)
        .expect("a session")
        .to_owned();
    let r = browser.post(&format!("action=signout&csrf={token}"));
    assert_eq!(r.status, 303, "{}", r.everything());
    assert!(browser.cookie(SESSION_COOKIE).is_none());
    assert_sign_in_form(&browser.get());
    // A copy of the cookie, replayed after the sign-out, opens nothing: the session ended on
    // the server.
    let mut replay = Browser::new(&site);
    replay.set_cookie(SESSION_COOKIE, &copied);
    assert_sign_in_form(&replay.get());
    site.apache.settle_log();
    let log = site.apache.error_log();
    assert!(log.contains("dashboard: signed in from 127.0.0.1"), "{log}");
    assert!(
        log.contains("dashboard: signed out from 127.0.0.1"),
        "{log}"
    );
    assert!(!log.contains(PASSWORD), "{log}");
}

#[test]
fn a_wrong_password_is_refused_and_logged() {
    let site = site("admin-wrong");
    let mut browser = Browser::new(&site);
    let r = browser.sign_in("not the password at all");
    assert_eq!(r.status, 403, "{}", r.everything());
    assert!(r.text().contains("Wrong password."), "{}", r.everything());
    assert_sign_in_form(&r);
    assert!(browser.cookie(SESSION_COOKIE).is_none());
    assert!(
        site.apache.wait_for_log(
            "dashboard sign-in failed for 127.0.0.1: wrong password (failure 1 of 5",
            Duration::from_secs(5)
        ),
        "{}",
        site.apache.error_log()
    );
    assert!(!site.apache.error_log().contains("not the password"));
}

#[test]
fn five_failures_lock_the_address_out_even_with_the_right_password() {
    let site = site("admin-lockout");
    let mut browser = Browser::from(&site, "127.0.0.2");
    for n in 1..=5 {
        let r = browser.sign_in(&format!("wrong password number {n}"));
        assert_eq!(r.status, 403, "failure {n}: {}", r.everything());
    }
    let r = browser.sign_in(PASSWORD);
    assert_eq!(r.status, 429, "{}", r.everything());
    let wait = r.retry_after();
    assert!((1..=900).contains(&wait), "{wait}");
    assert!(
        r.text().contains("Too many failed sign-ins"),
        "{}",
        r.everything()
    );
    assert_sign_in_form(&r);
    assert!(browser.cookie(SESSION_COOKIE).is_none());
    assert!(
        site.apache.wait_for_log(
            "dashboard sign-in refused for 127.0.0.2: 5 failed attempts within 15 minutes from this \
             address; the password was not checked",
            Duration::from_secs(5)
        ),
        "{}",
        site.apache.error_log()
    );
    site.apache.settle_log();
    let log = site.apache.error_log();
    assert_eq!(
        log.matches("dashboard sign-in failed for 127.0.0.2")
            .count(),
        5,
        "{log}"
    );
    // Another address may still sign in.
    let r = Browser::from(&site, "127.0.0.3").sign_in(PASSWORD);
    assert_eq!(r.status, 303, "{}", r.everything());
}

#[test]
fn a_changed_or_expired_cookie_gets_the_sign_in_form() {
    let site = site("admin-cookies");
    let mut browser = Browser::new(&site);
    assert_eq!(browser.sign_in(PASSWORD).status, 303);
    let good = browser
        .cookie(SESSION_COOKIE)
        .expect("a session")
        .to_owned();
    // A byte of the payload (the expiry), of the nonce and of the signature.
    for at in [3, good.len() / 2, good.len() - 1] {
        let mut bytes = good.clone().into_bytes();
        bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
        let mut tampered = Browser::new(&site);
        tampered.set_cookie(SESSION_COOKIE, std::str::from_utf8(&bytes).unwrap());
        let r = tampered.get();
        assert_eq!(r.status, 200, "{}", r.everything());
        assert_sign_in_form(&r);
        assert!(tampered.cookie(SESSION_COOKIE).is_none(), "taken back");
    }
    // A cookie signed with the site's own key, but whose twelve hours have passed.
    let secret = std::fs::read(site.data.join("admin-secret")).expect("the server's secret");
    let keys = Keys::derive(&secret, &hash());
    let now = support::system::now_ms() / 1000;
    let nonce = "0123456789abcdef0123456789abcdef";
    // The server lists it as open, so that only the cookie's own expiry can refuse it.
    let sessions = site.data.join("admin-sessions");
    let mut open = std::fs::read_to_string(&sessions).expect("the list of sessions");
    open.push_str(&format!("{nonce} {now} {}\n", now + 12 * 3600));
    std::fs::write(&sessions, open).unwrap();
    let mut expired = Browser::new(&site);
    expired.set_cookie(
        SESSION_COOKIE,
        &session::new_session(&keys, now - 13 * 3600, 12 * 3600, nonce),
    );
    assert_sign_in_form(&expired.get());
    // The same, made now: the construction is right, so it was the expiry that was refused.
    let mut fresh = Browser::new(&site);
    fresh.set_cookie(
        SESSION_COOKIE,
        &session::new_session(&keys, now, 12 * 3600, nonce),
    );
    assert!(fresh.get().text().contains(DATA[0]));
    // And one that claims to last a year.
    let mut forever = Browser::new(&site);
    forever.set_cookie(
        SESSION_COOKIE,
        &session::new_session(&keys, now, 365 * 24 * 3600, nonce),
    );
    assert_sign_in_form(&forever.get());
}

#[test]
fn the_sign_in_form_needs_its_token() {
    let site = site("admin-csrf");
    let mut browser = Browser::new(&site);
    let form = browser.get();
    let token = hidden(&form.text(), "csrf");
    assert!(browser.cookie(FORM_COOKIE).is_some());
    let password = PASSWORD.replace(' ', "+");
    let mut other = Browser::new(&site);
    let other_token = hidden(&other.get().text(), "csrf");
    for body in [
        format!("action=signin&password={password}"),
        format!("action=signin&csrf=&password={password}"),
        format!("action=signin&csrf=x{token}&password={password}"),
        format!("action=signin&csrf={other_token}&password={password}"),
    ] {
        let r = browser.post(&body);
        assert_eq!(r.status, 403, "{body}:\n{}", r.everything());
        assert!(
            r.text().contains("did not come from this site"),
            "{}",
            r.everything()
        );
        assert!(browser.cookie(SESSION_COOKIE).is_none(), "{body}");
    }
    // A page of another site posting the right password, without the form's cookie.
    let r = Browser::new(&site).post(&format!("action=signin&csrf={token}&password={password}"));
    assert_eq!(r.status, 403, "{}", r.everything());
    // None of these was a failed sign-in: the address is not closer to a lock-out.
    site.apache.settle_log();
    assert!(!site.apache.error_log().contains("wrong password"));
    let r = browser.post(&format!("action=signin&csrf={token}&password={password}"));
    assert_eq!(r.status, 303, "{}", r.everything());
}

#[test]
fn nothing_without_a_cookie_and_the_password_never_in_a_url() {
    let site = site("admin-nodata");
    let mut browser = Browser::new(&site);
    let r = browser.send(Request::get(&format!(
        "{TARGET}?password={}",
        PASSWORD.replace(' ', "+")
    )));
    assert_eq!(r.status, 200);
    assert_sign_in_form(&r);
    assert!(r.text().contains("method=\"post\""), "{}", r.everything());
    let r = browser.send(Request::head(TARGET));
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());
    let r = browser.send(Request::new("PUT", TARGET));
    assert_eq!(r.status, 405, "{}", r.everything());
    assert_no_data(&r);
    let r = browser.send(Request::new("POST", TARGET).header("Content-Type", "text/plain"));
    assert_eq!(r.status, 415, "{}", r.everything());
    assert_no_data(&r);
}

#[test]
fn setup_without_a_hash_and_secure_cookies_over_https() {
    let site = Site::builder("admin-off").start();
    // Without a hash: the setup page (tests/admin_setup.rs), or 503 where the program may not
    // write beside its configuration; never the dashboard.
    let r = site.client().get(TARGET).unwrap();
    assert!(matches!(r.status, 200 | 503), "{}", r.everything());
    assert!(
        r.text().contains("Set up") || r.text().contains("Setup"),
        "{}",
        r.everything()
    );
    assert_no_data(&r);
    assert_guarded(&r);

    let hash = hash();
    let https = Site::builder("admin-https")
        .config(move |c| c["admin"] = json!({ "password_hash": hash }))
        .apache(|a| a.set_env("HTTPS", "on"))
        .start();
    let r = https.client().get(TARGET).unwrap();
    let cookie = r.header("Set-Cookie").unwrap_or_default();
    assert!(
        cookie.starts_with("__Host-")
            && cookie.contains("; Path=/;")
            && cookie.ends_with("; Secure"),
        "{}",
        r.everything()
    );
}

/// `resolve COMMAND ARGS --config` for this site, as the account Apache runs it as (so that
/// the files it makes stay the site's), its standard output.
fn site_command(site: &Site, args: &[&str]) -> String {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(support::binary());
    cmd.args(args)
        .arg("--config")
        .arg(&site.config_path)
        .env_remove("RESOLVE_CONFIG");
    if let Some(user) = support::server_user() {
        cmd.uid(user.uid).gid(user.gid);
    }
    String::from_utf8(support::system::succeeded(
        &mut cmd,
        &format!("resolve {args:?}"),
    ))
    .expect("utf-8")
}

/// A flood of new clients past a small data directory's budget (one HEAD each from 380 /24s
/// and 40 addresses of one more): `resolve report --only-problems`, `resolve stats` (text and
/// JSON) and the dashboard say `ACTION NEEDED` while new visitors share counters, with what to
/// do and the network with most clients to block; the dashboard's button (its form token
/// only) clears the shared counters.
#[test]
fn a_full_data_directory_is_action_needed_and_its_shared_counters_clear() {
    let hash = hash();
    let site = Site::builder("admin-full")
        .rules(vec![
            json!({"name": "ip", "key": "ip", "limit": 3, "window_secs": 3600}),
        ])
        .config(move |c| {
            c["admin"] = json!({ "password_hash": hash });
            c["store"]["max_files"] = json!(2000);
            c["store"]["max_bytes"] = json!(16 * 1024 * 1024);
        })
        .start();
    assert_eq!(site_command(&site, &["report", "--only-problems"]), "");
    let mut browser = Browser::new(&site);
    assert_eq!(browser.sign_in(PASSWORD).status, 303);
    assert!(browser.get().text().contains("Nothing to act on"));

    let addresses: Vec<String> = (0..380)
        .map(|i| format!("127.{}.{}.7", 1 + i / 200, i % 200))
        .chain((1..=40).map(|i| format!("127.9.9.{i}")))
        .collect();
    let statuses: Vec<u16> = support::client::par_map(addresses.len(), 4, |i| {
        site.client()
            .bind_source(&addresses[i])
            .send(&Request::head(
                "/cgi-bin/resolve?link=https%3A%2F%2Fhost.example%2Ff",
            ))
            .map_or(0, |r| r.status)
    });
    let admitted = statuses.iter().filter(|s| **s == 200).count();
    eprintln!("{} new clients: {admitted} admitted", addresses.len());
    let shared = || {
        std::fs::read_dir(site.data.join("folded"))
            .map(|d| d.count())
            .unwrap_or(0)
    };

    // Under FastCGI a process writes its journal entries up to a second later.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let json: serde_json::Value =
            serde_json::from_str(&site_command(&site, &["stats", "--json"])).unwrap();
        if json["folding"]["networks"][0]["clients"] == 40 {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let report = site_command(&site, &["report", "--only-problems"]);
    let stats = site_command(&site, &["stats"]);
    let json: serde_json::Value =
        serde_json::from_str(&site_command(&site, &["stats", "--json"])).unwrap();
    let page = browser.get().text();
    eprintln!("{report}");
    for (what, text) in [("report", &report), ("stats", &stats), ("dashboard", &page)] {
        for part in [
            "ACTION NEEDED: the data directory is full",
            "Raise store.max_files and store.max_bytes",
            "127.9.9.0/24 (40 clients)",
        ] {
            assert!(text.contains(part), "{what}: {part}\n{text}");
        }
    }
    assert!(report.starts_with("ACTION NEEDED"), "{report}");
    assert_eq!(json["folding"]["networks"][0]["network"], "127.9.9.0/24");
    assert!(!page.contains("Nothing to act on"), "{page}");
    assert!(
        page.contains("Clear the shared counters</button>"),
        "{page}"
    );
    assert!(shared() > 0, "nothing was folded");

    // The button: never without the page's token.
    let csrf = hidden(&page, "csrf");
    let r = browser.post("action=clear-shared&csrf=0123456789abcdef");
    assert_eq!(r.status, 403, "{}", r.everything());
    assert!(shared() > 0);
    let r = browser.post(&format!("action=clear-shared&csrf={csrf}"));
    assert_eq!(r.status, 303, "{}", r.everything());
    assert_eq!(shared(), 0, "the shared counters are still there");
    assert!(
        site.apache.wait_for_log(
            "shared counters of new visitors cleared by the owner",
            Duration::from_secs(5)
        ),
        "{}",
        site.apache.error_log()
    );
}
