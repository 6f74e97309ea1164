//! Crash campaign: resolve processes killed with SIGKILL at random instants under load, on each store (files, MariaDB, Redis) as CGI processes and as FastCGI processes under mod_fcgid; afterwards no key was admitted past its limit in any window, every counter is readable, and the store admits and refuses as before.

// Size: each CGI campaign runs until `RESOLVE_CAMPAIGN_KILLS` processes died of the SIGKILL
// (default 180), each FastCGI campaign until a fifth of that many FastCGI processes were
// killed. The long run:
//
//     RESOLVE_CAMPAIGN_KILLS=1000 cargo test --features servers --test crash_campaign -- --nocapture --test-threads=1
//
// `RESOLVE_CAMPAIGN_SEED` replays a run's pseudo-random choices (each campaign prints its seed).
//
// How windows are told apart from outside: the load comes in rounds. A round sends
// `REQUESTS_PER_KEY` requests for each of `KEYS_PER_ROUND` client addresses through `WORKERS`
// threads. A round starts only once the previous round of its addresses is more than a window
// old, so the first decision of the round opens a new window; every decision of the round falls
// between the round's start and its end (a paid call is made by a process that is still alive),
// so a round shorter than the window lies within one window, and a longer one spans at most
// `1 + span / window` windows (the bound is scaled so). Each link names its round and address,
// and the provider stand-in records every paid call: paid calls per address and round are paid
// calls per key and window. The counters read back right after each round must hold at least
// the round's paid calls (counted before admitted) and at most the limit.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use resolve::core::clock::SystemClock;
use resolve::store::file::FileStore;
use serde_json::{Value, json};
use support::config::rule;
use support::redis::Resp;
use support::rng::Rng;
use support::system::{now_ms, processes_of, sleep_until_ms};
use support::urlenc::link_param;
use support::{
    Apache, MariaDb, Mode, Provider, Redis, Request, Response, Setup, Site, TempDir, binary,
};

/// Rule `ip`: this many admissions per window of `WINDOW_SECS`.
const LIMIT: u64 = 5;
const WINDOW_SECS: u64 = 3;
/// Rule `ip-hour`: this many per hour and address. Each address takes part in
/// `ROUNDS_PER_ADDRESS` rounds, so this rule refuses in its later rounds.
const HOUR_LIMIT: u64 = 12;
const HOUR_SECS: u64 = 3600;
const KEYS_PER_ROUND: usize = 3;
const REQUESTS_PER_KEY: usize = 10;
const WORKERS: usize = 8;
/// Address groups used in turn, so that a group rests while the others run.
const GROUPS: usize = 6;
const ROUNDS_PER_ADDRESS: usize = 4;
/// Share of processes that get a SIGKILL (some land after the process ended).
const KILL_PERCENT: u64 = 60;
/// Pauses before a kill are drawn from 0 to this share of a whole admitted request's time.
const KILL_SPREAD_PERCENT: u64 = 130;
/// Processes killed per store when RESOLVE_CAMPAIGN_KILLS is not set.
const DEFAULT_KILLS: usize = 180;
/// Under mod_fcgid, FastCGI processes killed per round. Each kill makes mod_fcgid start a new
/// process, which a waiting request sees as a pause of a second or more, so the FastCGI
/// campaigns kill `target_kills() / FCGID_KILL_DIVISOR` processes.
const FCGID_KILLS_PER_ROUND: usize = 2;
const FCGID_KILL_DIVISOR: usize = 5;
/// After a round's processes are gone, time for a store to finish commands a killed process
/// had already sent.
const SETTLE: Duration = Duration::from_millis(150);
/// The store's answer to a failed store (`on_error: deny`).
const DENY_RETRY_AFTER: u64 = 7;

// ---------------------------------------------------------------------------------------------
// Size, time, randomness

fn target_kills() -> usize {
    match std::env::var("RESOLVE_CAMPAIGN_KILLS") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("RESOLVE_CAMPAIGN_KILLS={v:?}: give a number")),
        Err(_) => DEFAULT_KILLS,
    }
}

fn seed() -> u64 {
    match std::env::var("RESOLVE_CAMPAIGN_SEED") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("RESOLVE_CAMPAIGN_SEED={v:?}: give a number")),
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    }
}

// ---------------------------------------------------------------------------------------------
// Keys, links, configuration

fn ip_key(addr: &str) -> String {
    format!("resolve:ip:{addr}")
}

fn hour_key(addr: &str) -> String {
    format!("resolve:ip-hour:{addr}")
}

fn link(round: usize, key: usize, n: usize) -> String {
    format!("https://files.example/crash/{round}/{key}/{n}")
}

/// (round, key) of a campaign link.
fn parse_link(link: &str) -> Option<(usize, usize)> {
    let rest = link.strip_prefix("https://files.example/crash/")?;
    let mut parts = rest.split('/');
    let round = parts.next()?.parse().ok()?;
    let key = parts.next()?.parse().ok()?;
    Some((round, key))
}

fn rules() -> Vec<Value> {
    vec![
        rule("ip", "ip", LIMIT, WINDOW_SECS),
        rule("ip-hour", "ip", HOUR_LIMIT, HOUR_SECS),
    ]
}

/// The limit of the rule whose windows last `window_ms`.
fn limit_for_window(window_ms: u64) -> Option<u64> {
    match window_ms {
        w if w == WINDOW_SECS * 1000 => Some(LIMIT),
        w if w == HOUR_SECS * 1000 => Some(HOUR_LIMIT),
        _ => None,
    }
}

