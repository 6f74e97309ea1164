//! flock with a bounded wait: a lock held by a process that never lets go is waited for at most
//! `store.lock_timeout_ms`, and a process keeps at most a few threads waiting for locks. Also
//! the one way the store opens a file to change it: created when missing (its directory too),
//! locked, and opened again when a sweep removed it meanwhile.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::store::StoreError;
use crate::store::file::safe_open::{io_error, locked_file, open_ro, open_rw_unchecked};
use crate::support::log::Log;
use crate::support::waited;

/// Threads of this process waiting for a busy lock, and how many may.
pub(crate) static WAITERS: AtomicUsize = AtomicUsize::new(0);
pub(crate) const MAX_WAITERS: usize = 8;
/// Tries at a busy lock, each after `yield_now`, before a waiter thread takes over.
const SPINS: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lock {
    Shared,
    Exclusive,
}

impl Lock {
    fn try_take(self, file: &File) -> Result<(), fs::TryLockError> {
        match self {
            Lock::Shared => file.try_lock_shared(),
            Lock::Exclusive => file.try_lock(),
        }
    }

    fn take(self, file: &File) -> io::Result<()> {
        match self {
            Lock::Shared => file.lock_shared(),
            Lock::Exclusive => file.lock(),
        }
    }
}

/// Takes the lock on `file`, waiting at most `timeout` for another process to let go. Free
/// locks (the usual case) cost one `flock`; a busy one is tried again a few times, then waited
/// for by a helper thread on a duplicate of the descriptor (locks belong to the open file, so
/// the lock it gets is ours); if the time runs out, the thread is left to finish and, once it
/// has the lock, drops it with the last descriptor.
pub(crate) fn lock_within(
    file: &File,
    path: &Path,
    kind: Lock,
    timeout: Duration,
) -> Result<(), StoreError> {
    // Requests hold a lock for microseconds: under contention (many processes on one key) a
    // few tries, each after yielding the processor to whoever holds it, nearly always get it.
    // Spawning the waiter below for each of them cost a FastCGI site a third of its 429
    // throughput (bench/run.sh: 2.8x the floor against 4.7x).
    for attempt in 0..=SPINS {
        if attempt > 0 {
            std::thread::yield_now();
        }
        match kind.try_take(file) {
            Ok(()) => return Ok(()),
            Err(fs::TryLockError::WouldBlock) => {}
            Err(fs::TryLockError::Error(e)) => return Err(io_error("lock", path, &e)),
        }
    }
    let stuck = || {
        StoreError::unavailable(format!(
            "{} stayed locked by another process for {} ms (store.lock_timeout_ms); a lock \
             held that long is not a request's: look for a stuck process with `fuser {}`",
            path.display(),
            timeout.as_millis(),
            path.display()
        ))
    };
    // Waiters given up on stay blocked until the lock is released, each with a descriptor: a
    // long-lived (FastCGI) process facing a lock that is never released would pile them up.
    // Past a few, a request gives up at once.
    let slot = WaiterSlot::take().ok_or_else(stuck)?;
    let waiter = file.try_clone().map_err(|e| io_error("lock", path, &e))?;
    let got = waited::run_for(timeout, Some(64 * 1024), move || {
        let got = kind.take(&waiter);
        drop(slot);
        got
    });
    match got {
        Ok(Some(Ok(()))) => Ok(()),
        Ok(Some(Err(e))) | Err(e) => Err(io_error("lock", path, &e)),
        Ok(None) => Err(stuck()),
    }
}

/// One of the `MAX_WAITERS` places for a waiter thread, given back when dropped (by the thread
/// once it has the lock, or at once when the thread could not be started).
struct WaiterSlot;

