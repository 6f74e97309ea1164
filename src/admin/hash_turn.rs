//! One password hash at a time per site: a sign-in holds the lock of a file in the data
//! directory (`admin-hash.lock`) while its hash is computed, so that guesses from many
//! addresses, processes or servers sharing the directory never take more than one core. A
//! sign-in that cannot have its turn within a moment is answered 429 without a hash.

use std::fs::{File, TryLockError};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{defaults, private_file};

/// The turn, held until dropped.
#[derive(Debug)]
pub struct Turn {
    _file: File,
}

/// Waits up to `wait` for the turn; None when another hash was still being computed then.
pub fn take(dir: &Path, wait: Duration) -> std::io::Result<Option<Turn>> {
    let file = private_file::kept().open(dir.join(defaults::ADMIN_HASH_LOCK_FILE))?;
    let start = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Some(Turn { _file: file })),
            Err(TryLockError::WouldBlock) if start.elapsed() < wait => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_turn_at_a_time() {
        let dir = crate::support::temp::dir("hash-turn", "one");
        let first = take(&dir, Duration::ZERO).unwrap().expect("free");
        let started = Instant::now();
        assert!(take(&dir, Duration::from_millis(50)).unwrap().is_none());
        assert!(started.elapsed() >= Duration::from_millis(50), "it waited");
        drop(first);
        assert!(take(&dir, Duration::ZERO).unwrap().is_some(), "free again");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
