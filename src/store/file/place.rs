//! Where a check is counted under the data directory's budget ([`super::budget`]): the
//! client's own key when it has a file, or when one may be made (the shard directories hold,
//! all together, fewer entries than the clients' share: one read of the counts
//! ([`super::room`]), then, under the shard's lock (flock on its directory), the shard listed,
//! its count written and the file made as one step); else its folded key, a bucket shared with
//! the new clients of a few other networks, in the directory of folded keys.
//!
//! Exactness: a client is counted by one key at a time. Its own key, once made, counts it
//! until its window ends; a request placed at a bucket checks again once the files are locked
//! ([`FileStore::still_placed`]) that the client's own key was not made meanwhile, and starts
//! over if it was. A client counted by a bucket that gets its own key once there is room again
//! starts a count of its own (the bound in [`super::budget`]).

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::core::clock::Clock;
use crate::core::decision::Decision;
use crate::core::rule::KeyKind;
use crate::store::file::FileStore;
use crate::store::file::budget::{self, Room};
use crate::store::file::lock::{self, Lock};
use crate::store::file::room;
use crate::store::file::safe_open::{io_error, open_existing, open_rw};
use crate::store::{Check, StoreError};
use crate::support::defaults;
use crate::support::log::{Level as LogLevel, Log};

/// Where one check is counted.
pub(crate) struct Placed {
    pub(crate) path: PathBuf,
    /// The client's own key's file, when the check is counted by a folded key instead.
    own: Option<PathBuf>,
    /// The file at `path`, when placing it found it by opening it: its lock takes this open.
    pub(crate) opened: Option<File>,
}

impl Placed {
    /// Whether the check is counted by a key other clients share (a folded key).
    pub(crate) fn shared(&self) -> bool {
        self.own.is_some()
    }
}

impl<C: Clock> FileStore<C> {
    /// Where `check` is counted now; makes the file when it makes a client's own key.
    pub(crate) fn place(&self, check: &Check<'_>) -> Result<Placed, StoreError> {
        let own = self.path_for(&check.key);
        let mine = |path: PathBuf| Placed {
            path,
            own: None,
            opened: None,
        };
        // Whether the key has its file, found by opening it (the usual case: one open, which
        // its lock then uses, instead of a look-up and an open).
        match open_existing(self.short(&own)) {
            Ok(opened) => {
                return Ok(Placed {
                    opened: Some(opened),
                    ..mine(own)
                });
            }
            // Something else there (a link, a FIFO, a directory, a file it may not open):
            // placed there, as before, and refused by its lock with what it is.
            Err(e) if e.kind() != io::ErrorKind::NotFound && exists(&own) => {
                return Ok(mine(own));
            }
            Err(_) => {}
        }
        let Some(bucket) = budget::folded(check.rule, &check.key, self.budget.buckets()) else {
            // A site-wide key is one file, made as before, and so is a sign-in budget's (a
            // key is kept only for an attempt counted, and the site's budget bounds those);
            // the controls' own counts (one per client) are made while there is room for them.
            let site_wide =
                check.rule.key == KeyKind::Global && check.key == check.rule.key_for("");
            let always = site_wide || budget::never_folded(check.rule);
            if !always && !self.make_room(&own, Room::Kept)? {
                return Err(StoreError::unavailable(format!(
                    "the data directory is at its budget (store.max_files {}, store.max_bytes \
                     {}): {} is not counted",
                    self.budget.max_files, self.budget.max_bytes, check.key
                )));
            }
            return Ok(mine(own));
        };
        if self.make_room(&own, Room::Client)? {
            return Ok(mine(own));
        }
        self.folding_started();
        Ok(Placed {
            path: self.fold_path(&bucket),
            own: Some(own),
            opened: None,
        })
    }

    /// Marks the statuses of a decision whose checks were placed at folded keys as shared.
    pub(crate) fn mark_shared(&self, decision: &mut Decision, placed: &[&Placed]) {
        let statuses = match decision {
            Decision::Admit { statuses, .. } | Decision::Refuse { statuses, .. } => statuses,
        };
        for (status, p) in statuses.iter_mut().zip(placed) {
            status.shared = p.shared();
        }
    }

    /// Whether a placement still holds once its file is locked: a check placed at a folded key
    /// finds that the client's own key was not made meanwhile.
    pub(crate) fn still_placed(&self, placed: &Placed) -> bool {
        placed.own.as_deref().is_none_or(|own| !exists(own))
    }

