//! The sweep's look at one shard directory and each file in it: a counter whose window ended
//! longer ago than the grace, a cached answer past its expiry, a damaged file set aside long
//! ago, each removed only while holding its lock, so that no writer loses what it wrote.

use std::fs;
use std::io;
use std::path::Path;

use super::lock::Locked;
use super::record::Loaded;
use super::safe_open::{DAMAGED_SUFFIX, io_error, modified_secs, not_a_file, open_ro, still_named};
use super::{CACHE_SUFFIX, FileStore, cache_expiry, is_key_file_name, modified_before, read_all};
use crate::core::clock::Clock;
use crate::store::{StoreError, SweepReport};

impl<C: Clock> FileStore<C> {
    /// Looks at one file of a sweep: removes it if its window ended long ago.
    pub(super) fn sweep_file(
        &self,
        path: &Path,
        now: u64,
        report: &mut SweepReport,
    ) -> Result<(), StoreError> {
        let file = match open_ro(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            // A link, a FIFO or anything else that is not a counter: not ours to judge.
            Err(e) if not_a_file(&e) => {
                report.damaged += 1;
                return Ok(());
            }
            Err(e) => return Err(io_error("open", path, &e)),
        };
        if file.try_lock().is_err() || !still_named(path, &file) {
            return Ok(()); // in use right now, so not stale
        }
        report.scanned += 1;
        let locked = Locked {
            path: path.to_owned(),
            file,
            len_when_locked: None,
        };
        let stale = match self.load(&locked) {
            Ok(Loaded {
                counter: Some(c), ..
            }) => c.end_ms().saturating_add(self.grace_ms) < now,
            // Left empty by a process killed between creating and writing it.
            Ok(Loaded { counter: None, .. }) => {
                modified_before(&locked.file, now - self.grace_ms.min(now))
            }
            Err(_) => {
                report.damaged += 1;
                return Ok(());
            }
        };
        if stale {
            match fs::remove_file(path) {
                Ok(()) => report.removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("remove", path, &e)),
            }
        }
        Ok(())
    }

    pub(super) fn sweep_shard(
        &self,
        shard: &Path,
        now: u64,
        past: &dyn Fn() -> bool,
        report: &mut SweepReport,
    ) -> Result<bool, StoreError> {
        let entries = match fs::read_dir(shard) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
            Err(e) => return Err(io_error("list", shard, &e)),
        };
        for entry in entries {
            if past() {
                return Ok(false);
            }
            let entry = entry.map_err(|e| io_error("list", shard, &e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let path = entry.path();
            if is_key_file_name(&name) {
                self.sweep_file(&path, now, report)?;
            } else if name.ends_with(CACHE_SUFFIX) {
                report.scanned += 1;
                // Like a counter: only while holding its lock, so no writer loses its entry.
                let Ok(file) = open_ro(&path) else {
                    continue;
                };
                if file.try_lock().is_err() || !still_named(&path, &file) {
                    continue;
                }
                let expired = read_all(&file, &path)
                    .ok()
                    .and_then(|bytes| cache_expiry(&bytes))
                    .is_none_or(|expires| expires.saturating_add(self.grace_ms) < now)
                    && modified_before(&file, now.saturating_sub(self.grace_ms));
                if expired && fs::remove_file(&path).is_ok() {
                    report.removed += 1;
                }
            } else if name.ends_with(DAMAGED_SUFFIX)
                && entry.metadata().is_ok_and(|m| {
                    modified_secs(&m)
                        .saturating_mul(1000)
                        .saturating_add(self.grace_ms)
                        < now
                })
            {
                let _ = fs::remove_file(&path);
            }
        }
        Ok(true)
    }
}
