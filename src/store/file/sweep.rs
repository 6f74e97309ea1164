//! The store's upkeep: a sweep (the journal, the folded keys, then the shard directories from a
//! random one on, within its budget), the probe of `resolve check`, and the sweep's look at one
//! shard directory and each file in it: a counter whose window ended
//! longer ago than the grace, a cached answer past its expiry, a damaged file set aside long
//! ago, each removed only while holding its lock, so that no writer loses what it wrote.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::lock::Locked;
use super::record::Loaded;
use super::safe_open::{DAMAGED_SUFFIX, io_error, modified_secs, not_a_file, open_ro, still_named};
use super::{
    CACHE_SUFFIX, FileStore, cache_expiry, is_key_file_name, is_shard_name, made, modified_before,
    read_all,
};
use crate::core::clock::Clock;
use crate::store::upkeep::Upkeep;
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

impl<C: Clock> Upkeep for FileStore<C> {
    fn sweep(&self, budget: Option<Duration>) -> Result<SweepReport, StoreError> {
        if !self.dir.is_dir() {
            return Ok(SweepReport {
                complete: true,
                ..SweepReport::default()
            });
        }
        made::check(&self.dir, &self.log);
        // The budget is kept on the store's clock, as every time it keeps: with a test's clock
        // the sweep's end depends on that clock alone, never on the machine's speed.
        let deadline = budget.map(|b| {
            let ms = u64::try_from(b.as_millis()).unwrap_or(u64::MAX);
            self.clock.now_ms().saturating_add(ms)
        });
        let past = || deadline.is_some_and(|d| self.clock.now_ms() >= d);
        let now = self.clock.now_ms();
        let mut shards: Vec<PathBuf> = fs::read_dir(&self.dir)
            .map_err(|e| io_error("list", &self.dir, &e))?
            .filter_map(Result::ok)
            .filter(|e| is_shard_name(&e.file_name().to_string_lossy()))
            // A link in place of a shard leads outside: never swept (requests refuse it too).
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        shards.sort();
        // A bounded sweep starts at a random shard so that, over many requests, all get swept.
        if !shards.is_empty() {
            let start = (crate::support::random::u64() % shards.len() as u64) as usize;
            shards.rotate_left(start);
        }
        let mut report = SweepReport {
            complete: true,
            ..SweepReport::default()
        };
        // The journal first: it has work once an hour, and otherwise costs one listing.
        if !self.journal().sweep(now, &past, &mut report)? {
            report.complete = false;
            return Ok(report);
        }
        // The folded keys first: they are few, and end with their windows.
        let folded = self.dir.join(crate::support::defaults::FILE_STORE_FOLD_DIR);
        if !self.sweep_shard(&folded, now, &past, &mut report)? {
            report.complete = false;
            return Ok(report);
        }
        for shard in &shards {
            let done = self.sweep_shard(shard, now, &past, &mut report)?;
            // What the sweep removed is room again for new clients' own keys.
            self.recount(shard)?;
            if !done {
                report.complete = false;
                break;
            }
        }
        if report.complete {
            self.room_again();
        }
        Ok(report)
    }

    fn probe(&self) -> Result<String, StoreError> {
        self.ensure_dir()?;
        let meta = fs::metadata(&self.dir).map_err(|e| io_error("inspect", &self.dir, &e))?;
        if !meta.is_dir() {
            return Err(StoreError::unavailable(format!(
                "{} is not a directory: set store.dir to a directory",
                self.dir.display()
            )));
        }
        let probe = self.dir.join(format!(".probe-{}", std::process::id()));
        let written = fs::write(&probe, b"probe").map_err(|e| {
            StoreError::unavailable(format!(
                "cannot write in {}: {e} (the account that runs resolve must own it: chmod 700)",
                self.dir.display()
            ))
        });
        let _ = fs::remove_file(&probe);
        written?;
        Ok(format!("file store in {}", self.dir.display()))
    }

    fn folding(&self) -> Result<Option<crate::store::upkeep::Folding>, StoreError> {
        self.folding_now()
    }

    fn clear_folded(&self) -> Result<u64, StoreError> {
        self.clear_folded_keys()
    }
}
