//! What a MySQL/MariaDB failure means, in words for the owner's log: which setting bounds a
//! timeout, whether the connection is gone (and worth one retry on a new one), and the server
//! codes the store acts on.

use std::time::Instant;

use crate::store::mysql::client::Error;

/// MySQL error codes handled specially.
pub(crate) const ER_DUP_ENTRY: u16 = 1062;
pub(crate) const ER_LOCK_DEADLOCK: u16 = 1213;
pub(crate) const ER_NO_SUCH_TABLE: u16 = 1146;
/// Errors with which the server ends a connection: shutting down, the connection killed, idle
/// too long (MariaDB 10.x and 11.x).
pub(crate) const CONNECTION_ENDED: [u16; 4] = [1053, 1927, 4031, 2013];

/// Whether `error` says that a kept connection is gone (the server restarted or dropped it while
/// the process waited between requests) rather than that the server could not do the work. A
/// timeout is not one of them: the time is spent.
pub(crate) fn connection_gone(error: &Error) -> bool {
    use std::io::ErrorKind::*;
    match error {
        Error::Io(io) => matches!(
            io.kind(),
            UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe | NotConnected
        ),
        Error::Server(e) => CONNECTION_ENDED.contains(&e.code),
        _ => false,
    }
}

/// Where an error happened: opening the connection (the TCP connect is bounded by
/// `store.connect_timeout_ms`) or running statements on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Connect,
    Work,
}

/// What went wrong, in one readable sentence with the setting to look at.
pub(crate) fn explain(e: &Error, phase: Phase) -> String {
    match e {
        Error::Server(m) => {
            let hint = match m.code {
                1045 => " (check store.user and store.password)",
                1049 => " (check store.database)",
                1040 => " (the server is out of connections)",
                // MySQL's and MariaDB's require_secure_transport.
                3159 | 4151 => {
                    " (the server accepts only TLS: set store.tls to true, and store.ca_file to \
                     your provider's CA bundle when its certificate is not signed by a public CA)"
                }
                _ => "",
            };
            format!("error {}: {}{hint}", m.code, m.message)
        }
        Error::Io(io) => explain_io(io, phase),
        Error::Protocol(what) => format!(
            "the server sent something that is not the MySQL protocol ({what}; is it a MySQL or MariaDB server? see store.host and store.port)"
        ),
        Error::Unsupported(what) => what.clone(),
    }
}

pub(crate) fn explain_io(io: &std::io::Error, phase: Phase) -> String {
    use std::io::ErrorKind::{TimedOut, WouldBlock};
    if let Some(tls) = crate::store::tls::explain(io, "store.host") {
        return tls;
    }
    match (io.kind(), phase) {
        // A socket's read timeout shows as EAGAIN; a connect that timed out as ETIMEDOUT.
        (TimedOut, Phase::Connect) => {
            "no connection in time (timed out: see store.connect_timeout_ms)".to_owned()
        }
        (WouldBlock | TimedOut, _) => "no answer in time (see store.read_timeout_ms)".to_owned(),
        _ => format!(
            "{} (is the server running and reachable? see store.host and store.port)",
            lower_first(&io.to_string())
        ),
    }
}

/// A failure: the server's, or the request's time running out.
pub(crate) enum Failed {
    Db(Error),
    OutOfTime,
}

impl Failed {
    pub(crate) fn code(&self) -> Option<u16> {
        match self {
            Failed::Db(Error::Server(e)) => Some(e.code),
            _ => None,
        }
    }
}

impl From<Error> for Failed {
    fn from(error: Error) -> Failed {
        Failed::Db(error)
    }
}

/// The time one request may spend on the store: each read and write has `read_timeout`, and
/// a decision takes several, so the whole is bounded too (checked between statements).
pub(crate) struct Deadline(pub(crate) Instant);

impl Deadline {
    pub(crate) fn check(&self) -> Result<(), Failed> {
        if Instant::now() >= self.0 {
            Err(Failed::OutOfTime)
        } else {
            Ok(())
        }
    }
}

/// `Connection refused` as `connection refused`, to continue a sentence.
pub(crate) fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}
