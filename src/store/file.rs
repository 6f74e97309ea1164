//! The default store: one small file per key under the data directory, read and rewritten
//! under an exclusive flock. Works on any host.
//!
//! Layout: `DIR/ab/abcdef...` where the name is the SHA-256 of the key in hex and `ab` its first
//! two digits (256 shard directories keep each small and let a sweep take one at a time). No
//! input reaches a file name, so nothing can escape the directory or collide.
//!
//! Locking: a request locks the files of its client's own keys in name order, reads them and,
//! when they refuse, is refused without opening the others (the site-wide spend and rate
//! keys). Otherwise it locks the others in name order too, keeping its first locks, decides
//! with every file, writes the changed ones and unlocks by closing. No deadlock: a key's group
//! follows from its rule (the configuration gives the client's rules and the site's distinct
//! keys), so every request takes its locks in one order, the client's group before the
//! site's and names within each; a refund holds one file's lock at a time, a sweep only tries.
//! The counter is written before the request is admitted, so a process killed at any instant
//! can only over-count. A sweep removes a file only while holding its lock; a request that
//! opened the file before that notices (its inode has no name left) and opens it again.
//!
//! Budget: the directory holds at most `store.max_files` files and `store.max_bytes` bytes
//! (`budget`): a key that has a file is counted exactly; past the clients' share a new client
//! is counted by a folded key, one of many buckets chosen by its network, with the same limit
//! (`place`); the shard directories' entries are counted in one small file (`room`).
//!
//! Hostile or broken contents of the directory: a symbolic link is never followed (the last
//! component is opened with `O_NOFOLLOW`, and a shard directory that is a link is refused), a
//! FIFO or device is never read or waited on (every open is non-blocking and anything but a
//! regular file is refused or, by a sweep, passed over), and a lock held by a process that never
//! lets go is waited for at most `store.lock_timeout_ms`. Each of these is a store failure,
//! answered by `store.on_error` and logged.

pub mod budget;
mod folded;
mod group;
mod journal;
mod journal_record;
pub(crate) mod lock;
pub mod made;
mod place;
pub mod record;
mod room;
pub(crate) mod safe_open;
mod sweep;

use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::core::clock::Clock;
use crate::core::decision::Decision;
use crate::core::journal as usage;
use crate::core::key::Reserved;
use crate::core::limiter::{self, Counter, State};
use crate::core::rule::{Algorithm, Rule};
use crate::store::cache::Cache;
use crate::store::counters::Counters;
use crate::store::journal::Journal as JournalRole;
use crate::store::notes::Notes;
use crate::store::{Check, StoreError};
use crate::support::log::StderrLog;
use budget::Budget;
use journal::Journal;
use lock::{Lock, Locked};
use record::{Loaded, SLOT};
use safe_open::{io_error, modified_secs, move_aside};

/// Suffix of a cached answer, beside the counters in the shard directories.
const CACHE_SUFFIX: &str = ".cache";
/// First line of a cached answer: this word, then when it expires (ms since 1970).
const CACHE_MAGIC: &str = "resolve-cache1";

/// Bytes of a key's file name: the SHA-256 of the key in lowercase hex.
const NAME_LEN: usize = 64;

/// The file name of the block list's key ([`Reserved::BlockList`]), which every request looks
/// for: its hash written out once here rather than computed each time (a test checks it).
const BLOCK_LIST_NAME: &[u8; NAME_LEN] =
    b"f429c8f6f49abdc39207756a045ef040533a04f9ff9dcf32f1f02d5060995cd6";

/// The block list's entry, below the store's directory (`ab/NAME.cache`, as
/// [`FileStore`] names a cached key's file).
pub fn block_list_entry() -> Vec<u8> {
    let mut path = Vec::with_capacity(3 + NAME_LEN + CACHE_SUFFIX.len());
    path.extend_from_slice(&BLOCK_LIST_NAME[..2]);
    path.push(b'/');
    path.extend_from_slice(BLOCK_LIST_NAME);
    path.extend_from_slice(CACHE_SUFFIX.as_bytes());
    path
}

