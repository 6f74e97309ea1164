//! FastCGI mode: the responder role of FastCGI 1.0, as mod_fcgid speaks it. The web server
//! starts the program with a listening socket as standard input (spec section 2.2) and sends each
//! request as records on a connection to it; the process answers one request after another,
//! with the same code and the same bytes as CGI mode: the CGI answer travels in FCGI_STDOUT
//! records and the server reads its headers as it reads a CGI program's. What CGI mode rebuilds
//! for every request is kept: the configuration (read again only when its file changes, so an
//! edit applies to the next request as it does under CGI), the store with its connection, and the
//! provider's HTTP agent with its idle connections.
//!
//! Own implementation: the FastCGI crates on crates.io do not fit. `fastcgi` (last release 2018)
//! parses with `unsafe` transmutes over libc; `outer_cgi` brings threads, channels and its own
//! signal handlers; `gfcgi` has no licence; the maintained ones (`tokio-fastcgi` and others) are
//! async. The responder role without multiplexing is small: records, name-value pairs, and one
//! request at a time per connection, which is all mod_fcgid sends.
//!
//! Robustness: [`parse_record`] and [`parse_pairs`] are pure and total (any bytes give a value,
//! "need more", or an error, never a panic), and every buffer is bounded. A connection that sends
//! malformed records is closed with one log line; the process goes on with the next connection.
//! Unknown management records get FCGI_UNKNOWN_TYPE, FCGI_GET_VALUES is answered, a second
//! request on a busy connection gets FCGI_CANT_MPX_CONN, other roles FCGI_UNKNOWN_ROLE.
//!
//! Stopping: after `fastcgi.max_requests` requests the process shuts its Unix socket for new
//! connections (mod_fcgid, refused, turns to another process), answers the connections already
//! waiting, and exits; the web server starts a fresh one when it needs one. No request is lost
//! on the way (tests/fastcgi.rs renews processes under load).
//! SIGTERM (how mod_fcgid retires a process) keeps its default action, ending the process at
//! once: the program installs no signal handler (a handler needs `unsafe` code and would have
//! nothing to save). mod_fcgid sends it to idle
//! processes (idle timeout, lifetime, request count), which wait in `accept` with nothing begun.
//! Only at server shutdown, or past `FcgidBusyTimeout`, can a busy process be ended mid-request,
//! exactly as a CGI process would be: the stores are made for that (the file store writes the
//! counter before admitting; a database transaction that did not commit is rolled back), so a
//! request is counted or not but never half-counted, and its answer is written with a single
//! `write`, so the server gets all of it or none.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use socket2::Socket;

use crate::config::locate::{self, Located};
use crate::defaults;
use crate::http::request::Env;
use crate::log::{Level, Log, StderrLog};
use crate::site::{self, Site};

/// Record types (spec section 8).
pub const BEGIN_REQUEST: u8 = 1;
pub const ABORT_REQUEST: u8 = 2;
pub const END_REQUEST: u8 = 3;
pub const PARAMS: u8 = 4;
pub const STDIN: u8 = 5;
pub const STDOUT: u8 = 6;
pub const STDERR: u8 = 7;
pub const DATA: u8 = 8;
pub const GET_VALUES: u8 = 9;
pub const GET_VALUES_RESULT: u8 = 10;
pub const UNKNOWN_TYPE: u8 = 11;

/// The role this program plays; FCGI_AUTHORIZER (2) and FCGI_FILTER (3) are refused.
pub const RESPONDER: u16 = 1;
/// FCGI_BeginRequestBody flag: keep the connection open after the request.
pub const KEEP_CONN: u8 = 1;

/// FCGI_EndRequestBody protocol status values.
pub const REQUEST_COMPLETE: u8 = 0;
pub const CANT_MPX_CONN: u8 = 1;
pub const OVERLOADED: u8 = 2;
pub const UNKNOWN_ROLE: u8 = 3;

const VERSION_1: u8 = 1;
const HEADER_LEN: usize = 8;
/// Largest content of one record.
const MAX_CONTENT: usize = 0xffff;
/// Most PARAMS bytes one request may send. Apache sends at most 100 header fields of 8 KiB
/// (LimitRequestFields, LimitRequestFieldSize) plus its own variables: well under this.
const MAX_PARAMS_BYTES: usize = 2 * 1024 * 1024;
/// Most request body kept; the rest of a larger one is read and dropped. It is the largest
/// `request.max_body_bytes` accepts, and a body over the configured cap is refused (413) unread.
const MAX_STDIN_KEPT: usize = 1024 * 1024;
/// Longest wait for the web server's next bytes, on a new connection or inside a request.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// One record: its type, request id and content (padding dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub kind: u8,
    pub request_id: u16,
    pub content: Vec<u8>,
}

