//! What only the Redis store does, under a real Apache (mod_cgid) and a real redis-server: an expiry on every key, a rule changing algorithm (the key changes type), a server that hangs while reached over its socket, passwords of the default user and of ACL users in every form with `resolve check`, and the Unix socket. What every store does (exact limits under load, two web servers sharing one limit, sliding windows, a server killed, slow or refusing the password) is in store_contract.rs.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::apache::assert_a_line_per_request;
use support::client::par_map;
use support::config;
use support::redis::{Resp, Via};
use support::urlenc::{encode, link_param};
use support::{Apache, HttpClient, Provider, Redis, Request, Response, TempDir, binary};

/// Store timeouts every test configures, in milliseconds.
const CONNECT_MS: u64 = 500;
const READ_MS: u64 = 500;
/// `Retry-After` of the 503 a failing store gets with `on_error: deny`.
const DENY_RETRY_AFTER: u64 = 7;
/// What a request may take beyond the store's timeouts: Apache, starting the program, the
/// provider stand-in, a machine busy with the other tests.
const MARGIN: Duration = Duration::from_millis(1000);
/// The hint the binary gives when Redis refuses the credentials.
const CREDENTIALS_HINT: &str = "(check store.password and store.username)";

// ---------------------------------------------------------------------------------------------
// Configuration

fn rule(name: &str, algorithm: &str, limit: u64, window_secs: u64) -> Value {
    json!({"name": name, "key": "ip", "algorithm": algorithm, "limit": limit, "window_secs": window_secs})
}

/// The fields every store section here shares: timeouts and the failure policy.
fn with_policy(mut store: Value, on_error: &str) -> Value {
    store["kind"] = json!("redis");
    store["connect_timeout_ms"] = json!(CONNECT_MS);
    store["read_timeout_ms"] = json!(READ_MS);
    store["on_error"] = json!(on_error);
    store["deny_retry_after_secs"] = json!(DENY_RETRY_AFTER);
    store
}

/// Host and port given as separate fields.
fn tcp_store(port: u16, on_error: &str) -> Value {
    with_policy(json!({"host": "127.0.0.1", "port": port}), on_error)
}

fn url_store(url: &str, on_error: &str) -> Value {
    with_policy(json!({"url": url}), on_error)
}

// ---------------------------------------------------------------------------------------------
// A site: Apache running the binary, its provider stand-in and its configuration file

/// Fields drop in order: Apache stops first.
struct Site {
    apache: Apache,
    provider: Provider,
    config_path: PathBuf,
    dir: TempDir,
}

impl Site {
    fn start(label: &str, store: Value, rules: Vec<Value>) -> Site {
        let provider = Provider::start();
        let dir = TempDir::new(label);
        let config_path = dir.join("config.json");
        write_config(&dir, &config_path, &provider, store, rules);
        let apache = Apache::builder(label)
            .resolve_cgi()
            .set_env("RESOLVE_CONFIG", config_path.to_str().expect("utf-8 path"))
            .start();
        Site {
            apache,
            provider,
            config_path,
            dir,
        }
    }

    /// Replaces the configuration file at once (every request reads it afresh).
    fn configure(&self, store: Value, rules: Vec<Value>) {
        write_config(&self.dir, &self.config_path, &self.provider, store, rules);
    }

    fn client(&self, source: &str) -> HttpClient {
        self.apache
            .client()
            .bind_source(source)
            .timeout(Duration::from_secs(30))
    }

    /// Configures `store` and `rules`, then lets `asks` send requests from a client at `source`:
    /// their answers, the provider calls they made and the program's log lines meanwhile.
    fn exchange(
        &self,
        store: Value,
        rules: Vec<Value>,
        source: &str,
        asks: impl FnOnce(&HttpClient) -> Vec<Timed>,
    ) -> (Vec<Timed>, usize, Vec<String>) {
        self.configure(store, rules);
        let client = self.client(source);
        let mark = self.log_mark();
        let calls_before = self.provider.calls();
        let answers = asks(&client);
        let calls = self.provider.calls() - calls_before;
        (answers, calls, self.lines_since(mark))
    }

