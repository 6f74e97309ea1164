//! The folded keys as a whole: whether new clients are being folded now, the folded keys'
//! counts (for the owner and the tests), and the owner's clearing of them from the dashboard.

use std::fs;
use std::io;
use std::path::PathBuf;

use crate::core::clock::Clock;
use crate::core::limiter::Counter;
use crate::store::StoreError;
use crate::store::file::FileStore;
use crate::store::file::budget::Room;
use crate::store::file::safe_open::{io_error, still_named};
use crate::store::upkeep::Folding;
use crate::support::defaults;

impl<C: Clock> FileStore<C> {
    /// The files of the folded keys.
    fn folded_files(&self) -> Result<Vec<PathBuf>, StoreError> {
        let dir = self.dir.join(defaults::FILE_STORE_FOLD_DIR);
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error("list", &dir, &e)),
        };
        Ok(entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .collect())
    }

    /// The counters of the folded keys, each read under its lock (an empty one as None).
    pub fn folded_counters(&self) -> Result<Vec<Option<Counter>>, StoreError> {
        self.folded_files()?
            .iter()
            .map(|path| self.read_path(path))
            .collect()
    }

    /// Whether new clients are folded now, with the figures the owner is told.
    pub(crate) fn folding_now(&self) -> Result<Option<Folding>, StoreError> {
        let entries = self.room().total()?;
        let cap = self.budget.cap(Room::Client);
        if entries < cap {
            return Ok(None);
        }
        let now = self.clock.now_ms();
        let live = self
            .folded_counters()?
            .into_iter()
            .flatten()
            .filter(|c| c.end_ms() > now)
            .count() as u64;
        Ok(Some(Folding {
            entries,
            cap,
            max_files: self.budget.max_files,
            max_bytes: self.budget.max_bytes,
            folded_keys: live,
            buckets: self.budget.buckets(),
        }))
    }

    /// Removes every folded key (each under its lock, as a sweep does): the clients they
    /// counted start afresh. Returns how many were removed.
    pub(crate) fn clear_folded_keys(&self) -> Result<u64, StoreError> {
        let mut removed = 0;
        for path in self.folded_files()? {
            let locked = self.lock(&path)?;
            if still_named(&path, &locked.file) {
                match fs::remove_file(&path) {
                    Ok(()) => removed += 1,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io_error("remove", &path, &e)),
                }
            }
        }
        let _ = fs::remove_file(self.dir.join(defaults::FILE_STORE_FOLDING_MARK));
        Ok(removed)
    }
}
