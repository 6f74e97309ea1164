//! Fuzz target: the MySQL client's reading of what a server sends, on arbitrary bytes: the
//! packets split from them, each read as a greeting, an ERR, an OK, an EOF and a text row, and
//! all of them as the answers to one query (both with and without DEPRECATE_EOF). Nothing
//! panics; an answer holds no more rows than packets were given; a row read back from its own
//! encoding is itself; lengths round-trip.

#![no_main]

use libfuzzer_sys::fuzz_target;
use resolve::store::mysql::client::{self, Error};
use resolve::store::mysql::packet::{self, DEPRECATE_EOF, Fields, WANTED};

fuzz_target!(|data: &[u8]| {
    let Ok((packets, _rest)) = packet::split(data) else {
        return;
    };
    for (_, p) in &packets {
        let _ = packet::greeting(p);
        let _ = packet::server_error(p);
        let _ = packet::ok(p);
        let _ = packet::eof(p);
        let columns = usize::from(p.first().copied().unwrap_or(0) % 8);
        if let Ok(row) = packet::row(p, columns) {
            assert_eq!(row.len(), columns);
            let mut again = Vec::new();
            for v in &row {
                match v {
                    None => again.push(0xFB),
                    Some(b) => {
                        packet::put_lenenc(&mut again, b.len() as u64);
                        again.extend_from_slice(b);
                    }
                }
            }
            assert_eq!(packet::row(&again, columns), Ok(row));
        }
        let mut f = Fields(p);
        if let Ok(n) = f.lenenc() {
            let mut out = Vec::new();
            packet::put_lenenc(&mut out, n);
            assert_eq!(Fields(&out).lenenc(), Ok(n));
        }
    }
    for caps in [WANTED, WANTED & !DEPRECATE_EOF] {
        let mut queue = packets.iter().map(|(_, p)| p.to_vec());
        let given = packets.len();
        let read = client::answers(caps, || {
            queue
                .next()
                .ok_or(Error::Protocol("no more packets in the input"))
        });
        if let Ok(answers) = read {
            let rows: usize = answers.iter().map(|a| a.rows.len()).sum();
            assert!(rows <= given, "{rows} rows from {given} packets");
            assert!(!answers.is_empty());
        }
    }
});
