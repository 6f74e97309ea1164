//! What only the MySQL/MariaDB store does, under a real Apache (mod_cgid) and a real MariaDB: its tables' growth and sweeps, the Unix socket, tables left by PHP limiters, and `resolve check` creating and checking the tables. What every store does (exact limits under load, two web servers sharing one limit, sliding windows, a server killed, slow or refusing the password) is in store_contract.rs.

mod support;

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use resolve::core::decision::Decision;
use resolve::store::Check;
use serde_json::{Value, json};
use support::config::{self, TOKEN};
use support::urlenc::link_param;
use support::{Apache, Cgi, HttpClient, MariaDb, Provider, Request, Response, TempDir, binary};

/// Store timeouts every test configures, in milliseconds.
const CONNECT_MS: u64 = 1000;
const READ_MS: u64 = 1000;
/// `Retry-After` of the 503 a failing store gets with `on_error: deny`.
const DENY_RETRY_AFTER: u64 = 7;

// ---------------------------------------------------------------------------------------------
// Configuration

/// The sweep test's short windows: long enough that its ten live requests and the sweep end
/// well inside them on a busy machine.
const SHORT_SECS: u64 = 12;

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

    /// A site's configuration ([`config::site_config`]): this store, these rules, `provider`.
    fn site(label: &str, store: Value, rules: Vec<Value>, provider: &Provider) -> ConfigFile {
        ConfigFile::new(label, &config::site_config(provider, store, rules))
    }

    /// `resolve check` of this configuration: its exit code and everything it printed, its
    /// store line shown after `label`.
    fn check(&self, label: &str) -> (i32, String) {
        let (code, output) = resolve_command("check", &self.path);
        eprintln!(
            "{label}: {}",
            output.lines().find(|l| l.contains("store:")).unwrap_or("")
        );
        (code, output)
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

/// Once Apache has written its log, no line of it is the program's.
fn assert_no_resolve_lines(site: &Apache) {
    site.settle_log();
    assert!(
        resolve_lines(&site.error_log()).is_empty(),
        "{}",
        site.error_log()
    );
}

/// The start of a test: when it began, MariaDB `label` and the provider stand-in.
fn begin(label: &str) -> (Instant, MariaDb, Provider) {
    let began = Instant::now();
    (began, MariaDb::builder(label).start(), Provider::start())
}

/// Says how long the test `what`, begun at `began`, took.
fn took(what: &str, began: Instant) {
    eprintln!("{what} test: {} ms", ms(began.elapsed()));
}

/// The configuration (read as the program reads it) of the echo provider and the store on
/// `db` over TCP, denying when it fails, with `rules`.
fn echo_config(db: &MariaDb, rules: Value) -> resolve::config::Config {
    let config = json!({
        "provider": {"kind": "echo"},
        "store": tcp_store(db, db.port(), "deny"),
        "rules": rules,
    });
    resolve::config::Config::from_json(&config.to_string(), Path::new("/")).unwrap()
}

/// A 429's Retry-After, within `secs`: the PHP limiter's rows, older, age out first.
fn assert_php_rows_age_out_first(r: &Response, secs: std::ops::RangeInclusive<u64>) {
    let ra = r.retry_after();
    assert!(
        secs.contains(&ra),
        "Retry-After {ra}: the PHP rows age out first"
    );
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
// 1: table growth and sweeps

#[test]
fn sweep_leaves_only_live_keys() {
    let (began, db, provider) = begin("sweep");
    let mut store = tcp_store(&db, db.port(), "deny");
    store["sweep_grace_secs"] = 0.into();
    let value = config::site_config(
        &provider,
        store,
        vec![
            rule("short", "fixed", 5, SHORT_SECS),
            rule("slide", "sliding", 5, SHORT_SECS),
            rule("long", "fixed", 100, 600),
        ],
    );
    let cfg = ConfigFile::new("mysql-sweep", &value);

    // 200 clients through the library, as the program does for each request.
    let config = resolve::config::Config::from_json(&value.to_string(), cfg.dir.path())
        .expect("valid configuration");
    let lib_store =
        resolve::site::open::from_config(&config, &resolve::support::log::Context::default());
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
        let d = lib_store.counters.decide(&checks).expect("store decides");
        assert!(matches!(d, Decision::Admit { .. }), "{ip}: {d:?}");
    }
    eprintln!("200 keys x 3 rules decided in {} ms", ms(t.elapsed()));
    let table_rows =
        |table: &str| number(&db, &format!("SELECT COUNT(*) FROM resolve_test.{table}"));
    assert_eq!(table_rows("rate_counters"), 600);
    assert_eq!(table_rows("rate_events"), 200);

    // Once the short windows are over, 10 more clients through the program itself.
    std::thread::sleep(Duration::from_millis(SHORT_SECS * 1000 + 500));
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
    // The live keys' short windows must still run, or the figures below are off.
    assert!(
        live_since.elapsed() < Duration::from_millis(SHORT_SECS * 1000 - 500),
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
        &format!(
            "SELECT COUNT(*) FROM resolve_test.rate_events WHERE ts <= {now} - {}",
            SHORT_SECS * 1000
        ),
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
    took("sweep", began);
}

// ---------------------------------------------------------------------------------------------
// 2: the Unix socket

#[test]
fn over_the_unix_socket_requests_work_and_are_limited() {
    let (began, db, provider) = begin("socket");
    let cfg = ConfigFile::site(
        "mysql-socket",
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
        &provider,
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
    let url_cfg = ConfigFile::site(
        "mysql-socket-url",
        json!({"kind": "mysql", "url": db.socket_url(), "on_error": "deny", "sweep_one_in": 0}),
        vec![rule("ip", "fixed", 3, 600)],
        &provider,
    );
    let statuses: Vec<u16> = (0..4)
        .map(|i| cgi(&url_cfg.path, "192.0.2.80", 10 + i).answer().status)
        .collect();
    eprintln!("socket URL, limit 3: {statuses:?}");
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(provider.calls(), 6);
    assert_no_resolve_lines(&site);
    took("socket", began);
}

// ---------------------------------------------------------------------------------------------
// 3: a table made by a PHP limiter

#[test]
fn rows_of_a_php_limiter_count_and_check_accepts_its_table() {
    let (began, db, provider) = begin("php");
    db.root_sql(
        "CREATE TABLE resolve_test.rate_events (id INT AUTO_INCREMENT PRIMARY KEY, rkey VARCHAR(255), ts INT);
         INSERT INTO resolve_test.rate_events (rkey, ts) VALUES
           ('resolve:ip:127.0.0.1', UNIX_TIMESTAMP()),
           ('resolve:ip:127.0.0.1', UNIX_TIMESTAMP()),
           ('resolve:ip:127.0.0.1', UNIX_TIMESTAMP() - 700),
           ('resolve:ip:127.0.0.2', UNIX_TIMESTAMP());",
    );
    // The PHP limiter's table, with these settings of the store; a sliding rule of 5 in 10
    // minutes.
    let php_table = |label: &str, settings: Value| {
        let mut store = tcp_store(&db, db.port(), "deny");
        for (name, value) in settings.as_object().expect("settings") {
            store[name] = value.clone();
        }
        ConfigFile::site(label, store, vec![rule("ip", "sliding", 5, 600)], &provider)
    };
    let cfg = php_table("mysql-php", json!({"events_ts": "s"}));
    let (code, output) = cfg.check("check");
    assert_eq!(code, 0, "{output}");
    assert!(
        output.contains("table rate_events has the columns it needs")
            && output.contains("created table rate_counters"),
        "{output}"
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
    // A row stamped second T counts until T + 1 + the window (as the PHP query counts it).
    assert_php_rows_age_out_first(&answers[3], 590..=601);
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
    let bad_cfg = php_table(
        "mysql-php-bad",
        json!({"events_ts": "s", "table": "php_hits"}),
    );
    let (code, output) = bad_cfg.check("check");
    assert_eq!(code, 1, "{output}");
    assert!(
        output.contains("WRONG SHAPE") && output.contains("table php_hits: it lacks ts"),
        "{output}"
    );
    assert!(!output.contains(db.password()), "{output}");

    // A PHP table whose ts is INT cannot hold milliseconds: check says so and how to fix it.
    let ms_cfg = php_table("mysql-php-ms", json!({"table": "rate_events"}));
    let (code, output) = resolve_command("check", &ms_cfg.path);
    assert_eq!(code, 1, "{output}");
    assert!(
        output.contains("too small for milliseconds") && output.contains("events_ts"),
        "{output}"
    );
    took("PHP table", began);
}

// ---------------------------------------------------------------------------------------------
// 3b: the common PHP limiter as site owners have it: a DATETIME table, its own keys

/// The table as the common PHP limiter creates it.
const PHP_TABLE: &str = "CREATE TABLE rate_events (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  rkey VARCHAR(120) NOT NULL,
  ts DATETIME NOT NULL,
  KEY ix_rate (rkey, ts)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";
/// The PHP code's own statements.
const PHP_INSERT: &str = "INSERT INTO rate_events (rkey, ts) VALUES (?, NOW())";
const PHP_COUNT: &str =
    "SELECT COUNT(*) FROM rate_events WHERE rkey = ? AND ts >= DATE_SUB(NOW(), INTERVAL ? SECOND)";
/// A time zone that is not UTC (and not this machine's): a `ts` written or read as UTC
/// instead of the server's time would be five and a half hours off.
const PHP_TIME_ZONE: &str = "+05:30";

/// The PHP side: a connection as the PHP code opens one for a request, and its statements.
struct Php(mysql::Conn);

impl Php {
    fn connect(db: &MariaDb) -> Php {
        let opts = mysql::Opts::from_url(&db.url()).expect("the database URL");
        Php(mysql::Conn::new(opts).unwrap_or_else(|e| panic!("PHP's connection: {e}")))
    }

    fn sql(&mut self, sql: &str) {
        use mysql::prelude::Queryable;
        self.0
            .query_drop(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// `$db->prepare(PHP_INSERT)->execute([$key])`.
    fn insert(&mut self, key: &str) {
        use mysql::prelude::Queryable;
        self.0
            .exec_drop(PHP_INSERT, (key,))
            .unwrap_or_else(|e| panic!("{PHP_INSERT}: {e}"));
    }

    /// `$db->prepare(PHP_COUNT)->execute([$key, $window])`.
    fn count(&mut self, key: &str, window_secs: u64) -> u64 {
        use mysql::prelude::Queryable;
        self.0
            .exec_first(PHP_COUNT, (key, window_secs))
            .unwrap_or_else(|e| panic!("{PHP_COUNT}: {e}"))
            .expect("a count")
    }
}

/// A MariaDB whose time zone is PHP_TIME_ZONE, with the PHP limiter's table in it.
fn php_database(label: &str) -> MariaDb {
    let db = MariaDb::builder(label)
        .max_connections(400)
        .arg(&format!("--default-time-zone={PHP_TIME_ZONE}"))
        .start();
    Php::connect(&db).sql(PHP_TABLE);
    db
}

/// The store section for the PHP limiter's table.
fn php_store(db: &MariaDb) -> Value {
    let mut store = tcp_store(db, db.port(), "deny");
    store["table"] = "rate_events".into();
    store["events_ts"] = "datetime".into();
    store
}

/// A sliding rule per client address that counts the PHP code's keys, `resolve:ADDRESS`.
fn php_rule(name: &str, limit: u64, window_secs: u64) -> Value {
    let mut rule = rule(name, "sliding", limit, window_secs);
    rule["key_template"] = "resolve:{ip}".into();
    rule
}

#[test]
fn a_php_limiters_datetime_rows_and_keys_are_counted_both_ways() {
    let began = Instant::now();
    let db = php_database("php-datetime");
    let provider = Provider::start();
    let mut php = Php::connect(&db);
    let key = "resolve:127.0.0.1";

    // Pointed at the table without the setting, check says which value to set.
    let mut unset = php_store(&db);
    unset.as_object_mut().expect("store").remove("events_ts");
    let unset_cfg = ConfigFile::site(
        "mysql-php-dt-unset",
        unset,
        vec![php_rule("ip", 30, 60)],
        &provider,
    );
    let (code, output) = unset_cfg.check("check without events_ts");
    assert_eq!(code, 1, "{output}");
    assert!(
        output.contains("its ts column is datetime: set store.events_ts to \"datetime\""),
        "{output}"
    );

    let cfg = ConfigFile::site(
        "mysql-php-dt",
        php_store(&db),
        vec![php_rule("ip", 30, 60)],
        &provider,
    );
    let (code, output) = cfg.check("check");
    assert_eq!(code, 0, "{output}");
    assert!(
        output.contains("table rate_events has the columns it needs")
            && output.contains(
                "rule ip: 30 requests per 60 s per client address; stored as resolve:{ip}"
            ),
        "{output}"
    );

    // 20 requests the PHP way, then resolve with a limit of 30: exactly 10 more.
    for _ in 0..20 {
        php.insert(key);
    }
    php.insert("resolve:127.0.0.2");
    php.insert("login:42");
    assert_eq!(php.count(key, 60), 20);
    let site = apache("mysql-php-dt", &cfg.path);
    let client = site.client().bind_source("127.0.0.1");
    let answers: Vec<Response> = (0..15).map(|i| get(&client, i)).collect();
    let statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    eprintln!("20 PHP rows, then resolve with a limit of 30: {statuses:?}");
    assert_eq!(statuses, [&[200; 10][..], &[429; 5]].concat());
    assert_eq!(remaining(&answers[0]), 9, "{}", answers[0].everything());
    assert_php_rows_age_out_first(&answers[10], 55..=61);
    assert_eq!(provider.calls(), 10);

    // The PHP query counts resolve's rows: they hold the server's local time, as NOW() does.
    assert_eq!(php.count(key, 60), 30, "the PHP code's count");
    let resolves = number(
        &db,
        "SELECT COUNT(*) FROM resolve_test.rate_events WHERE id > 22 \
         AND ts BETWEEN NOW() - INTERVAL 60 SECOND AND NOW()",
    );
    assert_eq!(resolves, 10, "resolve's rows in the server's time");
    assert_eq!(php.count("resolve:127.0.0.2", 60), 1);
    assert_eq!(php.count("resolve:ip:127.0.0.1", 60), 0);
    assert_no_resolve_lines(&site);
    took("PHP DATETIME", began);
}

#[test]
fn check_finds_keys_too_long_for_the_php_tables_rkey_and_names_every_problem() {
    // The PHP table's rkey holds 120 characters; this template's keys reach 80 + 43 (the
    // longest IPv6 prefix written out), within resolve's own 191 but not within the table's.
    let db = php_database("php-key-len");
    let provider = Provider::start();
    let text = format!("resolve:{}:", "x".repeat(71));
    let mut long = php_rule("ip", 30, 60);
    long["key_template"] = format!("{text}{{ip}}").into();
    let too_long = "its rkey column holds 120 characters, but rule ip writes keys of up to 123 \
                    (see its key_template): shorten the template, or widen the column: \
                    ALTER TABLE `rate_events` MODIFY rkey VARCHAR(191) NOT NULL";
    let cfg = ConfigFile::site(
        "mysql-php-key-len",
        php_store(&db),
        vec![long.clone()],
        &provider,
    );
    let (code, output) = cfg.check("check");
    assert_eq!(code, 1, "{output}");
    assert!(
        output.contains(&format!("WRONG SHAPE: table rate_events: {too_long}")),
        "{output}"
    );

    // Without events_ts as well: both problems in one run.
    let mut unset = php_store(&db);
    unset.as_object_mut().expect("store").remove("events_ts");
    let both = ConfigFile::site("mysql-php-key-len-ts", unset, vec![long], &provider);
    let (code, output) = both.check("check without events_ts");
    assert_eq!(code, 1, "{output}");
    assert!(
        output.contains(&format!(
            "WRONG SHAPE: table rate_events: its ts column is datetime: set store.events_ts to \
             \"datetime\" (rows written with NOW(), in the server's time zone); and {too_long}"
        )),
        "{output}"
    );

    // The fix it names works.
    db.root_sql("ALTER TABLE resolve_test.rate_events MODIFY rkey VARCHAR(191) NOT NULL");
    let (code, output) = resolve_command("check", &cfg.path);
    assert_eq!(code, 0, "{output}");
    assert!(
        output.contains("table rate_events has the columns it needs"),
        "{output}"
    );
}

#[test]
fn an_api_key_rule_writes_the_keys_hash_or_its_listed_name() {
    // `{api_key}` is never the key itself: a key that no list names is written as `sha256:` and
    // 16 hex digits of its SHA-256; a listed key as its name, which can be the account id the
    // PHP code writes (`'login:' . $accountId`).
    let db = php_database("php-api-key");
    let provider = Provider::start();
    let mut login = rule("login", "sliding", 5, 60);
    login["key"] = "api_key".into();
    login["key_template"] = "login:{api_key}".into();
    let key = "k-7Hq2-a-programs-secret";
    let sha256 = resolve::http::api_key::hash(key);
    let any = ConfigFile::site(
        "mysql-php-key-any",
        php_store(&db),
        vec![login.clone()],
        &provider,
    );
    let mut value = config::site_config(&provider, php_store(&db), vec![login]);
    value["api_keys"] = json!({"keys": [{"name": "42", "sha256": sha256}]});
    let listed = ConfigFile::new("mysql-php-key-listed", &value);
    for (cfg, requests) in [(&any, 2), (&listed, 3)] {
        for i in 0..requests {
            let out = Cgi::new("GET", link_param(&link(i)))
                .config(&cfg.path)
                .var("REMOTE_ADDR", "192.0.2.30")
                .header("X-API-Key", key)
                .run();
            assert_eq!(out.answer().status, 200, "{}", out.describe());
        }
    }
    let rows = column(
        &db,
        "SELECT CONCAT(rkey, ' ', COUNT(*)) FROM resolve_test.rate_events GROUP BY rkey",
    );
    eprintln!("rows per key, written with the key {key:?}: {rows:?}");
    assert_eq!(
        rows,
        BTreeSet::from([
            format!("login:sha256:{} 2", &sha256[..16]),
            "login:42 3".to_owned()
        ])
    );
    let everything = db.root_sql("SELECT rkey FROM resolve_test.rate_events");
    assert!(!everything.contains(key), "{everything}");
    assert_eq!(
        Php::connect(&db).count("login:42", 60),
        3,
        "the PHP code's count"
    );
    assert_eq!(provider.calls(), 5);
}

#[test]
fn resolve_and_php_inserts_at_once_never_let_resolve_past_the_limit() {
    // 300 requests for one address at once, split between resolve (CGI processes under
    // Apache) and the PHP code (count, then insert when under the limit, each on its own
    // connection). Inserts of the PHP code take no lock, so the two sides can together pass the
    // limit as the PHP code alone can; resolve itself never admits once it counts the limit,
    // and its decisions are exact among themselves.
    const LIMIT: u64 = 100;
    const SEED: u64 = 20;
    const EACH: usize = 150;
    let began = Instant::now();
    let db = php_database("php-race");
    let provider = Provider::start();
    let key = "resolve:127.0.0.1";
    let mut php = Php::connect(&db);
    for _ in 0..SEED {
        php.insert(key);
    }
    // Long enough that no request gives up while the others queue on the key's lock.
    let mut store = php_store(&db);
    store["connect_timeout_ms"] = 10_000.into();
    store["read_timeout_ms"] = 20_000.into();
    let cfg = ConfigFile::site(
        "mysql-php-race",
        store,
        vec![php_rule("ip", LIMIT, 600)],
        &provider,
    );
    let site = apache("mysql-php-race", &cfg.path);
    let start = std::sync::Barrier::new(2 * EACH);
    let php_inserted = std::sync::atomic::AtomicU64::new(0);
    let answers: Vec<Response> = std::thread::scope(|s| {
        let php_side: Vec<_> = (0..EACH)
            .map(|_| {
                s.spawn(|| {
                    let mut php = Php::connect(&db);
                    start.wait();
                    if php.count(key, 600) < LIMIT {
                        php.insert(key);
                        php_inserted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                })
            })
            .collect();
        let resolve_side: Vec<_> = (0..EACH)
            .map(|i| {
                let (site, start) = (&site, &start);
                s.spawn(move || {
                    let client = site
                        .client()
                        .bind_source("127.0.0.1")
                        .timeout(Duration::from_secs(60));
                    start.wait();
                    get(&client, 1000 + i)
                })
            })
            .collect();
        for h in php_side {
            h.join().expect("PHP request");
        }
        resolve_side
            .into_iter()
            .map(|h| h.join().expect("resolve request"))
            .collect()
    });
    let php_inserted = php_inserted.into_inner();
    let others: Vec<String> = answers
        .iter()
        .filter(|r| r.status != 200 && r.status != 429)
        .map(Response::everything)
        .collect();
    assert!(others.is_empty(), "answers other than 200/429: {others:#?}");
    // What each admission counted before it: limit - 1 - remaining.
    let mut seen: Vec<u64> = answers
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| LIMIT - 1 - remaining(r))
        .collect();
    seen.sort_unstable();
    let admitted = seen.len() as u64;
    let total = php.count(key, 600);
    eprintln!(
        "{EACH} resolve requests and {EACH} PHP requests at once, limit {LIMIT}, {SEED} rows before: \
         resolve admitted {admitted} (counting {:?}..={:?} rows before each), the PHP code inserted \
         {php_inserted}; {total} rows in the window; {} ms",
        seen.first(),
        seen.last(),
        ms(began.elapsed())
    );
    assert_eq!(provider.calls() as u64, admitted, "paid calls");
    assert_eq!(
        total,
        SEED + php_inserted + admitted,
        "rows lost or doubled"
    );
    assert!(admitted <= LIMIT - SEED, "resolve admitted {admitted}");
    // Each admission saw every row resolve wrote before it and the PHP rows before the burst.
    for (k, s) in seen.iter().enumerate() {
        assert!(
            *s >= SEED + k as u64 && *s < LIMIT,
            "admission {k} of resolve counted {s} rows before it: {seen:?}"
        );
    }
    if admitted < EACH as u64 {
        assert!(
            total >= LIMIT,
            "resolve refused below the limit: {total} rows"
        );
    }
    assert_no_resolve_lines(&site);
}

#[test]
fn sweeping_keeps_php_rows_younger_than_the_longest_window() {
    let db = php_database("php-sweep");
    let provider = Provider::start();
    let mut php = Php::connect(&db);
    // Rows of resolve's keys at these ages (seconds), and of keys that are the PHP code's alone.
    for age in [1, 550, 650, 4000] {
        php.sql(&format!(
            "INSERT INTO rate_events (rkey, ts) VALUES ('resolve:192.0.2.1', NOW() - INTERVAL {age} SECOND)"
        ));
    }
    php.sql(
        "INSERT INTO rate_events (rkey, ts) VALUES ('login:42', NOW() - INTERVAL 4000 SECOND), \
         ('resolve_x:192.0.2.1', NOW() - INTERVAL 4000 SECOND)",
    );
    let mut store = php_store(&db);
    store["sweep_grace_secs"] = 0.into();
    let mut burst = rule("burst", "sliding", 5, 60);
    burst["key_template"] = "resolve:{rule}:{ip}".into();
    // The longest window is a shadow rule's: its rows are kept as long as an enforced rule's.
    let mut watch = rule("watch", "sliding", 100, 700);
    watch["mode"] = "shadow".into();
    let cfg = ConfigFile::site(
        "mysql-php-sweep",
        store,
        vec![php_rule("ip", 30, 600), burst, watch],
        &provider,
    );
    let (code, output) = resolve_command("check", &cfg.path);
    assert_eq!(code, 0, "{output}");
    let note = "rows of rate_events are kept 700 s (the longest sliding window plus \
                store.sweep_grace_secs), then deleted by admissions of their key and by sweeps \
                of keys that start with resolve:, so a PHP limiter's longer window over those \
                keys is shortened to 700 s; rows under keys of rules without a key_template \
                (resolve:RULE:…) are deleted by admissions once out of their rule's window";
    assert!(output.contains(note), "{output}");
    let (code, output) = resolve_command("sweep", &cfg.path);
    eprintln!("resolve sweep: {}", output.trim());
    assert_eq!(code, 0, "{output}");
    let left: BTreeSet<String> = column(
        &db,
        "SELECT CONCAT(rkey, ' ', TIMESTAMPDIFF(SECOND, ts, NOW()) DIV 10 * 10) \
         FROM resolve_test.rate_events",
    );
    eprintln!("left after the sweep: {left:?}");
    assert_eq!(
        left,
        BTreeSet::from(
            [
                "resolve:192.0.2.1 0",
                "resolve:192.0.2.1 550",
                "resolve:192.0.2.1 650",
                "login:42 4000",
                "resolve_x:192.0.2.1 4000",
            ]
            .map(str::to_owned)
        )
    );
}

#[test]
fn datetime_rows_age_out_and_refunds_take_one_back() {
    // The store itself on the PHP table: a short window, so that rows age out in the test.
    let db = php_database("php-age");
    let mut store = php_store(&db);
    store["sweep_grace_secs"] = 0.into();
    let config = json!({
        "provider": {"kind": "echo"},
        "store": store,
        "rules": [php_rule("ip", 2, 2)],
    });
    let config = resolve::config::Config::from_json(&config.to_string(), Path::new("/")).unwrap();
    let store =
        resolve::site::open::from_config(&config, &resolve::support::log::Context::default());
    let rule = &config.rules[0];
    let checks = [Check {
        rule,
        key: rule.key_for("192.0.2.5"),
    }];
    let mut php = Php::connect(&db);
    let first = store.counters.decide(&checks).unwrap();
    let Decision::Admit { at_ms, .. } = store.counters.decide(&checks).unwrap() else {
        panic!("the second request is within the limit");
    };
    assert!(first.is_admit());
    assert_eq!(php.count("resolve:192.0.2.5", 2), 2);
    let third = store.counters.decide(&checks).unwrap();
    let Some(retry_after_secs) = third.retry_after_secs() else {
        panic!("the third request is over the limit");
    };
    // Stamped with whole seconds: the first row counts until the end of its second + 2 s.
    assert!((2..=3).contains(&retry_after_secs), "{retry_after_secs}");
    store.counters.refund(&checks, at_ms).unwrap();
    assert_eq!(
        php.count("resolve:192.0.2.5", 2),
        1,
        "the refund took one row"
    );
    assert!(store.counters.decide(&checks).unwrap().is_admit());
    assert!(!store.counters.decide(&checks).unwrap().is_admit());
    std::thread::sleep(Duration::from_millis(3100));
    assert!(
        store.counters.decide(&checks).unwrap().is_admit(),
        "aged out"
    );
    assert_eq!(
        number(&db, "SELECT COUNT(*) FROM resolve_test.rate_events"),
        1,
        "each admission deletes the key's rows older than the longest window and the grace"
    );
}

#[test]
fn a_short_windows_admission_keeps_the_rows_a_longer_window_on_its_key_counts() {
    // Two sliding rules count one key, `resolve:ADDRESS`, with different windows: `short` (2 s)
    // on one site, `long` (60 s, 3 requests) on another sharing the table, as the PHP code may
    // count it too. An admission of `short` deletes only the key's rows older than its site's
    // longest sliding window plus store.sweep_grace_secs (600 s by default), so `long` still
    // counts its three and refuses.
    let db = php_database("php-prune");
    let open = |rule: Value| {
        let value = json!({"provider": {"kind": "echo"}, "store": php_store(&db), "rules": [rule]});
        let config = resolve::config::Config::from_json(&value.to_string(), Path::new("/"))
            .unwrap_or_else(|e| panic!("{e}"));
        let store =
            resolve::site::open::from_config(&config, &resolve::support::log::Context::default());
        (config, store)
    };
    let (short_config, short_site) = open(php_rule("short", 5, 2));
    let (long_config, long_site) = open(php_rule("long", 3, 60));
    fn check(config: &resolve::config::Config) -> [Check<'_>; 1] {
        let rule = &config.rules[0];
        [Check {
            rule,
            key: rule.key_for("192.0.2.9"),
        }]
    }
    let (short, long) = (check(&short_config), check(&long_config));
    let admitted = |store: &resolve::store::roles::Store, checks: &[Check<'_>]| {
        store
            .counters
            .decide(checks)
            .expect("the store decides")
            .is_admit()
    };
    let firsts: Vec<bool> = (0..4).map(|_| admitted(&long_site, &long)).collect();
    assert_eq!(firsts, [true, true, true, false]);
    // Whole seconds: the three rows are more than 2 s old once 3 s have passed.
    std::thread::sleep(Duration::from_millis(3100));
    assert!(admitted(&short_site, &short), "nothing within 2 s");
    let mut php = Php::connect(&db);
    let counted = php.count("resolve:192.0.2.9", 60);
    let long_admits = admitted(&long_site, &long);
    eprintln!(
        "after an admission of the 2 s rule: the 60 s window counts {counted} rows; the 60 s rule \
         with 3 requests {}",
        if long_admits { "admits" } else { "refuses" }
    );
    assert_eq!(counted, 4, "the 60 s rule's rows were deleted");
    assert!(!long_admits, "the 60 s rule admitted past its limit");
}

// ---------------------------------------------------------------------------------------------
// 4: `resolve check` on a fresh database

#[test]
fn check_creates_the_tables_in_a_fresh_database_and_masks_the_password() {
    let (began, db, provider) = begin("check");
    let cfg = ConfigFile::site(
        "mysql-check",
        tcp_store(&db, db.port(), "allow"),
        vec![rule("ip", "sliding", 30, 60)],
        &provider,
    );
    let tables = || column(&db, "SHOW TABLES FROM resolve_test");
    assert!(tables().is_empty());
    let (code, output) = resolve_command("check", &cfg.path);
    eprintln!("{output}");
    assert_eq!(code, 0, "{output}");
    assert!(
        output.contains("created table rate_counters")
            && output.contains("created table rate_events")
            && output.contains("created table rate_cache")
            && output.contains("created table rate_journal")
            && output.contains("created table rate_notes"),
        "{output}"
    );
    assert_eq!(
        tables(),
        BTreeSet::from([
            "rate_cache".to_string(),
            "rate_counters".to_string(),
            "rate_events".to_string(),
            "rate_journal".to_string(),
            "rate_notes".to_string(),
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
    let url_cfg = ConfigFile::site(
        "mysql-check-url",
        json!({"kind": "mysql", "url": db.url()}),
        vec![rule("ip", "sliding", 30, 60)],
        &provider,
    );
    let (code, output) = resolve_command("check", &url_cfg.path);
    assert_eq!(code, 0, "{output}");
    assert!(
        output.contains("table rate_counters has the columns it needs")
            && output.contains("table rate_events has the columns it needs")
            && output.contains("table rate_journal has the columns it needs")
            && output.contains("table rate_notes has the columns it needs"),
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
    took("check", began);
}

#[test]
fn a_refused_request_leaves_no_row_behind() {
    // A request refused by one rule takes nothing from the others: not even the empty row that
    // locked a key it used for the first time (an audit of the table must find only counters).
    let db = MariaDb::start();
    let config = echo_config(
        &db,
        json!([rule("ip", "fixed", 5, 60), rule("day", "fixed", 1, 86400)]),
    );
    let store =
        resolve::site::open::from_config(&config, &resolve::support::log::Context::default());
    let (ip, day) = (&config.rules[0], &config.rules[1]);
    let check = |rule, key: &str| Check {
        rule,
        key: key.to_owned(),
    };
    let first = store
        .counters
        .decide(&[check(day, "resolve:day:192.0.2.1")])
        .unwrap();
    assert!(first.is_admit());
    let second = store
        .counters
        .decide(&[
            check(ip, "resolve:ip:192.0.2.1"),
            check(day, "resolve:day:192.0.2.1"),
        ])
        .unwrap();
    assert!(
        matches!(second, Decision::Refuse { rule: 1, .. }),
        "{second:?}"
    );
    let table = format!("{}.rate_counters", db.database());
    assert_eq!(
        column(&db, &format!("SELECT rkey FROM {table}")),
        BTreeSet::from(["resolve:day:192.0.2.1".to_owned()]),
        "the refused request's new key left a row"
    );
    assert_eq!(
        number(&db, &format!("SELECT count FROM {table}")),
        1,
        "the refusing rule's count is unchanged"
    );
}

#[test]
fn the_journal_table_is_myisam_and_one_made_innodb_by_hand_works_alike() {
    use resolve::core::journal::{Entry, Event, Figures, hour_of};
    let db = MariaDb::start();
    let store_json = tcp_store(&db, db.port(), "deny");
    let open = |journal_table: &str| {
        let mut store = store_json.clone();
        store["journal_table"] = json!(journal_table);
        let config = json!({
            "provider": {"kind": "echo"},
            "store": store,
            "rules": [rule("ip", "fixed", 5, 60)],
        });
        let config =
            resolve::config::Config::from_json(&config.to_string(), Path::new("/")).unwrap();
        resolve::site::open::from_config(&config, &resolve::support::log::Context::default())
    };
    // An owner's own InnoDB table of the same shape, made before resolve first ran.
    db.root_sql(
        "CREATE TABLE resolve_test.journal_innodb (hour INT UNSIGNED NOT NULL, \
         kind CHAR(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, name VARBINARY(191) NOT NULL, \
         client VARBINARY(191) NOT NULL, n BIGINT UNSIGNED NOT NULL, \
         PRIMARY KEY (hour, kind, name, client)) ENGINE=InnoDB",
    );
    let hour = hour_of(now_ms());
    for (table, engine) in [("rate_journal", "MyISAM"), ("journal_innodb", "InnoDB")] {
        let store = open(table);
        for i in 0..7u64 {
            let events = if i < 3 {
                vec![Event::Request, Event::Admitted]
            } else {
                vec![Event::Request, Event::Refused("ip".into())]
            };
            let entry = Entry::new(u64::from(hour) * 3_600_000 + i, Some("192.0.2.1"), &events);
            store.journal.journal_add(&entry).unwrap();
        }
        let f = Figures::from_rows(
            &store.journal.journal_rows(hour, hour + 1).unwrap(),
            hour,
            hour + 1,
        );
        assert_eq!(
            (f.requests, f.admitted, f.refused["ip"]),
            (7, 3, 4),
            "{table}"
        );
        assert_eq!(
            db.root_sql(&format!(
                "SELECT ENGINE FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = 'resolve_test' AND TABLE_NAME = '{table}'"
            ))
            .trim(),
            engine
        );
        assert_eq!(
            number(
                &db,
                &format!("SELECT COUNT(*) FROM resolve_test.`{table}` WHERE kind = 't'")
            ),
            3,
            "{table}: one row per total of the hour: requests, admitted, refused:ip"
        );
    }
}

#[test]
fn a_connection_that_ends_says_so_and_the_server_counts_no_aborted_client() {
    // Without COM_QUIT, MariaDB counts every CGI request's connection as aborted and writes a
    // warning for it to its error log.
    let db = MariaDb::start();
    let config = echo_config(&db, json!([rule("ip", "fixed", 2, 60)]));
    let aborted = || {
        number(
            &db,
            "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
             WHERE VARIABLE_NAME = 'ABORTED_CLIENTS'",
        )
    };
    let before = aborted();
    for i in 0..5 {
        let store =
            resolve::site::open::from_config(&config, &resolve::support::log::Context::default());
        let check = Check {
            rule: &config.rules[0],
            key: "resolve:ip:192.0.2.9".to_owned(),
        };
        let decision = store.counters.decide(&[check]).unwrap();
        assert_eq!(decision.is_admit(), i < 2, "request {i}: {decision:?}");
    }
    assert_eq!(aborted(), before, "connections counted as aborted");
}

#[test]
fn a_refusal_takes_no_lock_and_answers_while_another_holds_the_keys_row() {
    // Refusals are decided on a plain read: a row locked by another transaction (an admission
    // in progress, an owner's query) does not hold them up. Deciding under the lock would wait
    // for it past the store's lock wait timeout and fail.
    let db = MariaDb::start();
    let config = echo_config(&db, json!([rule("ip", "fixed", 1, 600)]));
    let store =
        resolve::site::open::from_config(&config, &resolve::support::log::Context::default());
    let check = || Check {
        rule: &config.rules[0],
        key: "resolve:ip:192.0.2.5".to_owned(),
    };
    assert!(store.counters.decide(&[check()]).unwrap().is_admit());
    let mut holder = Php::connect(&db);
    holder.sql(&format!(
        "START TRANSACTION; SELECT count FROM {}.rate_counters \
         WHERE rkey = 'resolve:ip:192.0.2.5' FOR UPDATE",
        db.database()
    ));
    let refused = store.counters.decide(&[check()]);
    holder.sql("ROLLBACK");
    assert!(
        matches!(refused, Ok(Decision::Refuse { .. })),
        "{refused:?}"
    );
}
