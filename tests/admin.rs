//! The owner's dashboard at `/cgi-bin/resolve/admin` through a real Apache (mod_cgid, or
//! mod_fcgid under RESOLVE_TEST_APACHE_MODE=fcgid): signing in, a wrong password, the lock-out
//! after 5 failures, changed and expired cookies, CSRF on the sign-in and sign-out forms, no
//! data without a cookie, and the guarding headers on every answer.

mod support;

use std::time::Duration;

use resolve::admin::session::{self, FORM_COOKIE, SESSION_COOKIE};
use resolve::admin::token::Keys;
use serde_json::json;
use support::{HttpClient, Request, Response, Site};

const PASSWORD: &str = "correct horse battery staple";
const TARGET: &str = "/cgi-bin/resolve/admin";
/// What only the dashboard shows: a figure, the chart, the check's report.
const DATA: [&str; 4] = [
    "<dt>Paid calls</dt>",
    "Paid calls per hour",
    "Configuration check",
    "effective configuration",
];

fn hash() -> String {
    resolve::admin::password::hash(PASSWORD, b"a salt of sixtee").expect("hash")
}

fn site(label: &str) -> Site {
    let hash = hash();
    Site::builder(label)
        .config(move |c| c["admin"] = json!({ "password_hash": hash }))
        .start()
}

/// The headers every dashboard answer carries, whatever its status.
fn assert_guarded(r: &Response) {
    let csp = r.header("Content-Security-Policy").unwrap_or_default();
    for part in [
        "default-src 'none'",
        "style-src 'sha256-",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{part} in {csp:?}:\n{}", r.everything());
    }
    for (name, value) in [
        ("Cache-Control", "no-store"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Content-Type-Options", "nosniff"),
    ] {
        assert_eq!(r.header(name), Some(value), "{name}:\n{}", r.everything());
    }
}

fn assert_no_data(r: &Response) {
    for data in DATA {
        assert!(
            !r.text().contains(data),
            "{data} shown:\n{}",
            r.everything()
        );
    }
}

fn assert_sign_in_form(r: &Response) {
    assert!(
        r.text().contains("type=\"password\"") && r.text().contains("name=\"csrf\""),
        "{}",
        r.everything()
    );
    assert_no_data(r);
}

/// A browser: a client that keeps the cookies it is given.
struct Browser {
    client: HttpClient,
    cookies: Vec<(String, String)>,
}

impl Browser {
    fn new(site: &Site) -> Browser {
        Browser {
            client: site.client(),
            cookies: Vec::new(),
        }
    }

    fn from(site: &Site, address: &str) -> Browser {
        Browser {
            client: site.client().bind_source(address),
            cookies: Vec::new(),
        }
    }

    fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn set_cookie(&mut self, name: &str, value: &str) {
        self.cookies.retain(|(n, _)| n != name);
        self.cookies.push((name.to_owned(), value.to_owned()));
    }

    fn send(&mut self, mut request: Request) -> Response {
        if !self.cookies.is_empty() {
            let header: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            request = request.header("Cookie", &header.join("; "));
        }
        let r = self
            .client
            .send(&request)
            .unwrap_or_else(|e| panic!("{} {}: {e}", request.method, request.target));
        assert_guarded(&r);
        for (_, value) in r
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("Set-Cookie"))
        {
            assert!(
                value.contains("; HttpOnly")
                    && value.contains("; SameSite=Strict")
                    && value.contains(&format!("; Path={TARGET}")),
                "{value}"
            );
            let (name, rest) = value.split_once('=').expect("name=value");
            let cookie = rest.split(';').next().unwrap_or_default();
            self.cookies.retain(|(n, _)| n != name);
            if !value.contains("Max-Age=0") {
                self.cookies.push((name.to_owned(), cookie.to_owned()));
            }
        }
        r
    }

    fn get(&mut self) -> Response {
        self.send(Request::get(TARGET).header("Accept", "text/html"))
    }

    fn post(&mut self, body: &str) -> Response {
        self.send(Request::post_form(TARGET, body.to_owned()))
    }

    /// Opens the sign-in form and sends `password` with the form's token.
    fn sign_in(&mut self, password: &str) -> Response {
        let form = self.get();
        assert_sign_in_form(&form);
        let token = hidden(&form.text(), "csrf");
        self.post(&format!(
            "action=signin&csrf={token}&password={}",
            password.replace(' ', "+")
        ))
    }
}

/// The value of hidden field `name` in a page.
fn hidden(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let at = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} field in\n{page}"));
    let rest = &page[at + marker.len()..];
    rest[..rest.find('"').expect("closing quote")].to_owned()
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
    let r = browser.post(&format!("action=signout&csrf={token}"));
    assert_eq!(r.status, 303, "{}", r.everything());
    assert!(browser.cookie(SESSION_COOKIE).is_none());
    assert_sign_in_form(&browser.get());
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
    let wait: u64 = r
        .header("Retry-After")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("Retry-After:\n{}", r.everything()));
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
            "dashboard sign-in refused for 127.0.0.2: 5 failed attempts within 15 minutes; the \
             password was not checked",
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
fn off_without_a_hash_and_secure_cookies_over_https() {
    let site = Site::builder("admin-off").start();
    let r = site.client().get(TARGET).unwrap();
    assert_eq!(r.status, 404, "{}", r.everything());
    assert_eq!(r.text(), "Not found.\n");
    assert_guarded(&r);

    let hash = hash();
    let https = Site::builder("admin-https")
        .config(move |c| c["admin"] = json!({ "password_hash": hash }))
        .apache(|a| a.set_env("HTTPS", "on"))
        .start();
    let r = https.client().get(TARGET).unwrap();
    let cookie = r.header("Set-Cookie").unwrap_or_default();
    assert!(cookie.ends_with("; Secure"), "{}", r.everything());
}
