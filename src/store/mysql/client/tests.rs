//! The client's side of whole conversations, against a server on loopback that follows the
//! protocol's script: it checks each scramble as a server does (against the stored hash of the
//! password), and answers sign-in steps and queries as MySQL 8 and MariaDB do.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use sha1::Sha1;
use sha2::{Digest, Sha256};

use super::*;
use crate::store::mysql::packet::{self, DEPRECATE_EOF, MORE_RESULTS};

const SALT: &[u8; 20] = b"0123456789abcdefghij";
const PASSWORD: &str = "s3cret";

/// The server's end: packets with sequence ids.
struct Peer<S: Read + Write> {
    s: S,
    seq: u8,
}

impl<S: Read + Write> Peer<S> {
    fn send(&mut self, payload: &[u8]) {
        let mut out = (payload.len() as u32).to_le_bytes()[..3].to_vec();
        out.push(self.seq);
        out.extend_from_slice(payload);
        self.seq = self.seq.wrapping_add(1);
        self.s.write_all(&out).unwrap();
    }

    fn recv(&mut self) -> Vec<u8> {
        let mut h = [0u8; 4];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(h[3], self.seq, "the client's sequence id");
        self.seq = h[3].wrapping_add(1);
        let mut p = vec![0u8; packet::header_len(&h).unwrap()];
        self.s.read_exact(&mut p).unwrap();
        p
    }

    /// The greeting proposing `plugin`, with the capabilities of MySQL 8, and the client's
    /// handshake response to it ([`Peer::response`]).
    fn greet(&mut self, plugin: &str) -> (u32, String, Vec<u8>, String) {
        let caps: u32 = 0xDFFF_F7FF & !packet::SSL;
        let mut p = vec![10];
        p.extend_from_slice(b"8.0.40\0");
        p.extend_from_slice(&9u32.to_le_bytes());
        p.extend_from_slice(&SALT[..8]);
        p.push(0);
        p.extend_from_slice(&(caps as u16).to_le_bytes());
        p.push(255);
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
        p.push(21);
        p.extend_from_slice(&[0; 10]);
        p.extend_from_slice(&SALT[8..]);
        p.push(0);
        p.extend_from_slice(plugin.as_bytes());
        p.push(0);
        self.send(&p);
        self.response()
    }

    /// Reads the handshake response: (capabilities, user, scramble, plugin).
    fn response(&mut self) -> (u32, String, Vec<u8>, String) {
        let p = self.recv();
        let mut f = packet::Fields(&p);
        let caps = f.u32().unwrap();
        f.take(28).unwrap();
        let user = String::from_utf8(f.nul_terminated().to_vec()).unwrap();
        let auth = f.lenenc_bytes().unwrap().to_vec();
        if caps & packet::CONNECT_WITH_DB != 0 {
            f.nul_terminated();
        }
        let plugin = String::from_utf8(f.nul_terminated().to_vec()).unwrap();
        (caps, user, auth, plugin)
    }

    fn ok(&mut self, status: u16) {
        let mut p = vec![0, 0, 0];
        p.extend_from_slice(&status.to_le_bytes());
        p.extend_from_slice(&[0, 0]);
        self.send(&p);
    }
}

/// What a server checks of a `mysql_native_password` reply.
fn native_ok(reply: &[u8], salt: &[u8]) -> bool {
    scramble_ok::<Sha1>(reply, |h, stored| {
        h.update(salt);
        h.update(stored);
    })
}

/// What a server checks of a `caching_sha2_password` reply.
fn sha2_ok(reply: &[u8], salt: &[u8]) -> bool {
    scramble_ok::<Sha256>(reply, |h, stored| {
        h.update(stored);
        h.update(salt);
    })
}

/// What a server checks of a scramble made with the hash `D`: the reply, XORed with the hash
/// of the salt and the stored hash (fed in the method's order by `feed`), hashes to the
/// stored hash (the hash of the password's hash).
fn scramble_ok<D: Digest>(reply: &[u8], feed: impl FnOnce(&mut D, &[u8])) -> bool {
    let stored = D::digest(D::digest(PASSWORD.as_bytes()));
    let mut h = D::new();
    feed(&mut h, &stored);
    let once: Vec<u8> = reply.iter().zip(h.finalize()).map(|(a, b)| a ^ b).collect();
    reply.len() == <D as Digest>::output_size() && D::digest(once).as_slice() == stored.as_slice()
}

fn params(place: Place, password: &str) -> Params {
    Params {
        place,
        user: "site".to_owned(),
        password: password.to_owned(),
        database: Some("d".to_owned()),
        tls: false,
        ca_file: None,
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(2),
    }
}

/// A server on loopback TCP running `script` for one connection.
fn tcp(script: impl FnOnce(&mut Peer<std::net::TcpStream>) + Send + 'static) -> Place {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        script(&mut Peer { s, seq: 0 });
    });
    Place::Tcp {
        host: "127.0.0.1".to_owned(),
        port,
    }
}

fn open(place: Place, password: &str) -> Result<Conn, Error> {
    Conn::open(
        &params(place, password),
        Instant::now() + Duration::from_secs(5),
    )
}

/// Why signing in failed, where it must (signing in is a failure of the test).
fn refused(place: Place, password: &str) -> Error {
    match open(place, password) {
        Err(e) => e,
        Ok(conn) => panic!("signed in to {}", conn.version),
    }
}

