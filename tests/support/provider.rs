//! A stand-in for the paid provider API: an HTTP/1.1 server on 127.0.0.1 that counts calls, records requests and answers as told.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How the stand-in answers the next calls.
#[derive(Clone, Debug)]
pub enum Reply {
    /// `200 {"download": "https://cdn.test/file/<n>", "filename": "file.bin"}`, n = call number from 1.
    Default,
    /// This status, content type and body.
    Status {
        code: u16,
        content_type: String,
        body: String,
    },
    /// Read the request, then never answer (until the stand-in is dropped, at most 5 minutes).
    Hang,
    /// Wait this long, then answer like `Default`.
    Slow(Duration),
}

impl Reply {
    pub fn json(code: u16, body: &str) -> Reply {
        Reply::Status {
            code,
            content_type: "application/json".to_string(),
            body: body.to_string(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    /// Request target as sent: path and query.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }

    pub fn query_pairs(&self) -> Vec<(String, String)> {
        super::urlenc::form_pairs(self.target.split_once('?').map(|x| x.1).unwrap_or(""))
    }

    pub fn form_pairs(&self) -> Vec<(String, String)> {
        super::urlenc::form_pairs(&String::from_utf8_lossy(&self.body))
    }

    /// The value of `name` in the form body, else in the query string.
    pub fn param(&self, name: &str) -> Option<String> {
        self.form_pairs()
            .into_iter()
            .chain(self.query_pairs())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// Everything received, as text, for searches.
    pub fn everything(&self) -> String {
        let mut s = format!("{} {}\n", self.method, self.target);
        for (k, v) in &self.headers {
            s.push_str(&format!("{k}: {v}\n"));
        }
        s.push_str(&String::from_utf8_lossy(&self.body));
        s
    }
}

struct Shared {
    calls: AtomicUsize,
    reply: Mutex<Reply>,
    requests: Mutex<Vec<RecordedRequest>>,
    stop: AtomicBool,
}

pub struct Provider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

impl Provider {
    pub fn start() -> Provider {
        Provider::start_with(Reply::Default)
    }

    pub fn start_with(reply: Reply) -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind provider stand-in");
        let addr = listener.local_addr().expect("provider address");
        let shared = Arc::new(Shared {
            calls: AtomicUsize::new(0),
            reply: Mutex::new(reply),
            requests: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let accept_thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let s = s.clone();
                std::thread::spawn(move || handle(conn, &s));
            }
        });
        Provider {
            addr,
            shared,
            accept_thread: Some(accept_thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT<path>`
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Number of requests received so far.
    pub fn calls(&self) -> usize {
        self.shared.calls.load(Ordering::SeqCst)
    }

    pub fn set_reply(&self, reply: Reply) {
        *self.shared.reply.lock().unwrap() = reply;
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn last_request(&self) -> Option<RecordedRequest> {
        self.shared.requests.lock().unwrap().last().cloned()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
    }
}

fn read_request(conn: &TcpStream) -> Option<RecordedRequest> {
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end_matches(['\r', '\n']);
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _): &&(String, String)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if let Some(len) = get("content-length") {
        let len: usize = len.parse().ok()?;
        body.resize(len, 0);
        reader.read_exact(&mut body).ok()?;
    } else if get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    Some(RecordedRequest {
        method,
        target,
        headers,
        body,
    })
}

fn sleep_unless_stopped(shared: &Shared, d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until && !shared.stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn handle(mut conn: TcpStream, shared: &Shared) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let Some(req) = read_request(&conn) else {
        return;
    };
    let n = shared.calls.fetch_add(1, Ordering::SeqCst) + 1;
    shared.requests.lock().unwrap().push(req);
    let reply = shared.reply.lock().unwrap().clone();
    let (code, content_type, body) = match reply {
        Reply::Hang => {
            sleep_unless_stopped(shared, Duration::from_secs(300));
            return;
        }
        Reply::Slow(d) => {
            sleep_unless_stopped(shared, d);
            default_answer(n)
        }
        Reply::Default => default_answer(n),
        Reply::Status {
            code,
            content_type,
            body,
        } => (code, content_type, body),
    };
    let head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason(code),
        body.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body.as_bytes());
    let _ = conn.flush();
}

fn default_answer(n: usize) -> (u16, String, String) {
    (
        200,
        "application/json".to_string(),
        format!(r#"{{"download": "https://cdn.test/file/{n}", "filename": "file.bin"}}"#),
    )
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
