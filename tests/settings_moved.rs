//! The owner's settings moved where they do not belong, with cPanel's File Manager, in an
//! account served through Apache with suEXEC: a `config.json`, a `config.json.previous` or the
//! data directory anywhere a move puts them under the web root is refused on every request and
//! by `resolve check`, with the line that says where it must go; no starter is written while
//! one is there, nor while what a configuration leaves behind shows one is missing, and the
//! owner's file moved back is what the site runs with.

mod support;

use std::fs;
use std::path::Path;
use std::process::Command;

use support::account::{SuexecLog, apache_for, check_suexec_fits, diagnostics};
use support::urlenc::link_param;
use support::{Apache, HostUser, Request, binary, is_root};

/// The owner's settings: the echo provider, their site's name on the page.
const OWNERS: &str = r#"{
  "provider": {"kind": "echo"},
  "store": {"kind": "file", "dir": "ratelimit", "on_error": "allow"},
  "rules": [{"name": "ip", "key": "ip", "limit": 30, "window_secs": 60}],
  "page": {"site_name": "Owner's links"}
}
"#;

/// An account with the program in `public_html/cgi-bin` and the page's folder, as the archive
/// puts them.
fn account() -> HostUser {
    assert!(
        is_root(),
        "tests/settings_moved.rs must run as root: it creates a system account and runs Apache \
         with suEXEC"
    );
    let user = HostUser::create(true);
    check_suexec_fits(&user);
    user.mkdir(&user.web().join("resolve"), 0o755);
    user.write(
        &user.web().join("cgi-bin/resolve"),
        fs::read(binary()).unwrap(),
        0o755,
    );
    user
}

/// A link sent to the program as the page sends it; the status and the body.
fn ask(apache: &Apache, user: &HostUser) -> (u16, String) {
    let r = apache
        .client()
        .send(
            &Request::post_form(
                &user.url("cgi-bin/resolve"),
                link_param("https://example.com/file/moved"),
            )
            .header("Accept", "application/json"),
        )
        .unwrap();
    (r.status, r.text())
}

/// `resolve check` run as the account, as the web server runs the program: its output and
/// whether it passed.
fn check(user: &HostUser) -> (String, bool) {
    let out = Command::new("runuser")
        .args([
            "-u",
            &user.name,
            "--",
            "public_html/cgi-bin/resolve",
            "check",
        ])
        .current_dir(&user.home)
        .env_remove("RESOLVE_CONFIG")
        .output()
        .unwrap();
    (
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        out.status.success(),
    )
}

/// Moves `from` to `to` (paths from the home), as File Manager's Move does.
fn mv(user: &HostUser, from: &str, to: &str) {
    fs::rename(user.path(from), user.path(to)).unwrap_or_else(|e| {
        panic!(
            "move {from} to {to}: {e}: {:?}",
            support::temp::entries_under(&user.home)
        )
    });
}

/// Asserts that a request is refused, that the error log says `found` lies under the web root
/// and must be `target`, that `resolve check` fails saying the same, and that no starter was
/// written at home.
fn refused(apache: &Apache, user: &HostUser, suexec: &SuexecLog, found: &str, target: &str) {
    let from = apache.log_len();
    let (status, body) = ask(apache, user);
    assert_eq!(status, 503, "{body}\n{}", diagnostics(apache, suexec));
    assert!(!body.contains("public_html"), "{body}");
    let found = user.path(found).display().to_string();
    let said = format!("{found} lies under the web root ");
    let must = format!("It must be {}", user.path(target).display());
    assert!(
        apache.wait_for_log(&said, std::time::Duration::from_secs(5)),
        "{}",
        apache.log_since(from)
    );
    let log = apache.log_since(from);
    assert!(log.contains(&must), "{log}");
    assert!(log.contains("File Manager"), "{log}");
    let (out, ok) = check(user);
    assert!(!ok, "{out}");
    assert!(
        out.contains("FAIL web root: ") && out.contains(&said) && out.contains(&must),
        "{out}"
    );
    assert!(
        !user.path("resolve/config.json").exists(),
        "a starter was written while the settings lay under the web root"
    );
}