    /// Where the error_log ends now, once finished programs' lines are in.
    fn log_mark(&self) -> usize {
        self.apache.settle_log();
        self.apache.error_log().len()
    }

    /// The program's log lines written since `mark`.
    fn lines_since(&self, mark: usize) -> Vec<String> {
        self.apache.settle_log();
        let log = self.apache.error_log();
        program_lines(log.get(mark..).unwrap_or_default())
    }
}

fn write_config(dir: &TempDir, path: &Path, provider: &Provider, store: Value, rules: Vec<Value>) {
    let cfg = config::site_config(provider, store, rules);
    let fresh = dir.write(
        "config.json.new",
        serde_json::to_vec_pretty(&cfg).expect("serialize config"),
    );
    fs::rename(&fresh, path).unwrap_or_else(|e| panic!("rename to {}: {e}", path.display()));
}

/// The error-level lines among `lines`.
fn errors(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.contains("resolve: error: "))
        .cloned()
        .collect()
}

/// Lines the binary wrote (`resolve: LEVEL: ...`), as Apache logged them.
fn program_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| {
            ["resolve: error: ", "resolve: warn: ", "resolve: notice: "]
                .iter()
                .any(|p| l.contains(p))
        })
        .map(str::to_string)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Requests

/// An answer, what the program spent on it (its Server-Timing) and what the client waited.
struct Timed {
    r: Response,
    took: Duration,
    wall: Duration,
}

/// Every request asks for a link of its own, so that no answer can come from anything but a
/// provider call (or the store's refusal).
static NEXT_LINK: AtomicUsize = AtomicUsize::new(1);

fn fresh_target() -> String {
    target(NEXT_LINK.fetch_add(1, Ordering::SeqCst))
}

fn target(i: usize) -> String {
    format!(
        "/cgi-bin/resolve?{}",
        link_param(&format!("https://example.com/file/{i}"))
    )
}

fn ask(client: &HttpClient, accept: &str) -> Timed {
    let target = fresh_target();
    let req = Request::get(&target).header("Accept", accept);
    let began = Instant::now();
    let r = client
        .send(&req)
        .unwrap_or_else(|e| panic!("GET {target} from {:?}: {e}", client.source));
    Timed {
        took: r.program_took(),
        wall: began.elapsed(),
        r,
    }
}

fn statuses(answers: &[Timed]) -> Vec<u16> {
    answers.iter().map(|a| a.r.status).collect()
}

fn count(answers: &[Timed], status: u16) -> usize {
    answers.iter().filter(|a| a.r.status == status).count()
}

/// `min / median / max` of the latencies, for the figures printed.
fn spread(answers: &[Timed]) -> String {
    let mut ms: Vec<u128> = answers.iter().map(|a| a.took.as_millis()).collect();
    ms.sort_unstable();
    match (ms.first(), ms.get(ms.len() / 2), ms.last()) {
        (Some(lo), Some(mid), Some(hi)) => format!("{lo}/{mid}/{hi} ms (min/median/max)"),
        _ => "no requests".to_string(),
    }
}