/// A protocol error: the connection that sent it is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A record header with a version other than 1.
    Version(u8),
    /// An FCGI_BEGIN_REQUEST whose body is not 8 bytes.
    BeginBody(usize),
    /// Name-value pairs whose lengths run past their data.
    Pairs,
    /// A second FCGI_BEGIN_REQUEST for the request under way.
    Repeated(u16),
    /// A stream record after that stream's end.
    AfterEnd(&'static str),
    /// More PARAMS than any web server sends.
    TooManyParams,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Version(v) => write!(f, "a record of protocol version {v} (only 1 exists)"),
            Error::BeginBody(n) => write!(f, "an FCGI_BEGIN_REQUEST body of {n} bytes, not 8"),
            Error::Pairs => f.write_str("name-value pairs longer than their record"),
            Error::Repeated(id) => write!(f, "a second FCGI_BEGIN_REQUEST for request {id}"),
            Error::AfterEnd(stream) => write!(f, "an {stream} record after the stream ended"),
            Error::TooManyParams => write!(f, "more than {MAX_PARAMS_BYTES} bytes of FCGI_PARAMS"),
        }
    }
}

/// Reads one record from the start of `buf`: `Ok(None)` when `buf` does not hold a whole one
/// yet, else the record and the bytes it took (header, content and padding).
pub fn parse_record(buf: &[u8]) -> Result<Option<(Record, usize)>, Error> {
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let Ok([version, kind, id1, id0, len1, len0, padding, _reserved]) =
        <[u8; HEADER_LEN]>::try_from(header)
    else {
        return Ok(None);
    };
    if version != VERSION_1 {
        return Err(Error::Version(version));
    }
    let content_end = HEADER_LEN + usize::from(u16::from_be_bytes([len1, len0]));
    let total = content_end + usize::from(padding);
    match (buf.get(HEADER_LEN..content_end), buf.len() >= total) {
        (Some(content), true) => Ok(Some((
            Record {
                kind,
                request_id: u16::from_be_bytes([id1, id0]),
                content: content.to_vec(),
            },
            total,
        ))),
        _ => Ok(None),
    }
}

/// One length of a name-value pair: one byte below 128, else four with the top bit set.
fn pair_len(data: &[u8]) -> Result<(usize, &[u8]), Error> {
    match data {
        [b, rest @ ..] if b & 0x80 == 0 => Ok((usize::from(*b), rest)),
        [b3, b2, b1, b0, rest @ ..] => {
            let n = u32::from_be_bytes([b3 & 0x7f, *b2, *b1, *b0]);
            Ok((usize::try_from(n).map_err(|_| Error::Pairs)?, rest))
        }
        _ => Err(Error::Pairs),
    }
}

/// Name-value pairs, in order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Name-value pairs (spec section 3.4), as in FCGI_PARAMS and FCGI_GET_VALUES.
pub fn parse_pairs(mut data: &[u8]) -> Result<Pairs, Error> {
    let mut pairs = Vec::new();
    while !data.is_empty() {
        let (name_len, rest) = pair_len(data)?;
        let (value_len, rest) = pair_len(rest)?;
        let value_end = name_len.checked_add(value_len).ok_or(Error::Pairs)?;
        let name = rest.get(..name_len).ok_or(Error::Pairs)?;
        let value = rest.get(name_len..value_end).ok_or(Error::Pairs)?;
        pairs.push((name.to_vec(), value.to_vec()));
        data = rest.get(value_end..).ok_or(Error::Pairs)?;
    }
    Ok(pairs)
}

/// Appends one record, padded to a multiple of 8 bytes. `content` longer than a record holds is
/// cut: streams go through [`encode_stream`].
pub fn encode_record(out: &mut Vec<u8>, kind: u8, request_id: u16, content: &[u8]) {
    let content = content.get(..MAX_CONTENT).unwrap_or(content);
    let padding = (8 - content.len() % 8) % 8;
    let [id1, id0] = request_id.to_be_bytes();
    let [len1, len0] = u16::try_from(content.len())
        .unwrap_or(u16::MAX)
        .to_be_bytes();
    out.extend_from_slice(&[VERSION_1, kind, id1, id0, len1, len0, padding as u8, 0]);
    out.extend_from_slice(content);
    out.extend_from_slice(&[0; 8][..padding]);
}

/// Appends a whole stream: `data` in records of at most 65535 bytes, then the empty record
/// that ends it.
pub fn encode_stream(out: &mut Vec<u8>, kind: u8, request_id: u16, data: &[u8]) {
    for chunk in data.chunks(MAX_CONTENT) {
        encode_record(out, kind, request_id, chunk);
    }
    encode_record(out, kind, request_id, &[]);
}

/// Appends name-value pairs in the protocol's encoding.
pub fn encode_pairs(out: &mut Vec<u8>, pairs: &[(&[u8], &[u8])]) {
    for (name, value) in pairs {
        for len in [name.len(), value.len()] {
            match u8::try_from(len) {
                Ok(short) if short < 0x80 => out.push(short),
                _ => {
                    let long = u32::try_from(len).unwrap_or(u32::MAX >> 1) | 0x8000_0000;
                    out.extend_from_slice(&long.to_be_bytes());
                }
            }
        }
        out.extend_from_slice(name);
        out.extend_from_slice(value);
    }
}

