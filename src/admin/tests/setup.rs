//! Setting a site up in one process with a clock the test sets: the code's file, a wrong or
//! expired code refused and budgeted like a wrong password, the right one writing the file.

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
fn wrong_and_expired_codes_are_refused_and_budgeted_like_passwords() {
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
    // address's budget up: then even the right code waits, unchecked.
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
    let (r, body) = site.post(&mut jar, &setup_body(&csrf, &code), "203.0.113.9");
    assert_eq!(r.status, 429, "{body}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        before,
        "nothing written"
    );
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