impl WaiterSlot {
    fn take() -> Option<WaiterSlot> {
        if WAITERS.fetch_add(1, Ordering::SeqCst) >= MAX_WAITERS {
            WAITERS.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(WaiterSlot)
    }
}

impl Drop for WaiterSlot {
    fn drop(&mut self) {
        WAITERS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A store file, open and locked until dropped (closing it releases the lock).
pub(crate) struct Locked {
    pub(crate) path: PathBuf,
    pub(crate) file: File,
    /// The file's length when its lock was taken, where known: a reader reads that much in
    /// one call instead of reading on until the end shows (one system call fewer per file).
    pub(crate) len_when_locked: Option<u64>,
}

/// Creates the data directory `dir` (mode 700) if it is missing: a store that cannot count
/// would let every request through under the `allow` policy.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            StoreError::unavailable(format!(
                "cannot create the data directory {}: {e}; create it with \
                 `mkdir -m 700 {}` as the account that runs resolve, or set store.dir",
                dir.display(),
                dir.display()
            ))
        })
}

/// [`ensure_dir`] for the file store's data directory: one made again where it was is said
/// out loud ([`super::made`]), as its counts are gone.
pub(crate) fn ensure_data_dir(dir: &Path, log: &dyn Log) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    ensure_dir(dir)?;
    super::made::made(dir, log);
    Ok(())
}

/// Opens the file at `path`, in a directory of its own right under the data directory `dir`
/// (a shard, the journal), and takes its lock. The file and its directory (mode 700) are
/// created when missing; a directory that is a symbolic link is refused.
pub(crate) fn open_locked(
    (dir, below): (&Path, bool),
    path: &Path,
    kind: Lock,
    timeout: Duration,
    log: &dyn Log,
) -> Result<Locked, StoreError> {
    lock_opened((dir, below), path, None, kind, timeout, log)
}

/// [`open_locked`] of a file the caller may have opened already, as it found whether the
/// file exists ([`super::safe_open::open_existing`]): that open is the first one tried, after
/// the same check of its directory. `below`: the data directory `dir` is the working
/// directory, and the file is opened by its path below it ([`below_dir`]); a file or directory
/// to make is made by its whole path.
pub(crate) fn lock_opened(
    (dir, below): (&Path, bool),
    path: &Path,
    mut opened: Option<File>,
    kind: Lock,
    timeout: Duration,
    log: &dyn Log,
) -> Result<Locked, StoreError> {
    let parent = directory_of(path).unwrap_or(dir);
    let short = below_dir(dir, path, below);
    refuse_linked_parent(directory_of(short).unwrap_or(parent), parent)?;
    loop {
        let file = match opened
            .take()
            .map_or_else(|| open_rw_unchecked(short, true), Ok)
        {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound || !dir.is_dir() => {
                make_parent(dir, parent, log)?;
                open_rw_unchecked(path, true).map_err(|e| io_error("create", path, &e))?
            }
            Err(e) => return Err(io_error("open", path, &e)),
        };
        lock_within(&file, path, kind, timeout)?;
        // Once locked, what the descriptor is: a file removed meanwhile (by a sweep, or moved
        // aside as damaged) has no name left, and the path is opened again.
        match locked_file(path, &file) {
            Ok(Some(metadata)) => {
                return Ok(Locked {
                    path: path.to_owned(),
                    file,
                    len_when_locked: Some(metadata.len()),
                });
            }
            Ok(None) => {}
            Err(e) => return Err(io_error("open", path, &e)),
        }
    }
}

/// Refuses a file's directory (`parent`, looked up as `short`) that is a symbolic link: it
/// would take the files somewhere else.
#[inline]
fn refuse_linked_parent(short: &Path, parent: &Path) -> Result<(), StoreError> {
    if fs::symlink_metadata(short).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(StoreError::unavailable(format!(
            "{} is a symbolic link, which the store never follows: remove it (the store \
             makes a directory there)",
            parent.display()
        )));
    }
    Ok(())
}

/// Makes the data directory `dir` if it is missing, and `parent` in it (mode 700).
fn make_parent(dir: &Path, parent: &Path, log: &dyn Log) -> Result<(), StoreError> {
    ensure_data_dir(dir, log)?;
    match fs::DirBuilder::new().mode(0o700).create(parent) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io_error("create directory", parent, &e)),
    }
}

