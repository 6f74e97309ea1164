//! Requests per second and latency (median, 99th percentile) of the binary under a real Apache on loopback, driven by wrk: for the file, MariaDB and Redis stores the 429 path (with and without the usage journal) and the 200 path under mod_cgid and under mod_fcgid, each as a ratio to a no-op CGI program writing a fixed 429 (the floor of any process-per-request program) measured in alternation with it, so that a machine busy with other work slows both alike; and the peak memory of one CGI request. Prints one table; asserts nothing about speed. Run it through bench/run.sh, which builds the static binary and the floor program.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::{Apache, MariaDb, Mode, Provider, Redis, Request, TempDir};

const LINK: &str = "link=https%3A%2F%2Fhost.example%2Ffile.zip";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn required_file(name: &str) -> PathBuf {
    let path = PathBuf::from(std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run bench/run.sh, which builds the programs to measure")
    }));
    assert!(path.is_file(), "{name}={} is not a file", path.display());
    path
}

/// One measured row.
struct Row {
    store: &'static str,
    server: &'static str,
    path: String,
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// Median of the ratios to the floor run just before each round.
    ratio: f64,
    /// Answers other than the expected status class, and socket errors, as wrk counts them.
    problems: String,
}

/// Rounds per row, each a run of the floor then one of the row.
const ROUNDS: u64 = 5;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// "1.23ms", "850.00us", "1.02s" in milliseconds.
fn millis(text: &str) -> f64 {
    let (number, factor) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (text, f64::NAN)
    };
    number.parse::<f64>().map_or(f64::NAN, |n| n * factor)
}