/// Fields every store section shares: a failing store refuses (503) rather than admitting
/// uncounted, which would be over-admission this campaign would (rightly) report; sweeps run
/// often with a short grace, so that killed processes also interrupt sweeps.
fn with_policy(mut store: Value) -> Value {
    store["on_error"] = json!("deny");
    store["deny_retry_after_secs"] = json!(DENY_RETRY_AFTER);
    store["sweep_one_in"] = json!(5);
    store["sweep_grace_secs"] = json!(1);
    store
}

// ---------------------------------------------------------------------------------------------
// The stores, seen from the test

/// A fixed window's counter as a store holds it.
#[derive(Clone, Copy, Debug)]
struct Stored {
    start_ms: u64,
    count: u64,
}

enum Store {
    File { data: PathBuf, _dir: TempDir },
    Mysql(MariaDb),
    Redis(Redis),
}

impl Store {
    fn file() -> Store {
        let dir = TempDir::new("crash-files");
        let data = dir.server_dir("data");
        Store::File { data, _dir: dir }
    }

    /// MariaDB and Redis are started by the harness, which fails (never skips) when the server
    /// is not installed: on CI a missing server is a failed test.
    fn mysql() -> Store {
        Store::Mysql(MariaDb::builder("crash").start())
    }

    fn redis() -> Store {
        Store::Redis(Redis::builder("crash").start())
    }

    fn name(&self) -> &'static str {
        match self {
            Store::File { .. } => "file",
            Store::Mysql(_) => "mysql",
            Store::Redis(_) => "redis",
        }
    }

    fn section(&self) -> Value {
        with_policy(match self {
            Store::File { data, .. } => json!({"kind": "file", "dir": data}),
            Store::Mysql(db) => json!({
                "kind": "mysql", "host": "127.0.0.1", "port": db.port(), "user": db.user(),
                "password": db.password(), "database": db.database(),
                "connect_timeout_ms": 2000, "read_timeout_ms": 5000,
            }),
            Store::Redis(r) => json!({
                "kind": "redis", "host": "127.0.0.1", "port": r.port(),
                "connect_timeout_ms": 2000, "read_timeout_ms": 5000,
            }),
        })
    }

    /// The counters the store holds for `keys` (absent keys are left out).
    fn counters(&self, keys: &[String]) -> BTreeMap<String, Stored> {
        let mut out = BTreeMap::new();
        match self {
            Store::File { data, .. } => {
                let store = FileStore::new(data, SystemClock, Duration::from_secs(600));
                for key in keys {
                    let counter = store
                        .read(key)
                        .unwrap_or_else(|e| panic!("file store: {key} is unreadable: {e:?}"));
                    if let Some(c) = counter {
                        out.insert(
                            key.clone(),
                            Stored {
                                start_ms: c.start_ms,
                                count: u64::from(c.count),
                            },
                        );
                    }
                }
            }
            Store::Mysql(db) => {
                let list: Vec<String> = keys.iter().map(|k| format!("'{k}'")).collect();
                let rows = db.root_sql(&format!(
                    "SELECT rkey, start_ms, count FROM {}.rate_counters WHERE rkey IN ({})",
                    db.database(),
                    list.join(", ")
                ));
                for line in rows.lines().filter(|l| !l.trim().is_empty()) {
                    let f: Vec<&str> = line.split('\t').collect();
                    let parse = |i: usize| -> u64 {
                        f.get(i)
                            .and_then(|v| v.parse().ok())
                            .unwrap_or_else(|| panic!("mysql: unreadable row {line:?}"))
                    };
                    out.insert(
                        f[0].to_string(),
                        Stored {
                            start_ms: parse(1),
                            count: parse(2),
                        },
                    );
                }
            }
            Store::Redis(r) => {
                for key in keys {
                    if let Some(stored) = redis_counter(r, key) {
                        out.insert(key.clone(), stored);
                    }
                }
            }
        }
        out
    }

    /// Reads everything the store holds and checks that each counter is whole and within its
    /// rule's limit. Returns a one-line description of what was examined.
    fn audit(&self) -> String {
        match self {
            Store::File { data, .. } => audit_files(data),
            Store::Mysql(db) => audit_mysql(db),
            Store::Redis(r) => audit_redis(r),
        }
    }
}

fn audit_files(data: &Path) -> String {
    let (mut files, mut empty, mut shards) = (0, 0, 0);
    for shard in fs::read_dir(data)
        .expect("list the data directory")
        .flatten()
    {
        let shard_name = shard.file_name().to_string_lossy().into_owned();
        if shard_name == "journal" || shard_name == resolve::support::defaults::JOURNAL_SPOOL_DIR {
            // The usage journal and its spool: read back below, not counter shards.
            continue;
        }
        if [
            resolve::support::defaults::FILE_STORE_COUNT_FILE,
            resolve::support::defaults::FILE_STORE_FOLDING_MARK,
            resolve::support::defaults::REFUSALS_FILE,
        ]
        .contains(&shard_name.as_str())
        {
            // The store's count of its shards' entries, the mark of folding and the refusals
            // remembered (a slot cut short by a kill is a miss when read): no counters.
            continue;
        }
        // The folded keys' directory holds counters named like a shard's, by another prefix.
        let folded = shard_name == resolve::support::defaults::FILE_STORE_FOLD_DIR;
        assert!(
            folded || shard_name.len() == 2 && shard_name.bytes().all(|b| b.is_ascii_hexdigit()),
            "file store: unexpected entry {} in the data directory",
            shard.path().display()
        );
        shards += 1;
        for entry in fs::read_dir(shard.path()).expect("list a shard").flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            assert!(
                name.len() == 64
                    && (folded || name.starts_with(&shard_name))
                    && name.bytes().all(|b| b.is_ascii_hexdigit()),
                "file store: {} is no counter file (a damaged file moved aside, or a stray file)",
                path.display()
            );
            let bytes = fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            let loaded = resolve::store::file::record::decode(&bytes).unwrap_or_else(|e| {
                panic!(
                    "file store: {} is unreadable ({e:?}): {:?}",
                    path.display(),
                    String::from_utf8_lossy(&bytes)
                )
            });
            files += 1;
            match loaded.counter {
                None => empty += 1,
                Some(c) => {
                    let limit = limit_for_window(c.window_ms).unwrap_or_else(|| {
                        panic!("file store: {} has window {}", path.display(), c.window_ms)
                    });
                    assert!(
                        u64::from(c.count) <= limit,
                        "file store: {} counts {} in a window of limit {limit}",
                        path.display(),
                        c.count
                    );
                }
            }
        }
    }
    // The usage journal, written by the same killed processes, reads back whole, through its
    // spool as every reader does: a spool line cut short by a kill would fail the read.
    let journal = resolve::store::spool::SpooledJournal::new(
        std::rc::Rc::new(FileStore::new(data, SystemClock, Duration::from_secs(600))),
        data,
        Duration::from_secs(5),
    );
    let now = resolve::core::journal::hour_of(now_ms());
    let rows = resolve::store::journal::Journal::journal_rows(&journal, now - 2, now + 2)
        .unwrap_or_else(|e| panic!("file store: the usage journal is unreadable: {e}"));
    format!(
        "{files} counter files in {shards} shards, all readable ({empty} empty: created by a \
         process killed before its first write), none moved aside; the journal's {} rows readable",
        rows.len()
    )
}

