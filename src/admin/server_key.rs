//! The server's secret for the dashboard: 32 random bytes in a file of the data directory
//! (mode 600, made on first use, never under the web root). With the password hash it makes the
//! key that signs the dashboard's cookies, so a copy of the configuration alone cannot forge one.

use std::fmt;
use std::fs;
use std::io::{self, ErrorKind, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::support::{defaults, private_file};

/// Bytes in the secret.
pub const LEN: usize = 32;

/// Why the secret could not be had.
#[derive(Debug)]
pub enum ServerKeyError {
    /// The data directory lies under a web root (its name), where the secret could be fetched.
    UnderWebRoot { dir: PathBuf, root: &'static str },
    /// The secret's file is there but could not be read.
    Read { path: PathBuf, error: io::Error },
    /// The secret's file does not hold a secret.
    Damaged { path: PathBuf },
    /// The data directory could not be made.
    CreateDir { dir: PathBuf, error: io::Error },
    /// No random bytes to make one.
    Random(io::Error),
    /// The new secret could not be written.
    Write { path: PathBuf, error: io::Error },
}

impl fmt::Display for ServerKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerKeyError::UnderWebRoot { dir, root } => write!(
                f,
                "the data directory {} lies under the web root ({root}), where the dashboard's \
                 secret could be fetched over HTTP: move it (store.dir) to ~/resolve/ratelimit",
                dir.display()
            ),
            ServerKeyError::Read { path, error } => {
                write!(f, "cannot read {}: {error}", path.display())
            }
            ServerKeyError::Damaged { path } => write!(
                f,
                "{} is damaged (it must hold {LEN} bytes): remove it, and a new one is made at the \
                 next sign-in (whoever was signed in must sign in again)",
                path.display()
            ),
            ServerKeyError::CreateDir { dir, error } => {
                write!(f, "cannot create {}: {error}", dir.display())
            }
            ServerKeyError::Random(error) => write!(
                f,
                "cannot read random bytes for the dashboard's secret: {error}"
            ),
            ServerKeyError::Write { path, error } => {
                write!(f, "cannot write {}: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for ServerKeyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServerKeyError::UnderWebRoot { .. } | ServerKeyError::Damaged { .. } => None,
            ServerKeyError::Read { error, .. }
            | ServerKeyError::CreateDir { error, .. }
            | ServerKeyError::Random(error)
            | ServerKeyError::Write { error, .. } => Some(error),
        }
    }
}

/// The secret kept in `dir`, made there when there is none yet. Two processes making it at
/// once end up with the same one: each writes a file of its own and links it into place, and
/// the one that comes second reads the first's.
pub fn load_or_create(dir: &Path) -> Result<[u8; LEN], ServerKeyError> {
    if let Some(root) = crate::usage::readiness::web_root_in(dir) {
        return Err(ServerKeyError::UnderWebRoot {
            dir: dir.to_owned(),
            root,
        });
    }
    let path = dir.join(defaults::ADMIN_SECRET_FILE);
    let unreadable = |error| ServerKeyError::Read {
        path: path.clone(),
        error,
    };
    match read(&path) {
        Err(e) if e.kind() == ErrorKind::NotFound => create(dir, &path)?,
        Err(e) => return Err(unreadable(e)),
        Ok(secret) => return checked(&path, secret),
    }
    read(&path)
        .map_err(unreadable)
        .and_then(|secret| checked(&path, secret))
}

fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::with_capacity(LEN);
    Read::by_ref(&mut file)
        .take(LEN as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn checked(path: &Path, bytes: Vec<u8>) -> Result<[u8; LEN], ServerKeyError> {
    bytes.try_into().map_err(|_| ServerKeyError::Damaged {
        path: path.to_owned(),
    })
}

fn create(dir: &Path, path: &Path) -> Result<(), ServerKeyError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|error| ServerKeyError::CreateDir {
            dir: dir.to_owned(),
            error,
        })?;
    let secret = crate::support::random::secret_bytes::<LEN>().map_err(ServerKeyError::Random)?;
    match private_file::create(path, &secret) {
        // Another process made it first: the caller reads that one.
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
    .map_err(|error| ServerKeyError::Write {
        path: path.to_owned(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp(label: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "resolve-key-{label}-{}-{:x}",
            std::process::id(),
            crate::support::random::u64()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn made_once_private_and_kept() {
        let dir = temp("made");
        let data = dir.join("ratelimit");
        let first = load_or_create(&data).unwrap();
        let path = data.join(defaults::ADMIN_SECRET_FILE);
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            fs::metadata(&data).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(load_or_create(&data).unwrap(), first, "kept");
        assert_ne!(first, [0; LEN]);
        // Only the secret is left: no temporary file.
        assert_eq!(fs::read_dir(&data).unwrap().count(), 1);
        // Damaged: said so, never replaced behind the owner's back.
        fs::write(&path, b"short").unwrap();
        let e = load_or_create(&data).unwrap_err();
        assert!(matches!(e, ServerKeyError::Damaged { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "{} is damaged (it must hold 32 bytes): remove it, and a new one is made at the \
                 next sign-in (whoever was signed in must sign in again)",
                path.display()
            )
        );
        assert!(std::error::Error::source(&e).is_none());
        fs::remove_file(&path).unwrap();
        assert_ne!(load_or_create(&data).unwrap(), first, "a new one");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn many_at_once_agree() {
        let dir = temp("race");
        let keys: Vec<[u8; LEN]> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| load_or_create(&dir).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(keys.windows(2).all(|w| w[0] == w[1]));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn never_under_the_web_root() {
        let dir = temp("web").join("public_html").join("data");
        let e = load_or_create(&dir).unwrap_err().to_string();
        assert!(e.contains("under the web root (public_html)"), "{e}");
        assert!(!dir.exists());
    }

    #[test]
    fn a_file_that_cannot_be_read_keeps_the_reason() {
        let dir = temp("unreadable");
        // A directory where the secret's file should be: it cannot be read as one.
        fs::create_dir_all(dir.join(defaults::ADMIN_SECRET_FILE)).unwrap();
        let e = load_or_create(&dir).unwrap_err();
        let ServerKeyError::Read { path, error } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(path, &dir.join(defaults::ADMIN_SECRET_FILE));
        assert_eq!(
            e.to_string(),
            format!("cannot read {}: {error}", path.display())
        );
        let cause = std::error::Error::source(&e).expect("the io error");
        assert_eq!(cause.to_string(), error.to_string());
        fs::remove_dir_all(&dir).unwrap();
    }
}
