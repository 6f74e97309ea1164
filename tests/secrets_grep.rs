//! Secrets never shown: the provider token and the MySQL and Redis passwords (right and wrong ones), in CGI and FastCGI mode, through successes, provider failures that echo the token back, store failures and configuration mistakes. Everything the tests capture (every answer's bytes, Apache's whole directory with its logs and web root, the data directory, the store's contents, what `check`, `check --live` and `sweep` print, the binary's own stderr as a CGI program and as a FastCGI process) is searched for each secret in its common encodings.
//!
//! Each secret holds a marker of its own (`QTOKENq`, `QMYSQLPW`, `QREDISPW`) among characters
//! that every encoding changes (`/ + = space & " < ' \ @ : % ?`), so a search finds it raw,
//! percent-encoded (both hex cases, `+` for space), JSON-escaped (also `\/` and `\u003c`), HTML-escaped,
//! in base64 (standard and URL-safe, at any alignment inside a longer encoded text), in hex, and
//! by its marker alone (any case) when only part of it got out. The search is shown to find each
//! encoding (`the_search_finds_every_encoding`) and, in every test, to find the secret where it
//! belongs: in what the provider stand-in received, in the configuration file.

mod support;

use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::config;
use support::fcgi::{FcgiProcess, FcgiRequest};
use support::redis::Resp;
use support::site::SiteBuilder;
use support::system;
use support::urlenc::{encode, link_param};
use support::{
    Apache, Cgi, HttpClient, MariaDb, Mode, Redis, Reply, Request, Response, Setup, Site,
};

const TOKEN: &str = "Tk9/QTOKENq+z= x&y\"<'\\";
const MYSQL_PW: &str = "Pm3@QMYSQLPWz:/%?&+= x\"<'\\";
const MYSQL_WRONG: &str = "Wm5@QMYSQLPWwrong:/%+= x";
const REDIS_PW: &str = "Rd7@QREDISPWz:/%?&+= x\"<'\\";
const REDIS_WRONG: &str = "Wr2@QREDISPWwrong:/%+= x";
/// Secrets written as JSON numbers by mistake (a password of digits, unquoted).
const NUMBER_PW: u64 = 9_137_046_285_193;
const NUMBER_TOKEN: u64 = 8_264_019_375_921;
const NUMBER_URL: u64 = 7_391_508_264_617;

const MODES: [Mode; 2] = [Mode::Cgid, Mode::Fcgid];

// ---------------------------------------------------------------------------------------------
// The search

/// A secret and its marker (None: search the value's encodings only).
struct Secret {
    name: &'static str,
    value: String,
    marker: Option<&'static str>,
}

fn secret(name: &'static str, value: &str, marker: Option<&'static str>) -> Secret {
    Secret {
        name,
        value: value.to_string(),
        marker,
    }
}

fn all_secrets() -> Vec<Secret> {
    vec![
        secret("provider token", TOKEN, Some("QTOKENq")),
        secret("MySQL password", MYSQL_PW, Some("QMYSQLPW")),
        secret("wrong MySQL password", MYSQL_WRONG, Some("QMYSQLPW")),
        secret("Redis password", REDIS_PW, Some("QREDISPW")),
        secret("wrong Redis password", REDIS_WRONG, Some("QREDISPW")),
        secret("password as a number", &NUMBER_PW.to_string(), None),
        secret("token as a number", &NUMBER_TOKEN.to_string(), None),
        secret("store URL as a number", &NUMBER_URL.to_string(), None),
    ]
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The base64 characters that depend on `s` alone when it starts `offset` bytes into a longer
/// text: what any base64 text containing `s` at that alignment contains.
fn base64_inside(s: &[u8], offset: usize) -> String {
    let mut padded = vec![0u8; offset];
    padded.extend_from_slice(s);
    let text = base64(&padded);
    // Character i covers bits 6i..6i+6 of the padded bytes; keep those within the secret.
    let first = (8 * offset).div_ceil(6);
    let last = (8 * (offset + s.len())) / 6; // exclusive
    text[first..last].to_string()
}

/// Every form in which `s` could get out, named.
fn encodings(s: &str) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = vec![("raw", s.to_string())];
    out.push(("upper case", s.to_ascii_uppercase()));
    out.push(("lower case", s.to_ascii_lowercase()));
    let pct = encode(s);
    out.push(("percent-encoded", pct.clone()));
    out.push(("percent-encoded, lower-case hex", lower_hex_escapes(&pct)));
    out.push(("form-encoded", pct.replace("%20", "+")));
    let json = serde_json::to_string(s).expect("JSON string");
    let json = json[1..json.len() - 1].to_string();
    out.push(("JSON-escaped", json.clone()));
    out.push(("JSON-escaped with \\/", json.replace('/', "\\/")));
    out.push((
        "JSON-escaped with \\u",
        json.replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026")
            .replace('\'', "\\u0027"),
    ));
    let html = s
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    out.push((
        "HTML-escaped",
        html.replace('"', "&quot;").replace('\'', "&#39;"),
    ));
    out.push((
        "HTML-escaped (numeric)",
        html.replace('"', "&#34;").replace('\'', "&#x27;"),
    ));
    for offset in 0..3 {
        let b = base64_inside(s.as_bytes(), offset);
        out.push(("base64", b.clone()));
        out.push(("base64url", b.replace('+', "-").replace('/', "_")));
    }
    let hex: String = s.bytes().map(|b| format!("{b:02x}")).collect();
    out.push(("hex", hex.clone()));
    out.push(("hex (upper case)", hex.to_ascii_uppercase()));
    // The same text under two names: keep the first (raw before its escapes).
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|(_, form)| seen.insert(form.clone()));
    out
}

