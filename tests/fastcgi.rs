//! FastCGI mode: the binary started with a listening socket (directly, and by Apache's mod_fcgid) answers exactly as CGI mode does, keeps its store and provider connections between requests, follows configuration edits, survives bad records and exits when told.

mod support;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::apache::FCGID_WARM_POOL;
use support::config::{self, rule};
use support::fcgi::{self, FcgiProcess, FcgiRequest};
use support::urlenc::link_param;
use support::{MariaDb, Mode, Provider, Redis, Request, Response, Setup, Site, TempDir};

fn link(i: usize) -> String {
    format!("https://example.com/file/{i}")
}

fn query(i: usize) -> String {
    link_param(&link(i))
}

/// A configuration file in `dir`: the echo provider, this store, these rules.
fn echo_config(dir: &TempDir, name: &str, store: Value, rules: Vec<Value>) -> PathBuf {
    let cfg = json!({"provider": {"kind": "echo"}, "store": store, "rules": rules});
    config::write_as(dir, name, &cfg)
}

/// `config.json` in `dir`: the echo provider, a file store in `data`, one rule per client
/// address.
fn ip_limit_config(dir: &TempDir, data: &Path, limit: u64, window_secs: u64) -> PathBuf {
    echo_config(
        dir,
        "config.json",
        file_store(data),
        vec![rule("ip", "ip", limit, window_secs)],
    )
}

fn file_store(dir: &Path) -> Value {
    json!({"kind": "file", "dir": dir, "sweep_one_in": 0})
}

/// Numbers that depend on the instant of a request (seconds left in a window, the program's
/// time in `Server-Timing`) replaced by `#`.
fn without_clock(answer: &[u8]) -> String {
    let text = String::from_utf8_lossy(answer);
    let mut out = String::new();
    let mut rest = text.as_ref();
    let markers = [
        "t=",
        "Retry-After: ",
        "try again in ",
        "\"retry_after\":",
        "app;dur=",
    ];
    while let Some((at, marker)) = markers
        .iter()
        .filter_map(|m| rest.find(m).map(|i| (i, *m)))
        .min()
    {
        out.push_str(&rest[..at + marker.len()]);
        rest =
            rest[at + marker.len()..].trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
        out.push('#');
    }
    out.push_str(rest);
    out
}

#[test]
fn every_answer_is_the_cgi_answer_byte_for_byte() {
    let dir = TempDir::new("fcgi-same");
    let rules = vec![rule("ip", "ip", 3, 3600)];
    let cgi_cfg = echo_config(
        &dir,
        "cgi.json",
        file_store(&dir.mkdir("cgi-data")),
        rules.clone(),
    );
    let fcgi_cfg = echo_config(
        &dir,
        "fcgi.json",
        file_store(&dir.mkdir("fcgi-data")),
        rules,
    );
    let process = FcgiProcess::start(&fcgi_cfg);
    let json = "application/json";
    let requests = vec![
        FcgiRequest::new("GET", &query(1)).header("Accept", "text/plain"),
        FcgiRequest::new("GET", &query(2)).header("Accept", json),
        FcgiRequest::new("POST", "")
            .form(&query(3))
            .header("Accept", "text/html"),
        FcgiRequest::new("GET", &query(4)),
        FcgiRequest::new("GET", &query(5)).header("Accept", json),
        FcgiRequest::new("GET", &query(5)).header("Accept", "text/html"),
        FcgiRequest::new("HEAD", &query(6)).var("REMOTE_ADDR", "127.0.0.2"),
        FcgiRequest::new("GET", &query(7))
            .var("REMOTE_ADDR", "2001:db8::1")
            .header("X-API-Key", "some-key"),
        FcgiRequest::new("PUT", &query(8)).header("Accept", json),
        FcgiRequest::new("GET", "link=ftp%3A%2F%2Fx").header("Accept", json),
        FcgiRequest::new("GET", "link=%zz"),
        FcgiRequest::new("GET", ""),
        FcgiRequest::new("POST", "")
            .form(&query(9))
            .var("CONTENT_TYPE", "text/plain"),
        FcgiRequest::new("POST", "")
            .var("CONTENT_TYPE", "application/x-www-form-urlencoded")
            .header("Accept", json),
        FcgiRequest::new("POST", "").form(&format!("{}&pad={}", query(10), "a".repeat(9000))),
        FcgiRequest::new("POST", "")
            .form(&query(11))
            .var("CONTENT_LENGTH", "100"),
        FcgiRequest::new("GET", &query(12)).var("REMOTE_ADDR", "not an address"),
    ];
    let mut statuses = Vec::new();
    for (i, req) in requests.iter().enumerate() {
        let cgi = req.to_cgi().config(&cgi_cfg).run();
        let fcgi = process.send(req);
        assert_eq!(fcgi.protocol_status, fcgi::FCGI_REQUEST_COMPLETE);
        assert_eq!(fcgi.app_status, 0);
        assert!(
            fcgi.stderr.is_empty(),
            "log lines go to the process's stderr"
        );
        assert_eq!(
            without_clock(&fcgi.stdout),
            without_clock(&cgi.stdout),
            "request {i} ({:?}): FastCGI and CGI answers differ",
            req.vars
        );
        statuses.push(fcgi.cgi().status);
    }
    assert_eq!(
        statuses,
        [
            200, 200, 200, 429, 429, 429, 200, 200, 405, 400, 400, 400, 415, 411, 413, 400, 400
        ]
    );
    // The same log lines, in the same order: one per refusal but 429.
    let lines = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with("resolve: "))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(lines(&process.stderr()).len(), 9, "{}", process.stderr());
}