/// Appends FCGI_END_REQUEST.
pub fn encode_end(out: &mut Vec<u8>, request_id: u16, app_status: u32, protocol_status: u8) {
    let mut body = [0u8; 8];
    body[..4].copy_from_slice(&app_status.to_be_bytes());
    body[4] = protocol_status;
    encode_record(out, END_REQUEST, request_id, &body);
}

/// The answer to FCGI_GET_VALUES: the variables asked for that this program knows.
fn get_values_result(query: &[u8]) -> Result<Vec<u8>, Error> {
    let mut known: Vec<(&[u8], &[u8])> = Vec::new();
    for (name, _) in parse_pairs(query)? {
        let value: &[u8] = match name.as_slice() {
            b"FCGI_MAX_CONNS" | b"FCGI_MAX_REQS" => b"1",
            b"FCGI_MPXS_CONNS" => b"0",
            _ => continue,
        };
        let name: &[u8] = match name.as_slice() {
            b"FCGI_MAX_CONNS" => b"FCGI_MAX_CONNS",
            b"FCGI_MAX_REQS" => b"FCGI_MAX_REQS",
            _ => b"FCGI_MPXS_CONNS",
        };
        known.push((name, value));
    }
    let mut content = Vec::new();
    encode_pairs(&mut content, &known);
    let mut out = Vec::new();
    encode_record(&mut out, GET_VALUES_RESULT, 0, &content);
    Ok(out)
}

/// One request as the web server sent it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// The CGI meta-variables (FCGI_PARAMS).
    pub params: Pairs,
    /// The request body (FCGI_STDIN), at most the first MiB of it.
    pub stdin: Vec<u8>,
}

/// A connection to the web server.
pub trait Connection: Read + Write {
    /// Told `true` while the connection waits, kept open, for its next request (as long as the
    /// server likes), `false` once a request is under way again (bounded waits).
    fn idle(&mut self, _idle: bool) {}
}

impl Connection for Socket {
    fn idle(&mut self, idle: bool) {
        let _ = self.set_read_timeout((!idle).then_some(IO_TIMEOUT));
    }
}

/// What answers the requests of a connection.
pub trait Responder {
    /// The CGI answer (headers, blank line, body) to one request.
    fn respond(&mut self, request: &Request) -> Vec<u8>;
    /// Runs once the answer is written: work the client must not wait for.
    fn after(&mut self) {}
    /// True when the process should take no more requests.
    fn done(&self) -> bool {
        false
    }
}

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The server closed it between requests, or a request without FCGI_KEEP_CONN was answered.
    Closed,
    /// The responder takes no more requests.
    Done,
    /// Closed on a protocol error, a read or write failure, or a close in mid-request: the
    /// reason, for the log.
    Broken(String),
}

/// A request being received.
struct Pending {
    id: u16,
    keep_conn: bool,
    params: Vec<u8>,
    params_done: bool,
    stdin: Vec<u8>,
    stdin_done: bool,
}

enum Step {
    Next,
    End(Ended),
}

/// Serves the requests of one connection, one at a time, until the server closes it, a
/// request without FCGI_KEEP_CONN is answered, the responder is done, or something is wrong.
pub fn serve_connection<S: Connection>(stream: &mut S, responder: &mut dyn Responder) -> Ended {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut pending: Option<Pending> = None;
    let mut answered = false;
    let mut idle = false;
    loop {
        let mut used = 0;
        loop {
            let rest = buf.get(used..).unwrap_or_default();
            match parse_record(rest) {
                Err(e) => return Ended::Broken(e.to_string()),
                Ok(None) => break,
                Ok(Some((record, len))) => {
                    used += len;
                    let was_pending = pending.is_some();
                    match step(record, &mut pending, stream, responder) {
                        Ok(Step::Next) => answered |= was_pending && pending.is_none(),
                        Ok(Step::End(ended)) => return ended,
                        Err(e) => return Ended::Broken(e.to_string()),
                    }
                }
            }
        }
        buf.drain(..used);
        let now_idle = answered && buf.is_empty() && pending.is_none();
        if now_idle != idle {
            stream.idle(now_idle);
            idle = now_idle;
        }
        match stream.read(&mut chunk) {
            Ok(0) if buf.is_empty() && pending.is_none() => return Ended::Closed,
            Ok(0) => {
                return Ended::Broken(
                    "the web server closed the connection in the middle of a request".into(),
                );
            }
            Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Ended::Broken(format!("reading from the web server failed: {e}")),
        }
    }
}

fn send<S: Write>(stream: &mut S, bytes: &[u8]) -> Result<(), Step> {
    stream
        .write_all(bytes)
        .and_then(|()| stream.flush())
        .map_err(|e| {
            Step::End(Ended::Broken(format!(
                "writing to the web server failed: {e}"
            )))
        })
}

