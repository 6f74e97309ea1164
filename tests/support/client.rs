//! A raw HTTP/1.1 test client that can choose its 127.0.0.x source address, and a concurrent request firer.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::http::{find, header_line};

/// One request. Unless `no_framing` is called, `Host`, `Connection: close` and (when there is a
/// body or the method is POST) `Content-Length` are added.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub framing: bool,
}

impl Request {
    pub fn new(method: &str, target: &str) -> Request {
        Request {
            method: method.to_string(),
            target: target.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            framing: true,
        }
    }

    pub fn get(target: &str) -> Request {
        Request::new("GET", target)
    }

    pub fn head(target: &str) -> Request {
        Request::new("HEAD", target)
    }

    /// POST with `Content-Type: application/x-www-form-urlencoded`.
    pub fn post_form(target: &str, body: impl Into<Vec<u8>>) -> Request {
        Request::new("POST", target)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
    }

    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// Send only the given headers: no Host, Connection or Content-Length added.
    pub fn no_framing(mut self) -> Request {
        self.framing = false;
        self
    }

    pub fn to_bytes(&self, host: &str) -> Vec<u8> {
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, self.target);
        if self.framing {
            head.push_str(&format!("Host: {host}\r\nConnection: close\r\n"));
            if !self.body.is_empty() || self.method == "POST" {
                head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
            }
        }
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }
}

/// An answer: read off a connection (`parse`) or from a CGI program's stdout (`parse_cgi`, in
/// cgi.rs).
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// First header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        super::http::header(&self.headers, name)
    }

    /// The `Retry-After` header's whole seconds; a missing or malformed one fails the test.
    pub fn retry_after(&self) -> u64 {
        self.header("Retry-After")
            .unwrap_or_else(|| panic!("no Retry-After:\n{}", self.everything()))
            .parse()
            .unwrap_or_else(|_| panic!("Retry-After not an integer:\n{}", self.everything()))
    }

    /// What the program itself spent on the request, from its `Server-Timing: app;dur=MS`
    /// header: the store's and the provider's waits without the web server's or the client's.
    /// A time bound is checked on this figure, which a busy machine does not stretch the way it
    /// stretches starting the program, Apache's queue and the client.
    pub fn program_took(&self) -> Duration {
        let value = self
            .header("Server-Timing")
            .unwrap_or_else(|| panic!("no Server-Timing header:\n{}", self.everything()));
        let ms: f64 = value
            .split(';')
            .find_map(|p| p.trim().strip_prefix("dur="))
            .and_then(|d| d.parse().ok())
            .unwrap_or_else(|| panic!("Server-Timing without dur: {value:?}"));
        Duration::from_secs_f64(ms / 1000.0)
    }

    pub fn header_count(&self, name: &str) -> usize {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .count()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.text()))
    }

    /// Every header name and value plus the body, for "this never appears" searches.
    pub fn everything(&self) -> String {
        let mut s = format!("{} {}\n", self.status, self.reason);
        for (k, v) in &self.headers {
            s.push_str(&format!("{k}: {v}\n"));
        }
        s.push('\n');
        s.push_str(&self.text());
        s
    }

    /// Parse a full HTTP/1.x response as read until EOF.
    pub fn parse(raw: &[u8]) -> io::Result<Response> {
        let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
        let end = find(raw, b"\r\n\r\n").ok_or_else(|| {
            bad(format!(
                "no end of headers in {:?}",
                String::from_utf8_lossy(raw)
            ))
        })?;
        let head = String::from_utf8_lossy(&raw[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default();
        if !version.starts_with("HTTP/1.") {
            return Err(bad(format!("bad status line {status_line:?}")));
        }
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(format!("bad status line {status_line:?}")))?;
        let reason = parts.next().unwrap_or_default().to_string();
        let mut headers = Vec::new();
        for line in lines {
            headers
                .push(header_line(line).ok_or_else(|| bad(format!("bad header line {line:?}")))?);
        }
        let rest = &raw[end + 4..];
        let chunked = headers.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case("transfer-encoding")
                && v.to_ascii_lowercase().contains("chunked")
        });
        let body = if chunked {
            dechunk(rest).ok_or_else(|| bad("bad chunked body".to_string()))?
        } else {
            rest.to_vec()
        };
        Ok(Response {
            status,
            reason,
            headers,
            body,
        })
    }
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = find(data, b"\r\n")?;
        let size_str = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_str.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

/// A client for one server address; optionally bound to a chosen source address
/// (any 127.0.0.x works on Linux loopback without configuration).
#[derive(Clone, Debug)]
pub struct HttpClient {
    pub server: SocketAddr,
    pub source: Option<IpAddr>,
    pub timeout: Duration,
}

impl HttpClient {
    pub fn new(server: SocketAddr) -> HttpClient {
        HttpClient {
            server,
            source: None,
            timeout: Duration::from_secs(60),
        }
    }

    /// Send from this source address (e.g. 127.0.0.2).
    pub fn bind_source(mut self, ip: &str) -> HttpClient {
        self.source = Some(ip.parse().expect("source ip"));
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> HttpClient {
        self.timeout = timeout;
        self
    }

    pub fn connect(&self) -> io::Result<TcpStream> {
        let socket = Socket::new(
            Domain::for_address(self.server),
            Type::STREAM,
            Some(Protocol::TCP),
        )?;
        if let Some(ip) = self.source {
            socket.bind(&SocketAddr::new(ip, 0).into())?;
        }
        socket.connect_timeout(&self.server.into(), Duration::from_secs(10))?;
        let stream: TcpStream = socket.into();
        stream.set_read_timeout(Some(self.timeout))?;
        stream.set_write_timeout(Some(self.timeout))?;
        Ok(stream)
    }

    pub fn send(&self, req: &Request) -> io::Result<Response> {
        self.send_raw(&req.to_bytes(&self.server.to_string()))
    }

    /// Write these exact bytes, read until the server closes, parse the answer.
    pub fn send_raw(&self, bytes: &[u8]) -> io::Result<Response> {
        let mut stream = self.connect()?;
        // The server may answer and close before reading the whole body (e.g. 413): a failed
        // write is not an error as long as an answer can be read.
        let write_result = stream.write_all(bytes);
        let _ = stream.flush();
        let mut raw = Vec::new();
        let read_result = stream.read_to_end(&mut raw);
        if raw.is_empty() {
            write_result?;
            read_result?;
        }
        Response::parse(&raw)
    }

    pub fn get(&self, target: &str) -> io::Result<Response> {
        self.send(&Request::get(target))
    }
}

/// Fire `n` requests, at most `concurrency` at a time; `make(i)` sends request number `i`.
/// Results come back in request order.
pub fn fire<F>(n: usize, concurrency: usize, make: F) -> Vec<io::Result<Response>>
where
    F: Fn(usize) -> io::Result<Response> + Sync,
{
    par_map(n, concurrency, make)
}

/// Runs `f(0..n)` on `concurrency` threads, each taking the next number as it is free; results
/// in order.
pub fn par_map<T: Send>(n: usize, concurrency: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..concurrency.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= n {
                        break;
                    }
                    let v = f(i);
                    out.lock().unwrap()[i] = Some(v);
                }
            });
        }
    });
    out.into_inner()
        .unwrap()
        .into_iter()
        .map(|v| v.expect("every call ran"))
        .collect()
}