/// 20 requests from one address through one process: the limit applies (5 admitted), the
/// store and the provider were each connected to once, and every admitted request reached the
/// provider once.
fn one_process_keeps_its_connections(store: Value, connections: &dyn Fn() -> u64) {
    let setup = Setup::builder("fcgi-keep")
        .provider(Provider::builder().keep_alive().start())
        .store(store)
        .rules(vec![rule("ip", "ip", 5, 3600)])
        .config(|cfg| cfg["provider"]["timeout_ms"] = json!(5000))
        .write();
    let provider = &setup.provider;
    let process = FcgiProcess::start(&setup.config_path);
    let before = connections();
    let statuses: Vec<u16> = (0..20)
        .map(|i| {
            process
                .send(&FcgiRequest::new("GET", &query(i)).var("REMOTE_ADDR", "192.0.2.7"))
                .cgi()
                .status
        })
        .collect();
    let after = connections();
    let mut expected = vec![200; 5];
    expected.extend([429; 15]);
    assert_eq!(statuses, expected, "{}", process.stderr());
    assert_eq!(
        after - before - 1,
        1,
        "store connections opened for 20 requests"
    );
    assert_eq!(provider.calls(), 5);
    assert_eq!(
        provider.connections(),
        1,
        "provider connections for 5 calls"
    );
    assert!(process.stderr().is_empty(), "{}", process.stderr());
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Redis: cargo test --features servers"
)]
fn one_process_keeps_its_redis_and_provider_connections() {
    let redis = Redis::start();
    one_process_keeps_its_connections(json!({"kind": "redis", "url": redis.url()}), &|| {
        redis.connections_received()
    });
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs MariaDB: cargo test --features servers"
)]
fn one_process_keeps_its_mariadb_and_provider_connections() {
    let db = MariaDb::start();
    one_process_keeps_its_connections(json!({"kind": "mysql", "url": db.url()}), &|| {
        db.connections()
    });
}

