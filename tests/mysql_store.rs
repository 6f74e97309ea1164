//! The MySQL/MariaDB store under a real Apache (mod_cgid) and a real MariaDB: exact limits under concurrent load, one limit shared by two web servers, sliding-window timing, a database that dies, slows down, refuses or rejects the password, table growth and sweeps, the Unix socket, tables left by PHP limiters, and `resolve check`.

mod support;

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use resolve::core::decision::Decision;
use resolve::store::Check;
use serde_json::{Value, json};
use support::config::{self, TOKEN};
use support::delay_proxy::Mode;
use support::urlenc::link_param;
use support::{
    Apache, Cgi, DelayProxy, HttpClient, MariaDb, Provider, Request, Response, TempDir, binary,
    fire,
};

/// Store timeouts every test configures, in milliseconds.
const CONNECT_MS: u64 = 1000;
const READ_MS: u64 = 1000;
/// `Retry-After` of the 503 a failing store gets with `on_error: deny`.
const DENY_RETRY_AFTER: u64 = 7;

// ---------------------------------------------------------------------------------------------
// Configuration

fn rule(name: &str, algorithm: &str, limit: u64, window_secs: u64) -> Value {
    json!({"name": name, "key": "ip", "algorithm": algorithm, "limit": limit, "window_secs": window_secs})
}

/// The store section for `db` reached over TCP at `port` (the server's own, or a proxy's).
fn tcp_store(db: &MariaDb, port: u16, on_error: &str) -> Value {
    json!({
        "kind": "mysql",
        "host": "127.0.0.1",
        "port": port,
        "user": db.user(),
        "password": db.password(),
        "database": db.database(),
        "connect_timeout_ms": CONNECT_MS,
        "read_timeout_ms": READ_MS,
        "on_error": on_error,
        "deny_retry_after_secs": DENY_RETRY_AFTER,
        // Only explicit `resolve sweep` runs: a request's sweep would add log lines and remove
        // rows at random.
        "sweep_one_in": 0,
    })
}

fn site_config(provider: &Provider, store: Value, rules: Vec<Value>) -> Value {
    json!({
        "provider": config::http_provider(&provider.url("/unrestrict")),
        "store": store,
        "rules": rules,
    })
}

/// A configuration file in a directory of its own.
struct ConfigFile {
    dir: TempDir,
    path: PathBuf,
}

impl ConfigFile {
    fn new(label: &str, value: &Value) -> ConfigFile {
        let dir = TempDir::new(label);
        let path = config::write(&dir, value);
        ConfigFile { dir, path }
    }

    /// Replace the file in one step (programs read it at each request).
    fn rewrite(&self, value: &Value) {
        let tmp = self.dir.write(
            "config.json.new",
            serde_json::to_vec_pretty(value).expect("serialize config"),
        );
        std::fs::rename(&tmp, &self.path).expect("replace config.json");
    }
}

fn apache(label: &str, cfg: &Path) -> Apache {
    Apache::builder(label)
        .resolve_cgi()
        .set_env("RESOLVE_CONFIG", cfg.to_str().expect("utf-8 path"))
        .start()
}

// ---------------------------------------------------------------------------------------------
// Requests and answers

fn link(i: usize) -> String {
    format!("https://example.com/file/{i}")
}

fn target(i: usize) -> String {
    format!("/cgi-bin/resolve?{}", link_param(&link(i)))
}

fn send(client: &HttpClient, i: usize) -> io::Result<Response> {
    client.send(&Request::get(&target(i)).header("Accept", "text/plain"))
}

fn get(client: &HttpClient, i: usize) -> Response {
    send(client, i).unwrap_or_else(|e| panic!("GET {}: {e}", target(i)))
}

/// An answer and how long it took.
fn timed(client: &HttpClient, i: usize) -> (Response, Duration) {
    let t = Instant::now();
    let r = get(client, i);
    (r, t.elapsed())
}

/// True when the answer went through the limiter (a store that failed open adds no headers).
fn limited_by_store(r: &Response) -> bool {
    r.header("RateLimit-Policy").is_some() && r.header("RateLimit").is_some()
}

fn retry_after(r: &Response) -> u64 {
    r.header("Retry-After")
        .unwrap_or_else(|| panic!("no Retry-After:\n{}", r.everything()))
        .parse()
        .unwrap_or_else(|_| panic!("Retry-After is not a number:\n{}", r.everything()))
}

