//! Tests of the FastCGI connection, over an in-memory pipe.

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
