//! The dashboard's settings through a real Apache (mod_cgid, or mod_fcgid under
//! RESOLVE_TEST_APACHE_MODE=fcgid), where an owner with a leaked session or a slip of the
//! finger would be hurt: block and allow entries that shut everyone (or the owner) out, or let
//! everyone past, and visitor limits all taken away, saved only once confirmed; a new password,
//! token or provider only with the current password, a wrong one counted as a failed sign-in;
//! "put the previous settings back" keeping the password and saying what it put back; each
//! provider's token kept across a switch; one log line for every refused form.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use resolve::admin::session::SESSION_COOKIE;
use support::dashboard::{Browser, hidden};
use support::system::give_to_server_user;
use support::temp::TempDir;
use support::{Apache, Response};

const PASSWORD: &str = "correct horse battery staple";
const TOKEN: &str = "tok-KEPT-SECRET-4711";

/// The owner's file: a paid provider with its token, spend and visitor limits, their site.
const FILE: &str = r#"{
  "provider": {"preset": "alldebrid", "token": "@TOKEN@"},
  "store": {"kind": "file", "dir": "@DATA@"},
  "spend": [
    {"name": "month", "limit": 900, "window_secs": 2592000},
    {"name": "day", "limit": 40, "window_secs": 86400}
  ],
  "rules": [{"name": "ip", "key": "ip", "limit": 20, "window_secs": 60}],
  "allowed_origins": ["https://ann.example"],
  "admin": {"password_hash": "@HASH@"}
}
"#;

/// A site with `FILE` as its configuration in a home the server account may write in.
struct Owner {
    _dir: TempDir,
    file: PathBuf,
    apache: Apache,
}

impl Owner {
    fn new(label: &str) -> Owner {
        let dir = TempDir::new(label);
        let home = dir.server_dir("resolve");
        let data = dir.server_dir("resolve/ratelimit");
        let file = home.join("config.json");
        let text = FILE
            .replace("@DATA@", data.to_str().expect("utf-8"))
            .replace("@TOKEN@", TOKEN)
            .replace("@HASH@", &support::dashboard::password_hash(PASSWORD));
        write(&file, &text);
        let apache = Apache::builder(label)
            .resolve_cgi()
            .set_env("RESOLVE_CONFIG", file.to_str().expect("utf-8"))
            .start();
        Owner {
            _dir: dir,
            file,
            apache,
        }
    }

    /// A browser signed in with `password`, and the settings form's token.
    fn signed_in(&self, password: &str) -> (Browser, String) {
        let mut browser = Browser::with_client(self.apache.client());
        let r = browser.sign_in(password);
        assert_eq!(r.status, 303, "{}", r.everything());
        let page = browser.get();
        assert_eq!(page.status, 200, "{}", page.everything());
        let csrf = hidden(&page.text(), "csrf");
        (browser, csrf)
    }

    fn text(&self) -> String {
        read(&self.file)
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.text()).expect("JSON")
    }

    /// The error log's lines that name the dashboard, once it is still.
    fn dashboard_lines(&self) -> Vec<String> {
        self.apache.settle_log();
        self.apache
            .error_log()
            .lines()
            .filter(|l| l.contains("dashboard"))
            .map(str::to_owned)
            .collect()
    }
}

fn write(file: &Path, text: &str) {
    std::fs::write(file, text).expect("write");
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600)).unwrap();
    give_to_server_user(file);
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn enc(s: &str) -> String {
    support::urlenc::encode(s)
}

/// The settings form as `FILE` fills it, with `edit`'s fields changed.
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

/// The value the confirmation's checkbox sends, from a page that asks for it.
fn confirm_key(r: &Response) -> String {
    let page = r.text();
    let at = page
        .find("id=\"confirm\" name=\"confirm\" type=\"checkbox\" value=\"")
        .unwrap_or_else(|| panic!("no confirmation asked:\n{page}"));
    let rest = &page[at..];
    let rest = &rest[rest.find("value=\"").unwrap() + 7..];
    rest[..rest.find('"').unwrap()]
        .replace("&#x2F;", "/")
        .replace("&#47;", "/")
        .replace("&amp;", "&")
}

