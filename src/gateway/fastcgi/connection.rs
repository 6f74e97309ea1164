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