/// Runs wrk against `url`; `expect_2xx` tells which answers are the expected ones.
fn wrk(url: &str, seconds: u64, connections: u32, expect_2xx: bool) -> (f64, f64, f64, String) {
    let out = Command::new("wrk")
        .args(["-t", "2", "-c", &connections.to_string()])
        .args(["-d", &format!("{seconds}s"), "--latency", url])
        .output()
        .expect("run wrk (apt-get install wrk)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let field = |prefix: &str| -> Option<String> {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(prefix))
            .map(|v| v.trim().to_string())
    };
    let rps: f64 = field("Requests/sec:")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no Requests/sec in wrk's output:\n{text}"));
    let p50 = field("50%").map_or(f64::NAN, |v| millis(&v));
    let p99 = field("99%").map_or(f64::NAN, |v| millis(&v));
    let total: u64 = text
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or(0);
    let non_2xx: u64 = field("Non-2xx or 3xx responses:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let unexpected = if expect_2xx { non_2xx } else { total - non_2xx };
    let mut problems = String::new();
    if unexpected > 0 {
        problems.push_str(&format!("{unexpected} unexpected answers "));
    }
    if let Some(errors) = field("Socket errors:") {
        problems.push_str(&format!("socket errors: {errors}"));
    }
    (rps, p50, p99, problems)
}

/// A configuration for `store`: the provider stand-in, and one rule.
fn site_config(provider: &Provider, store: &Value, limit: u64) -> Value {
    json!({
        "provider": {
            "kind": "http", "url": provider.url("/unrestrict"), "method": "POST", "token": "bench-token",
            "link": {"form": "link"}, "download": "/download", "filename": "/filename"
        },
        "store": store,
        "rules": [{"name": "ip", "key": "ip", "limit": limit, "window_secs": 3600}],
    })
}

/// Peak resident memory, in kB, of one CGI request run directly under /usr/bin/time -v.
fn peak_rss_kb(binary: &Path, config: &Path, remote_addr: &str) -> (u64, String) {
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(binary)
        .env_clear()
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("REQUEST_METHOD", "GET")
        .env("QUERY_STRING", LINK)
        .env("REMOTE_ADDR", remote_addr)
        .env("RESOLVE_CONFIG", config)
        .stdin(Stdio::null())
        .output()
        .expect("run /usr/bin/time (apt-get install time)");
    let status = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let kb = String::from_utf8_lossy(&out.stderr)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
        .and_then(|v| v.trim().parse().ok())
        .expect("Maximum resident set size in /usr/bin/time's output");
    (kb, status)
}

fn main() {
    // `cargo bench` passes --bench; nothing else is taken from the command line.
    let binary = required_file("RESOLVE_BENCH_BINARY");
    let floor = required_file("RESOLVE_BENCH_FLOOR");
    let seconds: u64 = env_or("RESOLVE_BENCH_SECONDS", 10);
    let connections: u32 = env_or("RESOLVE_BENCH_CONNECTIONS", 32);
    // Subsets, for quicker looks: RESOLVE_BENCH_STORES=file,redis RESOLVE_BENCH_SERVERS=cgid
    let only = |name: &str| -> Vec<String> {
        std::env::var(name)
            .map(|v| v.split(',').map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let (only_stores, only_servers) = (only("RESOLVE_BENCH_STORES"), only("RESOLVE_BENCH_SERVERS"));

    // Keeps connections open, as real provider APIs do; keeps no requests.
    let provider = Provider::builder().keep_alive().without_recording().start();
    let db = MariaDb::builder("bench").max_connections(400).start();
    let redis = Redis::start();
    let dir = TempDir::new("bench");
    let stores: Vec<(&'static str, Value)> = vec![
        // Production defaults otherwise: one request in 100 sweeps, for at most 5 ms.
        (
            "file",
            json!({"kind": "file", "dir": dir.server_dir("data")}),
        ),
        ("mysql", json!({"kind": "mysql", "url": db.url()})),
        ("redis", json!({"kind": "redis", "url": redis.url()})),
    ];

    let mut rows: Vec<Row> = Vec::new();
    let mut rss: Vec<String> = Vec::new();
    let mut floor_rps = Vec::new();
    let stores: Vec<_> = stores
        .into_iter()
        .filter(|(name, _)| only_stores.is_empty() || only_stores.iter().any(|o| o == name))
        .collect();
    let modes: Vec<Mode> = [Mode::Cgid, Mode::Fcgid]
        .into_iter()
        .filter(|m| only_servers.is_empty() || only_servers.iter().any(|o| o == m.name()))
        .collect();
    for (store_name, store) in &stores {
        let limited = dir.write(
            &format!("{store_name}-limited.json"),
            site_config(&provider, store, 1).to_string(),
        );
        let open = dir.write(
            &format!("{store_name}-open.json"),
            site_config(&provider, store, 4_000_000_000).to_string(),
        );
        // The same limited site without the usage journal: what the journal costs a 429.
        let mut unjournaled = site_config(&provider, store, 1);
        unjournaled["journal"] = json!(false);
        let unjournaled = dir.write(
            &format!("{store_name}-unjournaled.json"),
            unjournaled.to_string(),
        );
        for &mode in &modes {
            let server = match mode {
                Mode::Cgid => "mod_cgid",
                Mode::Fcgid => "mod_fcgid",
            };
            let apache = Apache::builder(&format!("bench-{store_name}-{}", mode.name()))
                .mode(mode)
                // A FastCGI process per connection before the clock starts: mod_fcgid makes a
                // request that finds none idle wait a second.
                .fcgid_pool(connections as usize)
                .resolve_program("limited", &binary)
                .resolve_program("open", &binary)
                .resolve_program("unjournaled", &binary)
                .cgi("noop", &floor)
                .conf(&format!(
                    "<Location /cgi-bin/limited>\n    SetEnv RESOLVE_CONFIG {}\n</Location>\n\
                     <Location /cgi-bin/open>\n    SetEnv RESOLVE_CONFIG {}\n</Location>\n\
                     <Location /cgi-bin/unjournaled>\n    SetEnv RESOLVE_CONFIG {}\n</Location>\n\
                     KeepAlive On\nMaxKeepAliveRequests 0\nLogLevel error\n\
                     <IfModule mod_fcgid.c>\n    FcgidMaxProcesses {}\n    \
                     FcgidMaxProcessesPerClass {}\n</IfModule>\n",
                    limited.display(),
                    open.display(),
                    unjournaled.display(),
                    4 * connections,
                    connections + 4,
                ))
                .start();
            let base = apache.base_url();
            // The limited site admits one request an hour from 127.0.0.1: spend it.
            let client = apache.client();
            let target = format!("/cgi-bin/limited?{LINK}");
            client.send(&Request::get(&target)).expect("first request");
            let check = client.send(&Request::get(&target)).expect("second request");
            assert_eq!(check.status, 429, "{}", check.everything());
            let other = format!("/cgi-bin/unjournaled?{LINK}");
            client.send(&Request::get(&other)).expect("first request");
            let check = client.send(&Request::get(&other)).expect("second request");
            assert_eq!(check.status, 429, "{}", check.everything());
            let check = client
                .send(&Request::get(&format!("/cgi-bin/open?{LINK}")))
                .expect("open request");
            assert_eq!(check.status, 200, "{}", check.everything());

            let floor_url = format!("{base}/cgi-bin/noop");
            let mut measure = |path: &str, label: String, expect_2xx: bool, store: &'static str| {
                let url = format!("{base}{path}");
                // Warm up: files and tables created, caches filled.
                wrk(&url, 3.min(seconds), connections, expect_2xx);
                let mut samples = Vec::new();
                for _ in 0..ROUNDS {
                    let per_round = seconds.div_ceil(ROUNDS).max(1);
                    let (floor, ..) = wrk(&floor_url, per_round, connections, false);
                    floor_rps.push(floor);
                    let sample = wrk(&url, per_round, connections, expect_2xx);
                    samples.push((sample.0 / floor, sample));
                }
                let ratio = median(samples.iter().map(|s| s.0).collect());
                let rps = median(samples.iter().map(|s| s.1.0).collect());
                let p50_ms = median(samples.iter().map(|s| s.1.1).collect());
                let p99_ms = median(samples.iter().map(|s| s.1.2).collect());
                let mut problems: Vec<String> = samples
                    .iter()
                    .map(|s| s.1.3.clone())
                    .filter(|p| !p.is_empty())
                    .collect();
                problems.dedup();
                eprintln!("{store:>5} {server:<9} {label:<22} {rps:>9.1} req/s {ratio:>6.2}x");
                rows.push(Row {
                    store,
                    server,
                    path: label,
                    rps,
                    p50_ms,
                    p99_ms,
                    ratio,
                    problems: problems.join("; "),
                });
            };
            let (a, b) = match mode {
                Mode::Cgid => ("(b)", "(c)"),
                Mode::Fcgid => ("(d)", "(d)"),
            };
            measure(
                &format!("/cgi-bin/limited?{LINK}"),
                format!("{a} resolve, 429"),
                false,
                store_name,
            );
            measure(
                &format!("/cgi-bin/unjournaled?{LINK}"),
                format!("{a} resolve, 429, no journal"),
                false,
                store_name,
            );
            measure(
                &format!("/cgi-bin/open?{LINK}"),
                format!("{b} resolve, 200"),
                true,
                store_name,
            );
        }
        for (path, config) in [("429", &limited), ("200", &open)] {
            let (kb, status) = peak_rss_kb(&binary, config, "127.0.0.1");
            rss.push(format!("{store_name} {path}: {kb} kB ({status})"));
        }
    }

    let floor_spread = (
        floor_rps.iter().copied().fold(f64::INFINITY, f64::min),
        floor_rps.iter().copied().fold(0.0, f64::max),
    );
    let floor = median(floor_rps);
    let size = std::fs::metadata(&binary).map(|m| m.len()).unwrap_or(0);
    println!();
    println!(
        "Apache 2.4 event MPM, wrk -t2 -c{connections}, {ROUNDS} rounds of {} s per row each after \
         a round of the floor, keep-alive, loopback, {} cores; the floor: median {floor:.0} req/s \
         (runs from {:.0} to {:.0}); x floor: the median of the rounds' ratios",
        seconds.div_ceil(ROUNDS).max(1),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        floor_spread.0,
        floor_spread.1
    );
    println!(
        "| store | server | program and path | req/s | p50 ms | p99 ms | x floor | notes |\n|---|---|---|---:|---:|---:|---:|---|"
    );
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} |",
            r.store, r.server, r.path, r.rps, r.p50_ms, r.p99_ms, r.ratio, r.problems
        );
    }
    println!();
    println!(
        "static binary: {} bytes ({:.2} MB); peak RSS of one CGI request: {}",
        size,
        size as f64 / 1e6,
        rss.join("; ")
    );
    let ratio = |store: &str, server: &str, path: &str| {
        rows.iter()
            .find(|r| r.store == store && r.server == server && r.path.contains(path))
            .map_or(f64::NAN, |r| r.ratio)
    };
    println!("targets:");
    println!(
        "  CGI 429, file store >= 0.9x floor: {:.2}x",
        ratio("file", "mod_cgid", "429")
    );
    for store in ["file", "mysql", "redis"] {
        println!(
            "  FastCGI 429, {store} store >= 4x floor: {:.2}x",
            ratio(store, "mod_fcgid", "429")
        );
    }
    for store in ["file", "mysql", "redis"] {
        for server in ["mod_cgid", "mod_fcgid"] {
            let find = |label: &str| {
                rows.iter()
                    .find(|r| r.store == store && r.server == server && r.path.ends_with(label))
                    .map_or(f64::NAN, |r| r.ratio)
            };
            let (with, without) = (find("resolve, 429"), find("429, no journal"));
            println!(
                "  journal cost, 429 path, {store} {server} (<= 5%): {:+.1}% ({with:.2}x floor with, {without:.2}x without)",
                (without / with - 1.0) * 100.0
            );
        }
    }
    println!(
        "  static binary <= 5 MB: {:.2} MB; one CGI request <= 4 MB: see peak RSS above",
        size as f64 / 1e6
    );
}
