//! A small MySQL/MariaDB client: connecting over TCP (optionally TLS) or a Unix socket,
//! authenticating, and text queries that may hold several statements, every read and write
//! bounded by the read timeout and by the request's deadline. Enough for the store's few
//! statements; nothing is compiled or allocated at start beyond one buffer.

use std::io::{self, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::store::mysql::auth;
use crate::store::mysql::packet::{self, Malformed, ServerError, Value};

/// The most bytes one query's answer may hold, all its rows together.
const MAX_ANSWER: usize = 8 << 20;
/// The most statements' answers to one query.
const MAX_STATEMENTS: usize = 1024;
/// The most columns of one result.
const MAX_COLUMNS: u64 = 256;
/// Authentication exchanges after the handshake response, at most (a switch, then a request
/// for the full password, then its answer).
const MAX_AUTH_ROUNDS: usize = 4;

/// Where the server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

/// Everything needed to open a connection.
#[derive(Debug, Clone)]
pub struct Params {
    pub place: Place,
    pub user: String,
    pub password: String,
    pub database: Option<String>,
    pub tls: bool,
    /// A CA bundle (PEM) trusted beside the public roots.
    pub ca_file: Option<PathBuf>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
}

/// Why a connection or a query failed.
#[derive(Debug)]
pub enum Error {
    /// The server's ERR packet.
    Server(ServerError),
    Io(io::Error),
    /// Bytes that are not the MySQL protocol.
    Protocol(&'static str),
    /// The server asks for something this client does not do; the text says what to change.
    Unsupported(String),
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

impl From<Malformed> for Error {
    fn from(m: Malformed) -> Error {
        Error::Protocol(m.0)
    }
}

/// One statement's result: its rows (none for a statement that returns no result set) and the
/// rows it affected.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Answer {
    pub rows: Vec<Vec<Value>>,
    pub affected: u64,
}

/// A socket whose reads and writes each wait at most the read timeout, and never past the
/// deadline when one is set.
struct Socket {
    inner: Inner,
    timeout: Duration,
    deadline: Option<Instant>,
    armed: Option<Duration>,
}

enum Inner {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    fn arm(&mut self) -> io::Result<()> {
        let want = match self.deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                left.min(self.timeout)
            }
            None => self.timeout,
        };
        if self.armed != Some(want) {
            match &self.inner {
                Inner::Tcp(s) => {
                    s.set_read_timeout(Some(want))?;
                    s.set_write_timeout(Some(want))?;
                }
                Inner::Unix(s) => {
                    s.set_read_timeout(Some(want))?;
                    s.set_write_timeout(Some(want))?;
                }
            }
            self.armed = Some(want);
        }
        Ok(())
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.arm()?;
        match &mut self.inner {
            Inner::Tcp(s) => s.read(buf),
            Inner::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm()?;
        match &mut self.inner {
            Inner::Tcp(s) => s.write(buf),
            Inner::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

enum Stream {
    Plain(Socket),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, Socket>>),
}

impl Stream {
    fn socket(&mut self) -> &mut Socket {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => t.get_mut(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(t) => t.flush(),
        }
    }
}

/// An open, authenticated connection.
pub struct Conn {
    stream: BufReader<Stream>,
    seq: u8,
    capabilities: u32,
    /// The server's version as its greeting gave it.
    pub version: String,
    /// The TLS version and cipher suite, when the connection is encrypted.
    pub tls: Option<String>,
}

impl Conn {
    /// Connects and authenticates, all of it before `deadline`.
    pub fn open(p: &Params, deadline: Instant) -> Result<Conn, Error> {
        let inner = match &p.place {
            Place::Tcp { host, port } => {
                let mut last = None;
                let mut found = None;
                for addr in (host.as_str(), *port).to_socket_addrs()? {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::Error::from(io::ErrorKind::TimedOut).into());
                    }
                    match TcpStream::connect_timeout(&addr, p.connect_timeout.min(left)) {
                        Ok(s) => {
                            found = Some(s);
                            break;
                        }
                        Err(e) => last = Some(e),
                    }
                }
                let s = found.ok_or_else(|| {
                    last.unwrap_or_else(|| io::Error::other("the host name has no address"))
                })?;
                s.set_nodelay(true)?;
                Inner::Tcp(s)
            }
            Place::Unix(path) => Inner::Unix(UnixStream::connect(path)?),
        };
        let mut socket = Socket {
            inner,
            timeout: p.read_timeout,
            deadline: Some(deadline),
            armed: None,
        };
        // The greeting, and the TLS request if any, are read and written on the socket itself:
        // TLS takes the socket over before anything is buffered.
        let first = read_frame(&mut socket, 0)?;
        if first.first() == Some(&0xFF) {
            return Err(Error::Server(packet::server_error(&first)?));
        }
        let greeting = packet::greeting(&first)?;
        if greeting.capabilities & packet::REQUIRED != packet::REQUIRED {
            return Err(Error::Unsupported(format!(
                "the server ({}) is older than MySQL 5.5 or MariaDB 5.5",
                greeting.version
            )));
        }
        let mut caps = packet::WANTED & greeting.capabilities;
        if p.database.is_some() {
            caps |= packet::CONNECT_WITH_DB;
        }
        let (stream, seq, secure) = match &p.place {
            Place::Unix(_) => (Stream::Plain(socket), 1, true),
            Place::Tcp { host, .. } if p.tls => {
                if greeting.capabilities & packet::SSL == 0 {
                    return Err(Error::Unsupported(
                        "the server does not offer TLS: enable TLS on the server, or set store.tls to false (and remove store.ca_file)".to_owned(),
                    ));
                }
                caps |= packet::SSL;
                write_frame(&mut socket, 1, &packet::tls_request(caps))?;
                (start_tls(socket, host, p.ca_file.as_deref())?, 2, true)
            }
            Place::Tcp { .. } => (Stream::Plain(socket), 1, false),
        };
        let tls = match &stream {
            Stream::Tls(t) => Some(crate::store::tls::describe(&t.conn)),
            Stream::Plain(_) => None,
        };
        let mut conn = Conn {
            stream: BufReader::with_capacity(8192, stream),
            seq,
            capabilities: caps,
            version: greeting.version.clone(),
            tls,
        };
        conn.authenticate(p, &greeting, secure)?;
        Ok(conn)
    }

    /// Bounds the next reads and writes by `deadline` (None: by the read timeout alone).
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.stream.get_mut().socket().deadline = deadline;
    }

    /// Each read and write may wait this long.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.stream.get_mut().socket().timeout = timeout;
    }

    fn authenticate(
        &mut self,
        p: &Params,
        greeting: &packet::Greeting,
        secure: bool,
    ) -> Result<(), Error> {
        let mut plugin = greeting.plugin.clone();
        let mut salt = greeting.scramble.clone();
        // A method this client does not speak is answered as the native one: the server then
        // names the user's method in an authentication switch.
        if auth::scramble(&plugin, b"x", &salt).is_none() {
            plugin = auth::NATIVE.to_owned();
        }
        let reply = auth::scramble(&plugin, p.password.as_bytes(), &salt).unwrap_or_default();
        self.write_packet(&packet::handshake_response(
            self.capabilities,
            &p.user,
            &reply,
            p.database.as_deref(),
            &plugin,
        ))?;
        for _ in 0..MAX_AUTH_ROUNDS {
            let answer = self.read_packet()?;
            match answer.first() {
                Some(0x00) => return Ok(()),
                Some(0xFF) => return Err(Error::Server(packet::server_error(&answer)?)),
                // Authentication switch: another method, with a new scramble.
                Some(0xFE) => {
                    let mut f = packet::Fields(&answer[1..]);
                    plugin = String::from_utf8_lossy(f.nul_terminated()).into_owned();
                    let data = f.rest();
                    salt = data.strip_suffix(&[0]).unwrap_or(data).to_vec();
                    let reply = auth::scramble(&plugin, p.password.as_bytes(), &salt)
                        .ok_or_else(|| {
                            Error::Unsupported(format!(
                                "store.user authenticates with {plugin}, which resolve does not speak: use mysql_native_password or caching_sha2_password for this user"
                            ))
                        })?;
                    self.write_packet(&reply)?;
                }
                // caching_sha2_password: 3 = the scramble matched the server's cache; 4 = the
                // server needs the password itself.
                Some(0x01) if plugin == auth::CACHING_SHA2 => match answer.get(1) {
                    Some(3) => {}
                    Some(4) if secure => {
                        let mut clear = p.password.as_bytes().to_vec();
                        clear.push(0);
                        self.write_packet(&clear)?;
                    }
                    Some(4) => {
                        return Err(Error::Unsupported(
                            "the server wants the password itself (caching_sha2_password, first sign-in since it started), which resolve sends only over TLS or a Unix socket: set store.tls to true or use store.socket".to_owned(),
                        ));
                    }
                    _ => return Err(Error::Protocol("an unknown caching_sha2_password step")),
                },
                _ => return Err(Error::Protocol("an unexpected packet during sign-in")),
            }
        }
        Err(Error::Protocol("sign-in did not end"))
    }

    /// Runs `sql` (one statement, or several separated by `;`) and returns each statement's
    /// answer. An error of a statement ends the batch: the statements after it do not run.
    pub fn query(&mut self, sql: &str) -> Result<Vec<Answer>, Error> {
        self.seq = 0;
        self.write_packet(&packet::query(sql))?;
        let capabilities = self.capabilities;
        answers(capabilities, || self.read_packet())
    }

    fn read_packet(&mut self) -> Result<Vec<u8>, Error> {
        let payload = read_frame(&mut self.stream, self.seq)?;
        self.seq = self.seq.wrapping_add(1);
        Ok(payload)
    }

    fn write_packet(&mut self, payload: &[u8]) -> Result<(), Error> {
        let stream = self.stream.get_mut();
        write_frame(stream, self.seq, payload)?;
        stream.flush()?;
        self.seq = self.seq.wrapping_add(1);
        Ok(())
    }
}

