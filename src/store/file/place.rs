//! Where a check is counted under the data directory's budget ([`super::budget`]): the finest
//! of its keys that has a file, or else the finest one that may be made (its shard has room
//! for its level, and no coarser key of it counts a window still running); a shard's lock
//! (flock on its directory) makes counting its entries and creating the file one step.
//!
//! Exactness: a client is counted by one key at a time. A finer key is made only while no
//! coarser key of the client counts a running window, and once the files are locked each
//! placement is checked again ([`FileStore::still_placed`]): a coarser key's request that finds
//! a finer file, or a new finer file that finds a coarser key counting, starts over (the new
//! empty file removed under its lock). So a client counted by its network never gets a fresh
//! count of its own within that network's window.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::core::clock::Clock;
use crate::core::limiter::Counter;
use crate::core::rule::KeyKind;
use crate::store::file::FileStore;
use crate::store::file::budget::{self, Level};
use crate::store::file::lock::{self, Lock, Locked};
use crate::store::file::record::Loaded;
use crate::store::file::safe_open::{io_error, open_rw};
use crate::store::{Check, StoreError};
use crate::support::defaults;
use crate::support::log::{Level as LogLevel, Log, StderrLog};

/// Where one check is counted, and its other keys' files.
pub(crate) struct Placed {
    pub(crate) path: PathBuf,
    level: Level,
    /// The files of the finer keys (none at [`Level::Client`]).
    finer: Vec<PathBuf>,
    /// The files of the coarser keys.
    coarser: Vec<PathBuf>,
}

impl<C: Clock> FileStore<C> {
    /// Where `check` is counted now; makes the file when it makes a new key.
    pub(crate) fn place(&self, check: &Check<'_>) -> Result<Placed, StoreError> {
        let own = self.path_for(&check.key);
        let chain = budget::coarser(check.rule, &check.key);
        if chain.is_empty() {
            // A site-wide key is one file, made as before; the controls' own counts (one per
            // client) are made only while there is room.
            let site_wide =
                check.rule.key == KeyKind::Global && check.key == check.rule.key_for("");
            if !site_wide && !exists(&own) && !self.make_room(&own, Level::Network)? {
                return Err(StoreError::unavailable(format!(
                    "the data directory is at its budget (store.max_files {}, store.max_bytes \
                     {}): {} is not counted",
                    self.budget.max_files, self.budget.max_bytes, check.key
                )));
            }
            return Ok(Placed {
                path: own,
                level: Level::Client,
                finer: Vec::new(),
                coarser: Vec::new(),
            });
        }
        let mut levels = vec![(Level::Client, own)];
        levels.extend(chain.iter().map(|(l, k)| (*l, self.path_for(k))));
        let at = |i: usize| Placed {
            path: levels[i].1.clone(),
            level: levels[i].0,
            finer: levels[..i].iter().map(|(_, p)| p.clone()).collect(),
            coarser: levels[i + 1..].iter().map(|(_, p)| p.clone()).collect(),
        };
        if exists(&levels[0].1) {
            return Ok(at(0));
        }
        let found = levels.iter().position(|(_, p)| exists(p));
        let last = levels.len() - 1;
        for (i, (level, path)) in levels.iter().enumerate() {
            let made = found != Some(i)
                && !levels[i + 1..]
                    .iter()
                    .any(|(_, p)| self.counts_now(p).unwrap_or(true))
                && self.make_room(path, *level)?;
            if found == Some(i) || made || i == last {
                if i > 0 {
                    self.folding_started();
                }
                return Ok(at(i));
            }
        }
        Ok(at(last))
    }

    /// Whether a placement still holds once its file is locked and read: no finer key was made
    /// meanwhile, and a key just made (empty) has no coarser key counting. A key just made
    /// that does not hold is removed (still locked), so that nobody counts by it.
    pub(crate) fn still_placed(&self, placed: &Placed, locked: &Locked, loaded: &Loaded) -> bool {
        if placed.level > Level::Client && placed.finer.iter().any(|p| exists(p)) {
            return false;
        }
        if loaded.counter.is_none()
            && placed
                .coarser
                .iter()
                .any(|p| self.try_counts_now(p).unwrap_or(true))
        {
            let _ = fs::remove_file(&locked.path);
            return false;
        }
        true
    }

