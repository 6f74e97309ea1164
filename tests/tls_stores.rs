//! The stores over TLS, shared by three web servers: a real redis-server speaking only TLS on
//! its port (`rediss://`), a real Redis Cluster of six nodes whose ports, cluster bus and
//! replication speak only TLS (three of them given as seeds), and a real MariaDB with
//! `require_secure_transport=ON`, each with a test CA made here (`store.ca_file`). On each, 300
//! requests, 32 at a time, spread over three Apache instances (mod_cgid, or mod_fcgid in
//! run-all's second round) with a limit of 30 admit exactly 30, counted by the provider
//! stand-in, the Redis one through an ACL user; a CA that did not sign the server's
//! certificate, or a certificate for another name, is refused, with `on_error` applied and
//! logged; a plain client of a server that requires TLS is told what to set; and
//! `resolve check` says what it found (TLS version, cipher, server version) or why a CA file
//! cannot serve.
//!
//! Each exactness test prints the 429 path's requests per second through the three web
//! servers; `RESOLVE_TEST_PROGRAM=PATH` runs that build (the static release one, say) instead
//! of the test build, for the figures of docs/scaling.md.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::client::fire;
use support::config::{self, rule};
use support::mariadb::{DATABASE, USER};
use support::redis_cluster::RedisCluster;
use support::tls::TestCa;
use support::{Apache, MariaDb, Provider, Redis, Request, Response, TempDir, binary};

/// The web servers that share one store.
const WEB_SERVERS: usize = 3;
/// The exactness test: this many requests, this many at a time, this limit.
const REQUESTS: usize = 300;
const AT_ONCE: usize = 32;
const LIMIT: u64 = 30;
/// Refused requests timed after the burst, for the 429 path's requests per second.
const TIMED_REFUSALS: usize = 600;

/// Three web servers, each with a configuration and a data directory of its own (as three
/// hosts have), one provider stand-in and one store. Fields drop in order: Apache first.
struct Farm {
    web: Vec<Apache>,
    configs: Vec<PathBuf>,
    provider: Provider,
    _dir: TempDir,
}

impl Farm {
    fn start(label: &str, store: Value) -> Farm {
        let provider = Provider::start();
        let dir = TempDir::new(label);
        let mut configs = Vec::new();
        let mut web = Vec::new();
        for i in 0..WEB_SERVERS {
            // resolve-data beside each configuration: the server account must make it.
            dir.server_dir(&format!("web{i}"));
            let path = config::write_as(
                &dir,
                &format!("web{i}/config.json"),
                &site(&provider, &store),
            );
            let builder = match std::env::var_os("RESOLVE_TEST_PROGRAM") {
                Some(program) => Apache::builder(&format!("{label}-{i}"))
                    .resolve_program("resolve", Path::new(&program)),
                None => Apache::builder(&format!("{label}-{i}")).resolve_cgi(),
            };
            web.push(
                builder
                    .set_env("RESOLVE_CONFIG", path.to_str().expect("utf-8 path"))
                    .start(),
            );
            configs.push(path);
        }
        Farm {
            web,
            configs,
            provider,
            _dir: dir,
        }
    }

