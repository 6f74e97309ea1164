//! The same refused request again, answered before the configuration is read: a scraper in a
//! loop sends one request over and over, and from the second refusal on the full way only
//! repeats what the memory of refusals (`store::refusals`) said a moment ago. When a 429 came
//! from that memory, the CGI adapter keeps it (`store::answers`) under everything the way read
//! to make it: this program, its configuration's place and bytes, and the request's every
//! variable but those of its connection (by a keyed hash). The same request is given the same
//! answer while all it rested on is unchanged, checked in the files the way reads: the
//! client's `refusals` slot byte for byte (a refund or a new refusal changes it, and it lasts
//! a second at most), the block list (a block or an unblock changes it), and the waits the
//! answer says, in whole seconds. Its journal line is appended to the spool as the way
//! appends it.
//!
//! Nothing is decided here: this only repeats a decision the way made, for as long as the way
//! would make it again. Whatever cannot be checked (no kept answer, another second's waits, a
//! new spool file to start, a file that cannot be read) goes the full way, which keeps the
//! answer again. Only where the data directory is found without the configuration: the
//! default one, `ratelimit/` beside the configuration file.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::app::Keepable;
use crate::config::Config;
use crate::core::journal::{Entry, hour_of};
use crate::http::request::Env;
use crate::http::response::{Response, TIMING, timing};
use crate::store::answers::{self, BlocksSeen, BlocksSource, Kept};
use crate::store::block_copy;
use crate::store::refusals;
use crate::store::settings::StoreKind;
use crate::support::decimal::decimal;
use crate::support::{defaults, siphash};

/// What a build of this program is: a kept answer is another build's to give only if it is
/// the same code (written by build.rs from the sources it was built from).
const BUILD: &str = env!("RESOLVE_BUILD");

/// Variables of the connection, not of the request: never read by the way, and different for
/// each request of a client that sends the same one again.
const CONNECTION_VARS: [&str; 6] = [
    "REMOTE_PORT",
    "UNIQUE_ID",
    "H2_STREAM_ID",
    "H2_STREAM_TAG",
    "SSL_SESSION_ID",
    "SSL_SESSION_RESUMED",
];

/// The request as far as a kept answer is concerned: where its configuration is, and what.
pub struct Request<'a> {
    config_path: PathBuf,
    config_text: &'a [u8],
    env: &'a Env,
    /// What names it ([`Request::named`]), made at most once, when first needed.
    named: std::cell::OnceCell<Vec<u8>>,
}

impl<'a> Request<'a> {
    pub fn new(config_path: PathBuf, config_text: &'a [u8], env: &'a Env) -> Request<'a> {
        Request {
            config_path,
            config_text,
            env,
            named: std::cell::OnceCell::new(),
        }
    }

    /// The default data directory, beside the configuration file.
    fn data_dir(&self) -> Option<PathBuf> {
        Some(self.config_path.parent()?.join(defaults::DATA_DIR_NAME))
    }

    /// Only requests without a body, GET or HEAD: a kept answer has nothing to read.
    fn may_keep(&self) -> bool {
        matches!(self.env.get("REQUEST_METHOD"), Some(b"GET" | b"HEAD"))
            && self
                .env
                .get("CONTENT_LENGTH")
                .is_none_or(|n| n.is_empty() || n == b"0")
    }

    /// What names the request's kept answer, hashed under the answers file's key
    /// ([`Request::tag`]): a checksum of the build and the configuration's place and bytes (the
    /// owner's, changed only by the owner, so a checksum of 64 bits tells their versions
    /// apart), then every variable but the connection's, each name and value followed by a
    /// zero byte (which neither holds).
    fn named(&self) -> &[u8] {
        self.named.get_or_init(|| {
            let path = self.config_path.as_os_str().as_encoded_bytes();
            let config = [BUILD.as_bytes(), path, self.config_text]
                .iter()
                .fold(0, |h, part| answers::sum(h, part));
            let mut named = Vec::with_capacity(1024);
            named.extend_from_slice(&config.to_le_bytes());
            for (name, value) in self.env.vars() {
                if !CONNECTION_VARS.contains(&name) {
                    named.extend_from_slice(name.as_bytes());
                    named.push(0);
                    named.extend_from_slice(value);
                    named.push(0);
                }
            }
            named
        })
    }

    /// The request's tag under the answers file's `key`: keyed, so that no client can make its
    /// request pass for another's; nothing of the request is kept but this.
    fn tag(&self, key: siphash::Key) -> u64 {
        siphash::hash(key, self.named())
    }
}

