//! The database harness itself: real MariaDB and Redis servers on loopback and the delay proxy start, authenticate, die, come back, slow down and refuse as the store tests need.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::time::{Duration, Instant};

use support::delay_proxy::Mode;
use support::redis::{Resp, RespConn};
use support::{DelayProxy, MariaDb, Redis, mariadb, redis};

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