/// The name of `key`'s file: its SHA-256 in lowercase hex.
fn file_name(key: &str) -> [u8; NAME_LEN] {
    if key == Reserved::BlockList.key() {
        return *BLOCK_LIST_NAME;
    }
    let mut name = [0; NAME_LEN];
    crate::support::hex::lower_into(&Sha256::digest(key.as_bytes()), &mut name);
    name
}

/// Counters in files under one directory.
#[derive(Debug)]
pub struct FileStore<C: Clock> {
    dir: PathBuf,
    /// Whether the process's working directory is `dir` ([`FileStore::working_in_dir`]): its
    /// files are then opened by their paths below it.
    below: bool,
    clock: C,
    grace_ms: u64,
    lock_timeout: Duration,
    budget: Budget,
    /// Where the store's own lines go (a folding begun, the directory made again).
    log: StderrLog,
}

/// Placements tried for one decision before giving up (each is undone only by a race between
/// a client's own key and its network's being made at once).
const PLACE_TRIES: usize = 8;

impl<C: Clock> FileStore<C> {
    /// A store in `dir`, which must exist. Keys whose windows ended more than `grace` ago are
    /// removed by sweeps.
    pub fn new(dir: impl Into<PathBuf>, clock: C, grace: Duration) -> Self {
        FileStore {
            dir: dir.into(),
            below: false,
            clock,
            grace_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
            lock_timeout: Duration::from_millis(
                crate::support::defaults::FILE_LOCK_TIMEOUT_MS.into(),
            ),
            budget: Budget::default(),
            log: StderrLog::default(),
        }
    }

    /// The data directory's budget, files and bytes.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// The log its own lines go to, with the context the process names.
    pub fn with_log(mut self, log: StderrLog) -> Self {
        self.log = log;
        self
    }

    /// The longest a request waits for another process's lock on one of its files.
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// For a process that answers one request and exits (CGI): makes the data directory its
    /// working directory, so that the store opens its files by their paths below it (a shard
    /// and a name) instead of walking every directory from the root at each open, lookup and
    /// check of a request (three quarters of the names a refusal's opens walked on a cPanel
    /// account, about 9 µs of a refused start: docs/performance.md). Only a directory given
    /// whole (a relative one would mean something else once there), and only when it is there
    /// to go to: otherwise, and in long-lived processes, files are opened by their whole paths.
    /// Messages name files by their whole paths either way, and a directory or file to make
    /// is made by its whole path.
    pub fn working_in_dir(mut self) -> Self {
        self.below = self.dir.is_absolute() && std::env::set_current_dir(&self.dir).is_ok();
        self
    }