fn audit_mysql(db: &MariaDb) -> String {
    let check = db.root_sql(&format!(
        "CHECK TABLE {}.rate_counters EXTENDED",
        db.database()
    ));
    let last = check.lines().last().unwrap_or_default();
    assert!(
        last.ends_with("\tOK"),
        "mysql: CHECK TABLE reports a problem:\n{check}"
    );
    let rows = db.root_sql(&format!(
        "SELECT rkey, start_ms, window_ms, count, expires_ms FROM {}.rate_counters",
        db.database()
    ));
    let mut n = 0;
    for line in rows.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 5, "mysql: row {line:?}");
        assert!(f[0].starts_with("resolve:ip"), "mysql: row {line:?}");
        let num = |i: usize| -> u64 {
            f[i].parse()
                .unwrap_or_else(|_| panic!("mysql: unreadable row {line:?}"))
        };
        let (start, window, count, expires) = (num(1), num(2), num(3), num(4));
        let limit = limit_for_window(window)
            .unwrap_or_else(|| panic!("mysql: row {line:?} has an unknown window"));
        assert!(
            count <= limit,
            "mysql: row {line:?} is over its limit {limit}"
        );
        assert!(
            expires >= start,
            "mysql: row {line:?} expires before it starts"
        );
        n += 1;
    }
    format!("CHECK TABLE rate_counters: OK; {n} rows, all readable and within their limits")
}

/// A fixed window's counter in Redis: a hash with the window's start `s` and count `c`.
fn redis_counter(r: &Redis, key: &str) -> Option<Stored> {
    let fields = match r.cmd(&["HMGET", key, "s", "c"]) {
        Resp::Array(Some(v)) if v.len() == 2 => v,
        other => panic!("redis: HMGET {key}: {other}"),
    };
    match (fields[0].as_text(), fields[1].as_text()) {
        (None, None) => None,
        (Some(s), Some(c)) => {
            let parse = |v: &str| -> u64 {
                v.parse()
                    .unwrap_or_else(|_| panic!("redis: {key} holds s={s:?} c={c:?}"))
            };
            Some(Stored {
                start_ms: parse(&s),
                count: parse(&c),
            })
        }
        (s, c) => panic!("redis: {key} holds half a counter: s={s:?} c={c:?}"),
    }
}

fn audit_redis(r: &Redis) -> String {
    let keys = match r.cmd(&["KEYS", "*"]) {
        Resp::Array(Some(v)) => v,
        other => panic!("redis: KEYS *: {other}"),
    };
    let (mut n, mut gone) = (0, 0);
    for key in keys {
        let key = key.as_text().expect("a key name");
        if key.starts_with("resolve:journal:") {
            // The usage journal's hashes expire by themselves (the notes list is kept, trimmed).
            let ttl: i64 = r
                .cmd(&["PTTL", &key])
                .as_text()
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("redis: PTTL {key}"));
            assert!(
                ttl != -1 || key == "resolve:journal:notes",
                "redis: {key} has no expiry"
            );
            continue;
        }
        let (limit, window) = if key.starts_with("resolve:ip-hour:") {
            (HOUR_LIMIT, HOUR_SECS * 1000)
        } else if key.starts_with("resolve:ip:") {
            (LIMIT, WINDOW_SECS * 1000)
        } else {
            panic!("redis: unexpected key {key}")
        };
        let ty = r.cmd(&["TYPE", &key]).as_text().unwrap_or_default();
        let ttl: i64 = r
            .cmd(&["PTTL", &key])
            .as_text()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("redis: PTTL {key}"));
        if ty == "none" {
            gone += 1; // expired since KEYS
            continue;
        }
        assert_eq!(ty, "hash", "redis: {key} is a {ty}");
        // -2 means it expired just now; -1 (no expiry) is never right.
        assert!(
            ttl == -2 || (ttl > 0 && ttl as u64 <= window),
            "redis: {key} has PTTL {ttl} (window {window} ms)"
        );
        if let Some(s) = redis_counter(r, &key) {
            assert!(
                s.count <= limit,
                "redis: {key} counts {} over its limit {limit}",
                s.count
            );
        }
        n += 1;
    }
    format!(
        "{n} keys, all hashes holding a whole counter within its limit and an expiry \
         ({gone} expired while being read)"
    )
}

// ---------------------------------------------------------------------------------------------
// Running requests

