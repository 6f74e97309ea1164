//! This server's copy of the shared block list, in the data directory (`blocks.copy`), for a
//! store on a server: a file read instead of a round trip on every request. The copy is the
//! list's bytes after a line that says when they were fetched from the store.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// The bytes of the copy at `path` if they were fetched less than `max_age_ms` before
/// `now_ms`; None when there is no copy, it is older or it cannot be read.
pub fn read_fresh(path: &Path, now_ms: u64, max_age_ms: u64) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    let at = bytes.iter().position(|&b| b == b'\n')?;
    let fetched: u64 = std::str::from_utf8(bytes[..at].strip_prefix(b"fetched ")?)
        .ok()?
        .parse()
        .ok()?;
    let age = now_ms.checked_sub(fetched)?;
    (age < max_age_ms).then(|| bytes[at + 1..].to_vec())
}

/// Writes the copy whole under a new name, then moves it in place: a reader sees the old copy
/// or the new one. A copy that cannot be written only costs the next request a round trip.
pub fn keep(path: &Path, list: &[u8], now_ms: u64) {
    let mut bytes = format!("fetched {now_ms}\n").into_bytes();
    bytes.extend_from_slice(list);
    let tmp = path.with_extension(format!("{:016x}", crate::support::random::u64()));
    // Readable by the site's account alone, like the store's own files; a new name each time,
    // never an existing file (nor a link planted there).
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&bytes));
    if written.is_err() || std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}
