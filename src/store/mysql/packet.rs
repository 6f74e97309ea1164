//! The MySQL client/server protocol as bytes (pure): the packets this client reads (the
//! server's greeting, OK, ERR, EOF, column counts and text rows) and writes (the TLS request,
//! the handshake response, a query), every length checked against what is there and bounded.

/// Capability flags this client uses (the protocol's `CLIENT_*`).
pub const LONG_PASSWORD: u32 = 1;
pub const LONG_FLAG: u32 = 1 << 2;
pub const CONNECT_WITH_DB: u32 = 1 << 3;
pub const PROTOCOL_41: u32 = 1 << 9;
pub const SSL: u32 = 1 << 11;
pub const TRANSACTIONS: u32 = 1 << 13;
pub const SECURE_CONNECTION: u32 = 1 << 15;
pub const MULTI_STATEMENTS: u32 = 1 << 16;
pub const MULTI_RESULTS: u32 = 1 << 17;
pub const PLUGIN_AUTH: u32 = 1 << 19;
pub const PLUGIN_AUTH_LENENC_DATA: u32 = 1 << 21;
pub const DEPRECATE_EOF: u32 = 1 << 24;

/// What the client needs of every server (MySQL 5.5 and MariaDB 5.5 on have them all).
pub const REQUIRED: u32 = PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH;
/// What the client asks for when the server offers it.
pub const WANTED: u32 = LONG_PASSWORD
    | LONG_FLAG
    | PROTOCOL_41
    | TRANSACTIONS
    | SECURE_CONNECTION
    | MULTI_STATEMENTS
    | MULTI_RESULTS
    | PLUGIN_AUTH
    | PLUGIN_AUTH_LENENC_DATA
    | DEPRECATE_EOF;

/// `SERVER_MORE_RESULTS_EXISTS`: another statement's result follows.
pub const MORE_RESULTS: u16 = 1 << 3;

/// utf8mb4_general_ci: known to every server with utf8mb4 (MySQL 5.5.3, MariaDB 5.5 on).
pub const UTF8MB4: u8 = 45;
/// The largest packet this client accepts, and says it does: the store's rows are small, and
/// a hostile or broken server cannot make it allocate more.
pub const MAX_ALLOWED_PACKET: u32 = 4 << 20;
/// A payload of this length is continued in the next packet: never needed by this client,
/// whose statements and answers are far smaller, so refused.
pub const CONTINUED: usize = 0xFF_FFFF;

/// Bytes that are not the packet they should be, or that exceed the sizes accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// Reads a packet's fields in order, every length checked.
pub struct Fields<'a>(pub &'a [u8]);

impl<'a> Fields<'a> {
    pub fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16, Malformed> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self) -> Result<u32, Malformed> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if n > self.0.len() {
            return Err(Malformed("a field runs past the end of its packet"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    /// Bytes up to a NUL (which is consumed); the rest of the packet when there is none.
    pub fn nul_terminated(&mut self) -> &'a [u8] {
        match self.0.iter().position(|&b| b == 0) {
            Some(at) => {
                let s = &self.0[..at];
                self.0 = &self.0[at + 1..];
                s
            }
            None => std::mem::take(&mut self.0),
        }
    }

    /// A length-encoded integer.
    pub fn lenenc(&mut self) -> Result<u64, Malformed> {
        Ok(match self.u8()? {
            n @ 0..=0xFA => u64::from(n),
            0xFC => u64::from(self.u16()?),
            0xFD => {
                let b = self.take(3)?;
                u64::from(u32::from_le_bytes([b[0], b[1], b[2], 0]))
            }
            0xFE => {
                let b = self.take(8)?;
                u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
            }
            _ => return Err(Malformed("0xFB or 0xFF where a length should be")),
        })
    }

    /// A length-encoded string.
    pub fn lenenc_bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.lenenc()?;
        self.take(usize::try_from(n).map_err(|_| Malformed("a string longer than memory"))?)
    }

    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.0)
    }
}

/// The server's first packet (protocol version 10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Greeting {
    pub version: String,
    pub capabilities: u32,
    /// The 20 bytes the password is scrambled with.
    pub scramble: Vec<u8>,
    /// The authentication method the server proposes.
    pub plugin: String,
}