fn lower_hex_escapes(pct: &str) -> String {
    let mut out = String::new();
    let mut rest = pct;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let code = rest.get(i..i + 3).unwrap_or(&rest[i..]);
        out.push_str(&code.to_ascii_lowercase());
        rest = &rest[i + code.len()..];
    }
    out.push_str(rest);
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One secret found in one capture.
struct Leak {
    secret: &'static str,
    how: String,
    label: String,
    context: String,
}

/// Everything a test captured, labelled.
#[derive(Default)]
struct Capture {
    items: Vec<(String, Vec<u8>)>,
}

impl Capture {
    fn add(&mut self, label: impl Into<String>, bytes: impl Into<Vec<u8>>) {
        self.items.push((label.into(), bytes.into()));
    }

    /// Every regular file under `dir`, except those `skip` names.
    fn tree(&mut self, label: &str, dir: &Path, skip: &dyn Fn(&Path) -> bool) {
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(entries) = fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                let Ok(kind) = e.file_type() else { continue };
                if kind.is_dir() {
                    stack.push(path);
                } else if kind.is_file() && !skip(&path) {
                    let bytes =
                        fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
                    let rel = path
                        .strip_prefix(dir)
                        .unwrap_or(&path)
                        .display()
                        .to_string();
                    self.add(format!("{label}/{rel}"), bytes);
                }
            }
        }
    }

    /// Panics unless some capture whose label contains `label` holds `text`: shows that what
    /// was searched includes the lines about the failures a test caused.
    fn assert_holds(&self, label: &str, text: &str) {
        assert!(
            self.items
                .iter()
                .any(|(l, b)| l.contains(label) && find(b, text.as_bytes()).is_some()),
            "no capture named like {label:?} holds {text:?}"
        );
    }

    fn bytes(&self) -> usize {
        self.items.iter().map(|(_, b)| b.len()).sum()
    }

    /// Every place a secret appears, in any of its encodings or by its marker.
    fn leaks(&self, secrets: &[Secret]) -> Vec<Leak> {
        let mut leaks = Vec::new();
        for (label, bytes) in &self.items {
            let lower = bytes.to_ascii_lowercase();
            for s in secrets {
                let mut needles: Vec<(String, Vec<u8>, bool)> = encodings(&s.value)
                    .into_iter()
                    .map(|(how, n)| (how.to_string(), n.into_bytes(), false))
                    .collect();
                if let Some(m) = s.marker {
                    needles.push((
                        format!("marker {m}"),
                        m.to_ascii_lowercase().into_bytes(),
                        true,
                    ));
                }
                for (how, needle, any_case) in needles {
                    let hay = if any_case { &lower } else { bytes };
                    if let Some(at) = find(hay, &needle) {
                        let from = at.saturating_sub(120);
                        let to = (at + needle.len() + 120).min(bytes.len());
                        leaks.push(Leak {
                            secret: s.name,
                            how,
                            label: label.clone(),
                            context: String::from_utf8_lossy(&bytes[from..to]).into_owned(),
                        });
                        break; // one finding per secret and capture
                    }
                }
            }
        }
        leaks
    }

    /// Panics with every leak, one block each.
    fn assert_clean(&self, what: &str, secrets: &[Secret]) {
        let leaks = self.leaks(secrets);
        eprintln!(
            "{what}: searched {} captures, {} bytes, for {} secrets: {} leaks",
            self.items.len(),
            self.bytes(),
            secrets.len(),
            leaks.len()
        );
        let report: Vec<String> = leaks
            .iter()
            .map(|l| {
                format!(
                    "{} ({}) in {}:\n    ...{}...",
                    l.secret,
                    l.how,
                    l.label,
                    l.context.replace('\n', "\n    ")
                )
            })
            .collect();
        assert!(
            leaks.is_empty(),
            "{what}: {} secrets got out:\n{}",
            leaks.len(),
            report.join("\n")
        );
    }
}

