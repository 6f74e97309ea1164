//! The harness itself: real MariaDB and Redis servers on loopback and the delay proxy start, authenticate, die, come back, slow down and refuse as the store tests need; the provider stand-in answers, counts and records as the other tests rely on.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::time::{Duration, Instant};

use serde_json::json;
use support::delay_proxy::Mode;
use support::redis::{Resp, RespConn};
use support::{DelayProxy, HttpClient, MariaDb, Provider, Redis, Reply, Request, mariadb, redis};

fn ok(text: &str) -> Resp {
    Resp::Simple(text.to_string())
}

fn bulk(text: &str) -> Resp {
    Resp::Bulk(Some(text.as_bytes().to_vec()))
}

fn error_text(r: Resp) -> String {
    match r {
        Resp::Error(e) => e,
        other => panic!("expected an error reply, got {other}"),
    }
}

#[test]
fn mariadb_account_answers_over_tcp_and_socket_with_its_password_only() {
    use mariadb::Via;
    let db = MariaDb::builder("auth").max_connections(37).start();

    assert_eq!(
        db.url(),
        format!(
            "mysql://resolve:{}@127.0.0.1:{}/resolve_test",
            db.password(),
            db.port()
        )
    );
    assert!(db.socket().exists(), "{}", db.socket().display());
    assert_eq!(db.root_sql("SELECT @@max_connections").trim(), "37");
    assert_eq!(
        db.root_sql("SELECT @@character_set_server, @@bind_address")
            .trim(),
        "utf8mb4\t127.0.0.1"
    );

    // The account, with its password, over both transports.
    assert_eq!(db.user_sql(Via::Tcp, "SELECT 1").unwrap().trim(), "1");
    assert_eq!(db.user_sql(Via::Socket, "SELECT 1").unwrap().trim(), "1");
    assert_eq!(
        db.user_sql(Via::Tcp, "SELECT CURRENT_USER(), DATABASE()")
            .unwrap()
            .trim(),
        "resolve@127.0.0.1\tresolve_test"
    );
    assert_eq!(
        db.user_sql(Via::Socket, "SELECT CURRENT_USER()")
            .unwrap()
            .trim(),
        "resolve@localhost"
    );

    // Real authentication: wrong or missing password, or root from TCP, is refused.
    for via in [Via::Tcp, Via::Socket] {
        for bad in ["wrong", ""] {
            let e = db
                .sql_as(via, "resolve", bad, "SELECT 1")
                .expect_err("a wrong password must be refused");
            assert!(e.contains("Access denied"), "{via:?} {bad:?}: {e}");
        }
    }
    let e = db
        .sql_as(Via::Tcp, "root", "", "SELECT 1")
        .expect_err("root without password over TCP");
    assert!(e.contains("Access denied"), "{e}");

    // Granted on its database only.
    let e = db
        .user_sql(Via::Tcp, "SELECT COUNT(*) FROM mysql.user")
        .expect_err("no access to the mysql schema");
    assert!(e.contains("denied"), "{e}");
    db.user_sql(
        Via::Tcp,
        "CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (7); DROP TABLE t",
    )
    .unwrap();

    // Through the delay proxy: every packet waits, so the handshake and query take longer.
    let proxy = DelayProxy::start(db.addr());
    proxy.set_delay(Duration::from_millis(100));
    let began = Instant::now();
    assert_eq!(
        db.user_sql(Via::TcpPort(proxy.port()), "SELECT 1")
            .unwrap()
            .trim(),
        "1"
    );
    let took = began.elapsed();
    // Greeting, login, OK, query, result: at least five delayed chunks.
    assert!(took >= Duration::from_millis(500), "took {took:?}");
    proxy.set_mode(Mode::Refuse);
    let e = db
        .user_sql(Via::TcpPort(proxy.port()), "SELECT 1")
        .expect_err("the proxy refuses");
    assert!(e.contains("Can't connect"), "{e}");
}