/// A connection that ends says so (COM_QUIT), without waiting for anything: a server otherwise
/// counts it as aborted (`Aborted_clients`) and, as MariaDB does by default, writes a warning
/// to its error log for each one: one a CGI request.
impl Drop for Conn {
    fn drop(&mut self) {
        self.seq = 0;
        let _ = self.write_packet(&[0x01]);
        if let Stream::Tls(tls) = self.stream.get_mut() {
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    }
}

/// Reads the answers to one query from the packets `next` gives, for a connection with
/// `capabilities`: one per statement, until one says no more follow. Bounded: at most
/// [`MAX_COLUMNS`] columns and [`MAX_ANSWER`] bytes of rows.
pub fn answers(
    capabilities: u32,
    mut next: impl FnMut() -> Result<Vec<u8>, Error>,
) -> Result<Vec<Answer>, Error> {
    let mut answers = Vec::new();
    let mut budget = MAX_ANSWER;
    loop {
        let first = next()?;
        let more = match first.first() {
            Some(0x00) => {
                let done = packet::ok(&first)?;
                answers.push(Answer {
                    rows: Vec::new(),
                    affected: done.affected,
                });
                done.status & packet::MORE_RESULTS != 0
            }
            Some(0xFF) => return Err(Error::Server(packet::server_error(&first)?)),
            Some(0xFB) => return Err(Error::Protocol("the server asked for a local file")),
            Some(_) => {
                let columns = packet::Fields(&first).lenenc()?;
                if columns == 0 || columns > MAX_COLUMNS {
                    return Err(Error::Protocol("a result with too many columns"));
                }
                for _ in 0..columns {
                    next()?;
                }
                if capabilities & packet::DEPRECATE_EOF == 0 {
                    packet::eof(&next()?)?;
                }
                let mut rows = Vec::new();
                let done = loop {
                    let p = next()?;
                    if packet::ends_rows(&p) {
                        break if capabilities & packet::DEPRECATE_EOF == 0 {
                            packet::eof(&p)?
                        } else {
                            packet::ok(&p)?
                        };
                    }
                    if p.first() == Some(&0xFF) {
                        return Err(Error::Server(packet::server_error(&p)?));
                    }
                    budget = budget
                        .checked_sub(p.len())
                        .ok_or(Error::Protocol("an answer larger than 8 MiB"))?;
                    rows.push(packet::row(&p, columns as usize)?);
                };
                answers.push(Answer { rows, affected: 0 });
                done.status & packet::MORE_RESULTS != 0
            }
            None => return Err(Error::Protocol("an empty packet")),
        };
        if !more {
            return Ok(answers);
        }
        if answers.len() >= MAX_STATEMENTS {
            return Err(Error::Protocol("more answers than statements"));
        }
    }
}

/// Reads one packet whose sequence id must be `seq`: from the buffered stream, or from the
/// socket itself for the greeting (before TLS may start, nothing may be buffered).
fn read_frame(from: &mut impl Read, seq: u8) -> Result<Vec<u8>, Error> {
    let mut header = [0u8; 4];
    from.read_exact(&mut header)?;
    let len = packet::header_len(&header)?;
    if header[3] != seq {
        return Err(Error::Protocol("a packet out of sequence"));
    }
    let mut payload = vec![0u8; len];
    from.read_exact(&mut payload)?;
    Ok(payload)
}

/// Writes `payload` as one packet with sequence id `seq`, in one write.
fn write_frame(to: &mut impl Write, seq: u8, payload: &[u8]) -> Result<(), Error> {
    if payload.len() >= packet::CONTINUED {
        return Err(Error::Protocol("a statement of 16 MiB or more"));
    }
    let mut out = Vec::with_capacity(payload.len() + 4);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes()[..3]);
    out.push(seq);
    out.extend_from_slice(payload);
    to.write_all(&out)?;
    Ok(())
}

