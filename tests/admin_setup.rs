//! Setting a site up and changing its settings from the browser, through a real Apache
//! (mod_cgid, or mod_fcgid under RESOLVE_TEST_APACHE_MODE=fcgid), as an owner without a shell:
//! the one-time code read from its file, wrong and expired codes refused and budgeted per
//! address and network (strangers never keep the owner out), a form with mistakes keeping the
//! code, a site with settings set up again with none of them shown or changed, one setup saved
//! of eight sent at once with the code, the files written in one step with mode 600, the
//! settings saved or refused, the previous file put back, the hand-written JSON left as
//! written, a broken file explained at the dashboard, and the token in no answer.

mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use resolve::admin::session::SESSION_COOKIE;
use support::dashboard::{Browser, TARGET, hidden};
use support::system::give_to_server_user;
use support::temp::TempDir;
use support::{Apache, Request, Response};

const PASSWORD: &str = "correct horse battery staple";
const TOKEN: &str = "tok-SETUP-SECRET-4711";

/// A home for the site the server account may write in, holding `text` as `config.json`.
fn home(label: &str, text: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new(label);
    let home = dir.server_dir("resolve");
    let data = dir.server_dir("resolve/ratelimit");
    let file = home.join("config.json");
    let text = text.replace("@DATA@", data.to_str().expect("utf-8"));
    std::fs::write(&file, text).expect("write config.json");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    give_to_server_user(&file);
    (dir, file)
}