/// The search must find `secret` in `text` (a capture where it belongs): proves that the
/// encodings searched for are the ones really used.
fn assert_found(secret: &Secret, label: &str, text: &[u8]) {
    let mut c = Capture::default();
    c.add(label, text.to_vec());
    assert!(
        c.leaks(std::slice::from_ref(secret))
            .iter()
            .any(|l| l.secret == secret.name),
        "the search does not find the {} in {label}, where it belongs:\n{}",
        secret.name,
        String::from_utf8_lossy(text)
    );
}

#[test]
fn the_search_finds_every_encoding() {
    let secrets = all_secrets();
    for s in &secrets {
        for (how, form) in encodings(&s.value) {
            // Inside other text at every alignment (base64 of a longer text included).
            for pad in 0..3 {
                let mut c = Capture::default();
                let prefix = "x".repeat(pad);
                c.add("text", format!("before {prefix}{form} after"));
                let found = c.leaks(&secrets);
                assert!(
                    found.iter().any(|l| l.secret == s.name),
                    "{} {how} {form:?} not found",
                    s.name
                );
            }
        }
        let whole = base64(format!("user:{}", s.value).as_bytes());
        assert_found(s, "an Authorization: Basic value", whole.as_bytes());
        if let Some(m) = s.marker {
            assert_found(s, "the marker alone", m.to_ascii_uppercase().as_bytes());
        }
    }
    // Nothing is found in text without secrets.
    let mut c = Capture::default();
    c.add(
        "clean",
        "resolve: warn: 502 203.0.113.7: provider call failed: token=*** password=***",
    );
    assert!(c.leaks(&secrets).is_empty());
    assert_eq!(base64(b"any carnal pleas"), "YW55IGNhcm5hbCBwbGVhcw==");
    assert_eq!(base64(b"any carnal pleasu"), "YW55IGNhcm5hbCBwbGVhc3U=");
}

// ---------------------------------------------------------------------------------------------
// Sites, requests and commands

/// A site for these tests: the stand-in as provider (token in a header, error words read), a
/// file store, a generous rule, the cache on.
fn builder(label: &str) -> SiteBuilder {
    Setup::builder(label)
        .provider_section(|p| provider_section(&p.url("/unrestrict"), &header_auth()))
        .config(|cfg| cfg["cache"] = json!({"ttl_secs": 600}))
}

/// Apache running the binary in `mode` (each test runs both modes itself; the modes are named
/// literally so that tests/run-all.sh does not run this file once more under mod_fcgid).
fn start(builder: SiteBuilder, mode: Mode) -> Site {
    let builder = match mode {
        Mode::Cgid => builder.mode(Mode::Cgid),
        Mode::Fcgid => builder.mode(Mode::Fcgid),
    };
    builder.fcgid_pool(2).start()
}

/// One request; the answer's bytes exactly as they came are captured.
fn exchange(cap: &mut Capture, label: &str, client: &HttpClient, req: &Request) -> Response {
    let bytes = req.to_bytes(&client.server.to_string());
    let mut stream = client
        .connect()
        .unwrap_or_else(|e| panic!("{label}: connect: {e}"));
    let _ = stream.write_all(&bytes);
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("{label}: read: {e}"));
    cap.add(format!("answer to {label}"), raw.clone());
    Response::parse(&raw).unwrap_or_else(|e| panic!("{label}: {e}"))
}

const JSON: &str = "application/json";
const HTML: &str = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8";
const ANY: &str = "*/*";

