//! Private files (mode 600): one written whole and never over one that is there, even by two
//! processes at once (the bytes go to a fresh file of this process's own beside it, which is
//! then linked into place), one replaced whole in one step (renamed into place), and one that
//! stays and is opened again (a lock, a short list).

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes `bytes` to `path` (mode 600, synced) where there is no file yet. A file already
/// there, or one that another process links into place first, is kept as it is: the error is
/// then `AlreadyExists`. No temporary file is left behind, whatever happens.
pub fn create(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let fresh = fresh_beside(path, bytes)?;
    let linked = std::fs::hard_link(&fresh, path);
    let _ = std::fs::remove_file(&fresh);
    linked
}

/// Writes `bytes` to `path` (mode 600, synced) in one step, over any file there: a reader sees
/// the old file or the new one, never a part. No temporary file is left behind.
pub fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let fresh = fresh_beside(path, bytes)?;
    let renamed = std::fs::rename(&fresh, path);
    if renamed.is_err() {
        let _ = std::fs::remove_file(&fresh);
    }
    renamed
}

/// A new file of this process's own beside `path` (mode 600) holding `bytes`, synced; removed
/// again when writing it fails.
fn fresh_beside(path: &Path, bytes: &[u8]) -> io::Result<std::path::PathBuf> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let fresh = path.with_file_name(format!(
        ".{name}.{}.{:x}",
        std::process::id(),
        crate::support::random::u64()
    ));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&fresh)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        });
    match written {
        Ok(()) => Ok(fresh),
        Err(e) => {
            let _ = std::fs::remove_file(&fresh);
            Err(e)
        }
    }
}

/// How a private file that stays is opened for writing (add `read` to read it too): made with
/// mode 600 when missing, never truncated, never through a symbolic link, and never waiting on
/// a FIFO put in its place.
pub fn kept() -> OpenOptions {
    let mut options = OpenOptions::new();
    options
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    options
}
