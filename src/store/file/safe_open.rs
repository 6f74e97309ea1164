//! Opening the store's files without trusting the directory: a symbolic link is never followed,
//! a FIFO or device never read or waited on, and a file removed by a sweep while a request held
//! it open is noticed.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::store::StoreError;

/// Suffix of a damaged file moved aside for the owner to look at.
pub(crate) const DAMAGED_SUFFIX: &str = ".damaged";

/// Flags of every open in the store: never through a symbolic link, never blocking (a FIFO
/// opened for reading would wait for a writer forever).
pub(crate) const OPEN_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK;

/// The error for an entry that is not a regular file.
pub(crate) fn not_regular(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "not a regular file (the store only makes regular files there: remove {})",
            path.display()
        ),
    )
}

/// Whether an open failed because the entry is not a regular file: a symbolic link (`ELOOP`
/// with `O_NOFOLLOW`), a FIFO or device, a directory.
pub(crate) fn not_a_file(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::InvalidInput
        || matches!(
            e.raw_os_error(),
            Some(libc::ELOOP | libc::EISDIR | libc::ENXIO)
        )
}

/// Opens `path` (as `options` say) and makes sure it is a regular file.
pub(crate) fn open_regular(options: &mut OpenOptions, path: &Path) -> io::Result<File> {
    let file = options
        .custom_flags(OPEN_FLAGS)
        .open(path)
        .map_err(|e| link_refused(path, e))?;
    if !file.metadata()?.file_type().is_file() {
        return Err(not_regular(path));
    }
    Ok(file)
}

/// An open's error, said as the store's refusal when the entry was a symbolic link.
pub(crate) fn link_refused(path: &Path, e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a symbolic link, which the store never follows: remove {}",
                path.display()
            ),
        )
    } else {
        e
    }
}

pub(crate) fn open_rw(path: &Path) -> io::Result<File> {
    open_regular(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600),
        path,
    )
}

/// Opens `path` for reading and writing (creating it, mode 600, when `create`), without
/// looking at what it is: a lock is taken on it next, and [`locked_file`] says then what the
/// descriptor is, in the one `fstat` a lock needs anyway.
pub(crate) fn open_rw_unchecked(path: &Path, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .mode(0o600)
        .custom_flags(OPEN_FLAGS)
        .open(path)
        .map_err(|e| link_refused(path, e))
}

/// A file of the store that exists, opened and not made: whether a key has its file, found
/// by opening it (the open a lock needs anyway) rather than by looking it up first.
pub(crate) fn open_existing(path: &Path) -> io::Result<File> {
    open_rw_unchecked(path, false)
}

/// What a file opened at `path` is, once its lock is held: its metadata when it is a regular
/// file still in the directory, `None` when it was removed meanwhile (by a sweep, or moved
/// aside as damaged: both happen under the lock, and both leave the inode without a name, see
/// [`move_aside`]), an error when it is not a regular file. Asked of the descriptor (`fstat`),
/// not of the path, which would walk the directories again.
pub(crate) fn locked_file(path: &Path, file: &File) -> io::Result<Option<fs::Metadata>> {
    let metadata = file.metadata()?;
    if !metadata.file_type().is_file() {
        return Err(not_regular(path));
    }
    Ok((metadata.nlink() > 0).then_some(metadata))
}

pub(crate) fn open_ro(path: &Path) -> io::Result<File> {
    open_regular(OpenOptions::new().read(true), path)
}

/// True when `path` still names the inode `file` has open (and is not a link to it).
pub(crate) fn still_named(path: &Path, file: &File) -> bool {
    file.metadata().is_ok_and(|opened| {
        fs::symlink_metadata(path).is_ok_and(|p| p.dev() == opened.dev() && p.ino() == opened.ino())
    })
}

/// A failed file operation, as a store failure naming the file.
pub(crate) fn io_error(what: &str, path: &Path, e: &io::Error) -> StoreError {
    StoreError::unavailable(format!("cannot {what} {}: {e}", path.display()))
}

/// Moves a damaged file aside (`NAME.damaged`) for the owner to look at; returns where. Its
/// bytes are copied there and the file removed, rather than renamed: a request waiting for the
/// file's lock then finds its inode without a name ([`locked_file`]) and opens the path again,
/// where a renamed inode would still have one, and the request would count into the copy.
pub(crate) fn move_aside(path: &Path) -> PathBuf {
    let mut aside = path.as_os_str().to_owned();
    aside.push(DAMAGED_SUFFIX);
    let aside = PathBuf::from(aside);
    let copied = fs::read(path).and_then(|bytes| {
        let mut out = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(OPEN_FLAGS)
            .open(&aside)?;
        io::Write::write_all(&mut out, &bytes)
    });
    match copied {
        Ok(()) => {
            let _ = fs::remove_file(path);
        }
        // No room for a copy: renamed as before, so that the key starts afresh all the same.
        Err(_) => {
            let _ = fs::rename(path, &aside);
        }
    }
    aside
}

/// When an entry was last modified, in seconds since 1970.
pub(crate) fn modified_secs(m: &fs::Metadata) -> u64 {
    u64::try_from(m.mtime()).unwrap_or(0)
}
