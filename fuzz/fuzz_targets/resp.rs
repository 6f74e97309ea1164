//! Fuzz target: the Redis reply parser, `resp::parse`, on arbitrary bytes from the server.
//! A parsed reply used at most the bytes it was given, every shorter prefix of them asks for
//! more, and the reply written back as RESP parses to itself. Also: commands from
//! `resp::encode` parse back to their arguments.

#![no_main]

use libfuzzer_sys::fuzz_target;
use resolve::store::redis::resp::{self, Reply};

/// Writes a reply as RESP2, the way a server would send it.
fn write(reply: &Reply, out: &mut Vec<u8>) {
    match reply {
        Reply::Simple(s) => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
        Reply::Error(s) => out.extend_from_slice(format!("-{s}\r\n").as_bytes()),
        Reply::Int(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
        Reply::Bulk(None) => out.extend_from_slice(b"$-1\r\n"),
        Reply::Bulk(Some(b)) => {
            out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Reply::Array(None) => out.extend_from_slice(b"*-1\r\n"),
        Reply::Array(Some(items)) => {
            out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
            for i in items {
                write(i, out);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((reply, used))) = resp::parse(data) {
        assert!(
            used > 0 && used <= data.len(),
            "used {used} of {}",
            data.len()
        );
        assert_eq!(
            resp::parse(&data[..used]),
            Ok(Some((reply.clone(), used))),
            "the reply's own bytes parse differently"
        );
        for cut in [used - 1, used / 2, 1] {
            if cut < used {
                assert_eq!(
                    resp::parse(&data[..cut]),
                    Ok(None),
                    "a prefix of {cut} of {used} bytes is not 'need more'"
                );
            }
        }
        let mut again = Vec::new();
        write(&reply, &mut again);
        assert_eq!(
            resp::parse(&again),
            Ok(Some((reply, again.len()))),
            "the reply written back parses differently: {again:?}"
        );
    }

    // Commands: the arguments are the input split at NUL bytes.
    let args: Vec<&[u8]> = data.split(|&b| b == 0).take(64).collect();
    let command = resp::encode(&args);
    let expected = Reply::Array(Some(
        args.iter().map(|a| Reply::Bulk(Some(a.to_vec()))).collect(),
    ));
    assert_eq!(
        resp::parse(&command),
        Ok(Some((expected, command.len()))),
        "an encoded command does not parse back"
    );
});