/// The store server restarts while the process keeps a connection to it: the process notices
/// by itself, with no restart of its own. The request that finds the kept connection gone is
/// decided on a new one, so not one request gets the `on_error` answer (`deny` here, so that a
/// failure would show as 503) and nothing is logged.
fn a_restarted_store_is_reconnected(store: Value, restart: &mut dyn FnMut()) {
    let dir = TempDir::new("fcgi-restart");
    let mut store = store;
    store["on_error"] = json!("deny");
    let path = echo_config(&dir, "config.json", store, vec![rule("ip", "ip", 3, 3600)]);
    let mut process = FcgiProcess::start(&path);
    let pid = process.pid();
    let ask = |i: usize| status_of(&process, i, "192.0.2.9");
    assert_eq!(ask(0), 200);
    restart();
    // The server lost its counters (no persistence for Redis; MariaDB keeps them): what
    // matters is that requests are decided by the store again, from the first one on.
    let after: Vec<u16> = (1..8).map(ask).collect();
    assert!(
        after.iter().all(|s| [200, 429].contains(s)) && after.contains(&429),
        "not decided by the store right after the restart: {after:?}\n{}",
        process.stderr()
    );
    assert_eq!(process.stderr(), "", "nothing is logged");
    eprintln!("after the restart: {after:?}");
    assert!(process.is_running());
    assert_eq!(process.pid(), pid);
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Redis: cargo test --features servers"
)]
fn a_restarted_redis_is_reconnected_by_the_same_process() {
    let mut redis = Redis::start();
    let store = json!({"kind": "redis", "url": redis.url()});
    a_restarted_store_is_reconnected(store, &mut || redis.restart());
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs MariaDB: cargo test --features servers"
)]
fn a_restarted_mariadb_is_reconnected_by_the_same_process() {
    let mut db = MariaDb::start();
    let store = json!({"kind": "mysql", "url": db.url()});
    a_restarted_store_is_reconnected(store, &mut || db.restart());
}

#[test]
fn management_records_keep_conn_and_refusals_over_the_socket() {
    let dir = TempDir::new("fcgi-protocol");
    let path = ip_limit_config(&dir, &dir.mkdir("data"), 100, 60);
    let process = FcgiProcess::start(&path);
    let mut s = process.connect();
    // FCGI_GET_VALUES: one connection, one request at a time.
    let names: Vec<(&[u8], &[u8])> = vec![
        (b"FCGI_MAX_CONNS", b""),
        (b"FCGI_MAX_REQS", b""),
        (b"FCGI_MPXS_CONNS", b""),
        (b"SOMETHING_ELSE", b""),
    ];
    s.write_all(&fcgi::record(
        fcgi::FCGI_GET_VALUES,
        0,
        &fcgi::pairs(&names),
    ))
    .unwrap();
    let r = fcgi::read_record(&mut s).unwrap().expect("a reply");
    assert_eq!((r.kind, r.id), (fcgi::FCGI_GET_VALUES_RESULT, 0));
    let got = fcgi::parse_pairs(&r.content);
    assert_eq!(
        got,
        [
            (b"FCGI_MAX_CONNS".to_vec(), b"1".to_vec()),
            (b"FCGI_MAX_REQS".to_vec(), b"1".to_vec()),
            (b"FCGI_MPXS_CONNS".to_vec(), b"0".to_vec()),
        ]
    );
    // An unknown management record.
    s.write_all(&fcgi::record(42, 0, b"?")).unwrap();
    let r = fcgi::read_record(&mut s).unwrap().expect("a reply");
    assert_eq!((r.kind, r.content[0]), (fcgi::FCGI_UNKNOWN_TYPE, 42));
    // Another role.
    s.write_all(&fcgi::begin(7, 2, fcgi::FCGI_KEEP_CONN))
        .unwrap();
    assert_eq!(
        fcgi::read_answer(&mut s, 7).unwrap().protocol_status,
        fcgi::FCGI_UNKNOWN_ROLE
    );
    // Two requests on one kept connection, and a second one begun while the first is open.
    let first = FcgiRequest::new("GET", &query(1)).records(3, fcgi::FCGI_KEEP_CONN);
    let (begin, rest) = first.split_at(16);
    s.write_all(begin).unwrap();
    s.write_all(&fcgi::begin(4, 1, fcgi::FCGI_KEEP_CONN))
        .unwrap();
    assert_eq!(
        fcgi::read_answer(&mut s, 4).unwrap().protocol_status,
        fcgi::FCGI_CANT_MPX_CONN
    );
    s.write_all(rest).unwrap();
    let a = fcgi::read_answer(&mut s, 3).unwrap();
    assert_eq!(a.protocol_status, fcgi::FCGI_REQUEST_COMPLETE);
    assert_eq!(a.cgi().text(), format!("{}\n", link(1)));
    s.write_all(&FcgiRequest::new("GET", &query(2)).records(5, fcgi::FCGI_KEEP_CONN))
        .unwrap();
    assert_eq!(
        fcgi::read_answer(&mut s, 5).unwrap().cgi().text(),
        format!("{}\n", link(2))
    );
    // An aborted request is ended without an answer.
    s.write_all(&fcgi::begin(6, 1, 0)).unwrap();
    s.write_all(&fcgi::record(fcgi::FCGI_ABORT_REQUEST, 6, b""))
        .unwrap();
    let a = fcgi::read_answer(&mut s, 6).unwrap();
    assert_eq!(
        (a.stdout.len(), a.protocol_status),
        (0, fcgi::FCGI_REQUEST_COMPLETE)
    );
    // Without FCGI_KEEP_CONN the process closes the connection.
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    assert!(process.stderr().is_empty(), "{}", process.stderr());
}

