//! A small Redis client: RESP2 encoding and a bounded, incremental reply parser (pure), and a
//! connection over TCP, TLS (store::tls) or a Unix socket with timeouts. Enough for AUTH,
//! SELECT, PING and EVAL.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use crate::support::secret::Secret;

/// A reply the store did not expect from the server (a script's, a transaction's, a
/// command's): what it was, for the owner's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OddReply(pub String);

impl std::fmt::Display for OddReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OddReply {}

/// A reply from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

/// Why bytes from the server are not a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Not RESP, or over the sizes this client accepts.
    Malformed(&'static str),
}

/// Largest bulk string accepted.
const MAX_BULK: usize = 1 << 20;
/// Most elements in one array.
const MAX_ARRAY: usize = 1 << 16;
/// Deepest nesting of arrays.
const MAX_DEPTH: usize = 8;

/// Encodes one command as a RESP array of bulk strings.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The `AUTH` a new connection sends first: `AUTH PASSWORD`, or `AUTH USER PASSWORD` for an
/// ACL user; None without a password.
pub fn auth(username: Option<&str>, password: Option<&Secret>) -> Option<Vec<u8>> {
    let pass = password?;
    let mut args: Vec<&[u8]> = vec![b"AUTH"];
    if let Some(user) = username {
        args.push(user.as_bytes());
    }
    args.push(pass.expose().as_bytes());
    Some(encode(&args))
}

fn line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = buf.get(at..)?;
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    Some((&rest[..end], at + end + 2))
}

fn number(bytes: &[u8]) -> Result<i64, ParseError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(ParseError::Malformed("a length or integer is not a number"))
}

/// The length of a bulk string or an array: `None` for nil (-1), else at most `max`.
fn length(text: &[u8], max: usize, bad: &'static str) -> Result<Option<usize>, ParseError> {
    let len = number(text)?;
    if len == -1 {
        return Ok(None);
    }
    usize::try_from(len)
        .ok()
        .filter(|l| *l <= max)
        .map(Some)
        .ok_or(ParseError::Malformed(bad))
}

/// Parses one reply from the start of `buf`. `Ok(None)`: more bytes are needed. On success,
/// also returns how many bytes it used.
pub fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, ParseError> {
    parse_at(buf, 0, 0)
}

fn parse_at(buf: &[u8], at: usize, depth: usize) -> Result<Option<(Reply, usize)>, ParseError> {
    if depth > MAX_DEPTH {
        return Err(ParseError::Malformed("arrays nested too deep"));
    }
    let Some(&kind) = buf.get(at) else {
        return Ok(None);
    };
    let Some((text, next)) = line(buf, at + 1) else {
        // A line longer than any valid header means garbage, not a slow server.
        return if buf.len() - at > MAX_BULK {
            Err(ParseError::Malformed("line too long"))
        } else {
            Ok(None)
        };
    };
    let text_string = || String::from_utf8_lossy(text).into_owned();
    match kind {
        b'+' => Ok(Some((Reply::Simple(text_string()), next))),
        b'-' => Ok(Some((Reply::Error(text_string()), next))),
        b':' => Ok(Some((Reply::Int(number(text)?), next))),
        b'$' => {
            let Some(len) = length(text, MAX_BULK, "bad bulk length")? else {
                return Ok(Some((Reply::Bulk(None), next)));
            };
            let end = next + len;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ParseError::Malformed("bulk string not ended by CRLF"));
            }
            Ok(Some((Reply::Bulk(Some(buf[next..end].to_vec())), end + 2)))
        }
        b'*' => {
            let Some(len) = length(text, MAX_ARRAY, "bad array length")? else {
                return Ok(Some((Reply::Array(None), next)));
            };
            let mut items = Vec::with_capacity(len.min(64));
            let mut pos = next;
            for _ in 0..len {
                match parse_at(buf, pos, depth + 1)? {
                    Some((item, after)) => {
                        items.push(item);
                        pos = after;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Reply::Array(Some(items)), pos)))
        }
        _ => Err(ParseError::Malformed("unknown reply type")),
    }
}