    /// `n` requests from this machine's address, `AT_ONCE` at a time, request `i` to web
    /// server `i % 3`, each for a link of its own.
    fn burst(&self, first: usize, n: usize) -> Vec<Response> {
        let clients: Vec<_> = self
            .web
            .iter()
            .map(|a| a.client().timeout(Duration::from_secs(60)))
            .collect();
        fire(n, AT_ONCE, |i| {
            let i = first + i;
            clients[i % WEB_SERVERS].send(
                &Request::get(&format!(
                    "/cgi-bin/resolve?link=https%3A%2F%2Ffiles.test%2F{i}"
                ))
                .header("Accept", "text/plain"),
            )
        })
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.unwrap_or_else(|e| panic!("request {i}: {e}")))
        .collect()
    }

    /// 300 requests, 32 at a time, over the three web servers: exactly 30 admitted, each one
    /// paid call; then the 429 path timed. Returns its requests per second.
    fn exactly_the_limit(&self, what: &str) -> f64 {
        let began = Instant::now();
        let answers = self.burst(0, REQUESTS);
        let took = began.elapsed();
        let count = |status| answers.iter().filter(|r| r.status == status).count();
        let odd: Vec<String> = answers
            .iter()
            .filter(|r| r.status != 200 && r.status != 429)
            .map(Response::everything)
            .collect();
        assert!(
            odd.is_empty(),
            "{what}: answers other than 200 and 429: {odd:#?}"
        );
        assert_eq!(count(200), LIMIT as usize, "{what}: admitted");
        assert_eq!(count(429), REQUESTS - LIMIT as usize, "{what}: refused");
        assert_eq!(self.provider.calls(), LIMIT as usize, "{what}: paid calls");
        // Every web server took part in admitting and refusing.
        for w in 0..WEB_SERVERS {
            let mine = answers.iter().skip(w).step_by(WEB_SERVERS);
            assert!(
                mine.clone().any(|r| r.status == 429),
                "{what}: web server {w} refused none"
            );
        }
        eprintln!("{what}: {REQUESTS} requests over {WEB_SERVERS} web servers in {took:?}");
        let began = Instant::now();
        let refused = self.burst(REQUESTS, TIMED_REFUSALS);
        let took = began.elapsed();
        assert!(
            refused.iter().all(|r| r.status == 429),
            "{what}: a refusal admitted"
        );
        assert_eq!(
            self.provider.calls(),
            LIMIT as usize,
            "{what}: paid calls after"
        );
        let rate = TIMED_REFUSALS as f64 / took.as_secs_f64();
        let mut spent: Vec<Duration> = refused.iter().map(Response::program_took).collect();
        spent.sort();
        eprintln!(
            "{what}: the 429 path, {TIMED_REFUSALS} requests {AT_ONCE} at a time over \
             {WEB_SERVERS} web servers: {rate:.0} requests/s; the program's own time (its \
             Server-Timing) median {:?}, 90th percentile {:?}",
            spent[spent.len() / 2],
            spent[spent.len() * 9 / 10]
        );
        rate
    }
}

/// The configuration every web server gets: the stand-in, `store`, a limit of 30 a minute
/// per address.
fn site(provider: &Provider, store: &Value) -> Value {
    config::site_config(provider, store.clone(), vec![rule("ip", "ip", LIMIT, 60)])
}

fn redis_store(redis: &Redis, ca: &Path, on_error: &str) -> Value {
    json!({"kind": "redis", "url": redis.url(), "ca_file": ca, "on_error": on_error,
           "connect_timeout_ms": 2000, "read_timeout_ms": 2000})
}

fn mysql_store(db: &MariaDb, ca: Option<&Path>, on_error: &str) -> Value {
    let mut store = json!({"kind": "mysql", "host": "localhost", "port": db.port(),
           "user": USER, "password": db.password(), "database": DATABASE,
           "on_error": on_error, "connect_timeout_ms": 2000, "read_timeout_ms": 2000});
    if let Some(ca) = ca {
        store["ca_file"] = json!(ca);
    }
    store
}

/// `resolve check` on `config`: its exit code and everything it printed.
fn check(config: &Path) -> (Option<i32>, String) {
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

/// The line of check's report that starts with `start`.
fn line<'a>(out: &'a str, start: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line {start:?} in check's report:\n{out}"))
}

/// One request through `web` with `on_error` in force while the store cannot be reached
/// over TLS: its status, the program's log lines meanwhile.
fn refused_by_tls(web: &Apache, link: usize) -> (Response, Vec<String>) {
    web.settle_log();
    let mark = web.error_log().len();
    let r = web
        .client()
        .timeout(Duration::from_secs(30))
        .send(
            &Request::get(&format!(
                "/cgi-bin/resolve?link=https%3A%2F%2Ffiles.test%2Fx{link}"
            ))
            .header("Accept", "text/plain"),
        )
        .expect("an answer");
    web.settle_log();
    let log = web.error_log();
    let lines = log
        .get(mark..)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("resolve: "))
        .map(str::to_owned)
        .collect();
    (r, lines)
}

/// `lines` hold one that says `words`.
fn logged(lines: &[String], words: &str) -> bool {
    lines.iter().any(|l| l.contains(words))
}

