//! Requests per second and latency (median, 99th percentile) of the binary under a real Apache on loopback, driven by wrk: for the file, MariaDB and Redis stores the 429 path (with and without the usage journal) and the 200 path under mod_cgid and under mod_fcgid, and the 429 path of the PHP limiters an owner would keep instead (bench/php/, under PHP-FPM behind mod_proxy_fcgi, on the same MariaDB), each as a ratio to a no-op CGI program writing a fixed 429 (the floor of any process-per-request program) measured in alternation with it, so that a machine busy with other work slows both alike; the ratios of resolve to the PHP limiters; and the peak memory of one CGI request. Prints one table; asserts nothing about speed. Run it through bench/run.sh, which builds the static binary and the floor program and finds PHP-FPM.
//!
//! With RESOLVE_BENCH_JOURNAL_COST=1 it measures only the 429 path with and without the journal (no 200 path, no PHP, no memory figures), and fails unless the journal counted every 429 that wrk saw answered: the short run of tests/run-all.sh (`bench/run.sh --journal-cost`). RESOLVE_BENCH_ROUNDS sets the rounds per row (5), RESOLVE_BENCH_STORES and RESOLVE_BENCH_SERVERS pick subsets; MariaDB, Redis and PHP-FPM are started only when a row needs them.
//!
//! With RESOLVE_BENCH_BEFORE=PATH (`bench/run.sh --before PATH`), an earlier build of the program is measured in the same rounds as this one on every 429 row (its own configuration and counters, the same store server), and the two ratios to the floor are printed side by side: a change's cost on the path scrapers take, from one run.

#[path = "../tests/support/mod.rs"]
mod support;

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::mariadb::Via;
use support::process::ServerProcess;
use support::{Apache, MariaDb, Mode, Provider, Redis, Request, TempDir, server_user};

const LINK: &str = "link=https%3A%2F%2Fhost.example%2Ffile.zip";

/// Keep-alive for wrk's connections, in every Apache of the bench.
const KEEP_ALIVE: &str = "KeepAlive On\nMaxKeepAliveRequests 0\nLogLevel error\n";

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

/// Rounds per row unless RESOLVE_BENCH_ROUNDS says, each a run of the floor then one of the
/// row.
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

/// What one run of wrk measured: requests per second, p50 and p99 in ms, what went wrong, and
/// how many answers it counted.
type Run = (f64, f64, f64, String, u64);

/// Runs wrk against `url`; `expect_2xx` tells which answers are the expected ones.
fn wrk(url: &str, seconds: u64, connections: u32, expect_2xx: bool) -> Run {
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
    (rps, p50, p99, problems, total)
}

/// The rows measured so far, and every run of the floor.
struct Bench {
    seconds: u64,
    connections: u32,
    rounds: u64,
    rows: Vec<Row>,
    floor_rps: Vec<f64>,
}

impl Bench {
    /// Measures `path` on the Apache at `base` in rounds, each after a round of the floor
    /// (`/cgi-bin/noop` on the same Apache), and keeps the row. Returns how many answers of
    /// `path` wrk counted, the warm-up's included.
    fn measure(
        &mut self,
        base: &str,
        row: (&'static str, &'static str),
        path: &str,
        label: &str,
        expect_2xx: bool,
    ) -> u64 {
        self.measure_together(base, row, &[(path, label)], expect_2xx)[0]
    }

    /// Measures several paths of one store and server in the same rounds: each round measures
    /// every path, each after a round of the floor, starting with a different one each round,
    /// so that a machine that speeds up or slows down over the run favours none of them (rows
    /// compared with each other, such as the 429 with and without the journal). Keeps a row
    /// per path; returns how many answers of each wrk counted, the warm-up's included.
    fn measure_together(
        &mut self,
        base: &str,
        (store, server): (&'static str, &'static str),
        paths: &[(&str, &str)],
        expect_2xx: bool,
    ) -> Vec<u64> {
        let (seconds, connections, rounds) = (self.seconds, self.connections, self.rounds);
        let urls: Vec<String> = paths.iter().map(|(p, _)| format!("{base}{p}")).collect();
        let floor_url = format!("{base}/cgi-bin/noop");
        // Warm up: files and tables created, caches filled.
        let mut answers: Vec<u64> = urls
            .iter()
            .map(|url| wrk(url, 3.min(seconds), connections, expect_2xx).4)
            .collect();
        let mut samples: Vec<Vec<_>> = vec![Vec::new(); urls.len()];
        let per_round = seconds.div_ceil(rounds).max(1);
        for round in 0..rounds as usize {
            for k in 0..urls.len() {
                let i = (round + k) % urls.len();
                let (floor, ..) = wrk(&floor_url, per_round, connections, false);
                self.floor_rps.push(floor);
                let sample = wrk(&urls[i], per_round, connections, expect_2xx);
                answers[i] += sample.4;
                samples[i].push((sample.0 / floor, sample));
            }
        }
        for ((_, label), samples) in paths.iter().zip(samples) {
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
            eprintln!("{store:>5} {server:<9} {label:<28} {rps:>9.1} req/s {ratio:>6.2}x");
            self.rows.push(Row {
                store,
                server,
                path: label.to_string(),
                rps,
                p50_ms,
                p99_ms,
                ratio,
                problems: problems.join("; "),
            });
        }
        answers
    }