/// Where the server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Tcp {
        host: String,
        port: u16,
    },
    /// `rediss://`: TLS over TCP, the certificate checked for `host` against the public roots
    /// and `ca_file`'s.
    Tls {
        host: String,
        port: u16,
        ca_file: Option<PathBuf>,
    },
    Unix {
        socket: PathBuf,
    },
}

/// As the configuration's fields write it (`host`, `port`, `tls`, `ca_file`, `socket`), so
/// that the effective configuration reads back as the same.
impl serde::Serialize for Target {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        match self {
            Target::Tcp { host, port } => {
                map.serialize_entry("host", host)?;
                map.serialize_entry("port", port)?;
            }
            Target::Tls {
                host,
                port,
                ca_file,
            } => {
                map.serialize_entry("host", host)?;
                map.serialize_entry("port", port)?;
                map.serialize_entry("tls", &true)?;
                if let Some(ca) = ca_file {
                    map.serialize_entry("ca_file", ca)?;
                }
            }
            Target::Unix { socket } => map.serialize_entry("socket", socket)?,
        }
        map.end()
    }
}

impl Target {
    /// Where, as log lines name it (no secret in it).
    pub fn place(&self) -> String {
        match self {
            Target::Tcp { host, port } => format!("{host}:{port}"),
            Target::Tls { host, port, .. } => format!("rediss://{host}:{port}"),
            Target::Unix { socket } => format!("socket {}", socket.display()),
        }
    }
}

/// The byte stream under a connection.
enum Stream {
    Tcp(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
    Unix(UnixStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
        }
    }
}

/// An open connection.
pub struct Connection {
    stream: Stream,
    buf: Vec<u8>,
    /// Longest a whole exchange (all its reads) may take.
    io_timeout: Duration,
}

impl Connection {
    pub fn open(
        target: &Target,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> io::Result<Connection> {
        let stream = match target {
            Target::Tcp { host, port } => {
                Stream::Tcp(tcp(host, *port, connect_timeout, io_timeout)?)
            }
            Target::Tls {
                host,
                port,
                ca_file,
            } => {
                let mut s = tcp(host, *port, connect_timeout, io_timeout)?;
                let mut session = crate::store::tls::session(host, ca_file.as_deref())
                    .map_err(io::Error::other)?;
                // The handshake within the connect timeout: a server that never answers it
                // is one that does not connect.
                s.set_read_timeout(Some(connect_timeout))?;
                crate::store::tls::handshake(&mut session, &mut s).map_err(|e| {
                    if timed_out(&e) {
                        io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!(
                                "no TLS handshake within {} ms (is the port the server's tls-port?)",
                                connect_timeout.as_millis()
                            ),
                        )
                    } else {
                        e
                    }
                })?;
                s.set_read_timeout(Some(io_timeout))?;
                Stream::Tls(Box::new(rustls::StreamOwned::new(session, s)))
            }
            Target::Unix { socket: path } => {
                // A blocking connect to a server that stopped accepting waits in its listen
                // queue without limit: connect with the timeout instead.
                let sock =
                    socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
                sock.connect_timeout(&socket2::SockAddr::unix(path)?, connect_timeout)
                    .map_err(|e| connect_error(e, connect_timeout))?;
                let s = UnixStream::from(std::os::fd::OwnedFd::from(sock));
                s.set_read_timeout(Some(io_timeout))?;
                s.set_write_timeout(Some(io_timeout))?;
                Stream::Unix(s)
            }
        };
        Ok(Connection {
            stream,
            buf: Vec::new(),
            io_timeout,
        })
    }

    /// The TLS version and cipher suite, on a TLS connection.
    pub fn tls(&self) -> Option<String> {
        match &self.stream {
            Stream::Tls(s) => Some(crate::store::tls::describe(&s.conn)),
            _ => None,
        }
    }