/// The program spent less than `bound` on every answer (and the client waited less than the
/// backstop).
fn assert_latency(answers: &[Timed], bound: Duration, what: &str) {
    for a in answers {
        assert!(
            a.took < bound && a.wall < support::timing::backstop(bound),
            "{what}: an answer took {:?} in the program ({:?} at the client), over {bound:?}:\n{}",
            a.took,
            a.wall,
            a.r.everything()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Looking into Redis

/// One command on a fresh connection authenticated like `redis.url()`, in database `db`.
fn redis_cmd(redis: &Redis, db: u32, args: &[&str]) -> Resp {
    let mut c = redis
        .connect(Via::Tcp)
        .unwrap_or_else(|e| panic!("connect to redis on port {}: {e}", redis.port()));
    if db != 0 {
        let r = c.cmd(&["SELECT", &db.to_string()]).expect("SELECT");
        assert_eq!(r, Resp::Simple("OK".to_string()), "SELECT {db}");
    }
    c.cmd(args)
        .unwrap_or_else(|e| panic!("redis {args:?} on port {}: {e}", redis.port()))
}

fn int(r: Resp, what: &str) -> i64 {
    match r {
        Resp::Int(n) => n,
        Resp::Bulk(Some(b)) => String::from_utf8_lossy(&b)
            .parse()
            .unwrap_or_else(|_| panic!("{what}: not a number: {:?}", String::from_utf8_lossy(&b))),
        other => panic!("{what}: expected a number, got {other}"),
    }
}

fn strings(r: Resp, what: &str) -> Vec<String> {
    match r {
        Resp::Array(Some(items)) => items
            .iter()
            .map(|i| i.as_text().unwrap_or_else(|| panic!("{what}: element {i}")))
            .collect(),
        other => panic!("{what}: expected an array, got {other}"),
    }
}

/// Every `resolve:` key in database `db`, sorted.
fn keys(redis: &Redis, db: u32) -> Vec<String> {
    let mut k = strings(redis_cmd(redis, db, &["KEYS", "resolve:*"]), "KEYS");
    k.sort();
    k
}

/// How many requests a key holds: the counter of a fixed window (a hash), the entries of a
/// sliding one (a sorted set).
fn counted(redis: &Redis, db: u32, key: &str) -> i64 {
    let kind = redis_cmd(redis, db, &["TYPE", key])
        .as_text()
        .unwrap_or_default();
    match kind.as_str() {
        "hash" => int(redis_cmd(redis, db, &["HGET", key, "c"]), key),
        "zset" => int(redis_cmd(redis, db, &["ZCARD", key]), key),
        "none" => 0,
        other => panic!("{key} is a {other}"),
    }
}

/// The rule a key counts for (`resolve:RULE:...`), if it is one of `windows`.
fn rule_of<'a>(key: &str, windows: &[(&'a str, u64)]) -> Option<(&'a str, u64)> {
    let rule = key.split(':').nth(1)?;
    windows.iter().find(|(name, _)| *name == rule).copied()
}

/// Every `resolve:` key in `db` has a TTL, no longer than its rule's window for the
/// keys of the rules in `windows` (name, seconds). Returns the rules' keys.
fn assert_every_key_expires(redis: &Redis, db: u32, windows: &[(&str, u64)]) -> Vec<String> {
    let mut rule_keys = Vec::new();
    for key in keys(redis, db) {
        let key = key.as_str();
        let pttl = int(redis_cmd(redis, db, &["PTTL", key]), key);
        let Some((_, secs)) = rule_of(key, windows) else {
            // Not a rule's counter (a cached answer, say): it must expire all the same.
            eprintln!("  {key}: PTTL {pttl} ms (no rule's key)");
            assert!(pttl >= 0 || pttl == -2, "{key} has no expiry (PTTL {pttl})");
            continue;
        };
        let window_ms = secs * 1000;
        rule_keys.push(key.to_string());
        if pttl == -2 {
            // Gone between KEYS and PTTL: it expired.
            eprintln!("  {key}: expired a moment ago");
            continue;
        }
        eprintln!("  {key}: PTTL {pttl} ms of a {window_ms} ms window");
        // 0: under a millisecond left; -1 is a key without expiry.
        assert!(
            pttl >= 0,
            "{key} has no expiry (PTTL {pttl}): it would stay forever"
        );
        assert!(
            pttl <= window_ms as i64,
            "{key}: PTTL {pttl} ms is longer than its rule's window ({window_ms} ms)"
        );
    }
    rule_keys
}

// ---------------------------------------------------------------------------------------------
// `resolve check`