#[test]
fn mariadb_innodb_rows_survive_kill_and_restart() {
    use mariadb::Via;
    let password = "p@ss:w/rd%?'\"\\";
    let mut db = MariaDb::builder("crash").password(password).start();
    assert!(
        db.url()
            .starts_with("mysql://resolve:p%40ss%3Aw%2Frd%25%3F%27%22%5C@127.0.0.1:"),
        "{}",
        db.url()
    );
    assert!(
        db.socket_url().contains("?socket=%2F"),
        "{}",
        db.socket_url()
    );

    db.user_sql(
        Via::Tcp,
        "CREATE TABLE counters (k VARCHAR(64) PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB;
         INSERT INTO counters VALUES ('a', 1), ('b', 2);
         UPDATE counters SET n = n + 40 WHERE k = 'a'",
    )
    .unwrap();
    assert_eq!(
        db.root_sql(
            "SELECT ENGINE FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = 'resolve_test' AND TABLE_NAME = 'counters'"
        )
        .trim(),
        "InnoDB"
    );

    let pid = db.pid();
    db.kill();
    assert!(!db.is_running());
    assert!(TcpStream::connect(db.addr()).is_err(), "port still open");
    assert!(db.user_sql(Via::Socket, "SELECT 1").is_err());

    db.restart();
    assert_ne!(db.pid(), pid);
    assert!(
        db.error_log().contains("crash recovery"),
        "no crash recovery after SIGKILL:\n{}",
        db.error_log()
    );
    let rows = "a\t41\nb\t2\n";
    assert_eq!(
        db.user_sql(Via::Tcp, "SELECT k, n FROM counters ORDER BY k")
            .unwrap(),
        rows
    );
    assert_eq!(
        db.user_sql(Via::Socket, "SELECT k, n FROM counters ORDER BY k")
            .unwrap(),
        rows
    );

    // A clean stop and start keep them too.
    db.stop();
    assert!(!db.is_running());
    db.restart();
    assert_eq!(
        db.user_sql(Via::Tcp, "SELECT k, n FROM counters ORDER BY k")
            .unwrap(),
        rows
    );
}

#[test]
fn redis_set_get_over_tcp_and_socket_then_kill_and_restart() {
    use redis::Via;
    let mut r = Redis::start();
    assert_eq!(r.url(), format!("redis://127.0.0.1:{}/0", r.port()));
    assert_eq!(
        r.unix_url(),
        format!("unix://{}?db=0", r.socket().display())
    );
    assert_eq!(r.password(), None);

    let meta = std::fs::metadata(r.socket()).expect("socket exists");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);

    assert_eq!(r.cmd(&["SET", "k", "v"]), ok("OK"));
    assert_eq!(r.cmd_via(Via::Socket, &["GET", "k"]), bulk("v"));
    assert_eq!(r.cmd(&["INCR", "n"]), Resp::Int(1));
    assert_eq!(
        r.cmd_via(Via::Socket, &["INCR", "n"]).to_string(),
        "(integer) 2"
    );
    assert_eq!(r.cmd(&["GET", "missing"]), Resp::Bulk(None));
    assert_eq!(
        r.cmd(&["CONFIG", "GET", "save"]),
        Resp::Array(Some(vec![bulk("save"), bulk("")]))
    );

    let port = r.port();
    r.kill();
    assert!(!r.is_running());
    assert!(r.connect(Via::Tcp).is_err(), "TCP still answers");
    assert!(r.connect(Via::Socket).is_err(), "socket still answers");

    r.restart();
    assert_eq!(r.port(), port);
    // No persistence: the keys went with the process.
    assert_eq!(r.cmd(&["GET", "k"]), Resp::Bulk(None));
    assert_eq!(r.cmd_via(Via::Socket, &["PING"]), ok("PONG"));
    assert_eq!(r.cmd(&["SET", "k", "again"]), ok("OK"));
    assert_eq!(
        r.cmd_via(Via::Socket, &["GET", "k"]).as_text().unwrap(),
        "again"
    );
}

