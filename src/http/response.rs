//! An HTTP answer and how it is written as CGI output (RFC 3875 section 6).

use std::io::{self, Write};

use crate::support::decimal::decimal;

/// A complete answer: status, headers and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// The reason phrase sent with a status.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

/// Adds a header value to `out`, kept on one line of printable ASCII whatever went into it:
/// each other character becomes one `?`.
fn push_clean(out: &mut Vec<u8>, value: &str) {
    let printable = |b: u8| b == b' ' || b.is_ascii_graphic();
    if value.bytes().all(printable) {
        out.extend_from_slice(value.as_bytes());
        return;
    }
    for c in value.chars() {
        out.push(if c.is_ascii() && printable(c as u8) {
            c as u8
        } else {
            b'?'
        });
    }
}

/// The header that says how long the program took ([`Response::timed`]), always the last.
pub const TIMING: &str = "Server-Timing";

/// [`TIMING`]'s value for `took`: `app;dur=MS.mmm`, the milliseconds to three places.
pub fn timing(took: std::time::Duration) -> String {
    let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
    let mut value = String::with_capacity(32);
    value.push_str("app;dur=");
    value.push_str(decimal(micros / 1000, &mut [0; 20]));
    value.push('.');
    let mut digits = [0; 20];
    // 1000 to 1999: its last three digits, the thousandths with their zeros.
    let thousandths = decimal(1000 + micros % 1000, &mut digits);
    value.push_str(&thousandths[1..]);
    value
}

impl Response {
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            headers: vec![
                ("Content-Type", content_type.to_owned()),
                ("Cache-Control", "no-store".to_owned()),
            ],
            body: body.into(),
        }
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Says how long the program took to answer (`Server-Timing: app;dur=MS`, W3C Server
    /// Timing): the program's own time, from the request's start to its answer, without the web
    /// server's. Browsers' developer tools show it; it is what an owner (or a test) compares
    /// with the store's and the provider's time limits.
    pub fn timed(&mut self, took: std::time::Duration) {
        self.headers.push((TIMING, timing(took)));
    }

    /// Writes the answer as a CGI program does: a Status line, the headers, a blank line and
    /// (unless the request was HEAD) the body.
    pub fn write_cgi<W: Write>(&self, mut out: W, head_only: bool) -> io::Result<()> {
        // Written piece by piece: through `writeln!`, the headers cost a refusal more than
        // deciding it.
        let mut buf = Vec::with_capacity(256 + self.body.len());
        buf.extend_from_slice(b"Status: ");
        buf.extend_from_slice(decimal(self.status.into(), &mut [0; 20]).as_bytes());
        buf.push(b' ');
        buf.extend_from_slice(reason(self.status).as_bytes());
        buf.push(b'\n');
        for (name, value) in &self.headers {
            buf.extend_from_slice(name.as_bytes());
            buf.extend_from_slice(b": ");
            push_clean(&mut buf, value);
            buf.push(b'\n');
        }
        buf.push(b'\n');
        if !head_only {
            buf.extend_from_slice(&self.body);
        }
        out.write_all(&buf)?;
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_valid_cgi_output() {
        let r =
            Response::new(429, "text/plain; charset=utf-8", "wait\n").header("Retry-After", "7");
        let mut out = Vec::new();
        r.write_cgi(&mut out, false).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Status: 429 Too Many Requests\nContent-Type: text/plain; charset=utf-8\n\
             Cache-Control: no-store\nRetry-After: 7\n\nwait\n"
        );
        let mut head = Vec::new();
        r.write_cgi(&mut head, true).unwrap();
        assert!(head.ends_with(b"Retry-After: 7\n\n"));
    }

    #[test]
    fn the_time_taken_is_in_milliseconds_to_three_places() {
        for (micros, want) in [
            (0, "app;dur=0.000"),
            (5, "app;dur=0.005"),
            (1_234_567, "app;dur=1234.567"),
            (40_000, "app;dur=40.000"),
        ] {
            let mut r = Response::new(200, "text/plain", "");
            r.timed(std::time::Duration::from_micros(micros));
            assert_eq!(r.header_value("Server-Timing"), Some(want));
        }
    }

    #[test]
    fn header_values_cannot_break_lines() {
        let r = Response::new(200, "text/plain", "").header("X-Test", "a\r\nSet-Cookie: x\u{7f}é");
        let mut out = Vec::new();
        r.write_cgi(&mut out, true).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("X-Test: a??Set-Cookie: x??\n"), "{text}");
        assert_eq!(text.matches('\n').count(), 5);
    }
}
