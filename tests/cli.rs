//! The command line as the owner meets it: `check`, `sweep`, `hash-key`, `hash-password`,
//! `serve` (with the dashboard), `--help`, `--version`, mistakes.

mod support;

use std::path::Path;
use std::process::Output;

use support::TempDir;
use support::system::{command, output_text};

/// `resolve ARGS`, with `RESOLVE_CONFIG=config` when given.
fn resolve(args: &[&str], config: Option<&Path>) -> Output {
    let mut cmd = command(args);
    if let Some(c) = config {
        cmd.env("RESOLVE_CONFIG", c);
    }
    cmd.output().unwrap()
}

#[test]
fn help_and_version() {
    let o = resolve(&["--help"], None);
    assert!(o.status.success());
    for command in ["serve", "check", "sweep", "hash-key", "hash-password"] {
        assert!(
            output_text(&o).contains(&format!("resolve {command}")),
            "--help lists {command}"
        );
    }
    let o = resolve(&["--version"], None);
    assert_eq!(
        output_text(&o).trim(),
        format!("resolve {}", env!("CARGO_PKG_VERSION"))
    );
    let o = resolve(&["frobnicate"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(output_text(&o).contains("unknown command"));
    let o = resolve(&["check", "--config"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(output_text(&o).contains("needs a value"));
}

#[test]
fn hash_key_prints_the_sha256_of_the_key_on_stdin() {
    use std::io::Write;
    let mut child = command(&["hash-key"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"password").unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
    );
}

/// `resolve hash-password` with `input` on its standard input.
fn hash_password(input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = command(&["hash-password"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn hash_password_prints_a_salted_argon2id_hash_that_check_accepts() {
    let o = hash_password(b"correct horse battery staple\n");
    assert!(o.status.success(), "{}", output_text(&o));
    let hash = String::from_utf8_lossy(&o.stdout).trim().to_owned();
    assert!(
        hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
        "{hash}"
    );
    assert!(resolve::support::password::verify(
        &hash,
        "correct horse battery staple"
    ));
    assert!(!resolve::support::password::verify(
        &hash,
        "correct horse battery staple\n"
    ));
    // Salted: the same password twice makes two hashes.
    let again = String::from_utf8_lossy(&hash_password(b"correct horse battery staple").stdout)
        .trim()
        .to_owned();
    assert_ne!(again, hash);
    assert!(resolve::support::password::verify(
        &again,
        "correct horse battery staple"
    ));

    // The configuration takes it, and check says the dashboard is on (without showing it).
    let dir = TempDir::new("cli-admin");
    let config = dir.join("config.json");
    let text = serde_json::json!({"provider": {"kind": "echo"}, "store": {"dir": "data"},
        "admin": {"password_hash": hash}});
    std::fs::write(&config, text.to_string()).unwrap();
    let o = resolve(&["check", "--config", config.to_str().unwrap()], None);
    let out = output_text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("dashboard: on at /cgi-bin/resolve/admin"),
        "{out}"
    );
    assert!(out.contains("\"password_hash\": \"***\""), "{out}");
    assert!(!out.contains(&hash), "{out}");
    std::fs::write(
        &config,
        r#"{"provider": {"kind": "echo"}, "store": {"dir": "data"}}"#,
    )
    .unwrap();
    let out = output_text(&resolve(
        &["check", "--config", config.to_str().unwrap()],
        None,
    ));
    assert!(out.contains("dashboard: off"), "{out}");
}

#[test]
fn hash_password_refuses_empty_and_short_passwords() {
    for (input, says) in [
        (&b""[..], "empty"),
        (b"\n", "empty"),
        (b"hunter2\n", "7 characters: use at least 12"),
    ] {
        let o = hash_password(input);
        assert_eq!(o.status.code(), Some(2), "{input:?}");
        assert!(o.stdout.is_empty(), "nothing printed on standard output");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(says) && err.contains("nothing was made"),
            "{err}"
        );
        assert!(
            !err.contains("hunter2"),
            "the password is not repeated: {err}"
        );
    }
}

#[test]
fn check_reports_a_ready_site_with_secrets_masked() {
    let dir = TempDir::new("cli-ready");
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"provider": {"kind": "http", "url": "https://api.example/unrestrict",
            "token": "tok-VERY-SECRET", "download": "/download"},
            "store": {"dir": "data"}}"#,
    )
    .unwrap();
    let o = resolve(&["check", "--config", config.to_str().unwrap()], None);
    let out = output_text(&o);
    assert!(o.status.success(), "{out}");
    assert!(!out.contains("tok-VERY-SECRET"), "{out}");
    assert!(out.contains("\"token\": \"***\""), "{out}");
    assert!(
        out.contains(&format!("file store in {}", dir.join("data").display())),
        "{out}"
    );
    assert!(
        out.contains("rule ip: 30 requests per 60 s per client address"),
        "{out}"
    );
    // The data directory's budget, at its defaults.
    assert!(out.contains("\"max_files\": 10000"), "{out}");
    assert!(out.contains("\"max_bytes\": 67108864"), "{out}");
    assert!(out.trim_end().ends_with("OK"), "{out}");
    // The environment variable is honoured the same way.
    let o = resolve(&["check"], Some(&config));
    assert!(o.status.success());
    assert!(output_text(&o).contains("from RESOLVE_CONFIG"));
}

#[test]
fn check_explains_what_is_wrong() {
    let dir = TempDir::new("cli-wrong");
    let config = dir.join("config.json");
    let cases = [
        (
            r#"{"rules": [{"name": "ip", "key": "ip", "limit": 0, "window_secs": 60}]}"#,
            "rules[0].limit (line 1, column 40): must be 1",
        ),
        (
            r#"{"store": {"dir": "d"}, "rulez": []}"#,
            "unknown field `rulez`",
        ),
        (
            r#"{"store": {"dir": "d"}}"#,
            "FAIL provider: none configured",
        ),
        ("not json", "line 1 column 2"),
    ];
    for (body, expected) in cases {
        std::fs::write(&config, body).unwrap();
        let o = resolve(&["check", "--config", config.to_str().unwrap()], None);
        assert_eq!(o.status.code(), Some(1), "{body}");
        assert!(
            output_text(&o).contains(expected),
            "{body}: {}",
            output_text(&o)
        );
    }
    let o = resolve(
        &[
            "check",
            "--config",
            dir.join("absent.json").to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(output_text(&o).contains("cannot read the configuration"));
}

#[test]
fn sweep_removes_stale_files_only() {
    let dir = TempDir::new("cli-sweep");
    let data = dir.join("data");
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"provider": {"kind": "echo"}, "store": {"dir": "data", "sweep_grace_secs": 0, "sweep_one_in": 0},
            "rules": [{"name": "ip", "key": "ip", "limit": 5, "window_secs": 1}]}"#,
    )
    .unwrap();
    for addr in ["192.0.2.1", "192.0.2.2", "192.0.2.3"] {
        let o = std::process::Command::new(support::binary())
            .env_clear()
            .env("GATEWAY_INTERFACE", "CGI/1.1")
            .env("REQUEST_METHOD", "GET")
            .env("QUERY_STRING", "link=https://e.example/f")
            .env("REMOTE_ADDR", addr)
            .env("RESOLVE_CONFIG", &config)
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&o.stdout).starts_with("Status: 200"));
    }
    let o = resolve(&["sweep", "--config", config.to_str().unwrap()], None);
    assert!(
        output_text(&o).contains("3 keys looked at, 0 removed"),
        "{}",
        output_text(&o)
    );
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let o = resolve(&["sweep", "--config", config.to_str().unwrap()], None);
    assert!(
        output_text(&o).contains("3 keys looked at, 3 removed"),
        "{}",
        output_text(&o)
    );
    assert!(data.is_dir());
}

/// `resolve check` on a `config.json` written in `dir` with permissions `mode`, for a site with
/// the echo provider and its data in `dir/data`.
fn check_echo_site(dir: &Path, mode: u32) -> Output {
    use std::os::unix::fs::PermissionsExt;
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"provider": {"kind": "echo"}, "store": {"dir": "data"}}"#,
    )
    .unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(mode)).unwrap();
    resolve(&["check", "--config", config.to_str().unwrap()], None)
}

