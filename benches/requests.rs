//! Request parsing and answer rendering, in process (criterion): the CGI meta-variables of a typical browser request checked and its link decoded; the same request read from FastCGI records; a 429 and a 200 rendered as CGI output and wrapped in FastCGI records; and whole requests through App::handle with a file store, kept (FastCGI) or opened with the configuration for each request (CGI, without the exec); and block/allow lists of 10,000 entries next to none. Run: `cargo bench --bench requests`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use resolve::config::Config;
use resolve::gateway::fastcgi::connection::env_from_params;
use resolve::gateway::fastcgi::protocol as fastcgi;
use resolve::http::negotiate::Format;
use resolve::http::problem::{Kind, Problem};
use resolve::http::render;
use resolve::http::request::{self, Env};
use resolve::provider::resolved::Resolved;
use resolve::site::Site;

const LINK: &str =
    "link=https%3A%2F%2Frapidgator.net%2Ffile%2F0123456789abcdef%2Fholiday.part1.rar.html";

/// The variables Apache sets for a browser's GET.
fn browser_vars() -> Vec<(&'static str, String)> {
    vec![
        ("GATEWAY_INTERFACE", "CGI/1.1".into()),
        ("SERVER_PROTOCOL", "HTTP/1.1".into()),
        ("SERVER_SOFTWARE", "Apache/2.4.62 (Debian)".into()),
        ("SERVER_NAME", "downloads.example.net".into()),
        ("SERVER_ADDR", "192.0.2.10".into()),
        ("SERVER_PORT", "443".into()),
        ("SERVER_ADMIN", "webmaster@example.net".into()),
        ("SERVER_SIGNATURE", "".into()),
        ("REQUEST_SCHEME", "https".into()),
        ("HTTPS", "on".into()),
        ("DOCUMENT_ROOT", "/home/site/public_html".into()),
        ("CONTEXT_PREFIX", "/cgi-bin/".into()),
        (
            "CONTEXT_DOCUMENT_ROOT",
            "/home/site/public_html/cgi-bin/".into(),
        ),
        (
            "SCRIPT_FILENAME",
            "/home/site/public_html/cgi-bin/resolve".into(),
        ),
        ("SCRIPT_NAME", "/cgi-bin/resolve".into()),
        ("REQUEST_URI", format!("/cgi-bin/resolve?{LINK}")),
        ("REQUEST_METHOD", "GET".into()),
        ("QUERY_STRING", LINK.into()),
        ("REMOTE_ADDR", "203.0.113.77".into()),
        ("REMOTE_PORT", "51234".into()),
        ("PATH", "/usr/local/bin:/usr/bin:/bin".into()),
        ("HTTP_HOST", "downloads.example.net".into()),
        (
            "HTTP_USER_AGENT",
            "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0".into(),
        ),
        (
            "HTTP_ACCEPT",
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8".into(),
        ),
        ("HTTP_ACCEPT_LANGUAGE", "en-US,en;q=0.5".into()),
        ("HTTP_ACCEPT_ENCODING", "gzip, deflate, br, zstd".into()),
        ("HTTP_REFERER", "https://downloads.example.net/".into()),
        ("HTTP_CONNECTION", "keep-alive".into()),
        ("HTTP_UPGRADE_INSECURE_REQUESTS", "1".into()),
    ]
}

fn browser_env() -> Env {
    let mut env = Env::new();
    for (k, v) in browser_vars() {
        env.set(k, v);
    }
    env
}

/// The same request as mod_fcgid sends it.
fn browser_records() -> Vec<u8> {
    let vars = browser_vars();
    let pairs: Vec<(&[u8], &[u8])> = vars
        .iter()
        .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
        .collect();
    let mut params = Vec::new();
    fastcgi::encode_pairs(&mut params, &pairs);
    let mut out = Vec::new();
    fastcgi::encode_record(
        &mut out,
        fastcgi::BEGIN_REQUEST,
        1,
        &[0, 1, 0, 0, 0, 0, 0, 0],
    );
    fastcgi::encode_stream(&mut out, fastcgi::PARAMS, 1, &params);
    fastcgi::encode_stream(&mut out, fastcgi::STDIN, 1, &[]);
    out
}

fn parsing(c: &mut Criterion) {
    let env = browser_env();
    c.bench_function("parse: CGI variables to a checked link", |b| {
        b.iter(|| {
            let head = request::parse_head(black_box(&env), 8192).expect("valid");
            black_box(request::parse_link(&head, &env, &[]).expect("valid"))
        })
    });
    let post = browser_env()
        .with("REQUEST_METHOD", "POST")
        .with("QUERY_STRING", "")
        .with("CONTENT_TYPE", "application/x-www-form-urlencoded")
        .with("CONTENT_LENGTH", LINK.len().to_string());
    c.bench_function("parse: POST form to a checked link", |b| {
        b.iter(|| {
            let head = request::parse_head(black_box(&post), 8192).expect("valid");
            black_box(request::parse_link(&head, &post, LINK.as_bytes()).expect("valid"))
        })
    });
    let records = browser_records();
    c.bench_function("parse: FastCGI records to CGI variables", |b| {
        b.iter(|| {
            let mut rest = black_box(records.as_slice());
            let mut params = Vec::new();
            while let Ok(Some((record, used))) = fastcgi::parse_record(rest) {
                if record.kind == fastcgi::PARAMS {
                    params.extend_from_slice(&record.content);
                }
                rest = &rest[used..];
            }
            let pairs = fastcgi::parse_pairs(&params).expect("valid");
            black_box(env_from_params(&pairs))
        })
    });
}