    /// The file of the finest of `check`'s keys that has one, making nothing.
    pub(crate) fn counted_at(&self, check: &Check<'_>) -> Option<PathBuf> {
        std::iter::once(self.path_for(&check.key))
            .chain(
                budget::coarser(check.rule, &check.key)
                    .iter()
                    .map(|(_, k)| self.path_for(k)),
            )
            .find(|p| exists(p))
    }

    /// Whether the counter at `path` counts a window still running (None: it could not be
    /// read). Waits for the file's lock: called holding no other.
    fn counts_now(&self, path: &Path) -> Option<bool> {
        match self.read_path(path) {
            Ok(counter) => Some(self.running(counter)),
            Err(_) => None,
        }
    }

    /// As [`Self::counts_now`] without waiting (called holding other locks): a busy file is
    /// being counted by, so None.
    fn try_counts_now(&self, path: &Path) -> Option<bool> {
        let file = match crate::store::file::safe_open::open_ro(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Some(false),
            Err(_) => return None,
        };
        file.try_lock_shared().ok()?;
        let locked = Locked {
            path: path.to_owned(),
            file,
        };
        let loaded = self.decode(&locked).ok()?.ok()?;
        Some(self.running(loaded.counter))
    }

    fn running(&self, counter: Option<Counter>) -> bool {
        counter.is_some_and(|c| c.end_ms() > self.clock.now_ms())
    }

    /// Makes the file at `path` if its shard holds fewer entries than `level` may fill, as one
    /// step under the shard's lock; false when it is full.
    fn make_room(&self, path: &Path, level: Level) -> Result<bool, StoreError> {
        let Some(cap) = self.budget.shard_cap(level) else {
            return Ok(true);
        };
        let shard = path.parent().unwrap_or(&self.dir);
        self.ensure_dir()?;
        if fs::symlink_metadata(shard).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(StoreError::unavailable(format!(
                "{} is a symbolic link, which the store never follows: remove it (the store \
                 makes a directory there)",
                shard.display()
            )));
        }
        match fs::DirBuilder::new().mode(0o700).create(shard) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_error("create directory", shard, &e)),
        }
        let dir = File::open(shard).map_err(|e| io_error("open", shard, &e))?;
        lock::lock_within(&dir, shard, Lock::Exclusive, self.lock_timeout)?;
        let entries = fs::read_dir(shard)
            .map_err(|e| io_error("list", shard, &e))?
            .count() as u64;
        if entries >= cap {
            return Ok(false);
        }
        open_rw(path).map_err(|e| io_error("create", path, &e))?;
        Ok(true)
        // Dropping `dir` releases the shard's lock.
    }

    /// Logs, once until a sweep finds room again, that new clients are now counted by their
    /// network: the first process to make the mark says so.
    fn folding_started(&self) {
        let mark = self.dir.join(defaults::FILE_STORE_FOLDING_MARK);
        if fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&mark)
            .is_ok()
        {
            StderrLog::masking(Vec::new()).line(
                LogLevel::Warn,
                &format!(
                    "the data directory reached its budget (store.max_files {}, store.max_bytes \
                     {}): clients that have no count yet are now counted by their network (IPv4 \
                     /{}, IPv6 /{}), or all together, with the same limits; clients counted \
                     before keep their counts. Logged once, until a sweep finds room again: \
                     raise the budget, or see who floods the site with `resolve stats`",
                    self.budget.max_files,
                    self.budget.max_bytes,
                    defaults::FILE_STORE_FOLD_V4_PREFIX,
                    defaults::FILE_STORE_FOLD_V6_PREFIX
                ),
            );
        }
    }

    /// After a complete sweep that left `files` counter files: once they are below the share
    /// for clients' own keys again, the next folding is logged again.
    pub(crate) fn room_again(&self, files: u64) {
        let share = self.budget.key_files() * defaults::FILE_STORE_CLIENT_SHARE_PERCENT / 100;
        if files < share {
            let _ = fs::remove_file(self.dir.join(defaults::FILE_STORE_FOLDING_MARK));
        }
    }
}

fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}
