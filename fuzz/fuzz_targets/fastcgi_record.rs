//! Fuzz target: what the web server sends a FastCGI process. `fastcgi::parse_record` and
//! `fastcgi::parse_pairs` on arbitrary bytes (a parsed record used at most the bytes it was
//! given, a shorter prefix asks for more, and records and pairs written back by the module's
//! own encoders parse to themselves); then the same bytes as a whole connection through
//! `fastcgi::connection::serve_connection`, read in chunks of a size the input picks, whose output must be
//! well-formed records that carry each answer whole and end each answered request.
//!
//! Input: byte 0 is the largest read (1 to 256 bytes, 0 meaning 64 KiB); the rest is the
//! connection's bytes.

#![no_main]

use std::io::{self, Read, Write};

use libfuzzer_sys::fuzz_target;
use resolve::gateway::fastcgi::connection::{Connection, Request, Responder, serve_connection};
use resolve::gateway::fastcgi::protocol as fastcgi;

/// Bytes of a record header.
const HEADER: usize = 8;

/// A connection in memory: reads come from the input in bounded chunks, writes are kept.
struct Memory<'a> {
    input: &'a [u8],
    chunk: usize,
    output: Vec<u8>,
}

impl Read for Memory<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.chunk).min(self.input.len());
        buf[..n].copy_from_slice(&self.input[..n]);
        self.input = &self.input[n..];
        Ok(n)
    }
}

impl Write for Memory<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Connection for Memory<'_> {}

/// Answers each request with a CGI answer that says what it received, and keeps the answers.
#[derive(Default)]
struct Recorder {
    answers: Vec<Vec<u8>>,
}

impl Responder for Recorder {
    fn respond(&mut self, request: &Request) -> Vec<u8> {
        let mut answer = format!(
            "Status: 200 OK\nContent-Type: text/plain\n\n{} params, {} bytes of body\n",
            request.params.len(),
            request.stdin.len()
        )
        .into_bytes();
        // Long enough now and then to take several FCGI_STDOUT records.
        if request.stdin.len() > 1000 {
            answer.resize(70_000 + request.stdin.len(), b'x');
        }
        self.answers.push(answer.clone());
        answer
    }
}

fn check_parsers(data: &[u8]) {
    let mut rest = data;
    while let Ok(Some((record, used))) = fastcgi::parse_record(rest) {
        assert!(
            used >= HEADER && used <= rest.len(),
            "used {used} of {}",
            rest.len()
        );
        assert!(record.content.len() <= used - HEADER);
        for cut in [used - 1, HEADER - 1] {
            assert_eq!(
                fastcgi::parse_record(&rest[..cut]),
                Ok(None),
                "a prefix of {cut} of {used} bytes is not 'need more'"
            );
        }
        let mut again = Vec::new();
        fastcgi::encode_record(&mut again, record.kind, record.request_id, &record.content);
        assert_eq!(
            again.len() % 8,
            0,
            "an encoded record is not padded to 8 bytes"
        );
        assert_eq!(
            fastcgi::parse_record(&again),
            Ok(Some((record, again.len()))),
            "the record written back parses differently"
        );
        rest = &rest[used..];
    }
    if let Ok(pairs) = fastcgi::parse_pairs(data) {
        let total: usize = pairs.iter().map(|(n, v)| n.len() + v.len()).sum();
        assert!(
            total <= data.len(),
            "pairs hold more bytes than they came in"
        );
        let borrowed: Vec<(&[u8], &[u8])> = pairs
            .iter()
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
            .collect();
        let mut again = Vec::new();
        fastcgi::encode_pairs(&mut again, &borrowed);
        assert_eq!(
            fastcgi::parse_pairs(&again),
            Ok(pairs),
            "pairs written back parse differently"
        );
    }
}

fn check_connection(chunk: usize, input: &[u8]) {
    let mut stream = Memory {
        input,
        chunk,
        output: Vec::new(),
    };
    let mut recorder = Recorder::default();
    let _ended = serve_connection(&mut stream, &mut recorder);

    // Everything written is whole records. Each answer goes out as one run of FCGI_STDOUT
    // records ended by an empty one, then FCGI_END_REQUEST: nothing comes in between.
    let mut streams: Vec<Vec<u8>> = Vec::new();
    let mut open: Option<(u16, Vec<u8>)> = None;
    let mut ending: Option<u16> = None;
    let mut out = stream.output.as_slice();
    while !out.is_empty() {
        let (record, used) = match fastcgi::parse_record(out) {
            Ok(Some(r)) => r,
            other => panic!("the output is not whole records: {other:?} at {out:?}"),
        };
        assert_eq!(used % 8, 0, "an output record is not padded to 8 bytes");
        out = &out[used..];
        if let Some(id) = ending.take() {
            assert_eq!(record.kind, fastcgi::END_REQUEST, "no end after an answer");
            assert_eq!(record.request_id, id, "the end of another request");
            assert_eq!(record.content.len(), 8, "FCGI_END_REQUEST body");
            assert_eq!(record.content[4], fastcgi::REQUEST_COMPLETE);
            continue;
        }
        if let Some((id, buf)) = open.as_mut() {
            assert_eq!(
                record.kind,
                fastcgi::STDOUT,
                "an answer was cut by another record"
            );
            assert_eq!(record.request_id, *id, "answers of two requests mixed");
            if record.content.is_empty() {
                ending = Some(*id);
                streams.push(std::mem::take(buf));
                open = None;
            } else {
                buf.extend_from_slice(&record.content);
            }
            continue;
        }
        match record.kind {
            fastcgi::STDOUT => {
                assert!(!record.content.is_empty(), "an answer with no bytes");
                open = Some((record.request_id, record.content));
            }
            fastcgi::END_REQUEST => assert_eq!(record.content.len(), 8, "FCGI_END_REQUEST body"),
            fastcgi::GET_VALUES_RESULT | fastcgi::UNKNOWN_TYPE => {
                assert_eq!(
                    record.request_id, 0,
                    "a management answer with a request id"
                );
            }
            kind => panic!("the process sent a record of type {kind}"),
        }
    }
    assert!(
        open.is_none() && ending.is_none(),
        "the last answer was not finished"
    );
    assert!(
        streams == recorder.answers,
        "the answers written differ from the responder's ({} written, {} given)",
        streams.len(),
        recorder.answers.len()
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, input)) = data.split_first() else {
        return;
    };
    check_parsers(input);
    let chunk = if chunk == 0 {
        64 * 1024
    } else {
        usize::from(chunk)
    };
    check_connection(chunk, input);
});