fn run_check(config: &Path) -> (Option<i32>, String) {
    let o = Command::new(binary())
        .arg("check")
        .arg("--config")
        .arg(config)
        .env_remove("GATEWAY_INTERFACE")
        .env_remove("RESOLVE_CONFIG")
        .output()
        .expect("run resolve check");
    (
        o.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// The line of `resolve check`'s report (`out`) that starts with `start`; none fails the test
/// (`what` says which).
fn report_line<'a>(out: &'a str, start: &str, what: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("{what}: no line {start:?} in check's report:\n{out}"))
}

/// `check` makes the journal's spool in the data directory and says where it is; a spool that
/// cannot be made is a warning (entries then go to Redis one by one), not a failure; without
/// the journal there is no spool to report.
#[test]
fn check_reports_the_journal_spool() {
    let redis = Redis::start();
    let dir = TempDir::new("redis-check-spool");
    let mut cfg = json!({
        "provider": {"kind": "echo"},
        "store": {"kind": "redis", "url": redis.url()},
        "rules": [{"name": "ip", "key": "ip", "limit": 5, "window_secs": 60}],
    });
    let path = config::write(&dir, &cfg);
    let spool = dir.join("ratelimit").join("journal-spool");
    let (code, out) = run_check(&path);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(&format!("ok   journal spool: {}", spool.display())),
        "{out}"
    );
    assert!(spool.is_dir());
    assert_eq!(
        fs::read_dir(&spool).unwrap().count(),
        0,
        "nothing left there"
    );

    fs::remove_dir(&spool).unwrap();
    fs::write(&spool, "in the way").unwrap();
    let (code, out) = run_check(&path);
    assert_eq!(code, Some(0), "a warning only:\n{out}");
    let line = report_line(&out, "WARN journal spool: ", "the spool");
    assert!(
        line.contains(&spool.display().to_string())
            && line.ends_with("every request sends its usage entry to the store itself"),
        "{line}"
    );

    cfg["journal"] = json!(false);
    let path = config::write(&dir, &cfg);
    let (_, out) = run_check(&path);
    assert!(!out.contains("journal spool"), "{out}");
}

/// The JSON that `check` prints after "effective configuration".
fn effective_config(out: &str) -> Value {
    let head = "effective configuration (secrets masked):\n";
    let start = out
        .find(head)
        .unwrap_or_else(|| panic!("no effective configuration in:\n{out}"))
        + head.len();
    let end = out.rfind('}').expect("a JSON object") + 1;
    serde_json::from_str(&out[start..end])
        .unwrap_or_else(|e| panic!("effective configuration is not JSON ({e}):\n{out}"))
}

// ---------------------------------------------------------------------------------------------
// 1. Every key has an expiry within its rule's window, and goes when it ends

