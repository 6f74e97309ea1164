//! The README's front door, run as a new user runs it: its "try the site on your machine"
//! command exactly as the Development section writes it, and `resolve serve`, each from a fresh
//! copy of the project with HOME pointing at an empty directory and no configuration anywhere.
//! The page answers, and the echo provider answers a link: the first 30 requests from one
//! address with the link, then 429 (the default rule).
//!
//! Both listen on the README's address, 127.0.0.1:8080, one after the other. The configuration
//! is looked up in the home directory of the account in /etc/passwd (as under suEXEC), so the
//! account running the tests must have no `~/resolve/config.json`: the test says so if it does.

mod support;

use std::fs;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use support::process::spawn_group;
use support::{HttpClient, TempDir};

const ADDR: &str = "127.0.0.1:8080";
const LINK: &str = "https://host.example/file.bin";
const LINK_QUERY: &str = "/cgi-bin/resolve?link=https%3A%2F%2Fhost.example%2Ffile.bin";

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The commands of the README's Development section that run the site: the lines of its
/// first `sh` block, without their comments.
fn readme_serve_command() -> String {
    let readme = fs::read_to_string(project().join("README.md")).expect("README.md");
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Development"))
        .expect("README.md has a Development section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the Development section starts with a sh block");
    let commands: Vec<&str> = block
        .lines()
        .map(|l| l.split(" #").next().unwrap_or(l).trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(
        commands.len(),
        1,
        "the block that tries the site holds one command: {block}"
    );
    assert!(commands[0].contains(" serve"), "{}", commands[0]);
    commands[0].to_owned()
}

/// A fresh copy of the project: every file git tracks, as it is in the working tree.
fn fresh_copy() -> TempDir {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(project())
        .output()
        .expect("git ls-files");
    assert!(out.status.success(), "git ls-files: {out:?}");
    let copy = TempDir::new("readme-copy");
    for name in out.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = std::str::from_utf8(name).expect("a file name in UTF-8");
        let from = project().join(name);
        if !from.is_file() {
            continue; // deleted in the working tree
        }
        let to = copy.join(name);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(&from, &to).unwrap_or_else(|e| panic!("copy {name}: {e}"));
    }
    copy
}

/// The account's own configuration would be found whatever HOME says (under suEXEC there is
/// no HOME): this test needs an account without one.
fn no_account_configuration() {
    let uid = fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
    if let Ok(uid) = uid
        && let Some(home) = resolve::config::locate::home_in_passwd(&passwd, uid)
    {
        let file = home.join("resolve").join("config.json");
        assert!(
            !file.exists(),
            "{} exists: this test tries the site with no configuration anywhere; run it as \
             an account without one",
            file.display()
        );
    }
}

/// A server started in its own process group, stopped with the group.
struct Running {
    child: Child,
    log: PathBuf,
}

impl Running {
    fn start(shell_command: &str, dir: &Path, home: &Path, log: PathBuf) -> Running {
        let out = fs::File::create(&log).unwrap();
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(shell_command)
            .current_dir(dir)
            .env("HOME", home)
            .env_remove("RESOLVE_CONFIG");
        // Rust's toolchain stays where it is installed: only the owner's files are absent.
        for (var, dir) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
            if std::env::var_os(var).is_none()
                && let Some(real) = std::env::var_os("HOME")
            {
                cmd.env(var, Path::new(&real).join(dir));
            }
        }
        // cargo builds into a directory of its own beside the tests' build: the copy's
        // `target/` would build everything again each run.
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| project().join("target"))
            .join("readme-serve");
        cmd.env("CARGO_TARGET_DIR", target);
        let child = spawn_group(&mut cmd, out.try_clone().unwrap(), out, shell_command);
        Running { child, log }
    }

    fn output(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// Waits until the page answers; a release build may come first.
    fn wait_for_page(&mut self, client: &HttpClient, limit: Duration) -> support::Response {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "the server ended ({status}) before answering:\n{}",
                    self.output()
                );
            }
            if self.output().contains("listening on")
                && let Ok(r) = client.get("/")
            {
                return r;
            }
            assert!(
                started.elapsed() < limit,
                "no answer within {limit:?}:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

/// Runs `shell_command` in a fresh copy with an empty HOME and checks the site it serves.
fn try_the_site(shell_command: &str, first_answer_within: Duration) {
    no_account_configuration();
    let copy = fresh_copy();
    let home = TempDir::new("readme-home");
    let logs = TempDir::new("readme-log");
    let mut server = Running::start(
        shell_command,
        copy.path(),
        home.path(),
        logs.join("serve.log"),
    );
    let addr: SocketAddr = ADDR.parse().unwrap();
    let client = HttpClient::new(addr);
    let page = server.wait_for_page(&client, first_answer_within);
    let output = server.output();
    assert_eq!(page.status, 200, "{}\n{output}", page.everything());
    assert!(
        page.text().contains("<form"),
        "the page has its form: {}",
        page.text()
    );
    assert!(
        output.contains("using the echo provider"),
        "no configuration: the echo provider\n{output}"
    );
    for n in 1..=30 {
        let r = client.get(LINK_QUERY).expect("an answer");
        assert_eq!(
            r.status,
            200,
            "request {n}: {}\n{}",
            r.everything(),
            server.output()
        );
        assert!(r.text().contains(LINK), "request {n}: {}", r.everything());
    }
    let refused = client.get(LINK_QUERY).expect("an answer");
    assert_eq!(refused.status, 429, "request 31: {}", refused.everything());
    let retry = refused.retry_after();
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    let log = server.output();
    assert!(
        !log.contains("not set up") && !log.contains("resolve: error"),
        "{log}"
    );
}

#[test]
fn the_readme_commands_serve_the_page_and_answer_links_with_an_empty_home() {
    // One after the other: both listen on the README's address.
    let readme_command = readme_serve_command();
    try_the_site(&readme_command, Duration::from_secs(1200));
    let binary = env!("CARGO_BIN_EXE_resolve");
    try_the_site(&format!("exec '{binary}' serve"), Duration::from_secs(30));
}