    /// `path` (one of the store's files) as it is opened: see [`lock::below_dir`].
    fn short<'p>(&self, path: &'p Path) -> &'p Path {
        lock::below_dir(&self.dir, path, self.below)
    }

    fn journal(&self) -> Journal<'_> {
        Journal {
            data: &self.dir,
            below: self.below,
            timeout: self.lock_timeout,
            grace_ms: self.grace_ms,
            log: &self.log,
        }
    }

    /// Bytes the usage journal's files take.
    pub fn journal_bytes(&self) -> Result<u64, StoreError> {
        self.journal().bytes()
    }

    /// The file that holds `key`.
    pub fn path_for(&self, key: &str) -> PathBuf {
        self.path_named(&file_name(key), "")
    }

    /// `DIR/ab/NAME` followed by `suffix`, where `ab` is the name's first two digits: built in
    /// one buffer (joined piece by piece it took a buffer, and a copy, a piece).
    fn path_named(&self, name: &[u8; NAME_LEN], suffix: &str) -> PathBuf {
        let dir = self.dir.as_os_str().as_bytes();
        let mut path = Vec::with_capacity(dir.len() + NAME_LEN + 4 + suffix.len());
        path.extend_from_slice(dir);
        // As `Path::join` puts them: a separator after a directory that does not end with one.
        if !dir.is_empty() && !dir.ends_with(b"/") {
            path.push(b'/');
        }
        path.extend_from_slice(&name[..2]);
        path.push(b'/');
        path.extend_from_slice(name);
        path.extend_from_slice(suffix.as_bytes());
        PathBuf::from(OsString::from_vec(path))
    }

    /// A cache file's value, if it holds one that has not expired.
    fn live_entry(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let expires = cache_expiry(bytes)?;
        if expires <= self.clock.now_ms() {
            return None;
        }
        let start = bytes.iter().position(|&b| b == b'\n')? + 1;
        Some(bytes[start..].to_vec())
    }

    /// Replaces a locked cache file's content.
    fn write_entry(&self, locked: &Locked, value: &[u8], ttl: Duration) -> Result<(), StoreError> {
        let expires = self
            .clock
            .now_ms()
            .saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        let mut content = format!("{CACHE_MAGIC} {expires}\n").into_bytes();
        content.extend_from_slice(value);
        // A crash between these two leaves an empty file: read as no entry, never as a wrong one.
        locked
            .file
            .set_len(0)
            .and_then(|()| locked.file.write_all_at(&content, 0))
            .map_err(|e| io_error("write", &locked.path, &e))
    }

    /// The file that holds the cached answer under `key`.
    fn cache_path(&self, key: &str) -> PathBuf {
        self.path_named(&file_name(key), CACHE_SUFFIX)
    }

    /// The counter stored for `key`, read under the lock without changing anything.
    pub fn read(&self, key: &str) -> Result<Option<Counter>, StoreError> {
        self.read_path(&self.path_for(key))
    }

    /// The counter in the file at `path`, read under its shared lock.
    fn read_path(&self, path: &Path) -> Result<Option<Counter>, StoreError> {
        let path = path.to_owned();
        let Some(file) = self.open_shared(&path)? else {
            return Ok(None);
        };
        let locked = Locked {
            path,
            file,
            len_when_locked: None,
        };
        // Under a shared lock a damaged file is only reported: moving it is for a writer.
        match self.decode(&locked)? {
            Ok(loaded) => Ok(loaded.counter),
            Err(e) => Err(StoreError::corrupt(format!(
                "{} is damaged ({e:?})",
                locked.path.display()
            ))),
        }
    }

    /// Opens `path` for reading and takes its shared lock: writers hold the exclusive one, so
    /// a reader never sees half a write. `None` when there is no such file.
    fn open_shared(&self, path: &Path) -> Result<Option<File>, StoreError> {
        lock::open_shared((path, self.short(path)), self.lock_timeout)
    }

    /// Creates the data directory (mode 700) if it is missing: a store that cannot count
    /// would let every request through under the `allow` policy.
    fn ensure_dir(&self) -> Result<(), StoreError> {
        lock::ensure_data_dir(&self.dir, &self.log)
    }

    /// Opens (creating if needed) and locks the file at `path`.
    fn lock(&self, path: &Path) -> Result<Locked, StoreError> {
        self.lock_opened(path, None)
    }

    /// [`Self::lock`] of a file that may be open already (`opened`).
    fn lock_opened(&self, path: &Path, opened: Option<File>) -> Result<Locked, StoreError> {
        lock::lock_opened(
            (&self.dir, self.below),
            path,
            opened,
            Lock::Exclusive,
            self.lock_timeout,
            &self.log,
        )
    }

    /// Reads and decodes a locked file's record, changing nothing.
    fn decode(&self, locked: &Locked) -> Result<Result<Loaded, record::RecordError>, StoreError> {
        let mut buf = [0u8; 2 * SLOT + 1];
        // A file longer than two slots is damaged: reading one byte more tells.
        let want = locked.len_when_locked.map_or(buf.len(), |l| {
            usize::try_from(l).map_or(buf.len(), |l| l.min(buf.len()))
        });
        let mut len = 0;
        while len < want {
            match locked.file.read_at(&mut buf[len..], len as u64) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error("read", &locked.path, &e)),
            }
        }
        Ok(record::decode(&buf[..len]))
    }

    /// Reads a file under its exclusive lock; a damaged one is moved aside, so that its key
    /// starts afresh.
    fn load(&self, locked: &Locked) -> Result<Loaded, StoreError> {
        self.decode(locked)?.map_err(|e| {
            let aside = move_aside(&locked.path);
            StoreError::corrupt(format!(
                "{} is damaged ({e:?}); moved it to {} and started a new count for its key",
                locked.path.display(),
                aside.display()
            ))
        })
    }

    fn store(&self, locked: &Locked, loaded: &Loaded, counter: &Counter) -> Result<(), StoreError> {
        let slot = record::encode(record::next_seq(loaded.seq), counter);
        let offset = (loaded.next_slot * SLOT) as u64;
        locked
            .file
            .write_all_at(&slot, offset)
            .map_err(|e| io_error("write", &locked.path, &e))
    }
}

