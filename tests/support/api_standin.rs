//! A scripted stand-in for a provider's JSON API: an HTTP/1.1 server on 127.0.0.1 that routes by method and path, answers each route from a queue of replies and then its default, counts calls per route, records every request, and can hang.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::urlenc::form_pairs;

/// One answer of the stand-in.
#[derive(Clone, Debug)]
pub enum Reply {
    /// This status, extra headers and body (`Content-Type: application/json` unless a header
    /// says otherwise).
    Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Read the request, then never answer (until the stand-in is dropped, at most 5 minutes).
    Hang,
    /// Wait this long, then give the reply.
    After(Duration, Box<Reply>),
}

impl Reply {
    /// `status` with this JSON body.
    pub fn json(status: u16, body: Value) -> Reply {
        Reply::Answer {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    /// 200 with this JSON body.
    pub fn ok(body: Value) -> Reply {
        Reply::json(200, body)
    }

    /// `status` with this body as it is (any text).
    pub fn raw(status: u16, content_type: &str, body: &str) -> Reply {
        Reply::Answer {
            status,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
        }
    }

    /// The same reply with one more header (e.g. `Retry-After`).
    pub fn header(self, name: &str, value: &str) -> Reply {
        match self {
            Reply::Answer {
                status,
                mut headers,
                body,
            } => {
                headers.push((name.into(), value.into()));
                Reply::Answer {
                    status,
                    headers,
                    body,
                }
            }
            Reply::After(d, inner) => Reply::After(d, Box::new(inner.header(name, value))),
            Reply::Hang => Reply::Hang,
        }
    }

    /// The same reply, given after `delay`.
    pub fn after(self, delay: Duration) -> Reply {
        Reply::After(delay, Box::new(self))
    }
}

/// A request the stand-in received.
#[derive(Clone, Debug)]
pub struct Call {
    /// Order of arrival over the stand-in's life, from 1.
    pub seq: usize,
    pub method: String,
    pub path: String,
    /// The raw query string (empty when there is none).
    pub raw_query: String,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    /// Form fields when the body is `application/x-www-form-urlencoded`.
    pub form: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
    /// False when no route matched (answered 404).
    pub routed: bool,
}

impl Call {
    pub fn header(&self, name: &str) -> Option<&str> {
        find(&self.headers, name, true)
    }

    pub fn query(&self, name: &str) -> Option<&str> {
        find(&self.query, name, false)
    }

    pub fn form(&self, name: &str) -> Option<&str> {
        find(&self.form, name, false)
    }

    /// Everything received, as text, for "this never appears" searches.
    pub fn everything(&self) -> String {
        let mut s = format!("{} {}?{}\n", self.method, self.path, self.raw_query);
        for (k, v) in &self.headers {
            s.push_str(&format!("{k}: {v}\n"));
        }
        s.push_str(&String::from_utf8_lossy(&self.body));
        s
    }
}

fn find<'a>(list: &'a [(String, String)], name: &str, any_case: bool) -> Option<&'a str> {
    list.iter()
        .find(|(k, _)| {
            if any_case {
                k.eq_ignore_ascii_case(name)
            } else {
                k == name
            }
        })
        .map(|(_, v)| v.as_str())
}

struct Route {
    method: String,
    path: String,
    queue: VecDeque<Reply>,
    default: Reply,
    calls: usize,
}

struct Shared {
    routes: Mutex<Vec<Route>>,
    calls: Mutex<Vec<Call>>,
    stop: AtomicBool,
}

impl Shared {
    /// Records the call and picks its reply, as one step.
    fn take(&self, mut call: Call) -> Reply {
        let mut routes = self.routes.lock().unwrap();
        let mut calls = self.calls.lock().unwrap();
        call.seq = calls.len() + 1;
        let route = routes
            .iter_mut()
            .find(|r| r.method.eq_ignore_ascii_case(&call.method) && r.path == call.path);
        call.routed = route.is_some();
        let reply = match route {
            Some(r) => {
                r.calls += 1;
                r.queue.pop_front().unwrap_or_else(|| r.default.clone())
            }
            None => Reply::json(
                404,
                serde_json::json!({"error": "no_route", "detail": format!("the stand-in has no route {} {}", call.method, call.path)}),
            ),
        };
        calls.push(call);
        reply
    }
}