/// `path` (a file of the store, under the data directory `dir`) as the process opens it: its
/// path below `dir` when `below` says the working directory is `dir`, so that an open walks
/// two names instead of every directory from the root; the whole path otherwise, or when it
/// is not under `dir`. Taken off as bytes after `dir/`, not by `Path::strip_prefix` (which
/// takes both paths apart component by component).
pub(crate) fn below_dir<'p>(dir: &Path, path: &'p Path, below: bool) -> &'p Path {
    if !below {
        return path;
    }
    let dir = dir.as_os_str().as_bytes();
    let dir = &dir[..dir.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1)];
    match path
        .as_os_str()
        .as_bytes()
        .strip_prefix(dir)
        .and_then(|rest| rest.strip_prefix(b"/"))
    {
        Some(rest) if !dir.is_empty() && !rest.is_empty() && rest[0] != b'/' => {
            Path::new(OsStr::from_bytes(rest))
        }
        _ => path,
    }
}

/// The directory `path` is in: `Path::parent` of a file's path, found as what comes before
/// its last `/` (without the separators that end it), not by taking the path apart
/// component by component (a third of what locking a file cost in instructions).
fn directory_of(path: &Path) -> Option<&Path> {
    let bytes = path.as_os_str().as_bytes();
    let Some(last) = bytes.iter().rposition(|&b| b == b'/') else {
        // A bare name is in the current directory, as `Path::parent` says it.
        return (!bytes.is_empty()).then(|| Path::new(""));
    };
    if last + 1 == bytes.len() || matches!(&bytes[last + 1..], b"." | b"..") {
        // Not the path of a file: taken apart as `Path::parent` does.
        return path.parent();
    }
    let end = bytes[..last]
        .iter()
        .rposition(|&b| b != b'/')
        .map_or(1, |i| i + 1);
    Some(Path::new(OsStr::from_bytes(&bytes[..end])))
}

/// Opens `path` for reading (by `short`, the path it is opened by: see [`below_dir`]) and takes
/// its shared lock: writers hold the exclusive one, so a reader never sees half a write.
/// `None` when there is no such file.
pub(crate) fn open_shared(
    (path, short): (&Path, &Path),
    timeout: Duration,
) -> Result<Option<File>, StoreError> {
    let file = match open_ro(short) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("open", path, &e)),
    };
    lock_within(&file, path, Lock::Shared, timeout)?;
    Ok(Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_opened_below_the_data_directory_only_when_it_is_the_working_one() {
        let path = Path::new("/home/ann/resolve/ratelimit/ab/abcd");
        for dir in [
            "/home/ann/resolve/ratelimit",
            "/home/ann/resolve/ratelimit/",
        ] {
            assert_eq!(below_dir(Path::new(dir), path, true), Path::new("ab/abcd"));
            assert_eq!(below_dir(Path::new(dir), path, false), path);
        }
        // Not under it (a name that only starts alike, another place, the root, itself): whole.
        for dir in [
            "/home/ann/resolve/rate",
            "/elsewhere",
            "/",
            "",
            "/home/ann/resolve/ratelimit/ab/abcd",
        ] {
            assert_eq!(below_dir(Path::new(dir), path, true), path, "{dir}");
        }
        assert_eq!(
            below_dir(Path::new("/d"), Path::new("/d//ab/abcd"), true),
            Path::new("/d//ab/abcd")
        );
    }

    #[test]
    fn a_files_directory_is_as_path_parent_finds_it() {
        for path in [
            "/data/ab/abcd",
            "data/ab/abcd.cache",
            "/data//ab//abcd",
            "/abcd",
            "//abcd",
            "abcd",
            "",
            "/",
            "/data/ab/",
            "/data/ab/.",
            "/data/ab/..",
            "./abcd",
            "../abcd",
        ] {
            let path = Path::new(path);
            assert_eq!(directory_of(path), path.parent(), "{path:?}");
        }
    }
}