    /// The file of `check`'s own key, or else of its folded key, that exists; making nothing.
    pub(crate) fn counted_at(&self, check: &Check<'_>) -> Option<PathBuf> {
        let own = self.path_for(&check.key);
        if exists(&own) {
            return Some(own);
        }
        budget::folded(check.rule, &check.key, self.budget.buckets())
            .map(|key| self.fold_path(&key))
            .filter(|p| exists(p))
    }

    /// The file of a folded key.
    pub(crate) fn fold_path(&self, key: &str) -> PathBuf {
        let own = self.path_for(key);
        let name = own.file_name().unwrap_or_default();
        self.dir.join(defaults::FILE_STORE_FOLD_DIR).join(name)
    }

    pub(crate) fn room(&self) -> room::Room<'_> {
        room::Room {
            dir: &self.dir,
            timeout: self.lock_timeout,
        }
    }

    /// Makes the file at `path` if the shard directories hold fewer entries than `room` may
    /// fill: true when it is made (or was made meanwhile), false when there is no room. A
    /// directory found full costs one read of the counts; otherwise the shard is listed and
    /// its count written under its lock, and the file made in the same step.
    fn make_room(&self, path: &Path, room: Room) -> Result<bool, StoreError> {
        let cap = self.budget.cap(room);
        self.ensure_dir()?;
        if self.room().total()? >= cap {
            return Ok(false);
        }
        let shard = path.parent().unwrap_or(&self.dir);
        let _locked = self.lock_shard(shard)?;
        if exists(path) {
            return Ok(true);
        }
        let entries = count_entries(shard)?;
        let name = shard_name(shard);
        self.room().set(&name, entries, |counts| {
            if counts.total() >= cap {
                return Ok(false);
            }
            open_rw(path).map_err(|e| io_error("create", path, &e))?;
            Ok(true)
        })
        // Dropping `_locked` releases the shard's lock.
    }

    /// Creates the shard directory `shard` if it is missing and takes its lock, held until
    /// the directory returned is dropped.
    fn lock_shard(&self, shard: &Path) -> Result<File, StoreError> {
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
        Ok(dir)
    }

    /// After a sweep went through the shard directory `shard`: its count written again, as
    /// listed under its lock.
    pub(crate) fn recount(&self, shard: &Path) -> Result<(), StoreError> {
        let _locked = self.lock_shard(shard)?;
        let entries = count_entries(shard)?;
        self.room()
            .set(&shard_name(shard), entries, |_| Ok(false))?;
        Ok(())
    }

    /// Logs, and keeps as an `ACTION NEEDED` note, once until a sweep finds room again, that
    /// new clients are now counted by folded keys: the first process to make the mark says so.
    fn folding_started(&self) {
        let mark = self.dir.join(defaults::FILE_STORE_FOLDING_MARK);
        if fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&mark)
            .is_ok()
        {
            let text = format!(
                "ACTION NEEDED: the data directory reached its budget (store.max_files {}, \
                 store.max_bytes {}): clients that have no count yet are now counted together \
                 with a few other networks' new clients, by one of {} shared counters per rule \
                 with the same limits (chosen by their IPv4 /{} or IPv6 /{}); clients counted \
                 before keep their counts. Raise store.max_files and store.max_bytes, or block \
                 the networks that made the most new keys (`resolve stats` lists them); the \
                 dashboard clears the shared counters",
                self.budget.max_files,
                self.budget.max_bytes,
                self.budget.buckets(),
                defaults::FILE_STORE_FOLD_V4_PREFIX,
                defaults::FILE_STORE_FOLD_V6_PREFIX
            );
            self.log.line(LogLevel::Warn, &text);
            let _ = self.journal().note(&crate::core::journal::Note {
                at_ms: self.clock.now_ms(),
                text,
            });
        }
    }

    /// After a complete sweep: once the shard directories hold fewer entries than the
    /// clients' share again, the next folding is logged again.
    pub(crate) fn room_again(&self) {
        if self
            .room()
            .total()
            .is_ok_and(|total| total < self.budget.cap(Room::Client))
        {
            let _ = fs::remove_file(self.dir.join(defaults::FILE_STORE_FOLDING_MARK));
        }
    }
}

/// The entries a directory holds.
fn count_entries(dir: &Path) -> Result<u64, StoreError> {
    Ok(fs::read_dir(dir)
        .map_err(|e| io_error("list", dir, &e))?
        .count() as u64)
}

fn shard_name(shard: &Path) -> String {
    shard
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}