pub fn greeting(payload: &[u8]) -> Result<Greeting, Malformed> {
    let mut f = Fields(payload);
    if f.u8()? != 10 {
        return Err(Malformed("the greeting is not protocol version 10"));
    }
    let version = String::from_utf8_lossy(f.nul_terminated()).into_owned();
    let _connection_id = f.u32()?;
    let mut scramble = f.take(8)?.to_vec();
    f.take(1)?;
    let low = f.u16()?;
    let (high, data_len) = if f.0.is_empty() {
        (0, 0)
    } else {
        let _charset = f.u8()?;
        let _status = f.u16()?;
        let high = f.u16()?;
        let len = f.u8()?;
        f.take(10)?;
        (high, len)
    };
    let capabilities = u32::from(low) | (u32::from(high) << 16);
    if capabilities & SECURE_CONNECTION != 0 && !f.0.is_empty() {
        // The rest of the scramble: at least 12 bytes and a NUL.
        let n = usize::from(data_len).saturating_sub(8).max(13);
        let part = f.take(n.min(f.0.len()))?;
        scramble.extend_from_slice(part.strip_suffix(&[0]).unwrap_or(part));
    }
    let plugin = if capabilities & PLUGIN_AUTH != 0 {
        String::from_utf8_lossy(f.nul_terminated()).into_owned()
    } else {
        String::new()
    };
    if scramble.len() < 20 {
        return Err(Malformed(
            "the greeting's scramble is shorter than 20 bytes",
        ));
    }
    scramble.truncate(20);
    Ok(Greeting {
        version,
        capabilities,
        scramble,
        plugin,
    })
}

/// An ERR packet: the server's code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    pub code: u16,
    pub message: String,
}

pub fn server_error(payload: &[u8]) -> Result<ServerError, Malformed> {
    let mut f = Fields(payload);
    if f.u8()? != 0xFF {
        return Err(Malformed("not an ERR packet"));
    }
    let code = f.u16()?;
    if f.0.first() == Some(&b'#') {
        f.take(6)?;
    }
    Ok(ServerError {
        code,
        message: String::from_utf8_lossy(f.rest()).into_owned(),
    })
}

/// An OK packet (header 0x00, or 0xFE where it ends rows): rows affected and status flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    pub affected: u64,
    pub status: u16,
}

pub fn ok(payload: &[u8]) -> Result<Done, Malformed> {
    let mut f = Fields(payload);
    f.u8()?;
    let affected = f.lenenc()?;
    let _insert_id = f.lenenc()?;
    let status = f.u16()?;
    Ok(Done { affected, status })
}

/// An EOF packet (servers without DEPRECATE_EOF): its status flags.
pub fn eof(payload: &[u8]) -> Result<Done, Malformed> {
    let mut f = Fields(payload);
    if f.u8()? != 0xFE || payload.len() > 5 {
        return Err(Malformed("not an EOF packet"));
    }
    let _warnings = f.u16()?;
    let status = f.u16()?;
    Ok(Done {
        affected: 0,
        status,
    })
}

/// Whether a packet read where rows come ends them: an EOF or an OK with the 0xFE header. A
/// row cannot start with 0xFE unless its first value is 16 MiB or longer, which no packet this
/// client accepts holds.
pub fn ends_rows(payload: &[u8]) -> bool {
    payload.first() == Some(&0xFE)
}

/// One value of a text row: its bytes, or None for NULL.
pub type Value = Option<Vec<u8>>;

/// A text row of `columns` values.
pub fn row(payload: &[u8], columns: usize) -> Result<Vec<Value>, Malformed> {
    let mut f = Fields(payload);
    let mut values = Vec::with_capacity(columns);
    for _ in 0..columns {
        if f.0.first() == Some(&0xFB) {
            f.take(1)?;
            values.push(None);
        } else {
            values.push(Some(f.lenenc_bytes()?.to_vec()));
        }
    }
    if !f.0.is_empty() {
        return Err(Malformed("a row holds more than its columns"));
    }
    Ok(values)
}

/// The TLS request: the first half of a handshake response, before TLS starts.
pub fn tls_request(capabilities: u32) -> Vec<u8> {
    let mut p = Vec::with_capacity(32);
    p.extend_from_slice(&capabilities.to_le_bytes());
    p.extend_from_slice(&MAX_ALLOWED_PACKET.to_le_bytes());
    p.push(UTF8MB4);
    p.extend_from_slice(&[0; 23]);
    p
}

/// The handshake response: who connects, the scrambled password for `plugin`, the database.
pub fn handshake_response(
    capabilities: u32,
    user: &str,
    auth: &[u8],
    database: Option<&str>,
    plugin: &str,
) -> Vec<u8> {
    let mut p = tls_request(capabilities);
    p.extend_from_slice(user.as_bytes());
    p.push(0);
    if capabilities & PLUGIN_AUTH_LENENC_DATA != 0 {
        put_lenenc(&mut p, auth.len() as u64);
    } else {
        // Scrambles are 20 or 32 bytes: a one-byte length always holds them.
        p.push(u8::try_from(auth.len()).unwrap_or(u8::MAX));
    }
    p.extend_from_slice(auth);
    if let Some(db) = database.filter(|_| capabilities & CONNECT_WITH_DB != 0) {
        p.extend_from_slice(db.as_bytes());
        p.push(0);
    }
    p.extend_from_slice(plugin.as_bytes());
    p.push(0);
    p
}

/// COM_QUERY with `sql`.
pub fn query(sql: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(sql.len() + 1);
    p.push(0x03);
    p.extend_from_slice(sql.as_bytes());
    p
}