/// `r=` of the `RateLimit` header: what the key has left.
fn remaining(r: &Response) -> u64 {
    let header = r
        .header("RateLimit")
        .unwrap_or_else(|| panic!("no RateLimit header:\n{}", r.everything()));
    header
        .split(';')
        .find_map(|p| p.trim().strip_prefix("r="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("RateLimit {header:?} has no r=N"))
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// Milliseconds since 1970 on this machine's clock, which the database server shares.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

fn sleep_until_ms(t: u64) {
    let now = now_ms();
    if t > now {
        std::thread::sleep(Duration::from_millis(t - now));
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    v[v.len() / 2]
}

// ---------------------------------------------------------------------------------------------
// The database, the commands and the logs

/// One number from root SQL.
fn number(db: &MariaDb, sql: &str) -> u64 {
    let out = db.root_sql(sql);
    out.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{sql}: not a number: {out:?}"))
}

/// One column of root SQL, one value a line.
fn column(db: &MariaDb, sql: &str) -> BTreeSet<String> {
    db.root_sql(sql)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// `resolve COMMAND --config FILE`: exit code and everything it printed.
fn resolve_command(command: &str, cfg: &Path) -> (i32, String) {
    let out = Command::new(binary())
        .arg(command)
        .arg("--config")
        .arg(cfg)
        .env_remove("GATEWAY_INTERFACE")
        .env_remove("RESOLVE_CONFIG")
        .output()
        .unwrap_or_else(|e| panic!("run resolve {command}: {e}"));
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The JSON `resolve check` prints after "effective configuration".
fn check_json(output: &str) -> Value {
    let after = output
        .split_once("effective configuration (secrets masked):")
        .unwrap_or_else(|| panic!("no effective configuration in:\n{output}"))
        .1;
    let end = after.rfind('}').expect("end of the JSON");
    serde_json::from_str(&after[..=end])
        .unwrap_or_else(|e| panic!("effective configuration is not JSON ({e}):\n{output}"))
}

/// The program's lines in an Apache error_log.
fn resolve_lines(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains("resolve: ")).collect()
}

/// The same request run directly as a CGI program, from `remote_addr`.
fn cgi(cfg: &Path, remote_addr: &str, i: usize) -> support::CgiOutput {
    let out = Cgi::new("GET", link_param(&link(i)))
        .config(cfg)
        .var("REMOTE_ADDR", remote_addr)
        .header("Accept", "text/plain")
        .run();
    assert!(!out.timed_out, "{}", out.describe());
    out
}

// ---------------------------------------------------------------------------------------------
// 1 and 2: exact limits under load

/// What a burst of requests got.
struct Burst {
    responses: Vec<Response>,
    ok: Vec<usize>,
    limited: Vec<usize>,
    took: Duration,
}

/// `n` GETs for links `first..first + n`, `concurrency` at a time, each through `client_for(i)`.
fn burst<'a>(
    n: usize,
    concurrency: usize,
    first: usize,
    client_for: impl Fn(usize) -> &'a HttpClient + Sync,
) -> Burst {
    let t = Instant::now();
    let results = fire(n, concurrency, |i| send(client_for(i), first + i));
    let took = t.elapsed();
    let responses: Vec<Response> = results
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.unwrap_or_else(|e| panic!("request {i}: {e}")))
        .collect();
    let ok = (0..n).filter(|&i| responses[i].status == 200).collect();
    let limited = (0..n).filter(|&i| responses[i].status == 429).collect();
    Burst {
        responses,
        ok,
        limited,
        took,
    }
}

/// Exactly `limit` admitted through the limiter, every other request refused with a
/// Retry-After that points at the end of the window, and the provider asked for exactly the
/// admitted links.
fn assert_exact(
    b: &Burst,
    limit: usize,
    window: u64,
    first: usize,
    provider: &Provider,
    requests_before: usize,
) {
    let n = b.responses.len();
    let others: Vec<String> = b
        .responses
        .iter()
        .filter(|r| r.status != 200 && r.status != 429)
        .map(Response::everything)
        .collect();
    assert!(others.is_empty(), "answers other than 200/429: {others:?}");
    assert_eq!(b.ok.len(), limit, "admitted");
    assert_eq!(b.limited.len(), n - limit, "refused");
    for &i in &b.ok {
        let r = &b.responses[i];
        assert!(
            limited_by_store(r),
            "a 200 without RateLimit headers (the store failed open?):\n{}",
            r.everything()
        );
        assert!(
            r.text().starts_with("https://cdn.test/file/"),
            "{}",
            r.everything()
        );
    }
    let policy = format!("\"ip\";q={limit};w={window}");
    let oldest = window.saturating_sub(b.took.as_secs() + 2);
    for &i in &b.limited {
        let r = &b.responses[i];
        let ra = retry_after(r);
        assert!(
            (oldest..=window).contains(&ra),
            "Retry-After {ra} outside {oldest}..={window}:\n{}",
            r.everything()
        );
        assert_eq!(r.header("RateLimit-Policy"), Some(policy.as_str()));
        assert_eq!(remaining(r), 0, "{}", r.everything());
    }
    let asked: BTreeSet<String> = provider.requests()[requests_before..]
        .iter()
        .map(|r| r.param("link").expect("link sent to the provider"))
        .collect();
    let admitted: BTreeSet<String> = b.ok.iter().map(|&i| link(first + i)).collect();
    assert_eq!(asked, admitted, "links the provider was asked for");
}

#[test]
fn bursts_of_300_from_one_address_admit_exactly_the_limit_fixed_and_sliding() {
    let began = Instant::now();
    let db = MariaDb::builder("burst").start();
    let provider = Provider::start();
    let store = tcp_store(&db, db.port(), "allow");
    let cfg = ConfigFile::new(
        "mysql-burst",
        &site_config(&provider, store.clone(), vec![rule("ip", "fixed", 30, 600)]),
    );
    let apache = apache("mysql-burst", &cfg.path);
    for (a, algorithm) in ["fixed", "sliding"].into_iter().enumerate() {
        cfg.rewrite(&site_config(
            &provider,
            store.clone(),
            vec![rule("ip", algorithm, 30, 600)],
        ));
        for rep in 0..5 {
            // A fresh key each time: another source address.
            let source = format!("127.0.0.{}", 10 + 10 * a + rep);
            let key = format!("resolve:ip:{source}");
            let client = apache.client().bind_source(&source);
            let first = (a * 5 + rep) * 1000;
            let calls_before = provider.calls();
            let requests_before = provider.requests().len();
            let b = burst(300, 32, first, |_| &client);
            let calls = provider.calls() - calls_before;
            eprintln!(
                "{algorithm} run {} from {source}: {} x 200, {} x 429, {calls} provider calls, {} ms",
                rep + 1,
                b.ok.len(),
                b.limited.len(),
                ms(b.took)
            );
            assert_eq!(calls, 30, "{algorithm} run {}: provider calls", rep + 1);
            assert_exact(&b, 30, 600, first, &provider, requests_before);
            // What the database holds for the key agrees.
            let counted = number(
                &db,
                &format!("SELECT count FROM resolve_test.rate_counters WHERE rkey = '{key}'"),
            );
            assert_eq!(counted, 30, "{key} in rate_counters");
            let events = number(
                &db,
                &format!("SELECT COUNT(*) FROM resolve_test.rate_events WHERE rkey = '{key}'"),
            );
            let expected_events = if algorithm == "sliding" { 30 } else { 0 };
            assert_eq!(events, expected_events, "{key} in rate_events");
        }
    }
    eprintln!("bursts: {} ms in all", ms(began.elapsed()));
}

#[test]
fn two_web_servers_sharing_one_database_share_the_limit() {
    let began = Instant::now();
    let db = MariaDb::builder("shared").start();
    let provider = Provider::start();
    let store = tcp_store(&db, db.port(), "allow");
    let cfg = ConfigFile::new(
        "mysql-shared",
        &site_config(&provider, store.clone(), vec![rule("ip", "fixed", 30, 600)]),
    );
    let one = apache("mysql-shared-1", &cfg.path);
    let two = apache("mysql-shared-2", &cfg.path);
    assert_ne!(one.port(), two.port());
    for (a, algorithm) in ["fixed", "sliding"].into_iter().enumerate() {
        cfg.rewrite(&site_config(
            &provider,
            store.clone(),
            vec![rule("ip", algorithm, 30, 600)],
        ));
        let source = format!("127.0.0.{}", 30 + a);
        let clients = [
            one.client().bind_source(&source),
            two.client().bind_source(&source),
        ];
        let first = a * 1000;
        let calls_before = provider.calls();
        let requests_before = provider.requests().len();
        let b = burst(300, 32, first, |i| &clients[i % 2]);
        let calls = provider.calls() - calls_before;
        let ok_via_one = b.ok.iter().filter(|&&i| i % 2 == 0).count();
        eprintln!(
            "{algorithm}, two Apaches (ports {} and {}), 150 requests each: {} x 200 ({} via the first, {} via the second), {} x 429, {calls} provider calls, {} ms",
            one.port(),
            two.port(),
            b.ok.len(),
            ok_via_one,
            b.ok.len() - ok_via_one,
            b.limited.len(),
            ms(b.took)
        );
        assert_eq!(calls, 30, "{algorithm}: provider calls for both servers");
        assert_exact(&b, 30, 600, first, &provider, requests_before);
    }
    eprintln!("shared limit: {} ms in all", ms(began.elapsed()));
}

// ---------------------------------------------------------------------------------------------
// 3: sliding window timing

/// One request, with the clock read before it was sent and after its answer came.
struct Observed {
    response: Response,
    sent_ms: u64,
    answered_ms: u64,
}

fn observe(client: &HttpClient, i: usize) -> Observed {
    let sent_ms = now_ms();
    let response = get(client, i);
    Observed {
        response,
        sent_ms,
        answered_ms: now_ms(),
    }
}

/// A refusal whose Retry-After must be the seconds, rounded up, until `ages_out_ms`, for a
/// decision made while the request was in flight.
fn assert_refused_until(o: &Observed, ages_out_ms: u64, what: &str) {
    let r = &o.response;
    assert_eq!(r.status, 429, "{what}:\n{}", r.everything());
    let ra = retry_after(r);
    let secs = |until: u64, at: u64| until.saturating_sub(at).div_ceil(1000).max(1);
    let (lo, hi) = (
        secs(ages_out_ms, o.answered_ms),
        secs(ages_out_ms, o.sent_ms),
    );
    eprintln!(
        "{what}: 429 with Retry-After {ra} ({} ms before the record ages out; accepted {lo}..={hi})",
        ages_out_ms as i64 - o.sent_ms as i64
    );
    assert!(
        (lo..=hi).contains(&ra),
        "{what}: Retry-After {ra}, but the oldest record in the window ages out in {lo}..={hi} s:\n{}",
        r.everything()
    );
}

#[test]
fn sliding_window_admits_again_exactly_when_the_oldest_request_ages_out() {
    let began = Instant::now();
    let db = MariaDb::builder("sliding").start();
    let provider = Provider::start();
    let window_ms = 3000;
    let cfg = ConfigFile::new(
        "mysql-sliding",
        &site_config(
            &provider,
            tcp_store(&db, db.port(), "allow"),
            vec![rule("ip", "sliding", 3, 3)],
        ),
    );
    let apache = apache("mysql-sliding", &cfg.path);
    let source = "127.0.0.40";
    let key = format!("resolve:ip:{source}");
    let client = apache.client().bind_source(source);

    // Three requests about a second apart are admitted.
    let start = now_ms();
    let mut admitted = Vec::new();
    for n in 0..3u64 {
        sleep_until_ms(start + n * 1000);
        let o = observe(&client, n as usize);
        assert_eq!(o.response.status, 200, "{}", o.response.everything());
        assert!(limited_by_store(&o.response), "{}", o.response.everything());
        assert_eq!(remaining(&o.response), 2 - n, "{}", o.response.everything());
        admitted.push(o);
    }
    // When the database recorded them (its clock is this machine's).
    let recorded: Vec<u64> = db
        .root_sql(&format!(
            "SELECT ts FROM resolve_test.rate_events WHERE rkey = '{key}' ORDER BY ts"
        ))
        .lines()
        .map(|l| l.trim().parse().expect("ts in milliseconds"))
        .collect();
    assert_eq!(recorded.len(), 3, "records: {recorded:?}");
    for (o, ts) in admitted.iter().zip(&recorded) {
        assert!(
            o.sent_ms.saturating_sub(5) <= *ts && *ts <= o.answered_ms + 5,
            "recorded at {ts}, request in flight {}..{}",
            o.sent_ms,
            o.answered_ms
        );
    }
    eprintln!(
        "admitted at +{} ms, +{} ms, +{} ms (database time)",
        recorded[0] - start,
        recorded[1] - start,
        recorded[2] - start
    );

    // A fourth is refused until the first ages out.
    let o = observe(&client, 3);
    assert_refused_until(&o, recorded[0] + window_ms, "4th request");
    sleep_until_ms(recorded[0] + window_ms - 300);
    let o = observe(&client, 4);
    assert_refused_until(
        &o,
        recorded[0] + window_ms,
        "300 ms before the 1st ages out",
    );

    // Once it has, exactly one more fits (a fixed window would start afresh and admit three).
    sleep_until_ms(recorded[0] + window_ms + 100);
    let o = observe(&client, 5);
    assert_eq!(o.response.status, 200, "{}", o.response.everything());
    assert_eq!(remaining(&o.response), 0, "{}", o.response.everything());
    let o = observe(&client, 6);
    assert_refused_until(&o, recorded[1] + window_ms, "right after the 1st aged out");

    // And one more once the second has aged out.
    sleep_until_ms(recorded[1] + window_ms + 100);
    let o = observe(&client, 7);
    assert_eq!(o.response.status, 200, "{}", o.response.everything());
    assert_eq!(remaining(&o.response), 0, "{}", o.response.everything());
    let o = observe(&client, 8);
    assert_refused_until(&o, recorded[2] + window_ms, "right after the 2nd aged out");

    // Refusals were not recorded; the provider was called for the five admitted only.
    assert_eq!(provider.calls(), 5, "provider calls");
    let asked: Vec<String> = provider
        .requests()
        .iter()
        .map(|r| r.param("link").expect("link"))
        .collect();
    assert_eq!(asked, [0, 1, 2, 5, 7].map(link).to_vec());
    let left = number(
        &db,
        &format!("SELECT COUNT(*) FROM resolve_test.rate_events WHERE rkey = '{key}'"),
    );
    assert_eq!(left, 3, "records left: the 3rd, 6th and 8th requests'");
    eprintln!("sliding timing: {} ms", ms(began.elapsed()));
}

// ---------------------------------------------------------------------------------------------
// 4: the database dies under load and comes back

/// One answer of the load run.
struct Sent {
    sent: Instant,
    took: Duration,
    response: Result<Response, String>,
}

#[test]
fn database_killed_under_load_follows_the_policy_and_limiting_resumes_after_restart() {
    let began = Instant::now();
    let mut db = MariaDb::builder("outage").start();
    let password = db.password().to_string();
    let allow_provider = Provider::start();
    let deny_provider = Provider::start();
    let limit = 60;
    let allow_cfg = ConfigFile::new(
        "mysql-outage-allow",
        &site_config(
            &allow_provider,
            tcp_store(&db, db.port(), "allow"),
            vec![rule("ip", "fixed", limit, 600)],
        ),
    );
    let deny_cfg = ConfigFile::new(
        "mysql-outage-deny",
        &site_config(
            &deny_provider,
            tcp_store(&db, db.port(), "deny"),
            vec![rule("ip", "fixed", limit, 600)],
        ),
    );
    let allow_site = apache("mysql-outage-allow", &allow_cfg.path);
    let deny_site = apache("mysql-outage-deny", &deny_cfg.path);
    let allow_client = allow_site.client().bind_source("127.0.0.50");
    let deny_client = deny_site.client().bind_source("127.0.0.51");
    let bound = Duration::from_millis(CONNECT_MS + READ_MS + 3000);

    // The load: 4 clients on the allow site, 2 on the deny site, until told to stop; the
    // database is killed once 20 allow answers came, and the run goes on for 40 more.
    let allow_workers = 4;
    let stop = AtomicBool::new(false);
    let next = AtomicUsize::new(0);
    let killed_at: Mutex<Option<Instant>> = Mutex::new(None);
    let allow_done = AtomicUsize::new(0);
    let allow_after_kill = AtomicUsize::new(0);
    let deny_after_kill = AtomicUsize::new(0);
    let allow_log: Mutex<Vec<Sent>> = Mutex::new(Vec::new());
    let deny_log: Mutex<Vec<Sent>> = Mutex::new(Vec::new());
    let run_began = Instant::now();
    std::thread::scope(|s| {
        for w in 0..allow_workers + 2 {
            let on_allow = w < allow_workers;
            let (client, log, done_after) = if on_allow {
                (&allow_client, &allow_log, &allow_after_kill)
            } else {
                (&deny_client, &deny_log, &deny_after_kill)
            };
            let (stop, next, killed_at, allow_done) = (&stop, &next, &killed_at, &allow_done);
            s.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let sent = Instant::now();
                    let response = send(client, 10_000 + i).map_err(|e| e.to_string());
                    let took = sent.elapsed();
                    if on_allow {
                        allow_done.fetch_add(1, Ordering::SeqCst);
                    }
                    if killed_at.lock().unwrap().is_some_and(|k| sent > k) {
                        done_after.fetch_add(1, Ordering::SeqCst);
                    }
                    log.lock().unwrap().push(Sent {
                        sent,
                        took,
                        response,
                    });
                }
            });
        }
        let wait = |what: &str, ready: &dyn Fn() -> bool| {
            let until = Instant::now() + Duration::from_secs(60);
            while !ready() {
                assert!(Instant::now() < until, "load run: {what} never happened");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        wait("20 answers before the kill", &|| {
            allow_done.load(Ordering::SeqCst) >= 20
        });
        db.kill();
        *killed_at.lock().unwrap() = Some(Instant::now());
        eprintln!(
            "database killed {} ms into the load run, after {} allow answers",
            ms(run_began.elapsed()),
            allow_done.load(Ordering::SeqCst)
        );
        wait("40 allow and 20 deny answers sent after the kill", &|| {
            allow_after_kill.load(Ordering::SeqCst) >= 40
                && deny_after_kill.load(Ordering::SeqCst) >= 20
        });
        stop.store(true, Ordering::SeqCst);
    });
    let killed_at = killed_at.into_inner().unwrap().expect("killed");
    let allow_log = allow_log.into_inner().unwrap();
    let deny_log = deny_log.into_inner().unwrap();

    // Every request got an answer within the timeouts.
    for (site, log) in [("allow", &allow_log), ("deny", &deny_log)] {
        for s in log {
            if let Err(e) = &s.response {
                panic!("{site}: a request got no answer: {e}");
            }
            assert!(
                s.took < bound,
                "{site}: an answer took {} ms (bound {} ms)",
                ms(s.took),
                ms(bound)
            );
        }
        let during: Vec<Duration> = log
            .iter()
            .filter(|s| s.sent > killed_at)
            .map(|s| s.took)
            .collect();
        eprintln!(
            "{site}: {} answers, {} sent during the outage: latency median {} ms, max {} ms (bound {} ms)",
            log.len(),
            during.len(),
            ms(median(during.clone())),
            ms(during.iter().max().copied().unwrap_or_default()),
            ms(bound)
        );
    }
    let answers = |log: &[Sent]| -> Vec<(Instant, Response)> {
        log.iter()
            .map(|s| (s.sent, s.response.clone().expect("checked above")))
            .collect()
    };
    let allow_answers = answers(&allow_log);
    let deny_answers = answers(&deny_log);

    // allow: always 200 and the provider called; after the kill, without the limiter.
    let mut admitted_by_store = 0;
    let mut failed_open = 0;
    for (sent, r) in &allow_answers {
        assert_eq!(r.status, 200, "allow site:\n{}", r.everything());
        if limited_by_store(r) {
            admitted_by_store += 1;
            assert!(*sent < killed_at, "limiter headers after the kill");
        } else {
            failed_open += 1;
        }
        assert!(!r.everything().contains(&password), "password in an answer");
    }
    assert!(failed_open >= 40, "only {failed_open} answers failed open");
    // deny: 200 through the limiter before, 503 with Retry-After after.
    let mut deny_ok = 0;
    let mut deny_503 = 0;
    for (sent, r) in &deny_answers {
        match r.status {
            200 => {
                assert!(limited_by_store(r), "{}", r.everything());
                assert!(*sent < killed_at, "a 200 on the deny site after the kill");
                deny_ok += 1;
            }
            503 => {
                assert_eq!(retry_after(r), DENY_RETRY_AFTER, "{}", r.everything());
                deny_503 += 1;
            }
            _ => panic!("deny site:\n{}", r.everything()),
        }
        assert!(!r.everything().contains(&password), "password in an answer");
    }
    assert!(deny_503 >= 20, "only {deny_503} answers of 503");
    eprintln!(
        "allow: {admitted_by_store} admitted by the store, {failed_open} failed open; deny: {deny_ok} x 200, {deny_503} x 503"
    );
    assert_eq!(
        allow_provider.calls(),
        allow_answers.len(),
        "allow provider"
    );
    assert_eq!(deny_provider.calls(), deny_ok, "deny provider");

    // One log line per failed request, naming the store; never the password.
    allow_site.settle_log();
    deny_site.settle_log();
    let allow_error_log = allow_site.error_log();
    let deny_error_log = deny_site.error_log();
    let lines = resolve_lines(&allow_error_log);
    assert_eq!(
        lines.len(),
        failed_open,
        "allow site: one line per request that failed open:\n{}",
        lines.join("\n")
    );
    for l in &lines {
        assert!(
            l.contains("resolve: error: store failed, answering anyway")
                && l.contains(&format!("127.0.0.1:{}", db.port())),
            "{l}"
        );
    }
    let lines = resolve_lines(&deny_error_log);
    assert_eq!(
        lines.len(),
        deny_503,
        "deny site: one line per 503:\n{}",
        lines.join("\n")
    );
    for l in &lines {
        assert!(l.contains("store failed, refusing"), "{l}");
    }
    eprintln!(
        "first line during the outage: {}",
        resolve_lines(&allow_error_log)[0]
    );
    for log in [&allow_error_log, &deny_error_log] {
        assert!(!log.contains(&password), "password in the error_log");
    }

    // Back up: limiting resumes with no manual step.
    db.restart();
    let deny_calls = deny_provider.calls();
    let r = get(&deny_client, 50_000);
    assert_eq!(r.status, 200, "{}", r.everything());
    assert!(limited_by_store(&r), "{}", r.everything());
    assert_eq!(deny_provider.calls(), deny_calls + 1);
    let calls_before = allow_provider.calls();
    let mut after_restart = 0;
    let mut refusal = None;
    for i in 0..2 * limit as usize {
        let (r, took) = timed(&allow_client, 60_000 + i);
        assert!(took < bound, "{} ms after the restart", ms(took));
        match r.status {
            200 => {
                assert!(limited_by_store(&r), "{}", r.everything());
                after_restart += 1;
            }
            429 => {
                refusal = Some(r);
                break;
            }
            _ => panic!("after the restart:\n{}", r.everything()),
        }
    }
    let refusal = refusal.expect("the limit is reached again after the restart");
    let ra = retry_after(&refusal);
    assert!((500..=600).contains(&ra), "Retry-After {ra}");
    assert_eq!(allow_provider.calls(), calls_before + after_restart);
    let counted = admitted_by_store + after_restart;
    eprintln!(
        "after the restart: {after_restart} admitted, then 429 (Retry-After {ra}); {counted} of {limit} counted by the store in all"
    );
    // A request whose commit reached the server just before the kill counts without having
    // had its answer: at most one per client in flight.
    assert!(
        (limit as usize - allow_workers..=limit as usize).contains(&counted),
        "{counted} counted before and after the outage, limit {limit}"
    );
    eprintln!("outage test: {} ms", ms(began.elapsed()));
}

// ---------------------------------------------------------------------------------------------
// 5: slow, refusing and hanging databases

#[test]
fn slow_refusing_and_hanging_databases_get_the_policy_answer_within_the_timeout() {
    let began = Instant::now();
    let db = MariaDb::builder("slow").start();
    let proxy = DelayProxy::start(db.addr());
    let allow_provider = Provider::start();
    let deny_provider = Provider::start();
    let rules = vec![rule("ip", "fixed", 1000, 600)];
    let allow_cfg = ConfigFile::new(
        "mysql-slow-allow",
        &site_config(
            &allow_provider,
            tcp_store(&db, proxy.port(), "allow"),
            rules.clone(),
        ),
    );
    let deny_cfg = ConfigFile::new(
        "mysql-slow-deny",
        &site_config(&deny_provider, tcp_store(&db, proxy.port(), "deny"), rules),
    );
    let allow_site = apache("mysql-slow-allow", &allow_cfg.path);
    let deny_site = apache("mysql-slow-deny", &deny_cfg.path);
    let clients = [
        allow_site.client().bind_source("127.0.0.55"),
        deny_site.client().bind_source("127.0.0.56"),
    ];

    // Through the proxy, without delay, the store works.
    for c in &clients {
        let r = get(c, 0);
        assert_eq!(r.status, 200, "{}", r.everything());
        assert!(limited_by_store(&r), "{}", r.everything());
    }

    let cases = [
        ("slow (3 s per packet)", Mode::Forward, 3000, READ_MS),
        // Each packet within the read timeout, but a decision takes many: the whole request
        // is bounded by connect + 2 x read timeout.
        (
            "slow (450 ms per packet)",
            Mode::Forward,
            450,
            CONNECT_MS + 2 * READ_MS,
        ),
        ("refusing", Mode::Refuse, 0, CONNECT_MS),
        ("hanging", Mode::Hang, 0, READ_MS),
    ];
    for (n, (what, mode, delay_ms, timeout_ms)) in cases.into_iter().enumerate() {
        proxy.set_delay(Duration::from_millis(delay_ms));
        proxy.set_mode(mode);
        let bound = Duration::from_millis(timeout_ms + 2000);
        let allow_calls = allow_provider.calls();
        let deny_calls = deny_provider.calls();
        let first = 100 * (n + 1);
        let t = Instant::now();
        let results: Vec<io::Result<(Response, Duration)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let client = &clients[i % 2];
                    s.spawn(move || {
                        let sent = Instant::now();
                        send(client, first + i).map(|r| (r, sent.elapsed()))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("request thread"))
                .collect()
        });
        let wall = t.elapsed();
        let mut latencies = Vec::new();
        for (i, result) in results.into_iter().enumerate() {
            let (r, took) = result.unwrap_or_else(|e| panic!("{what}: request {i}: {e}"));
            latencies.push(took);
            assert!(
                took < bound,
                "{what}: answered after {} ms (bound {} ms)",
                ms(took),
                ms(bound)
            );
            assert!(!limited_by_store(&r), "{what}: {}", r.everything());
            if i % 2 == 0 {
                assert_eq!(r.status, 200, "{what}, allow:\n{}", r.everything());
            } else {
                assert_eq!(r.status, 503, "{what}, deny:\n{}", r.everything());
                assert_eq!(retry_after(&r), DENY_RETRY_AFTER);
            }
        }
        eprintln!(
            "{what}: 8 requests in {} ms; latencies {:?} ms (bound {} ms)",
            ms(wall),
            latencies.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
            ms(bound)
        );
        if mode != Mode::Refuse {
            // The store waited for its read timeout, not less.
            let shortest = latencies.iter().min().copied().unwrap_or_default();
            assert!(
                shortest >= Duration::from_millis(READ_MS * 8 / 10),
                "{what}: answered in {} ms, before the read timeout",
                ms(shortest)
            );
        }
        assert_eq!(allow_provider.calls(), allow_calls + 4, "{what}");
        assert_eq!(deny_provider.calls(), deny_calls, "{what}");
    }

    // Back to normal: the limiter answers again.
    proxy.set_delay(Duration::ZERO);
    proxy.set_mode(Mode::Forward);
    for c in &clients {
        let r = get(c, 900);
        assert_eq!(r.status, 200, "{}", r.everything());
        assert!(limited_by_store(&r), "{}", r.everything());
        assert_eq!(remaining(&r), 998, "{}", r.everything());
    }
    allow_site.settle_log();
    deny_site.settle_log();
    for site in [&allow_site, &deny_site] {
        let log = site.error_log();
        assert_eq!(resolve_lines(&log).len(), 16, "{log}");
        assert!(!log.contains(db.password()), "password in the error_log");
    }
    eprintln!("slow database test: {} ms", ms(began.elapsed()));
}