/// TLS over `socket`, the server's certificate checked for `host` against the public roots
/// and `ca_file`'s; the handshake done here, so that a refused certificate fails the connect.
fn start_tls(
    mut socket: Socket,
    host: &str,
    ca_file: Option<&std::path::Path>,
) -> Result<Stream, Error> {
    let mut tls = crate::store::tls::session(host, ca_file).map_err(Error::Unsupported)?;
    crate::store::tls::handshake(&mut tls, &mut socket)?;
    Ok(Stream::Tls(Box::new(rustls::StreamOwned::new(tls, socket))))
}

/// `X'…'`: any bytes as an SQL literal, with nothing to escape.
pub fn hex(bytes: &[u8], out: &mut String) {
    out.push_str("X'");
    out.push_str(&crate::support::hex::lower(bytes));
    out.push('\'');
}

/// Text as an SQL string literal in utf8mb4 (which the column's own character set and
/// collation then take over, so its index serves), with nothing to escape.
pub fn text(s: &str, out: &mut String) {
    out.push_str("_utf8mb4 ");
    hex(s.as_bytes(), out);
}

/// The same, as a new string.
pub fn text_lit(s: &str) -> String {
    let mut out = String::new();
    text(s, &mut out);
    out
}

/// A value as a number; a protocol error when it is NULL or not one.
pub fn num<T: std::str::FromStr>(v: &Value) -> Result<T, Error> {
    v.as_deref()
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|s| s.parse().ok())
        .ok_or(Error::Protocol("a value that is not the number expected"))
}

/// A row's values as an array of `N`: a protocol error (naming `what`) when it has another
/// number of columns.
pub fn columns<'a, const N: usize>(
    row: &'a [Value],
    what: &'static str,
) -> Result<&'a [Value; N], Error> {
    row.try_into().map_err(|_| Error::Protocol(what))
}

/// A value's bytes (NULL as none).
pub fn bytes(v: &Value) -> Vec<u8> {
    v.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_need_no_escaping() {
        let mut s = String::new();
        hex(b"a'\\\0", &mut s);
        assert_eq!(s, "X'61275c00'");
        assert_eq!(text_lit("ip:1"), "_utf8mb4 X'69703a31'");
        assert_eq!(num::<u64>(&Some(b"42".to_vec())).unwrap(), 42);
        assert!(num::<u64>(&None).is_err());
        assert!(num::<u64>(&Some(b"x".to_vec())).is_err());
    }
}

#[cfg(test)]
#[path = "client/tests.rs"]
mod conversation;
