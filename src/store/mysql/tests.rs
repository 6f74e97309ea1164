//! Tests of the MySQL store, without a server.

use super::*;
use crate::core::rule::KeyKind;
use errors::explain_io;
use std::io::{Read, Write as _};
use std::net::{TcpListener, TcpStream};

/// A store pointed at `port` on loopback, with short timeouts, the tables' default names, no
/// TLS: the settings a checked `"store": {"kind": "mysql", ...}` section gives.
fn store_at(port: u16, connect_ms: u64, read_ms: u64) -> MysqlStore {
    use crate::store::mysql::settings::TsUnit;
    use crate::support::defaults;
    use crate::support::secret::Secret;
    let settings = MysqlSettings {
        url: None,
        host: Some("127.0.0.1".into()),
        port: Some(port),
        socket: None,
        user: Some("u".into()),
        password: Some(Secret::new("p")),
        database: Some("d".into()),
        counter_table: defaults::MYSQL_COUNTER_TABLE.into(),
        events_table: defaults::MYSQL_EVENTS_TABLE.into(),
        cache_table: defaults::MYSQL_CACHE_TABLE.into(),
        journal_table: defaults::MYSQL_JOURNAL_TABLE.into(),
        notes_table: defaults::MYSQL_NOTES_TABLE.into(),
        events_ts: TsUnit::Millis,
        connect_timeout: Duration::from_millis(connect_ms),
        read_timeout: Duration::from_millis(read_ms),
        tls: false,
        ca_file: None,
    };
    MysqlStore::new(settings, &[], Duration::from_secs(600))
}

/// A server that sends `bytes`, one every `every` (all at once when zero), then holds the
/// connection until the client leaves.
fn server(bytes: Vec<u8>, every: Duration) -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        if every.is_zero() {
            let _ = conn.write_all(&bytes);
        } else {
            for b in &bytes {
                if conn.write_all(&[*b]).is_err() {
                    return;
                }
                std::thread::sleep(every);
            }
        }
        hold(&mut conn);
    });
    (port, handle)
}

fn hold(conn: &mut TcpStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = [0u8; 1024];
    while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
}

fn decide(store: &MysqlStore) -> Result<Decision, StoreError> {
    let rule = Rule::new(
        "ip",
        KeyKind::Ip,
        Algorithm::Fixed,
        3,
        60,
        crate::support::defaults::KEY_TEMPLATE_IP,
    )
    .unwrap();
    store.decide(&[Check {
        rule: &rule,
        key: "resolve:ip:192.0.2.1".into(),
    }])
}

#[test]
fn a_trickled_handshake_is_given_up_within_the_budget() {
    // A greeting's first bytes, one every 50 ms: each read gets a byte within the read
    // timeout, and the whole would take seconds.
    let mut greeting = vec![0x4a, 0, 0, 0, 0x0a];
    greeting.extend_from_slice(b"5.5.5-10.11.19-MariaDB\0");
    greeting.extend_from_slice(&[b'x'; 60]);
    let (port, _server) = server(greeting, Duration::from_millis(50));
    let store = store_at(port, 100, 100);
    let began = Instant::now();
    let e = decide(&store).unwrap_err();
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_millis(1500),
        "{took:?}"
    );
    assert_eq!(
        e.detail,
        format!(
            "mysql store at 127.0.0.1:{port}: the server answered too slowly: no complete handshake within 300 ms (store.connect_timeout_ms + 2 x store.read_timeout_ms)"
        )
    );
}

#[test]
fn codec_errors_are_said_in_words() {
    // A packet header announcing 16 MiB, more than max_allowed_packet.
    let mut bytes = vec![0xff, 0xff, 0xff, 0x00, 0x0a];
    bytes.extend_from_slice(&[b'x'; 100]);
    let (port, _server) = server(bytes, Duration::ZERO);
    let e = decide(&store_at(port, 1000, 1000)).unwrap_err();
    assert_eq!(
        e.detail,
        format!(
            "mysql store at 127.0.0.1:{port}: the server sent something that is not the MySQL protocol (a packet larger than the 4 MiB this client accepts (its max_allowed_packet); is it a MySQL or MariaDB server? see store.host and store.port)"
        )
    );
}

#[test]
fn silence_and_refusal_name_their_setting() {
    // Nothing said after the connect: the read timeout.
    let (port, _server) = server(Vec::new(), Duration::ZERO);
    let e = decide(&store_at(port, 1000, 100)).unwrap_err();
    assert_eq!(
        e.detail,
        format!("mysql store at 127.0.0.1:{port}: no answer in time (see store.read_timeout_ms)")
    );
    // Nobody listening.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = decide(&store_at(port, 1000, 100)).unwrap_err();
    assert!(
        e.detail
            .starts_with(&format!("mysql store at 127.0.0.1:{port}: ")),
        "{}",
        e.detail
    );
    assert!(e.detail.contains("is the server running"), "{}", e.detail);
    assert!(!e.detail.contains("Error {"), "{}", e.detail);
}

#[test]
fn io_errors_name_the_timeout_of_their_phase() {
    let timed_out = std::io::Error::from(std::io::ErrorKind::TimedOut);
    let would_block = std::io::Error::from(std::io::ErrorKind::WouldBlock);
    assert_eq!(
        explain_io(&timed_out, Phase::Connect),
        "no connection in time (timed out: see store.connect_timeout_ms)"
    );
    for (e, phase) in [
        (&would_block, Phase::Connect),
        (&would_block, Phase::Work),
        (&timed_out, Phase::Work),
    ] {
        assert_eq!(
            explain_io(e, phase),
            "no answer in time (see store.read_timeout_ms)"
        );
    }
    let refused = client::Error::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
    assert!(
        explain(&refused, Phase::Connect)
            .starts_with("connection refused (is the server running and reachable?")
    );
}