// ---------------------------------------------------------------------------------------------
// 6: a wrong password

#[test]
fn wrong_password_gets_the_policy_answer_and_a_log_line_that_never_shows_it() {
    let began = Instant::now();
    let db = MariaDb::builder("badpass").start();
    let provider = Provider::start();
    let wrong = "wrong-SECRET-pw-4d2c";
    let mut store = tcp_store(&db, db.port(), "allow");
    store["password"] = wrong.into();
    let cfg = ConfigFile::new(
        "mysql-badpass",
        &site_config(&provider, store, vec![rule("ip", "fixed", 30, 600)]),
    );
    let site = apache("mysql-badpass", &cfg.path);
    let client = site.client().bind_source("127.0.0.60");
    let mut answers = Vec::new();
    for i in 0..3 {
        let r = get(&client, i);
        assert_eq!(r.status, 200, "{}", r.everything());
        assert!(!limited_by_store(&r), "{}", r.everything());
        answers.push(r.everything());
    }
    assert_eq!(provider.calls(), 3);
    site.settle_log();
    let log = site.error_log();
    let lines = resolve_lines(&log);
    assert_eq!(lines.len(), 3, "one line per request:\n{log}");
    for l in &lines {
        assert!(
            l.contains("Access denied") && l.contains("store.password"),
            "the line does not name the problem: {l}"
        );
    }
    eprintln!("log line: {}", lines[0]);

    // The same account given in a URL, failing closed, run directly.
    let url = format!(
        "mysql://{}:{wrong}@127.0.0.1:{}/{}",
        db.user(),
        db.port(),
        db.database()
    );
    let url_cfg = ConfigFile::new(
        "mysql-badpass-url",
        &site_config(
            &provider,
            json!({"kind": "mysql", "url": url, "on_error": "deny",
                   "deny_retry_after_secs": DENY_RETRY_AFTER, "sweep_one_in": 0}),
            vec![rule("ip", "fixed", 30, 600)],
        ),
    );
    let out = cgi(&url_cfg.path, "192.0.2.60", 10);
    let a = out.answer();
    assert_eq!(a.status, 503, "{}", out.describe());
    assert_eq!(a.header("Retry-After"), Some("7"), "{}", out.describe());
    assert!(out.stderr.contains("Access denied"), "{}", out.describe());
    answers.push(out.describe());
    assert_eq!(provider.calls(), 3, "no provider call when failing closed");

    // `resolve check` says so and fails, for both forms.
    for c in [&cfg, &url_cfg] {
        let (code, output) = resolve_command("check", &c.path);
        assert_eq!(code, 1, "{output}");
        assert!(
            output.contains("FAIL store") && output.contains("Access denied"),
            "{output}"
        );
        eprintln!(
            "check: {}",
            output.lines().find(|l| l.contains("FAIL")).unwrap_or("")
        );
        answers.push(output);
    }
    for text in answers.iter().map(String::as_str).chain([log.as_str()]) {
        assert!(!text.contains(wrong), "the password appears in:\n{text}");
        assert!(!text.contains("SECRET"), "part of the password in:\n{text}");
        assert!(!text.contains(TOKEN), "the provider token in:\n{text}");
    }
    eprintln!("wrong password test: {} ms", ms(began.elapsed()));
}