#[test]
fn malformed_records_close_that_connection_only_with_one_log_line() {
    let dir = TempDir::new("fcgi-malformed");
    let path = ip_limit_config(&dir, &dir.mkdir("data"), 100, 60);
    let mut process = FcgiProcess::start(&path);
    let garbage: Vec<Vec<u8>> = vec![
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        vec![1, 1, 0, 1, 0, 3, 0, 0, 0, 1, 0],
        {
            let mut v = fcgi::begin(1, 1, 0);
            v.extend(fcgi::record(
                fcgi::FCGI_PARAMS,
                1,
                &[0x85, 0, 0, 0, 1, b'x'],
            ));
            v.extend(fcgi::record(fcgi::FCGI_PARAMS, 1, &[]));
            v.extend(fcgi::record(fcgi::FCGI_STDIN, 1, &[]));
            v
        },
    ];
    for (n, bytes) in garbage.iter().enumerate() {
        let mut s = process.connect();
        s.write_all(bytes).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(rest.is_empty(), "case {n}: answered {rest:?}");
        let a = process.send(&FcgiRequest::new("GET", &query(n)));
        assert_eq!(
            a.cgi().status,
            200,
            "case {n}: the next connection is served"
        );
        let lines: Vec<String> = process.stderr().lines().map(str::to_owned).collect();
        assert_eq!(lines.len(), n + 1, "one line per bad connection: {lines:?}");
        assert!(
            lines[n].starts_with("resolve: warn: FastCGI connection closed: "),
            "{lines:?}"
        );
        // The process's own line carries the time, and the configuration once a request has
        // located it (every case after the first).
        let context = lines[n]
            .rsplit_once(" [")
            .map(|(_, c)| c)
            .unwrap_or_default();
        assert!(
            context.starts_with("20") && context.ends_with(']'),
            "{lines:?}"
        );
        assert_eq!(
            context.contains("; configuration "),
            n > 0,
            "case {n}: {lines:?}"
        );
    }
    // A connection closed in the middle of a request.
    let mut s = process.connect();
    s.write_all(&fcgi::begin(1, 1, 0)).unwrap();
    drop(s);
    assert_eq!(
        process
            .send(&FcgiRequest::new("GET", &query(9)))
            .cgi()
            .status,
        200
    );
    assert!(process.is_running());
}