#[test]
fn redis_requires_its_password_and_acl_user() {
    use redis::Via;
    let r = Redis::builder("auth")
        .password("s3cret pw:/@")
        .acl_user("resolve", "u-pass")
        .start();
    assert_eq!(
        r.url(),
        format!("redis://resolve:u-pass@127.0.0.1:{}/0", r.port())
    );
    assert_eq!(
        r.unix_url(),
        format!("unix://resolve:u-pass@{}?db=0", r.socket().display())
    );

    for via in [Via::Tcp, Via::Socket] {
        let mut c = r.connect_anonymous(via).unwrap();
        let e = error_text(c.cmd(&["GET", "k"]).unwrap());
        assert!(e.starts_with("NOAUTH"), "{e}");
        let e = error_text(c.cmd(&["AUTH", "nope"]).unwrap());
        assert!(e.starts_with("WRONGPASS"), "{e}");
        let e = error_text(c.cmd(&["AUTH", "resolve", "nope"]).unwrap());
        assert!(e.starts_with("WRONGPASS"), "{e}");
        assert_eq!(c.cmd(&["AUTH", "s3cret pw:/@"]).unwrap(), ok("OK"));
        assert_eq!(c.cmd(&["ACL", "WHOAMI"]).unwrap(), bulk("default"));
        assert_eq!(c.cmd(&["AUTH", "resolve", "u-pass"]).unwrap(), ok("OK"));
        assert_eq!(c.cmd(&["ACL", "WHOAMI"]).unwrap(), bulk("resolve"));
    }
    assert_eq!(r.cmd(&["SET", "k", "v"]), ok("OK"));
    assert_eq!(r.cmd_via(Via::Socket, &["GET", "k"]), bulk("v"));

    // Password only: the URL carries it for the default user.
    let r = Redis::builder("pw").password("pw with space").start();
    assert_eq!(
        r.url(),
        format!("redis://:pw%20with%20space@127.0.0.1:{}/0", r.port())
    );
    assert_eq!(r.cmd(&["PING"]), ok("PONG"));
    let e = error_text(
        r.connect_anonymous(Via::Tcp)
            .unwrap()
            .cmd(&["PING"])
            .unwrap(),
    );
    assert!(e.starts_with("NOAUTH"), "{e}");
}

#[test]
fn delay_proxy_delays_refuses_closes_and_hangs() {
    let r = Redis::start();
    let proxy = DelayProxy::start(r.addr());
    assert_ne!(proxy.port(), r.port());

    let ping = |c: &mut RespConn| c.cmd(&["PING"]).map(|reply| reply == ok("PONG"));
    let timed_ping = || {
        let mut c = RespConn::tcp(proxy.addr()).expect("connect through the proxy");
        let began = Instant::now();
        assert!(ping(&mut c).unwrap());
        began.elapsed()
    };

    let fast = timed_ping();
    assert!(fast < Duration::from_millis(500), "no delay yet: {fast:?}");

    proxy.set_delay(Duration::from_millis(150));
    let slow = timed_ping();
    assert!(
        slow >= Duration::from_millis(300),
        "both ways delayed: {slow:?}"
    );

    proxy.set_delays(Duration::ZERO, Duration::from_millis(200));
    let slow = timed_ping();
    assert!(
        slow >= Duration::from_millis(200),
        "answers delayed: {slow:?}"
    );
    proxy.set_delay(Duration::ZERO);

    // An open connection keeps working whatever happens to new ones.
    let mut open = RespConn::tcp(proxy.addr()).unwrap();
    assert!(ping(&mut open).unwrap());

    proxy.set_mode(Mode::Refuse);
    let e = TcpStream::connect(proxy.addr()).expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    assert!(ping(&mut open).unwrap());

    proxy.set_mode(Mode::Close);
    let mut closed = TcpStream::connect(proxy.addr()).expect("accepted, then closed");
    closed
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = closed.write_all(b"*1\r\n$4\r\nPING\r\n");
    let mut buf = [0u8; 16];
    match closed.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        other => panic!("expected end of file or reset, got {other:?}"),
    }

    proxy.set_mode(Mode::Hang);
    let mut hung = TcpStream::connect(proxy.addr()).expect("accepted, then nothing");
    hung.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    hung.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let e = hung.read(&mut buf).expect_err("no answer");
    assert!(
        matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{e:?}"
    );
    // The open one and the hung one (the pings' connections end a moment after they close).
    let until = Instant::now() + Duration::from_secs(10);
    while proxy.open_connections() != 2 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(proxy.open_connections(), 2);

    proxy.cut_connections();
    assert_eq!(proxy.open_connections(), 0);
    assert!(ping(&mut open).is_err(), "cut connection still answers");
    let mut buf = [0u8; 16];
    hung.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(matches!(hung.read(&mut buf), Ok(0) | Err(_)));

    proxy.set_mode(Mode::Forward);
    assert!(timed_ping() < Duration::from_millis(500));
    // fast, slow, slow, open, closed, hung, last.
    assert_eq!(proxy.accepted(), 7);
}