/// The requests every scenario sends: GET in each format, a form POST, HEAD, and a bad link.
/// Returns the statuses of the GETs and the POST.
fn requests(cap: &mut Capture, label: &str, apache: &Apache, n: &mut usize) -> Vec<u16> {
    let client = apache
        .client()
        .bind_source("127.0.0.9")
        .timeout(Duration::from_secs(30));
    let mut statuses = Vec::new();
    let mut next = || {
        *n += 1;
        format!("https://example.com/file/{n}")
    };
    for accept in [JSON, HTML, ANY] {
        let link = next();
        let req = Request::get(&format!("/cgi-bin/resolve?{}", link_param(&link)))
            .header("Accept", accept);
        statuses.push(exchange(cap, &format!("{label}: GET {accept}"), &client, &req).status);
    }
    let link = next();
    let req = Request::post_form("/cgi-bin/resolve", link_param(&link)).header("Accept", JSON);
    statuses.push(exchange(cap, &format!("{label}: POST"), &client, &req).status);
    let link = next();
    let req = Request::head(&format!("/cgi-bin/resolve?{}", link_param(&link)));
    exchange(cap, &format!("{label}: HEAD"), &client, &req);
    let req = Request::get("/cgi-bin/resolve?link=ftp%3A%2F%2Fx").header("Accept", JSON);
    exchange(cap, &format!("{label}: bad link"), &client, &req);
    statuses
}

/// `resolve ARGS --config FILE`: everything it printed is captured.
fn command(cap: &mut Capture, label: &str, args: &[&str], config: &Path) -> (i32, String) {
    let out = system::command(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap_or_else(|e| panic!("run resolve {args:?}: {e}"));
    let mut text = out.stdout.clone();
    text.extend_from_slice(&out.stderr);
    cap.add(
        format!("resolve {} ({label})", args.join(" ")),
        text.clone(),
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&text).into_owned(),
    )
}

/// `check`, `check --live` and `sweep` for the configuration as it is now.
fn commands(cap: &mut Capture, label: &str, config: &Path) {
    command(cap, label, &["check"], config);
    command(
        cap,
        label,
        &["check", "--live", "https://example.com/file/live"],
        config,
    );
    command(cap, label, &["sweep"], config);
}

/// The binary run directly, as a CGI program and as a FastCGI process, for GETs and a POST: its
/// standard output, standard error and FastCGI error stream are captured.
fn direct(cap: &mut Capture, label: &str, config: &Path) {
    // A link of its own each time: never answered from the cache.
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let query = || {
        let run = RUN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        link_param(&format!("https://example.com/file/direct-{run}"))
    };
    for accept in [JSON, ANY] {
        let out = Cgi::new("GET", query())
            .config(config)
            .header("Accept", accept)
            .run();
        cap.add(
            format!("CGI stdout ({label}, {accept})"),
            out.stdout.clone(),
        );
        cap.add(
            format!("CGI stderr ({label}, {accept})"),
            out.stderr.clone(),
        );
    }
    let process = FcgiProcess::start(config);
    for req in [
        FcgiRequest::new("GET", &query()).header("Accept", JSON),
        FcgiRequest::new("POST", "")
            .form(&query())
            .header("Accept", HTML),
    ] {
        let answer = process.send(&req);
        cap.add(format!("FastCGI stdout ({label})"), answer.stdout);
        cap.add(format!("FastCGI stderr records ({label})"), answer.stderr);
    }
    std::thread::sleep(Duration::from_millis(100));
    cap.add(
        format!("FastCGI process stderr ({label})"),
        process.stderr(),
    );
}

/// Apache's whole directory (logs, configuration, run/, the web root and cgi-bin/), all but the
/// copies of the binary.
fn apache_tree(cap: &mut Capture, label: &str, apache: &Apache) {
    apache.settle_log();
    let cgi_bin = apache.dir().join("cgi-bin");
    cap.tree(&format!("apache ({label})"), apache.dir(), &|p: &Path| {
        p.starts_with(&cgi_bin)
    });
}

fn statuses_ok(label: &str, got: &[u16], want: u16) {
    assert!(
        got.iter().all(|s| *s == want),
        "{label}: answers {got:?}, expected all {want}"
    );
}

// ---------------------------------------------------------------------------------------------
// The provider token

fn header_auth() -> Value {
    json!({"header": "Authorization", "prefix": "Bearer "})
}

/// The provider section: the stand-in at `url`, the token in the header or the query, and the
/// provider's error words read (so that they can be shown, cleaned, to the visitor).
fn provider_section(url: &str, auth: &Value) -> Value {
    json!({
        "kind": "http", "url": url, "method": "POST", "token": TOKEN, "auth": auth,
        "link": {"form": "link"}, "download": "/download", "filename": "/filename",
        "error_message": "/error", "error_code": "/error_code",
        "timeout_ms": 1500, "connect_timeout_ms": 1000,
    })
}