#[test]
fn exits_after_max_requests_and_at_once_on_sigterm() {
    let dir = TempDir::new("fcgi-exit");
    let cfg = json!({
        "provider": {"kind": "echo"},
        "store": file_store(&dir.mkdir("data")),
        "fastcgi": {"max_requests": 3},
    });
    let path = config::write(&dir, &cfg);
    let mut process = FcgiProcess::start(&path);
    for i in 0..3 {
        assert!(process.is_running(), "exited after {i} requests");
        assert_eq!(
            process
                .send(&FcgiRequest::new("GET", &query(i)))
                .cgi()
                .status,
            200
        );
    }
    let status = process
        .wait_exit(Duration::from_secs(10))
        .expect("exited after 3 requests");
    assert!(status.success(), "{status}");
    assert!(process.stderr().is_empty(), "{}", process.stderr());

    // Waiting for a connection, SIGTERM ends it within a tick of its wait, cleanly: what it
    // held is written first (see the journal test below).
    let mut process = FcgiProcess::start(&path);
    assert_eq!(
        process
            .send(&FcgiRequest::new("GET", &query(5)))
            .cgi()
            .status,
        200
    );
    process.signal("TERM");
    let status = process
        .wait_exit(Duration::from_secs(10))
        .expect("ended by SIGTERM");
    assert!(status.success(), "{status}");
    assert!(process.stderr().is_empty(), "{}", process.stderr());
}

/// The status of the `i`th link asked of `process` by `client`.
fn status_of(process: &FcgiProcess, i: usize, client: &str) -> u16 {
    let request = FcgiRequest::new("GET", &query(i)).var("REMOTE_ADDR", client);
    process.send(&request).cgi().status
}

/// Waits up to 10 s for the journal to count `want` (see `counted`); fails with `what` after.
fn journal_reaches(config: &Path, want: (u64, u64, u64), what: &str) {
    let started = std::time::Instant::now();
    while counted(&stats(config)) != want {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{what}: {:?}",
            counted(&stats(config))
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The usage journal's figures, as `resolve stats --json` reads them from the store.
fn stats(config: &Path) -> Value {
    let mut cmd = std::process::Command::new(support::binary());
    cmd.args(["stats", "--json", "--config"])
        .arg(config)
        .env_remove("RESOLVE_CONFIG");
    serde_json::from_slice(&support::system::succeeded(&mut cmd, "resolve stats")).expect("JSON")
}

/// The figures that count requests, admitted and refused.
fn counted(stats: &Value) -> (u64, u64, u64) {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    (
        n(&stats["requests"]),
        n(&stats["admitted"]),
        n(&stats["refused"]["ip"]),
    )
}

#[test]
fn a_process_writes_its_journal_within_seconds_when_idle_and_all_of_it_on_sigterm() {
    let dir = TempDir::new("fcgi-journal");
    let path = echo_config(
        &dir,
        "config.json",
        file_store(&dir.mkdir("data")),
        vec![rule("ip", "ip", 2, 3600)],
    );
    let mut process = FcgiProcess::start(&path);
    let ask = |i: usize| status_of(&process, i, "192.0.2.30");
    let answers: Vec<u16> = (0..6).map(ask).collect();
    assert_eq!(answers, [200, 200, 429, 429, 429, 429]);
    // Idle, the process writes what it holds within about two ticks of its wait.
    journal_reaches(&path, (6, 2, 4), "not written while idle");
    // A burst, then SIGTERM at once: every request of it is in the journal when it exits.
    let answers: Vec<u16> = (6..26).map(ask).collect();
    assert!(answers.iter().all(|s| *s == 429), "{answers:?}");
    process.signal("TERM");
    let status = process
        .wait_exit(Duration::from_secs(10))
        .expect("ended by SIGTERM");
    assert!(status.success(), "{status}");
    assert_eq!(counted(&stats(&path)), (26, 2, 24));
    assert!(process.stderr().is_empty(), "{}", process.stderr());
}

/// An idle process never waits on a Redis server for its journal: what it holds goes to the
/// spool in the data directory. Redis is stopped (SIGSTOP: connections stay open, nothing is
/// answered) after one request; once the process has been idle past its tick, a request still
/// gets the policy's answer within the store's read timeout, not after the idle write's too.
/// The held entry is not lost: `stats` finds it once Redis answers again.
#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Redis: cargo test --features servers"
)]
fn an_idle_process_never_waits_on_a_hung_redis_for_its_journal() {
    // Long enough that a request stuck behind the idle write (about 2 x READ_MS - 300 ms) and
    // one that is not (READ_MS) stand seconds apart: a busy machine moves neither that far.
    const READ_MS: u64 = 4000;
    let redis = Redis::start();
    let dir = TempDir::new("fcgi-idle-hung");
    let path = echo_config(
        &dir,
        "config.json",
        json!({"kind": "redis", "url": redis.url(), "on_error": "deny",
               "connect_timeout_ms": 500, "read_timeout_ms": READ_MS}),
        vec![rule("ip", "ip", 5, 3600)],
    );
    let process = FcgiProcess::start(&path);
    let ask = |i: usize| status_of(&process, i, "192.0.2.31");
    assert_eq!(ask(0), 200);
    let pid = redis.pid().expect("redis runs").to_string();
    let kill = |sig: &str| {
        let ok = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} {pid}");
    };
    kill("-STOP");
    // Past the idle tick (1 s): the process has written what it held by now.
    std::thread::sleep(Duration::from_millis(1300));
    let began = std::time::Instant::now();
    let status = ask(1);
    let took = began.elapsed();
    kill("-CONT");
    assert_eq!(status, 503, "the deny policy's answer");
    assert!(
        took < Duration::from_millis(READ_MS + READ_MS / 2 + 500),
        "answered after {took:?}: the request waited for the idle process's journal write \
         (store.read_timeout_ms is {READ_MS} ms)"
    );
    journal_reaches(&path, (1, 1, 0), "the held entry was lost");
}