#[test]
fn provider_stand_in_answers_as_told_and_counts_what_it_got() {
    // One reply for all, numbered; a queue before it; a route with its own script and default.
    let p = Provider::start();
    let client = HttpClient::new(p.addr()).timeout(Duration::from_secs(5));
    let post = |path: &str, body: &str| {
        client
            .send(&Request::post_form(path, body.to_owned()).header("Authorization", "Bearer t"))
            .expect("an answer")
    };
    let r = post("/unrestrict", "link=https%3A%2F%2Fa.example%2F1");
    assert_eq!(r.status, 200, "{}", r.everything());
    assert_eq!(r.json()["download"], "https://cdn.test/file/1");
    p.queue([Reply::raw(503, "text/plain", "busy").header("Retry-After", "2")]);
    let r = post("/unrestrict", "link=x");
    assert_eq!((r.status, r.header("Retry-After")), (503, Some("2")));
    assert_eq!(r.text(), "busy");
    p.script("POST", "/api/a", [Reply::ok(json!({"n": 1}))]);
    p.route("GET", "/api/b", Reply::json(404, json!({"error": "gone"})));
    assert_eq!(post("/api/a", "").json(), json!({"n": 1}));
    assert_eq!(post("/api/a", "").json()["error"], "script_used_up");
    assert_eq!(client.get("/api/b").expect("an answer").status, 404);
    assert_eq!(
        post("/unrestrict", "").json()["download"],
        "https://cdn.test/file/6"
    );
    // A reply made from the request.
    p.set_reply(Reply::with(|call| {
        Reply::ok(json!({"echo": call.param("link").unwrap_or_default()}))
    }));
    assert_eq!(post("/unrestrict", "link=abc").json()["echo"], "abc");
    // What it counted and recorded.
    assert_eq!((p.calls(), p.calls_to("POST", "/api/a")), (7, 2));
    assert_eq!(
        p.connections(),
        7,
        "one connection per call without keep-alive"
    );
    let last = p.last_request().expect("a request");
    assert_eq!(
        (last.method.as_str(), last.path.as_str()),
        ("POST", "/unrestrict")
    );
    assert_eq!(last.form("link"), Some("abc"));
    assert_eq!(last.header("authorization"), Some("Bearer t"));
    assert_eq!(p.sequence()[4], "GET /api/b");
    p.reset();
    assert_eq!((p.calls(), p.requests().len()), (0, 0));

    // Routes only: anything else is a 404 naming the route.
    let api = Provider::builder().routes_only().start();
    let r = HttpClient::new(api.addr())
        .get("/nowhere")
        .expect("an answer");
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (404, Some("no_route"))
    );

    // Hang and delay: no answer within the client's patience, then an answer after the delay.
    let slow = Provider::start_with(Reply::Hang);
    let impatient = HttpClient::new(slow.addr()).timeout(Duration::from_millis(300));
    assert!(
        impatient.get("/unrestrict").is_err(),
        "a hanging stand-in answered"
    );
    slow.set_reply(Reply::Default.after(Duration::from_millis(400)));
    let started = Instant::now();
    let r = HttpClient::new(slow.addr())
        .get("/unrestrict")
        .expect("an answer");
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(r.json()["download"], "https://cdn.test/file/2");
}

#[test]
fn provider_stand_in_keeps_connections_open_when_asked() {
    let p = Provider::builder().keep_alive().start();
    let mut conn = TcpStream::connect(p.addr()).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let request = b"POST /unrestrict HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nlink=a";
    let mut answers = Vec::new();
    for _ in 0..3 {
        conn.write_all(request).expect("send");
        let mut buf = [0u8; 4096];
        let n = conn.read(&mut buf).expect("an answer");
        answers.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    for (i, a) in answers.iter().enumerate() {
        assert!(a.starts_with("HTTP/1.1 200 OK"), "{a}");
        assert!(!a.contains("Connection: close"), "{a}");
        assert!(
            a.contains(&format!("https://cdn.test/file/{}", i + 1)),
            "{a}"
        );
    }
    // Asked to close, it closes.
    conn.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("send");
    let mut rest = Vec::new();
    conn.read_to_end(&mut rest).expect("read to the end");
    assert!(String::from_utf8_lossy(&rest).contains("Connection: close"));
    assert_eq!((p.calls(), p.connections()), (4, 1));
}
