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
    open_regular_checked(options, path).map(|(file, _)| file)
}

/// `open_regular`, with the metadata it checked the file by: its device and inode hold for as
/// long as the file is open, so `names` can tell later whether the path still leads to it
/// without asking the descriptor again.
pub(crate) fn open_regular_checked(
    options: &mut OpenOptions,
    path: &Path,
) -> io::Result<(File, fs::Metadata)> {
    let file = options.custom_flags(OPEN_FLAGS).open(path).map_err(|e| {
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
    })?;
    let metadata = file.metadata()?;
    if !metadata.file_type().is_file() {
        return Err(not_regular(path));
    }
    Ok((file, metadata))
}

pub(crate) fn open_rw(path: &Path) -> io::Result<File> {
    open_rw_checked(path).map(|(file, _)| file)
}

/// `open_rw`, with the metadata of the file opened (see `open_regular_checked`).
pub(crate) fn open_rw_checked(path: &Path) -> io::Result<(File, fs::Metadata)> {
    open_regular_checked(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600),
        path,
    )
}

/// `open_rw_checked` of a file that exists, making none: whether a key has its file, found
/// by opening it (the open a lock needs anyway) rather than by looking it up first.
pub(crate) fn open_existing(path: &Path) -> io::Result<(File, fs::Metadata)> {
    open_regular_checked(OpenOptions::new().read(true).write(true), path)
}

pub(crate) fn open_ro(path: &Path) -> io::Result<File> {
    open_regular(OpenOptions::new().read(true), path)
}

/// True when `path` still names the inode `file` has open (and is not a link to it).
pub(crate) fn still_named(path: &Path, file: &File) -> bool {
    file.metadata().is_ok_and(|f| names(path, &f))
}

/// True when `path` names the inode whose metadata `opened` is (taken from its descriptor,
/// see `open_regular_checked`), and is not a link to it.
pub(crate) fn names(path: &Path, opened: &fs::Metadata) -> bool {
    named(path, opened).is_some()
}

/// [`names`], with the path's metadata as looked up when it does.
pub(crate) fn named(path: &Path, opened: &fs::Metadata) -> Option<fs::Metadata> {
    fs::symlink_metadata(path)
        .ok()
        .filter(|p| p.dev() == opened.dev() && p.ino() == opened.ino())
}

/// A failed file operation, as a store failure naming the file.
pub(crate) fn io_error(what: &str, path: &Path, e: &io::Error) -> StoreError {
    StoreError::unavailable(format!("cannot {what} {}: {e}", path.display()))
}

/// Moves a damaged file aside (`NAME.damaged`) for the owner to look at; returns where.
pub(crate) fn move_aside(path: &Path) -> PathBuf {
    let mut aside = path.as_os_str().to_owned();
    aside.push(DAMAGED_SUFFIX);
    let aside = PathBuf::from(aside);
    let _ = fs::rename(path, &aside);
    aside
}

/// When an entry was last modified, in seconds since 1970.
pub(crate) fn modified_secs(m: &fs::Metadata) -> u64 {
    u64::try_from(m.mtime()).unwrap_or(0)
}