#[test]
fn every_key_written_expires_within_its_rules_window() {
    let redis = Redis::builder("ttl").start();
    let rules = vec![
        rule("minute", "fixed", 4, 60),
        rule("slide", "sliding", 3, 30),
        json!({"name": "site", "key": "global", "algorithm": "fixed", "limit": 1000, "window_secs": 3600}),
        rule("long", "sliding", 50, 7200),
        rule("blink", "fixed", 100, 1),
        rule("blink-s", "sliding", 100, 1),
    ];
    let windows = [
        ("minute", 60),
        ("slide", 30),
        ("site", 3600),
        ("long", 7200),
        ("blink", 1),
        ("blink-s", 1),
    ];
    let site = Site::start("ttl", tcp_store(redis.port(), "deny"), rules);
    let sources: Vec<String> = (0..5).map(|n| format!("127.0.0.{}", 60 + n)).collect();
    let answers = par_map(30, 6, |i| ask(&site.client(&sources[i % 5]), "text/plain"));
    // `slide` (3 per address) refuses first: 3 admitted per address.
    assert_eq!(
        (count(&answers, 200), count(&answers, 429)),
        (15, 15),
        "{:?}",
        statuses(&answers)
    );
    assert_eq!(site.provider.calls(), 15);

    eprintln!("keys after 30 requests from 5 addresses under 6 rules:");
    let all = assert_every_key_expires(&redis, 0, &windows);
    let mut want: Vec<String> = vec!["resolve:site:*".to_string()];
    let mut blink_keys = Vec::new();
    for s in &sources {
        for r in ["minute", "slide", "long"] {
            want.push(format!("resolve:{r}:{s}"));
        }
        for r in ["blink", "blink-s"] {
            blink_keys.push(format!("resolve:{r}:{s}"));
        }
    }
    want.sort();
    // The 1 s windows' keys may already be gone if the run took a while.
    let (blinking, lasting): (Vec<String>, Vec<String>) = all
        .into_iter()
        .partition(|k| k.starts_with("resolve:blink"));
    assert_eq!(lasting, want);
    assert!(
        blinking.iter().all(|k| blink_keys.contains(k)),
        "{blinking:?}"
    );
    eprintln!(
        "{} of the 10 keys of 1 s windows still there",
        blinking.len()
    );
    // A request refused by one rule is counted by none.
    for s in &sources {
        for r in ["minute", "slide", "long"] {
            let key = format!("resolve:{r}:{s}");
            assert_eq!(counted(&redis, 0, &key), 3, "{key}");
        }
    }
    assert_eq!(counted(&redis, 0, "resolve:site:*"), 15);

    // The one-second windows' keys are gone a moment after they end; the others stay.
    std::thread::sleep(Duration::from_millis(1300));
    let left: Vec<String> = keys(&redis, 0)
        .into_iter()
        .filter(|k| rule_of(k, &windows).is_some())
        .collect();
    let blinking: Vec<&String> = left
        .iter()
        .filter(|k| k.starts_with("resolve:blink"))
        .collect();
    assert!(
        blinking.is_empty(),
        "keys of 1 s windows still there: {blinking:?}"
    );
    assert_eq!(left.len(), 1 + 3 * sources.len(), "{left:?}");
}

/// A rule whose algorithm changes keeps the same key name, which then holds the other data
/// type: the key starts afresh instead of failing every decision until it expires.
#[test]
fn a_rule_that_changes_algorithm_keeps_limiting() {
    let redis = Redis::builder("switch").start();
    let site = Site::start(
        "switch",
        tcp_store(redis.port(), "deny"),
        vec![rule("ip", "fixed", 3, 3600)],
    );
    let client = site.client("127.0.0.100");
    let key = "resolve:ip:127.0.0.100";
    for (algorithm, kind) in [("fixed", "hash"), ("sliding", "zset"), ("fixed", "hash")] {
        site.configure(
            tcp_store(redis.port(), "deny"),
            vec![rule("ip", algorithm, 3, 3600)],
        );
        let answers: Vec<Timed> = (0..4).map(|_| ask(&client, "text/plain")).collect();
        eprintln!("rule ip now {algorithm}: {:?}", statuses(&answers));
        assert_eq!(statuses(&answers), [200, 200, 200, 429], "{algorithm}");
        assert_eq!(
            redis_cmd(&redis, 0, &["TYPE", key]).as_text().as_deref(),
            Some(kind)
        );
        assert_eq!(counted(&redis, 0, key), 3, "{algorithm}");
    }
    assert_eq!(site.provider.calls(), 9);
    assert!(site.lines_since(0).is_empty(), "{:#?}", site.lines_since(0));
    assert_every_key_expires(&redis, 0, &[("ip", 3600)]);
}

// ---------------------------------------------------------------------------------------------
// 2. A Redis that hangs, reached over its socket

/// Sends SIGCONT to a stopped process when dropped, even when the test fails.
struct StoppedProcess(u32);

impl StoppedProcess {
    fn stop(pid: u32) -> StoppedProcess {
        signal("STOP", pid);
        StoppedProcess(pid)
    }
}

impl Drop for StoppedProcess {
    fn drop(&mut self) {
        signal("CONT", self.0);
    }
}

fn signal(name: &str, pid: u32) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name} {pid}");
}