fn serve(label: &str, file: &Path) -> Apache {
    Apache::builder(label)
        .resolve_cgi()
        .set_env("RESOLVE_CONFIG", file.to_str().expect("utf-8"))
        .start()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every answer kept, to look for the token in all of them at the end.
struct Seen(Vec<String>);

impl Seen {
    fn keep(&mut self, r: Response) -> Response {
        self.0.push(r.everything());
        r
    }

    fn assert_no(&self, secret: &str) {
        for (i, r) in self.0.iter().enumerate() {
            assert!(!r.contains(secret), "answer {i} shows {secret}:\n{r}");
        }
    }
}

fn enc(s: &str) -> String {
    support::urlenc::encode(s)
}

fn setup_body(csrf: &str, code: &str, provider: &str, site: &str) -> String {
    format!(
        "action=setup&csrf={csrf}&code={}&provider={provider}&token={}&site={}\
         &spend_day=100&spend_month=1500&visitor_minute=30&visitor_day=300\
         &password={p}&password_again={p}",
        enc(code),
        enc(TOKEN),
        enc(site),
        p = enc(PASSWORD)
    )
}

fn code_of(file: &Path) -> String {
    read(&file.with_file_name("setup-code.txt"))
        .lines()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn setup_with_the_code_from_the_file() {
    let starter = resolve::config::starter::TEXT.replace("\"ratelimit\"", "\"@DATA@\"");
    let (_dir, file) = home("setup-code", &starter);
    let apache = serve("setup-code", &file);
    let mut seen = Seen(Vec::new());
    let mut browser = Browser::with_client(apache.client());
    let page = seen.keep(browser.get());
    assert_eq!(page.status, 200, "{}", page.everything());
    assert!(page.text().contains("Set up this site"), "{}", page.text());
    assert!(page.text().contains("resolve/setup-code.txt"));
    let site = apache.base_url();
    assert!(
        page.text().contains(&format!(">{site}</textarea>")),
        "the address is filled from the request:\n{}",
        page.text()
    );
    let code_file = file.with_file_name("setup-code.txt");
    assert_eq!(mode(&code_file), 0o600);
    let code = code_of(&file);
    assert!(
        !page.everything().contains(&code),
        "the code is not on the page"
    );
    let csrf = hidden(&page.text(), "csrf");
    let before = read(&file);

    // A wrong code: refused, counted as a wrong password is.
    let r = seen.keep(browser.post(&setup_body(&csrf, "AAAA-BBBB-CCCC-DDDD", "echo", &site)));
    assert_eq!(r.status, 403, "{}", r.everything());
    assert!(
        r.text().contains("Wrong setup code. 4 more tries"),
        "{}",
        r.text()
    );
    assert!(
        apache.wait_for_log("wrong setup code (failure 1 of 5", Duration::from_secs(5)),
        "{}",
        apache.error_log()
    );
    // The right code once it has expired: refused too.
    let expired = read(&code_file).replace(
        &read(&code_file)
            .lines()
            .find(|l| l.starts_with("expires: "))
            .unwrap()
            .to_owned(),
        "expires: 1000",
    );
    std::fs::write(&code_file, expired).unwrap();
    let r = seen.keep(browser.post(&setup_body(&csrf, &code, "echo", &site)));
    assert_eq!(r.status, 403, "{}", r.everything());
    assert!(
        apache.wait_for_log("wrong setup code (failure 2 of 5", Duration::from_secs(5)),
        "{}",
        apache.error_log()
    );
    assert_eq!(read(&file), before, "nothing written");
    // Opening the page again makes a new code.
    seen.keep(browser.get());
    let code = code_of(&file);
    // A paid provider without the site's address: the form says what to fix, nothing changes.
    let r = seen.keep(browser.post(&setup_body(&csrf, &code, "realdebrid", "")));
    assert_eq!(r.status, 400, "{}", r.everything());
    assert!(r.text().contains("id=\"site-problem\""), "{}", r.text());
    assert_eq!(read(&file), before, "nothing written");

    let r = seen.keep(browser.post(&setup_body(&csrf, &code, "realdebrid", &site)));
    assert_eq!(r.status, 303, "{}", r.everything());
    assert_eq!(r.header("Location"), Some(&*format!("{TARGET}?done=setup")));
    assert!(browser.cookie(SESSION_COOKIE).is_some(), "signed in");
    assert!(!code_file.exists(), "the code is removed");
    let written: serde_json::Value = serde_json::from_str(&read(&file)).unwrap();
    assert_eq!(
        written["provider"],
        serde_json::json!({"preset": "realdebrid", "token": TOKEN})
    );
    assert_eq!(written["allowed_origins"], serde_json::json!([site]));
    assert!(
        written["admin"]["password_hash"]
            .as_str()
            .unwrap()
            .starts_with("$argon2id$")
    );
    assert_eq!(mode(&file), 0o600);
    let backup = file.with_file_name("config.json.previous");
    assert_eq!(mode(&backup), 0o600);
    assert_eq!(read(&backup), before, "the starter is kept");
    let page = seen.keep(browser.get());
    assert_eq!(page.status, 200, "{}", page.everything());
    assert!(page.text().contains("<h2 id=\"settings\">Settings</h2>"));
    // Set up: the setup form is gone, for everyone.
    let mut stranger = Browser::with_client(apache.client());
    let r = seen.keep(stranger.get());
    assert!(
        r.text().contains("Sign in to the dashboard"),
        "{}",
        r.text()
    );
    let r = seen.keep(stranger.post(&setup_body(&csrf, &code, "echo", &site)));
    assert_ne!(r.status, 303, "{}", r.everything());
    seen.assert_no(TOKEN);
    seen.assert_no(PASSWORD);
    apache.settle_log();
    let log = apache.error_log();
    assert!(
        log.contains("dashboard: the site was set up from 127.0.0.1"),
        "{log}"
    );
    assert!(
        !log.contains(TOKEN) && !log.contains(PASSWORD) && !log.contains(&code),
        "{log}"
    );
}

/// The owner's own file: odd spacing, their order, fields the form never shows.
const HAND: &str = r#"{
  "page": {"site_name": "Ann’s links", "contact": "ann@example.com"},
  "provider": {"preset": "alldebrid",   "token": "@TOKEN@"},
  "store": {"kind": "file", "dir": "@DATA@"},
  "cache": {"ttl_secs": 600},
  "spend": [
    {"name": "month", "limit": 900, "window_secs": 2592000},
    {"name": "day", "limit": 40, "window_secs": 86400}
  ],
  "rules": [{"name": "ip", "key": "ip", "limit": 20, "window_secs": 60}],
  "allowed_origins": ["https://ann.example"],
  "admin": {"password_hash": "@HASH@"}
}
"#;

fn settings_body(csrf: &str, edit: &[(&str, &str)]) -> String {
    let mut fields = vec![
        ("action", "settings"),
        ("csrf", csrf),
        ("provider", "alldebrid"),
        ("token", ""),
        ("spend_day", "40"),
        ("spend_month", "900"),
        ("visitor_minute", "20"),
        ("visitor_day", ""),
        ("origins", "https://ann.example"),
        ("block", ""),
        ("allow", ""),
        ("password", ""),
        ("password_again", ""),
    ];
    for (k, v) in edit {
        fields.retain(|(n, _)| n != k);
        fields.push((k, v));
    }
    fields
        .iter()
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[test]
fn settings_saved_refused_and_put_back_leaving_the_hand_written_json() {
    let text = HAND
        .replace("@TOKEN@", TOKEN)
        .replace("@HASH@", &support::dashboard::password_hash(PASSWORD));
    let (dir, file) = home("settings", &text);
    let apache = serve("settings", &file);
    let original = read(&file);
    let mut seen = Seen(Vec::new());
    let mut browser = Browser::with_client(apache.client());
    assert_eq!(seen.keep(browser.sign_in(PASSWORD)).status, 303);
    let page = seen.keep(browser.get());
    assert_eq!(page.status, 200, "{}", page.everything());
    for filled in [
        "<option value=\"alldebrid\" selected>",
        "name=\"spend_day\" inputmode=\"numeric\" pattern=\"[0-9]*\" value=\"40\"",
        ">https://ann.example</textarea>",
    ] {
        assert!(page.text().contains(filled), "{filled}:\n{}", page.text());
    }
    assert!(
        !page.text().contains("id=\"restore\""),
        "no previous file yet"
    );
    let csrf = hidden(&page.text(), "csrf");

    // Without the form's token, or from another site: refused, nothing written.
    let r = seen.keep(browser.post(&settings_body("0123", &[("spend_day", "41")])));
    assert_eq!(r.status, 403, "{}", r.everything());
    let r = seen.keep(
        browser.send(
            Request::post_form(TARGET, settings_body(&csrf, &[("spend_day", "41")]))
                .header("Origin", "https://evil.example")
                .header("Sec-Fetch-Site", "cross-site"),
        ),
    );
    assert_eq!(r.status, 403, "{}", r.everything());
    // Invalid: the form says what to fix, and the file is as it was.
    let r = seen.keep(browser.post(&settings_body(
        &csrf,
        &[("block", "not an address"), ("spend_day", "41")],
    )));
    assert_eq!(r.status, 400, "{}", r.everything());
    assert!(r.text().contains("Nothing was changed"), "{}", r.text());
    assert!(r.text().contains("id=\"block-problem\""), "{}", r.text());
    let r = seen.keep(browser.post(&settings_body(&csrf, &[("visitor_minute", "many")])));
    assert_eq!(r.status, 400, "{}", r.everything());
    assert!(
        r.text().contains("id=\"visitor_minute-problem\""),
        "{}",
        r.text()
    );
    assert_eq!(read(&file), original);
    assert!(!file.with_file_name("config.json.previous").exists());

    // Valid: written in one step (a new file renamed over the old), only what changed.
    let inode = std::fs::metadata(&file).unwrap().ino();
    let r = seen.keep(browser.post(&settings_body(
        &csrf,
        &[
            ("spend_day", "50"),
            ("origins", "https://ann.example\nhttps://www.ann.example"),
            ("block", "203.0.113.0/24"),
        ],
    )));
    assert_eq!(r.status, 303, "{}", r.everything());
    let saved = read(&file);
    assert_ne!(
        std::fs::metadata(&file).unwrap().ino(),
        inode,
        "renamed into place"
    );
    assert_eq!(
        saved,
        original
            .replace(
                "{\"name\": \"day\", \"limit\": 40,",
                "{\"name\": \"day\", \"limit\": 50,"
            )
            .replace(
                "\"allowed_origins\": [\"https://ann.example\"],",
                "\"allowed_origins\": [\"https://ann.example\",\"https://www.ann.example\"],"
            )
            .replacen("}\n}\n", "},\n  \"block\": [\"203.0.113.0/24\"]\n}\n", 1),
        "only the changed values differ, the rest byte for byte"
    );
    assert_eq!(mode(&file), 0o600);
    let backup = file.with_file_name("config.json.previous");
    assert_eq!(read(&backup), original);
    assert_eq!(mode(&backup), 0o600);
    let mut names: Vec<String> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        // The data directory and its mark (made at a sweep, which a request may run).
        .filter(|n| n != "ratelimit" && n != ".ratelimit.made")
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["config.json", "config.json.previous"],
        "no file left over"
    );
    let page = seen.keep(browser.get_target(r.header("Location").unwrap()));
    assert!(page.text().contains("Saved."), "{}", page.text());
    assert!(page.text().contains("id=\"restore\""), "{}", page.text());
    // A new token: written, never shown.
    let new_token = "tok-NEW-SECRET-0815";
    let r = seen.keep(browser.post(&settings_body(
        &csrf,
        &[
            ("spend_day", "50"),
            ("token", new_token),
            ("current_password", PASSWORD),
            ("origins", "https://ann.example\nhttps://www.ann.example"),
            ("block", "203.0.113.0/24"),
        ],
    )));
    assert_eq!(r.status, 303, "{}", r.everything());
    assert!(read(&file).contains(new_token));
    seen.keep(browser.get());

    // The button puts the previous file back (and keeps the one it replaces).
    let replaced = read(&file);
    let r = seen.keep(browser.post(&format!("action=restore&csrf={csrf}")));
    assert_eq!(r.status, 303, "{}", r.everything());
    assert_eq!(read(&file), saved);
    assert_eq!(read(&backup), replaced);
    seen.keep(browser.get());
    seen.assert_no(TOKEN);
    seen.assert_no(new_token);
    apache.settle_log();
    let log = apache.error_log();
    assert!(
        log.contains("dashboard: the settings were saved from 127.0.0.1"),
        "{log}"
    );
    assert!(!log.contains(TOKEN) && !log.contains(new_token), "{log}");
    drop(dir);
}

/// The starter, believing the address 127.0.0.1 forwards (so that a test can come from many
/// networks).
fn starter_behind_a_proxy() -> String {
    resolve::config::starter::TEXT
        .replace("\"ratelimit\"", "\"@DATA@\"")
        .replace(
            "\"trusted_proxies\": []",
            "\"trusted_proxies\": [\"127.0.0.1\"]",
        )
}

/// POST of a setup form as sent from `address` (through the trusted proxy).
fn post_from(browser: &mut Browser, address: &str, body: &str) -> Response {
    browser.send(
        Request::post_form(TARGET, body.to_owned())
            .header("Accept", "text/html")
            .header("X-Forwarded-For", address),
    )
}

#[test]
fn strangers_wrong_codes_from_many_networks_never_keep_the_owner_out() {
    let (_dir, file) = home("setup-strangers", &starter_behind_a_proxy());
    let apache = serve("setup-strangers", &file);
    let mut browser = Browser::with_client(apache.client());
    let page = browser.get();
    assert_eq!(page.status, 200, "{}", page.everything());
    let csrf = hidden(&page.text(), "csrf");
    let site = apache.base_url();
    let code = code_of(&file);
    // Thirty wrong codes: five from each of six /64s in three /48s.
    let wrong = setup_body(&csrf, "AAAA-BBBB-CCCC-DDDD", "echo", &site);
    let mut refused = 0;
    for net in ["a", "b", "c"] {
        for sixty_four in [1, 2] {
            for _ in 0..5 {
                let from = format!("2001:db8:{net}:{sixty_four}::5");
                let r = post_from(&mut browser, &from, &wrong);
                assert_eq!(r.status, 403, "{}", r.everything());
                assert!(r.text().contains("Wrong setup code"), "{}", r.text());
                refused += 1;
            }
        }
    }
    assert_eq!(refused, 30);
    // What held stays: a sixth wrong code from one of those /64s waits.
    let r = post_from(&mut browser, "2001:db8:a:1::9", &wrong);
    assert_eq!(r.status, 429, "{}", r.everything());
    assert!(r.header("Retry-After").is_some());
    // A new network's first wrong code is its first.
    let r = post_from(&mut browser, "2001:db8:e:1::1", &wrong);
    assert_eq!(r.status, 403, "{}", r.everything());
    assert!(r.text().contains("4 more tries"), "{}", r.text());
    // The owner, from a new address, with the right code: set up.
    let r = post_from(
        &mut browser,
        "2001:db8:f:1::1",
        &setup_body(&csrf, &code, "echo", &site),
    );
    assert_eq!(r.status, 303, "{}", r.everything());
    assert!(browser.cookie(SESSION_COOKIE).is_some(), "signed in");
    assert!(
        apache.wait_for_log(
            "dashboard: the site was set up from 2001:db8:f:1::/64",
            Duration::from_secs(5)
        ),
        "{}",
        apache.error_log()
    );
}

/// A site with the starter, served; the browser holding the setup page's form cookie, the
/// page's token and the code.
fn starter_site(label: &str) -> (TempDir, PathBuf, Apache, Browser, String, String) {
    let starter = resolve::config::starter::TEXT.replace("\"ratelimit\"", "\"@DATA@\"");
    let (dir, file) = home(label, &starter);
    let apache = serve(label, &file);
    let mut browser = Browser::with_client(apache.client());
    let page = browser.get();
    assert_eq!(page.status, 200, "{}", page.everything());
    let csrf = hidden(&page.text(), "csrf");
    let code = code_of(&file);
    (dir, file, apache, browser, csrf, code)
}

#[test]
fn a_form_with_mistakes_keeps_the_code_and_a_form_without_one_is_no_wrong_code() {
    let (_dir, _file, apache, mut browser, csrf, code) = starter_site("setup-typos");
    let mut seen = Seen(Vec::new());
    let site = apache.base_url();
    // A password too short, with the right code: the code stays in its field, the secrets
    // do not.
    let short = setup_body(&csrf, &code, "realdebrid", &site).replace(&enc(PASSWORD), "short");
    let r = seen.keep(browser.post(&short));
    assert_eq!(r.status, 400, "{}", r.everything());
    assert!(r.text().contains("id=\"password-problem\""), "{}", r.text());
    let input = |page: &str, name: &str| {
        let at = page
            .find(&format!("id=\"{name}\" name=\"{name}\""))
            .unwrap_or_else(|| panic!("no {name} in {page}"));
        page[at..at + page[at..].find('>').unwrap()].to_owned()
    };
    assert!(
        input(&r.text(), "code").contains(&format!("value=\"{code}\"")),
        "{}",
        input(&r.text(), "code")
    );
    for secret in ["token", "password", "password_again"] {
        assert!(input(&r.text(), secret).contains("value=\"\""), "{secret}");
    }
    // Sent with the code field emptied, a few times: what is missing is said, nothing counted.
    for _ in 0..6 {
        let r = seen.keep(browser.post(&setup_body(&csrf, "", "echo", &site)));
        assert_eq!(r.status, 400, "{}", r.everything());
        assert!(r.text().contains("id=\"code-problem\""), "{}", r.text());
        assert!(!r.text().contains("Wrong setup code"), "{}", r.text());
    }
    // The first wrong code is the first failure, and stays in its field to be corrected.
    let r = seen.keep(browser.post(&setup_body(&csrf, "AAAA-BBBB-CCCC-DDDD", "echo", &site)));
    assert_eq!(r.status, 403, "{}", r.everything());
    assert!(
        r.text().contains("Wrong setup code. 4 more tries"),
        "{}",
        r.text()
    );
    assert!(input(&r.text(), "code").contains("value=\"AAAA-BBBB-CCCC-DDDD\""));
    assert!(
        apache.wait_for_log("wrong setup code (failure 1 of 5", Duration::from_secs(5)),
        "{}",
        apache.error_log()
    );
    let r = seen.keep(browser.post(&setup_body(&csrf, &code, "echo", &site)));
    assert_eq!(r.status, 303, "{}", r.everything());
    seen.assert_no(PASSWORD);
    apache.settle_log();
    let log = apache.error_log();
    assert!(!log.contains("failure 2 of 5"), "{log}");
    assert!(!log.contains(PASSWORD), "{log}");
}

#[test]
fn the_first_setup_offers_the_address_with_and_without_www() {
    let (_dir, file, apache, mut browser, _, _) = starter_site("setup-www");
    // Asked at its domain name, the page offers it with and without www.
    let page = browser.send(
        Request::get(TARGET)
            .no_framing()
            .header("Host", "links.example")
            .header("Connection", "close")
            .header("Accept", "text/html"),
    );
    assert_eq!(page.status, 200, "{}", page.everything());
    assert!(
        page.text()
            .contains(">http://links.example\nhttp://www.links.example</textarea>"),
        "{}",
        page.text()
    );
    // Both are written, as sent (one a line).
    let csrf = hidden(&page.text(), "csrf");
    let both = "http://links.example\r\nhttp://www.links.example";
    let r = browser.post(&setup_body(&csrf, &code_of(&file), "echo", both));
    assert_eq!(r.status, 303, "{}", r.everything());
    let written: serde_json::Value = serde_json::from_str(&read(&file)).unwrap();
    assert_eq!(
        written["allowed_origins"],
        serde_json::json!(["http://links.example", "http://www.links.example"])
    );
    drop(apache);
}

#[test]
fn after_setup_the_dashboard_says_the_site_is_set_up_and_what_next() {
    let (_dir, _file, apache, mut browser, csrf, code) = starter_site("setup-next");
    let site = apache.base_url();
    let r = browser.post(&setup_body(&csrf, &code, "echo", &site));
    assert_eq!(r.status, 303, "{}", r.everything());
    let to = r.header("Location").expect("a Location").to_owned();
    assert_eq!(to, format!("{TARGET}?done=setup"));
    let page = browser.get_target(&to);
    assert_eq!(page.status, 200, "{}", page.everything());
    for says in [
        "The site is set up",
        &format!("{site}/resolve/"),
        "The echo provider answers each link with itself",
        "Cron Jobs",
        "report --only-problems",
        "Cron Email",
    ] {
        assert!(page.text().contains(says), "{says}:\n{}", page.text());
    }
    // Said once: the dashboard opened again does not say it.
    let again = browser.get();
    assert_eq!(again.status, 200, "{}", again.everything());
    assert!(!again.text().contains("The site is set up"));
}

/// Written by hand with a shell: a provider, limits, two addresses, no `admin` section (as
/// after a forgotten password, INSTALL.txt says to remove it).
const BY_HAND: &str = r#"{
  "provider": {"preset": "alldebrid", "token": "@TOKEN@"},
  "store": {"kind": "file", "dir": "@DATA@"},
  "spend": [{"name": "day", "limit": 43, "window_secs": 86400}],
  "rules": [{"name": "ip", "key": "ip", "limit": 19, "window_secs": 60}],
  "allowed_origins": ["https://ann.example", "https://www.ann.example"]
}
"#;