#[test]
fn configuration_edits_apply_to_the_next_request_without_a_restart() {
    let dir = TempDir::new("fcgi-reload");
    let data = dir.mkdir("data");
    let other = dir.mkdir("other-data");
    let path = ip_limit_config(&dir, &data, 1, 3600);
    let process = FcgiProcess::start(&path);
    let ask = |i: usize| process.send(&FcgiRequest::new("GET", &query(i))).cgi();
    assert_eq!(ask(0).status, 200);
    assert_eq!(ask(1).status, 429);
    // A higher limit: the same counter, a larger quota.
    ip_limit_config(&dir, &data, 3, 3600);
    assert_eq!(ask(2).status, 200);
    assert_eq!(ask(3).status, 200);
    assert_eq!(ask(4).status, 429);
    // A broken file: the not-configured answer and a log line, as under CGI.
    dir.write("config.json", "{not json");
    let r = ask(5);
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(
        process.stderr().contains("config.json"),
        "{}",
        process.stderr()
    );
    // Fixed, with another data directory.
    ip_limit_config(&dir, &other, 1, 3600);
    assert_eq!(ask(6).status, 200);
    assert_eq!(ask(7).status, 429);
    // RESOLVE_CONFIG sent with the request (Apache's SetEnv) wins over the process's own.
    let second = echo_config(
        &dir,
        "second.json",
        file_store(&dir.mkdir("second-data")),
        vec![rule("ip", "ip", 1, 3600)],
    );
    let with = |i: usize| {
        process
            .send(
                &FcgiRequest::new("GET", &query(i)).var("RESOLVE_CONFIG", second.to_str().unwrap()),
            )
            .cgi()
            .status
    };
    assert_eq!(with(8), 200);
    assert_eq!(with(9), 429);
    assert_eq!(ask(10).status, 429, "back to the first configuration");
}

// ---------------------------------------------------------------------------------------------
// Under Apache's mod_fcgid

/// A site under mod_fcgid without a warm pool, with `extra` configuration and Apache
/// configuration.
fn fcgid_site(label: &str, extra: Value, apache_conf: &'static str) -> Site {
    Site::builder(label)
        .mode(Mode::Fcgid)
        .fcgid_pool(0)
        .config(move |cfg| config::merge(cfg, extra))
        .apache(move |b| b.conf(apache_conf))
        .start()
}

