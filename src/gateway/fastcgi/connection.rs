//! One connection from the web server: records in, one request at a time assembled from them,
//! answered by a [`Responder`], records out, until the connection or the responder is done.

use std::io::{self, Read, Write};
use std::time::Duration;

use socket2::Socket;

use crate::gateway::fastcgi::protocol::*;
use crate::http::request::Env;

/// Most request body kept; the rest of a larger one is read and dropped. It is the largest
/// `request.max_body_bytes` accepts, and a body over the configured cap is refused (413) unread.
const MAX_STDIN_KEPT: usize = 1024 * 1024;
/// Longest wait for the web server's next bytes, on a new connection or inside a request.
pub const IO_TIMEOUT: Duration = Duration::from_secs(60);

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
    /// Runs when no connection came for a while, and before the process exits.
    fn idle(&mut self) {}
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

#[cfg(test)]
mod tests;