    /// The ratio to the floor of the first row of `store` and `server` whose path ends with
    /// `label`; NaN when there is none (a subset was measured).
    fn ratio(&self, store: &str, server: &str, label: &str) -> f64 {
        self.rows
            .iter()
            .find(|r| r.store == store && r.server == server && r.path.ends_with(label))
            .map_or(f64::NAN, |r| r.ratio)
    }
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

/// Peak resident memory, in kB, of one CGI request run directly under /usr/bin/time -v, as
/// the account Apache runs programs as (the files it makes in the data directory are then
/// that account's, as a request's are).
fn peak_rss_kb(binary: &Path, config: &Path, remote_addr: &str) -> (u64, String) {
    let mut command = Command::new("/usr/bin/time");
    if let Some(u) = server_user() {
        use std::os::unix::process::CommandExt;
        command.uid(u.uid).gid(u.gid);
    }
    let out = command
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

/// PHP-FPM serving the PHP limiters of bench/php/ on a Unix socket in its own temp dir, the way
/// an owner's PHP runs: Debian's php.ini (OPcache on), one static pool of 8 processes, the
/// limiters' settings given as `env[...]` in the pool. Stopped on drop.
struct PhpFpm {
    process: ServerProcess,
    dir: TempDir,
    socket: PathBuf,
}

/// The pool's processes (`pm = static`).
const PHP_FPM_CHILDREN: usize = 8;

impl PhpFpm {
    fn start(program: &Path, env: &[(&str, String)], data_dir: &Path, dir: TempDir) -> PhpFpm {
        let scripts = dir.mkdir("php");
        for name in ["common.php", "file_limiter.php", "mysql_limiter.php"] {
            let source = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("bench/php")
                .join(name);
            let text =
                std::fs::read(&source).unwrap_or_else(|e| panic!("read {}: {e}", source.display()));
            dir.write(&format!("php/{name}"), text);
        }
        assert!(scripts.is_dir());
        let socket = dir.join("php-fpm.sock");
        let d = dir.path().display();
        let mut conf = format!(
            "[global]\npid = {d}/php-fpm.pid\nerror_log = {d}/php-fpm.log\nlog_level = warning\n\
             daemonize = no\n\n[bench]\nlisten = {}\nlisten.mode = 0660\npm = static\n\
             pm.max_children = {PHP_FPM_CHILDREN}\nclear_env = yes\n\
             php_admin_value[error_log] = {d}/php-errors.log\nphp_admin_flag[log_errors] = on\n",
            socket.display()
        );
        // Root starts the pool for the account Apache runs as, which must reach the socket and
        // owns the data directory.
        if let Some(u) = server_user() {
            conf.push_str(&format!(
                "user = {0}\ngroup = {1}\nlisten.owner = {0}\nlisten.group = {1}\n",
                u.name, u.group
            ));
        }
        for (name, value) in env {
            conf.push_str(&format!("env[{name}] = \"{value}\"\n"));
        }
        conf.push_str(&format!(
            "env[ANCHOR_DATA_DIR] = \"{}\"\n",
            data_dir.display()
        ));
        let conf = dir.write("php-fpm.conf", conf);
        let mut process = ServerProcess::default();
        process.spawn(
            Command::new(program)
                .arg("--nodaemonize")
                .arg("--fpm-config")
                .arg(&conf),
            &dir.join("stdout.log"),
        );
        let mut fpm = PhpFpm {
            process,
            dir,
            socket,
        };
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while UnixStream::connect(&fpm.socket).is_err() {
            if !fpm.process.is_running() || std::time::Instant::now() > until {
                fpm.dir.keep();
                panic!(
                    "php-fpm did not start:\n{}{}",
                    std::fs::read_to_string(fpm.dir.join("stdout.log")).unwrap_or_default(),
                    std::fs::read_to_string(fpm.dir.join("php-fpm.log")).unwrap_or_default()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        fpm
    }

    /// Apache configuration serving the limiters as /php/NAME.php through mod_proxy_fcgi, as
    /// Debian's php-fpm configuration for Apache does (a new connection to the pool per request).
    fn apache_conf(&self) -> String {
        let scripts = self.dir.join("php");
        format!(
            "Alias /php/ \"{0}/\"\n<Directory \"{0}\">\n    Require all granted\n    \
             <FilesMatch \"\\.php$\">\n        \
             SetHandler \"proxy:unix:{1}|fcgi://localhost\"\n    </FilesMatch>\n</Directory>\n",
            scripts.display(),
            self.socket.display()
        )
    }

    /// PHP errors and the pool's log, for a failing check.
    fn logs(&self) -> String {
        ["php-fpm.log", "php-errors.log", "stdout.log"]
            .iter()
            .map(|f| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default())
            .collect()
    }
}

impl Drop for PhpFpm {
    fn drop(&mut self) {
        self.process.stop(std::time::Duration::from_secs(10));
    }
}

/// The 429s the journal of the site configured in `config` counted for its `ip` rule over
/// the last day, read by `resolve stats` run as the account the site runs as.
fn journaled_refusals(binary: &Path, config: &Path) -> u64 {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(binary);
    command.args(["stats", "--json", "--config"]).arg(config);
    if let Some(u) = server_user() {
        command.uid(u.uid).gid(u.gid);
    }
    let out = command.output().expect("run resolve stats");
    assert!(
        out.status.success(),
        "resolve stats: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: Value = serde_json::from_slice(&out.stdout).expect("stats --json is JSON");
    stats["refused"]["ip"].as_u64().unwrap_or(0)
}

fn main() {
    // `cargo bench` passes --bench; nothing else is taken from the command line.
    let binary = required_file("RESOLVE_BENCH_BINARY");
    let floor = required_file("RESOLVE_BENCH_FLOOR");
    let seconds: u64 = env_or("RESOLVE_BENCH_SECONDS", 10);
    let connections: u32 = env_or("RESOLVE_BENCH_CONNECTIONS", 32);
    let rounds: u64 = env_or("RESOLVE_BENCH_ROUNDS", ROUNDS).max(1);
    // Only the journal's cost on the 429 path, checked to be a measurement of the journal.
    let journal_cost = std::env::var("RESOLVE_BENCH_JOURNAL_COST").is_ok_and(|v| v == "1");
    // An earlier build, measured beside this one on the 429 rows.
    let before =
        std::env::var_os("RESOLVE_BENCH_BEFORE").map(|_| required_file("RESOLVE_BENCH_BEFORE"));
    // Subsets, for quicker looks: RESOLVE_BENCH_STORES=file,redis RESOLVE_BENCH_SERVERS=cgid,fpm
    let only = |name: &str| -> Vec<String> {
        std::env::var(name)
            .map(|v| v.split(',').map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let (only_stores, only_servers) = (only("RESOLVE_BENCH_STORES"), only("RESOLVE_BENCH_SERVERS"));
    let wanted = |list: &[String], name: &str| list.is_empty() || list.iter().any(|o| o == name);
    let with_php = !journal_cost && wanted(&only_servers, "fpm");
    let php_fpm = with_php.then(|| required_file("RESOLVE_BENCH_PHP_FPM"));

    // Keeps connections open, as real provider APIs do; keeps no requests.
    let provider = Provider::builder().keep_alive().without_recording().start();
    // The servers only for the rows that need them.
    let db = wanted(&only_stores, "mysql")
        .then(|| MariaDb::builder("bench").max_connections(400).start());
    let redis = wanted(&only_stores, "redis").then(Redis::start);
    let dir = TempDir::new("bench");
    // The data directory beside the configurations, as deploy.sh makes it: the file store's
    // counters, and with a MySQL or Redis store the usage journal's spool (and the log's time
    // stamps); with every store, the refusals and the answers kept for them.
    let data_dir = dir.server_dir("ratelimit");
    let mut stores: Vec<(&'static str, Value)> = Vec::new();
    if wanted(&only_stores, "file") {
        // Production defaults otherwise: one request in 100 sweeps, for at most 5 ms.
        stores.push(("file", json!({"kind": "file", "dir": data_dir})));
    }
    if let Some(db) = &db {
        stores.push(("mysql", json!({"kind": "mysql", "url": db.url()})));
    }
    if let Some(redis) = &redis {
        stores.push(("redis", json!({"kind": "redis", "url": redis.url()})));
    }

    let mut bench = Bench {
        seconds,
        connections,
        rounds,
        rows: Vec::new(),
        floor_rps: Vec::new(),
    };
    let mut rss: Vec<(&'static str, &'static str, u64, String)> = Vec::new();
    let modes: Vec<Mode> = [Mode::Cgid, Mode::Fcgid]
        .into_iter()
        .filter(|m| wanted(&only_servers, m.name()))
        .collect();
    for (store_name, store) in &stores {
        // The 429s of the journaled site that wrk counted, over every server so far.
        let mut answered_429s = 0;
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
        // The earlier build's own limited site: its counters apart from this build's (a file
        // store of its own; a key prefix elsewhere is not needed, its client is the same and
        // over the limit either way).
        let mut earlier = site_config(&provider, store, 1);
        if *store_name == "file" {
            earlier["store"]["dir"] = json!(dir.server_dir("data-before"));
        }
        let earlier = dir.write(&format!("{store_name}-before.json"), earlier.to_string());
        for &mode in &modes {
            let server = match mode {
                Mode::Cgid => "mod_cgid",
                Mode::Fcgid => "mod_fcgid",
            };
            let mut builder = Apache::builder(&format!("bench-{store_name}-{}", mode.name()));
            if let Some(before) = &before {
                builder = builder.resolve_program("before", before).conf(&format!(
                    "<Location /cgi-bin/before>\n    SetEnv RESOLVE_CONFIG {}\n</Location>\n",
                    earlier.display()
                ));
            }
            let apache = builder
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
                     {KEEP_ALIVE}\
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
            let earlier_path = format!("/cgi-bin/before?{LINK}");
            if before.is_some() {
                client
                    .send(&Request::get(&earlier_path))
                    .expect("first request");
                let check = client
                    .send(&Request::get(&earlier_path))
                    .expect("second request");
                assert_eq!(check.status, 429, "earlier build: {}", check.everything());
            }

            let (a, b) = match mode {
                Mode::Cgid => ("(b)", "(c)"),
                Mode::Fcgid => ("(d)", "(d)"),
            };
            let row = (*store_name, server);
            // With and without the journal in the same rounds: their difference is the
            // journal's cost.
            let (with, without) = (
                format!("/cgi-bin/limited?{LINK}"),
                format!("/cgi-bin/unjournaled?{LINK}"),
            );
            let (label, unlabelled, earlier_label) = (
                format!("{a} resolve, 429"),
                format!("{a} resolve, 429, no journal"),
                format!("{a} earlier build, 429"),
            );
            let mut paths = vec![
                (with.as_str(), label.as_str()),
                (without.as_str(), unlabelled.as_str()),
            ];
            if before.is_some() {
                paths.push((earlier_path.as_str(), earlier_label.as_str()));
            }
            answered_429s += bench.measure_together(&base, row, &paths, false)[0];
            // Still the answer measured: a 429 each.
            for path in ["limited", "unjournaled"] {
                let check = client
                    .send(&Request::get(&format!("/cgi-bin/{path}?{LINK}")))
                    .expect("a request after the rows");
                assert_eq!(check.status, 429, "{path}: {}", check.everything());
            }
            if !journal_cost {
                bench.measure(
                    &base,
                    row,
                    &format!("/cgi-bin/open?{LINK}"),
                    &format!("{b} resolve, 200"),
                    true,
                );
            }
            // The journal counted every 429 of the journaled site that wrk saw answered (and
            // the one of the check before): else the row did not measure what it says.
            let counted = journaled_refusals(&binary, &limited);
            let seen = answered_429s + 1;
            if counted < seen {
                let message = format!(
                    "{store_name} {server}: the journal counted {counted} 429s of the journaled \
                     site, wrk saw {seen} answered"
                );
                assert!(!journal_cost, "{message}");
                eprintln!("note: {message}");
            }
        }
        if journal_cost {
            continue;
        }
        // The limited site's one request is spent already unless no server was measured: a
        // first run spends it, so that the "429" figure is one.
        peak_rss_kb(&binary, &limited, "127.0.0.1");
        for (path, config) in [("429", &limited), ("200", &open)] {
            let (kb, status) = peak_rss_kb(&binary, config, "127.0.0.1");
            rss.push((store_name, path, kb, status));
        }
    }

    // What an owner would keep instead: the PHP limiters under PHP-FPM, on the same MariaDB.
    let php_stores: Vec<&'static str> = ["file", "mysql"]
        .into_iter()
        .filter(|s| wanted(&only_stores, s))
        .collect();
    let mut php_version = String::new();
    if let Some(php_fpm) = php_fpm.filter(|_| !php_stores.is_empty()) {
        let mut env = vec![
            // The limit is 1 a minute per address, so that the bench's client is over it.
            ("ANCHOR_LIMIT", "1".to_string()),
            ("ANCHOR_PROVIDER_URL", provider.url("/unrestrict")),
        ];
        if let Some(db) = &db {
            db.user_sql(
                Via::Tcp,
                "CREATE TABLE IF NOT EXISTS rate_events (\
                 id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, \
                 rkey VARCHAR(120) NOT NULL, ts DATETIME NOT NULL, \
                 KEY ix_rate (rkey, ts)) ENGINE=InnoDB",
            )
            .expect("create rate_events");
            // The resolve rows' MariaDB, over TCP to 127.0.0.1 as theirs.
            env.extend([
                (
                    "ANCHOR_MYSQL_DSN",
                    format!(
                        "mysql:host=127.0.0.1;port={};dbname={}",
                        db.port(),
                        db.database()
                    ),
                ),
                ("ANCHOR_MYSQL_USER", db.user().to_string()),
                ("ANCHOR_MYSQL_PASSWORD", db.password().to_string()),
            ]);
        }
        let fpm_dir = TempDir::new("php-fpm");
        let data = fpm_dir.server_dir("data");
        let fpm = PhpFpm::start(&php_fpm, &env, &data, fpm_dir);
        php_version = Command::new(&php_fpm)
            .arg("-v")
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_string()
            })
            .unwrap_or_default();
        let apache = Apache::builder("bench-php-fpm")
            .mode(Mode::Cgid)
            .module("proxy")
            .module("proxy_fcgi")
            .cgi("noop", &floor)
            .conf(&fpm.apache_conf())
            .conf(KEEP_ALIVE)
            .start();
        let base = apache.base_url();
        let client = apache.client();
        for store in &php_stores {
            // Spend the one request a minute, then check the 429.
            let target = format!("/php/{store}_limiter.php?{LINK}");
            let first = client.send(&Request::get(&target)).expect("first request");
            assert_eq!(first.status, 200, "{}\n{}", first.everything(), fpm.logs());
            let check = client.send(&Request::get(&target)).expect("second request");
            assert!(
                check.status == 429 && check.header("Retry-After").is_some(),
                "{}\n{}",
                check.everything(),
                fpm.logs()
            );
            let label = match *store {
                "file" => "(e) PHP file limiter, 429",
                _ => "(e) PHP MySQL limiter, 429",
            };
            bench.measure(&base, (store, "php-fpm"), &target, label, false);
        }
    }

    let floor_rps = std::mem::take(&mut bench.floor_rps);
    let floor_spread = (
        floor_rps.iter().copied().fold(f64::INFINITY, f64::min),
        floor_rps.iter().copied().fold(0.0, f64::max),
    );
    let floor = median(floor_rps);
    let size = std::fs::metadata(&binary).map(|m| m.len()).unwrap_or(0);
    println!();
    println!(
        "Apache 2.4 event MPM, wrk -t2 -c{connections}, {rounds} rounds of {} s per row each after \
         a round of the floor, keep-alive, loopback, {} cores; the floor: median {floor:.0} req/s \
         (runs from {:.0} to {:.0}); x floor: the median of the rounds' ratios",
        seconds.div_ceil(rounds).max(1),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        floor_spread.0,
        floor_spread.1
    );
    if !php_version.is_empty() {
        println!(
            "php-fpm: {php_version}; pm static, {PHP_FPM_CHILDREN} children, behind \
             mod_proxy_fcgi on a Unix socket; the limiters of bench/php/, 1 request a minute \
             per address (one admitted a minute shows as an unexpected answer)"
        );
    }
    println!(
        "| store | server | program and path | req/s | p50 ms | p99 ms | x floor | notes |\n|---|---|---|---:|---:|---:|---:|---|"
    );
    for r in &bench.rows {
        println!(
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} |",
            r.store, r.server, r.path, r.rps, r.p50_ms, r.p99_ms, r.ratio, r.problems
        );
    }
    println!();
    if journal_cost {
        journal_costs(&bench, true);
        return;
    }
    println!(
        "static binary: {} bytes ({:.2} MB); peak RSS of one CGI request: {}",
        size,
        size as f64 / 1e6,
        rss.iter()
            .map(|(store, path, kb, status)| format!("{store} {path}: {kb} kB ({status})"))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let ratio = |store: &str, server: &str| bench.ratio(store, server, "resolve, 429");
    println!("targets (ratios of the rows' x floor, each measured in alternation with the floor):");
    // A subset of stores or servers (RESOLVE_BENCH_STORES, _SERVERS) has no figure for the
    // others: their lines are left out.
    let say = |figure: f64, line: String| {
        if !figure.is_nan() {
            println!("  {line}");
        }
    };
    for (store, php, target) in [("file", "file", 2.5), ("mysql", "MySQL", 2.0)] {
        let (ours, theirs) = (
            ratio(store, "mod_fcgid"),
            bench.ratio(store, "php-fpm", "429"),
        );
        say(
            ours / theirs,
            format!(
                "FastCGI 429, {store} store / PHP-FPM {php} limiter >= {target}: {:.2} ({ours:.2}x \
                 / {theirs:.2}x floor)",
                ours / theirs
            ),
        );
    }
    // A refused CGI request against a no-op CGI program, every store alike.
    for store in ["file", "mysql", "redis"] {
        let x = ratio(store, "mod_cgid");
        say(x, format!("CGI 429, {store} store >= 0.85x floor: {x:.2}x"));
    }
    say(
        ratio("redis", "mod_fcgid"),
        format!(
            "Redis 429 (reported), mod_fcgid: {:.2}x floor",
            ratio("redis", "mod_fcgid")
        ),
    );
    println!(
        "  static binary < 5 MB: {:.2} MB; one CGI request < 4 MB: {}",
        size as f64 / 1e6,
        rss.iter()
            .map(|(store, path, kb, _)| format!("{store} {path} {:.2} MB", *kb as f64 / 1024.0))
            .collect::<Vec<_>>()
            .join(", ")
    );
    journal_costs(&bench, false);
    if before.is_some() {
        before_and_after(&bench);
    }
}

/// This build's 429 beside the earlier build's, from the same rounds.
fn before_and_after(bench: &Bench) {
    println!("this build against the earlier one (RESOLVE_BENCH_BEFORE), 429 path, same rounds:");
    for store in ["file", "mysql", "redis"] {
        for server in ["mod_cgid", "mod_fcgid"] {
            let (now, then) = (
                bench.ratio(store, server, "resolve, 429"),
                bench.ratio(store, server, "earlier build, 429"),
            );
            if now.is_nan() || then.is_nan() {
                continue;
            }
            println!(
                "  {store} {server}: {now:.2}x floor now, {then:.2}x before ({:+.1}%)",
                (now / then - 1.0) * 100.0
            );
        }
    }
}

/// What the journal costs the 429 path: x floor without it against with it, from the same
/// run. `measured_only`: the pairs of store and server measured, each with a figure.
fn journal_costs(bench: &Bench, measured_only: bool) {
    for store in ["file", "mysql", "redis"] {
        for server in ["mod_cgid", "mod_fcgid"] {
            let (with, without) = (
                bench.ratio(store, server, "resolve, 429"),
                bench.ratio(store, server, "429, no journal"),
            );
            let measured = bench
                .rows
                .iter()
                .any(|r| r.store == store && r.server == server);
            // A subset of stores or servers (RESOLVE_BENCH_STORES, _SERVERS) has no figure for
            // the others.
            if !measured {
                continue;
            }
            let cost = (without / with - 1.0) * 100.0;
            println!(
                "  journal cost, 429 path, {store} {server} (<= 10%): {cost:+.1}% ({with:.2}x floor \
                 with, {without:.2}x without)"
            );
            assert!(
                !measured_only || cost.is_finite(),
                "{store} {server}: no figure, the rows did not measure"
            );
        }
    }
}