#[test]
fn a_site_with_settings_shows_none_of_them_before_the_code() {
    let (_dir, file) = home("setup-hidden", &BY_HAND.replace("@TOKEN@", TOKEN));
    let apache = serve("setup-hidden", &file);
    let mut seen = Seen(Vec::new());
    let mut stranger = Browser::with_client(apache.client());
    let page = seen.keep(stranger.get());
    assert_eq!(page.status, 200, "{}", page.everything());
    assert!(page.text().contains("Set up this site"), "{}", page.text());
    for hidden_value in [
        "alldebrid",
        "AllDebrid\" selected",
        "value=\"43\"",
        "value=\"19\"",
        "ann.example",
    ] {
        assert!(
            !page.text().contains(hidden_value),
            "{hidden_value} shown before a code:\n{}",
            page.text()
        );
    }
    assert!(
        page.text().contains("id=\"password_again\""),
        "{}",
        page.text()
    );
    // A wrong code: nothing more is shown.
    let csrf = hidden(&page.text(), "csrf");
    let r = seen.keep(stranger.post(&setup_body(&csrf, "AAAA-BBBB-CCCC-DDDD", "echo", "")));
    assert_eq!(r.status, 403, "{}", r.everything());
    assert!(!r.text().contains("ann.example"), "{}", r.text());
    assert!(!r.text().contains("value=\"43\""), "{}", r.text());
    seen.assert_no(TOKEN);
}