/// What became of one request.
struct Run {
    round: usize,
    key: usize,
    link: String,
    /// A SIGKILL was sent to the process (CGI), or the request ran while processes were being
    /// killed (FastCGI: see `Fcgid`).
    kill_sent: bool,
    /// How the CGI process ended (None under FastCGI).
    exit: Option<ExitStatus>,
    /// The answer: (status, from the program rather than from the web server, text body,
    /// Retry-After), or why there is none.
    answer: Result<Answer, String>,
    stderr: String,
    elapsed: Duration,
}

#[derive(Clone, Debug)]
struct Answer {
    status: u16,
    /// Answers the program wrote carry `Cache-Control: no-store`; the web server's own error
    /// pages do not.
    from_program: bool,
    body: String,
    retry_after: Option<String>,
}

impl Run {
    fn killed_by_signal(&self) -> bool {
        self.exit.and_then(|e| e.signal()) == Some(9)
    }

    fn status(&self) -> Option<u16> {
        self.answer.as_ref().ok().map(|a| a.status)
    }
}

/// Runs one GET as a CGI process, as Apache would start it; with `kill_after`, sends it a
/// SIGKILL after that pause (whether or not it is still running).
fn cgi_request(cfg: &Path, addr: &str, link: &str, kill_after: Option<Duration>) -> Run {
    let started = Instant::now();
    let mut child = Command::new(binary())
        .env_clear()
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("REQUEST_METHOD", "GET")
        .env("QUERY_STRING", link_param(link))
        .env("REMOTE_ADDR", addr)
        .env("HTTP_ACCEPT", "text/plain")
        .env("RESOLVE_CONFIG", cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start resolve");
    let mut kill_sent = false;
    if let Some(pause) = kill_after {
        std::thread::sleep(pause);
        // Not yet waited for, so the signal reaches the process or its zombie.
        kill_sent = child.kill().is_ok();
    }
    let out = child.wait_with_output().expect("wait for resolve");
    let answer = Response::parse_cgi(&out.stdout).map(|a| Answer {
        status: a.status,
        from_program: a.header("Cache-Control") == Some("no-store"),
        body: a.text(),
        retry_after: a.header("Retry-After").map(str::to_string),
    });
    Run {
        round: usize::MAX,
        key: usize::MAX,
        link: link.to_string(),
        kill_sent,
        exit: Some(out.status),
        answer,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}

fn http_request(apache: &Apache, addr: &str, link: &str) -> Run {
    let started = Instant::now();
    let answer = apache
        .client()
        .bind_source(addr)
        .timeout(Duration::from_secs(90))
        .send(
            &Request::get(&format!("/cgi-bin/resolve?{}", link_param(link)))
                .header("Accept", "text/plain"),
        )
        .map(|r| Answer {
            status: r.status,
            from_program: r.header("Cache-Control") == Some("no-store"),
            body: r.text(),
            retry_after: r.header("Retry-After").map(str::to_string),
        })
        .map_err(|e| format!("no HTTP answer: {e}"));
    Run {
        round: usize::MAX,
        key: usize::MAX,
        link: link.to_string(),
        kill_sent: false,
        exit: None,
        answer,
        stderr: String::new(),
        elapsed: started.elapsed(),
    }
}

/// How requests reach the program, and how it is killed.
enum Runner {
    /// A CGI process per request, started by the test, some killed at a pause drawn per process.
    Cgi(Setup),
    /// Apache with mod_fcgid: long-lived FastCGI processes, killed at pseudo-random instants
    /// by a thread of their own while the round's requests run.
    Fcgid(Site),
}

impl Runner {
    fn provider(&self) -> &Provider {
        match self {
            Runner::Cgi(setup) => &setup.provider,
            Runner::Fcgid(site) => &site.provider,
        }
    }

    fn address(&self, round: usize, key: usize) -> String {
        let generation = round / (GROUPS * ROUNDS_PER_ADDRESS);
        assert!(generation < 250, "too many rounds for the address plan");
        match self {
            Runner::Cgi(_) => format!("10.{generation}.{}.{}", round % GROUPS, key + 1),
            // Loopback addresses the test client can send from.
            Runner::Fcgid(_) => {
                format!("127.{}.{}.{}", generation + 1, round % GROUPS, key + 1)
            }
        }
    }

    fn addresses(&self, round: usize) -> Vec<String> {
        (0..KEYS_PER_ROUND)
            .map(|k| self.address(round, k))
            .collect()
    }

    /// One request nobody kills.
    fn request(&self, addr: &str, link: &str) -> Run {
        match self {
            Runner::Cgi(setup) => cgi_request(&setup.config_path, addr, link, None),
            Runner::Fcgid(site) => http_request(&site.apache, addr, link),
        }
    }
}

/// The time a whole admitted request takes, in microseconds, as a moving average of requests
/// nobody killed: the range kill pauses are drawn from.
struct Estimate(AtomicU64);

impl Estimate {
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self, sample: Duration) {
        let us = sample.as_micros() as u64;
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |e| {
                Some((e * 7 + us) / 8)
            });
    }
}

/// One round: its addresses, its time span, the counters the store held right after it, and
/// what became of each request.
struct Round {
    index: usize,
    addrs: Vec<String>,
    t0: u64,
    t1: u64,
    /// When the counters below had been read.
    t_read: u64,
    stored: BTreeMap<String, Stored>,
    runs: Vec<Run>,
    /// FastCGI: processes killed during the round, and how many of them were waiting for a
    /// connection (idle) rather than working.
    fcgid_kills: (usize, usize),
}