pub fn put_lenenc(p: &mut Vec<u8>, n: u64) {
    match n {
        0..=0xFA => p.push(n as u8),
        0xFB..=0xFFFF => {
            p.push(0xFC);
            p.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            p.push(0xFD);
            p.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            p.push(0xFE);
            p.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// Whole packets as (sequence id, payload), and the bytes after them.
pub type Split<'a> = (Vec<(u8, &'a [u8])>, &'a [u8]);

/// Splits the bytes of whole packets into (sequence id, payload) pairs; the bytes left over
/// that do not yet make a whole packet are returned with them. For the fuzz target and tests:
/// the connection reads packets one at a time.
pub fn split(mut bytes: &[u8]) -> Result<Split<'_>, Malformed> {
    let mut out = Vec::new();
    while bytes.len() >= 4 {
        let len = header_len(&bytes[..4])?;
        if bytes.len() < 4 + len {
            break;
        }
        out.push((bytes[3], &bytes[4..4 + len]));
        bytes = &bytes[4 + len..];
    }
    Ok((out, bytes))
}

/// The payload length a 4-byte packet header announces.
pub fn header_len(header: &[u8]) -> Result<usize, Malformed> {
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    if len > MAX_ALLOWED_PACKET as usize {
        return Err(Malformed(
            "a packet larger than the 4 MiB this client accepts (its max_allowed_packet)",
        ));
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A greeting as MariaDB 10.11 sends it.
    fn mariadb_greeting() -> Vec<u8> {
        let mut p = vec![10];
        p.extend_from_slice(b"5.5.5-10.11.19-MariaDB-0+deb12u1\0");
        p.extend_from_slice(&7u32.to_le_bytes());
        p.extend_from_slice(b"abcdefgh\0");
        p.extend_from_slice(&0xF7FEu16.to_le_bytes());
        p.push(45);
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&0x81BFu16.to_le_bytes());
        p.push(21);
        p.extend_from_slice(&[0; 10]);
        p.extend_from_slice(b"ijklmnopqrst\0");
        p.extend_from_slice(b"mysql_native_password\0");
        p
    }

    #[test]
    fn reads_a_greeting() {
        let g = greeting(&mariadb_greeting()).unwrap();
        assert_eq!(g.version, "5.5.5-10.11.19-MariaDB-0+deb12u1");
        assert_eq!(g.scramble, b"abcdefghijklmnopqrst");
        assert_eq!(g.plugin, "mysql_native_password");
        assert_eq!(g.capabilities & REQUIRED, REQUIRED);
        for cut in 0..40 {
            assert!(
                greeting(&mariadb_greeting()[..cut]).is_err(),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn reads_ok_err_eof_and_rows() {
        assert_eq!(
            ok(&[0, 2, 0, 8, 0, 0, 0]).unwrap(),
            Done {
                affected: 2,
                status: 8
            }
        );
        let e = server_error(b"\xff\x7a\x04#42S02Table 'd.t' doesn't exist").unwrap();
        assert_eq!(e.code, 1146);
        assert_eq!(e.message, "Table 'd.t' doesn't exist");
        assert_eq!(eof(&[0xFE, 0, 0, 2, 0]).unwrap().status, 2);
        assert_eq!(
            row(b"\x03abc\xfb\x00", 3).unwrap(),
            vec![Some(b"abc".to_vec()), None, Some(vec![])]
        );
        assert!(row(b"\x03abc", 2).is_err());
        assert!(row(b"\x05abc", 1).is_err());
        assert!(row(b"\x01a\x01b", 1).is_err());
    }

    #[test]
    fn lengths_round_trip() {
        for n in [0, 250, 251, 65535, 65536, 0xFF_FFFF, 0x100_0000, u64::MAX] {
            let mut p = Vec::new();
            put_lenenc(&mut p, n);
            let mut f = Fields(&p);
            assert_eq!(f.lenenc().unwrap(), n);
            assert!(f.0.is_empty());
        }
        assert!(Fields(&[0xFB]).lenenc().is_err());
        assert!(Fields(&[0xFC, 1]).lenenc().is_err());
    }

    #[test]
    fn a_response_carries_user_scramble_database_and_plugin() {
        let caps = WANTED | CONNECT_WITH_DB;
        let p = handshake_response(caps, "u", &[9; 20], Some("d"), "mysql_native_password");
        assert_eq!(&p[..4], &caps.to_le_bytes());
        assert_eq!(&p[32..34], b"u\0");
        assert_eq!(p[34], 20);
        assert_eq!(&p[55..], b"d\0mysql_native_password\0");
    }

    #[test]
    fn splits_packets_and_refuses_continued_ones() {
        let bytes = [1, 0, 0, 0, 0xAA, 2, 0, 0, 1, 0xBB];
        let (packets, rest) = split(&bytes).unwrap();
        assert_eq!(packets, vec![(0, &[0xAA][..])]);
        assert_eq!(rest, &[2, 0, 0, 1, 0xBB]);
        assert!(split(&[0xFF, 0xFF, 0xFF, 0]).is_err());
    }
}