#[test]
fn setting_up_again_keeps_every_setting_and_both_origins() {
    let (_dir, file) = home("setup-again", &BY_HAND.replace("@TOKEN@", TOKEN));
    let apache = serve("setup-again", &file);
    let before = read(&file);
    let mut seen = Seen(Vec::new());
    // The owner sets it up again with the code: a new password, every setting kept.
    let mut owner = Browser::with_client(apache.client());
    let page = seen.keep(owner.get());
    let csrf = hidden(&page.text(), "csrf");
    let code = code_of(&file);
    let r = seen.keep(owner.post(&setup_body(
        &csrf,
        &code,
        "alldebrid",
        "https://ann.example",
    )));
    assert_eq!(r.status, 303, "{}", r.everything());
    let written: serde_json::Value = serde_json::from_str(&read(&file)).unwrap();
    assert_eq!(
        written["allowed_origins"],
        serde_json::json!(["https://ann.example", "https://www.ann.example"])
    );
    assert_eq!(written["provider"]["token"], TOKEN);
    assert_eq!(written["spend"][0]["limit"], 43);
    assert!(
        written["admin"]["password_hash"]
            .as_str()
            .unwrap()
            .starts_with("$argon2id$")
    );
    assert_eq!(read(&file.with_file_name("config.json.previous")), before);
    // A visitor on www. is still served by the site (not "only from its own site").
    let r = apache
        .client()
        .send(
            &Request::post_form("/cgi-bin/resolve", "link=")
                .header("Accept", "application/json")
                .header("Origin", "https://www.ann.example"),
        )
        .unwrap();
    assert!(
        !r.text().contains("only be used from its own site"),
        "{}",
        r.everything()
    );
    assert_ne!(r.status, 403, "{}", r.everything());
    let page = seen.keep(owner.get_target(&format!("{TARGET}?done=setup")));
    assert!(
        page.text().contains("The site is set up"),
        "{}",
        page.text()
    );
    seen.assert_no(TOKEN);
    seen.assert_no(PASSWORD);
}