#[test]
fn caching_sha2_signs_in_from_the_servers_cache_and_queries() {
    let place = tcp(|p| {
        let (caps, user, reply, plugin) = p.greet(auth::CACHING_SHA2);
        assert_eq!(
            (user.as_str(), plugin.as_str()),
            ("site", auth::CACHING_SHA2)
        );
        assert!(sha2_ok(&reply, SALT), "the scramble a server accepts");
        assert_ne!(caps & DEPRECATE_EOF, 0);
        p.send(&[0x01, 0x03]);
        p.ok(2);
        // Two statements: a result set of one row (with a NULL), then an OK.
        p.seq = 0;
        let q = p.recv();
        assert_eq!(&q[1..], b"SELECT 7, NULL; DO 1");
        p.send(&[2]);
        p.send(b"\x03def\x00\x00\x00\x011\x00\x0c?\x00\x01\x00\x00\x00\x08\x81\x00\x00\x00\x00");
        p.send(b"\x03def\x00\x00\x00\x04NULL\x00\x0c?\x00\x00\x00\x00\x00\x06\x80\x00\x00\x00\x00");
        p.send(b"\x017\xfb");
        let mut end = vec![0xFE, 0, 0];
        end.extend_from_slice(&(2 | MORE_RESULTS).to_le_bytes());
        end.extend_from_slice(&[0, 0]);
        p.send(&end);
        p.ok(2);
        // A statement the server refuses.
        p.seq = 0;
        let _ = p.recv();
        p.send(b"\xff\x7a\x04#42S02Table 'd.t' doesn't exist");
    });
    let mut conn = open(place, PASSWORD).unwrap();
    assert_eq!(conn.version, "8.0.40");
    let answers = conn.query("SELECT 7, NULL; DO 1").unwrap();
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0].rows, vec![vec![Some(b"7".to_vec()), None]]);
    assert!(answers[1].rows.is_empty());
    match conn.query("SELECT * FROM t") {
        Err(Error::Server(e)) => assert_eq!(e.code, 1146),
        other => panic!("{other:?}"),
    }
}

#[test]
fn caching_sha2_never_sends_the_password_over_plain_tcp() {
    let place = tcp(|p| {
        let _ = p.greet(auth::CACHING_SHA2);
        p.send(&[0x01, 0x04]);
        // Nothing more may come: the client leaves.
        let mut rest = Vec::new();
        let _ = p.s.read_to_end(&mut rest);
        assert!(
            rest.is_empty(),
            "sent after the request for the password: {rest:?}"
        );
    });
    match refused(place, PASSWORD) {
        Error::Unsupported(why) => {
            assert!(why.contains("store.tls"), "{why}");
            assert!(!why.contains(PASSWORD));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn caching_sha2_sends_the_password_over_a_unix_socket() {
    let dir = crate::support::temp::dir("mysql-client", "unix");
    let path = dir.join("mysql.sock");
    let _ = std::fs::remove_file(&path);
    let l = UnixListener::bind(&path).unwrap();
    let server = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut p = Peer { s, seq: 0 };
        let _ = p.greet(auth::CACHING_SHA2);
        p.send(&[0x01, 0x04]);
        let clear = p.recv();
        p.ok(2);
        clear
    });
    let conn = open(Place::Unix(path.clone()), PASSWORD);
    assert!(conn.is_ok(), "{:?}", conn.err());
    assert_eq!(server.join().unwrap(), b"s3cret\0");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_authentication_switch_is_followed_and_a_wrong_password_named() {
    // MariaDB proposes the native method; the user has caching_sha2_password.
    let place = tcp(|p| {
        let (_, _, reply, plugin) = p.greet(auth::NATIVE);
        assert_eq!(plugin, auth::NATIVE);
        assert!(native_ok(&reply, SALT));
        let salt2 = b"ABCDEFGHIJKLMNOPQRST";
        let mut switch = vec![0xFE];
        switch.extend_from_slice(b"caching_sha2_password\0");
        switch.extend_from_slice(salt2);
        switch.push(0);
        p.send(&switch);
        assert!(sha2_ok(&p.recv(), salt2));
        p.ok(2);
    });
    assert!(open(place, PASSWORD).is_ok());

    let place = tcp(|p| {
        let (_, _, reply, _) = p.greet(auth::NATIVE);
        assert!(!native_ok(&reply, SALT));
        p.send(b"\xff\x15\x04#28000Access denied for user 'site'@'localhost'");
    });
    match refused(place, "wrong") {
        Error::Server(e) => assert_eq!(e.code, 1045),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_method_it_does_not_speak_is_named() {
    let place = tcp(|p| {
        let _ = p.greet(auth::NATIVE);
        p.send(b"\xfeclient_ed25519\0abcdefghijklmnopqrstuvwxyz012345\0");
        let mut rest = Vec::new();
        let _ = p.s.read_to_end(&mut rest);
    });
    match refused(place, PASSWORD) {
        Error::Unsupported(why) => assert!(why.contains("client_ed25519"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_server_that_stops_answering_is_given_up_at_the_deadline() {
    let place = tcp(|p| {
        let _ = p.greet(auth::NATIVE);
        std::thread::sleep(Duration::from_secs(3));
    });
    let began = Instant::now();
    let mut p = params(place, PASSWORD);
    p.read_timeout = Duration::from_secs(10);
    let e = Conn::open(&p, Instant::now() + Duration::from_millis(300));
    assert!(e.is_err());
    let took = began.elapsed();
    assert!(took < Duration::from_millis(2000), "{took:?}");
}