fn get(site: &Site, i: usize) -> Response {
    site.get(&format!("/cgi-bin/resolve?{}", query(i)), "text/plain")
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Apache: cargo test --features servers"
)]
fn under_mod_fcgid_one_process_answers_request_after_request() {
    let site = fcgid_site("fcgid-reuse", json!({}), "");
    let mut seen = BTreeSet::new();
    for i in 0..20 {
        let r = get(&site, i);
        assert_eq!(r.status, 200, "{}", r.everything());
        assert_eq!(r.text(), format!("https://cdn.test/file/{}\n", i + 1));
        seen.extend(site.apache.fastcgi_processes());
    }
    assert_eq!(
        seen.len(),
        1,
        "processes that answered 20 requests in a row: {seen:?}"
    );
    assert_eq!(site.provider.calls(), 20);
    // A form sent in chunks: Apache reads it and passes its length, so it is answered like
    // any form (mod_cgid passes no length, and the program answers 411 there).
    let body = query(100);
    let r = site
        .apache
        .client()
        .send(
            &Request::new("POST", "/cgi-bin/resolve")
                .no_framing()
                .header("Host", "127.0.0.1")
                .header("Connection", "close")
                .header("Content-Type", "application/x-www-form-urlencoded")
                .header("Transfer-Encoding", "chunked")
                .body(format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len())),
        )
        .expect("answer");
    assert_eq!(r.status, 200, "{}", r.everything());
    assert_eq!(r.text(), "https://cdn.test/file/21\n");
}

/// Processes are renewed, by mod_fcgid (FcgidMaxRequestsPerProcess) or by the binary itself
/// (fastcgi.max_requests), and no request is lost on the way, one at a time or four at once.
#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Apache: cargo test --features servers"
)]
fn under_mod_fcgid_processes_are_renewed_without_losing_a_request() {
    // At most 3 requests a process when mod_fcgid counts them. When the process counts them
    // itself, it stops taking connections after its third answer and still answers one that
    // was already waiting (none is lost): mod_fcgid may connect for the next request in between
    // (on a busy machine it often does), so a process answers at most 4 of these requests, sent
    // one at a time.
    for (label, extra, conf, at_most) in [
        (
            "fcgid-renew-apache",
            json!({}),
            "FcgidMaxRequestsPerProcess 3",
            3,
        ),
        (
            "fcgid-renew-self",
            json!({"fastcgi": {"max_requests": 3}}),
            "",
            4,
        ),
    ] {
        let site = fcgid_site(label, extra, conf);
        let mut seen = BTreeSet::new();
        for i in 0..12 {
            let r = get(&site, i);
            assert_eq!(r.status, 200, "{label}: request {i}:\n{}", r.everything());
            seen.extend(site.apache.fastcgi_processes());
        }
        assert!(
            seen.len() >= 12 / at_most,
            "{label}: 12 requests, at most {at_most} per process, yet only {} processes: {seen:?}",
            seen.len()
        );
        let client = site.apache.client();
        let burst = support::fire(24, 4, |i| {
            client.send(&Request::get(&format!(
                "/cgi-bin/resolve?{}",
                query(100 + i)
            )))
        });
        for (i, r) in burst.iter().enumerate() {
            let r = r
                .as_ref()
                .unwrap_or_else(|e| panic!("{label}: burst request {i}: {e}"));
            assert_eq!(
                r.status,
                200,
                "{label}: burst request {i}:\n{}",
                r.everything()
            );
        }
        assert_eq!(site.provider.calls(), 36, "{label}");
        site.apache.settle_log();
        let log = site.apache.error_log();
        assert!(!log.contains("mod_fcgid: error"), "{label}:\n{log}");
    }
}