#[test]
fn a_broken_configuration_is_explained_at_the_dashboard_not_to_visitors() {
    // A comma missing at the end of line 3; the token is in the file.
    let text = "{\n  \"provider\": {\"preset\": \"alldebrid\", \"token\": \"@TOKEN@\"},\n  \
                \"store\": {\"kind\": \"file\", \"dir\": \"@DATA@\"}\n  \"allowed_origins\": \
                []\n}\n"
        .replace("@TOKEN@", TOKEN);
    let (_dir, file) = home("setup-broken", &text);
    let apache = serve("setup-broken", &file);
    let mut browser = Browser::with_client(apache.client());
    let r = browser.get();
    assert_eq!(r.status, 503, "{}", r.everything());
    let page = r.text();
    assert!(page.contains("The settings cannot be read"), "{page}");
    assert!(!page.contains("not set up yet</h1>"), "{page}");
    assert!(
        !page.contains("name=\"code\""),
        "not the setup form:\n{page}"
    );
    for says in [
        "line 4 column 3",
        "go to line 4, column 3",
        "~/resolve/config.json",
        "config.json.previous",
        "<strong>Errors</strong> page (Metrics &gt; Errors)",
    ] {
        assert!(page.contains(says), "{says}:\n{page}");
    }
    assert!(!r.everything().contains(TOKEN), "{}", r.everything());
    let home_dir = file.parent().unwrap().parent().unwrap();
    assert!(
        !page.contains(home_dir.to_str().unwrap()),
        "the home folder is not shown:\n{page}"
    );
    // The log says the same.
    assert!(
        apache.wait_for_log("line 4 column 3", Duration::from_secs(5)),
        "{}",
        apache.error_log()
    );
    // A visitor still gets the visitor's page, with no detail.
    let r = apache
        .client()
        .send(&Request::get("/cgi-bin/resolve").header("Accept", "text/html"))
        .unwrap();
    assert_eq!(r.status, 503, "{}", r.everything());
    assert!(r.text().contains("not set up yet"), "{}", r.text());
    assert!(!r.text().contains("line 4"), "{}", r.text());
    // Mended: the dashboard opens (the setup page of a site with settings).
    std::fs::write(
        &file,
        read(&file).replace("}\n  \"allowed", "},\n  \"allowed"),
    )
    .unwrap();
    let r = browser.get();
    assert_eq!(r.status, 200, "{}", r.everything());
    assert!(r.text().contains("Set up this site"), "{}", r.text());
}

