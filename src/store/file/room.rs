//! How many entries the shard directories hold, kept in one small file beside them
//! (`FILE_STORE_COUNT_FILE`: a count for each of the 256 shards), so that whether a new key has
//! room is one read of one file, never a listing of the directory.
//!
//! Each count is exact as of the last time its shard was listed under the shard's lock: a new
//! key is made under that lock after the shard is listed again and its count written, and a
//! sweep writes the count of each shard it went through. Between two of those a count can
//! only be high (an entry removed, which is counted again at the next listing) or low by the
//! files of processes killed between making a file and writing the count, and by cached
//! answers; the next listing of the shard corrects either. A missing or short file reads as
//! zeros for the shards it does not hold.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::store::StoreError;
use crate::store::file::budget::SHARDS;
use crate::store::file::lock::{self, Lock};
use crate::store::file::safe_open::{io_error, open_rw};
use crate::support::defaults;

/// Bytes of one shard's count.
const COUNT_BYTES: usize = 4;

/// The counts of the shard directories under the data directory `dir`.
pub(crate) struct Room<'a> {
    pub(crate) dir: &'a Path,
    pub(crate) timeout: Duration,
}

/// The counts as read, one per shard.
pub(crate) struct Counts([u32; SHARDS as usize]);

impl Counts {
    pub(crate) fn total(&self) -> u64 {
        self.0.iter().map(|&n| u64::from(n)).sum()
    }

    fn decode(bytes: &[u8]) -> Counts {
        let mut out = [0u32; SHARDS as usize];
        for (slot, chunk) in out.iter_mut().zip(bytes.chunks_exact(COUNT_BYTES)) {
            let mut word = [0u8; COUNT_BYTES];
            word.copy_from_slice(chunk);
            *slot = u32::from_le_bytes(word);
        }
        Counts(out)
    }

    fn encode(&self) -> Vec<u8> {
        self.0.iter().flat_map(|n| n.to_le_bytes()).collect()
    }
}

impl Room<'_> {
    fn path(&self) -> PathBuf {
        self.dir.join(defaults::FILE_STORE_COUNT_FILE)
    }

    /// The entries the shard directories hold, all together, read under the file's shared
    /// lock (zero when the file is not there yet).
    pub(crate) fn total(&self) -> Result<u64, StoreError> {
        let path = self.path();
        let Some(file) = lock::open_shared((&path, &path), self.timeout)? else {
            return Ok(0);
        };
        Ok(read(&file, &path)?.total())
    }

    /// Under the file's exclusive lock: sets the count of shard `shard` (its directory's
    /// name, two hex digits) to `entries`, then, if `make` says so given the counts, adds
    /// one more to it. Returns what `make` said. The caller holds the shard's lock.
    pub(crate) fn set(
        &self,
        shard: &str,
        entries: u64,
        make: impl FnOnce(&Counts) -> Result<bool, StoreError>,
    ) -> Result<bool, StoreError> {
        let Some(index) = shard_index(shard) else {
            return make(&Counts([0; SHARDS as usize]));
        };
        let path = self.path();
        let file = open_rw(&path).map_err(|e| io_error("open", &path, &e))?;
        lock::lock_within(&file, &path, Lock::Exclusive, self.timeout)?;
        let mut counts = read(&file, &path)?;
        counts.0[index] = u32::try_from(entries).unwrap_or(u32::MAX);
        let made = make(&counts)?;
        if made {
            counts.0[index] = counts.0[index].saturating_add(1);
        }
        file.write_all_at(&counts.encode(), 0)
            .map_err(|e| io_error("write", &path, &e))?;
        Ok(made)
    }
}

fn read(file: &File, path: &Path) -> Result<Counts, StoreError> {
    let mut buf = vec![0u8; SHARDS as usize * COUNT_BYTES];
    let mut len = 0;
    while len < buf.len() {
        match file.read_at(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error("read", path, &e)),
        }
    }
    Ok(Counts::decode(&buf[..len]))
}

/// The index of a shard directory's name (`00` to `ff`).
fn shard_index(name: &str) -> Option<usize> {
    (name.len() == 2)
        .then(|| usize::from_str_radix(name, 16).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_kept_per_shard_and_summed() {
        let dir = std::env::temp_dir().join(format!("resolve-room-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let room = Room {
            dir: &dir,
            timeout: Duration::from_secs(1),
        };
        assert_eq!(room.total().unwrap(), 0);
        assert!(room.set("0a", 5, |c| Ok(c.total() < 10)).unwrap());
        assert!(room.set("ff", 3, |c| Ok(c.total() < 10)).unwrap());
        assert_eq!(room.total().unwrap(), 10);
        // Private to the account, like every file of the store.
        let mode = std::fs::metadata(dir.join(defaults::FILE_STORE_COUNT_FILE))
            .unwrap()
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        // Full: nothing made, the count written as listed.
        assert!(!room.set("ff", 4, |c| Ok(c.total() < 10)).unwrap());
        assert_eq!(room.total().unwrap(), 10);
        // A shard listed again after a sweep: its count drops.
        assert!(!room.set("0a", 0, |_| Ok(false)).unwrap());
        assert_eq!(room.total().unwrap(), 4);
        assert_eq!(shard_index("zz"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