// ---------------------------------------------------------------------------------------------
// 7: table growth and sweeps

#[test]
fn sweep_leaves_only_live_keys() {
    let began = Instant::now();
    let db = MariaDb::builder("sweep").start();
    let provider = Provider::start();
    let mut store = tcp_store(&db, db.port(), "deny");
    store["sweep_grace_secs"] = 0.into();
    let value = site_config(
        &provider,
        store,
        vec![
            rule("short", "fixed", 5, 6),
            rule("slide", "sliding", 5, 6),
            rule("long", "fixed", 100, 600),
        ],
    );
    let cfg = ConfigFile::new("mysql-sweep", &value);

    // 200 clients through the library, as the program does for each request.
    let config = resolve::config::Config::from_json(&value.to_string(), cfg.dir.path())
        .expect("valid configuration");
    let lib_store = resolve::store::open::from_config(&config);
    let old: Vec<String> = (0..200)
        .map(|n| format!("10.7.{}.{}", n / 100, n % 100 + 1))
        .collect();
    let t = Instant::now();
    for ip in &old {
        let checks: Vec<Check<'_>> = config
            .rules
            .iter()
            .map(|rule| Check {
                rule,
                key: rule.key_for(ip),
            })
            .collect();
        let d = lib_store.decide(&checks).expect("store decides");
        assert!(matches!(d, Decision::Admit { .. }), "{ip}: {d:?}");
    }
    eprintln!("200 keys x 3 rules decided in {} ms", ms(t.elapsed()));
    let table_rows =
        |table: &str| number(&db, &format!("SELECT COUNT(*) FROM resolve_test.{table}"));
    assert_eq!(table_rows("rate_counters"), 600);
    assert_eq!(table_rows("rate_events"), 200);

    // Once the short windows are over, 10 more clients through the program itself.
    std::thread::sleep(Duration::from_millis(6500));
    let live: Vec<String> = (1..=10).map(|n| format!("192.0.2.{n}")).collect();
    let live_since = Instant::now();
    for (i, ip) in live.iter().enumerate() {
        let out = cgi(&cfg.path, ip, i);
        assert_eq!(out.answer().status, 200, "{}", out.describe());
        assert!(
            out.answer().header("RateLimit").is_some(),
            "{}",
            out.describe()
        );
    }
    assert_eq!(provider.calls(), 10);
    assert_eq!(table_rows("rate_counters"), 630);
    assert_eq!(table_rows("rate_events"), 210);

    let t = Instant::now();
    let (code, output) = resolve_command("sweep", &cfg.path);
    eprintln!("resolve sweep ({} ms): {}", ms(t.elapsed()), output.trim());
    // The live keys' short windows (6 s) must still run, or the figures below are off.
    assert!(
        live_since.elapsed() < Duration::from_millis(5500),
        "the live requests and the sweep took {} ms: too slow for this test",
        ms(live_since.elapsed())
    );
    assert_eq!(code, 0, "{output}");
    assert!(output.contains("600 removed"), "{output}");

    let expected_counters: BTreeSet<String> =
        old.iter()
            .map(|ip| format!("resolve:long:{ip}"))
            .chain(live.iter().flat_map(|ip| {
                ["short", "slide", "long"].map(|rule| format!("resolve:{rule}:{ip}"))
            }))
            .collect();
    let counters = column(&db, "SELECT rkey FROM resolve_test.rate_counters");
    assert_eq!(counters.len(), 230);
    assert_eq!(counters, expected_counters, "keys left in rate_counters");
    let events = column(&db, "SELECT rkey FROM resolve_test.rate_events");
    let expected_events: BTreeSet<String> = live
        .iter()
        .map(|ip| format!("resolve:slide:{ip}"))
        .collect();
    assert_eq!(events, expected_events, "keys left in rate_events");
    assert_eq!(table_rows("rate_events"), 10);
    let now = "CAST(ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000) AS UNSIGNED)";
    let expired_counters = number(
        &db,
        &format!("SELECT COUNT(*) FROM resolve_test.rate_counters WHERE expires_ms < {now}"),
    );
    let expired_events = number(
        &db,
        &format!("SELECT COUNT(*) FROM resolve_test.rate_events WHERE ts <= {now} - 6000"),
    );
    eprintln!(
        "after the sweep: {} counter rows, {} event rows, {expired_counters} + {expired_events} expired",
        counters.len(),
        events.len()
    );
    assert_eq!(expired_counters, 0, "expired counters left");
    assert_eq!(expired_events, 0, "expired events left");

    // The live keys still count: a second request is the second of its window.
    let out = cgi(&cfg.path, &live[0], 50);
    let a = out.answer();
    assert_eq!(a.status, 200, "{}", out.describe());
    assert!(
        a.header("RateLimit")
            .is_some_and(|h| h.contains("\"long\";r=98")),
        "{}",
        out.describe()
    );
    eprintln!("sweep test: {} ms", ms(began.elapsed()));
}