#[test]
fn redis_over_tls_shared_by_three_web_servers_admits_exactly_the_limit() {
    let ca = TestCa::new("redis");
    let redis = Redis::builder("tls")
        .tls(&ca)
        .acl_user("site", "acl-pw-5e6f")
        .start();
    assert!(
        redis
            .url()
            .starts_with("rediss://site:acl-pw-5e6f@localhost:")
    );
    let farm = Farm::start("redis-tls", redis_store(&redis, &ca.ca(), "deny"));
    let (code, out) = check(&farm.configs[0]);
    assert_eq!(code, Some(0), "{out}");
    let store = line(&out, "ok   store:");
    assert!(store.contains("rediss://localhost:"), "{store}");
    assert!(
        store.contains("server 7.") || store.contains("server 8."),
        "{store}"
    );
    assert!(store.contains("TLSv1.3, TLS13_"), "{store}");
    assert!(
        line(&out, "ok   store.ca_file:").contains("1 certificate"),
        "{out}"
    );
    farm.exactly_the_limit("redis over TLS");
    // The counters are in this Redis (read over its plain Unix socket).
    let keys = redis.cmd(&["KEYS", "*ip*"]);
    assert!(
        matches!(&keys, support::redis::Resp::Array(Some(k)) if !k.is_empty()),
        "no counter in the Redis the web servers share: {keys}"
    );
}

/// A Redis Cluster over TLS: every node's port, bus and replication speak TLS only; the store
/// is given three of the six as seeds with `ca_file`, and must follow the slots' redirects to
/// the other masters over TLS too, checking each node's certificate.
#[test]
fn redis_cluster_over_tls_shared_by_three_web_servers_admits_exactly_the_limit() {
    let ca = TestCa::new("redis-cluster");
    let password = "cluster-tls-pw-3c9d";
    let cluster = RedisCluster::start_tls("tls", password, &ca);
    let store = json!({"kind": "redis", "password": password,
        "cluster_nodes": cluster.seeds()[..3], "ca_file": ca.ca(), "on_error": "deny",
        "connect_timeout_ms": 2000, "read_timeout_ms": 2000});
    let farm = Farm::start("redis-cluster-tls", store);
    let (code, out) = check(&farm.configs[0]);
    assert_eq!(code, Some(0), "{out}");
    let line = line(&out, "ok   store:");
    assert!(line.contains("TLSv1.3, TLS13_"), "{line}");
    farm.exactly_the_limit("redis cluster over TLS");
    // The counters are spread over the cluster's masters, not all on the seeds' slots; the
    // requests' keys were each a client's (one address), so at least its counter is there.
    let keys = cluster.keys(&[]);
    assert!(
        keys.iter().any(|(_, k)| k.contains("ip")),
        "no counter in the cluster the web servers share: {keys:?}"
    );
    // Only TLS reached the client ports: a plain connection to a seed gets no Redis reply (a
    // RESP reply starts with `+` or `-`; a TLS server closes, or sends an alert record).
    let plain =
        std::net::TcpStream::connect(("127.0.0.1", cluster.ports()[0])).and_then(|mut c| {
            use std::io::{Read, Write};
            c.set_read_timeout(Some(Duration::from_secs(2)))?;
            c.write_all(b"PING\r\n")?;
            let mut buf = [0u8; 16];
            let n = c.read(&mut buf)?;
            Ok(buf[..n].to_vec())
        });
    assert!(
        !matches!(&plain, Ok(bytes) if bytes.first().is_some_and(|b| *b == b'+' || *b == b'-')),
        "a seed answered a plain PING: {plain:?}"
    );
}

#[test]
fn mariadb_requiring_tls_shared_by_three_web_servers_admits_exactly_the_limit() {
    let ca = TestCa::new("mariadb");
    let db = MariaDb::builder("tls").tls(&ca).start();
    assert_eq!(
        db.root_sql("SELECT @@require_secure_transport").trim(),
        "1",
        "the server requires TLS"
    );
    let farm = Farm::start("mariadb-tls", mysql_store(&db, Some(&ca.ca()), "deny"));
    let (code, out) = check(&farm.configs[0]);
    assert_eq!(code, Some(0), "{out}");
    let store = line(&out, "ok   store:");
    assert!(store.contains("MariaDB"), "{store}");
    assert!(store.contains(", TLSv1."), "{store}");
    farm.exactly_the_limit("mariadb over TLS");
}

