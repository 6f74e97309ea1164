//! Setting a site up and changing its settings from the browser, through a real Apache
//! (mod_cgid, or mod_fcgid under RESOLVE_TEST_APACHE_MODE=fcgid), as an owner without a shell:
//! the one-time code read from its file, wrong and expired codes refused and budgeted, the
//! files written in one step with mode 600, the settings saved or refused, the previous file
//! put back, the hand-written JSON left as written, and the token in no answer.

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
        page.text().contains(&format!("value=\"{site}\"")),
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
    assert_eq!(r.header("Location"), Some(TARGET));
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
        .filter(|n| n != "ratelimit")
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