/// Takes one record; answers the request when its last record came.
fn step<S: Write>(
    record: Record,
    pending: &mut Option<Pending>,
    stream: &mut S,
    responder: &mut dyn Responder,
) -> Result<Step, Error> {
    let id = record.request_id;
    if id == 0 {
        // A management record.
        let reply = if record.kind == GET_VALUES {
            get_values_result(&record.content)?
        } else {
            let mut out = Vec::new();
            encode_record(
                &mut out,
                UNKNOWN_TYPE,
                0,
                &[record.kind, 0, 0, 0, 0, 0, 0, 0],
            );
            out
        };
        return Ok(send(stream, &reply).err().unwrap_or(Step::Next));
    }
    let active = pending.as_ref().is_some_and(|p| p.id == id);
    match record.kind {
        BEGIN_REQUEST => {
            let [role1, role0, flags, ..] = record.content[..] else {
                return Err(Error::BeginBody(record.content.len()));
            };
            if record.content.len() != 8 {
                return Err(Error::BeginBody(record.content.len()));
            }
            if active {
                return Err(Error::Repeated(id));
            }
            let status = if pending.is_some() {
                Some(CANT_MPX_CONN)
            } else if u16::from_be_bytes([role1, role0]) != RESPONDER {
                Some(UNKNOWN_ROLE)
            } else {
                None
            };
            if let Some(status) = status {
                let mut out = Vec::new();
                encode_end(&mut out, id, 0, status);
                if let Err(step) = send(stream, &out) {
                    return Ok(step);
                }
                let keep = pending.is_some() || flags & KEEP_CONN != 0;
                return Ok(if keep {
                    Step::Next
                } else {
                    Step::End(Ended::Closed)
                });
            }
            *pending = Some(Pending {
                id,
                keep_conn: flags & KEEP_CONN != 0,
                params: Vec::new(),
                params_done: false,
                stdin: Vec::new(),
                stdin_done: false,
            });
            Ok(Step::Next)
        }
        ABORT_REQUEST if active => {
            let keep = pending.take().is_some_and(|p| p.keep_conn);
            let mut out = Vec::new();
            encode_end(&mut out, id, 0, REQUEST_COMPLETE);
            if let Err(step) = send(stream, &out) {
                return Ok(step);
            }
            Ok(if keep {
                Step::Next
            } else {
                Step::End(Ended::Closed)
            })
        }
        PARAMS | STDIN if active => {
            let Some(p) = pending.as_mut() else {
                return Ok(Step::Next);
            };
            if record.kind == PARAMS {
                if p.params_done {
                    return Err(Error::AfterEnd("FCGI_PARAMS"));
                }
                if record.content.is_empty() {
                    p.params_done = true;
                } else if p.params.len() + record.content.len() > MAX_PARAMS_BYTES {
                    return Err(Error::TooManyParams);
                } else {
                    p.params.extend_from_slice(&record.content);
                }
            } else {
                if p.stdin_done {
                    return Err(Error::AfterEnd("FCGI_STDIN"));
                }
                if record.content.is_empty() {
                    p.stdin_done = true;
                } else {
                    let room = MAX_STDIN_KEPT.saturating_sub(p.stdin.len());
                    let kept = record.content.get(..room).unwrap_or(&record.content);
                    p.stdin.extend_from_slice(kept);
                }
            }
            if !(p.params_done && p.stdin_done) {
                return Ok(Step::Next);
            }
            let Some(p) = pending.take() else {
                return Ok(Step::Next);
            };
            let request = Request {
                params: parse_pairs(&p.params)?,
                stdin: p.stdin,
            };
            let answer = responder.respond(&request);
            let mut out = Vec::with_capacity(answer.len() + 64);
            encode_stream(&mut out, STDOUT, id, &answer);
            encode_end(&mut out, id, 0, REQUEST_COMPLETE);
            let sent = send(stream, &out);
            responder.after();
            if let Err(step) = sent {
                return Ok(step);
            }
            Ok(if responder.done() {
                Step::End(Ended::Done)
            } else if p.keep_conn {
                Step::Next
            } else {
                Step::End(Ended::Closed)
            })
        }
        // Records of other requests, FCGI_DATA (filter role only), types this version does not
        // know: ignored, as the spec asks.
        _ => Ok(Step::Next),
    }
}

/// The listening socket the web server passed as standard input, if it did: `getpeername` on
/// it fails with ENOTCONN (spec section 2.2). A pipe, file or terminal (ENOTSOCK) and a
/// connected socket give None: CGI, or a command.
pub fn listener_on_stdin() -> Option<Socket> {
    let fd = io::stdin().as_fd().try_clone_to_owned().ok()?;
    let socket = Socket::from(fd);
    match socket.peer_addr() {
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Some(socket),
        _ => None,
    }
}

/// The identity of a file as far as change goes: an edit, a replacement or a removal changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    let m = fs::metadata(path).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    })
}

/// A site and what it was loaded from.
struct Loaded {
    /// The RESOLVE_CONFIG it was located with.
    name: Option<OsString>,
    /// The file that holds it (or would: the home directory's, while defaults apply), and that
    /// file's stamp when it was read.
    watched: PathBuf,
    stamp: Option<Stamp>,
    site: Site,
}