/// Provider answers that carry the token back, and the status the visitor must get (None: any
/// answer, as long as the token is not in it).
fn token_echoes() -> Vec<(&'static str, Reply, Option<u16>)> {
    let pct = encode(TOKEN);
    vec![
        ("success", Reply::Default, Some(200)),
        (
            "401 naming the token",
            Reply::json(
                401,
                json!({"error": format!("bad token {TOKEN}"), "error_code": "AUTH_BAD_TOKEN"}),
            ),
            Some(502),
        ),
        (
            "link refused, in words that quote the token",
            Reply::json(
                400,
                json!({"error": format!("link refused for key {TOKEN} ({pct})"), "error_code": "WEIRD"}),
            ),
            Some(422),
        ),
        (
            "429 naming the token",
            Reply::json(429, json!({"error": format!("slow down, {TOKEN}")})),
            Some(503),
        ),
        (
            "500 page quoting the token",
            Reply::raw(
                500,
                "text/html",
                &format!("<h1>oops</h1><p>{TOKEN} {pct}</p>"),
            ),
            Some(502),
        ),
        (
            "401 naming the token in upper case",
            Reply::json(
                401,
                json!({"error": format!("bad token {}", TOKEN.to_ascii_uppercase())}),
            ),
            Some(502),
        ),
        (
            "401 quoting the Basic credentials, in base64",
            Reply::json(
                401,
                json!({"error": format!("bad credentials {}", base64(format!("user:{TOKEN}").as_bytes()))}),
            ),
            Some(502),
        ),
        (
            "401 quoting the token in hex",
            Reply::json(
                401,
                json!({"error": format!("bad key 0x{}", TOKEN.bytes().map(|b| format!("{b:02X}")).collect::<String>())}),
            ),
            Some(502),
        ),
        (
            "nonsense quoting the token",
            Reply::json(200, json!({"nothing": TOKEN})),
            None,
        ),
        (
            "file name carrying the token",
            Reply::json(
                200,
                json!({"download": "https://cdn.test/file/ok", "filename": format!("{TOKEN}.bin")}),
            ),
            None,
        ),
        (
            "download link carrying the token",
            Reply::json(
                200,
                json!({"download": format!("https://cdn.test/file?key={pct}"), "filename": "f.bin"}),
            ),
            None,
        ),
    ]
}

#[test]
fn provider_token_never_leaks_in_either_mode() {
    let secrets = all_secrets();
    let token = &secrets[0];
    let mut cap = Capture::default();
    let mut n = 0;
    for mode in MODES {
        let header = header_auth();
        let query = json!({"query": "key"});
        let sweep_all = |cfg: &mut Value| {
            cfg["store"]["sweep_one_in"] = json!(1);
            cfg["store"]["sweep_grace_secs"] = json!(0);
        };
        let site = start(builder("secret-token").config(sweep_all), mode);
        let (apache, provider, config) = (&site.apache, &site.provider, &site.config_path);
        // The binary run directly (as root, when the tests are) gets a data directory of its
        // own: files it made would be out of reach of the web server's account.
        let url = provider.url("/unrestrict");
        let direct_site = builder("secret-token-direct")
            .provider_section(move |_| provider_section(&url, &header_auth()))
            .config(sweep_all)
            .write();
        assert_found(token, "the configuration file", &fs::read(config).unwrap());
        for (auth_name, auth) in [("header", &header), ("query", &query)] {
            for setup in [&*site, &direct_site] {
                setup.edit_config(|cfg| cfg["provider"]["auth"] = auth.clone());
            }
            let direct_config = &direct_site.config_path;
            let asked_before = provider.requests().len();
            for (what, reply, want) in token_echoes() {
                provider.set_reply(reply);
                let label = format!("{} mode, token in the {auth_name}, {what}", mode.name());
                let statuses = requests(&mut cap, &label, apache, &mut n);
                if let Some(want) = want {
                    statuses_ok(&label, &statuses, want);
                }
                commands(&mut cap, &label, config);
                if mode == Mode::Cgid {
                    direct(&mut cap, &label, direct_config);
                }
            }
            // The provider got the token each time (raw in the header, encoded in the query).
            let received: Vec<u8> = provider.requests()[asked_before..]
                .iter()
                .flat_map(|r| r.everything().into_bytes())
                .collect();
            assert_found(
                token,
                &format!("what the provider received with the token in the {auth_name}"),
                &received,
            );
            // A provider that never answers.
            provider.set_reply(Reply::Hang);
            let label = format!("{} mode, token in the {auth_name}, no answer", mode.name());
            let client = apache.client().bind_source("127.0.0.9");
            let req = Request::get(&format!(
                "/cgi-bin/resolve?{}",
                link_param("https://example.com/file/hang")
            ))
            .header("Accept", JSON);
            assert_eq!(exchange(&mut cap, &label, &client, &req).status, 504);
            command(
                &mut cap,
                &label,
                &["check", "--live", "https://example.com/file/live"],
                config,
            );
            provider.set_reply(Reply::Default);
        }
        apache_tree(&mut cap, &format!("token, {}", mode.name()), apache);
        cap.tree(&format!("data dir ({})", mode.name()), &site.data, &|_| {
            false
        });
        cap.tree(
            &format!("data dir of the direct runs ({})", mode.name()),
            &direct_site.data,
            &|_| false,
        );
    }
    for mode in ["cgid", "fcgid"] {
        let log = format!("apache (token, {mode})/logs/error_log");
        cap.assert_holds(&log, "refused the site's credentials (HTTP 401)");
        cap.assert_holds(&log, "code=WEIRD");
    }
    cap.assert_holds("CGI stderr", "refused the site's credentials (HTTP 401)");
    cap.assert_holds(
        "FastCGI process stderr",
        "refused the site's credentials (HTTP 401)",
    );
    cap.assert_clean("provider token", &secrets);
}