#[test]
fn a_ca_that_did_not_sign_the_certificate_is_refused_by_policy_and_logged() {
    let ca = TestCa::new("right");
    let wrong = TestCa::new("wrong");
    let redis = Redis::builder("tls-wrong-ca").tls(&ca).start();
    let db = MariaDb::builder("tls-wrong-ca").tls(&ca).start();
    let provider = Provider::start();
    let dir = TempDir::new("wrong-ca");
    dir.server_dir("web");
    let path = config::write_as(
        &dir,
        "web/config.json",
        &site(&provider, &redis_store(&redis, &wrong.ca(), "deny")),
    );
    let web = Apache::builder("wrong-ca")
        .resolve_cgi()
        .set_env("RESOLVE_CONFIG", path.to_str().expect("utf-8 path"))
        .start();
    let not_trusted = "not signed by a CA resolve trusts";
    let stores = [
        (
            "redis",
            redis_store(&redis, &wrong.ca(), "deny"),
            redis_store(&redis, &wrong.ca(), "allow"),
        ),
        (
            "mysql",
            mysql_store(&db, Some(&wrong.ca()), "deny"),
            mysql_store(&db, Some(&wrong.ca()), "allow"),
        ),
    ];
    for (n, (what, deny, allow)) in stores.into_iter().enumerate() {
        config::write_as(&dir, "web/config.json", &site(&provider, &deny));
        let (code, out) = check(&path);
        assert_eq!(code, Some(1), "{what}: {out}");
        let failed = line(&out, "FAIL store:");
        assert!(
            failed.contains(not_trusted) && failed.contains("set store.ca_file"),
            "{what}: {failed}"
        );
        // deny: a 503, logged with the reason.
        let (r, lines) = refused_by_tls(&web, 2 * n);
        assert_eq!(r.status, 503, "{what}: {}", r.everything());
        assert!(logged(&lines, not_trusted), "{what}: {lines:#?}");
        // allow: answered anyway, logged all the same.
        config::write_as(&dir, "web/config.json", &site(&provider, &allow));
        let calls = provider.calls();
        let (r, lines) = refused_by_tls(&web, 2 * n + 1);
        assert_eq!(r.status, 200, "{what}: {}", r.everything());
        assert_eq!(provider.calls(), calls + 1, "{what}: allowed through");
        assert!(logged(&lines, not_trusted), "{what}: {lines:#?}");
    }
    // A certificate signed by the CA configured but for another name.
    let elsewhere = TestCa::for_names("elsewhere", "DNS:elsewhere.test");
    let other = Redis::builder("tls-other-name").tls(&elsewhere).start();
    for on_error in ["deny", "allow"] {
        config::write_as(
            &dir,
            "web/config.json",
            &site(&provider, &redis_store(&other, &elsewhere.ca(), on_error)),
        );
        let (r, lines) = refused_by_tls(&web, 20 + usize::from(on_error == "allow"));
        assert_eq!(
            r.status,
            if on_error == "deny" { 503 } else { 200 },
            "{}",
            r.everything()
        );
        assert!(
            logged(&lines, "the server's certificate is not for the host name"),
            "{lines:#?}"
        );
    }
    // A plain client of a server that requires TLS is told what to set.
    config::write_as(
        &dir,
        "web/config.json",
        &site(&provider, &mysql_store(&db, None, "deny")),
    );
    let (code, out) = check(&path);
    assert_eq!(code, Some(1), "{out}");
    let failed = line(&out, "FAIL store:");
    assert!(
        failed.contains("accepts only TLS") && failed.contains("set store.tls to true"),
        "{failed}"
    );
    let (r, lines) = refused_by_tls(&web, 10);
    assert_eq!(r.status, 503, "{}", r.everything());
    assert!(logged(&lines, "set store.tls to true"), "{lines:#?}");
}

#[test]
fn check_says_how_to_fix_a_ca_file_that_cannot_serve() {
    let ca = TestCa::new("files");
    let redis = Redis::builder("tls-files").tls(&ca).start();
    let provider = Provider::start();
    let dir = TempDir::new("ca-files");
    let not_pem = dir.write("not.pem", "this is not a certificate\n");
    let key = ca.key();
    for (file, says) in [
        (dir.join("missing.pem"), "there is no such file"),
        (not_pem, "no certificate in it"),
        (key, "no certificate in it"),
    ] {
        let path = config::write(&dir, &site(&provider, &redis_store(&redis, &file, "deny")));
        let (code, out) = check(&path);
        assert_eq!(code, Some(1), "{out}");
        let failed = line(&out, "FAIL store.ca_file:");
        assert!(failed.contains(says), "{failed}");
        assert!(
            failed.contains("store.ca_file to the CA bundle") || failed.contains("PEM"),
            "{failed}"
        );
    }
}