// ---------------------------------------------------------------------------------------------
// 8: the Unix socket

#[test]
fn over_the_unix_socket_requests_work_and_are_limited() {
    let began = Instant::now();
    let db = MariaDb::builder("socket").start();
    let provider = Provider::start();
    let cfg = ConfigFile::new(
        "mysql-socket",
        &site_config(
            &provider,
            json!({
                "kind": "mysql",
                "socket": db.socket(),
                "user": db.user(),
                "password": db.password(),
                "database": db.database(),
                "connect_timeout_ms": CONNECT_MS,
                "read_timeout_ms": READ_MS,
                "on_error": "deny",
                "sweep_one_in": 0,
            }),
            vec![rule("ip", "fixed", 3, 600)],
        ),
    );
    let site = apache("mysql-socket", &cfg.path);
    let client = site.client().bind_source("127.0.0.80");
    let statuses: Vec<u16> = (0..5).map(|i| get(&client, i).status).collect();
    eprintln!("over the socket, limit 3: {statuses:?}");
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
    assert_eq!(provider.calls(), 3);
    assert_eq!(
        number(
            &db,
            "SELECT count FROM resolve_test.rate_counters WHERE rkey = 'resolve:ip:127.0.0.80'"
        ),
        3
    );

    // The URL form client libraries use for a socket.
    let url_cfg = ConfigFile::new(
        "mysql-socket-url",
        &site_config(
            &provider,
            json!({"kind": "mysql", "url": db.socket_url(), "on_error": "deny", "sweep_one_in": 0}),
            vec![rule("ip", "fixed", 3, 600)],
        ),
    );
    let statuses: Vec<u16> = (0..4)
        .map(|i| cgi(&url_cfg.path, "192.0.2.80", 10 + i).answer().status)
        .collect();
    eprintln!("socket URL, limit 3: {statuses:?}");
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(provider.calls(), 6);
    site.settle_log();
    assert!(
        resolve_lines(&site.error_log()).is_empty(),
        "{}",
        site.error_log()
    );
    eprintln!("socket test: {} ms", ms(began.elapsed()));
}