#[test]
fn block_and_allow_entries_that_shut_everyone_out_are_saved_only_once_confirmed() {
    let owner = Owner::new("settings-reach");
    let original = owner.text();
    let (mut browser, csrf) = owner.signed_in(PASSWORD);
    // Each of these the boxes saved at once; now each is asked about, and nothing is written.
    for (edit, says) in [
        (
            ("block", "0.0.0.0/0"),
            "0.0.0.0/0 covers every IPv4 address",
        ),
        (("block", "::/0"), "::/0 covers every IPv6 address"),
        (("block", "127.0.0.1"), "holds your own address 127.0.0.1"),
        (("block", "10.0.0.0/8"), "wider than an IPv4 /16"),
        (
            ("allow", "0.0.0.0/0"),
            "lets past the visitor limits every visitor",
        ),
        (("visitor_minute", ""), "no visitor limit"),
    ] {
        let r = browser.post(&settings_body(&csrf, &[edit]));
        assert_eq!(r.status, 400, "{edit:?}: {}", r.everything());
        let text = r.text();
        assert!(text.contains(says), "{edit:?}: {says}\n{text}");
        assert!(text.contains("Confirm what this saves"), "{edit:?}\n{text}");
        assert!(text.contains("Nothing was changed"), "{edit:?}\n{text}");
        assert_eq!(owner.text(), original, "{edit:?}: nothing written");
    }
    // A confirmation of one set of concerns does not pass another.
    let r = browser.post(&settings_body(&csrf, &[("block", "::/0")]));
    let other = confirm_key(&r);
    let r = browser.post(&settings_body(
        &csrf,
        &[("block", "0.0.0.0/0"), ("confirm", &other)],
    ));
    assert_eq!(r.status, 400, "{}", r.everything());
    assert_eq!(owner.text(), original);
    // An ordinary range needs no confirmation; a flagged one is saved once confirmed.
    let r = browser.post(&settings_body(&csrf, &[("block", "203.0.113.0/24")]));
    assert_eq!(r.status, 303, "{}", r.everything());
    assert_eq!(owner.json()["block"], serde_json::json!(["203.0.113.0/24"]));
    let wide = [("block", "203.0.113.0/24\n10.0.0.0/8")];
    let r = browser.post(&settings_body(&csrf, &wide));
    assert_eq!(r.status, 400, "{}", r.everything());
    let key = confirm_key(&r);
    let r = browser.post(&settings_body(&csrf, &[wide[0], ("confirm", key.as_str())]));
    assert_eq!(r.status, 303, "{}", r.everything());
    assert_eq!(
        owner.json()["block"],
        serde_json::json!(["203.0.113.0/24", "10.0.0.0/8"])
    );
    // The owner is still let in: nothing that holds their address was saved.
    assert_eq!(browser.get().status, 200);
    let lines = owner.dashboard_lines();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("the settings were not saved from 127.0.0.1")),
        "{lines:#?}"
    );
}

#[test]
fn a_new_token_password_or_provider_needs_the_current_password() {
    let owner = Owner::new("settings-current");
    let original = owner.text();
    let (mut browser, csrf) = owner.signed_in(PASSWORD);
    let new_token = "tok-NEW-SECRET-0815";
    let new_password = "a brand new password for ann";
    for edit in [
        vec![("token", new_token)],
        vec![("provider", "echo")],
        vec![("password", new_password), ("password_again", new_password)],
    ] {
        let r = browser.post(&settings_body(&csrf, &edit));
        assert_eq!(r.status, 403, "{edit:?}: {}", r.everything());
        assert!(
            r.text().contains("Type your current password.")
                && r.text().contains("id=\"current_password-problem\""),
            "{edit:?}: {}",
            r.text()
        );
        assert_eq!(owner.text(), original, "{edit:?}: nothing written");
    }
    // A wrong current password is a failed sign-in: counted, logged, said.
    let r = browser.post(&settings_body(
        &csrf,
        &[
            ("token", new_token),
            ("current_password", "not the password at all"),
        ],
    ));
    assert_eq!(r.status, 403, "{}", r.everything());
    assert!(r.text().contains("Wrong current password."), "{}", r.text());
    assert_eq!(owner.text(), original);
    // Other settings save as before, without it.
    let r = browser.post(&settings_body(&csrf, &[("spend_day", "41")]));
    assert_eq!(r.status, 303, "{}", r.everything());
    assert_eq!(owner.json()["spend"][1]["limit"], 41);
    // With the right one, the token is saved.
    let r = browser.post(&settings_body(
        &csrf,
        &[
            ("spend_day", "41"),
            ("token", new_token),
            ("current_password", PASSWORD),
        ],
    ));
    assert_eq!(r.status, 303, "{}", r.everything());
    assert_eq!(owner.json()["provider"]["token"], new_token);
    // Wrong current passwords spend the sign-in budgets, as wrong passwords at the sign-in
    // form do: a copied session cookie (without the browser's device cookie) spends the
    // address's; past it, even the right one waits, and so does signing in at this address.
    let mut thief = Browser::with_client(owner.apache.client());
    thief.set_cookie(
        SESSION_COOKIE,
        browser.cookie(SESSION_COOKIE).expect("a session"),
    );
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let r = thief.post(&settings_body(
            &csrf,
            &[
                ("spend_day", "41"),
                ("token", "tok-THIRD"),
                ("current_password", "still not the password"),
            ],
        ));
        statuses.push(r.status);
    }
    assert_eq!(statuses, [403; 5]);
    let r = thief.post(&settings_body(
        &csrf,
        &[
            ("spend_day", "41"),
            ("token", "tok-THIRD"),
            ("current_password", PASSWORD),
        ],
    ));
    assert_eq!(r.status, 429, "after {statuses:?}: {}", r.everything());
    assert_eq!(owner.json()["provider"]["token"], new_token);
    let mut other = Browser::with_client(owner.apache.client());
    assert_eq!(other.sign_in(PASSWORD).status, 429);
    let lines = owner.dashboard_lines();
    for needle in [
        "dashboard sign-in failed for 127.0.0.1: wrong current password (failure 1 of 5",
        "without the current password",
        "the current password was given",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(needle)),
            "{needle}:\n{lines:#?}"
        );
    }
    let log = owner.apache.error_log();
    assert!(!log.contains(new_token) && !log.contains(PASSWORD), "{log}");
}