#[test]
fn check_warns_about_exposed_secrets() {
    let tmp = TempDir::new("cli-exposed");
    let o = check_echo_site(&tmp.mkdir("public_html"), 0o644);
    let out = output_text(&o);
    assert!(
        out.contains("WARN configuration") && out.contains("under the web root (public_html)"),
        "{out}"
    );
    assert!(
        out.contains("can be read by other accounts (mode 644): chmod 600"),
        "{out}"
    );
    assert!(out.contains("WARN data directory"), "{out}");
    // Private and outside the web root: no warning.
    let home = TempDir::new("cli-private");
    let o = check_echo_site(home.path(), 0o600);
    assert!(!output_text(&o).contains("WARN"), "{}", output_text(&o));
}

#[test]
fn serve_answers_the_dashboard_at_its_path() {
    let dir = TempDir::new("cli-serve-admin");
    let hash = resolve::support::password::hash("correct horse battery staple", &[4; 16]).unwrap();
    let config = dir.join("config.json");
    let text = serde_json::json!({"provider": {"kind": "echo"},
        "store": {"dir": dir.join("data")}, "admin": {"password_hash": hash}});
    std::fs::write(&config, text.to_string()).unwrap();
    let port = support::free_port();
    let public = Path::new(env!("CARGO_MANIFEST_DIR")).join("public");
    let mut server = command(&[
        "serve",
        "--addr",
        &format!("127.0.0.1:{port}"),
        "--public",
        public.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let client = support::HttpClient::new(([127, 0, 0, 1], port).into());
    let started = std::time::Instant::now();
    let answer = loop {
        match client.get("/cgi-bin/resolve/admin") {
            Ok(r) => break r,
            Err(e) if started.elapsed() < std::time::Duration::from_secs(20) => {
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) => panic!("resolve serve did not answer: {e}"),
        }
    };
    let link = client.get("/cgi-bin/resolve?link=https%3A%2F%2Fexample.com%2Ff");
    let other = client.get("/cgi-bin/resolvex");
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(answer.status, 200, "{}", answer.everything());
    assert!(
        answer.text().contains("Sign in to the dashboard"),
        "{}",
        answer.everything()
    );
    assert_eq!(answer.header("X-Frame-Options"), Some("DENY"));
    assert!(
        answer
            .header("Set-Cookie")
            .is_some_and(|c| c.contains("; Path=/cgi-bin/resolve/admin;")),
        "{}",
        answer.everything()
    );
    // The program's own address is as it was; a longer name is not the program.
    assert_eq!(link.unwrap().status, 200);
    assert_eq!(other.unwrap().status, 404);
}

#[test]
fn check_and_block_judge_the_lists_as_the_dashboard_does() {
    let dir = TempDir::new("cli-reach");
    let config = dir.join("config.json");
    let config_arg = config.to_str().unwrap();
    // What the settings boxes once saved without a word: everyone blocked, everyone allowed,
    // and no visitor limit left.
    std::fs::write(
        &config,
        r#"{"provider": {"kind": "echo"}, "store": {"dir": "data"}, "rules": [],
            "block": ["0.0.0.0/0", "10.0.0.0/8", "198.51.100.0/24"], "allow": ["::/0"]}"#,
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let o = resolve(&["check", "--config", config_arg], None);
    let out = output_text(&o);
    for warning in [
        "WARN block: 0.0.0.0/0 covers every IPv4 address: it refuses every visitor",
        "WARN block: 10.0.0.0/8 is wider than an IPv4 /16",
        "WARN allow: ::/0 covers every IPv6 address: it lets past the visitor limits every visitor",
        "WARN rules: no rule counts per visitor",
    ] {
        assert!(out.contains(warning), "{warning}\n{out}");
    }
    assert!(
        !out.contains("198.51.100.0/24;"),
        "an ordinary range: {out}"
    );
    assert_eq!(out.matches("WARN").count(), 4, "{out}");
    // `resolve block` asks for --wide where the dashboard would ask for a confirmation.
    for range in ["0.0.0.0/0", "::/0", "10.0.0.0/8"] {
        let o = resolve(&["block", range, "--config", config_arg], None);
        let out = output_text(&o);
        assert!(!o.status.success(), "{range}: {out}");
        assert!(
            out.contains(&format!("resolve block {range} --wide")),
            "{range}: {out}"
        );
        let o = resolve(&["blocks", "--config", config_arg], None);
        assert!(
            output_text(&o).contains("No blocks in the store."),
            "{range}: {}",
            output_text(&o)
        );
    }
    let o = resolve(
        &["block", "10.0.0.0/8", "--wide", "--config", config_arg],
        None,
    );
    assert!(o.status.success(), "{}", output_text(&o));
    let o = resolve(&["block", "10.1.0.0/16", "--config", config_arg], None);
    assert!(o.status.success(), "{}", output_text(&o));
    let listed = output_text(&resolve(&["blocks", "--config", config_arg], None));
    assert!(
        listed.contains("10.0.0.0/8") && listed.contains("10.1.0.0/16"),
        "{listed}"
    );
}

/// The context a log line ends with: `[TIME; configuration FILE (from …)]`, the time in UTC.
fn context_of(line: &str) -> (&str, &str) {
    let context = line
        .rsplit_once(" [")
        .and_then(|(_, c)| c.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no context: {line}"));
    let (time, file) = context
        .split_once("; configuration ")
        .unwrap_or_else(|| panic!("no configuration named: {line}"));
    assert_eq!(time.len(), "2026-12-03T08:00:00Z".len(), "{line}");
    assert!(time.starts_with("20") && time.ends_with('Z'), "{line}");
    (time, file)
}

#[test]
fn the_stores_own_lines_carry_the_time_and_the_configuration() {
    let dir = TempDir::new("cli-store-context");
    let data = dir.join("data");
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"provider": {"kind": "echo"}, "store": {"dir": "data", "sweep_one_in": 0},
            "rules": [{"name": "ip", "key": "ip", "limit": 5, "window_secs": 60}]}"#,
    )
    .unwrap();
    let request = || {
        std::process::Command::new(support::binary())
            .env_clear()
            .env("GATEWAY_INTERFACE", "CGI/1.1")
            .env("REQUEST_METHOD", "GET")
            .env("QUERY_STRING", "link=https://e.example/f")
            .env("REMOTE_ADDR", "192.0.2.1")
            .env("RESOLVE_CONFIG", &config)
            .output()
            .unwrap()
    };
    assert!(String::from_utf8_lossy(&request().stdout).starts_with("Status: 200"));
    // The data directory deleted: the request that makes it again says so (the store's line).
    std::fs::remove_dir_all(&data).unwrap();
    let o = request();
    let log = String::from_utf8_lossy(&o.stderr).into_owned();
    let line = log
        .lines()
        .find(|l| l.starts_with("resolve: error: ACTION NEEDED: the data directory "))
        .unwrap_or_else(|| panic!("no line for the directory made again: {log}"));
    let (_, file) = context_of(line);
    assert_eq!(file, format!("{} (from RESOLVE_CONFIG)", config.display()));
    // Made again by hand: the sweep command's store says so, naming the file it was given.
    std::fs::remove_dir_all(&data).unwrap();
    std::fs::create_dir(&data).unwrap();
    let o = resolve(&["sweep", "--config", config.to_str().unwrap()], None);
    let log = String::from_utf8_lossy(&o.stderr).into_owned();
    let line = log
        .lines()
        .find(|l| l.starts_with("resolve: error: ACTION NEEDED: the data directory "))
        .unwrap_or_else(|| panic!("no line for the directory made again: {log}"));
    let (_, file) = context_of(line);
    assert_eq!(file, format!("{} (from --config)", config.display()));
}

/// Every file under `dir`, read.
fn files_under(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    out
}

/// The program starts without std's runtime start, so it checks its standard descriptors and
/// sets SIGPIPE aside itself: a CGI process started with standard error closed writes no log
/// line into a data file, and one whose client is gone before the answer (its standard output
/// a pipe nobody reads) still ends normally, with the request counted and journalled.
#[test]
fn a_closed_descriptor_or_a_client_gone_loses_nothing() {
    let dir = TempDir::new("cli-descriptors");
    let data = dir.path().join("data");
    let config = support::config::write(
        &dir,
        &serde_json::json!({
            "provider": {"kind": "echo"},
            "store": {"kind": "file", "dir": data},
            "rules": [support::config::rule("ip", "ip", 1, 86400)],
            "account": null
        }),
    );
    // A link that is no link: 400, and a line in the log, with standard error closed.
    let mut closed = std::process::Command::new("sh");
    closed
        .arg("-c")
        .arg(r#"exec "$0" 2>&-"#)
        .arg(support::system::binary())
        .env_clear()
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("REQUEST_METHOD", "GET")
        .env("QUERY_STRING", "link=not-a-link")
        .env("REMOTE_ADDR", "192.0.2.7")
        .env("RESOLVE_CONFIG", &config)
        .stdin(std::process::Stdio::null());
    let o = closed.output().unwrap();
    assert!(o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("Status: 400"),
        "{o:?}"
    );
    // Admitted, then refused, each answer written to a pipe whose reader is gone.
    for _ in 0..2 {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let status =
            support::cgi::bare_get(&config, "link=https%3A%2F%2Fexample.com%2Ff", "192.0.2.8")
                .stdout(writer)
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
        assert_eq!(status.code(), Some(0), "ended by a signal: {status:?}");
    }
    let o = resolve(&["stats", "--json"], Some(&config));
    assert!(o.status.success(), "{}", output_text(&o));
    let stats: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(stats["requests"], 3, "{stats}");
    assert_eq!(stats["admitted"], 1, "{stats}");
    assert_eq!(stats["refused_total"], 1, "{stats}");
    assert_eq!(stats["bad_requests"]["bad_link"], 1, "{stats}");
    for (path, bytes) in files_under(&data) {
        let text = String::from_utf8_lossy(&bytes);
        // A log line starts `resolve: LEVEL:`; a store key (`resolve:ip:…`, which the
        // remembered refusals name) is no log line.
        assert!(
            !text.contains("resolve: ") && !text.contains("not-a-link"),
            "{} holds a log line: {text}",
            path.display()
        );
    }
}