// ---------------------------------------------------------------------------------------------
// 9: a table made by a PHP limiter

#[test]
fn rows_of_a_php_limiter_count_and_check_accepts_its_table() {
    let began = Instant::now();
    let db = MariaDb::builder("php").start();
    let provider = Provider::start();
    db.root_sql(
        "CREATE TABLE resolve_test.rate_events (id INT AUTO_INCREMENT PRIMARY KEY, rkey VARCHAR(255), ts INT);
         INSERT INTO resolve_test.rate_events (rkey, ts) VALUES
           ('resolve:ip:127.0.0.1', UNIX_TIMESTAMP()),
           ('resolve:ip:127.0.0.1', UNIX_TIMESTAMP()),
           ('resolve:ip:127.0.0.1', UNIX_TIMESTAMP() - 700),
           ('resolve:ip:127.0.0.2', UNIX_TIMESTAMP());",
    );
    let mut store = tcp_store(&db, db.port(), "deny");
    store["events_ts"] = "s".into();
    let cfg = ConfigFile::new(
        "mysql-php",
        &site_config(&provider, store, vec![rule("ip", "sliding", 5, 600)]),
    );
    let (code, output) = resolve_command("check", &cfg.path);
    assert_eq!(code, 0, "{output}");
    assert!(
        output.contains("table rate_events has the columns it needs")
            && output.contains("created table rate_counters"),
        "{output}"
    );
    eprintln!(
        "check: {}",
        output.lines().find(|l| l.contains("store:")).unwrap_or("")
    );

    // Two of the PHP rows are in the window: three requests are left.
    let site = apache("mysql-php", &cfg.path);
    let client = site.client().bind_source("127.0.0.1");
    let before_s = now_ms() / 1000;
    let answers: Vec<Response> = (0..5).map(|i| get(&client, i)).collect();
    let after_s = now_ms() / 1000;
    let statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    eprintln!("with two PHP rows in the window, limit 5: {statuses:?}");
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
    assert_eq!(remaining(&answers[0]), 2, "{}", answers[0].everything());
    let ra = retry_after(&answers[3]);
    assert!(
        (590..=600).contains(&ra),
        "Retry-After {ra}: the PHP rows age out first"
    );
    assert_eq!(provider.calls(), 3);
    // resolve wrote Unix seconds beside the PHP rows, and dropped the expired one.
    let ts: Vec<u64> = db
        .root_sql(
            "SELECT ts FROM resolve_test.rate_events WHERE rkey = 'resolve:ip:127.0.0.1' ORDER BY id",
        )
        .lines()
        .map(|l| l.trim().parse().expect("ts"))
        .collect();
    assert_eq!(ts.len(), 5, "{ts:?}");
    for t in &ts[2..] {
        assert!(
            (before_s..=after_s).contains(t),
            "{t} is not a Unix time in seconds of the requests ({before_s}..={after_s})"
        );
    }
    assert_eq!(
        number(
            &db,
            "SELECT COUNT(*) FROM resolve_test.rate_events WHERE rkey = 'resolve:ip:127.0.0.2'"
        ),
        1
    );

    // A table without `ts` is the wrong shape.
    db.root_sql(
        "CREATE TABLE resolve_test.php_hits (id INT AUTO_INCREMENT PRIMARY KEY, rkey VARCHAR(255), created_at INT)",
    );
    let mut store = tcp_store(&db, db.port(), "deny");
    store["events_ts"] = "s".into();
    store["table"] = "php_hits".into();
    let bad_cfg = ConfigFile::new(
        "mysql-php-bad",
        &site_config(&provider, store, vec![rule("ip", "sliding", 5, 600)]),
    );
    let (code, output) = resolve_command("check", &bad_cfg.path);
    eprintln!(
        "check: {}",
        output.lines().find(|l| l.contains("store:")).unwrap_or("")
    );
    assert_eq!(code, 1, "{output}");
    assert!(
        output.contains("WRONG SHAPE") && output.contains("php_hits lacks ts"),
        "{output}"
    );
    assert!(!output.contains(db.password()), "{output}");

    // A PHP table whose ts is INT cannot hold milliseconds: check says so and how to fix it.
    let mut store = tcp_store(&db, db.port(), "deny");
    store["table"] = "rate_events".into();
    let ms_cfg = ConfigFile::new(
        "mysql-php-ms",
        &site_config(&provider, store, vec![rule("ip", "sliding", 5, 600)]),
    );
    let (code, output) = resolve_command("check", &ms_cfg.path);
    assert_eq!(code, 1, "{output}");
    assert!(
        output.contains("too small for milliseconds") && output.contains("events_ts"),
        "{output}"
    );
    eprintln!("PHP table test: {} ms", ms(began.elapsed()));
}