#[test]
fn putting_the_previous_settings_back_keeps_the_password_and_says_what_it_put_back() {
    let owner = Owner::new("settings-restore");
    let (mut browser, csrf) = owner.signed_in(PASSWORD);
    let new_password = "a brand new password for ann";
    let r = browser.post(&settings_body(
        &csrf,
        &[
            ("spend_day", "55"),
            ("block", "203.0.113.0/24"),
            ("password", new_password),
            ("password_again", new_password),
            ("current_password", PASSWORD),
        ],
    ));
    assert_eq!(r.status, 303, "{}", r.everything());
    let hash = owner.json()["admin"]["password_hash"].clone();
    let page = browser.get();
    assert_eq!(page.status, 200, "signed in again: {}", page.everything());
    let csrf = hidden(&page.text(), "csrf");
    let r = browser.post(&format!("action=restore&csrf={csrf}"));
    assert_eq!(r.status, 303, "{}", r.everything());
    let json = owner.json();
    assert_eq!(
        json["admin"]["password_hash"], hash,
        "the new password kept"
    );
    assert_eq!(json["spend"][1]["limit"], 40, "the day's limit put back");
    assert!(json.get("block").is_none(), "{json}");
    // Still signed in, and told what was put back.
    let page = browser.get_target(r.header("Location").expect("Location"));
    assert_eq!(page.status, 200, "{}", page.everything());
    for said in [
        "The previous settings are back: the paid calls per day, the blocked addresses.",
        "Your dashboard password and sign-ins were kept",
    ] {
        assert!(page.text().contains(said), "{said}\n{}", page.text());
    }
    // The old password no longer opens the dashboard; the new one does.
    let mut other = Browser::with_client(owner.apache.client());
    assert_eq!(other.sign_in(PASSWORD).status, 403);
    assert_eq!(other.sign_in(new_password).status, 303);
    let lines = owner.dashboard_lines();
    assert!(
        lines.iter().any(|l| l.contains(
            "the previous settings were put back (spend_day, block), the dashboard password kept"
        )),
        "{lines:#?}"
    );
}

#[test]
fn putting_back_a_file_without_a_password_keeps_the_site_set_up() {
    let owner = Owner::new("settings-restore-starter");
    // What a browser setup leaves: the starter it replaced, with no admin section.
    let starter = format!(
        "{{\"provider\": {{\"kind\": \"echo\"}}, \"store\": {{\"kind\": \"file\", \"dir\": {}}}}}\n",
        owner.json()["store"]["dir"]
    );
    write(&owner.file.with_file_name("config.json.previous"), &starter);
    let (mut browser, csrf) = owner.signed_in(PASSWORD);
    let r = browser.post(&format!("action=restore&csrf={csrf}"));
    assert_eq!(r.status, 303, "{}", r.everything());
    let json = owner.json();
    assert_eq!(json["provider"], serde_json::json!({"kind": "echo"}));
    assert!(json["admin"]["password_hash"].is_string(), "{json}");
    let page = browser.get_target(r.header("Location").expect("Location"));
    assert_eq!(page.status, 200, "{}", page.everything());
    assert!(!page.text().contains("Set up this site"), "{}", page.text());
    assert!(
        page.text().contains("the provider, the API token"),
        "{}",
        page.text()
    );
    assert!(browser.cookie(SESSION_COOKIE).is_some());
}