impl Loaded {
    fn load(name: Option<OsString>) -> Result<Loaded, String> {
        let located = locate::locate(None, name.clone())?;
        let watched = match &located {
            Located::File(source) => source.path().to_owned(),
            Located::Defaults { base } => base.join(defaults::CONFIG_FILE_NAME),
        };
        // Stamped before reading: a change made during the read is seen at the next request.
        let stamp = stamp(&watched);
        let config = locate::load(&located)?;
        Ok(Loaded {
            name,
            watched,
            stamp,
            site: Site::new(config),
        })
    }

    fn is_current(&self, name: &Option<OsString>) -> bool {
        self.name == *name && stamp(&self.watched) == self.stamp
    }
}

/// Answers requests with a site loaded once and kept while its configuration stays the same.
#[derive(Default)]
pub struct Sites {
    loaded: Option<Loaded>,
    served: u64,
    answered_by_site: bool,
}

impl Sites {
    pub fn new() -> Sites {
        Sites::default()
    }

    /// The site for a request whose RESOLVE_CONFIG (a FastCGI param, as `SetEnv` sends it, else
    /// the process's own, as `FcgidInitialEnv` sets it) is `name`.
    fn site(&mut self, name: Option<OsString>) -> Result<&Site, String> {
        if !self.loaded.as_ref().is_some_and(|l| l.is_current(&name)) {
            // Dropped first: a store connection is never open twice.
            self.loaded = None;
            self.loaded = Some(Loaded::load(name)?);
        }
        match &self.loaded {
            Some(l) => Ok(&l.site),
            None => Err("no configuration".into()),
        }
    }

    /// Requests answered so far.
    pub fn served(&self) -> u64 {
        self.served
    }
}

/// The meta-variables of a request, from its FCGI_PARAMS.
pub fn env_from_params(params: &[(Vec<u8>, Vec<u8>)]) -> Env {
    let mut env = Env::new();
    for (name, value) in params {
        if let Ok(name) = std::str::from_utf8(name) {
            env.set(name, value.clone());
        }
    }
    env
}

impl Responder for Sites {
    fn respond(&mut self, request: &Request) -> Vec<u8> {
        let env = env_from_params(&request.params);
        self.served += 1;
        let name = env
            .get(defaults::CONFIG_ENV)
            .filter(|v| !v.is_empty())
            .map(|v| OsString::from_vec(v.to_vec()))
            .or_else(|| std::env::var_os(defaults::CONFIG_ENV));
        let answer = match self.site(name) {
            Ok(site) => {
                let answer = site.app().handle(&env, &mut &request.stdin[..]);
                self.answered_by_site = true;
                answer
            }
            Err(message) => {
                self.answered_by_site = false;
                site::not_configured(&env, &message)
            }
        };
        let mut out = Vec::with_capacity(256 + answer.response.body.len());
        // Writing to a Vec cannot fail.
        let _ = answer.response.write_cgi(&mut out, answer.head_only);
        out
    }

    fn after(&mut self) {
        if self.answered_by_site
            && let Some(l) = &self.loaded
        {
            l.site.app().maybe_sweep();
        }
    }

    fn done(&self) -> bool {
        let max = self
            .loaded
            .as_ref()
            .map_or(defaults::FASTCGI_MAX_REQUESTS, |l| {
                l.site.config.fastcgi_max_requests
            });
        self.served >= u64::from(max)
    }
}

/// FCGI_WEB_SERVER_ADDRS: the addresses a TCP listener takes connections from (spec 3.2).
fn allowed_servers() -> Option<Vec<IpAddr>> {
    let list = std::env::var("FCGI_WEB_SERVER_ADDRS").ok()?;
    Some(
        list.split(',')
            .filter_map(|a| a.trim().parse().ok())
            .collect(),
    )
}