/// The wall clock, in milliseconds since 1970, as the store's clock reads it.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Answers `request` with the answer kept for it, when one is and it still stands; true when
/// it was answered (written to `out`), false when the request must go the full way.
pub fn answer(request: &Request<'_>, started: Instant, out: &mut dyn Write) -> bool {
    if !request.may_keep() {
        return false;
    }
    let Some(data_dir) = request.data_dir() else {
        return false;
    };
    let Some(kept) = answers::read(&data_dir, |key| request.tag(key)) else {
        return false;
    };
    let now = now_ms();
    if !still_stands(&kept, &data_dir, now) {
        return false;
    }
    if let Some(after) = &kept.journal {
        let mut digits = [0; 20];
        let line = Entry::line_in_hour(decimal(hour_of(now).into(), &mut digits), after);
        let lock = Duration::from_millis(kept.lock_timeout_ms.into());
        if !matches!(
            crate::store::spool::append_to_started(&data_dir, &line, now, lock),
            Ok(true)
        ) {
            return false;
        }
    }
    let mut bytes = Vec::with_capacity(kept.head.len() + 48 + kept.tail.len());
    bytes.extend_from_slice(&kept.head);
    bytes.extend_from_slice(TIMING.as_bytes());
    bytes.extend_from_slice(b": ");
    bytes.extend_from_slice(timing(started.elapsed()).as_bytes());
    bytes.push(b'\n');
    bytes.extend_from_slice(&kept.tail);
    let _ = out.write_all(&bytes).and_then(|()| out.flush());
    true
}

/// Whether the way would give `kept`'s answer at `now`: the client's refusal remembered as it
/// was, still holding with the same waits, and the block list as it was.
fn still_stands(kept: &Kept, data_dir: &Path, now: u64) -> bool {
    let mut slot = [0u8; refusals::SLOT_BYTES];
    let read = refusals::open_to_read(data_dir)
        .and_then(|f| std::os::unix::fs::FileExt::read_exact_at(&f, &mut slot, kept.refusal_at));
    if read.is_err() || slot != *kept.refusal {
        return false;
    }
    let Some((asked_ms, refusal)) = refusals::decode_recalled(&slot) else {
        return false;
    };
    let Some(later) = refusals::still_holds(&refusal, asked_ms, now) else {
        return false;
    };
    later.waits() == kept.waits && blocks_seen(&kept.blocks, data_dir, now) == Some(kept.blocks.sum)
}

/// The block list's sum as the way would read it at `now`; None when the way would not read
/// it from there (a copy too old: it asks the store) or it cannot be read.
fn blocks_seen(seen: &BlocksSeen, data_dir: &Path, now: u64) -> Option<Option<u64>> {
    use std::os::unix::ffi::OsStrExt;
    let path = data_dir.join(std::ffi::OsStr::from_bytes(&seen.path));
    match seen.source {
        BlocksSource::Entry => match std::fs::read(&path) {
            Ok(bytes) => Some(Some(answers::list_sum(&bytes))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Some(None),
            Err(_) => None,
        },
        BlocksSource::Copy => block_copy::read_fresh(&path, now, defaults::BLOCKS_COPY_SECS * 1000)
            .map(|list| Some(answers::list_sum(&list))),
    }
}

/// Where the way reads the block list for `config`, and what it holds at `now` (read before
/// the way, so that a list changed meanwhile is seen as changed); None where no answer is
/// kept: a data directory other than the default one, or a store without files.
pub fn blocks_before(request: &Request<'_>, config: &Config, now: u64) -> Option<BlocksSeen> {
    if !request.may_keep() || Some(&config.data_dir) != request.data_dir().as_ref() {
        return None;
    }
    let (source, path) = match config.store.kind {
        StoreKind::File { .. } => (BlocksSource::Entry, crate::store::file::block_list_entry()),
        StoreKind::Mysql(_) | StoreKind::Redis(_) => (
            BlocksSource::Copy,
            defaults::BLOCKS_COPY.as_bytes().to_vec(),
        ),
    };
    let mut seen = BlocksSeen {
        source,
        path,
        sum: None,
    };
    seen.sum = blocks_seen(&seen, &config.data_dir, now)?;
    Some(seen)
}

/// Keeps the answer the way gave `request` (before its time taken was added), when the way
/// says it may be kept and the block list read before it is known.
pub fn keep(
    request: &Request<'_>,
    config: &Config,
    blocks: Option<BlocksSeen>,
    keepable: Keepable,
    response: &Response,
    head_only: bool,
) {
    let Some(blocks) = blocks else {
        return;
    };
    let Ok(refusal) = <Box<[u8; refusals::SLOT_BYTES]>>::try_from(keepable.refusal.bytes) else {
        return;
    };
    let mut written = Vec::with_capacity(256 + response.body.len());
    if response.write_cgi(&mut written, head_only).is_err() {
        return;
    }
    // The blank line ends the headers: no header value holds a line break.
    let Some(blank) = written.windows(2).position(|w| w == b"\n\n") else {
        return;
    };
    let kept = Kept {
        tag: 0,
        refusal_at: keepable.refusal.at,
        refusal,
        waits: keepable.waits,
        blocks,
        journal: keepable.journal,
        lock_timeout_ms: u32::try_from(config.store.lock_timeout.as_millis()).unwrap_or(u32::MAX),
        head: written[..=blank].to_vec(),
        tail: written[blank + 1..].to_vec(),
    };
    answers::write(&config.data_dir, |key| request.tag(key), kept);
}

#[cfg(test)]
mod tests;
