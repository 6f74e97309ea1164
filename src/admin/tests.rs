//! The dashboard's requests end to end in one process: a memory store, a log in memory and a
//! clock the test sets, so that lock-outs and expiry are exact.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::core::clock::FakeClock;
use crate::store::journal::Journal;
use crate::store::memory::MemoryStore;
use crate::store::roles::Store;
use crate::support::log::MemoryLog;
use crate::support::password;

const PASSWORD: &str = "correct horse battery staple";
const TOKEN: &str = "tok-dashboard-777";
const START_MS: u64 = 1_700_000_000_000;

struct Site {
    config: Config,
    store: MemoryStore<FakeClock>,
    /// The same store, as the dashboard holds it.
    whole: Store,
    log: MemoryLog,
    now_ms: std::cell::Cell<u64>,
    dir: PathBuf,
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn hash_of(password: &str) -> String {
    password::hash(password, &[5; 16]).unwrap()
}

fn site_with(admin: Option<&str>) -> Site {
    let dir = std::env::temp_dir().join(format!(
        "resolve-admin-{}-{:x}",
        std::process::id(),
        crate::support::random::u64()
    ));
    let mut text = serde_json::json!({
        "provider": {"preset": "realdebrid", "token": TOKEN},
        "store": {"kind": "file", "dir": dir.join("data")},
    });
    if let Some(hash) = admin {
        text["admin"] = serde_json::json!({ "password_hash": hash });
    }
    let store = MemoryStore::new(FakeClock::at(START_MS), Duration::ZERO);
    Site {
        config: Config::from_json(&text.to_string(), &dir).unwrap(),
        whole: store.as_store(),
        store,
        log: MemoryLog::default(),
        now_ms: std::cell::Cell::new(START_MS),
        dir,
    }
}

fn site() -> Site {
    site_with(Some(&hash_of(PASSWORD)))
}

/// What a browser keeps: the cookies it was given.
#[derive(Default, Clone)]
struct Jar(Vec<(String, String)>);

impl Jar {
    fn take(&mut self, r: &Response) {
        for (_, value) in r.headers.iter().filter(|(n, _)| *n == "Set-Cookie") {
            let pair = value.split(';').next().unwrap();
            let (k, v) = pair.split_once('=').unwrap();
            self.0.retain(|(n, _)| n != k);
            if !value.contains("Max-Age=0") {
                self.0.push((k.to_owned(), v.to_owned()));
            }
            assert!(
                value.contains("HttpOnly") && value.contains("SameSite=Strict"),
                "{value}"
            );
            assert!(value.contains("Path=/cgi-bin/resolve/admin"), "{value}");
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn set(&mut self, name: &str, value: &str) {
        self.0.retain(|(n, _)| n != name);
        self.0.push((name.to_owned(), value.to_owned()));
    }

    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn env(method: &str, jar: &Jar, from: &str) -> Env {
    let mut env = Env::method(method)
        .with("SCRIPT_NAME", "/cgi-bin/resolve")
        .with("PATH_INFO", "/admin")
        .with("REMOTE_ADDR", from);
    if !jar.0.is_empty() {
        env.set("HTTP_COOKIE", jar.header());
    }
    env
}

impl Site {
    fn dashboard(&self) -> Dashboard<'_> {
        Dashboard {
            config: &self.config,
            store: &self.whole,
            log: &self.log,
            now_ms: self.now_ms.get(),
        }
    }

    fn get(&self, jar: &mut Jar) -> (Response, String) {
        let r = self
            .dashboard()
            .answer(&env("GET", jar, "203.0.113.9"), &mut std::io::empty());
        jar.take(&r);
        let body = String::from_utf8(r.body.clone()).unwrap();
        (r, body)
    }

    fn post(&self, jar: &mut Jar, body: &str, from: &str) -> (Response, String) {
        let env = env("POST", jar, from)
            .with("CONTENT_TYPE", "application/x-www-form-urlencoded")
            .with("CONTENT_LENGTH", body.len().to_string());
        let r = self.dashboard().answer(&env, &mut body.as_bytes());
        jar.take(&r);
        let text = String::from_utf8(r.body.clone()).unwrap();
        (r, text)
    }

    /// Opens the sign-in form and sends `password` with its token.
    fn sign_in(&self, jar: &mut Jar, password: &str, from: &str) -> (Response, String) {
        let token = self.token(jar);
        self.post(jar, &sign_in_form(&token, password), from)
    }

    /// The status the owner's browser (203.0.113.9) gets for signing in with the password.
    fn owner_signs_in(&self, jar: &mut Jar) -> u16 {
        self.sign_in(jar, PASSWORD, "203.0.113.9").0.status
    }

    /// The form token of the page `jar` is shown (the sign-in form's, or the dashboard's).
    fn token(&self, jar: &mut Jar) -> String {
        hidden(&self.get(jar).1, "csrf")
    }

    /// The owner's browser (203.0.113.9) asks to block `client` (an address or a range) with
    /// the form token `token`.
    fn block(&self, jar: &mut Jar, client: &str, token: &str) -> (Response, String) {
        self.post(
            jar,
            &format!(
                "action=block&client={}&csrf={token}",
                client.replace('/', "%2F")
            ),
            "203.0.113.9",
        )
    }

    fn advance(&self, ms: u64) {
        self.now_ms.set(self.now_ms.get() + ms);
        self.store.clock().advance_ms(ms);
    }

    fn log(&self) -> String {
        self.log.lines.borrow().concat()
    }
}

/// The sign-in form's fields: its token and `password`.
fn sign_in_form(token: &str, password: &str) -> String {
    format!(
        "action=signin&csrf={token}&password={}",
        password.replace(' ', "+")
    )
}

/// The value of a hidden field of a form in `page`.
fn hidden(page: &str, name: &str) -> String {
    let at = page
        .find(&format!("name=\"{name}\" value=\""))
        .unwrap_or_else(|| panic!("no {name} in {page}"));
    let rest = &page[at + name.len() + 15..];
    rest[..rest.find('"').unwrap()].to_owned()
}

/// Only the dashboard shows the configuration check.
const DATA: &str = "Configuration check";

#[test]
fn without_a_hash_or_a_file_of_its_own_no_setup_either() {
    let site = site_with(None);
    let (r, body) = site.get(&mut Jar::default());
    assert_eq!(r.status, 503);
    assert!(body.contains("Setup is not available"), "{body}");
    assert!(!body.contains(DATA), "{body}");
    assert!(
        site.log().contains("no configuration file to write"),
        "{}",
        site.log()
    );
}

#[test]
fn the_right_password_signs_in_and_the_page_shows_the_check_without_secrets() {
    let site = site();
    let mut jar = Jar::default();
    let (r, form) = site.get(&mut jar);
    assert_eq!(r.status, 200);
    assert!(
        form.contains("type=\"password\"") && !form.contains(DATA),
        "{form}"
    );
    assert!(jar.get(FORM_COOKIE).is_some());
    let (r, _) = site.sign_in(&mut jar, PASSWORD, "203.0.113.9");
    assert_eq!(r.status, 303, "{r:?}");
    assert_eq!(r.header_value("Location"), Some("/cgi-bin/resolve/admin"));
    assert!(jar.get(SESSION_COOKIE).is_some() && jar.get(FORM_COOKIE).is_none());
    let (r, page) = site.get(&mut jar);
    assert_eq!(r.status, 200);
    assert!(page.contains(DATA) && page.contains("Sign out"), "{page}");
    assert!(page.contains("<dt>Paid calls</dt><dd>0</dd>"), "{page}");
    assert!(page.contains("<title id=\"chart-title\">Paid calls per hour</title>"));
    assert!(
        page.contains("dashboard: on at /cgi-bin/resolve/admin"),
        "{page}"
    );
    assert!(
        !page.contains(TOKEN),
        "the provider token is masked: {page}"
    );
    let hash = site.config.admin.as_ref().unwrap().password_hash.expose();
    assert!(!page.contains(hash), "the hash is masked: {page}");
    assert!(site.log().contains("dashboard: signed in from 203.0.113.9"));
    assert!(!site.log().contains(PASSWORD));
}

#[test]
fn a_wrong_password_is_refused_and_logged_without_it() {
    let site = site();
    let mut jar = Jar::default();
    let (r, page) = site.sign_in(&mut jar, "not the password at all", "203.0.113.9");
    assert_eq!(r.status, 403);
    assert!(
        page.contains("Wrong password. 4 more tries are allowed"),
        "{page}"
    );
    assert!(jar.get(SESSION_COOKIE).is_none() && !page.contains(DATA));
    let log = site.log();
    assert!(
        log.contains("dashboard sign-in failed for 203.0.113.9: wrong password (failure 1 of 5"),
        "{log}"
    );
    assert!(!log.contains("not the password"), "{log}");
    // The same form may be used again.
    let token = hidden(&page, "csrf");
    let (r, _) = site.post(&mut jar, &sign_in_form(&token, PASSWORD), "203.0.113.9");
    assert_eq!(r.status, 303);
}

#[test]
fn a_sign_in_without_its_form_token_is_refused() {
    let site = site();
    let mut jar = Jar::default();
    let token = site.token(&mut jar);
    let password = PASSWORD.replace(' ', "+");
    let mut other = Jar::default();
    let (_, other_form) = site.get(&mut other);
    for body in [
        format!("action=signin&password={password}"),
        format!("action=signin&csrf=&password={password}"),
        format!("action=signin&csrf={}&password={password}", &token[1..]),
        // Another form's token: bound to another cookie.
        format!(
            "action=signin&csrf={}&password={password}",
            hidden(&other_form, "csrf")
        ),
    ] {
        let (r, page) = site.post(&mut jar.clone(), &body, "203.0.113.9");
        assert_eq!(r.status, 403, "{body}");
        assert!(page.contains("did not come from this site"), "{page}");
        assert!(
            !r.headers
                .iter()
                .any(|(_, v)| v.starts_with("resolve_admin=s1"))
        );
    }
    // Without the form's cookie the token is worth nothing.
    let (r, _) = site.post(
        &mut Jar::default(),
        &format!("action=signin&csrf={token}&password={password}"),
        "203.0.113.9",
    );
    assert_eq!(r.status, 403);
    // The form expires after two hours.
    site.advance(2 * 3600 * 1000);
    let (r, _) = site.post(
        &mut jar.clone(),
        &format!("action=signin&csrf={token}&password={password}"),
        "203.0.113.9",
    );
    assert_eq!(r.status, 403);
    // None of these counted as a failed sign-in.
    assert!(!site.log().contains("wrong password"));
}

#[test]
fn signing_out_needs_the_session_token() {
    let site = site();
    let mut jar = Jar::default();
    site.sign_in(&mut jar, PASSWORD, "203.0.113.9");
    let token = site.token(&mut jar);
    for body in [
        "action=signout".to_owned(),
        "action=signout&csrf=00".to_owned(),
    ] {
        let (r, refused) = site.post(&mut jar, &body, "203.0.113.9");
        assert_eq!(r.status, 403, "{body}");
        assert!(refused.contains("you are still signed in"), "{refused}");
        assert!(site.get(&mut jar).1.contains(DATA), "still signed in");
    }
    let (r, _) = site.post(
        &mut jar,
        &format!("action=signout&csrf={token}"),
        "203.0.113.9",
    );
    assert_eq!(r.status, 303);
    assert!(jar.get(SESSION_COOKIE).is_none());
    let (_, after) = site.get(&mut jar);
    assert!(!after.contains(DATA) && after.contains("type=\"password\""));
}

#[test]
fn a_changed_or_expired_cookie_gets_the_sign_in_form() {
    let site = site();
    let mut jar = Jar::default();
    site.sign_in(&mut jar, PASSWORD, "203.0.113.9");
    let good = jar.get(SESSION_COOKIE).unwrap().to_owned();
    for i in [0, 3, good.len() / 2, good.len() - 1] {
        let mut bytes = good.clone().into_bytes();
        bytes[i] = if bytes[i] == b'a' { b'b' } else { b'a' };
        let mut tampered = jar.clone();
        tampered.set(SESSION_COOKIE, std::str::from_utf8(&bytes).unwrap());
        let (r, page) = site.get(&mut tampered);
        assert_eq!(r.status, 200);
        assert!(
            !page.contains(DATA) && page.contains("type=\"password\""),
            "byte {i}"
        );
        assert!(tampered.get(SESSION_COOKIE).is_none(), "taken back");
    }
    // Twelve hours on, the cookie has expired, whatever the browser keeps, even when used
    // every twenty minutes.
    for _ in 0..35 {
        site.advance(20 * 60 * 1000);
        assert!(site.get(&mut jar.clone()).1.contains(DATA));
    }
    site.advance(12 * 3600 * 1000 - 35 * 20 * 60 * 1000 - 1000);
    assert!(site.get(&mut jar.clone()).1.contains(DATA));
    site.advance(1000);
    let (_, page) = site.get(&mut jar);
    assert!(!page.contains(DATA));
}

#[test]
fn the_period_is_chosen_in_the_address() {
    let site = site();
    let mut jar = Jar::default();
    site.sign_in(&mut jar, PASSWORD, "203.0.113.9");
    let page = |query: &str| {
        let r = site.dashboard().answer(
            &env("GET", &jar, "203.0.113.9").with("QUERY_STRING", query),
            &mut std::io::empty(),
        );
        String::from_utf8(r.body).unwrap()
    };
    assert!(
        page("since=7d").contains("href=\"/cgi-bin/resolve/admin?since=7d\" aria-current=\"page\"")
    );
    assert!(page("since=7d").contains("Paid calls per day"));
    for odd in ["", "since=1w", "since=%zz", "since=24h&since=7d"] {
        assert!(
            page(odd).contains("href=\"/cgi-bin/resolve/admin?since=24h\" aria-current=\"page\""),
            "{odd}"
        );
    }
}

#[test]
fn a_new_password_signs_everyone_out() {
    let mut site = site();
    let mut jar = Jar::default();
    site.sign_in(&mut jar, PASSWORD, "203.0.113.9");
    assert!(site.get(&mut jar.clone()).1.contains(DATA));
    site.config.admin.as_mut().unwrap().password_hash =
        crate::support::secret::Secret::new(hash_of("another password entirely"));
    assert!(!site.get(&mut jar).1.contains(DATA));
}

#[test]
fn forms_and_cookies_keep_to_the_path_in_the_address_bar() {
    let base = Env::new().with("PATH_INFO", "/admin");
    let script = base.clone().with("SCRIPT_NAME", "/~alice/cgi-bin/resolve");
    assert_eq!(
        own_path(&script).as_deref(),
        Some("/~alice/cgi-bin/resolve/admin")
    );
    // Rewritten by the host: the browser asked for /cgi-bin/resolve/admin.
    let rewritten = script
        .clone()
        .with("REQUEST_URI", "/cgi-bin/resolve/admin?x=1");
    assert_eq!(
        own_path(&rewritten).as_deref(),
        Some("/cgi-bin/resolve/admin")
    );
    for odd in [
        "//evil.example/admin",
        "/cgi-bin/resolve/%61dmin",
        "/a\"b/admin",
    ] {
        let env = script.clone().with("REQUEST_URI", odd);
        assert_eq!(
            own_path(&env).as_deref(),
            Some("/~alice/cgi-bin/resolve/admin"),
            "{odd}"
        );
    }
    assert_eq!(own_path(&base), None);
}

#[test]
fn cookies_are_secure_over_https_and_other_methods_are_refused() {
    let site = site();
    let r = site.dashboard().answer(
        &env("GET", &Jar::default(), "203.0.113.9").with("HTTPS", "on"),
        &mut std::io::empty(),
    );
    let cookie = r.header_value("Set-Cookie").unwrap();
    assert!(cookie.ends_with("; Secure"), "{cookie}");
    let r = site.dashboard().answer(
        &env("PUT", &Jar::default(), "203.0.113.9"),
        &mut std::io::empty(),
    );
    assert_eq!(r.status, 405);
    assert_eq!(r.header_value("Allow"), Some("GET, HEAD, POST"));
    assert_eq!(r.header_value("X-Frame-Options"), Some("DENY"));
}

#[test]
fn a_refused_client_is_blocked_in_one_click_with_the_session_token_only() {
    let site = site();
    // 192.0.2.66 refused twice (journaled as the request path does).
    let hour = crate::core::journal::hour_of(START_MS);
    for _ in 0..2 {
        let entry = crate::core::journal::Entry::new(
            START_MS,
            Some("192.0.2.66"),
            &[
                crate::core::journal::Event::Request,
                crate::core::journal::Event::Refused("ip".into()),
            ],
        );
        assert_eq!(entry.hour, hour);
        site.store.journal_add(&entry).unwrap();
    }
    let mut jar = Jar::default();
    site.sign_in(&mut jar, PASSWORD, "203.0.113.9");
    let (_, page) = site.get(&mut jar);
    assert!(
        page.contains("name=\"client\" value=\"192.0.2.66\""),
        "a block button for the refused client: {page}"
    );
    let token = hidden(&page, "csrf");
    // Without the session's token, or signed out: nobody is blocked.
    for body in [
        "action=block&client=192.0.2.66".to_owned(),
        "action=block&client=192.0.2.66&csrf=00".to_owned(),
    ] {
        let (r, _) = site.post(&mut jar, &body, "203.0.113.9");
        assert_eq!(r.status, 403, "{body}");
    }
    let (r, _) = site.block(&mut Jar::default(), "192.0.2.66", &token);
    assert_eq!(r.status, 403, "no session");
    assert!(
        crate::app::controls::blocks::read(&site.store)
            .unwrap()
            .is_empty()
    );
    let (r, _) = site.block(&mut jar, "not-an-address", &token);
    assert_eq!(r.status, 403);
    // With it: blocked for a day, logged.
    let (r, _) = site.block(&mut jar, "192.0.2.66", &token);
    assert_eq!(r.status, 303);
    let list = crate::app::controls::blocks::read(&site.store).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].range.to_string(), "192.0.2.66/32");
    assert_eq!(list[0].until_ms, Some(START_MS + 86_400_000));
    assert!(
        site.log()
            .contains("dashboard: 192.0.2.66/32 blocked until"),
        "{}",
        site.log()
    );
}

mod blocks;
mod budgets;
mod sessions;
mod setup;
mod shown;
