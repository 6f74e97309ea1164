//! A small Redis client: RESP2 encoding and a bounded, incremental reply parser (pure), and a
//! connection over TCP or a Unix socket with timeouts. Enough for AUTH, SELECT, PING and EVAL.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

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
            let len = number(text)?;
            if len == -1 {
                return Ok(Some((Reply::Bulk(None), next)));
            }
            let len = usize::try_from(len)
                .ok()
                .filter(|l| *l <= MAX_BULK)
                .ok_or(ParseError::Malformed("bad bulk length"))?;
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
            let len = number(text)?;
            if len == -1 {
                return Ok(Some((Reply::Array(None), next)));
            }
            let len = usize::try_from(len)
                .ok()
                .filter(|l| *l <= MAX_ARRAY)
                .ok_or(ParseError::Malformed("bad array length"))?;
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
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

trait Stream: Read + Write {}
impl Stream for TcpStream {}
impl Stream for UnixStream {}

/// An open connection.
pub struct Connection {
    stream: Box<dyn Stream>,
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
        let stream: Box<dyn Stream> = match target {
            Target::Tcp { host, port } => {
                let mut last = io::Error::new(io::ErrorKind::NotFound, "no address for the host");
                let mut connected = None;
                for addr in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&addr, connect_timeout) {
                        Ok(s) => {
                            connected = Some(s);
                            break;
                        }
                        Err(e) => last = e,
                    }
                }
                let s = connected.ok_or(last)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(io_timeout))?;
                s.set_write_timeout(Some(io_timeout))?;
                Box::new(s)
            }
            Target::Unix(path) => {
                // A blocking connect to a server that stopped accepting waits in its listen
                // queue without limit: connect with the timeout instead.
                let sock =
                    socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
                sock.connect_timeout(&socket2::SockAddr::unix(path)?, connect_timeout)?;
                let s = UnixStream::from(std::os::fd::OwnedFd::from(sock));
                s.set_read_timeout(Some(io_timeout))?;
                s.set_write_timeout(Some(io_timeout))?;
                Box::new(s)
            }
        };
        Ok(Connection {
            stream,
            buf: Vec::new(),
            io_timeout,
        })
    }

    /// Sends every command at once, then reads one reply per command. Each read has the I/O
    /// timeout and so does the whole: a server trickling bytes cannot stretch it.
    pub fn pipeline(&mut self, commands: &[Vec<u8>]) -> io::Result<Vec<Reply>> {
        let deadline = std::time::Instant::now() + self.io_timeout;
        self.stream.write_all(&commands.concat())?;
        self.stream.flush()?;
        let mut replies = Vec::with_capacity(commands.len());
        while replies.len() < commands.len() {
            match parse(&self.buf) {
                Ok(Some((reply, used))) => {
                    self.buf.drain(..used);
                    replies.push(reply);
                }
                Ok(None) => {
                    if std::time::Instant::now() >= deadline {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the reply did not arrive in time",
                        ));
                    }
                    let mut chunk = [0u8; 4096];
                    let n = self.stream.read(&mut chunk)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_commands() {
        assert_eq!(encode(&[b"GET", b"k"]), b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
        assert_eq!(encode(&[]), b"*0\r\n");
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
}
