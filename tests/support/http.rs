//! HTTP/1.1 on the wire for the test servers: the one request reader (head, then a body framed by Content-Length or chunks), reason phrases, and header lookup in name/value lists.

use std::io::{BufRead, Read};

/// A request as read off a connection.
#[derive(Clone, Debug)]
pub struct HttpRequest {
    pub method: String,
    /// The request target as sent: path and query.
    pub target: String,
    /// `HTTP/1.1`, `HTTP/1.0`...
    pub version: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// Whether the client may send another request on the same connection.
    pub fn keeps_alive(&self) -> bool {
        match self.header("Connection") {
            Some(v) if v.eq_ignore_ascii_case("close") => false,
            Some(v) if v.eq_ignore_ascii_case("keep-alive") => true,
            _ => self.version != "HTTP/1.0",
        }
    }
}

/// Reads one request from `reader`. `None` at end of input, on a read error (a timeout
/// included) or on a request that does not parse.
pub fn read_request(reader: &mut impl BufRead) -> Option<HttpRequest> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let target = parts.next()?.to_owned();
    let version = parts.next().unwrap_or("HTTP/1.0").to_owned();
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
        headers.push(header_line(h)?);
    }
    let mut body = Vec::new();
    if let Some(len) = header(&headers, "content-length") {
        let len: usize = len.parse().ok()?;
        body.resize(len, 0);
        reader.read_exact(&mut body).ok()?;
    } else if header(&headers, "transfer-encoding")
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
    Some(HttpRequest {
        method,
        target,
        version,
        headers,
        body,
    })
}

/// A header line's name and value, white space around each taken off.
pub fn header_line(line: &str) -> Option<(String, String)> {
    let (name, value) = line.split_once(':')?;
    Some((name.trim().to_owned(), value.trim().to_owned()))
}

/// The first value of header `name` (any case) in `headers`.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Where `needle` first stands in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The reason phrase the stand-ins send with `code`.
pub fn reason(code: u16) -> &'static str {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_body_framings_and_keep_alive() {
        let raw = b"POST /a?b=1 HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyzGET / HTTP/1.0\r\n\r\n";
        let mut r = &raw[..];
        let first = read_request(&mut r).expect("first request");
        assert_eq!(
            (first.method.as_str(), first.target.as_str()),
            ("POST", "/a?b=1")
        );
        assert_eq!(first.body, b"xyz");
        assert!(first.keeps_alive());
        let second = read_request(&mut r).expect("second request");
        assert!(!second.keeps_alive());
        assert!(read_request(&mut r).is_none());
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n";
        let req = read_request(&mut &chunked[..]).expect("chunked request");
        assert_eq!(req.body, b"abc");
        assert!(!req.keeps_alive());
    }
}