    /// Sends every command at once, then reads one reply per command. Each read has the I/O
    /// timeout and so does the whole: a server trickling bytes cannot stretch it. Running out
    /// of time is a `TimedOut` error, whatever the socket reported.
    pub fn pipeline(&mut self, commands: &[Vec<u8>]) -> io::Result<Vec<Reply>> {
        let deadline = std::time::Instant::now() + self.io_timeout;
        let io_timeout = self.io_timeout;
        let no_reply = || {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no complete reply within {} ms", io_timeout.as_millis()),
            )
        };
        let sent = self
            .stream
            .write_all(&commands.concat())
            .and_then(|()| self.stream.flush());
        if let Err(e) = sent {
            return Err(if timed_out(&e) {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the server took no command within {} ms",
                        io_timeout.as_millis()
                    ),
                )
            } else {
                e
            });
        }
        let mut replies = Vec::with_capacity(commands.len());
        while replies.len() < commands.len() {
            match parse(&self.buf) {
                Ok(Some((reply, used))) => {
                    self.buf.drain(..used);
                    replies.push(reply);
                }
                Ok(None) => {
                    if std::time::Instant::now() >= deadline {
                        return Err(no_reply());
                    }
                    let mut chunk = [0u8; 4096];
                    let n = match self.stream.read(&mut chunk) {
                        Ok(n) => n,
                        // The socket's read timeout (EAGAIN): no more bytes came in time.
                        Err(e) if timed_out(&e) => return Err(no_reply()),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e),
                    };
                    if n == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the server closed the connection",
                        ));
                    }
                    self.buf.extend_from_slice(&chunk[..n]);
                }
                Err(ParseError::Malformed(why)) => {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, why));
                }
            }
        }
        Ok(replies)
    }
}

/// A TLS connection that ends says so (close_notify), without waiting for an answer: the
/// server then sees a clean end, not a truncated stream.
impl Drop for Connection {
    fn drop(&mut self) {
        if let Stream::Tls(tls) = &mut self.stream {
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    }
}

/// A TCP connection to the first of `host`'s addresses that answers within `connect_timeout`,
/// its reads and writes bounded by `io_timeout`.
fn tcp(
    host: &str,
    port: u16,
    connect_timeout: Duration,
    io_timeout: Duration,
) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address for the host");
    let mut connected = None;
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, connect_timeout) {
            Ok(s) => {
                connected = Some(s);
                break;
            }
            Err(e) => last = connect_error(e, connect_timeout),
        }
    }
    let s = connected.ok_or(last)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(io_timeout))?;
    s.set_write_timeout(Some(io_timeout))?;
    Ok(s)
}

/// Whether a socket operation ran out of its timeout: Linux reports a read or write timeout
/// as `WouldBlock` (EAGAIN), a connect timeout as `TimedOut`.
fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// A failed connect, said plainly: a timeout as such, and a Unix socket whose listen queue is
/// full (which fails at once with EAGAIN) as that.
fn connect_error(e: io::Error, connect_timeout: Duration) -> io::Error {
    match e.kind() {
        io::ErrorKind::TimedOut => io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no connection within {} ms", connect_timeout.as_millis()),
        ),
        io::ErrorKind::WouldBlock => io::Error::new(
            io::ErrorKind::WouldBlock,
            "the server accepts no connection (its listen queue is full)",
        ),
        _ => e,
    }
}