fn run_round(
    runner: &Runner,
    store: &Store,
    index: usize,
    rng: &mut Rng,
    estimate: &Estimate,
) -> Round {
    let addrs = runner.addresses(index);
    // (key, n, pause before the kill as a share of a whole request, in 1/1000)
    let mut jobs: Vec<(usize, usize, Option<u64>)> = Vec::new();
    for key in 0..KEYS_PER_ROUND {
        for n in 0..REQUESTS_PER_KEY {
            let kill =
                (rng.below(100) < KILL_PERCENT).then(|| rng.below(KILL_SPREAD_PERCENT * 10 + 1));
            jobs.push((key, n, kill));
        }
    }
    rng.shuffle(&mut jobs);
    let queue = Mutex::new(jobs);
    let runs = Mutex::new(Vec::new());
    let working = AtomicUsize::new(WORKERS);
    // FastCGI: (processes killed, of which waiting for a connection)
    let fcgid_kills = Mutex::new((0usize, 0usize));
    let killer_seed = rng.next();
    let t0 = now_ms();
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                loop {
                    let job = queue.lock().unwrap().pop();
                    let Some((key, n, kill)) = job else { break };
                    let addr = &addrs[key];
                    let link = link(index, key, n);
                    let mut run = match runner {
                        Runner::Cgi(setup) => {
                            let pause = kill
                                .map(|share| Duration::from_micros(estimate.get() * share / 1000));
                            cgi_request(&setup.config_path, addr, &link, pause)
                        }
                        Runner::Fcgid(site) => http_request(&site.apache, addr, &link),
                    };
                    run.round = index;
                    run.key = key;
                    // Under FastCGI the calibration's figure stays: requests that waited for a
                    // new process would stretch it.
                    if matches!(runner, Runner::Cgi(_))
                        && !run.kill_sent
                        && run.status() == Some(200)
                    {
                        estimate.add(run.elapsed);
                    }
                    runs.lock().unwrap().push(run);
                }
                working.fetch_sub(1, Ordering::SeqCst);
            });
        }
        if let Runner::Fcgid(Site { apache, .. }) = runner {
            let (working, fcgid_kills) = (&working, &fcgid_kills);
            s.spawn(move || {
                let mut rng = Rng::new(killer_seed);
                let cgi_bin = apache.dir().join("cgi-bin");
                // Instants spread over the time the round's requests take unhindered on two
                // cores.
                let round_us = estimate.get() * (KEYS_PER_ROUND * REQUESTS_PER_KEY) as u64 / 2;
                let mut instants: Vec<u64> = (0..FCGID_KILLS_PER_ROUND)
                    .map(|_| rng.below(round_us + 1))
                    .collect();
                instants.sort_unstable();
                let began = Instant::now();
                for at in instants {
                    let at = Duration::from_micros(at);
                    if let Some(wait) = at.checked_sub(began.elapsed()) {
                        std::thread::sleep(wait);
                    }
                    // The processes come back on demand: wait for one, while requests run.
                    while working.load(Ordering::SeqCst) > 0 {
                        let pids: Vec<u32> = processes_of(&cgi_bin).into_iter().collect();
                        if pids.is_empty() {
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        }
                        let pid = pids[rng.below(pids.len() as u64) as usize];
                        let idle = waits_in_accept(pid);
                        if sigkill(pid) {
                            let mut k = fcgid_kills.lock().unwrap();
                            k.0 += 1;
                            if idle {
                                k.1 += 1;
                            }
                        }
                        break;
                    }
                }
            });
        }
    });
    std::thread::sleep(SETTLE);
    let t1 = now_ms();
    let keys: Vec<String> = addrs.iter().map(|a| ip_key(a)).collect();
    let stored = store.counters(&keys);
    let t_read = now_ms();
    Round {
        index,
        addrs,
        t0,
        t1,
        t_read,
        stored,
        runs: runs.into_inner().unwrap(),
        fcgid_kills: fcgid_kills.into_inner().unwrap(),
    }
}

/// True when `pid` is blocked in `accept` (x86_64 syscall numbers 43 and 288): a FastCGI process
/// waiting for its next connection.
fn waits_in_accept(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/syscall"))
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .is_some_and(|n| n == "43" || n == "288")
}

/// SIGKILL to a process that is not the test's child; true when it was delivered.
fn sigkill(pid: u32) -> bool {
    Command::new("kill")
        .arg("-KILL")
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

// ---------------------------------------------------------------------------------------------
// The campaign

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cgi,
    Fcgid,
}

#[derive(Default)]
struct Figures {
    rounds: usize,
    /// Rounds that lay within one window of their addresses (span shorter than the window).
    exact_rounds: usize,
    /// Rounds whose counters were read before any window they opened could end.
    counted_rounds: usize,
    requests: usize,
    kills_sent: usize,
    killed: usize,
    /// FastCGI: processes killed while waiting for a connection rather than working.
    killed_idle: usize,
    /// Answers by status; the web server's own error pages apart.
    answers: BTreeMap<u16, usize>,
    server_errors: BTreeMap<u16, usize>,
    no_answer: usize,
    paid: usize,
    /// Paid calls whose request got no answer from the program (killed after the call went out).
    paid_unanswered: usize,
    /// Admissions counted by the store that never became a paid call (killed between the store
    /// write and the call), in the rounds whose counters were read.
    counted_unpaid: u64,
    max_per_window: u64,
    max_per_hour: u64,
    /// Log lines of the program, by their first words.
    log_lines: BTreeMap<String, usize>,
    longest_round_ms: u64,
    /// The slowest request: milliseconds and what it got.
    slowest: (u128, String),
}