/// The harness's fcgid mode starts a pool before the test's first request, without a trace in
/// the test's store, provider or log.
#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Apache: cargo test --features servers"
)]
fn the_harness_warms_a_pool_of_fastcgi_processes_unseen() {
    let site = Site::builder("fcgid-pool")
        .mode(Mode::Fcgid)
        .rules(vec![rule("ip", "ip", 2, 60)])
        .start();
    let (apache, provider, data) = (&site.apache, &site.provider, &site.data);
    // mod_fcgid may find a process idle for the last of a round's requests and start no more.
    let pool = apache.fastcgi_processes();
    assert!(
        (FCGID_WARM_POOL / 2..=FCGID_WARM_POOL).contains(&pool.len()),
        "{pool:?}"
    );
    assert_eq!(provider.calls(), 0);
    assert_eq!(std::fs::read_dir(data).map(|d| d.count()).unwrap_or(0), 0);
    let statuses: Vec<u16> = (0..4)
        .map(|i| {
            apache
                .client()
                .send(&Request::get(&format!("/cgi-bin/resolve?{}", query(i))))
                .expect("answer")
                .status
        })
        .collect();
    assert_eq!(
        statuses,
        [200, 200, 429, 429],
        "the test's own limits apply"
    );
    assert_eq!(provider.calls(), 2);
    apache.settle_log();
    assert!(
        !apache.error_log().contains("resolve: "),
        "{}",
        apache.error_log()
    );
}

/// The decision script runs by its SHA-1: the constant the program sends is the one the server
/// computes, the script is loaded by the first decision, and when the server's script cache is
/// emptied (`SCRIPT FLUSH`, as a restart does) the next decision loads it again with no failure.
#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Redis: cargo test --features servers"
)]
fn the_redis_script_runs_by_its_sha1_and_is_reloaded_when_the_server_forgets_it() {
    use resolve::store::redis::{REFUND_SCRIPT, REFUND_SCRIPT_SHA1, SCRIPT, SCRIPT_SHA1};
    let redis = Redis::start();
    let exists = |sha: &str| redis.cmd(&["SCRIPT", "EXISTS", sha]).to_string();
    for (script, sha) in [(SCRIPT, SCRIPT_SHA1), (REFUND_SCRIPT, REFUND_SCRIPT_SHA1)] {
        assert_eq!(
            redis.cmd(&["SCRIPT", "LOAD", script]).as_text().as_deref(),
            Some(sha),
            "the SHA-1 constant does not match the script"
        );
    }
    redis.cmd(&["SCRIPT", "FLUSH"]);
    redis.cmd(&["CONFIG", "RESETSTAT"]);
    let not_loaded = exists(SCRIPT_SHA1);
    // How many times the server ran a command, from INFO commandstats (0 if never).
    let calls = |command: &str| -> u64 {
        let info = redis
            .cmd(&["INFO", "commandstats"])
            .as_text()
            .unwrap_or_default();
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
            .and_then(|rest| rest.split(',').next()?.parse().ok())
            .unwrap_or(0)
    };

    let dir = TempDir::new("fcgi-evalsha");
    let store = json!({"kind": "redis", "url": redis.url(), "on_error": "deny"});
    let path = echo_config(&dir, "config.json", store, vec![rule("ip", "ip", 3, 3600)]);
    let process = FcgiProcess::start(&path);
    let mut ask = |i: usize| {
        process
            .send(&FcgiRequest::new("GET", &query(i)).var("REMOTE_ADDR", "192.0.2.10"))
            .cgi()
            .status
    };
    assert_eq!(ask(0), 200);
    let loaded = exists(SCRIPT_SHA1);
    assert_ne!(loaded, not_loaded, "the first decision loads the script");
    redis.cmd(&["SCRIPT", "FLUSH"]);
    let answers: Vec<u16> = (1..5).map(&mut ask).collect();
    assert_eq!(answers, [200, 200, 429, 429]);
    assert_eq!(exists(SCRIPT_SHA1), loaded);
    // Every decision the store made went by EVALSHA (the last refusal came from the process's
    // memory of the one before); the script text was sent only the two times the server did
    // not know it (at first, and after the flush).
    assert_eq!(calls("evalsha"), 4, "EVALSHA calls");
    assert_eq!(calls("eval"), 2, "EVAL calls");
    assert_eq!(process.stderr(), "", "nothing is logged");
}