/// A Redis that stops answering (SIGSTOP) while reached over its Unix socket: each request
/// still gets the policy answer within the timeouts, also once the connections waiting to be
/// accepted have filled the socket's listen queue (8 here, `tcp-backlog` 511 by default).
#[test]
fn hung_redis_over_the_socket_is_answered_within_the_timeout_by_policy() {
    let redis = Redis::builder("hung-socket")
        .arg("--tcp-backlog")
        .arg("8")
        .start();
    let sock = redis.socket().display().to_string();
    let site = Site::start(
        "hung-socket",
        with_policy(json!({"socket": sock}), "deny"),
        vec![rule("ip", "fixed", 100, 3600)],
    );
    let client = site.client("127.0.0.110");
    assert_eq!(ask(&client, "text/plain").r.status, 200);

    // The bound is on what the program spent (its Server-Timing); the client waits up to the
    // backstop, which a request without a time limit never meets while Redis stays stopped.
    let bound = Duration::from_millis(CONNECT_MS + READ_MS) + MARGIN;
    let patient = client.clone().timeout(support::timing::backstop(bound));
    let pid = redis.pid().expect("redis runs");
    let stopped = StoppedProcess::stop(pid);
    let results = par_map(16, 8, |_| {
        let began = Instant::now();
        let r = patient.send(&Request::get(&fresh_target()).header("Accept", "application/json"));
        (began.elapsed(), r)
    });
    drop(stopped);
    let mut late = Vec::new();
    let mut spent = Vec::new();
    for (wall, r) in &results {
        match r {
            Ok(r) if r.program_took() < bound => {
                assert_eq!(r.status, 503, "{}", r.everything());
                assert_eq!(r.retry_after(), DENY_RETRY_AFTER);
                spent.push((r.program_took().as_millis(), wall.as_millis()));
            }
            Ok(r) => late.push(format!(
                "{} after {:?} in the program ({wall:?} at the client)",
                r.status,
                r.program_took()
            )),
            Err(e) => late.push(format!("no answer after {wall:?} ({e})")),
        }
    }
    spent.sort_unstable();
    eprintln!(
        "Redis stopped, reached over its socket: {} of 16 answered within {bound:?} of program \
         time (program ms, client ms: {spent:?}); late: {late:?}",
        16 - late.len()
    );
    assert!(
        late.is_empty(),
        "requests not answered within store.connect_timeout_ms + read_timeout_ms + margin \
         ({bound:?}) while Redis hung: {late:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Passwords and ACL users

const PW_DEFAULT: &str = "rq-P@ss:w0rd%REDISPW1";
const PW_ACL: &str = "acl-P@ss/w0rd:REDISPW2";
const PW_ACL_DEFAULT: &str = "default-REDISPW3";
const PW_WRONG: &str = "wrong-P@ss:REDISPW4";
/// In every password above (and in its percent-encoded form): must never be shown.
const MARKER: &str = "REDISPW";

#[test]
fn passwords_and_acl_users_work_and_are_never_shown() {
    // `a`: the default user has a password; `b`: an ACL user (the default user has another
    // password, so the ACL user's is needed).
    let a = Redis::builder("requirepass").password(PW_DEFAULT).start();
    let b = Redis::builder("acl")
        .password(PW_ACL_DEFAULT)
        .acl_user("resolve", PW_ACL)
        .start();
    assert!(a.url().contains(&encode(PW_DEFAULT)));
    assert!(b.url().starts_with("redis://resolve:"));
    let rules = vec![rule("ip", "fixed", 3, 3600)];
    let site = Site::start("auth", url_store(&a.url(), "deny"), rules.clone());
    let mut everything: Vec<String> = Vec::new();

    let sock = |r: &Redis| r.socket().display().to_string();
    let good: Vec<(&str, &Redis, Option<&str>, Value)> = vec![
        ("password in the URL", &a, None, url_store(&a.url(), "deny")),
        (
            "password field",
            &a,
            None,
            with_policy(
                json!({"host": "127.0.0.1", "port": a.port(), "password": PW_DEFAULT}),
                "deny",
            ),
        ),
        (
            "password in a unix:// URL",
            &a,
            None,
            url_store(&a.unix_url(), "deny"),
        ),
        (
            "ACL user in the URL",
            &b,
            Some("resolve"),
            url_store(&b.url(), "deny"),
        ),
        (
            "ACL user and password fields",
            &b,
            Some("resolve"),
            with_policy(
                json!({"host": "127.0.0.1", "port": b.port(), "user": "resolve", "password": PW_ACL}),
                "deny",
            ),
        ),
        (
            "ACL user over the socket field",
            &b,
            Some("resolve"),
            with_policy(
                json!({"socket": sock(&b), "user": "resolve", "password": PW_ACL}),
                "deny",
            ),
        ),
    ];
    for (k, (what, redis, user, store)) in good.into_iter().enumerate() {
        let source = format!("127.0.0.{}", 70 + k);
        let (answers, calls, lines) = site.exchange(store, rules.clone(), &source, |client| {
            (0..5).map(|_| ask(client, "text/plain")).collect()
        });
        eprintln!("{what}: {:?}, {calls} provider calls", statuses(&answers));
        assert_eq!(statuses(&answers), [200, 200, 200, 429, 429], "{what}");
        assert_eq!(calls, 3, "{what}");
        assert!(lines.is_empty(), "{what}: {lines:#?}");
        let key = format!("resolve:ip:{source}");
        assert_eq!(counted(redis, 0, &key), 3, "{what}: {key}");
        everything.extend(answers.iter().map(|t| t.r.everything()));

        let (code, out) = run_check(&site.config_path);
        assert_eq!(code, Some(0), "{what}: check:\n{out}");
        assert!(
            out.contains("ok   store: redis store at ") && out.trim_end().ends_with("OK"),
            "{what}: check:\n{out}"
        );
        let store = &effective_config(&out)["store"];
        assert_eq!(store["kind"], "redis", "{what}: {store}");
        assert_eq!(store["password"], "***", "{what}: {store}");
        assert_eq!(store["user"].as_str(), user, "{what}: {store}");
        everything.push(out);
    }

    // Wrong credentials: every request gets the policy answer and a line saying so.
    // A wrong password for the default user, in a field or in the URL, is in
    // store_contract.rs with every other store that has credentials.
    let bad: Vec<(&str, &str, &str, Value)> = vec![
        ("no password", "deny", "NOAUTH", tcp_store(a.port(), "deny")),
        (
            "ACL user with a wrong password in the URL",
            "deny",
            "WRONGPASS",
            url_store(
                &format!(
                    "redis://resolve:{}@127.0.0.1:{}/0",
                    encode(PW_WRONG),
                    b.port()
                ),
                "deny",
            ),
        ),
        (
            "unknown user with the ACL user's password",
            "allow",
            "WRONGPASS",
            with_policy(
                json!({"host": "127.0.0.1", "port": b.port(), "user": "nobody", "password": PW_ACL}),
                "allow",
            ),
        ),
        (
            "the ACL user's password for the default user, over the socket",
            "allow",
            "WRONGPASS",
            with_policy(json!({"socket": sock(&b), "password": PW_ACL}), "allow"),
        ),
    ];
    for (k, (what, policy, error, store)) in bad.into_iter().enumerate() {
        let source = format!("127.0.0.{}", 80 + k);
        let (answers, calls, all_lines) = site.exchange(store, rules.clone(), &source, |client| {
            par_map(4, 4, |_| ask(client, "application/json"))
        });
        let lines = errors(&all_lines);
        eprintln!(
            "{what} (on_error {policy}): {:?}, {calls} provider calls, {} error lines ({} in all); \
             latency {}",
            statuses(&answers),
            lines.len(),
            all_lines.len(),
            spread(&answers)
        );
        assert_latency(
            &answers,
            Duration::from_millis(CONNECT_MS + READ_MS) + MARGIN,
            what,
        );
        if policy == "allow" {
            assert_eq!(statuses(&answers), [200; 4], "{what}");
            assert_eq!(calls, 4, "{what}");
        } else {
            assert_eq!(statuses(&answers), [503; 4], "{what}");
            assert_eq!(calls, 0, "{what}");
            for t in &answers {
                assert_eq!(t.r.retry_after(), DENY_RETRY_AFTER, "{what}");
            }
        }
        assert_a_line_per_request(&lines, 4, what, |l| {
            l.contains(error) && l.contains(CREDENTIALS_HINT)
        });
        for r in [&a, &b] {
            assert_eq!(counted(r, 0, &format!("resolve:ip:{source}")), 0, "{what}");
        }
        everything.extend(answers.iter().map(|t| t.r.everything()));

        let (code, out) = run_check(&site.config_path);
        assert_eq!(code, Some(1), "{what}: check:\n{out}");
        let fail = report_line(&out, "FAIL store: ", what);
        assert!(
            fail.contains(error) && fail.contains(CREDENTIALS_HINT),
            "{what}: {fail}"
        );
        eprintln!("  check: {fail}");
        everything.push(out);
    }

    // No password, right or wrong, raw or percent-encoded, anywhere.
    let log = site.apache.error_log();
    assert!(!log.contains(MARKER), "a password in the error_log:\n{log}");
    for text in &everything {
        assert!(!text.contains(MARKER), "a password in:\n{text}");
    }
}

// ---------------------------------------------------------------------------------------------
// 4. The Unix socket

#[test]
fn unix_socket_by_url_and_by_field_works_and_limits() {
    const LIMIT: usize = 10;
    let redis = Redis::builder("socket").start();
    let sock = redis.socket().display().to_string();
    let site = Site::start(
        "socket",
        url_store(&format!("unix://{sock}?db=3"), "deny"),
        vec![rule("ip", "fixed", LIMIT as u64, 3600)],
    );
    let cases = [
        (
            "unix:// URL, database 3",
            url_store(&format!("unix://{sock}?db=3"), "deny"),
            rule("ip", "fixed", LIMIT as u64, 3600),
            3,
        ),
        (
            "socket field, database 5",
            with_policy(json!({"socket": sock, "db": 5}), "deny"),
            rule("slide", "sliding", LIMIT as u64, 3600),
            5,
        ),
    ];
    for (k, (what, store, r, db)) in cases.into_iter().enumerate() {
        let name = r["name"].as_str().expect("name").to_string();
        site.configure(store, vec![r]);
        let source = format!("127.0.0.{}", 90 + k);
        let client = site.client(&source);
        let before = site.provider.calls();
        let answers = par_map(40, 8, |_| ask(&client, "text/plain"));
        let calls = site.provider.calls() - before;
        eprintln!(
            "{what}: {calls} provider calls, {} x 200, {} x 429; latency {}",
            count(&answers, 200),
            count(&answers, 429),
            spread(&answers)
        );
        assert_eq!(
            (count(&answers, 200), count(&answers, 429)),
            (LIMIT, 40 - LIMIT),
            "{what}: {:?}",
            statuses(&answers)
        );
        assert_eq!(calls, LIMIT, "{what}");
        let written = assert_every_key_expires(&redis, db, &[(name.as_str(), 3600)]);
        assert_eq!(written, [format!("resolve:{name}:{source}")], "{what}");
        assert_eq!(counted(&redis, db, &written[0]), LIMIT as i64, "{what}");
        assert_eq!(
            keys(&redis, 0),
            Vec::<String>::new(),
            "{what}: keys in database 0"
        );

        let (code, out) = run_check(&site.config_path);
        assert_eq!(code, Some(0), "{what}: check:\n{out}");
        assert!(
            out.contains(&format!("ok   store: redis store at socket {sock}"))
                && out.contains(&format!("database {db})")),
            "{what}: check:\n{out}"
        );
        assert_eq!(effective_config(&out)["store"]["socket"], sock.as_str());
    }
    assert!(site.lines_since(0).is_empty(), "{:#?}", site.lines_since(0));
}
