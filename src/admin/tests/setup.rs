//! Setting a site up in one process with a clock the test sets: the code's file, a wrong or
//! expired code refused and budgeted per address and network, the right one always taken and
//! writing the file, a form without a code, a site set up again, the addresses offered.

use std::os::unix::fs::PermissionsExt;

use super::*;

/// A site with the starter configuration in its own file, no password yet.
fn starter_site() -> (Site, PathBuf) {
    let mut site = site_with(None);
    std::fs::create_dir_all(&site.dir).unwrap();
    let file = site.dir.join("config.json");
    let text = crate::config::starter::TEXT.replace(
        "\"dir\": \"ratelimit\"",
        &format!("\"dir\": {:?}", site.dir.join("data").display().to_string()),
    );
    std::fs::write(&file, &text).unwrap();
    let mut config = Config::from_json(&text, &site.dir).unwrap();
    config.file = Some(file.clone());
    site.config = config;
    (site, file)
}

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn code_in(file: &std::path::Path) -> String {
    let text = std::fs::read_to_string(file.with_file_name("setup-code.txt")).unwrap();
    text.lines().next().unwrap().to_owned()
}

fn setup_body(csrf: &str, code: &str) -> String {
    format!(
        "action=setup&csrf={csrf}&code={code}&provider=echo&token=&site=https%3A%2F%2Fexample.com\
         &spend_day=100&spend_month=1500&visitor_minute=30&visitor_day=300\
         &password=twelve+chars+or+more&password_again=twelve+chars+or+more"
    )
}

#[test]
fn the_code_is_written_beside_the_configuration_privately_for_an_hour() {
    let (site, file) = starter_site();
    let mut jar = Jar::default();
    let (r, page) = site.get(&mut jar);
    assert_eq!(r.status, 200, "{page}");
    assert!(page.contains("Set up this site"), "{page}");
    assert!(page.contains("setup-code.txt"), "{page}");
    let code_file = file.with_file_name("setup-code.txt");
    assert_eq!(mode(&code_file), 0o600);
    let code = code_in(&file);
    assert!(!page.contains(&code), "the code is never on the page");
    // The same code while it lasts; a new one after an hour.
    site.get(&mut jar);
    assert_eq!(code_in(&file), code);
    site.advance(3600 * 1000);
    site.get(&mut jar);
    assert_ne!(code_in(&file), code);
}

#[test]
fn wrong_and_expired_codes_are_refused_and_budgeted_but_the_right_one_is_taken() {
    let (site, file) = starter_site();
    let mut jar = Jar::default();
    let (_, page) = site.get(&mut jar);
    let csrf = hidden(&page, "csrf");
    let code = code_in(&file);
    let before = std::fs::read_to_string(&file).unwrap();
    let (r, body) = site.post(
        &mut jar,
        &setup_body(&csrf, "AAAA-BBBB-CCCC-DDDD"),
        "203.0.113.9",
    );
    assert_eq!(r.status, 403, "{body}");
    assert!(
        body.contains("Wrong setup code. 4 more tries are allowed"),
        "{body}"
    );
    assert!(
        site.log().contains("wrong setup code (failure 1 of 5"),
        "{}",
        site.log()
    );
    // The right code, an hour late.
    site.advance(3600 * 1000);
    let (r, _) = site.post(&mut jar, &setup_body(&csrf, &code), "203.0.113.9");
    assert_eq!(r.status, 403);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        before,
        "nothing written"
    );
    // The late one was the first failure of a new 15-minute window; four more use the
    // address's budget up: the next wrong one waits, counted no further.
    site.get(&mut jar);
    let code = code_in(&file);
    for _ in 0..4 {
        let (r, _) = site.post(
            &mut jar,
            &setup_body(&csrf, "0000-0000-0000-0000"),
            "203.0.113.9",
        );
        assert_eq!(r.status, 403);
    }
    let (r, body) = site.post(
        &mut jar,
        &setup_body(&csrf, "0000-0000-0000-0001"),
        "203.0.113.9",
    );
    assert_eq!(r.status, 429, "{body}");
    assert!(
        body.contains("Too many wrong setup codes from your address"),
        "{body}"
    );
    assert!(
        site.log()
            .contains("dashboard setup refused for 203.0.113.9: 5 wrong setup codes"),
        "{}",
        site.log()
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        before,
        "nothing written"
    );
    // The right code is still taken, from that address too.
    let (r, body) = site.post(&mut jar, &setup_body(&csrf, &code), "203.0.113.9");
    assert_eq!(r.status, 303, "{body}");
    assert!(jar.get(session::SESSION_COOKIE).is_some());
}