// ---------------------------------------------------------------------------------------------
// 10: `resolve check` on a fresh database

#[test]
fn check_creates_the_tables_in_a_fresh_database_and_masks_the_password() {
    let began = Instant::now();
    let db = MariaDb::builder("check").start();
    let provider = Provider::start();
    let cfg = ConfigFile::new(
        "mysql-check",
        &site_config(
            &provider,
            tcp_store(&db, db.port(), "allow"),
            vec![rule("ip", "sliding", 30, 60)],
        ),
    );
    let tables = || column(&db, "SHOW TABLES FROM resolve_test");
    assert!(tables().is_empty());
    let (code, output) = resolve_command("check", &cfg.path);
    eprintln!("{output}");
    assert_eq!(code, 0, "{output}");
    assert!(
        output.contains("created table rate_counters")
            && output.contains("created table rate_events")
            && output.contains("created table rate_cache"),
        "{output}"
    );
    assert_eq!(
        tables(),
        BTreeSet::from([
            "rate_cache".to_string(),
            "rate_counters".to_string(),
            "rate_events".to_string()
        ])
    );
    assert_eq!(
        number(
            &db,
            "SELECT (SELECT COUNT(*) FROM resolve_test.rate_counters) + (SELECT COUNT(*) FROM resolve_test.rate_events)"
        ),
        0,
        "check counted something"
    );
    let shown = check_json(&output);
    assert_eq!(shown["store"]["password"], "***", "{shown}");
    assert_eq!(shown["provider"]["token"], "***", "{shown}");
    assert!(!output.contains(db.password()), "{output}");
    assert!(!output.contains(TOKEN), "{output}");

    // Again, with the account in a URL: the tables are there now.
    let url_cfg = ConfigFile::new(
        "mysql-check-url",
        &site_config(
            &provider,
            json!({"kind": "mysql", "url": db.url()}),
            vec![rule("ip", "sliding", 30, 60)],
        ),
    );
    let (code, output) = resolve_command("check", &url_cfg.path);
    assert_eq!(code, 0, "{output}");
    assert!(
        output.contains("table rate_counters has the columns it needs")
            && output.contains("table rate_events has the columns it needs"),
        "{output}"
    );
    let shown = check_json(&output);
    assert_eq!(
        shown["store"]["url"],
        format!("mysql://resolve:***@127.0.0.1:{}/resolve_test", db.port()),
        "{shown}"
    );
    assert!(!output.contains(db.password()), "{output}");
    assert_eq!(provider.calls(), 0);
    eprintln!("check test: {} ms", ms(began.elapsed()));
}