/// A whole (small) file, read from the start.
fn read_all(file: &File, path: &Path) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match file.read_at(&mut buf, out.len() as u64) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error("read", path, &e)),
        }
        if out.len() > crate::support::defaults::PROVIDER_MAX_ANSWER_BYTES as usize {
            return Err(StoreError::corrupt(format!(
                "{} is too large for a cache entry",
                path.display()
            )));
        }
    }
}

fn modified_before(file: &File, ms: u64) -> bool {
    file.metadata()
        .is_ok_and(|m| modified_secs(&m).saturating_mul(1000) < ms)
}

/// When a cached answer expires, from its first line.
fn cache_expiry(bytes: &[u8]) -> Option<u64> {
    let line = bytes.split(|&b| b == b'\n').next()?;
    let text = std::str::from_utf8(line).ok()?;
    let (magic, expires) = text.split_once(' ')?;
    (magic == CACHE_MAGIC)
        .then(|| expires.parse().ok())
        .flatten()
}

/// Refuses sliding rules, which the file store does not keep.
fn fixed_only(checks: &[Check<'_>]) -> Result<(), StoreError> {
    match checks.iter().find(|c| c.rule.algorithm != Algorithm::Fixed) {
        Some(c) => Err(StoreError::unavailable(format!(
            "rule {} is a sliding window, which the file store does not keep: use the mysql \
             or redis store, or \"algorithm\": \"fixed\"",
            c.rule.name
        ))),
        None => Ok(()),
    }
}

fn is_key_file_name(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn is_shard_name(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl<C: Clock> FileStore<C> {
    /// Changes each check's counter by `change` (None: left as it is), under its file's lock.
    /// One file at a time: each key changes on its own, and a lock held while waiting for
    /// another could meet a decision taking them in its own order. A file two checks share
    /// (a folded key) changes once.
    fn change_each(
        &self,
        checks: &[Check<'_>],
        change: impl Fn(&Rule, Counter) -> Option<Counter>,
    ) -> Result<(), StoreError> {
        let mut paths: Vec<(PathBuf, &Rule)> = checks
            .iter()
            .filter_map(|c| Some((self.counted_at(c)?, c.rule)))
            .collect();
        paths.sort_by(|a, b| a.0.cmp(&b.0));
        paths.dedup_by(|a, b| a.0 == b.0);
        for (path, rule) in &paths {
            let locked = self.lock(path)?;
            let loaded = self.load(&locked)?;
            if let Some(c) = loaded.counter.and_then(|c| change(rule, c)) {
                self.store(&locked, &loaded, &c)?;
            }
        }
        Ok(())
    }
}

impl<C: Clock> Counters for FileStore<C> {
    fn decide_sized(
        &self,
        checks: &[Check<'_>],
        own: usize,
        size: Option<u64>,
    ) -> Result<Decision, StoreError> {
        fixed_only(checks)?;
        let own = own.min(checks.len());
        let rules: Vec<&Rule> = checks.iter().map(|c| c.rule).collect();
        for _ in 0..PLACE_TRIES {
            // The client's own files first: a client over its own limit is refused from them
            // alone, the site's files neither opened nor locked.
            let Some(mine) = self.lock_group(&checks[..own], &[])? else {
                continue; // dropping the group releases its locks
            };
            if own < checks.len() {
                let states = mine.states();
                let now = self.clock.now_ms();
                if let Some(refused) = limiter::own_refusal_sized(&rules[..own], &states, size, now)
                {
                    return self.finish(refused, &[mine]);
                }
            }
            // Then the others, their locks taken while the client's are held.
            let Some(rest) = self.lock_group(&checks[own..], &mine.placed)? else {
                continue;
            };
            let states: Vec<State> = mine.states().into_iter().chain(rest.states()).collect();
            let now = self.clock.now_ms();
            let outcome = limiter::decide_sized(&rules, &states, rules.len(), size, now);
            return self.finish(outcome, &[mine, rest]);
            // Dropping the groups closes the files, which releases the locks.
        }
        Err(StoreError::unavailable(
            "a client's own key and its network's were made at once too often to tell which \
             counts it; the next request tries again",
        ))
    }

    fn refund(&self, checks: &[Check<'_>], at_ms: u64) -> Result<(), StoreError> {
        self.change_each(checks, |rule, c| limiter::refunded(rule, c, at_ms))
    }

    fn charge(&self, checks: &[Check<'_>], at_ms: u64, size: u64) -> Result<(), StoreError> {
        let bytes: Vec<&Rule> = checks.iter().map(|c| c.rule).collect();
        if !limiter::charges_any(&bytes) {
            return Ok(());
        }
        self.change_each(checks, |rule, c| limiter::charged(rule, c, at_ms, size))
    }

    fn used(&self, checks: &[Check<'_>]) -> Result<Vec<u32>, StoreError> {
        fixed_only(checks)?;
        let now = self.clock.now_ms();
        checks
            .iter()
            .map(|c| {
                let counter = match self.counted_at(c) {
                    Some(path) => self.read_path(&path)?,
                    None => None,
                };
                Ok(limiter::used(c.rule, &State::Fixed(counter), now))
            })
            .collect()
    }
}

impl<C: Clock> Cache for FileStore<C> {
    fn cache_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.cache_path(key);
        let Some(file) = self.open_shared(&path)? else {
            return Ok(None);
        };
        Ok(self.live_entry(&read_all(&file, &path)?))
    }

    fn cache_claim(&self, key: &str, value: &[u8], ttl: Duration) -> Result<bool, StoreError> {
        let locked = self.lock(&self.cache_path(key))?;
        if self
            .live_entry(&read_all(&locked.file, &locked.path)?)
            .is_some()
        {
            return Ok(false);
        }
        self.write_entry(&locked, value, ttl)?;
        Ok(true)
    }

    fn cache_release(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        let path = self.cache_path(key);
        if !path.exists() {
            return Ok(());
        }
        let locked = self.lock(&path)?;
        if self
            .live_entry(&read_all(&locked.file, &locked.path)?)
            .as_deref()
            == Some(value)
        {
            // Removed while locked: whoever waits for the lock notices and starts afresh.
            let _ = fs::remove_file(&locked.path);
        }
        Ok(())
    }

    fn cache_put(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError> {
        let locked = self.lock(&self.cache_path(key))?;
        self.write_entry(&locked, value, ttl)
    }
}

impl<C: Clock> JournalRole for FileStore<C> {
    fn journal_add(&self, entry: &usage::Entry) -> Result<(), StoreError> {
        self.journal().add(entry, self.clock.now_ms())
    }

    fn journal_rows(&self, from_hour: u32, to_hour: u32) -> Result<Vec<usage::Row>, StoreError> {
        self.journal().rows(from_hour, to_hour)
    }
}

impl<C: Clock> Notes for FileStore<C> {
    fn journal_note(&self, note: &usage::Note) -> Result<(), StoreError> {
        self.journal().note(note)
    }

    fn journal_notes(&self) -> Result<Vec<usage::Note>, StoreError> {
        let mut notes = self.journal().notes()?;
        // The counts restarted with the directory: said among the notes while it is recent.
        if let Some(note) = made::note(&self.dir, self.clock.now_ms()) {
            let at = notes.partition_point(|n| n.at_ms > note.at_ms);
            notes.insert(at, note);
        }
        Ok(notes)
    }
}

#[cfg(test)]
mod tests;