#[test]
fn each_providers_token_survives_a_switch_and_back() {
    let owner = Owner::new("settings-kept-token");
    let (mut browser, csrf) = owner.signed_in(PASSWORD);
    let mut answers = Vec::new();
    let r = browser.post(&settings_body(
        &csrf,
        &[("provider", "echo"), ("current_password", PASSWORD)],
    ));
    assert_eq!(r.status, 303, "{}", r.everything());
    answers.push(r.everything());
    assert_eq!(
        owner.json()["provider"],
        serde_json::json!({"kind": "echo"})
    );
    let kept = owner.file.with_file_name("config.json.tokens");
    assert_eq!(
        std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let page = browser.get();
    answers.push(page.everything());
    // Back to AllDebrid with the token field empty, as its hint says: the token is there.
    let r = browser.post(&settings_body(
        &csrf,
        &[("provider", "alldebrid"), ("current_password", PASSWORD)],
    ));
    assert_eq!(r.status, 303, "{}", r.everything());
    answers.push(r.everything());
    answers.push(browser.get().everything());
    assert_eq!(owner.json()["provider"]["token"], TOKEN);
    assert_eq!(owner.json()["provider"]["preset"], "alldebrid");
    for (i, a) in answers.iter().enumerate() {
        assert!(!a.contains(TOKEN), "answer {i} shows the token:\n{a}");
    }
    let log = owner.apache.error_log();
    assert!(!log.contains(TOKEN), "{log}");
}

#[test]
fn every_refused_dashboard_form_leaves_one_log_line() {
    let owner = Owner::new("settings-refused-log");
    let (mut browser, csrf) = owner.signed_in(PASSWORD);
    let mut stranger = Browser::with_client(owner.apache.client());
    let forms = [
        settings_body("0123456789abcdef", &[("spend_day", "41")]),
        "action=restore&csrf=0123456789abcdef".to_owned(),
        "action=signout&csrf=0123456789abcdef".to_owned(),
        "action=signout-all&csrf=0123456789abcdef".to_owned(),
        "action=block&client=198.51.100.7&csrf=0123456789abcdef".to_owned(),
        "action=unblock&client=198.51.100.7&csrf=0123456789abcdef".to_owned(),
        "action=clear-shared&csrf=0123456789abcdef".to_owned(),
        format!("action=block&client=not-an-address&csrf={csrf}"),
        format!("action=block&client=10.0.0.0%2F8&csrf={csrf}"),
        "action=signin&csrf=0123456789abcdef&password=x".to_owned(),
    ];
    for (who, signed_in) in [("owner", true), ("stranger", false)] {
        for form in &forms {
            if !signed_in && form.contains(&csrf) {
                continue;
            }
            let before = owner.dashboard_lines();
            let client = if signed_in {
                &mut browser
            } else {
                &mut stranger
            };
            let r = client.post(form);
            assert!(r.status >= 400, "{who} {form}: {}", r.everything());
            let after = owner.dashboard_lines();
            assert_eq!(
                after.len(),
                before.len() + 1,
                "{who} {form}: one line, got {:#?}",
                &after[before.len().min(after.len())..]
            );
            let line = after.last().unwrap();
            assert!(
                line.contains("127.0.0.1") && !line.contains(&csrf),
                "{who} {form}: {line}"
            );
        }
    }
    assert_eq!(browser.get().status, 200, "still signed in");
}

/// The settings edit a rule of bytes (its `unit` written) and `max_file_bytes`, through the
/// form's fields, and show them back.
#[test]
fn the_bytes_per_visitor_and_the_largest_file_are_set_from_the_dashboard() {
    let owner = Owner::new("settings-bytes");
    let (mut browser, csrf) = owner.signed_in(PASSWORD);
    let r = browser.post(&settings_body(
        &csrf,
        &[
            ("visitor_bytes_day", "20000000000"),
            ("max_file_bytes", "10000000000"),
        ],
    ));
    assert_eq!(r.status, 303, "{}", r.everything());
    let json = owner.json();
    assert_eq!(
        json["rules"][1],
        serde_json::json!({"name": "ip-bytes", "key": "ip", "limit": 20_000_000_000u64,
                           "window_secs": 86400, "unit": "bytes"}),
        "{json}"
    );
    assert_eq!(json["max_file_bytes"], 10_000_000_000u64, "{json}");
    assert_eq!(
        json["rules"][0]["limit"], 20,
        "the requests rule kept: {json}"
    );
    let page = browser.get();
    assert_eq!(page.status, 200, "{}", page.everything());
    let text = page.text();
    for shown in [
        "name=\"visitor_bytes_day\" inputmode=\"numeric\" pattern=\"[0-9]*\" value=\"20000000000\"",
        "name=\"max_file_bytes\" inputmode=\"numeric\" pattern=\"[0-9]*\" value=\"10000000000\"",
    ] {
        assert!(text.contains(shown), "{shown}\n{text}");
    }
}

/// The links one request may carry, from the settings: written under `request`, shown back,
/// and a number the configuration would refuse is said at the field, the file untouched.
#[test]
fn the_links_per_request_are_set_from_the_dashboard() {
    let owner = Owner::new("settings-links");
    let (mut browser, csrf) = owner.signed_in(PASSWORD);
    let r = browser.post(&settings_body(&csrf, &[("max_links", "3")]));
    assert_eq!(r.status, 303, "{}", r.everything());
    let json = owner.json();
    assert_eq!(json["request"]["max_links"], 3, "{json}");
    let page = browser.get();
    assert_eq!(page.status, 200, "{}", page.everything());
    let shown = "name=\"max_links\" inputmode=\"numeric\" pattern=\"[0-9]*\" value=\"3\"";
    assert!(page.text().contains(shown), "{shown}\n{}", page.text());
    let before = owner.json();
    let r = browser.post(&settings_body(&csrf, &[("max_links", "500")]));
    assert_eq!(r.status, 400, "{}", r.everything());
    assert!(
        r.text().contains("write a whole number from 1 to 100"),
        "{}",
        r.text()
    );
    assert_eq!(owner.json(), before, "a refused form writes nothing");
}

/// The challenge's keys from the settings: the site key shown back, the secret written and
/// never shown, in the page, the answer or the log; both only with the current password; a
/// blank secret keeps the one saved; an emptied site key turns the challenge off.
#[test]
fn the_challenge_keys_are_set_from_the_settings_and_the_secret_is_never_shown() {
    let owner = Owner::new("settings-challenge");
    let original = owner.text();
    let (mut browser, csrf) = owner.signed_in(PASSWORD);
    let site_key = "0x4AAAAAAAsiteKEY";
    let secret = "0x4AAAAAAAsecretNEVER-SHOWN";
    let keys = [
        ("challenge_site_key", site_key),
        ("challenge_secret", secret),
    ];
    // Without the current password: nothing written.
    let r = browser.post(&settings_body(&csrf, &keys));
    assert_eq!(r.status, 403, "{}", r.everything());
    assert!(!r.everything().contains(secret));
    assert_eq!(owner.text(), original);
    // A site key without a secret: the form says which field.
    let r = browser.post(&settings_body(
        &csrf,
        &[
            ("challenge_site_key", site_key),
            ("current_password", PASSWORD),
        ],
    ));
    assert!(
        r.text().contains("id=\"challenge_secret-problem\""),
        "{}",
        r.text()
    );
    assert_eq!(owner.text(), original);
    let mut with = keys.to_vec();
    with.push(("current_password", PASSWORD));
    let r = browser.post(&settings_body(&csrf, &with));
    assert_eq!(r.status, 303, "{}", r.everything());
    let json = owner.json();
    assert_eq!(json["challenge"]["site_key"], site_key);
    assert_eq!(json["challenge"]["secret"], secret);
    // The page shows the site key, never the secret.
    let page = browser.get();
    assert!(page.text().contains(site_key), "{}", page.text());
    assert!(!page.everything().contains(secret));
    // A blank secret keeps the one saved.
    let r = browser.post(&settings_body(
        &csrf,
        &[
            ("challenge_site_key", "0x4AAAAAAAotherKEY"),
            ("current_password", PASSWORD),
        ],
    ));
    assert_eq!(r.status, 303, "{}", r.everything());
    assert_eq!(owner.json()["challenge"]["secret"], secret);
    assert_eq!(owner.json()["challenge"]["site_key"], "0x4AAAAAAAotherKEY");
    // Emptied, the challenge is off.
    let r = browser.post(&settings_body(
        &csrf,
        &[("challenge_site_key", ""), ("current_password", PASSWORD)],
    ));
    assert_eq!(r.status, 303, "{}", r.everything());
    assert!(owner.json().get("challenge").is_none(), "{}", owner.text());
    owner.apache.settle_log();
    assert!(!owner.apache.error_log().contains(secret));
}