/// Serves the connections to `listener` until the responder is done; a connection's failure
/// is logged and ends that connection only.
pub fn serve(listener: &Socket, responder: &mut dyn Responder) -> io::Result<()> {
    let log = StderrLog::default();
    let allowed = allowed_servers();
    let mut draining = false;
    loop {
        let conn = match listener.accept() {
            Ok((conn, peer)) => {
                let peer_ip = peer.as_socket().map(|a| a.ip());
                if let (Some(ip), Some(list)) = (peer_ip, &allowed)
                    && !list.contains(&ip)
                {
                    log.line(
                        Level::Warn,
                        &format!(
                            "FastCGI connection from {ip} refused: not in FCGI_WEB_SERVER_ADDRS"
                        ),
                    );
                    continue;
                }
                conn
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Done, and no connection is waiting any more.
            Err(e) if draining && e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        };
        let _ = conn.set_nonblocking(false);
        let _ = conn.set_read_timeout(Some(IO_TIMEOUT));
        let _ = conn.set_write_timeout(Some(IO_TIMEOUT));
        let mut conn = conn;
        if let Ended::Broken(reason) = serve_connection(&mut conn, responder) {
            log.line(Level::Warn, &format!("FastCGI connection closed: {reason}"));
        }
        if responder.done() && !draining {
            // No new connection, then answer those already waiting, then exit. A Unix socket
            // shut down for reading refuses new connections (mod_fcgid then turns to another
            // process) and still hands out the waiting ones; a TCP one would drop them, so it
            // is left as it is.
            draining = true;
            if listener
                .local_addr()
                .is_ok_and(|a| a.domain() == socket2::Domain::UNIX)
            {
                listener.shutdown(std::net::Shutdown::Read)?;
            }
            listener.set_nonblocking(true)?;
        }
    }
}

/// Runs the process in FastCGI mode on the listening socket from standard input.
pub fn run(listener: Socket) -> ExitCode {
    let mut sites = Sites::new();
    match serve(&listener, &mut sites) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            StderrLog::default().line(
                Level::Error,
                &format!(
                    "FastCGI: accepting connections failed after {} requests: {e}",
                    sites.served()
                ),
            );
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection in memory: reads from `input`, writes to `output`.
    struct Pipe {
        input: io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Pipe {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Connection for Pipe {}

    impl Write for Pipe {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Answers with the request's QUERY_STRING and body; stops after `max` requests.
    struct Echo {
        seen: Vec<Request>,
        max: usize,
    }

    impl Responder for Echo {
        fn respond(&mut self, request: &Request) -> Vec<u8> {
            self.seen.push(request.clone());
            let env = env_from_params(&request.params);
            let mut out = b"Status: 200 OK\nContent-Type: text/plain\n\n".to_vec();
            out.extend_from_slice(env.get("QUERY_STRING").unwrap_or_default());
            out.push(b'|');
            out.extend_from_slice(&request.stdin);
            out
        }
        fn done(&self) -> bool {
            self.seen.len() >= self.max
        }
    }

    fn echo() -> Echo {
        Echo {
            seen: Vec::new(),
            max: usize::MAX,
        }
    }

    fn begin(out: &mut Vec<u8>, id: u16, role: u16, flags: u8) {
        let [r1, r0] = role.to_be_bytes();
        encode_record(out, BEGIN_REQUEST, id, &[r1, r0, flags, 0, 0, 0, 0, 0]);
    }

    /// A whole request as a web server sends it.
    fn request(id: u16, flags: u8, query: &str, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        begin(&mut out, id, RESPONDER, flags);
        let mut params = Vec::new();
        encode_pairs(
            &mut params,
            &[
                (b"REQUEST_METHOD", b"GET"),
                (b"QUERY_STRING", query.as_bytes()),
            ],
        );
        encode_stream(&mut out, PARAMS, id, &params);
        encode_stream(&mut out, STDIN, id, body);
        out
    }

    fn run(input: Vec<u8>, responder: &mut dyn Responder) -> (Ended, Vec<Record>) {
        let mut pipe = Pipe {
            input: io::Cursor::new(input),
            output: Vec::new(),
        };
        let ended = serve_connection(&mut pipe, responder);
        (ended, records(&pipe.output))
    }

    fn records(mut bytes: &[u8]) -> Vec<Record> {
        let mut out = Vec::new();
        while let Some((r, n)) = parse_record(bytes).expect("valid output") {
            assert_eq!(n % 8, 0, "records are padded to 8 bytes");
            out.push(r);
            bytes = &bytes[n..];
        }
        assert!(bytes.is_empty(), "a partial record was written");
        out
    }

    /// Each request's STDOUT stream and END_REQUEST protocol status, in the order they ended.
    fn answers(records: &[Record]) -> Vec<(u16, Vec<u8>, u8)> {
        let mut out = Vec::new();
        let mut stdout: Vec<u8> = Vec::new();
        let mut ended_stream = false;
        for r in records.iter().filter(|r| r.request_id != 0) {
            match r.kind {
                STDOUT if r.content.is_empty() => ended_stream = true,
                STDOUT => {
                    assert!(!ended_stream, "STDOUT after its end");
                    stdout.extend_from_slice(&r.content);
                }
                END_REQUEST => {
                    assert_eq!(r.content[..4], [0, 0, 0, 0], "app status 0");
                    assert_eq!(ended_stream, !stdout.is_empty(), "STDOUT ended once");
                    out.push((r.request_id, std::mem::take(&mut stdout), r.content[4]));
                    ended_stream = false;
                }
                other => panic!("unexpected record type {other}"),
            }
        }
        out
    }

    /// The STDOUT stream of request `id` and its END_REQUEST's protocol status.
    fn answer_of(records: &[Record], id: u16) -> (Vec<u8>, Option<u8>) {
        answers(records)
            .into_iter()
            .find(|a| a.0 == id)
            .map_or((Vec::new(), None), |(_, out, status)| (out, Some(status)))
    }

    #[test]
    fn records_round_trip_and_need_whole_input() {
        let mut out = Vec::new();
        encode_record(&mut out, STDIN, 258, b"hello");
        assert_eq!(out.len(), 16);
        assert_eq!(&out[..8], &[1, STDIN, 1, 2, 0, 5, 3, 0]);
        for cut in 0..out.len() {
            assert_eq!(parse_record(&out[..cut]), Ok(None), "cut at {cut}");
        }
        let (r, n) = parse_record(&out).unwrap().unwrap();
        assert_eq!(
            (r.kind, r.request_id, r.content.as_slice(), n),
            (STDIN, 258, &b"hello"[..], 16)
        );
        assert_eq!(
            parse_record(&[2, 1, 0, 1, 0, 0, 0, 0]),
            Err(Error::Version(2))
        );
        // Streams longer than a record are split; the empty record ends them.
        let big = vec![7u8; 70_000];
        let mut out = Vec::new();
        encode_stream(&mut out, STDOUT, 1, &big);
        let rs = records(&out);
        assert_eq!(rs.len(), 3);
        assert_eq!(
            rs.iter().map(|r| r.content.len()).collect::<Vec<_>>(),
            [65535, 4465, 0]
        );
    }

    #[test]
    fn pairs_round_trip_with_short_and_long_lengths() {
        let long = vec![b'x'; 300];
        let pairs: Vec<(&[u8], &[u8])> = vec![(b"A", b""), (b"LONG", &long), (&long, b"v")];
        let mut out = Vec::new();
        encode_pairs(&mut out, &pairs);
        let back = parse_pairs(&out).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back[1].1, long);
        assert_eq!(back[2].0, long);
        // Cut anywhere but between two pairs, the data is incomplete.
        let boundaries = [3, 3 + 1 + 4 + 4 + 300];
        for cut in (1..out.len()).filter(|c| !boundaries.contains(c)) {
            assert!(parse_pairs(&out[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(parse_pairs(&out[..3]).unwrap().len(), 1);
        // A length of 2^31 - 1 names bytes that are not there.
        assert_eq!(parse_pairs(&[0xff, 0xff, 0xff, 0xff, 0]), Err(Error::Pairs));
    }

    #[test]
    fn answers_requests_one_after_another_on_a_kept_connection() {
        let mut input = request(1, KEEP_CONN, "a=1", b"");
        input.extend(request(1, KEEP_CONN, "b=2", b"body"));
        input.extend(request(9, 0, "c=3", b""));
        let mut e = echo();
        let (ended, rs) = run(input, &mut e);
        assert_eq!(ended, Ended::Closed);
        assert_eq!(e.seen.len(), 3);
        assert_eq!(e.seen[1].stdin, b"body");
        let all = answers(&rs);
        let ids: Vec<u16> = all.iter().map(|a| a.0).collect();
        assert_eq!(ids, [1, 1, 9]);
        for ((_, out, status), want) in all.iter().zip(["a=1|", "b=2|body", "c=3|"]) {
            assert!(
                out.ends_with(format!("\n\n{want}").as_bytes()),
                "{}",
                String::from_utf8_lossy(out)
            );
            assert_eq!(*status, REQUEST_COMPLETE);
        }
    }

    #[test]
    fn without_keep_conn_the_connection_closes_after_the_answer() {
        let mut input = request(1, 0, "a=1", b"");
        input.extend(request(2, 0, "never", b""));
        let mut e = echo();
        let (ended, rs) = run(input, &mut e);
        assert_eq!(ended, Ended::Closed);
        assert_eq!(e.seen.len(), 1);
        assert!(rs.iter().all(|r| r.request_id == 1));
    }

    #[test]
    fn stops_taking_requests_when_the_responder_is_done() {
        let mut input = request(1, KEEP_CONN, "a", b"");
        input.extend(request(1, KEEP_CONN, "b", b""));
        input.extend(request(1, KEEP_CONN, "c", b""));
        let mut e = Echo {
            seen: Vec::new(),
            max: 2,
        };
        let (ended, _) = run(input, &mut e);
        assert_eq!(ended, Ended::Done);
        assert_eq!(e.seen.len(), 2);
    }

    #[test]
    fn management_records_and_refusals() {
        let mut input = Vec::new();
        let mut query = Vec::new();
        encode_pairs(
            &mut query,
            &[
                (b"FCGI_MAX_CONNS", b""),
                (b"FCGI_MPXS_CONNS", b""),
                (b"OTHER", b""),
            ],
        );
        encode_record(&mut input, GET_VALUES, 0, &query);
        encode_record(&mut input, 200, 0, b"");
        begin(&mut input, 3, 2, KEEP_CONN); // an authorizer
        begin(&mut input, 4, RESPONDER, KEEP_CONN);
        begin(&mut input, 5, RESPONDER, KEEP_CONN); // a second request at once
        encode_record(&mut input, STDIN, 77, b"for nobody"); // an inactive id
        encode_record(&mut input, ABORT_REQUEST, 4, b"");
        input.extend(request(6, 0, "q", b""));
        let mut e = echo();
        let (ended, rs) = run(input, &mut e);
        assert_eq!(ended, Ended::Closed);
        assert_eq!(rs[0].kind, GET_VALUES_RESULT);
        assert_eq!(
            parse_pairs(&rs[0].content).unwrap(),
            vec![
                (b"FCGI_MAX_CONNS".to_vec(), b"1".to_vec()),
                (b"FCGI_MPXS_CONNS".to_vec(), b"0".to_vec())
            ]
        );
        assert_eq!(
            (rs[1].kind, rs[1].content.as_slice()),
            (UNKNOWN_TYPE, &[200u8, 0, 0, 0, 0, 0, 0, 0][..])
        );
        assert_eq!(answer_of(&rs, 3), (Vec::new(), Some(UNKNOWN_ROLE)));
        assert_eq!(answer_of(&rs, 5), (Vec::new(), Some(CANT_MPX_CONN)));
        assert_eq!(answer_of(&rs, 4), (Vec::new(), Some(REQUEST_COMPLETE)));
        assert!(answer_of(&rs, 6).0.ends_with(b"q|"));
        assert_eq!(e.seen.len(), 1, "only request 6 reached the responder");
    }

    #[test]
    fn malformed_input_closes_the_connection_with_a_reason() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![0, 1, 0, 1, 0, 8, 0, 0], "version 0"),
            (
                {
                    let mut v = Vec::new();
                    encode_record(&mut v, BEGIN_REQUEST, 1, &[0, 1, 0]);
                    v
                },
                "body of 3 bytes",
            ),
            (
                {
                    let mut v = Vec::new();
                    begin(&mut v, 1, RESPONDER, 0);
                    encode_record(&mut v, PARAMS, 1, &[5, 5, b'a']);
                    encode_record(&mut v, PARAMS, 1, &[]);
                    encode_record(&mut v, STDIN, 1, &[]);
                    v
                },
                "name-value pairs",
            ),
            (
                {
                    let mut v = Vec::new();
                    begin(&mut v, 1, RESPONDER, 0);
                    begin(&mut v, 1, RESPONDER, 0);
                    v
                },
                "second FCGI_BEGIN_REQUEST",
            ),
            (
                {
                    let mut v = Vec::new();
                    begin(&mut v, 1, RESPONDER, 0);
                    encode_record(&mut v, PARAMS, 1, b"");
                    encode_record(&mut v, PARAMS, 1, b"\x01\x01ab");
                    v
                },
                "FCGI_PARAMS record after",
            ),
            (
                request(1, 0, "x", b"")[..30].to_vec(),
                "middle of a request",
            ),
        ];
        for (input, reason) in cases {
            let mut e = echo();
            let (ended, _) = run(input, &mut e);
            match ended {
                Ended::Broken(r) => assert!(r.contains(reason), "{r:?} lacks {reason:?}"),
                other => panic!("{reason}: {other:?}"),
            }
            assert!(e.seen.is_empty());
        }
    }

    #[test]
    fn large_params_and_bodies_are_bounded() {
        let mut input = Vec::new();
        begin(&mut input, 1, RESPONDER, 0);
        let chunk = vec![b'p'; MAX_CONTENT];
        for _ in 0..(MAX_PARAMS_BYTES / MAX_CONTENT + 1) {
            encode_record(&mut input, PARAMS, 1, &chunk);
        }
        let (ended, _) = run(input, &mut echo());
        assert_eq!(ended, Ended::Broken(Error::TooManyParams.to_string()));

        let body = vec![b'b'; MAX_STDIN_KEPT + 100_000];
        let mut e = echo();
        let (ended, rs) = run(request(1, 0, "big", &body), &mut e);
        assert_eq!(ended, Ended::Closed);
        assert_eq!(e.seen[0].stdin.len(), MAX_STDIN_KEPT);
        assert_eq!(answer_of(&rs, 1).1, Some(REQUEST_COMPLETE));
    }

    /// Random and mutated input never panics, and whatever is parsed is consistent.
    #[test]
    fn random_input_never_panics() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let valid = {
            let mut v = request(1, KEEP_CONN, "link=x", b"body");
            v.extend(request(2, 0, "y", b""));
            v
        };
        for round in 0..3000 {
            let mut input = if round % 2 == 0 {
                valid.clone()
            } else {
                (0..(next() % 200)).map(|_| next() as u8).collect()
            };
            for _ in 0..(next() % 6) {
                if input.is_empty() {
                    break;
                }
                let at = (next() as usize) % input.len();
                input[at] = next() as u8;
            }
            if let Ok(Some((r, n))) = parse_record(&input) {
                assert!(n <= input.len() && r.content.len() <= n);
            }
            let _ = parse_pairs(&input);
            let _ = run(input, &mut echo());
        }
    }

    #[test]
    fn params_become_the_environment() {
        let env = env_from_params(&[
            (b"REQUEST_METHOD".to_vec(), b"POST".to_vec()),
            (b"\xffbad".to_vec(), b"dropped".to_vec()),
            (b"HTTP_ACCEPT".to_vec(), b"text/html".to_vec()),
        ]);
        assert_eq!(env.get("REQUEST_METHOD"), Some(&b"POST"[..]));
        assert_eq!(env.header("Accept"), Some(&b"text/html"[..]));
    }
}