/// The first words of a log line, to group them: the program's own line from `resolve: `, or
/// the web server's message without its time, process, client and numbers.
fn log_kind(line: &str) -> String {
    if let Some(start) = line.find("resolve: ") {
        return line[start..].chars().take(70).collect();
    }
    let mut rest = line.trim();
    while let Some(r) = rest.strip_prefix('[') {
        rest = r.split_once("] ").map_or("", |x| x.1);
    }
    let text: String = rest
        .split(' ')
        .filter(|w| !w.starts_with("127.") && !w.starts_with("/tmp/"))
        .collect::<Vec<_>>()
        .join(" ")
        .replace("[client ", "")
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect();
    text.chars().take(70).collect()
}

fn campaign(store: Store, kind: Kind) {
    let kills = match kind {
        Kind::Cgi => target_kills(),
        Kind::Fcgid => target_kills() / FCGID_KILL_DIVISOR,
    };
    let seed = seed();
    let label = format!(
        "{} store, {}",
        store.name(),
        match kind {
            Kind::Cgi => "CGI processes",
            Kind::Fcgid => "FastCGI processes under mod_fcgid",
        }
    );
    eprintln!(
        "crash campaign, {label}: until {kills} processes are killed; RESOLVE_CAMPAIGN_SEED={seed}"
    );
    let mut rng = Rng::new(seed);
    let builder = Site::builder(&format!("crash-{}", store.name()))
        .store(store.section())
        .rules(rules());
    let runner = match kind {
        Kind::Cgi => Runner::Cgi(builder.write()),
        Kind::Fcgid => Runner::Fcgid(
            builder
                .mode(Mode::Fcgid)
                .fcgid_pool(4)
                // mod_fcgid holds back new processes while processes die fast (each death adds
                // to a score that decays by one a second): killed processes would make
                // requests wait many seconds for a replacement. The scores do not change what
                // the program does.
                .apache(|b| b.conf("FcgidTerminationScore -1\nFcgidSpawnScore 0"))
                .start(),
        ),
    };
    let provider = runner.provider();

    // Requests nobody kills, for the time a whole request takes (and the store's tables).
    let calibration = match kind {
        Kind::Cgi => "10.255.0.1",
        Kind::Fcgid => "127.255.0.1",
    };
    let mut times = Vec::new();
    for i in 0..3 {
        let run = runner.request(calibration, &format!("https://files.example/calibrate/{i}"));
        assert_eq!(
            run.status(),
            Some(200),
            "calibration request: {:?}\n{}",
            run.answer,
            run.stderr
        );
        times.push(run.elapsed);
    }
    times.sort();
    let estimate = Estimate(AtomicU64::new(times[1].as_micros() as u64));
    eprintln!(
        "  a whole request takes about {} ms with nothing else running",
        times[1].as_millis()
    );

    let began = Instant::now();
    let mut rounds: Vec<Round> = Vec::new();
    let mut killed = 0;
    let mut last_end: BTreeMap<usize, u64> = BTreeMap::new();
    let max_rounds = kills.max(20);
    while killed < kills {
        let index = rounds.len();
        assert!(
            index < max_rounds,
            "{label}: {index} rounds killed only {killed} processes: the kills miss the processes"
        );
        // The group's windows from its previous round must be over.
        if let Some(end) = last_end.get(&(index % GROUPS)) {
            sleep_until_ms(end + WINDOW_SECS * 1000 + 20);
        }
        let round = run_round(&runner, &store, index, &mut rng, &estimate);
        killed += match kind {
            Kind::Cgi => round.runs.iter().filter(|r| r.killed_by_signal()).count(),
            Kind::Fcgid => round.fcgid_kills.0,
        };
        last_end.insert(index % GROUPS, round.t1);
        rounds.push(round);
    }
    let duration = began.elapsed();
    assert!(
        duration < Duration::from_secs(HOUR_SECS - 60),
        "the hour rule's check assumes the campaign lasts less than an hour"
    );

    // Calls a killed process had sent may still be on their way to the stand-in.
    let mut calls = provider.calls();
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(250));
        let now = provider.calls();
        if now == calls {
            break;
        }
        calls = now;
    }

    let mut fig = check(&label, kind, &rounds, provider, &store);
    fig.killed = killed;
    if kind == Kind::Fcgid {
        fig.kills_sent = killed;
        fig.killed_idle = rounds.iter().map(|r| r.fcgid_kills.1).sum();
    }
    if let Runner::Fcgid(Site { apache, .. }) = &runner {
        apache.settle_log();
        for line in apache.error_log().lines() {
            assert!(
                !line.contains("damaged"),
                "{label}: a counter was damaged: {line}"
            );
            if !line.trim().is_empty() && !line.contains(":notice]") {
                *fig.log_lines.entry(log_kind(line)).or_default() += 1;
            }
        }
    }

    let audit = store.audit();
    let after = still_admits(&label, &runner, &store, &rounds, provider);

    let answers: Vec<String> = fig
        .answers
        .iter()
        .map(|(s, n)| format!("{n}×{s}"))
        .collect();
    let server: Vec<String> = fig
        .server_errors
        .iter()
        .map(|(s, n)| format!("{n}×{s}"))
        .collect();
    eprintln!("crash campaign, {label}, seed {seed}:");
    eprintln!(
        "  {} rounds ({} within one window, {} with counters read back), {} s, longest round {} ms, \
         slowest request {} ms ({})",
        fig.rounds,
        fig.exact_rounds,
        fig.counted_rounds,
        duration.as_secs(),
        fig.longest_round_ms,
        fig.slowest.0,
        fig.slowest.1
    );
    match kind {
        Kind::Cgi => eprintln!(
            "  requests started {}, kills sent {}, killed by SIGKILL {} (after their count was \
             written: {} before the paid call, {} after it went out)",
            fig.requests, fig.kills_sent, fig.killed, fig.counted_unpaid, fig.paid_unanswered
        ),
        Kind::Fcgid => eprintln!(
            "  requests started {}, FastCGI processes killed with SIGKILL {} ({} of them idle \
             in accept, {} working)",
            fig.requests,
            fig.killed,
            fig.killed_idle,
            fig.killed - fig.killed_idle
        ),
    }
    eprintln!(
        "  answers from the program {} ({}), web server error pages {} ({}), no answer {}",
        fig.answers.values().sum::<usize>(),
        answers.join(", "),
        fig.server_errors.values().sum::<usize>(),
        server.join(", "),
        fig.no_answer
    );
    eprintln!(
        "  paid calls {} ({} of them without an answer from the program); counted by the store \
         but never paid: {}",
        fig.paid, fig.paid_unanswered, fig.counted_unpaid
    );
    eprintln!(
        "  most paid calls in one key-window {} (limit {LIMIT} per {WINDOW_SECS} s); \
         most in one key-hour {} (limit {HOUR_LIMIT})",
        fig.max_per_window, fig.max_per_hour
    );
    for (line, n) in &fig.log_lines {
        eprintln!("  log {n}× {line}");
    }
    eprintln!("  store afterwards: {audit}");
    eprintln!("  next requests: {after}");
}