#[test]
fn settings_moved_under_the_web_root_are_refused_and_never_replaced_by_a_starter() {
    let suexec = SuexecLog::mark();
    let user = account();
    let apache = apache_for(&user);
    // The first request makes the starter; the owner writes their settings into it.
    let (status, body) = ask(&apache, &user);
    assert_eq!(status, 200, "{body}\n{}", diagnostics(&apache, &suexec));
    user.write(&user.path("resolve/config.json"), OWNERS, 0o600);

    // Moved one level too far, into the web root itself, where a 644 file can be downloaded.
    mv(&user, "resolve/config.json", "public_html/config.json");
    support::temp::set_mode(&user.web().join("config.json"), 0o644);
    let r = apache.client().get(&user.url("config.json")).unwrap();
    assert!(r.status == 200 && r.text().contains("Owner's links"));
    refused(
        &apache,
        &user,
        &suexec,
        "public_html/config.json",
        "resolve/config.json",
    );
    // Into the page's folder: Move back later meets no file in its place.
    mv(
        &user,
        "public_html/config.json",
        "public_html/resolve/config.json",
    );
    refused(
        &apache,
        &user,
        &suexec,
        "public_html/resolve/config.json",
        "resolve/config.json",
    );
    // Into the program's folder.
    mv(
        &user,
        "public_html/resolve/config.json",
        "public_html/cgi-bin/config.json",
    );
    refused(
        &apache,
        &user,
        &suexec,
        "public_html/cgi-bin/config.json",
        "resolve/config.json",
    );
    // Moved back where the log said: the owner's settings answer.
    mv(
        &user,
        "public_html/cgi-bin/config.json",
        "resolve/config.json",
    );
    let (status, body) = ask(&apache, &user);
    assert_eq!(status, 200, "{body}\n{}", diagnostics(&apache, &suexec));
    assert_eq!(
        fs::read_to_string(user.path("resolve/config.json")).unwrap(),
        OWNERS
    );
    let (out, ok) = check(&user);
    assert!(ok, "{out}");

    // A copy of the file left in the web root, the owner's own still at home.
    user.write(&user.web().join("config.json.previous"), OWNERS, 0o644);
    refused_with_home(&apache, &user, &suexec, "public_html/config.json.previous");
    fs::remove_file(user.web().join("config.json.previous")).unwrap();
    // The data directory moved into the web root: its counters and the dashboard's secret.
    mv(&user, "resolve/ratelimit", "public_html/ratelimit");
    refused_with_home(&apache, &user, &suexec, "public_html/ratelimit");
    mv(&user, "public_html/ratelimit", "resolve/ratelimit");
    let (status, body) = ask(&apache, &user);
    assert_eq!(status, 200, "{body}\n{}", diagnostics(&apache, &suexec));

    // Another program's config.json in the web root is not this program's business.
    user.write(
        &user.web().join("config.json"),
        "{\"theme\": \"dark\"}",
        0o644,
    );
    let (status, body) = ask(&apache, &user);
    assert_eq!(status, 200, "{body}\n{}", diagnostics(&apache, &suexec));
}

/// [`refused`] while the configuration is at home: the copy under the web root is named.
fn refused_with_home(apache: &Apache, user: &HostUser, suexec: &SuexecLog, found: &str) {
    let from = apache.log_len();
    let (status, body) = ask(apache, user);
    assert_eq!(status, 503, "{body}\n{}", diagnostics(apache, suexec));
    let said = format!("{} lies under the web root ", user.path(found).display());
    assert!(
        apache.wait_for_log(&said, std::time::Duration::from_secs(5)),
        "{}",
        apache.log_since(from)
    );
    let (out, ok) = check(user);
    assert!(!ok && out.contains(&said), "{out}");
}

#[test]
fn a_configuration_missing_where_one_was_is_said_and_never_replaced() {
    let suexec = SuexecLog::mark();
    let user = account();
    let apache = apache_for(&user);
    let (status, body) = ask(&apache, &user);
    assert_eq!(status, 200, "{body}\n{}", diagnostics(&apache, &suexec));
    user.write(&user.path("resolve/config.json"), OWNERS, 0o600);
    // Moved out of `resolve/` to a folder outside the web root: the data directory is left.
    user.mkdir(&user.path("Documents"), 0o700);
    mv(&user, "resolve/config.json", "Documents/config.json");
    let from = apache.log_len();
    let (status, body) = ask(&apache, &user);
    assert_eq!(status, 503, "{body}\n{}", diagnostics(&apache, &suexec));
    let config = user.path("resolve/config.json").display().to_string();
    let said = format!(
        "the configuration {config} is missing, but {} shows the site had one",
        user.path("resolve/ratelimit").display()
    );
    assert!(
        apache.wait_for_log(&said, std::time::Duration::from_secs(5)),
        "{}",
        apache.log_since(from)
    );
    assert!(
        apache
            .log_since(from)
            .contains("move the config.json you moved away back into"),
        "{}",
        apache.log_since(from)
    );
    assert!(!Path::new(&config).exists(), "a starter was written");
    let (out, ok) = check(&user);
    assert!(!ok && out.contains(&said), "{out}");
    assert!(!Path::new(&config).exists(), "check wrote a starter");
    // The dashboard's copy of the settings before its last save names the way back.
    user.write(&user.path("resolve/config.json.previous"), OWNERS, 0o600);
    let from = apache.log_len();
    assert_eq!(ask(&apache, &user).0, 503);
    let rename = format!(
        "rename {}.previous to config.json",
        user.path("resolve/config.json").display()
    );
    assert!(
        apache.wait_for_log(&rename, std::time::Duration::from_secs(5)),
        "{}",
        apache.log_since(from)
    );
    // Put back as the line says: the owner's settings answer.
    mv(&user, "resolve/config.json.previous", "resolve/config.json");
    let (status, body) = ask(&apache, &user);
    assert_eq!(status, 200, "{body}\n{}", diagnostics(&apache, &suexec));
    assert_eq!(fs::read_to_string(&config).unwrap(), OWNERS);
}
