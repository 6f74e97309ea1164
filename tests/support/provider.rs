//! The stand-in for a paid provider API: an HTTP/1.1 server on 127.0.0.1 that answers as told (one reply for every call, scripted routes by method and path with queues of replies, hangs, delays, answers computed from the request), closes each connection or keeps it open, and counts calls and connections and records every request.

use std::collections::VecDeque;
use std::fmt::Display;
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::http::{self, HttpRequest};
use super::urlenc::form_pairs;

/// One answer of the stand-in.
#[derive(Clone)]
pub enum Reply {
    /// `200 {"download": "https://cdn.test/file/<n>", "filename": "file.bin"}`, n = the call's
    /// number from 1 (`Call::seq`).
    Default,
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
    /// The reply this function makes of the request.
    With(Arc<dyn Fn(&Call) -> Reply + Send + Sync>),
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Default => f.write_str("Default"),
            Reply::Answer {
                status,
                headers,
                body,
            } => write!(f, "Answer({status}, {headers:?}, {body:?})"),
            Reply::Hang => f.write_str("Hang"),
            Reply::After(d, r) => write!(f, "After({d:?}, {r:?})"),
            Reply::With(_) => f.write_str("With(..)"),
        }
    }
}

impl Reply {
    /// `status` with this JSON body (a `serde_json::Value`, or JSON text as it is).
    pub fn json(status: u16, body: impl Display) -> Reply {
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

    /// The reply `make` computes from each request.
    pub fn with(make: impl Fn(&Call) -> Reply + Send + Sync + 'static) -> Reply {
        Reply::With(Arc::new(make))
    }

    /// The same reply with one more header (e.g. `Retry-After`).
    pub fn header(self, name: &str, value: &str) -> Reply {
        let (name, value) = (name.to_owned(), value.to_owned());
        match self {
            Reply::Answer {
                status,
                mut headers,
                body,
            } => {
                headers.push((name, value));
                Reply::Answer {
                    status,
                    headers,
                    body,
                }
            }
            Reply::After(d, inner) => Reply::After(d, Box::new(inner.header(&name, &value))),
            Reply::Default => {
                Reply::with(move |call| default_answer(call.seq).header(&name, &value))
            }
            Reply::With(make) => Reply::with(move |call| make(call).header(&name, &value)),
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
    /// The connection it came on, numbered from 1 in order of acceptance.
    pub connection: usize,
    pub method: String,
    /// The request target as sent: path and query.
    pub target: String,
    pub path: String,
    /// The raw query string (empty when there is none).
    pub raw_query: String,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    /// Form fields when the body is `application/x-www-form-urlencoded`.
    pub form: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Call {
    fn new(request: HttpRequest, connection: usize) -> Call {
        let (path, raw_query) = match request.target.split_once('?') {
            Some((p, q)) => (p.to_owned(), q.to_owned()),
            None => (request.target.clone(), String::new()),
        };
        let form = if request
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"))
        {
            form_pairs(&String::from_utf8_lossy(&request.body))
        } else {
            Vec::new()
        };
        Call {
            seq: 0,
            connection,
            method: request.method,
            target: request.target,
            path,
            query: form_pairs(&raw_query),
            raw_query,
            headers: request.headers,
            form,
            body: request.body,
            at: Instant::now(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        http::header(&self.headers, name)
    }

    pub fn query(&self, name: &str) -> Option<&str> {
        value_of(&self.query, name)
    }

    pub fn form(&self, name: &str) -> Option<&str> {
        value_of(&self.form, name)
    }

    /// The value of `name` in the body read as a form (whatever its type), else in the query.
    pub fn param(&self, name: &str) -> Option<String> {
        form_pairs(&String::from_utf8_lossy(&self.body))
            .into_iter()
            .chain(self.query.iter().cloned())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// Everything received, as text, for "this never appears" searches.
    pub fn everything(&self) -> String {
        let mut s = format!("{} {}\n", self.method, self.target);
        for (k, v) in &self.headers {
            s.push_str(&format!("{k}: {v}\n"));
        }
        s.push_str(&String::from_utf8_lossy(&self.body));
        s
    }

    fn is(&self, method: &str, path: &str) -> bool {
        self.method.eq_ignore_ascii_case(method) && self.path == path
    }
}

fn value_of<'a>(list: &'a [(String, String)], name: &str) -> Option<&'a str> {
    list.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

struct Route {
    method: String,
    path: String,
    queue: VecDeque<Reply>,
    default: Reply,
}

impl Route {
    fn is(&self, method: &str, path: &str) -> bool {
        self.method.eq_ignore_ascii_case(method) && self.path == path
    }
}

struct Script {
    routes: Vec<Route>,
    /// Replies for the next calls that match no route, before `fallback`.
    queue: VecDeque<Reply>,
    /// The reply to calls that match no route; `None`: 404 `no_route`.
    fallback: Option<Reply>,
}

struct Shared {
    script: Mutex<Script>,
    calls: Mutex<Vec<Call>>,
    call_count: AtomicUsize,
    connections: AtomicUsize,
    keep_alive: bool,
    record: bool,
    stop: AtomicBool,
}

impl Shared {
    /// Numbers and records the call and picks its reply, as one step.
    fn take(&self, mut call: Call) -> (Reply, Call) {
        let mut script = self.script.lock().unwrap();
        let mut calls = self.calls.lock().unwrap();
        call.seq = self.call_count.fetch_add(1, Ordering::SeqCst) + 1;
        let reply = match script.routes.iter_mut().find(|r| r.is(&call.method, &call.path)) {
            Some(r) => r.queue.pop_front().unwrap_or_else(|| r.default.clone()),
            None => match script.queue.pop_front() {
                Some(reply) => reply,
                None => script.fallback.clone().unwrap_or_else(|| {
                    Reply::json(
                        404,
                        json!({"error": "no_route", "detail": format!("the stand-in has no route {} {}", call.method, call.path)}),
                    )
                }),
            },
        };
        if self.record {
            calls.push(call.clone());
        }
        (reply, call)
    }

    fn sleep_unless_stopped(&self, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until && !self.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// How a stand-in starts; see `Provider::builder`.
pub struct ProviderBuilder {
    fallback: Option<Reply>,
    keep_alive: bool,
    record: bool,
}

impl ProviderBuilder {
    /// The reply to every call that no route or queue answers (default `Reply::Default`).
    pub fn reply(mut self, reply: Reply) -> ProviderBuilder {
        self.fallback = Some(reply);
        self
    }

    /// Answer only the routes it is given, as a provider's API does: any other call gets
    /// `404 {"error": "no_route"}`.
    pub fn routes_only(mut self) -> ProviderBuilder {
        self.fallback = None;
        self
    }

    /// Keep each connection open for the next request, as real provider APIs do (default:
    /// answer with `Connection: close` and close). A request with `Connection: close` still
    /// closes its connection.
    pub fn keep_alive(mut self) -> ProviderBuilder {
        self.keep_alive = true;
        self
    }

    /// Count calls without keeping the requests (for benchmarks: nothing grows).
    pub fn without_recording(mut self) -> ProviderBuilder {
        self.record = false;
        self
    }

    pub fn start(self) -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the provider stand-in");
        let addr = listener.local_addr().expect("provider address");
        let shared = Arc::new(Shared {
            script: Mutex::new(Script {
                routes: Vec::new(),
                queue: VecDeque::new(),
                fallback: self.fallback,
            }),
            calls: Mutex::new(Vec::new()),
            call_count: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            keep_alive: self.keep_alive,
            record: self.record,
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let accept_thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let n = s.connections.fetch_add(1, Ordering::SeqCst) + 1;
                let s = s.clone();
                std::thread::spawn(move || serve(conn, n, &s));
            }
        });
        Provider {
            addr,
            shared,
            accept_thread: Some(accept_thread),
        }
    }
}

/// The stand-in server. Stopped on drop.
pub struct Provider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

impl Provider {
    /// Answers every call `Reply::Default`, one connection per call.
    pub fn start() -> Provider {
        Provider::builder().start()
    }

    /// Answers every call with `reply`, one connection per call.
    pub fn start_with(reply: Reply) -> Provider {
        Provider::builder().reply(reply).start()
    }

    pub fn builder() -> ProviderBuilder {
        ProviderBuilder {
            fallback: Some(Reply::Default),
            keep_alive: false,
            record: true,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT<path>`
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The reply to calls that no route or queue answers, from now on.
    pub fn set_reply(&self, reply: Reply) {
        self.shared.script.lock().unwrap().fallback = Some(reply);
    }

    /// Replies for the next calls that match no route, before the reply set for all.
    pub fn queue(&self, replies: impl IntoIterator<Item = Reply>) -> &Provider {
        self.shared.script.lock().unwrap().queue.extend(replies);
        self
    }

    /// Answers `method path` with `default` once its queue is used up (creates the route).
    pub fn route(&self, method: &str, path: &str, default: Reply) -> &Provider {
        let mut script = self.shared.script.lock().unwrap();
        match script.routes.iter_mut().find(|r| r.is(method, path)) {
            Some(r) => r.default = default,
            None => script.routes.push(Route {
                method: method.to_ascii_uppercase(),
                path: path.to_owned(),
                queue: VecDeque::new(),
                default,
            }),
        }
        self
    }

    /// Queues replies for the next calls of `method path`, before its default (creates the
    /// route, with a 500 `script_used_up` default, if it does not exist).
    pub fn script(
        &self,
        method: &str,
        path: &str,
        replies: impl IntoIterator<Item = Reply>,
    ) -> &Provider {
        let mut script = self.shared.script.lock().unwrap();
        if !script.routes.iter().any(|r| r.is(method, path)) {
            script.routes.push(Route {
                method: method.to_ascii_uppercase(),
                path: path.to_owned(),
                queue: VecDeque::new(),
                default: Reply::json(500, json!({"error": "script_used_up"})),
            });
        }
        let route = script
            .routes
            .iter_mut()
            .find(|r| r.is(method, path))
            .expect("route just made");
        route.queue.extend(replies);
        self
    }

    /// Calls received so far, routed or not.
    pub fn calls(&self) -> usize {
        self.shared.call_count.load(Ordering::SeqCst)
    }

    /// Calls of `method path` received so far.
    pub fn calls_to(&self, method: &str, path: &str) -> usize {
        self.requests_to(method, path).len()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Every request received, in order of arrival.
    pub fn requests(&self) -> Vec<Call> {
        self.shared.calls.lock().unwrap().clone()
    }

    pub fn last_request(&self) -> Option<Call> {
        self.shared.calls.lock().unwrap().last().cloned()
    }

    /// The requests to `method path`, in order.
    pub fn requests_to(&self, method: &str, path: &str) -> Vec<Call> {
        self.requests()
            .into_iter()
            .filter(|c| c.is(method, path))
            .collect()
    }

    /// `METHOD path` of every request, in order.
    pub fn sequence(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|c| format!("{} {}", c.method, c.path))
            .collect()
    }

    /// Forgets routes, queues, counts and recorded requests (keeps the reply set for all).
    pub fn reset(&self) {
        let mut script = self.shared.script.lock().unwrap();
        let mut calls = self.shared.calls.lock().unwrap();
        script.routes.clear();
        script.queue.clear();
        calls.clear();
        self.shared.call_count.store(0, Ordering::SeqCst);
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

fn default_answer(n: usize) -> Reply {
    Reply::ok(json!({"download": format!("https://cdn.test/file/{n}"), "filename": "file.bin"}))
}

/// Answers the requests of one connection: one, or in keep-alive mode until the client closes
/// or asks to.
fn serve(conn: TcpStream, connection: usize, shared: &Shared) {
    let idle = if shared.keep_alive { 120 } else { 30 };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(idle)));
    let _ = conn.set_nodelay(true);
    let Ok(read_half) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut writer = conn;
    while let Some(request) = http::read_request(&mut reader) {
        let keep = shared.keep_alive && request.keeps_alive();
        let (mut reply, call) = shared.take(Call::new(request, connection));
        let (status, headers, body) = loop {
            match reply {
                Reply::Default => reply = default_answer(call.seq),
                Reply::With(make) => reply = make(&call),
                Reply::Hang => {
                    shared.sleep_unless_stopped(Duration::from_secs(300));
                    return;
                }
                Reply::After(d, inner) => {
                    shared.sleep_unless_stopped(d);
                    if shared.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    reply = *inner;
                }
                Reply::Answer {
                    status,
                    headers,
                    body,
                } => break (status, headers, body),
            }
        };
        let mut head = format!("HTTP/1.1 {status} {}\r\n", http::reason(status));
        if http::header(&headers, "content-type").is_none() {
            head.push_str("Content-Type: application/json\r\n");
        }
        for (k, v) in &headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        if !keep {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        head.push_str(&body);
        if writer.write_all(head.as_bytes()).is_err() || !keep {
            let _ = writer.flush();
            return;
        }
    }
}
