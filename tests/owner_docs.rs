//! The README's owner sections against what the program does: its error-log example has the
//! form of the lines Apache writes under mod_cgid and under mod_fcgid (read from a real
//! Apache's error log in both modes), and its Dashboard section starts with the setup in the
//! browser, which needs no shell.

mod support;

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use support::{Mode, Request, Site};

fn readme() -> String {
    fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// The README section under `## title`, up to the next `## `.
fn section(readme: &str, title: &str) -> String {
    let start = readme
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("no section {title:?} in README.md"));
    let rest = &readme[start + title.len() + 5..];
    rest[..rest.find("\n## ").unwrap_or(rest.len())].to_owned()
}

/// True when `line` has the form of the program's log line: `resolve: LEVEL: ... [TIME;
/// configuration ...]`, and nothing before it.
fn program_line(line: &str) -> bool {
    let Some(rest) = ["error", "warn", "notice"]
        .iter()
        .find_map(|level| line.strip_prefix(&format!("resolve: {level}: ")))
    else {
        return false;
    };
    let Some(at) = rest.rfind(" [") else {
        return false;
    };
    let tail = &rest[at + 2..];
    tail.ends_with(']')
        && tail.len() > 22
        && tail.as_bytes()[4] == b'-'
        && tail[10..11] == *"T"
        && tail[19..].starts_with("Z; configuration ")
}

#[test]
fn the_error_log_example_is_what_apache_writes_in_both_modes() {
    let log_section = section(&readme(), "When something is wrong: the error log");
    let example = log_section
        .split("```")
        .nth(1)
        .unwrap_or_else(|| panic!("no example line in:\n{log_section}"))
        .trim()
        .to_owned();
    assert!(program_line(&example), "the README's example: {example}");
    for mode in [Mode::Cgid, Mode::Fcgid] {
        let site = Site::builder(&format!("readme-log-{}", mode.name()))
            .mode(mode)
            .provider_section(|_| {
                json!({"kind": "http", "url": "https://resolve-test.invalid/unrestrict",
                       "method": "POST", "link": {"form": "link"}, "download": "/download",
                       "connect_timeout_ms": 2000, "timeout_ms": 3000})
            })
            .start();
        let r = site
            .client()
            .send(
                &Request::get("/cgi-bin/resolve?link=https%3A%2F%2Fhost.example%2Ff")
                    .header("Accept", "application/json"),
            )
            .unwrap();
        assert_eq!(r.status, 502, "{}", r.everything());
        assert!(
            site.apache
                .wait_for_log("ACTION NEEDED", Duration::from_secs(5)),
            "{}",
            site.apache.error_log()
        );
        let log = site.apache.error_log();
        let ours: Vec<&str> = log.lines().filter(|l| l.contains("resolve: ")).collect();
        assert!(!ours.is_empty(), "{log}");
        for line in ours {
            assert!(
                program_line(line),
                "{}: a line of the program not as the README shows it:\n{line}",
                mode.name()
            );
        }
    }
    assert!(!log_section.contains("AH01215"), "{log_section}");
}

#[test]
fn the_dashboard_section_starts_with_the_setup_in_the_browser() {
    let dashboard = section(&readme(), "Dashboard");
    let first = dashboard.trim().split("\n\n").next().unwrap();
    for words in ["/cgi-bin/resolve/admin", "setup page", "setup-code.txt"] {
        assert!(first.contains(words), "{words:?} not in:\n{first}");
    }
    let setup = dashboard.find("setup page").unwrap();
    for shell in ["hash-password", "deploy.sh --admin-password"] {
        assert!(
            dashboard.find(shell).is_none_or(|at| at > setup),
            "{shell} before the setup in the browser:\n{dashboard}"
        );
    }
    assert!(
        fs::metadata(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap()
            .len()
            < 15_000
    );
}