fn rendering(c: &mut Criterion) {
    let limited =
        Problem::new(429, Kind::RateLimited, render::limited_sentence(42)).retry_after(42);
    let resolved = Resolved {
        size: None,
        download: "https://cdn.example/d/0123456789abcdef/holiday.part1.rar".into(),
        filename: Some("holiday.part1.rar".into()),
        files: Vec::new(),
    };
    let frame = render::Frame::new(Some("/cgi-bin/resolve"), None);
    for (name, format) in [
        ("text", Format::Text),
        ("json", Format::Json),
        ("html", Format::Html),
    ] {
        c.bench_function(&format!("render: 429 as {name}, CGI output"), |b| {
            b.iter(|| {
                let mut out = Vec::with_capacity(1024);
                render::problem(format, black_box(&limited), &frame)
                    .write_cgi(&mut out, false)
                    .expect("to memory");
                black_box(out)
            })
        });
        c.bench_function(&format!("render: 200 as {name}, CGI output"), |b| {
            b.iter(|| {
                let mut out = Vec::with_capacity(2048);
                render::resolved(format, black_box(&resolved), &frame)
                    .write_cgi(&mut out, false)
                    .expect("to memory");
                black_box(out)
            })
        });
    }
    let mut answer = Vec::new();
    render::resolved(Format::Html, &resolved, &frame)
        .write_cgi(&mut answer, false)
        .expect("to memory");
    c.bench_function("render: an answer wrapped in FastCGI records", |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(answer.len() + 64);
            fastcgi::encode_stream(&mut out, fastcgi::STDOUT, 1, black_box(&answer));
            fastcgi::encode_end(&mut out, 1, 0, fastcgi::REQUEST_COMPLETE);
            black_box(out)
        })
    });
}

fn whole_requests(c: &mut Criterion) {
    let dir = support::TempDir::new("bench-requests");
    let text = serde_json::json!({
        "provider": {"kind": "echo"},
        "store": {"kind": "file", "dir": dir.path(), "sweep_one_in": 0},
        "rules": [{"name": "ip", "key": "ip", "limit": 1, "window_secs": 3600}],
    })
    .to_string();
    let config = Config::from_json(&text, Path::new("/")).expect("valid configuration");
    let env = browser_env();
    let site = Site::new(config.clone(), resolve::support::log::Context::default());
    site.app().handle(&env, &mut std::io::empty()); // spends the one admitted request
    c.bench_function("handle: 429, file store kept (FastCGI)", |b| {
        b.iter(|| {
            let answer = site.app().handle(black_box(&env), &mut std::io::empty());
            assert_eq!(answer.response.status, 429);
            black_box(answer)
        })
    });
    c.bench_function(
        "handle: 429, configuration parsed and store opened (CGI without exec)",
        |b| {
            b.iter(|| {
                let config = Config::from_json(black_box(&text), Path::new("/")).expect("valid");
                let site = Site::new(config, resolve::support::log::Context::default());
                let answer = site.app().handle(&env, &mut std::io::empty());
                assert_eq!(answer.response.status, 429);
                black_box(answer)
            })
        },
    );
}

/// Block and allow lists of 10,000 entries next to none: the decision for a client that is in
/// neither (the most common case, the whole list searched), kept (FastCGI) and with the
/// configuration parsed for each request (CGI).
fn lists(c: &mut Criterion) {
    let dir = support::TempDir::new("bench-lists");
    let entries = |n: u32, base: u32| -> Vec<String> {
        (0..n)
            .map(|i| {
                let a = std::net::Ipv4Addr::from(base + i * 256);
                if i % 2 == 0 {
                    format!("{a}/24")
                } else {
                    format!("2001:db8:{:x}::/48", base / 65_536 + i)
                }
            })
            .collect()
    };
    for n in [0, 10_000] {
        let text = serde_json::json!({
            "provider": {"kind": "echo"},
            "store": {"kind": "file", "dir": dir.path(), "sweep_one_in": 0},
            "rules": [{"name": "ip", "key": "ip", "limit": 1, "window_secs": 3600}],
            "block": entries(n, 0x0B00_0000),
            "allow": entries(n, 0x2C00_0000),
        })
        .to_string();
        let config = Config::from_json(&text, Path::new("/")).expect("valid configuration");
        let env = browser_env();
        let site = Site::new(config, resolve::support::log::Context::default());
        site.app().handle(&env, &mut std::io::empty());
        c.bench_function(
            &format!("lists of {n}: handle a 429, kept (FastCGI)"),
            |b| {
                b.iter(|| {
                    let answer = site.app().handle(black_box(&env), &mut std::io::empty());
                    assert_eq!(answer.response.status, 429);
                    black_box(answer)
                })
            },
        );
        c.bench_function(&format!("lists of {n}: configuration parsed (CGI)"), |b| {
            b.iter(|| {
                black_box(Config::from_json(black_box(&text), Path::new("/")).expect("valid"))
            })
        });
        let probe: std::net::IpAddr = "198.51.100.7".parse().unwrap();
        let set = &site.config.block;
        c.bench_function(&format!("lists of {n}: one lookup"), |b| {
            b.iter(|| black_box(set.contains(black_box(probe))))
        });
    }
}

criterion_group!(benches, parsing, rendering, whole_requests, lists);
criterion_main!(benches);
