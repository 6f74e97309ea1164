//! A broken configuration on the host, as an owner without a shell meets it: visitors get a
//! 503 that says nothing about the file, and the error log gets the exact problem (file,
//! field, line and column, fix) once a minute at most, however many requests arrive.

mod support;

use std::path::Path;
use std::process::Output;

use support::cgi::bare_get;
use support::{TempDir, config};

/// A limit of 0 on line 4 (column 33), and a token that must not show.
const LIMIT_ZERO: &str = r#"{
  "provider": {"preset": "realdebrid", "token": "tok-5e1f0a77"},
  "rules": [
    {"name": "ip", "key": "ip", "limit": 0, "window_secs": 60}
  ]
}
"#;

/// A list never closed: the parser stops at line 4, column 1.
const UNCLOSED_LIST: &str = r#"{
  "provider": {"kind": "echo"},
  "rules": [
}
"#;

/// One CGI request with the variables Apache sets, the configuration named by RESOLVE_CONFIG.
fn request(config: &Path) -> Output {
    request_in(config, Path::new("/nonexistent-web-root"))
}

/// [`request`] with the document root `web_root`.
fn request_in(config: &Path, web_root: &Path) -> Output {
    bare_get(config, "link=https%3A%2F%2Fhost.example%2Ff", "203.0.113.9")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("HTTP_ACCEPT", "text/html")
        .env("DOCUMENT_ROOT", web_root)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn visitors_get_503_and_the_log_gets_the_position_once_a_minute() {
    let dir = TempDir::new("cfgerr-position");
    let config = config::write_text(&dir, LIMIT_ZERO);
    let mut logged = Vec::new();
    for _ in 0..5 {
        let out = request(&config);
        let answer = text(&out.stdout);
        assert!(answer.starts_with("Status: 503"), "{answer}");
        assert!(answer.contains("Retry-After: "), "{answer}");
        assert!(answer.contains("not set up correctly yet"), "{answer}");
        // The page's inline stylesheet says "outline" and "line-height": only the rest is read.
        let said = match (answer.find("<style>"), answer.find("</style>")) {
            (Some(a), Some(b)) => format!("{}{}", &answer[..a], &answer[b..]),
            _ => answer.clone(),
        };
        for private in ["config.json", "rules", "limit", "line", "tok-5e1f0a77"] {
            assert!(!said.contains(private), "{private} in the answer: {answer}");
        }
        logged.push(text(&out.stderr));
    }
    let first = &logged[0];
    assert!(first.contains(&config.display().to_string()), "{first}");
    assert!(
        first.contains("rules[0].limit (line 4, column 33)"),
        "{first}"
    );
    assert!(first.contains("must be"), "the fix is said: {first}");
    assert!(!first.contains("tok-5e1f0a77"), "{first}");
    for (i, later) in logged.iter().enumerate().skip(1) {
        assert!(later.is_empty(), "request {i} logged again: {later}");
    }
    // A minute on (the times remembered moved back), the next request logs once more.
    let stamp = dir.join(".config-error-logged");
    let earlier: String = std::fs::read_to_string(&stamp)
        .unwrap()
        .lines()
        .map(|l| {
            let (digest, at) = l.split_once(' ').unwrap();
            format!("{digest} {}\n", at.parse::<u64>().unwrap() - 61)
        })
        .collect();
    std::fs::write(&stamp, earlier).unwrap();
    assert!(text(&request(&config).stderr).contains("rules[0].limit"));
    assert!(text(&request(&config).stderr).is_empty());
}

#[test]
fn each_distinct_mistake_is_logged_with_the_file_and_the_time() {
    let dir = TempDir::new("cfgerr-distinct");
    let config = config::write_text(&dir, LIMIT_ZERO);
    let first = text(&request(&config).stderr);
    assert!(first.contains("rules[0].limit"), "{first}");
    // The owner fixes it and makes another mistake within the minute: logged at once.
    config::write_text(&dir, UNCLOSED_LIST);
    let second = text(&request(&config).stderr);
    assert!(second.contains("line 4 column 1"), "{second}");
    assert!(text(&request(&config).stderr).is_empty());
    // Back to the first: still within its minute.
    config::write_text(&dir, LIMIT_ZERO);
    assert!(text(&request(&config).stderr).is_empty());
    // Each line ends with the time (UTC) and the configuration file read.
    let line = second.lines().next().unwrap();
    let context = line.rsplit_once(" [").unwrap().1;
    let (time, file) = context.split_once("; configuration ").unwrap();
    assert_eq!(time.len(), "2026-12-03T08:00:00Z".len(), "{line}");
    assert!(time.starts_with("20") && time.ends_with('Z'), "{line}");
    assert!(
        file.starts_with(&format!("{} (from RESOLVE_CONFIG)", config.display())),
        "{line}"
    );
}

#[test]
fn a_syntax_error_is_logged_with_its_position() {
    let dir = TempDir::new("cfgerr-syntax");
    let config = config::write_text(&dir, UNCLOSED_LIST);
    let out = request(&config);
    assert!(text(&out.stdout).starts_with("Status: 503"));
    let log = text(&out.stderr);
    assert!(log.contains("line 4 column 1"), "{log}");
}

#[test]
fn an_unreadable_directory_still_logs_every_time() {
    // Where no stamp can be kept, nothing is lost: each request logs.
    let dir = TempDir::new("cfgerr-nostamp");
    let config = dir.join("missing").join("config.json");
    for _ in 0..2 {
        let out = request(&config);
        assert!(text(&out.stdout).starts_with("Status: 503"));
        assert!(text(&out.stderr).contains("cannot read the configuration"));
    }
}

#[test]
fn a_broken_password_hash_names_the_field_and_the_fix() {
    // A bcrypt hash where an Argon2id one belongs, on line 3.
    let dir = TempDir::new("cfgerr-admin");
    let config = config::write_text(
        &dir,
        "{\n  \"provider\": {\"kind\": \"echo\"},\n  \"admin\": {\"password_hash\": \"$2y$10$N9qo8uLOickgx2ZMRZoMye\"}\n}\n",
    );
    let out = request(&config);
    assert!(text(&out.stdout).starts_with("Status: 503"));
    let log = text(&out.stderr);
    assert!(
        log.contains(
            "admin.password_hash (line 3, column 13): not a password hash in its standard form"
        ),
        "{log}"
    );
    assert!(log.contains("resolve hash-password"), "the fix: {log}");
    assert!(
        !log.contains("N9qo8uLOickgx2ZMRZoMye"),
        "the value is not quoted: {log}"
    );
}

#[test]
fn an_editors_mistakes_are_named_where_they_are() {
    let dir = TempDir::new("cfgerr-editor");
    for (written, said) in [
        (
            "\u{FEFF}{\"provider\": {\"kind\": \"echo\"}}\n",
            "line 1 column 1: the file starts with a byte order mark (BOM)",
        ),
        (
            "{\n  \u{201C}provider\u{201D}: {\"kind\": \"echo\"}\n}\n",
            "line 2 column 3: a curly quote \u{201C} where JSON needs a straight double quote",
        ),
        (
            "{\n  \"provider\": {\"kind\": \"echo\"},\n}\n",
            "line 2 column 31: a comma after the last item of a list or object",
        ),
    ] {
        let config = config::write_text(&dir, written);
        let out = request(&config);
        assert!(text(&out.stdout).starts_with("Status: 503"));
        let log = text(&out.stderr);
        assert!(log.contains(said), "{log}");
    }
}

#[test]
fn settings_under_the_web_root_are_refused_through_links_too() {
    let dir = TempDir::new("cfgerr-webroot");
    let web = dir.join("public_html");
    std::fs::create_dir_all(web.join("settings")).unwrap();
    let good = "{\"provider\": {\"kind\": \"echo\"}}\n";
    std::fs::write(web.join("settings/config.json"), good).unwrap();
    // The configuration read through a link that leads into the web root.
    std::os::unix::fs::symlink(web.join("settings"), dir.join("resolve")).unwrap();
    let out = request_in(&dir.join("resolve/config.json"), &web);
    let answer = text(&out.stdout);
    assert!(answer.starts_with("Status: 503"), "{answer}");
    assert!(!answer.contains("public_html"), "{answer}");
    let log = text(&out.stderr);
    assert!(
        log.contains("public_html/settings/config.json lies under the web root"),
        "{log}"
    );
    assert!(log.contains("It must be "), "{log}");
    // The same file outside the web root answers; a data directory inside it does not.
    let outside = config::write_text(&dir, good);
    assert!(text(&request_in(&outside, &web).stdout).starts_with("Status: 200"));
    let data = web.join("data");
    let with_data = format!(
        "{{\"provider\": {{\"kind\": \"echo\"}}, \"store\": {{\"kind\": \"file\", \"dir\": {:?}}}}}",
        data.display().to_string()
    );
    let outside = config::write_text(&dir, &with_data);
    let out = request_in(&outside, &web);
    assert!(text(&out.stdout).starts_with("Status: 503"));
    assert!(
        text(&out.stderr).contains("the data directory "),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_client_over_its_limit_is_refused_before_the_web_root_is_judged_and_a_503_counts_nothing() {
    let dir = TempDir::new("cfgerr-webroot-order");
    let web = dir.join("public_html");
    std::fs::create_dir_all(&web).unwrap();
    let config = config::write_text(
        &dir,
        &format!(
            r#"{{"provider": {{"kind": "echo"}},
  "store": {{"kind": "file", "dir": {:?}}},
  "rules": [{{"name": "ip", "key": "ip", "limit": 1, "window_secs": 3600}}]}}"#,
            dir.join("data").display().to_string()
        ),
    );
    let from = |addr: &str| {
        let out = bare_get(&config, "link=https%3A%2F%2Fhost.example%2Ff", addr)
            .env("HTTP_ACCEPT", "application/json")
            .env("DOCUMENT_ROOT", &web)
            .output()
            .unwrap();
        (text(&out.stdout), text(&out.stderr))
    };
    let status = |answer: &str| answer.split_whitespace().nth(1).unwrap_or("").to_owned();
    assert_eq!(status(&from("203.0.113.1").0), "200");
    // A copy of the settings uploaded into the web root by mistake.
    std::fs::write(
        web.join("config.json"),
        "{\"provider\": {\"kind\": \"echo\"}}\n",
    )
    .unwrap();
    // The client over its limit is refused as before: its 429 judges nothing.
    let (answer, log) = from("203.0.113.1");
    assert_eq!(status(&answer), "429", "{answer}");
    assert!(!log.contains("web root"), "{log}");
    // Any request that would be served is refused with the line that says what to move.
    let (answer, log) = from("203.0.113.2");
    assert_eq!(status(&answer), "503", "{answer}");
    assert!(!answer.contains("public_html"), "{answer}");
    assert!(log.contains("public_html/config.json"), "{log}");
    assert_eq!(status(&from("203.0.113.2").0), "503");
    // Several links in one request are judged once, before any is asked.
    let several = bare_get(
        &config,
        "link=https%3A%2F%2Fhost.example%2Fa&link=https%3A%2F%2Fhost.example%2Fb",
        "203.0.113.3",
    )
    .env("HTTP_ACCEPT", "application/json")
    .env("DOCUMENT_ROOT", &web)
    .output()
    .unwrap();
    assert_eq!(
        status(&text(&several.stdout)),
        "503",
        "{}",
        text(&several.stdout)
    );
    // Moved away: the second client's 503s were given back, its one request a day is left.
    std::fs::remove_file(web.join("config.json")).unwrap();
    assert_eq!(status(&from("203.0.113.2").0), "200");
    assert_eq!(status(&from("203.0.113.2").0), "429");
    assert_eq!(status(&from("203.0.113.1").0), "429");
}

#[test]
fn the_dashboard_says_what_lies_under_the_web_root() {
    let dir = TempDir::new("cfgerr-webroot-admin");
    let web = dir.join("public_html");
    std::fs::create_dir_all(&web).unwrap();
    let config = config::write_text(&dir, "{\"provider\": {\"kind\": \"echo\"}}\n");
    // The data directory in its place: the request is judged on its way, not before it.
    std::fs::create_dir(dir.join("ratelimit")).unwrap();
    std::fs::write(
        web.join("config.json.previous"),
        "{\"provider\": {\"kind\": \"echo\"}}\n",
    )
    .unwrap();
    let out = bare_get(&config, "", "203.0.113.7")
        .env("PATH_INFO", "/admin")
        .env("SCRIPT_NAME", "/cgi-bin/resolve")
        .env("HTTP_ACCEPT", "text/html")
        .env("DOCUMENT_ROOT", &web)
        .output()
        .unwrap();
    let answer = text(&out.stdout);
    assert!(answer.starts_with("Status: 503"), "{answer}");
    assert!(
        answer.contains("public_html/config.json.previous lies under the web root"),
        "the owner at the dashboard is told: {answer}"
    );
    // How to move it, not how to mend a file that cannot be read.
    assert!(
        answer.contains("<h1>Settings lie under the web root</h1>")
            && answer.contains("click <strong>Move</strong>")
            && !answer.contains("curly quotes"),
        "{answer}"
    );
    let log = text(&out.stderr);
    assert!(
        log.contains("config.json.previous lies under the web root")
            && log.contains("every request it would serve gets 503 until this is fixed"),
        "{log}"
    );
}