#[test]
fn of_eight_setups_sent_at_once_with_the_right_code_one_is_saved() {
    let starter = resolve::config::starter::TEXT.replace("\"ratelimit\"", "\"@DATA@\"");
    let (_dir, file) = home("setup-race", &starter);
    let apache = serve("setup-race", &file);
    let site = apache.base_url();
    // Eight browsers, each with its form; one code.
    let mut forms: Vec<(Browser, String)> = (0..8)
        .map(|_| {
            let mut b = Browser::with_client(apache.client());
            let page = b.get();
            assert_eq!(page.status, 200, "{}", page.everything());
            let csrf = hidden(&page.text(), "csrf");
            (b, csrf)
        })
        .collect();
    let code = code_of(&file);
    let start = std::sync::Barrier::new(forms.len());
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let runs: Vec<_> = forms
            .iter_mut()
            .map(|(browser, csrf)| {
                let (start, code, site) = (&start, &code, &site);
                s.spawn(move || {
                    let body = setup_body(csrf, code, "echo", site);
                    start.wait();
                    browser.post(&body).status
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    eprintln!("eight setups at once: {statuses:?}");
    assert_eq!(
        statuses.iter().filter(|s| **s == 303).count(),
        1,
        "one setup saved: {statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| matches!(s, 303 | 403 | 409 | 429)),
        "{statuses:?}"
    );
    let written: serde_json::Value = serde_json::from_str(&read(&file)).unwrap();
    assert!(written["admin"]["password_hash"].is_string());
    assert!(!file.with_file_name("setup-code.txt").exists());
    apache.settle_log();
    assert_eq!(
        apache
            .error_log()
            .matches("the site was set up from")
            .count(),
        1,
        "{}",
        apache.error_log()
    );
}