// ---------------------------------------------------------------------------------------------
// Store passwords

/// Each scenario (what, the store section, the answer every request must get) through Apache
/// in both modes, by the commands, and (in the mod_cgid round) run directly.
fn store_scenarios(
    cap: &mut Capture,
    store: &str,
    secret: &Secret,
    scenarios: &[(&str, Value, u16)],
) {
    let mut n = 0;
    for mode in MODES {
        let first = scenarios[0].1.clone();
        let site = start(builder(&format!("secret-{store}")).store(first), mode);
        let config = &site.config_path;
        assert_found(secret, "the configuration file", &fs::read(config).unwrap());
        for (what, store, want) in scenarios {
            site.edit_config(|cfg| cfg["store"] = store.clone());
            let label = format!("{} mode, {what}", mode.name());
            let statuses = requests(cap, &label, &site.apache, &mut n);
            statuses_ok(&label, &statuses, *want);
            commands(cap, &label, config);
            if mode == Mode::Cgid {
                direct(cap, &label, config);
            }
        }
        apache_tree(cap, &format!("{store}, {}", mode.name()), &site.apache);
    }
}

/// The scenarios every store with a password goes through (what, the store section, the
/// answer every request must get): the password in its field and in the URL, then `own` (the
/// store's other ways of giving it), then a wrong one (allowed, denied, in the URL) and the
/// URL of a server that is not there. Every section has `common` (the kind, the timeouts);
/// `fields(password)` names the server with a password; `urls` are the right URL, one with
/// the wrong password and one with the right password at a port where nothing listens.
fn password_scenarios(
    common: &Value,
    fields: impl Fn(&str) -> Value,
    (right, wrong): (&str, &str),
    [url, wrong_url, gone_url]: [String; 3],
    own: Vec<(&'static str, Value)>,
) -> Vec<(&'static str, Value, u16)> {
    let section = |mut store: Value, on_error: &str| {
        for (name, value) in common.as_object().expect("an object") {
            store[name] = value.clone();
        }
        store["on_error"] = json!(on_error);
        store
    };
    let mut scenarios = vec![
        ("password field", section(fields(right), "deny"), 200),
        (
            "password in the URL",
            section(json!({"url": url}), "deny"),
            200,
        ),
    ];
    scenarios.extend(
        own.into_iter()
            .map(|(what, store)| (what, section(store, "deny"), 200)),
    );
    scenarios.extend([
        (
            "wrong password field, allow",
            section(fields(wrong), "allow"),
            200,
        ),
        (
            "wrong password field, deny",
            section(fields(wrong), "deny"),
            503,
        ),
        (
            "wrong password in the URL, deny",
            section(json!({"url": wrong_url}), "deny"),
            503,
        ),
        (
            "password in the URL of a server that is not there",
            section(json!({"url": gone_url}), "deny"),
            503,
        ),
    ]);
    scenarios
}

/// The store's refusals said `said` (the server's own words) in Apache's error log in both
/// modes, on the CGI program's standard error and in `resolve check`'s report; and no secret
/// is anywhere (`what`: the search, as reported).
fn assert_refusals_said(cap: &Capture, store: &str, said: &str, what: &str, secrets: &[Secret]) {
    for mode in ["cgid", "fcgid"] {
        cap.assert_holds(&format!("apache ({store}, {mode})/logs/error_log"), said);
    }
    cap.assert_holds("CGI stderr", said);
    cap.assert_holds("resolve check", said);
    cap.assert_clean(what, secrets);
}

// ---------------------------------------------------------------------------------------------
// The MySQL password

#[test]
fn mysql_password_never_leaks_in_either_mode() {
    let secrets = all_secrets();
    let db = MariaDb::builder("secrets").password(MYSQL_PW).start();
    let fields = |password: &str| {
        json!({"host": "127.0.0.1", "port": db.port(), "user": db.user(), "password": password,
               "database": db.database()})
    };
    let wrong_url = format!(
        "mysql://{}:{}@127.0.0.1:{}/{}",
        db.user(),
        encode(MYSQL_WRONG),
        db.port(),
        db.database()
    );
    let gone_url = format!(
        "mysql://{}:{}@127.0.0.1:1/{}",
        db.user(),
        encode(MYSQL_PW),
        db.database()
    );
    let scenarios = password_scenarios(
        &json!({"kind": "mysql", "connect_timeout_ms": 1000, "read_timeout_ms": 1000,
                "sweep_one_in": 1}),
        fields,
        (MYSQL_PW, MYSQL_WRONG),
        [db.url(), wrong_url, gone_url],
        vec![("password in a socket URL", json!({"url": db.socket_url()}))],
    );
    let mut cap = Capture::default();
    store_scenarios(&mut cap, "mysql", &secrets[1], &scenarios);
    // What the store holds.
    for table in [
        "rate_counters",
        "rate_events",
        "rate_cache",
        "rate_journal",
        "rate_notes",
    ] {
        let rows = db.root_sql(&format!("SELECT * FROM `{}`.`{table}`", db.database()));
        cap.add(format!("table {table}"), rows);
    }
    assert_refusals_said(&cap, "mysql", "Access denied", "MySQL password", &secrets);
}

// ---------------------------------------------------------------------------------------------
// The Redis password

#[test]
fn redis_password_never_leaks_in_either_mode() {
    let secrets = all_secrets();
    let redis = Redis::builder("secrets").password(REDIS_PW).start();
    let socket = redis.socket().display().to_string();
    let scenarios = password_scenarios(
        &json!({"kind": "redis", "connect_timeout_ms": 500, "read_timeout_ms": 500}),
        |password: &str| json!({"host": "127.0.0.1", "port": redis.port(), "password": password}),
        (REDIS_PW, REDIS_WRONG),
        [
            redis.url(),
            format!(
                "redis://:{}@127.0.0.1:{}/0",
                encode(REDIS_WRONG),
                redis.port()
            ),
            format!("redis://:{}@127.0.0.1:1/0", encode(REDIS_PW)),
        ],
        vec![
            (
                "password in a unix:// URL",
                json!({"url": redis.unix_url()}),
            ),
            (
                "password field with the socket",
                json!({"socket": socket, "password": REDIS_PW}),
            ),
        ],
    );
    let mut cap = Capture::default();
    store_scenarios(&mut cap, "redis", &secrets[3], &scenarios);
    // What the store holds: every key and value.
    let mut dump = String::new();
    if let Resp::Array(Some(keys)) = redis.cmd(&["KEYS", "*"]) {
        for key in keys {
            let key = key.as_text().expect("key");
            let value = match redis.cmd(&["TYPE", &key]).as_text().as_deref() {
                Some("hash") => redis.cmd(&["HGETALL", &key]),
                Some("zset") => redis.cmd(&["ZRANGE", &key, "0", "-1", "WITHSCORES"]),
                Some("list") => redis.cmd(&["LRANGE", &key, "0", "-1"]),
                _ => redis.cmd(&["GET", &key]),
            };
            dump.push_str(&format!("{key}: {value}\n"));
        }
    }
    assert!(!dump.is_empty(), "the Redis store holds nothing");
    cap.add("redis keys and values", dump);
    cap.add("redis log", redis.log());
    assert_refusals_said(&cap, "redis", "WRONGPASS", "Redis password", &secrets);
}

// ---------------------------------------------------------------------------------------------
// Configuration mistakes

/// Configuration files with a mistake next to a secret, or in it: the error must name the field,
/// never quote the secret.
fn mistakes(provider_url: &str) -> Vec<(&'static str, String)> {
    let token = serde_json::to_string(TOKEN).unwrap();
    let pw = serde_json::to_string(MYSQL_PW).unwrap();
    let rpw = serde_json::to_string(REDIS_PW).unwrap();
    let provider = format!(
        r#""provider": {{"kind": "http", "url": "{provider_url}", "token": {token}, "download": "/download"}}"#
    );
    vec![
        (
            "two commas after the token",
            format!(r#"{{{provider},, "store": {{}}}}"#),
        ),
        (
            "text after the object",
            format!(r#"{{{provider}}} and {token}"#),
        ),
        (
            "the file ends inside the token",
            format!(r#"{{{}"#, &provider[..provider.find("Tk9").unwrap() + 12]),
        ),
        (
            "a bad escape in the token",
            format!(
                r#"{{"provider": {{"kind": "http", "url": "{provider_url}", "token": "Tk9QTOKENq\q", "download": "/d"}}}}"#
            ),
        ),
        (
            "an unknown field beside the token",
            format!(
                r#"{{"provider": {{"kind": "http", "url": "{provider_url}", "token": {token}, "tokn": {token}, "download": "/d"}}}}"#
            ),
        ),
        (
            "the token where the auth object goes",
            format!(
                r#"{{"provider": {{"kind": "http", "url": "{provider_url}", "token": {token}, "auth": {token}, "download": "/d"}}}}"#
            ),
        ),
        (
            "a MySQL password and a port that is not a number",
            format!(
                r#"{{"provider": {{"kind": "echo"}}, "store": {{"kind": "mysql", "host": "127.0.0.1", "port": "x", "password": {pw}}}}}"#
            ),
        ),
        (
            "a MySQL URL with a password and a bad port",
            format!(
                r#"{{"provider": {{"kind": "echo"}}, "store": {{"kind": "mysql", "url": "mysql://u:{}@127.0.0.1:x/db"}}}}"#,
                encode(MYSQL_PW)
            ),
        ),
        (
            "a Redis URL with a password and a bad scheme",
            format!(
                r#"{{"provider": {{"kind": "echo"}}, "store": {{"kind": "redis", "url": "redis+tls://:{}@127.0.0.1:1/0"}}}}"#,
                encode(REDIS_PW)
            ),
        ),
        (
            "a Redis password on the file store",
            format!(
                r#"{{"provider": {{"kind": "echo"}}, "store": {{"kind": "file", "password": {rpw}}}}}"#
            ),
        ),
        (
            "a MySQL password written as a number",
            format!(
                r#"{{"provider": {{"kind": "echo"}}, "store": {{"kind": "mysql", "host": "127.0.0.1", "password": {NUMBER_PW}}}}}"#
            ),
        ),
        (
            "a token written as a number",
            format!(
                r#"{{"provider": {{"kind": "http", "url": "{provider_url}", "token": {NUMBER_TOKEN}, "download": "/d"}}}}"#
            ),
        ),
        (
            "a store URL written as a number",
            format!(
                r#"{{"provider": {{"kind": "echo"}}, "store": {{"kind": "mysql", "url": {NUMBER_URL}}}}}"#
            ),
        ),
    ]
}

#[test]
fn configuration_mistakes_never_quote_a_secret() {
    let secrets = all_secrets();
    let mut cap = Capture::default();
    for mode in MODES {
        let site = start(builder("secret-config"), mode);
        let list = mistakes(&site.provider.url("/unrestrict"));
        let client = site.client().bind_source("127.0.0.9");
        for (what, text) in &list {
            let config = config::write_text(&site.dir, text);
            let label = format!("{} mode, {what}", mode.name());
            for accept in [JSON, HTML, ANY] {
                let req = Request::get(&format!(
                    "/cgi-bin/resolve?{}",
                    link_param("https://example.com/file/1")
                ))
                .header("Accept", accept);
                let r = exchange(&mut cap, &format!("{label}, {accept}"), &client, &req);
                assert_eq!(r.status, 503, "{label}: {}", r.everything());
            }
            if mode == Mode::Cgid {
                let (code, out) = command(&mut cap, &label, &["check"], &config);
                assert_ne!(code, 0, "{label}: check passed:\n{out}");
                assert!(out.contains("FAIL"), "{label}:\n{out}");
                direct(&mut cap, &label, &config);
            }
        }
        apache_tree(&mut cap, &format!("config, {}", mode.name()), &site.apache);
        assert_eq!(
            site.provider.calls(),
            0,
            "a broken configuration called the provider"
        );
    }
    for mode in ["cgid", "fcgid"] {
        cap.assert_holds(
            &format!("apache (config, {mode})/logs/error_log"),
            "resolve: error: configuration",
        );
    }
    cap.assert_clean("configuration mistakes", &secrets);
}