/// For tests: a server on loopback that reads what comes on one connection, answers `bytes`,
/// then nothing until the client leaves.
#[cfg(test)]
pub(crate) fn answering(bytes: &'static [u8]) -> (Target, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        let _ = conn.read(&mut buf);
        let _ = conn.write_all(bytes);
        let _ = conn.read(&mut buf);
    });
    let target = Target::Tcp {
        host: "127.0.0.1".into(),
        port,
    };
    (target, server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_commands() {
        assert_eq!(encode(&[b"GET", b"k"]), b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
        assert_eq!(encode(&[]), b"*0\r\n");
    }

    #[test]
    fn auth_names_the_acl_user_only_when_there_is_one() {
        let pw = Secret::new("pw");
        assert_eq!(auth(None, None), None);
        assert_eq!(auth(Some("site"), None), None, "no password, no AUTH");
        assert_eq!(auth(None, Some(&pw)), Some(encode(&[b"AUTH", b"pw"])));
        assert_eq!(
            auth(Some("site"), Some(&pw)),
            Some(encode(&[b"AUTH", b"site", b"pw"]))
        );
    }

    #[test]
    fn parses_every_reply_type() {
        let cases: &[(&[u8], Reply)] = &[
            (b"+OK\r\n", Reply::Simple("OK".into())),
            (b"-ERR no\r\n", Reply::Error("ERR no".into())),
            (b":-42\r\n", Reply::Int(-42)),
            (b"$3\r\nabc\r\n", Reply::Bulk(Some(b"abc".to_vec()))),
            (b"$0\r\n\r\n", Reply::Bulk(Some(Vec::new()))),
            (b"$-1\r\n", Reply::Bulk(None)),
            (b"*-1\r\n", Reply::Array(None)),
            (
                b"*3\r\n:1\r\n*1\r\n$1\r\nx\r\n+y\r\n",
                Reply::Array(Some(vec![
                    Reply::Int(1),
                    Reply::Array(Some(vec![Reply::Bulk(Some(b"x".to_vec()))])),
                    Reply::Simple("y".into()),
                ])),
            ),
        ];
        for (bytes, want) in cases {
            let (got, used) = parse(bytes).unwrap().unwrap();
            assert_eq!(&got, want);
            assert_eq!(used, bytes.len());
            // Every strict prefix asks for more.
            for cut in 0..bytes.len() {
                assert_eq!(
                    parse(&bytes[..cut]).unwrap(),
                    None,
                    "{:?} cut at {cut}",
                    want
                );
            }
        }
    }

    #[test]
    fn refuses_garbage_and_huge_sizes() {
        for bad in [
            &b"?what\r\n"[..],
            b":abc\r\n",
            b"$-2\r\n",
            b"$99999999999\r\n",
            b"*99999999\r\n",
            b"$3\r\nabcXY",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let deep = "*1\r\n".repeat(20);
        assert!(parse(deep.as_bytes()).is_err());
    }

    #[test]
    fn a_reply_that_never_completes_is_a_timeout_said_plainly() {
        // Garbage without CRLF, then silence: the parser waits for the line's end.
        for bytes in [&b"+PON"[..], b"", b"$5\r\nab"] {
            let (target, server) = answering(bytes);
            let timeout = Duration::from_millis(150);
            let mut conn = Connection::open(&target, Duration::from_secs(2), timeout).unwrap();
            let began = std::time::Instant::now();
            let e = conn.pipeline(&[encode(&[b"PING"])]).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::TimedOut);
            assert_eq!(e.to_string(), "no complete reply within 150 ms");
            assert!(began.elapsed() < Duration::from_secs(2));
            drop(conn);
            server.join().unwrap();
        }
    }

    #[test]
    fn a_connect_that_never_completes_is_a_connect_timeout() {
        use socket2::{Domain, SockAddr, Socket, Type};
        // A listen queue that is full and never drained: the kernel drops further SYNs.
        let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        listener
            .bind(&SockAddr::from(std::net::SocketAddr::from((
                [127, 0, 0, 1],
                0,
            ))))
            .unwrap();
        listener.listen(0).unwrap();
        let addr = listener.local_addr().unwrap().as_socket().unwrap();
        let mut held = Vec::new();
        let full =
            (0..16).any(
                |_| match TcpStream::connect_timeout(&addr, Duration::from_millis(100)) {
                    Ok(c) => {
                        held.push(c);
                        false
                    }
                    Err(_) => true,
                },
            );
        assert!(full, "the listen queue never filled");
        let target = Target::Tcp {
            host: "127.0.0.1".into(),
            port: addr.port(),
        };
        let Err(e) = Connection::open(&target, Duration::from_millis(100), Duration::from_secs(5))
        else {
            panic!("connected to a full listen queue");
        };
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(e.to_string(), "no connection within 100 ms");
    }
}