#[test]
fn strangers_wrong_codes_never_keep_the_owner_out() {
    let (site, file) = starter_site();
    let mut jar = Jar::default();
    let (_, page) = site.get(&mut jar);
    let csrf = hidden(&page, "csrf");
    let code = code_in(&file);
    // Forty networks, five wrong codes each from two addresses: 400 wrong codes in all.
    for net in 0..40 {
        for host in [1, 2] {
            for _ in 0..5 {
                let (r, _) = site.post(
                    &mut jar,
                    &setup_body(&csrf, "0000-0000-0000-0000"),
                    &format!("198.51.{net}.{host}"),
                );
                assert!(matches!(r.status, 403 | 429), "{}", r.status);
            }
        }
    }
    // A network past its budget waits, every address of it.
    let (r, _) = site.post(
        &mut jar,
        &setup_body(&csrf, "0000-0000-0000-0000"),
        "198.51.0.77",
    );
    assert_eq!(r.status, 429);
    // A new address's first wrong code is its first.
    let (r, body) = site.post(
        &mut jar,
        &setup_body(&csrf, "0000-0000-0000-0000"),
        "192.0.2.1",
    );
    assert_eq!(r.status, 403, "{body}");
    assert!(body.contains("4 more tries"), "{body}");
    // The owner, with the right code: taken.
    let (r, body) = site.post(&mut jar, &setup_body(&csrf, &code), "192.0.2.50");
    assert_eq!(r.status, 303, "{body}");
    assert_eq!(
        r.header_value("Location"),
        Some("/cgi-bin/resolve/admin?done=setup")
    );
}

#[test]
fn a_form_with_mistakes_keeps_the_code_and_a_form_without_one_counts_nothing() {
    let (site, file) = starter_site();
    let mut jar = Jar::default();
    let (_, page) = site.get(&mut jar);
    let csrf = hidden(&page, "csrf");
    let code = code_in(&file);
    let short = setup_body(&csrf, &code).replace("twelve+chars+or+more", "short");
    for _ in 0..8 {
        let (r, body) = site.post(&mut jar, &short, "203.0.113.9");
        assert_eq!(r.status, 400, "{body}");
        assert!(body.contains(&format!("value=\"{code}\"")), "{body}");
        assert!(body.contains("id=\"password-problem\""), "{body}");
    }
    for _ in 0..8 {
        let (r, body) = site.post(&mut jar, &setup_body(&csrf, ""), "203.0.113.9");
        assert_eq!(r.status, 400, "{body}");
        assert!(body.contains("id=\"code-problem\""), "{body}");
        assert!(!body.contains("Wrong setup code"), "{body}");
    }
    assert!(!site.log().contains("wrong setup code"), "{}", site.log());
    let (r, body) = site.post(
        &mut jar,
        &setup_body(&csrf, "0000-0000-0000-0000"),
        "203.0.113.9",
    );
    assert_eq!(r.status, 403);
    assert!(body.contains("4 more tries"), "{body}");
    assert!(body.contains("value=\"0000-0000-0000-0000\""), "{body}");
    assert!(
        !body.contains("twelve chars"),
        "the password is never shown"
    );
    let (r, body) = site.post(&mut jar, &setup_body(&csrf, &code), "203.0.113.9");
    assert_eq!(r.status, 303, "{body}");
}

/// Written by hand: a provider, limits, two addresses, no `admin` section.
const HAND: &str = r#"{
  "provider": {"preset": "alldebrid", "token": "tok-hand-5150"},
  "store": {"kind": "file", "dir": "@DATA@"},
  "spend": [{"name": "day", "limit": 41, "window_secs": 86400}],
  "rules": [{"name": "ip", "key": "ip", "limit": 17, "window_secs": 60}],
  "allowed_origins": ["https://ann.example", "https://www.ann.example"]
}
"#;