/// Every invariant over the runs, the provider's record and the counters read after each round.
fn check(label: &str, kind: Kind, rounds: &[Round], provider: &Provider, store: &Store) -> Figures {
    let window_ms = WINDOW_SECS * 1000;
    let mut fig = Figures {
        rounds: rounds.len(),
        ..Figures::default()
    };

    // Each request: it was killed, or it ended with a whole, valid answer.
    let mut answered_200: BTreeSet<String> = BTreeSet::new();
    let mut without_answer: BTreeSet<String> = BTreeSet::new();
    for run in rounds.iter().flat_map(|r| &r.runs) {
        fig.requests += 1;
        if run.elapsed.as_millis() > fig.slowest.0 {
            let got = match (&run.answer, run.killed_by_signal()) {
                (_, true) => "killed".to_string(),
                (Ok(a), _) => a.status.to_string(),
                (Err(e), _) => e.clone(),
            };
            fig.slowest = (run.elapsed.as_millis(), got);
        }
        assert!(
            !run.stderr.contains("damaged"),
            "{label}: a counter was damaged: {}",
            run.stderr
        );
        if kind == Kind::Cgi {
            if run.kill_sent {
                fig.kills_sent += 1;
            }
            let exit = run.exit.expect("exit status");
            if run.killed_by_signal() {
                assert!(run.kill_sent, "{label}: killed by nobody: {}", run.stderr);
                without_answer.insert(run.link.clone());
                continue;
            }
            assert!(
                exit.success(),
                "{label}: {} ended with {exit}: {}",
                run.link,
                run.stderr
            );
            for line in run.stderr.lines() {
                *fig.log_lines.entry(log_kind(line)).or_default() += 1;
            }
        }
        let answer = match &run.answer {
            Ok(a) => a,
            Err(e) if kind == Kind::Fcgid => {
                // Counted, and shown: the web server closed without an answer.
                eprintln!("  {label}: {}: {e}", run.link);
                fig.no_answer += 1;
                without_answer.insert(run.link.clone());
                continue;
            }
            Err(e) => panic!("{label}: {} exited 0 without a valid answer: {e}", run.link),
        };
        if !answer.from_program {
            // mod_fcgid's own page for a request whose process died under it.
            assert!(
                kind == Kind::Fcgid && (500..=504).contains(&answer.status),
                "{label}: {} got {} not written by the program:\n{}",
                run.link,
                answer.status,
                answer.body
            );
            *fig.server_errors.entry(answer.status).or_default() += 1;
            without_answer.insert(run.link.clone());
            continue;
        }
        *fig.answers.entry(answer.status).or_default() += 1;
        match answer.status {
            200 => {
                assert!(
                    answer.body.starts_with("https://cdn.test/file/"),
                    "{label}: 200 with {:?}",
                    answer.body
                );
                answered_200.insert(run.link.clone());
            }
            429 => assert!(
                answer.retry_after.is_some(),
                "{label}: 429 without Retry-After"
            ),
            // The store failed and `on_error: deny` refused: nothing admitted, nothing paid.
            503 => assert_eq!(
                answer.retry_after.as_deref(),
                Some(DENY_RETRY_AFTER.to_string().as_str()),
                "{label}: 503 that is not the store's: {}",
                answer.body
            ),
            other => panic!("{label}: {} got {other}: {}", run.link, answer.body),
        }
    }

    // The paid calls: each link at most once, attributed to its round and address.
    let mut paid_links: BTreeSet<String> = BTreeSet::new();
    let mut per_window: BTreeMap<(usize, usize), u64> = BTreeMap::new();
    for req in provider.requests() {
        let link = req.param("link").expect("the provider got a link");
        let Some((round, key)) = parse_link(&link) else {
            continue; // calibration and the final requests
        };
        assert!(
            paid_links.insert(link.clone()),
            "{label}: {link} was paid twice"
        );
        *per_window.entry((round, key)).or_default() += 1;
        if without_answer.contains(&link) {
            fig.paid_unanswered += 1;
        }
    }
    fig.paid = paid_links.len();
    for link in &answered_200 {
        assert!(
            paid_links.contains(link),
            "{label}: {link} was answered 200 without a paid call"
        );
    }

    // Per key and window: rounds are windows (see the top of this file).
    let mut per_address: BTreeMap<String, u64> = BTreeMap::new();
    for round in rounds {
        let span = round.t1 - round.t0;
        fig.longest_round_ms = fig.longest_round_ms.max(span);
        let windows = span / window_ms + 1;
        if windows == 1 {
            fig.exact_rounds += 1;
        }
        let counted = round.t_read < round.t0 + window_ms;
        if counted {
            fig.counted_rounds += 1;
        }
        for (key, addr) in round.addrs.iter().enumerate() {
            let paid = per_window.get(&(round.index, key)).copied().unwrap_or(0);
            *per_address.entry(addr.clone()).or_default() += paid;
            if windows == 1 {
                fig.max_per_window = fig.max_per_window.max(paid);
            }
            assert!(
                paid <= LIMIT * windows,
                "{label}: round {} ({span} ms, so at most {windows} window(s)): {addr} made \
                 {paid} paid calls, over {LIMIT} per window",
                round.index
            );
            if !counted {
                continue;
            }
            // Every window the round opened is still running: the latest is the only one.
            match round.stored.get(&ip_key(addr)) {
                Some(s) if s.start_ms >= round.t0 => {
                    assert!(
                        s.start_ms <= round.t1,
                        "{label}: round {}: {addr}'s window starts at {} after the round ({}..{})",
                        round.index,
                        s.start_ms,
                        round.t0,
                        round.t1
                    );
                    assert!(
                        s.count <= LIMIT,
                        "{label}: round {}: {addr} counted {} over the limit",
                        round.index,
                        s.count
                    );
                    assert!(
                        paid <= s.count,
                        "{label}: round {}: {addr} made {paid} paid calls but the store counted \
                         {}: admitted without counting",
                        round.index,
                        s.count
                    );
                    fig.counted_unpaid += s.count - paid;
                }
                other => assert_eq!(
                    paid, 0,
                    "{label}: round {}: {addr} made {paid} paid calls but the store holds no \
                     window of this round ({other:?})",
                    round.index
                ),
            }
        }
    }

    // Per key of the hour rule: the whole campaign is one window.
    let addrs: Vec<String> = per_address.keys().cloned().collect();
    let hour_keys: Vec<String> = addrs.iter().map(|a| hour_key(a)).collect();
    let stored = store.counters(&hour_keys);
    for addr in &addrs {
        let paid = per_address[addr];
        fig.max_per_hour = fig.max_per_hour.max(paid);
        assert!(
            paid <= HOUR_LIMIT,
            "{label}: {addr} made {paid} paid calls, over {HOUR_LIMIT} per hour"
        );
        let counted = stored.get(&hour_key(addr)).map_or(0, |s| s.count);
        assert!(
            paid <= counted && counted <= HOUR_LIMIT,
            "{label}: {addr}: {paid} paid calls, hour counter {counted} (limit {HOUR_LIMIT})"
        );
    }
    fig
}