/// The stand-in server. Stopped on drop.
pub struct ApiStandIn {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

impl ApiStandIn {
    pub fn start() -> ApiStandIn {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the API stand-in");
        let addr = listener.local_addr().expect("stand-in address");
        let shared = Arc::new(Shared {
            routes: Mutex::new(Vec::new()),
            calls: Mutex::new(Vec::new()),
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
                std::thread::spawn(move || serve(conn, &s));
            }
        });
        ApiStandIn {
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

    /// Answers `method path` with `default` once its script is used up (creates the route).
    pub fn route(&self, method: &str, path: &str, default: Reply) -> &ApiStandIn {
        let mut routes = self.shared.routes.lock().unwrap();
        match routes
            .iter_mut()
            .find(|r| r.method.eq_ignore_ascii_case(method) && r.path == path)
        {
            Some(r) => r.default = default,
            None => routes.push(Route {
                method: method.to_ascii_uppercase(),
                path: path.to_owned(),
                queue: VecDeque::new(),
                default,
                calls: 0,
            }),
        }
        self
    }

    /// Queues replies for the next calls of `method path`, before its default (creates the
    /// route, with a 500 default, if it does not exist).
    pub fn script(
        &self,
        method: &str,
        path: &str,
        replies: impl IntoIterator<Item = Reply>,
    ) -> &ApiStandIn {
        let exists = self
            .shared
            .routes
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.method.eq_ignore_ascii_case(method) && r.path == path);
        if !exists {
            self.route(
                method,
                path,
                Reply::json(500, serde_json::json!({"error": "script_used_up"})),
            );
        }
        let mut routes = self.shared.routes.lock().unwrap();
        let r = routes
            .iter_mut()
            .find(|r| r.method.eq_ignore_ascii_case(method) && r.path == path)
            .expect("route just made");
        r.queue.extend(replies);
        self
    }

    /// Calls `method path` received.
    pub fn calls(&self, method: &str, path: &str) -> usize {
        self.shared
            .routes
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.method.eq_ignore_ascii_case(method) && r.path == path)
            .map_or(0, |r| r.calls)
    }

    /// Every request received, routed or not.
    pub fn total_calls(&self) -> usize {
        self.shared.calls.lock().unwrap().len()
    }

    /// Every request received, in order of arrival.
    pub fn requests(&self) -> Vec<Call> {
        self.shared.calls.lock().unwrap().clone()
    }

    /// The requests to `method path`, in order.
    pub fn requests_to(&self, method: &str, path: &str) -> Vec<Call> {
        self.requests()
            .into_iter()
            .filter(|c| c.method.eq_ignore_ascii_case(method) && c.path == path)
            .collect()
    }

    /// `METHOD path` of every request, in order.
    pub fn sequence(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|c| format!("{} {}", c.method, c.path))
            .collect()
    }

    /// Forgets routes, scripts, counts and recorded requests.
    pub fn reset(&self) {
        self.shared.routes.lock().unwrap().clear();
        self.shared.calls.lock().unwrap().clear();
    }
}

impl Drop for ApiStandIn {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
    }
}

fn read_call(conn: &TcpStream) -> Option<Call> {
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let target = parts.next()?.to_owned();
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
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let mut body = Vec::new();
    if let Some(len) = find(&headers, "content-length", true) {
        let len: usize = len.parse().ok()?;
        body.resize(len, 0);
        reader.read_exact(&mut body).ok()?;
    } else if find(&headers, "transfer-encoding", true)
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    {
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
    let (path, raw_query) = match target.split_once('?') {
        Some((p, q)) => (p.to_owned(), q.to_owned()),
        None => (target.clone(), String::new()),
    };
    let form = if find(&headers, "content-type", true)
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"))
    {
        form_pairs(&String::from_utf8_lossy(&body))
    } else {
        Vec::new()
    };
    Some(Call {
        seq: 0,
        method,
        path,
        query: form_pairs(&raw_query),
        raw_query,
        headers,
        form,
        body,
        at: Instant::now(),
        routed: false,
    })
}

fn sleep_unless_stopped(shared: &Shared, d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until && !shared.stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn serve(mut conn: TcpStream, shared: &Shared) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let Some(call) = read_call(&conn) else {
        return;
    };
    let mut reply = shared.take(call);
    loop {
        match reply {
            Reply::Hang => {
                sleep_unless_stopped(shared, Duration::from_secs(300));
                return;
            }
            Reply::After(d, inner) => {
                sleep_unless_stopped(shared, d);
                if shared.stop.load(Ordering::SeqCst) {
                    return;
                }
                reply = *inner;
            }
            Reply::Answer {
                status,
                headers,
                body,
            } => {
                let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
                if !headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                {
                    head.push_str("Content-Type: application/json\r\n");
                }
                for (k, v) in &headers {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                head.push_str(&format!(
                    "Content-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                ));
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(body.as_bytes());
                let _ = conn.flush();
                return;
            }
        }
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
