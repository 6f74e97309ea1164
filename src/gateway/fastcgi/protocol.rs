//! The FastCGI 1.0 record layer (spec sections 3 and 8): records, name-value pairs and the
//! few management answers, pure and total over any bytes, every length bounded.

use std::fmt;

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
pub const MAX_CONTENT: usize = 0xffff;
/// Most PARAMS bytes one request may send. Apache sends at most 100 header fields of 8 KiB
/// (LimitRequestFields, LimitRequestFieldSize) plus its own variables: well under this.
pub const MAX_PARAMS_BYTES: usize = 2 * 1024 * 1024;

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
pub(crate) fn get_values_result(query: &[u8]) -> Result<Vec<u8>, Error> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn records(mut bytes: &[u8]) -> Vec<Record> {
        let mut out = Vec::new();
        while let Some((r, n)) = parse_record(bytes).unwrap() {
            out.push(r);
            bytes = &bytes[n..];
        }
        out
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
}