#[test]
fn a_site_with_settings_is_set_up_again_with_a_password_alone() {
    let (mut site, file) = starter_site();
    let text = HAND.replace("@DATA@", &site.dir.join("data").display().to_string());
    std::fs::write(&file, &text).unwrap();
    site.config = Config::from_json(&text, &site.dir).unwrap();
    site.config.file = Some(file.clone());
    let mut jar = Jar::default();
    let (r, page) = site.get(&mut jar);
    assert_eq!(r.status, 200, "{page}");
    for shown in [
        "alldebrid",
        "value=\"41\"",
        "value=\"17\"",
        "ann.example",
        "tok-hand",
    ] {
        assert!(!page.contains(shown), "{shown} before the code:\n{page}");
    }
    assert!(page.contains("id=\"code\""), "{page}");
    assert!(page.contains("id=\"password_again\""), "{page}");
    let csrf = hidden(&page, "csrf");
    let code = code_in(&file);
    // What the first setup's form would send is not used: the settings stay.
    let body = setup_body(&csrf, &code).replace("example.com", "other.example");
    let (r, body) = site.post(&mut jar, &body, "203.0.113.9");
    assert_eq!(r.status, 303, "{body}");
    let written = std::fs::read_to_string(&file).unwrap();
    let json: serde_json::Value = serde_json::from_str(&written).unwrap();
    assert_eq!(
        json["allowed_origins"],
        serde_json::json!(["https://ann.example", "https://www.ann.example"])
    );
    // The rest byte for byte: the password's hash added after it.
    let kept = text.trim_end().trim_end_matches('}').trim_end();
    assert_eq!(
        written.split(",\n  \"admin\"").next(),
        Some(kept),
        "{written}"
    );
    assert_eq!(json["provider"]["token"], "tok-hand-5150");
    assert!(
        site.log()
            .contains("the site was set up again (a new password, the settings kept)"),
        "{}",
        site.log()
    );
}

#[test]
fn the_first_setup_offers_the_address_with_and_without_www() {
    let cases: [(&str, &[&str]); 6] = [
        (
            "example.com",
            &["https://example.com", "https://www.example.com"],
        ),
        (
            "www.example.com",
            &["https://www.example.com", "https://example.com"],
        ),
        (
            "Example.com:8443",
            &["https://example.com:8443", "https://www.example.com:8443"],
        ),
        ("127.0.0.1:8080", &["https://127.0.0.1:8080"]),
        ("[::1]:8080", &["https://[::1]:8080"]),
        ("localhost", &["https://localhost"]),
    ];
    for (host, want) in cases {
        assert_eq!(
            super::super::setup::addresses("https", host),
            want,
            "{host}"
        );
    }
    let (mut site, file) = starter_site();
    let mut jar = Jar::default();
    let (_, page) = site.get(&mut jar);
    let csrf = hidden(&page, "csrf");
    let code = code_in(&file);
    let both = "https%3A%2F%2Fexample.com%0D%0Ahttps%3A%2F%2Fwww.example.com";
    let body = setup_body(&csrf, &code).replace("https%3A%2F%2Fexample.com", both);
    let (r, body) = site.post(&mut jar, &body, "203.0.113.9");
    assert_eq!(r.status, 303, "{body}");
    let c = Config::from_json(&std::fs::read_to_string(&file).unwrap(), &site.dir).unwrap();
    assert_eq!(
        c.allowed_origins,
        ["https://example.com", "https://www.example.com"]
    );
    // The dashboard then says the site is set up, and what next.
    site.config = c;
    site.config.file = Some(file.clone());
    let notice = site.dashboard().set_up_notice(b"done=setup");
    assert!(notice.contains("The site is set up"), "{notice}");
    assert!(notice.contains("https://example.com/resolve/"), "{notice}");
    assert!(notice.contains("Cron Jobs"), "{notice}");
    assert!(site.dashboard().set_up_notice(b"done=saved").is_empty());
}

#[test]
fn the_right_code_writes_the_file_removes_the_code_and_signs_in() {
    let (site, file) = starter_site();
    let mut jar = Jar::default();
    let (_, page) = site.get(&mut jar);
    let csrf = hidden(&page, "csrf");
    let code = code_in(&file).to_lowercase().replace('-', "");
    let before = std::fs::read_to_string(&file).unwrap();
    let (r, body) = site.post(&mut jar, &setup_body(&csrf, &code), "203.0.113.9");
    assert_eq!(r.status, 303, "{body}");
    assert!(jar.get(session::SESSION_COOKIE).is_some());
    assert!(!file.with_file_name("setup-code.txt").exists());
    assert_eq!(mode(&file), 0o600);
    let text = std::fs::read_to_string(&file).unwrap();
    let c = Config::from_json(&text, &site.dir).unwrap();
    assert!(c.admin.is_some());
    assert_eq!(c.allowed_origins, ["https://example.com"]);
    assert!(!text.contains("twelve chars"), "the hash only");
    assert_eq!(
        std::fs::read_to_string(file.with_file_name("config.json.previous")).unwrap(),
        before,
        "the starter is kept"
    );
}