/// After the campaign the store admits and refuses as before: a new address is admitted; an
/// address with room left in its hour is admitted once its last window ended; one whose hour
/// is used up is refused.
fn still_admits(
    label: &str,
    runner: &Runner,
    store: &Store,
    rounds: &[Round],
    provider: &Provider,
) -> String {
    let fresh = match runner {
        Runner::Cgi(_) => "10.254.0.1",
        Runner::Fcgid(_) => "127.254.0.1",
    };
    // One request from `addr` for `link`: answered `status` after `paid` paid calls (0 or 1).
    let expect = |addr: &str, link: &str, status: u16, paid: usize, what: &str| {
        let before = provider.calls();
        let run = runner.request(addr, link);
        assert_eq!(
            run.status(),
            Some(status),
            "{label}: {what}: {:?}",
            run.answer
        );
        assert_eq!(
            provider.calls(),
            before + paid,
            "{label}: {what}: paid calls"
        );
    };
    expect(
        fresh,
        "https://files.example/after/fresh",
        200,
        1,
        "new address",
    );

    let mut last_end: BTreeMap<&str, u64> = BTreeMap::new();
    for r in rounds {
        for a in &r.addrs {
            last_end.insert(a, r.t1);
        }
    }
    let keys: Vec<String> = last_end.keys().map(|a| hour_key(a)).collect();
    let hour = store.counters(&keys);
    let used = |a: &str| hour.get(&hour_key(a)).map_or(0, |s| s.count);
    let mut out = vec!["a new address: 200".to_string()];
    let room = last_end.keys().copied().find(|a| used(a) < HOUR_LIMIT);
    let full = last_end.keys().copied().find(|a| used(a) >= HOUR_LIMIT);
    if let Some(a) = room {
        sleep_until_ms(last_end[a] + WINDOW_SECS * 1000 + 20);
        expect(
            a,
            "https://files.example/after/room",
            200,
            1,
            &format!(
                "{a} ({} of {HOUR_LIMIT} this hour), after its window",
                used(a)
            ),
        );
        out.push(format!(
            "{a} ({} of {HOUR_LIMIT} used this hour): 200",
            used(a)
        ));
    }
    if let Some(a) = full {
        expect(
            a,
            "https://files.example/after/full",
            429,
            0,
            &format!("{a} used its hour"),
        );
        out.push(format!("{a} (hour used up): 429"));
    }
    out.join("; ")
}

// ---------------------------------------------------------------------------------------------
// The tests

/// `name: store, kind;` makes the test `name`: a campaign on that store under that gateway.
macro_rules! campaigns {
    ($($name:ident: $store:ident, $kind:ident;)+) => {
        $(
            #[test]
            fn $name() {
                campaign(Store::$store(), Kind::$kind);
            }
        )+
    };
}

campaigns! {
    file_store_survives_cgi_processes_killed_at_random_instants: file, Cgi;
    mysql_store_survives_cgi_processes_killed_at_random_instants: mysql, Cgi;
    redis_store_survives_cgi_processes_killed_at_random_instants: redis, Cgi;
    file_store_survives_fastcgi_processes_killed_at_random_instants: file, Fcgid;
    mysql_store_survives_fastcgi_processes_killed_at_random_instants: mysql, Fcgid;
    redis_store_survives_fastcgi_processes_killed_at_random_instants: redis, Fcgid;
}
